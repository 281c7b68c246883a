package io.rdmaplane.rdma.doctor;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.MessageReader;
import io.rdmaplane.rdma.codec.Protocol;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.zip.CRC32C;

/**
 * The peer check, over the SPI only. The serving side ({@code Doctor --serve}) registers a small
 * region filled with a pattern derived from a random seed and answers every DESCRIBE message with
 * the region's address, rkey, length, seed and CRC32C. The checking side connects, asks for the
 * descriptor, READs the whole region {@link #READS} times into a region of its own, compares
 * every byte with the pattern the seed gives, and reports the first READ's time (warm-up
 * included) and the median of the others.
 *
 * <p>Messages, in the shared codec's checksummed form ({@code version:u8 type:u8 fields crc32c:i32}):
 * DESCRIBE has no fields; DESCRIPTOR is {@code provider:string seed:i64} and the region as a
 * remote block {@code address:i64 rkey:i32 length:i32 crc32c:i32}.
 */
final class PeerCheck {
    /** The default port of {@code Doctor --serve}. */
    static final int DEFAULT_PORT = 7471;
    /** Bytes the server exposes and the client READs in one operation. */
    static final int REGION_BYTES = 64 << 10;
    /** The doctor's messages; DESCRIBE asks, DESCRIPTOR answers. */
    enum Message {
        DESCRIBE(0x40),
        DESCRIPTOR(0x41);

        final int wireId;

        Message(int wireId) {
            this.wireId = wireId;
        }
    }

    /** 2: the first on the shared codec (the hand-written messages' magic said 1). */
    static final Protocol<Message> PROTOCOL = Protocol.checksummed("doctor", 2, Message.class, m -> m.wireId);
    /** The longest provider name a descriptor carries. */
    static final int MAX_PROVIDER_BYTES = 64;
    static final int QUEUE_DEPTH = 16;
    /** READs of the region: the first is verified and timed alone, the median of the rest is the latency. */
    static final int READS = 10;
    static final String CHECK = "peer";
    static final String KEYS = "keys";

    private PeerCheck() {
    }

    /** What the server sent. */
    record Descriptor(long address, int rkey, int length, long seed, int crc, String provider) {
        ByteBuffer encode() {
            return PROTOCOL.write(Message.DESCRIPTOR).string("provider", provider, MAX_PROVIDER_BYTES).i64(seed)
                    .remoteBlock(address, rkey, length, crc).finish();
        }

        /**
         * @throws MalformedMessageException naming the field when the message is not a descriptor
         *                                   (or the region is not 1..{@value Channel#MAX_READ_BYTES} bytes)
         */
        static Descriptor decode(ByteBuffer message) throws MalformedMessageException {
            MessageReader<Message> r = PROTOCOL.read(message, Message.DESCRIPTOR);
            String provider = r.string("provider", MAX_PROVIDER_BYTES);
            long seed = r.i64("seed");
            Descriptor d = r.remoteBlock("region", Channel.MAX_READ_BYTES,
                    (address, rkey, length, crc) -> new Descriptor(address, rkey, length, seed, crc, provider));
            r.end();
            return d;
        }
    }

    static ByteBuffer request() {
        return PROTOCOL.write(Message.DESCRIBE).finish();
    }

    /**
     * Checks that {@code message} is a DESCRIBE.
     *
     * @throws MalformedMessageException naming the field when it is not
     */
    static void checkRequest(ByteBuffer message) throws MalformedMessageException {
        PROTOCOL.read(message, Message.DESCRIBE).end();
    }

    /** Fills {@code length} bytes (a multiple of 8) of {@code b} from 0 with the seed's pattern. */
    static void fill(ByteBuffer b, int length, long seed) {
        for (int i = 0; i < length; i += 8) {
            b.putLong(i, mix(seed + i));
        }
    }

    /** The offset of the first byte that differs from the seed's pattern, or -1. */
    static int firstMismatch(ByteBuffer b, int length, long seed) {
        for (int i = 0; i < length; i += 8) {
            long expected = mix(seed + i);
            long actual = b.getLong(i);
            if (actual != expected) {
                for (int j = 0; j < 8; j++) {
                    if (((actual ^ expected) >>> (56 - 8 * j) & 0xff) != 0) {
                        return i + j;
                    }
                }
            }
        }
        return -1;
    }

    /** SplitMix64's finalizer. */
    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    static int crc(ByteBuffer b, int length) {
        CRC32C c = new CRC32C();
        c.update(b.duplicate().position(0).limit(length));
        return (int) c.getValue();
    }

    /** The serving side: a listening node with one exposed region. Closing stops it. */
    static final class Server implements AutoCloseable {
        private final Node node;
        private final Descriptor descriptor;
        private final AtomicLong served = new AtomicLong();

        private Server(Node node, Descriptor descriptor) {
            this.node = node;
            this.descriptor = descriptor;
        }

        /**
         * Starts serving on {@code bind} through {@code provider}; {@code onServed} hears of every
         * descriptor sent (on the transport thread: it must not block).
         */
        static Server start(TransportProvider provider, NodeOptions options, Consumer<String> onServed)
                throws TransportException {
            Node node = provider.createNode(options);
            try {
                ByteBuffer memory = ByteBuffer.allocateDirect(REGION_BYTES);
                long seed = ThreadLocalRandom.current().nextLong();
                fill(memory, REGION_BYTES, seed);
                MemoryRegion region = node.register(memory, Set.of(Access.REMOTE_READ));
                Descriptor descriptor = new Descriptor(region.address(), region.rkey(), REGION_BYTES, seed,
                        crc(memory, REGION_BYTES), node.providerName());
                Server server = new Server(node, descriptor);
                node.listen(channel -> new ChannelHandler() {
                    @Override
                    public void onMessage(Channel ch, ByteBuffer message) {
                        try {
                            checkRequest(message);
                        } catch (MalformedMessageException e) {
                            onServed.accept("ignored a message that is not a doctor request from " + ch.remoteAddress() + " ("
                                    + e.getMessage() + ")");
                            return;
                        }
                        ch.send(descriptor.encode());
                        server.served.incrementAndGet();
                        onServed.accept("descriptor sent to " + ch.remoteAddress());
                    }
                });
                return server;
            } catch (TransportException | RuntimeException e) {
                node.close();
                throw e;
            }
        }

        InetSocketAddress address() {
            return node.localAddress();
        }

        Descriptor descriptor() {
            return descriptor;
        }

        long served() {
            return served.get();
        }

        String provider() {
            return node.providerName();
        }

        @Override
        public void close() {
            node.close();
        }
    }

    /** Connects to a serving doctor, READs its region, verifies it and reports each step into {@code report}. */
    static void check(Report report, TransportProvider provider, NodeOptions localOptions, InetSocketAddress peer,
                      Duration timeout) {
        try {
            steps(report, provider, localOptions, peer, timeout);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            report.fail(CHECK, "interrupted", "run the check again", Doctor.EXIT_PEER);
        }
    }

    private static void steps(Report report, TransportProvider provider, NodeOptions localOptions, InetSocketAddress peer,
                              Duration timeout) throws InterruptedException {
        String via = peer.getHostString() + ":" + peer.getPort() + " via " + provider.name();
        String serveHint = "run `Doctor --serve --port " + peer.getPort() + "` on " + peer.getHostString()
                + " (same build and provider), and let " + provider.name() + " traffic through to port " + peer.getPort();
        long timeoutMs = timeout.toMillis();
        Node node;
        try {
            node = provider.createNode(localOptions);
        } catch (TransportException | RuntimeException e) {
            report.fail(CHECK, "cannot start a local " + provider.name() + " node on " + localOptions.bindAddress() + ": "
                    + oneLine(e), "pass --bind with a local address of the network that reaches the peer", Doctor.EXIT_PEER);
            return;
        }
        try (node) {
            CompletableFuture<Descriptor> answer = new CompletableFuture<>();
            ChannelHandler handler = new ChannelHandler() {
                @Override
                public void onMessage(Channel channel, ByteBuffer message) {
                    try {
                        answer.complete(Descriptor.decode(message));
                    } catch (MalformedMessageException e) {
                        answer.completeExceptionally(new IllegalStateException("the peer answered with something that is not a"
                                + " doctor descriptor (" + message.remaining() + " bytes; " + e.getMessage() + ")"));
                    }
                }

                @Override
                public void onClosed(Channel channel, TransportException cause) {
                    answer.completeExceptionally(cause != null ? cause
                            : new IllegalStateException("the channel closed before the descriptor arrived"));
                }
            };
            long t0 = System.nanoTime();
            Channel channel;
            try {
                channel = node.connect(peer, QUEUE_DEPTH, handler).get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException | TimeoutException | RuntimeException e) {
                report.fail(CHECK, "cannot connect to " + via + ": " + oneLine(cause(e)), serveHint, Doctor.EXIT_PEER);
                return;
            }
            long connected = System.nanoTime();
            report.ok(CHECK, "connected to " + via + " in " + ms(connected - t0));
            // Whether a key this node hands out READs for its peer only (a memory window) or for any channel (the MR's rkey).
            report.info(KEYS, "READ keys granted here are bound " + node.keyBinding());

            Descriptor d;
            long asked = System.nanoTime();
            try {
                channel.send(request()).get(timeoutMs, TimeUnit.MILLISECONDS);
                d = answer.get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException | TimeoutException | RuntimeException e) {
                report.fail(CHECK, "no descriptor from " + via + ": " + oneLine(cause(e)),
                        "the listener on " + peer.getHostString() + ":" + peer.getPort() + " is not `Doctor --serve`: " + serveHint,
                        Doctor.EXIT_PEER);
                return;
            }
            long described = System.nanoTime();
            report.ok(CHECK, String.format(Locale.ROOT, "descriptor in %s: %d B at 0x%x rkey 0x%x, served by %s",
                    ms(described - asked), d.length(), d.address(), d.rkey(), d.provider()));

            ByteBuffer target = ByteBuffer.allocateDirect(d.length());
            MemoryRegion local;
            try {
                local = node.register(target, Set.of(Access.LOCAL_WRITE));
            } catch (TransportException | RuntimeException e) {
                report.fail(CHECK, "cannot register " + d.length() + " B locally: " + oneLine(e),
                        "raise memlock (`ulimit -l unlimited`) and see the memlock line", Doctor.EXIT_PEER);
                return;
            }
            // The first READ is timed alone (it pays for warm-up); the median of the following ones is the latency.
            long[] nanos = new long[READS];
            for (int i = 0; i < READS; i++) {
                target.put(0, (byte) ~target.get(0));
                long r0 = System.nanoTime();
                try {
                    channel.read(d.address(), d.rkey(), d.length(), local, 0).get(timeoutMs, TimeUnit.MILLISECONDS);
                } catch (ExecutionException | TimeoutException | RuntimeException e) {
                    Throwable c = cause(e);
                    report.fail(CHECK, "READ " + (i + 1) + "/" + READS + " of " + d.length() + " B from " + via + " failed: " + oneLine(c),
                            readFix(c), Doctor.EXIT_PEER);
                    return;
                }
                nanos[i] = System.nanoTime() - r0;
                int mismatch = firstMismatch(target, d.length(), d.seed());
                int crc = crc(target, d.length());
                if (mismatch >= 0 || crc != d.crc()) {
                    report.fail(CHECK, String.format(Locale.ROOT,
                                    "READ %d/%d of %d B from %s returned wrong bytes: first difference at offset %d,"
                                            + " CRC32C 0x%08x, expected 0x%08x",
                                    i + 1, READS, d.length(), via, mismatch, crc, d.crc()),
                            "data corrupted between the nodes: check the NICs' firmware and error counters, and the switch",
                            Doctor.EXIT_PEER);
                    return;
                }
            }
            long[] rest = Arrays.copyOfRange(nanos, 1, READS);
            Arrays.sort(rest);
            long median = rest[rest.length / 2];
            report.ok(CHECK, String.format(Locale.ROOT,
                    "READ %d B: first in %s, median of the next %d %s (%.1f MB/s), every byte verified, CRC32C 0x%08x",
                    d.length(), ms(nanos[0]), rest.length, ms(median), d.length() / (median / 1e9) / 1e6, d.crc()));
        }
    }

    static String readFix(Throwable c) {
        if (c instanceof TransportException t) {
            return switch (t.status()) {
                case REMOTE_ACCESS_ERROR -> "the peer refused the rkey: it restarted between the descriptor and the READ; run the check again";
                case RETRY_EXCEEDED -> "no answer to the READ: packets are lost between the nodes (same MTU on both sides and the"
                        + " switch, PFC/ECN for RoCE, UDP port 4791 open for RoCE v2)";
                case FLUSHED -> "the connection broke during the READ: see the peer's output and try again";
                default -> "the READ ended " + t.status() + ": see the peer's output and try again";
            };
        }
        if (c instanceof TimeoutException) {
            return "no answer to the READ within the timeout: packets are lost between the nodes (MTU, PFC/ECN, UDP 4791 for RoCE v2)";
        }
        return "see the error above and the peer's output";
    }

    private static Throwable cause(Throwable e) {
        Throwable c = e;
        while ((c instanceof ExecutionException || c instanceof java.util.concurrent.CompletionException) && c.getCause() != null) {
            c = c.getCause();
        }
        if (c instanceof TimeoutException) {
            return new TimeoutException("no answer within the timeout");
        }
        return c;
    }

    static String oneLine(Throwable e) {
        String m = e.getMessage();
        String text = m == null || m.isBlank() ? e.getClass().getSimpleName() : m;
        return text.replaceAll("\\s*\\R\\s*", " ");
    }

    static String ms(long nanos) {
        return String.format(Locale.ROOT, "%.2f ms", nanos / 1e6);
    }
}

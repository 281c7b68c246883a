package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.verbs.VerbsProvider;
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * One host's process of {@link VerbsRingTest}, started in a host's namespace of the VM's cluster
 * (run.sh --hosts N): the policy layer over the verbs provider, with a plain TCP path beside it
 * standing for the Netty/TCP fallback. Its stdout is its report, one line per fact.
 * <ul>
 * <li>{@code serve BIND BLOCKS SIZE SEED [RDMA_PORT TCP_PORT PAD]}: a verbs node and a policy server on BIND
 * expose BLOCKS blocks of SIZE bytes of {@code Random(SEED)}, starting PAD bytes into their registered memory;
 * a request answers with their descriptors (granted to the asking peer); a TCP socket on BIND serves any
 * block by its index (the fallback path). The ports are ephemeral unless given (a successor takes its
 * predecessor's). Prints {@code READY <rdma port> <tcp port>} and serves until stdin closes.
 * <li>{@code read BIND PEER RDMA_PORT TCP_PORT BLOCKS SIZE SEED}: a policy client on BIND; each
 * stdin line {@code round NAME} READs every block once through the policy layer, and fetches over
 * TCP (retrying until it gets through) each block whose READ fell back; {@code round NAME COUNT} the
 * first COUNT blocks only; {@code round NAME COUNT cached} READs at once with the last round's
 * descriptors, asking nothing first (for a round that starts with the link already down). It prints
 * {@code PROGRESS NAME <delivered> <rdma|tcp>} per block, {@code STATE <class> <from>-><to>} per channel
 * state change, and at the end {@code ROUND NAME key=value ...}:
 * lost (blocks never delivered), duplicated (deliveries beyond one per block), wrong (blocks whose
 * bytes differ from the seed's), same (every byte of the landing region equals the seed's),
 * fallbacks, reconnects, reissued work and completion errors by status (the policy metrics' deltas),
 * the longest stall between two deliveries, and the threads (all, and the project's: named {@code rdma-*})
 * and file descriptors after the round; {@code probe NAME COUNT} READs the last round's first COUNT
 * descriptors again, one at a time and without fallback, and prints {@code PROBE NAME blocks=N <outcome>=N ...}
 * (see {@link #probe}); {@code settle FDS THREADS} waits (up to 60 s) until the open files and
 * the project's threads are back at those counts and prints {@code SETTLED fds=.. rdmaThreads=.. waitedMs=..}.
 * </ul>
 * Any failure prints {@code ERROR <message>} and exits 2.
 */
public final class RingPeer {
    private static final Duration ROUND_DEADLINE = Duration.ofSeconds(360);
    private static final Duration SETTLE_DEADLINE = Duration.ofSeconds(60);

    private RingPeer() {
    }

    public static void main(String[] args) {
        try {
            switch (args[0]) {
                case "serve" -> serve(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), Long.parseLong(args[4]),
                        args.length > 5 ? Integer.parseInt(args[5]) : 0, args.length > 6 ? Integer.parseInt(args[6]) : 0,
                        args.length > 7 ? Integer.parseInt(args[7]) : 0);
                case "read" -> read(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                        Integer.parseInt(args[6]), Long.parseLong(args[7]));
                default -> throw new IllegalArgumentException("unknown mode '" + args[0] + "' (serve or read)");
            }
        } catch (Throwable e) {
            System.out.println("ERROR " + e);
            System.out.flush();
            System.exit(2);
        }
        System.exit(0);
    }

    /**
     * The guest runs 25-50x slower than a host: operations get 10 s, suspicion 2 s without progress; a
     * channel reconnects up to 5 times (backoff 100 ms doubling to 1 s, jitter 0-100 ms) before callers
     * fall back. Every block's CRC32C is verified by the policy layer.
     */
    static PolicyOptions policy() {
        return PolicyOptions.defaults().withReconnect(Duration.ofMillis(100), Duration.ofMillis(100), Duration.ofSeconds(1), 5)
                .withTimeouts(Duration.ofSeconds(2), Duration.ofSeconds(20), Duration.ofSeconds(5)).withChecksumSampleRate(1.0);
    }

    private static NodeOptions node(String bind, int port) {
        return new NodeOptions(new InetSocketAddress(bind, port), 64 << 10, Duration.ofSeconds(10), 256);
    }

    static byte[] content(long seed, int bytes) {
        byte[] content = new byte[bytes];
        new Random(seed).nextBytes(content);
        return content;
    }

    private static int crc(ByteBuffer bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes.duplicate());
        return (int) crc.getValue();
    }

    private static void say(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    // ---------------------------------------------------------------- serving

    private static void serve(String bind, int blocks, int size, long seed, int rdmaPort, int tcpPort, int pad) throws Exception {
        byte[] bytes = content(seed, blocks * size);
        try (Node node = VerbsProvider.INSTANCE.createNode(node(bind, rdmaPort));
             ServerSocket fallback = new ServerSocket(tcpPort, 16, InetAddress.getByName(bind))) {
            // pad: the blocks start that far into the region, so a successor's layout is not its predecessor's
            ByteBuffer memory = ByteBuffer.allocateDirect(pad + bytes.length).position(pad).put(bytes).flip();
            MemoryRegion region = node.register(memory);
            long first = region.address() + pad;
            PolicyServer[] self = new PolicyServer[1];
            PolicyServer server = new PolicyServer(node, policy(), new PolicyMetrics(), (peer, request) -> {
                // The peer process's key for the region, kept across its sessions (a cached round READs with it).
                int key = self[0].grants(peer.instance()).grant(region, Long.MAX_VALUE);
                ByteBuffer table = ByteBuffer.allocate(4 + blocks * 20).putInt(blocks);
                for (int i = 0; i < blocks; i++) {
                    table.putLong(first + (long) i * size).putInt(key).putInt(size)
                            .putInt(crc(ByteBuffer.wrap(bytes, i * size, size)));
                }
                return table.flip();
            });
            self[0] = server;
            server.start();
            server.markReady();
            Thread tcp = new Thread(() -> serveTcp(fallback, bytes, size), "ring-peer-tcp");
            tcp.setDaemon(true);
            tcp.start();
            say("READY " + node.localAddress().getPort() + " " + fallback.getLocalPort());
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            while (in.readLine() != null) {
                // serves until the test closes stdin
            }
            server.close();
        }
    }

    /** The fallback path: each request is a block index, each answer that block's bytes. */
    private static void serveTcp(ServerSocket listener, byte[] bytes, int size) {
        while (!listener.isClosed()) {
            try {
                Socket s = listener.accept();
                Thread t = new Thread(() -> {
                    try (s; DataInputStream in = new DataInputStream(s.getInputStream());
                         DataOutputStream out = new DataOutputStream(s.getOutputStream())) {
                        while (true) {
                            int index = in.readInt();
                            if (index < 0 || (long) (index + 1) * size > bytes.length) {
                                return; // not a block of ours: the connection ends
                            }
                            out.write(bytes, index * size, size);
                            out.flush();
                        }
                    } catch (IOException endOfClient) {
                        // the reader went away or gave up on this connection
                    }
                }, "ring-peer-tcp-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    // ---------------------------------------------------------------- reading

    private static void read(String bind, String peerHost, int rdmaPort, int tcpPort, int blocks, int size, long seed) throws Exception {
        byte[] expected = content(seed, blocks * size);
        InetSocketAddress peer = new InetSocketAddress(peerHost, rdmaPort);
        InetSocketAddress tcp = new InetSocketAddress(peerHost, tcpPort);
        PolicyMetrics metrics = new PolicyMetrics();
        List<String> transitions = new CopyOnWriteArrayList<>();
        ExecutorService fetchers = Executors.newFixedThreadPool(2, r -> {
            Thread t = new Thread(r, "ring-peer-fallback");
            t.setDaemon(true);
            return t;
        });
        try (Node node = VerbsProvider.INSTANCE.createNode(node(bind, 0));
             PolicyClient client = new PolicyClient(node, policy(), metrics, new PolicyClient.Listener() {
                 @Override
                 public void stateChanged(InetSocketAddress p, TrafficClass trafficClass, ChannelState from, ChannelState to) {
                     transitions.add(trafficClass + ":" + from + "->" + to);
                     say("STATE " + trafficClass + " " + from + "->" + to);
                 }
             })) {
            MemoryRegion landing = node.register(ByteBuffer.allocateDirect(blocks * size), EnumSet.of(Access.LOCAL_WRITE));
            say("READY");
            @SuppressWarnings("unchecked")
            List<RemoteBlock>[] table = new List[1]; // the last round's descriptors, for a round that must not ask first
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                String[] words = line.trim().split("\\s+");
                if (words.length >= 3 && words[0].equals("round")) {
                    transitions.clear();
                    int count = Math.min(blocks, Integer.parseInt(words[2]));
                    boolean cached = words.length == 4 && words[3].equals("cached") && table[0] != null;
                    say(round(words[1], client, peer, tcp, landing, count, size, expected, metrics, transitions, fetchers,
                            cached ? table[0] : null, table));
                } else if (words.length == 3 && words[0].equals("probe") && table[0] != null) {
                    say(probe(words[1], client, peer, landing, Math.min(blocks, Integer.parseInt(words[2])), size, table[0]));
                } else if (words.length == 3 && words[0].equals("settle")) {
                    say(settle(Long.parseLong(words[1]), Long.parseLong(words[2])));
                }
            }
        } finally {
            fetchers.shutdownNow();
        }
    }

    private static String round(String name, PolicyClient client, InetSocketAddress peer, InetSocketAddress tcp, MemoryRegion landing,
            int blocks, int size, byte[] expected, PolicyMetrics metrics, List<String> transitions, ExecutorService fetchers,
            List<RemoteBlock> known, List<RemoteBlock>[] lastTable) throws Exception {
        Map<String, Long> before = counters(metrics);
        long started = System.nanoTime();
        ByteBuffer zero = landing.buffer().duplicate();
        while (zero.hasRemaining()) {
            zero.put((byte) 0);
        }
        // A connection that failed in the last round is rebuilt after one reconnect cap: ask until it answers.
        List<RemoteBlock> table = known;
        long deadline = started + ROUND_DEADLINE.toNanos();
        while (table == null) {
            try {
                table = decode(client.peer(peer).request(ByteBuffer.wrap("blocks".getBytes(StandardCharsets.US_ASCII)))
                        .get(60, TimeUnit.SECONDS));
            } catch (Exception e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(500); // paces the retries of a peer still failed from the last round; not a synchronisation
            }
        }
        lastTable[0] = table;
        AtomicIntegerArray delivered = new AtomicIntegerArray(blocks);
        AtomicIntegerArray wrong = new AtomicIntegerArray(blocks);
        AtomicLong viaTcp = new AtomicLong();
        AtomicLong lastDelivery = new AtomicLong(System.nanoTime());
        AtomicLong longestStall = new AtomicLong();
        AtomicLong count = new AtomicLong();
        List<CompletableFuture<Void>> settled = new ArrayList<>();
        PeerConnection connection = client.peer(peer);
        for (int i = 0; i < blocks; i++) {
            int index = i;
            RemoteBlock block = table.get(i);
            CompletableFuture<Void> one = new CompletableFuture<>();
            settled.add(one);
            connection.read(block, landing, i * size).whenComplete((ok, error) -> {
                if (error == null) {
                    deliver(name, index, "rdma", landing, size, expected, delivered, wrong, lastDelivery, longestStall, count);
                    one.complete(null);
                } else {
                    fetchers.execute(() -> {
                        try {
                            fetchTcp(tcp, index, size, landing, deadline);
                            viaTcp.incrementAndGet();
                            deliver(name, index, "tcp", landing, size, expected, delivered, wrong, lastDelivery, longestStall, count);
                        } catch (Exception e) {
                            say("FETCH-FAILED " + name + " " + index + " " + e);
                        }
                        one.complete(null);
                    });
                }
            });
        }
        try {
            CompletableFuture.allOf(settled.toArray(CompletableFuture[]::new)).get(ROUND_DEADLINE.toSeconds(), TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            say("ROUND-TIMEOUT " + name);
        }
        long lost = 0;
        long duplicated = 0;
        long wrongBlocks = 0;
        for (int i = 0; i < blocks; i++) {
            lost += delivered.get(i) == 0 ? 1 : 0;
            duplicated += Math.max(0, delivered.get(i) - 1);
            wrongBlocks += wrong.get(i);
        }
        byte[] got = new byte[blocks * size];
        landing.buffer().duplicate().get(got);
        boolean same = java.util.Arrays.equals(got, java.util.Arrays.copyOf(expected, blocks * size));
        Map<String, Long> moved = delta(before, counters(metrics));
        StringBuilder b = new StringBuilder("ROUND ").append(name).append(" blocks=").append(blocks).append(" lost=").append(lost)
                .append(" duplicated=").append(duplicated).append(" wrong=").append(wrongBlocks).append(" same=").append(same)
                .append(" tcp=").append(viaTcp.get()).append(" ms=").append((System.nanoTime() - started) / 1_000_000)
                .append(" stallMs=").append(longestStall.get() / 1_000_000)
                .append(" threads=").append(java.lang.management.ManagementFactory.getThreadMXBean().getThreadCount())
                .append(" rdmaThreads=").append(rdmaThreads())
                .append(" fds=").append(openFds());
        moved.forEach((k, v) -> b.append(' ').append(k).append('=').append(v));
        b.append(" transitions=").append(String.join(",", transitions));
        return b.toString();
    }

    private static void deliver(String name, int index, String via, MemoryRegion landing, int size, byte[] expected,
            AtomicIntegerArray delivered, AtomicIntegerArray wrong, AtomicLong lastDelivery, AtomicLong longestStall, AtomicLong count) {
        ByteBuffer slice = landing.buffer().duplicate().position(index * size).limit((index + 1) * size);
        if (crc(slice) != crc(ByteBuffer.wrap(expected, index * size, size))) {
            wrong.incrementAndGet(index);
        }
        delivered.incrementAndGet(index);
        long now = System.nanoTime();
        long last = lastDelivery.getAndSet(now);
        longestStall.accumulateAndGet(now - last, Math::max);
        say("PROGRESS " + name + " " + count.incrementAndGet() + " " + via);
    }

    /** The fallback fetch: over plain TCP, retried until it gets through (the link may still be down) or the deadline. */
    private static void fetchTcp(InetSocketAddress tcp, int index, int size, MemoryRegion landing, long deadline) throws Exception {
        while (true) {
            try (Socket s = new Socket()) {
                s.connect(tcp, 2000);
                s.setSoTimeout(10_000);
                new DataOutputStream(s.getOutputStream()).writeInt(index);
                byte[] bytes = new byte[size];
                new DataInputStream(s.getInputStream()).readFully(bytes);
                landing.buffer().duplicate().position(index * size).put(bytes);
                return;
            } catch (IOException e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(200); // paces the retries while the link is down; not a synchronisation
            }
        }
    }

    private static List<RemoteBlock> decode(ByteBuffer table) {
        int n = table.getInt();
        List<RemoteBlock> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(new RemoteBlock(table.getLong(), table.getInt(), table.getInt(), table.getInt()));
        }
        return out;
    }

    /** The policy counters a round reports: reconnects, fallbacks, re-issued work, completion errors, checksum failures. */
    private static Map<String, Long> counters(PolicyMetrics metrics) {
        Map<String, Long> out = new TreeMap<>();
        metrics.registry().getCounters().forEach((k, c) -> {
            if (k.equals("rdma.reconnects") || k.equals("rdma.fallbacks") || k.equals("rdma.reissued") || k.startsWith("rdma.completion.")
                    || k.equals("rdma.checksum.failures")) {
                out.put(k, c.getCount());
            }
        });
        return out;
    }

    private static Map<String, Long> delta(Map<String, Long> before, Map<String, Long> after) {
        Map<String, Long> moved = new TreeMap<>();
        after.forEach((k, v) -> moved.put(k, v - before.getOrDefault(k, 0L)));
        moved.putIfAbsent("rdma.reconnects", 0L);
        moved.putIfAbsent("rdma.fallbacks", 0L);
        return moved;
    }

    /**
     * READs the first {@code count} blocks of an earlier round's descriptors, one at a time and with no fallback,
     * once the peer answers requests again (e.g. a successor at the same address and port), and reports how each
     * ended: {@code ok} (delivered and intact), {@code checksum} (READ through but not the block's bytes), the
     * transport status that refused it, {@code unavailable} (the peer's channel had failed) or {@code other}.
     */
    private static String probe(String name, PolicyClient client, InetSocketAddress peer, MemoryRegion landing, int count, int size,
            List<RemoteBlock> stale) throws Exception {
        long deadline = System.nanoTime() + ROUND_DEADLINE.toNanos();
        while (true) { // the peer's control channel is up again: its answer itself is not used
            try {
                client.peer(peer).request(ByteBuffer.wrap("blocks".getBytes(StandardCharsets.US_ASCII))).get(60, TimeUnit.SECONDS);
                break;
            } catch (Exception e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(500); // paces the retries while the peer comes back; not a synchronisation
            }
        }
        Map<String, Integer> outcomes = new TreeMap<>();
        List<String> details = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String outcome;
            try {
                client.peer(peer).read(stale.get(i), landing, i * size).get(ROUND_DEADLINE.toSeconds(), TimeUnit.SECONDS);
                outcome = "ok";
            } catch (java.util.concurrent.ExecutionException e) {
                outcome = outcome(e.getCause());
                details.add(i + ":" + e.getCause());
            }
            outcomes.merge(outcome, 1, Integer::sum);
        }
        StringBuilder b = new StringBuilder("PROBE ").append(name).append(" blocks=").append(count);
        outcomes.forEach((k, v) -> b.append(' ').append(k).append('=').append(v));
        return b.append(" details=").append(String.join(" | ", details).replace(' ', '_')).toString();
    }

    private static String outcome(Throwable failure) {
        if (failure instanceof PeerUnavailableException) {
            return "unavailable";
        }
        if (failure instanceof BlockFetchException fetch && fetch.isChecksumMismatch()) {
            return "checksum";
        }
        for (Throwable t = failure; t != null; t = t.getCause()) {
            if (t instanceof TransportException transport) {
                return transport.status().name();
            }
        }
        return "other";
    }

    /**
     * Waits (up to {@link #SETTLE_DEADLINE}) until the open files and the project's threads are back at the given
     * counts: a round ends as soon as its blocks are in, while a channel may still be reconnecting or closing what
     * the fault broke. Reports the counts reached and how long it took; a leak never gets there.
     */
    private static String settle(long fds, long threads) throws InterruptedException {
        long started = System.nanoTime();
        long deadline = started + SETTLE_DEADLINE.toNanos();
        while ((openFds() != fds || rdmaThreads() != threads) && System.nanoTime() < deadline) {
            Thread.sleep(200); // polls the counts against a deadline; not a synchronisation
        }
        return "SETTLED fds=" + openFds() + " rdmaThreads=" + rdmaThreads() + " waitedMs=" + (System.nanoTime() - started) / 1_000_000;
    }

    private static long rdmaThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith("rdma-")).count();
    }

    private static long openFds() {
        try (var fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        } catch (IOException e) {
            return -1;
        }
    }
}

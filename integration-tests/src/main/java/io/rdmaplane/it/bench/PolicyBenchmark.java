package io.rdmaplane.it.bench;

import io.rdmaplane.it.Args;
import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.PolicyServer;
import io.rdmaplane.rdma.policy.ReadGrants;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportProvider;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.CRC32C;

/**
 * The policy layer's two benchmarks, each against a baseline measured in the same run:
 * <ol>
 * <li>control round trip (p50/p99) idle, and while the data channel is saturated with 8 MiB
 *     READs — control messages have their own channel, so bulk data must not hold them up
 *     (goal: p99 under load within 2x of idle);</li>
 * <li>READ throughput with checksum sample rates 0, the default and 1.0 (goal: the default
 *     costs at most 3 % against rate 0).</li>
 * </ol>
 * Arguments (optional): {@code provider=auto rounds=2000 seconds=3 only=latency|checksum}.
 */
public final class PolicyBenchmark {
    private static final int BULK_BLOCK = 8 << 20;
    private static final int THROUGHPUT_BLOCK = 1 << 20;

    public static void main(String[] args) throws Exception {
        TransportProvider provider = Providers.select(Args.get(args, "provider", "auto"));
        int rounds = Integer.parseInt(Args.get(args, "rounds", "2000"));
        double seconds = Double.parseDouble(Args.get(args, "seconds", "3"));
        String only = Args.get(args, "only", "");
        if (!only.equals("checksum")) {
            controlLatency(provider, rounds);
        }
        if (!only.equals("latency")) {
            checksumCost(provider, (long) (seconds * 1e9));
        }
    }

    private static void controlLatency(TransportProvider provider, int rounds) throws Exception {
        try (Pair pair = new Pair(provider, PolicyOptions.defaults().withChecksumSampleRate(0))) {
            RemoteBlock block = pair.block(BULK_BLOCK);
            MemoryRegion landing = pair.landing(BULK_BLOCK);
            PeerConnection peer = pair.peer();
            roundTrips(peer, rounds / 4); // warm-up
            long[] idle = Samples.percentiles(roundTrips(peer, rounds));

            AtomicBoolean running = new AtomicBoolean(true);
            AtomicLong bulkBytes = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            int streams = 16; // 128 MiB queued: more than the per-peer budget, so the data channel stays full
            CountDownLatch stopped = new CountDownLatch(streams);
            for (int i = 0; i < streams; i++) {
                bulk(peer, block, landing, running, bulkBytes, failure, stopped);
            }
            Thread.sleep(500);
            long start = System.nanoTime();
            long bytesBefore = bulkBytes.get();
            long[] loaded = Samples.percentiles(roundTrips(peer, rounds));
            double bulkMiBs = (bulkBytes.get() - bytesBefore) / (1024.0 * 1024.0) / ((System.nanoTime() - start) / 1e9);
            running.set(false);
            stopped.await(60, TimeUnit.SECONDS);
            if (failure.get() != null) {
                throw new IllegalStateException("bulk READ failed", failure.get());
            }
            System.out.printf("control round trip over %s, %d requests each:%n", provider.name(), rounds);
            System.out.printf("  idle:                      p50 %7.1f us   p99 %7.1f us%n", idle[0] / 1e3, idle[1] / 1e3);
            System.out.printf("  data channel saturated:    p50 %7.1f us   p99 %7.1f us   (bulk READs meanwhile: %.0f MiB/s)%n",
                    loaded[0] / 1e3, loaded[1] / 1e3, bulkMiBs);
            System.out.printf("  ratio loaded/idle:         p50 %7.2fx      p99 %7.2fx      (goal: p99 <= 2x)%n",
                    (double) loaded[0] / idle[0], (double) loaded[1] / idle[1]);
        }
    }

    static void bulk(PeerConnection peer, RemoteBlock block, MemoryRegion landing, AtomicBoolean running,
                             AtomicLong bytes, AtomicReference<Throwable> failure, CountDownLatch stopped) {
        peer.read(block, landing, 0).whenComplete((ok, error) -> {
            if (error != null) {
                failure.compareAndSet(null, error);
            } else {
                bytes.addAndGet(block.length());
            }
            if (running.get() && error == null) {
                bulk(peer, block, landing, running, bytes, failure, stopped);
            } else {
                stopped.countDown();
            }
        });
    }

    /**
     * Nanoseconds of each of {@code rounds} control round trips, each sent from the completion of
     * the one before, so the figure is the channel's and not the waking of an application thread.
     */
    static long[] roundTrips(PeerConnection peer, int rounds) throws Exception {
        return roundTrips(peer, rounds, () -> false);
    }

    /** As {@link #roundTrips(PeerConnection, int)}, ending early (at least one round) once {@code enough} says so. */
    static long[] roundTrips(PeerConnection peer, int rounds, java.util.function.BooleanSupplier enough) throws Exception {
        long[] samples = new long[rounds];
        CompletableFuture<Integer> done = new CompletableFuture<>();
        chain(peer, samples, 0, enough, done);
        int taken = done.get(rounds * 30L, TimeUnit.SECONDS);
        return Arrays.copyOf(samples, taken);
    }

    private static void chain(PeerConnection peer, long[] samples, int i, java.util.function.BooleanSupplier enough,
                              CompletableFuture<Integer> done) {
        long t0 = System.nanoTime();
        peer.request(ByteBuffer.allocate(64)).whenComplete((answer, error) -> {
            if (error != null) {
                done.completeExceptionally(error);
                return;
            }
            samples[i] = System.nanoTime() - t0;
            if (i + 1 == samples.length || enough.getAsBoolean()) {
                done.complete(i + 1);
            } else {
                chain(peer, samples, i + 1, enough, done);
            }
        });
    }

    private static void checksumCost(TransportProvider provider, long nanos) throws Exception {
        double defaultRate = PolicyOptions.defaults().checksumSampleRate();
        double[] rates = {0, defaultRate, 1.0};
        double[] mibs = new double[rates.length];
        for (int round = 0; round < 3; round++) { // interleaved rounds; the best of each is kept
            for (int i = 0; i < rates.length; i++) {
                mibs[i] = Math.max(mibs[i], throughput(provider, rates[i], round == 0 ? nanos / 3 : nanos));
            }
        }
        System.out.printf("READ throughput over %s, %d KiB blocks, by checksum sample rate (best of 3 interleaved rounds):%n",
                provider.name(), THROUGHPUT_BLOCK >> 10);
        for (int i = 0; i < rates.length; i++) {
            System.out.printf("  sample rate %-7s %8.1f MiB/s   cost vs rate 0: %5.1f %%%s%n", format(rates[i]), mibs[i],
                    100 * (1 - mibs[i] / mibs[0]), rates[i] == defaultRate ? "   (default; goal <= 3 %)" : "");
        }
    }

    private static String format(double rate) {
        return rate == 0 ? "0" : rate == 1 ? "1.0" : "1/" + Math.round(1 / rate);
    }

    private static double throughput(TransportProvider provider, double rate, long nanos) throws Exception {
        try (Pair pair = new Pair(provider, PolicyOptions.defaults().withChecksumSampleRate(rate))) {
            RemoteBlock block = pair.block(THROUGHPUT_BLOCK);
            int outstanding = 32;
            MemoryRegion landing = pair.landing(outstanding * THROUGHPUT_BLOCK);
            PeerConnection peer = pair.peer();
            peer.read(block, landing, 0).get(30, TimeUnit.SECONDS); // connect, and the always-verified first block
            AtomicLong bytes = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(outstanding);
            long start = System.nanoTime();
            long deadline = start + nanos;
            for (int slot = 0; slot < outstanding; slot++) {
                keepReading(peer, block, landing, slot, deadline, bytes, failure, done);
            }
            done.await(nanos / 1_000_000 + 60_000, TimeUnit.MILLISECONDS);
            if (failure.get() != null) {
                throw new IllegalStateException("READ failed", failure.get());
            }
            return bytes.get() / (1024.0 * 1024.0) / ((System.nanoTime() - start) / 1e9);
        }
    }

    private static void keepReading(PeerConnection peer, RemoteBlock block, MemoryRegion landing, int slot, long deadline,
                                    AtomicLong bytes, AtomicReference<Throwable> failure, CountDownLatch done) {
        peer.read(block, landing, slot * THROUGHPUT_BLOCK).whenComplete((ok, error) -> {
            if (error != null) {
                failure.compareAndSet(null, error);
                done.countDown();
            } else {
                bytes.addAndGet(block.length());
                if (System.nanoTime() < deadline) {
                    keepReading(peer, block, landing, slot, deadline, bytes, failure, done);
                } else {
                    done.countDown();
                }
            }
        });
    }

    /**
     * A serving node with a policy server that echoes requests, and a reading node with a policy
     * client, on loopback; {@link #reverse} serves the other way between the same two nodes.
     */
    static final class Pair implements AutoCloseable {
        final Node serverNode;
        final Node clientNode;
        final PolicyServer server;
        final PolicyClient client;
        private final boolean ownsNodes;

        Pair(TransportProvider provider, PolicyOptions options) throws Exception {
            this(provider, options, NodeOptions.loopback(), NodeOptions.loopback());
        }

        Pair(TransportProvider provider, PolicyOptions options, NodeOptions serverOptions, NodeOptions clientOptions)
                throws Exception {
            this(provider.createNode(serverOptions), provider.createNode(clientOptions), options, true);
        }

        private Pair(Node serverNode, Node clientNode, PolicyOptions options, boolean ownsNodes) throws Exception {
            this.serverNode = serverNode;
            this.clientNode = clientNode;
            this.ownsNodes = ownsNodes;
            server = new PolicyServer(serverNode, options, new PolicyMetrics(), (peer, request) -> request).start();
            client = new PolicyClient(clientNode, options, new PolicyMetrics());
            server.markReady();
        }

        /** The client node serving the server node, over the same two nodes; closed with this pair's nodes. */
        Pair reverse(PolicyOptions options) throws Exception {
            return new Pair(clientNode, serverNode, options, false);
        }

        RemoteBlock block(int size) throws Exception {
            ByteBuffer memory = ByteBuffer.allocateDirect(size);
            SplittableRandom random = new SplittableRandom(size);
            while (memory.hasRemaining()) {
                memory.putLong(random.nextLong());
            }
            MemoryRegion region = serverNode.register(memory.flip());
            // Handed out without a request, so granted here, as a server's answer grants it: the key may be one
            // made for this peer (a key domain on verbs), not the region's own rkey, which then READs nothing.
            int rkey = server.grants(client.instance(serverNode.localAddress())).grant(region, Long.MAX_VALUE);
            ReadGrants.takeUnsettled().get(60, TimeUnit.SECONDS); // a bind to a data channel already there
            CRC32C crc = new CRC32C();
            crc.update(region.buffer());
            return new RemoteBlock(region.address(), rkey, size, (int) crc.getValue());
        }

        MemoryRegion landing(int size) throws Exception {
            return clientNode.register(ByteBuffer.allocateDirect(size), EnumSet.of(Access.LOCAL_WRITE));
        }

        PeerConnection peer() {
            return client.peer(serverNode.localAddress());
        }

        @Override
        public void close() {
            client.close();
            server.close();
            if (ownsNodes) {
                clientNode.close();
                serverNode.close();
            }
        }
    }
}

package io.rdmaplane.it.bench;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportProvider;
import java.nio.ByteBuffer;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/** READ load through the SPI between two fresh nodes of any provider: throughput and latency. */
final class ReadLoad {
    private ReadLoad() {
    }

    /** MiB/s of {@code block}-byte READs kept {@code outstanding} deep for {@code nanos}. */
    static double throughput(TransportProvider provider, NodeOptions serverOptions, NodeOptions clientOptions, int block,
                             long nanos, int outstanding) throws Exception {
        try (Node server = provider.createNode(serverOptions);
             Node client = provider.createNode(clientOptions)) {
            server.listen(ch -> new ChannelHandler() { });
            MemoryRegion source = server.register(ByteBuffer.allocateDirect(Math.max(16 << 20, block)));
            MemoryRegion landing = client.register(ByteBuffer.allocateDirect(outstanding * block), EnumSet.of(Access.LOCAL_WRITE));
            Channel channel = client.connect(server.localAddress(), outstanding, new ChannelHandler() { }).get(60, TimeUnit.SECONDS);
            AtomicLong bytes = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(outstanding);
            long start = System.nanoTime();
            long deadline = start + nanos;
            for (int slot = 0; slot < outstanding; slot++) {
                keepReading(channel, source, landing, block, slot, deadline, bytes, failure, done);
            }
            done.await();
            long elapsed = System.nanoTime() - start;
            if (failure.get() != null) {
                throw new IllegalStateException("READ failed during the benchmark", failure.get());
            }
            return bytes.get() / (1024.0 * 1024.0) / (elapsed / 1e9);
        }
    }

    /** One point of a queue-depth sweep: READ latencies (ns), MiB/s, and the CPU each side spent. */
    record Point(long[] latencies, double mibs, long bytes, long clientCpuNanos, long serverCpuNanos) {
    }

    /**
     * {@code size}-byte READs kept {@code depth} deep on {@code channel} for {@code nanos}, each
     * re-posted from the completion of the one before; landing offsets wrap around {@code landing}.
     * CPU is what the threads named after each node spent meanwhile ({@link CpuTime}).
     */
    static Point atDepth(Channel channel, MemoryRegion source, MemoryRegion landing, int size, int depth, long nanos,
                         Node client, Node server) throws Exception {
        int slots = Math.max(1, landing.length() / size);
        int sources = Math.max(1, source.length() / size);
        long[] samples = new long[1 << 20];
        AtomicInteger taken = new AtomicInteger();
        AtomicLong bytes = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(depth);
        long clientCpu = CpuTime.of(client);
        long serverCpu = CpuTime.of(server);
        long start = System.nanoTime();
        long deadline = start + nanos;
        for (int i = 0; i < depth; i++) {
            timedRead(channel, source, landing, size, i, slots, sources, deadline, samples, taken, bytes, failure, done);
        }
        if (!done.await(nanos / 1_000_000 + 120_000, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("READs of " + size + " B at depth " + depth + " did not finish");
        }
        long elapsed = System.nanoTime() - start;
        if (failure.get() != null) {
            throw new IllegalStateException("READ failed during the benchmark", failure.get());
        }
        long[] latencies = java.util.Arrays.copyOf(samples, Math.min(samples.length, taken.get()));
        return new Point(latencies, bytes.get() / (1024.0 * 1024.0) / (elapsed / 1e9), bytes.get(),
                CpuTime.of(client) - clientCpu, CpuTime.of(server) - serverCpu);
    }

    private static void timedRead(Channel channel, MemoryRegion source, MemoryRegion landing, int size, int n, int slots,
                                  int sources, long deadline, long[] samples, AtomicInteger taken, AtomicLong bytes,
                                  AtomicReference<Throwable> failure, CountDownLatch done) {
        long t0 = System.nanoTime();
        long remote = source.address() + (long) (n * 7 % sources) * size;
        channel.read(remote, source.rkey(), size, landing, (n % slots) * size).whenComplete((ok, error) -> {
            if (error != null) {
                failure.compareAndSet(null, error);
                done.countDown();
                return;
            }
            long now = System.nanoTime();
            int i = taken.getAndIncrement();
            if (i < samples.length) {
                samples[i] = now - t0;
            }
            bytes.addAndGet(size);
            if (now < deadline) {
                timedRead(channel, source, landing, size, n + 1, slots, sources, deadline, samples, taken, bytes, failure, done);
            } else {
                done.countDown();
            }
        });
    }

    /**
     * MiB/s of each channel, all loaded at once: {@code block}-byte READs kept {@code depth} deep on
     * every channel for {@code nanos}; channel i READs {@code sources[i]} into {@code landings[i]}.
     */
    static double[] concurrently(List<Channel> channels, List<MemoryRegion> sources, List<MemoryRegion> landings, int block,
                                 int depth, long nanos) throws Exception {
        int n = channels.size();
        AtomicLong[] bytes = new AtomicLong[n];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(n * depth);
        long start = System.nanoTime();
        long deadline = start + nanos;
        for (int c = 0; c < n; c++) {
            bytes[c] = new AtomicLong();
            for (int slot = 0; slot < depth; slot++) {
                keepReading(channels.get(c), sources.get(c), landings.get(c), block, slot, deadline, bytes[c], failure, done);
            }
        }
        if (!done.await(nanos / 1_000_000 + 120_000, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("concurrent READs did not finish");
        }
        long elapsed = System.nanoTime() - start;
        if (failure.get() != null) {
            throw new IllegalStateException("READ failed during the benchmark", failure.get());
        }
        double[] mibs = new double[n];
        for (int c = 0; c < n; c++) {
            mibs[c] = bytes[c].get() / (1024.0 * 1024.0) / (elapsed / 1e9);
        }
        return mibs;
    }

    /** Each slot re-posts from its own completion until the deadline; remote offsets walk the source. */
    private static void keepReading(Channel channel, MemoryRegion source, MemoryRegion landing, int block, int slot,
                                    long deadline, AtomicLong bytes, AtomicReference<Throwable> failure, CountDownLatch done) {
        long remote = source.address() + (long) (slot * 7 % (source.length() / block)) * block;
        channel.read(remote, source.rkey(), block, landing, slot * block).whenComplete((ok, error) -> {
            if (error != null) {
                failure.compareAndSet(null, error);
                done.countDown();
            } else {
                bytes.addAndGet(block);
                if (System.nanoTime() < deadline) {
                    keepReading(channel, source, landing, block, (slot + 1) % (landing.length() / block), deadline, bytes,
                            failure, done);
                } else {
                    done.countDown();
                }
            }
        });
    }

    /**
     * p50 and p99 nanoseconds of one {@code size}-byte READ at a time, each posted from the
     * completion of the one before (as perftest posts from its polling loop), so the figure is
     * the transport's and not the waking of an application thread.
     */
    static long[] latency(TransportProvider provider, NodeOptions serverOptions, NodeOptions clientOptions, int size,
                          int rounds) throws Exception {
        return latencyRun(provider, serverOptions, clientOptions, size, rounds).percentiles();
    }

    /**
     * Percentiles of one latency run, the CPU both nodes' threads (and a waiting thread) spent during
     * it, its wall time, and the busiest threads of the process meanwhile ({@link CpuTime#busiest}).
     */
    record LatencyRun(long[] percentiles, long cpuNanos, int rounds, long wallNanos, String busiest) {
    }

    static LatencyRun latencyRun(TransportProvider provider, NodeOptions serverOptions, NodeOptions clientOptions, int size,
                                 int rounds) throws Exception {
        try (Node server = provider.createNode(serverOptions);
             Node client = provider.createNode(clientOptions)) {
            server.listen(ch -> new ChannelHandler() { });
            MemoryRegion source = server.register(ByteBuffer.allocateDirect(Math.max(4096, size)));
            MemoryRegion landing = client.register(ByteBuffer.allocateDirect(Math.max(4096, size)), EnumSet.of(Access.LOCAL_WRITE));
            Channel channel = client.connect(server.localAddress(), 4, new ChannelHandler() { }).get(60, TimeUnit.SECONDS);
            long[] samples = new long[rounds];
            CompletableFuture<Void> done = new CompletableFuture<>();
            java.util.Map<Thread, Long> byThread = CpuTime.byThread();
            long cpu0 = CpuTime.of(client) + CpuTime.of(server);
            long start = System.nanoTime();
            chain(channel, source, landing, size, samples, 0, done);
            done.get(rounds * 60L, TimeUnit.SECONDS);
            long wall = System.nanoTime() - start;
            long cpu = CpuTime.of(client) + CpuTime.of(server) - cpu0;
            return new LatencyRun(Samples.percentiles(samples), cpu, rounds, wall, CpuTime.busiest(byThread, rounds, 5));
        }
    }

    /**
     * {@code rounds} {@code size}-byte READs one after another, each posted and waited for
     * ({@code get()}) on this thread, as ib_read_lat posts and polls on one thread, after
     * {@code warmup} unmeasured ones. CPU: both nodes' threads and this one.
     */
    static LatencyRun waitedLatencyRun(TransportProvider provider, NodeOptions serverOptions, NodeOptions clientOptions,
                                       int size, int warmup, int rounds) throws Exception {
        try (Node server = provider.createNode(serverOptions);
             Node client = provider.createNode(clientOptions)) {
            server.listen(ch -> new ChannelHandler() { });
            MemoryRegion source = server.register(ByteBuffer.allocateDirect(Math.max(4096, size)));
            MemoryRegion landing = client.register(ByteBuffer.allocateDirect(Math.max(4096, size)), EnumSet.of(Access.LOCAL_WRITE));
            Channel channel = client.connect(server.localAddress(), 4, new ChannelHandler() { }).get(60, TimeUnit.SECONDS);
            for (int i = 0; i < warmup; i++) {
                channel.read(source.address(), source.rkey(), size, landing, 0).get(60, TimeUnit.SECONDS);
            }
            java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
            long[] samples = new long[rounds];
            java.util.Map<Thread, Long> byThread = CpuTime.byThread();
            long cpu0 = CpuTime.of(client) + CpuTime.of(server) + threads.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            for (int i = 0; i < rounds; i++) {
                long t0 = System.nanoTime();
                channel.read(source.address(), source.rkey(), size, landing, 0).get(60, TimeUnit.SECONDS);
                samples[i] = System.nanoTime() - t0;
            }
            long wall = System.nanoTime() - start;
            long cpu = CpuTime.of(client) + CpuTime.of(server) + threads.getCurrentThreadCpuTime() - cpu0;
            return new LatencyRun(Samples.percentiles(samples), cpu, rounds, wall, CpuTime.busiest(byThread, rounds, 5));
        }
    }

    private static void chain(Channel channel, MemoryRegion source, MemoryRegion landing, int size, long[] samples, int i,
                              CompletableFuture<Void> done) {
        long t0 = System.nanoTime();
        channel.read(source.address(), source.rkey(), size, landing, 0).whenComplete((ok, error) -> {
            if (error != null) {
                done.completeExceptionally(error);
                return;
            }
            samples[i] = System.nanoTime() - t0;
            if (i + 1 == samples.length) {
                done.complete(null);
            } else {
                chain(channel, source, landing, size, samples, i + 1, done);
            }
        });
    }
}

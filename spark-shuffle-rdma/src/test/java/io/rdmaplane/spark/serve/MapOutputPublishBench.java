package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.format.ArrowBlock;
import io.rdmaplane.rdma.memory.PoolOptions;
import io.rdmaplane.rdma.memory.RegisteredBuffer;
import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.spark.DirectMemory;
import io.rdmaplane.spark.ShuffleFixture;
import io.rdmaplane.spark.ShuffleMetrics;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

/**
 * Publish cost of a map output, the two memory designs side by side, on the provider {@code auto}
 * picks (a command, not a test; it asserts nothing):
 * <ul>
 * <li>{@code read}: the floor, reading the partitions from the (warm) data file into direct memory;</li>
 * <li>{@code region}: {@link MapOutputStore#publish}, one REMOTE_READ region per map output, framed in place;</li>
 * <li>{@code pool}: each segment framed into a slice of a {@link RegisteredMemoryPool} (via a scratch
 *     buffer), segments over 8 MiB in registrations of their own; what the store would do with a pool.
 *     Its registered bytes are counted generously: the size class of the exact framed length.</li>
 * </ul>
 * Prints MiB/s of payload and registered bytes per payload byte for three shapes of map output.
 * Run: {@code mvn -B -q -pl spark-shuffle-rdma -am -Ppublish-bench process-test-classes [-Dbench.args="256"]}
 * (argument: MiB of payload published per shape and design).
 */
public final class MapOutputPublishBench {
    private MapOutputPublishBench() {
    }

    public static void main(String[] args) throws Exception {
        long budget = (args.length > 0 ? Long.parseLong(args[0]) : 256) << 20;
        TransportProvider provider = Providers.select(Providers.AUTO);
        Path dir = Files.createTempDirectory("publish-bench");
        System.out.printf(Locale.ROOT, "provider %s; %d MiB of payload per shape and design; JVM %s%n", provider.name(),
                budget >> 20, System.getProperty("java.version"));
        System.out.printf(Locale.ROOT, "MiB/s of payload published; fill = map outputs kept (fresh memory), reuse = each"
                + " removed before the next%n");
        System.out.printf(Locale.ROOT, "%-36s %8s %8s %8s %8s %8s   %s%n", "map output shape", "read", "region", "pool",
                "region", "pool", "registered/payload");
        System.out.printf(Locale.ROOT, "%-36s %8s %8s %8s %8s %8s   %s%n", "", "file", "fill", "fill", "reuse", "reuse",
                "region  pool");
        try (Node node = provider.createNode(NodeOptions.loopback())) {
            shape(node, dir, "200 partitions x 256 KiB (50 MiB)", filled(200, 256 << 10), budget);
            shape(node, dir, "2000 partitions x 4 KiB (8 MiB)", filled(2000, 4 << 10), budget);
            shape(node, dir, "8 partitions x 16 MiB (128 MiB)", filled(8, 16 << 20), budget);
            long[] skewed = filled(100, 32 << 10);
            skewed[7] = 40L << 20;
            Arrays.fill(skewed, 50, 60, 0);
            shape(node, dir, "100 x 32 KiB, 10 empty, one 40 MiB", skewed, budget);
        } finally {
            try (var files = Files.list(dir)) {
                files.forEach(p -> p.toFile().delete());
            }
            Files.delete(dir);
        }
    }

    private static long[] filled(int partitions, long bytes) {
        long[] lengths = new long[partitions];
        Arrays.fill(lengths, bytes);
        return lengths;
    }

    private static void shape(Node node, Path dir, String name, long[] lengths, long budget) throws Exception {
        long payload = Arrays.stream(lengths).sum();
        File file = ShuffleFixture.dataFile(dir, 0, 0, lengths);
        int rounds = (int) Math.max(3, budget / payload);
        double[] region = new double[2];
        double[] pool = new double[2];
        double[] regionFill = new double[2];
        double[] poolFill = new double[2];
        // Two passes; the first warms the JIT and the page cache, the second is reported.
        double read = 0;
        for (int pass = 0; pass < 2; pass++) {
            read = readRate(file, lengths, rounds);
            regionFill = regionRate(node, file, lengths, rounds, true);
            poolFill = poolRate(node, file, lengths, rounds, true);
            region = regionRate(node, file, lengths, rounds, false);
            pool = poolRate(node, file, lengths, rounds, false);
        }
        System.out.printf(Locale.ROOT, "%-36s %8.0f %8.0f %8.0f %8.0f %8.0f   %.3f  %.3f%n", name, read, regionFill[0],
                poolFill[0], region[0], pool[0], region[1] / payload, pool[1] / payload);
        file.delete();
    }

    private static double mibPerSecond(long bytes, long nanos) {
        return bytes / (1024.0 * 1024.0) / (nanos / 1e9);
    }

    private static double readRate(File file, long[] lengths, int rounds) throws IOException {
        long payload = Arrays.stream(lengths).sum();
        ByteBuffer target = ByteBuffer.allocateDirect((int) Math.min(Integer.MAX_VALUE, payload));
        long start = System.nanoTime();
        for (int round = 0; round < rounds; round++) {
            try (FileChannel channel = FileChannel.open(file.toPath(), StandardOpenOption.READ)) {
                target.clear();
                long at = 0;
                while (target.hasRemaining()) {
                    int n = channel.read(target, at);
                    if (n < 0) {
                        break;
                    }
                    at += n;
                }
            }
        }
        return mibPerSecond(payload * rounds, System.nanoTime() - start);
    }

    private static double[] regionRate(Node node, File file, long[] lengths, int rounds, boolean keep) {
        long payload = Arrays.stream(lengths).sum();
        try (MapOutputStore store = new MapOutputStore(node, 1L << 40, new ShuffleMetrics())) {
            store.setRecycleQuarantine(Duration.ZERO); // reuse: the next publish may take the memory at once
            long registered = 0;
            long start = System.nanoTime();
            for (int round = 0; round < rounds; round++) {
                if (!store.publish(round, 0, file, lengths)) {
                    throw new IllegalStateException("publish failed");
                }
                registered = store.usedBytes() / (keep ? round + 1 : 1);
                if (!keep) {
                    store.removeShuffle(round);
                }
            }
            return new double[] {mibPerSecond(payload * rounds, System.nanoTime() - start), registered};
        }
    }

    /** The pool design: a slice per segment (sized by its framing bound), framed from a scratch buffer. */
    private static double[] poolRate(Node node, File file, long[] lengths, int rounds, boolean keep) throws Exception {
        long payload = Arrays.stream(lengths).sum();
        long maxSegment = Arrays.stream(lengths).max().orElse(1);
        try (RegisteredMemoryPool pool = new RegisteredMemoryPool(node, new PoolOptions(1L << 40, Duration.ZERO));
             BufferAllocator allocator = new RootAllocator()) {
            ByteBuffer scratch = ByteBuffer.allocateDirect((int) maxSegment);
            List<RegisteredBuffer> slices = new ArrayList<>();
            List<MemoryRegion> own = new ArrayList<>();
            long registered = 0;
            long start = System.nanoTime();
            for (int round = 0; round < rounds; round++) {
                if (!keep) {
                    slices = new ArrayList<>();
                    own = new ArrayList<>();
                }
                long bytes = 0;
                try (FileChannel channel = FileChannel.open(file.toPath(), StandardOpenOption.READ)) {
                    long at = 0;
                    for (int r = 0; r < lengths.length; r++) {
                        if (lengths[r] == 0) {
                            continue;
                        }
                        scratch.clear().limit((int) lengths[r]);
                        while (scratch.hasRemaining()) {
                            at += channel.read(scratch, at);
                        }
                        scratch.flip();
                        int bound = (int) ArrowBlock.maxFramedSize(lengths[r], MapOutputStore.metadata(round, 0, r));
                        ByteBuffer target;
                        boolean sliced = bound <= RegisteredMemoryPool.MAX_SLICE_BYTES;
                        if (sliced) {
                            RegisteredBuffer slice = pool.acquire(bound);
                            slices.add(slice);
                            target = slice.buffer().duplicate();
                        } else {
                            target = DirectMemory.pageAligned(bound);
                        }
                        long written = ArrowBlock.write(MapOutputStore.metadata(round, 0, r), scratch, into(target), allocator);
                        if (sliced) {
                            // Generous to the pool: count the slice an exact-size request would get.
                            bytes += RegisteredMemoryPool.sliceSizeFor((int) written);
                        } else {
                            own.add(node.register(target.flip(), Set.of(Access.REMOTE_READ)));
                            bytes += written;
                        }
                    }
                }
                registered = bytes;
                if (!keep) {
                    slices.forEach(RegisteredBuffer::close);
                    own.forEach(MemoryRegion::deregister);
                }
            }
            if (keep) {
                slices.forEach(RegisteredBuffer::close);
                own.forEach(MemoryRegion::deregister);
            }
            return new double[] {mibPerSecond(payload * rounds, System.nanoTime() - start), registered};
        }
    }

    private static WritableByteChannel into(ByteBuffer target) {
        return new WritableByteChannel() {
            @Override
            public int write(ByteBuffer src) {
                int n = src.remaining();
                target.put(src);
                return n;
            }

            @Override
            public boolean isOpen() {
                return true;
            }

            @Override
            public void close() {
            }
        };
    }
}

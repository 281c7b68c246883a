package io.rdmaplane.rdma.memory;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * What each {@link MemoryKind} costs to register, and that a READ works from and into huge pages: in the
 * Soft-RoCE VM over verbs (integration-tests/vm/bench-hugepages.sh), or anywhere over tcp (where
 * registration costs next to nothing). For each kind, a few rounds (the first warms up) of: map
 * {@code poolMiB} of pool chunks, register each chunk, deregister, unmap; prints the medians per GiB and
 * <pre>hugepages: register-per-GiB hugetlb/direct = X.XXx (goal <= 1.00)</pre>
 * A benchmark, not a test: it asserts no time.
 *
 * <p>Usage: {@code MemoryKindBench PROVIDER [poolMiB] [rounds] [ADDR_A ADDR_B]}; the addresses default to the
 * VM's ({@code RDMA_VM_ADDR_A}, {@code RDMA_VM_ADDR_B}).
 */
public final class MemoryKindBench {
    private static final int WAIT = 60;
    private static final List<MemoryKind> KINDS = List.of(MemoryKind.DIRECT, MemoryKind.THP, MemoryKind.HUGETLB);

    private MemoryKindBench() {
    }

    public static void main(String[] args) throws Exception {
        String provider = args.length > 0 ? args[0] : "verbs";
        int poolMiB = args.length > 1 ? Integer.parseInt(args[1]) : 256;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 4;
        String addressA = args.length > 4 ? args[3] : System.getenv("RDMA_VM_ADDR_A");
        String addressB = args.length > 4 ? args[4] : System.getenv("RDMA_VM_ADDR_B");
        if (addressA == null || addressB == null || rounds < 2) {
            System.err.println("usage: MemoryKindBench PROVIDER [poolMiB] [rounds >= 2] [ADDR_A ADDR_B] (in the VM: RDMA_VM_ADDR_A/B)");
            System.exit(2);
        }
        int chunks = poolMiB * (1 << 20) / RegisteredMemoryPool.CHUNK_BYTES;
        try (Node a = node(provider, addressA); Node b = node(provider, addressB)) {
            System.out.println("hugepages: provider " + provider + ", device NUMA node " + a.numaNode() + ", " + chunks
                    + " chunks of " + (RegisteredMemoryPool.CHUNK_BYTES >> 20) + " MiB per round, " + rounds + " rounds (the first warms up)");
            readThroughHugePages(a, b);
            Map<MemoryKind, double[]> perGiB = new EnumMap<>(MemoryKind.class);
            for (MemoryKind kind : KINDS) {
                double[][] samples = new double[3][rounds - 1]; // map, register, deregister: ms per GiB
                boolean allOfKind = true;
                double hugeMiB = 0;
                for (int round = 0; round < rounds; round++) {
                    double[] ms = round(a, kind, chunks);
                    allOfKind &= ms[3] == chunks;
                    hugeMiB = ms[4];
                    if (round > 0) {
                        for (int i = 0; i < 3; i++) {
                            samples[i][round - 1] = ms[i] * 1024.0 / poolMiB;
                        }
                    }
                }
                double[] medians = {median(samples[0]), median(samples[1]), median(samples[2])};
                System.out.printf(Locale.ROOT, "hugepages: %-7s map+fault %8.1f ms/GiB, register %8.1f ms/GiB, deregister %7.1f ms/GiB,"
                        + " on huge pages %d of %d MiB%s%n", kind.settingValue(), medians[0], medians[1], medians[2], (long) hugeMiB,
                        (long) poolMiB, allOfKind ? "" : "  (SOME CHUNKS FELL BACK: see the log)");
                if (allOfKind) {
                    perGiB.put(kind, medians);
                }
            }
            double[] direct = perGiB.get(MemoryKind.DIRECT);
            for (MemoryKind kind : List.of(MemoryKind.HUGETLB, MemoryKind.THP)) {
                double[] of = perGiB.get(kind);
                if (of == null) {
                    System.out.println("hugepages: register-per-GiB " + kind.settingValue() + "/direct = n/a (no " + kind.settingValue()
                            + " memory here)");
                } else {
                    System.out.printf(Locale.ROOT, "hugepages: register-per-GiB %s/direct = %.2fx (goal <= 1.00)%n", kind.settingValue(),
                            of[1] / direct[1]);
                }
            }
        }
    }

    /** One round: ms to map (and fault in) the chunks, register them, deregister them; [3] = chunks of the kind asked. */
    private static double[] round(Node node, MemoryKind kind, int chunks) throws Exception {
        ChunkMemory memory = new ChunkMemory(kind, node.numaNode(), Providers::hostMemory);
        List<ChunkMemory.Mapping> mappings = new ArrayList<>();
        List<MemoryRegion> regions = new ArrayList<>();
        long hugeBefore = hugeBackedKb();
        long t0 = System.nanoTime();
        for (int i = 0; i < chunks; i++) {
            mappings.add(memory.allocate(RegisteredMemoryPool.CHUNK_BYTES));
        }
        long t1 = System.nanoTime();
        long hugeMiB = (hugeBackedKb() - hugeBefore) >> 10;
        for (ChunkMemory.Mapping m : mappings) {
            regions.add(node.register(m.buffer(), EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_READ)));
        }
        long t2 = System.nanoTime();
        regions.forEach(MemoryRegion::deregister);
        long t3 = System.nanoTime();
        int ofKind = memory.chunksByKind().getOrDefault(kind, 0);
        mappings.forEach(memory::free);
        return new double[] {(t1 - t0) / 1e6, (t2 - t1) / 1e6, (t3 - t2) / 1e6, ofKind, hugeMiB};
    }

    /** kB of this machine's memory on huge pages now: transparent (AnonHugePages) plus reserved ones in use. */
    private static long hugeBackedKb() throws java.io.IOException {
        long anon = 0;
        long total = 0;
        long free = 0;
        long size = 0;
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/meminfo"))) {
            String[] f = line.split("\\s+");
            switch (f[0]) {
                case "AnonHugePages:" -> anon = Long.parseLong(f[1]);
                case "HugePages_Total:" -> total = Long.parseLong(f[1]);
                case "HugePages_Free:" -> free = Long.parseLong(f[1]);
                case "Hugepagesize:" -> size = Long.parseLong(f[1]);
                default -> { }
            }
        }
        return anon + (total - free) * size;
    }

    /** A pool of hugetlb chunks on each node; one READs a whole 8 MiB slice of the other's and compares every byte. */
    private static void readThroughHugePages(Node a, Node b) throws Exception {
        PoolOptions options = new PoolOptions(RegisteredMemoryPool.CHUNK_BYTES, Duration.ZERO, MemoryKind.HUGETLB);
        try (RegisteredMemoryPool server = new RegisteredMemoryPool(a, options);
             RegisteredMemoryPool client = new RegisteredMemoryPool(b, options)) {
            a.listen(accepted -> new ChannelHandler() { });
            Channel channel = b.connect(a.localAddress(), 16, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
            try (RegisteredBuffer source = server.acquire(RegisteredMemoryPool.CHUNK_BYTES);
                 RegisteredBuffer landing = client.acquire(RegisteredMemoryPool.CHUNK_BYTES)) {
                ByteBuffer s = source.buffer();
                for (int i = 0; i < s.capacity(); i++) {
                    s.put(i, (byte) (i * 31 + i / 4093));
                }
                channel.read(source.remoteAddress(), source.region().rkey(), source.capacity(), landing.region(), landing.offset())
                        .get(WAIT, TimeUnit.SECONDS);
                boolean same = landing.buffer().equals(source.buffer());
                System.out.println("hugepages: READ of " + source.capacity() + " B from a " + kinds(server) + " chunk into a "
                        + kinds(client) + " chunk: " + (same ? "every byte arrived" : "BYTES DIFFER"));
                if (!same) {
                    System.exit(1);
                }
            }
            channel.close();
        }
    }

    private static String kinds(RegisteredMemoryPool pool) {
        return pool.chunksByKind().keySet().stream().map(MemoryKind::settingValue).reduce((x, y) -> x + "+" + y).orElse("?")
                + pool.memoryFallback().map(why -> " (fell back: " + why + ")").orElse("");
    }

    private static Node node(String provider, String address) throws Exception {
        NodeOptions options = new NodeOptions(new InetSocketAddress(address, 0), 64 << 10, Duration.ofSeconds(10), 256);
        return Providers.select(provider, options).createNode(options);
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
}

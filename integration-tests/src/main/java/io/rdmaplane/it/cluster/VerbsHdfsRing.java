package io.rdmaplane.it.cluster;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * HDFS over verbs across the Soft-RoCE VM's cluster ({@code run.sh --hosts N}, each host a network namespace with its
 * own rxe device), the part {@link VerbsTpcdsRing} runs first: the VM's hosts adopted, the ring's transport settings
 * ({@code rdma.ring.transport.NAME}, default {@code provider=verbs}; tcp checks the harness on a host), and the
 * read-back: the client ({@link RingHdfsRead}, plug-in on its class path) on host 1 writes a file of several blocks
 * and reads it back sequentially and positioned; every byte must equal what it wrote, the DataNodes must have served
 * every block read over RDMA on that provider with nothing refused, and the client must have read with RDMA enabled
 * and no read fallen back to TCP.
 */
public final class VerbsHdfsRing {
    private VerbsHdfsRing() {
    }

    /**
     * The Soft-RoCE VM's cluster (run.sh --hosts N: the namespaces, addresses and bridge ports of RDMA_VM_HOST*), adopted;
     * exits 2 saying so, prefixed by {@code tag}, when not run in it.
     */
    static HostRing vmRing(String tag) {
        String names = System.getenv("RDMA_VM_HOST_NAMES");
        String addrs = System.getenv("RDMA_VM_HOST_ADDRS");
        if (names == null || addrs == null) {
            System.out.println(tag + ": SKIPPED: not in the Soft-RoCE VM's cluster (RDMA_VM_HOST_NAMES, RDMA_VM_HOST_ADDRS unset:"
                    + " run it through integration-tests/vm/run.sh --hosts 3)");
            System.exit(2);
        }
        List<String> ns = List.of(names.trim().split("\\s+"));
        List<String> ports = new ArrayList<>();
        for (int i = 1; i <= ns.size(); i++) {
            ports.add(System.getenv().getOrDefault("RDMA_VM_HOST" + i + "_PORT", "port-host" + i));
        }
        return HostRing.adopt(ns, List.of(addrs.trim().split("\\s+")), ports);
    }

    /** The plug-ins' transport settings: {@code provider=verbs} and the system properties {@code rdma.ring.transport.NAME}. */
    static Map<String, String> transport() {
        Map<String, String> transport = new LinkedHashMap<>();
        transport.put("provider", "verbs");
        System.getProperties().stringPropertyNames().stream().filter(k -> k.startsWith("rdma.ring.transport.")).sorted()
                .forEach(k -> transport.put(k.substring("rdma.ring.transport.".length()), System.getProperty(k)));
        return transport;
    }

    /**
     * The client ({@link RingHdfsRead}, plug-in on its class path) on host 0 writes a file of {@code size} bytes and reads
     * it back sequentially and with {@code preads} positioned reads; adds to {@code problems} what is not as it should be:
     * other bytes than written, the client not on RDMA over {@code want} or fallen back to TCP, a DataNode on another
     * provider or refusing reads, fewer RDMA reads served than two per block. Prints {@code verbs-hdfs:} lines. With
     * {@code againstStock}, the stock client reads the file too, for the warm read's time ratio.
     */
    static void readBack(RingCluster cluster, int size, int preads, String want, List<String> problems, boolean againstStock) {
        HostRing ring = cluster.ring;
        long[] before = served(cluster);
        long t1 = System.nanoTime();
        String out;
        try {
            out = cluster.hdfsClient("hdfs-client", true, Duration.ofMinutes(10), "/verbs/data.bin", String.valueOf(size), "12",
                    String.valueOf(preads));
        } catch (IllegalStateException e) {
            System.out.println(cluster.tails());
            throw e;
        }
        long clientSecs = (System.nanoTime() - t1) / 1_000_000_000;
        out.lines().filter(l -> l.startsWith("RING-HDFS")).forEach(l -> System.out.println("verbs-hdfs: client: " + l));
        if (!out.contains("RING-HDFS EQUAL")) {
            problems.add("the client read other bytes than it wrote");
        }
        if (!out.contains("HDFS RDMA reads enabled in this JVM over the " + want + " provider")) {
            problems.add("the client did not read with RDMA on " + want);
        }
        long fellBack = out.lines().filter(l -> l.contains("fell back to TCP")).count();
        if (fellBack > 0 || out.contains("HDFS RDMA reads are OFF")) {
            problems.add("the client fell back to TCP " + fellBack + " time(s) (or RDMA was off)");
        }
        long[] after = served(cluster);
        long blocks = (size + RingCluster.BLOCK_SIZE - 1) / RingCluster.BLOCK_SIZE;
        long servedTotal = 0;
        for (int w = 1; w <= cluster.workers; w++) {
            String bean = cluster.dataNodeBean(w);
            long served = after[w - 1] - before[w - 1];
            servedTotal += served;
            String provider = RingCluster.jsonString(bean, "Provider");
            long refused = RingCluster.jsonLong(bean, "Refused");
            long tokenRefused = RingCluster.jsonLong(bean, "TokenRefused");
            long registered = RingCluster.jsonLong(bean, "RegisteredBytes");
            System.out.printf("verbs-hdfs: DataNode %s: provider %s, RDMA reads served %d, refused %d, token refused %d,"
                    + " registered bytes %d, regions %d%n", ring.address(w), provider, served, refused, tokenRefused, registered,
                    RingCluster.jsonLong(bean, "Regions"));
            if (!want.equals(provider)) {
                problems.add("DataNode " + ring.address(w) + " serves over " + provider);
            }
            if (refused != 0 || tokenRefused != 0) {
                problems.add("DataNode " + ring.address(w) + " refused " + refused + " read(s), " + tokenRefused + " for their token");
            }
        }
        // each block read sequentially once, and at least once more positioned (the boundary reads touch every block)
        if (servedTotal < 2 * blocks) {
            problems.add("the DataNodes served " + servedTotal + " RDMA reads for " + blocks + " blocks read sequentially and positioned");
        }
        System.out.printf("verbs-hdfs: %d bytes (%d blocks), %d RDMA reads served, %d fallbacks; client JVM %d s%n", size, blocks,
                servedTotal, fellBack, clientSecs);
        if (againstStock) {
            throughputAgainstStock(cluster, size, out, problems);
        }
    }

    /**
     * The stock client (TCP) reads the read-back's file too, sequentially, twice; prints the warm sequential read's
     * time through the plug-in ({@code pluginOut}, its client's output) against the stock client's (printed, not asserted:
     * the emulated guest's times are noisy) as {@code verbs-hdfs: warm-read-time plug-in/stock = X.XXx (goal <= 1.00)}.
     */
    private static void throughputAgainstStock(RingCluster cluster, int size, String pluginOut, List<String> problems) {
        String stockOut = cluster.hdfsClient("hdfs-client-stock", false, Duration.ofMinutes(10), "/verbs/data.bin", String.valueOf(size),
                "12", "-1");
        stockOut.lines().filter(l -> l.startsWith("RING-HDFS")).forEach(l -> System.out.println("verbs-hdfs: stock client: " + l));
        if (!stockOut.contains("RING-HDFS EQUAL")) {
            problems.add("the stock client read other bytes than were written");
        }
        long plugin = warmMillis(pluginOut);
        long stock = warmMillis(stockOut);
        if (plugin > 0 && stock > 0) {
            System.out.printf("verbs-hdfs: warm sequential read of %d bytes: plug-in %d ms (%.1f MB/s), stock %d ms (%.1f MB/s)%n", size,
                    plugin, size / 1e3 / plugin, stock, size / 1e3 / stock);
            System.out.printf("verbs-hdfs: warm-read-time plug-in/stock = %.2fx (goal <= 1.00)%n", (double) plugin / stock);
        } else {
            problems.add("no warm sequential read time from both clients (plug-in " + plugin + " ms, stock " + stock + " ms)");
        }
    }

    /** The milliseconds of "RING-HDFS sequential, warm: N bytes in M ms" in a client's output; -1 when missing. */
    private static long warmMillis(String out) {
        return out.lines().filter(l -> l.startsWith("RING-HDFS sequential, warm: ")).findFirst()
                .map(l -> Long.parseLong(l.replaceAll(".* in (\\d+) ms.*", "$1"))).orElse(-1L);
    }

    static long[] served(RingCluster cluster) {
        long[] served = new long[cluster.workers];
        for (int w = 1; w <= cluster.workers; w++) {
            served[w - 1] = Math.max(0, RingCluster.jsonLong(cluster.dataNodeBean(w), "Served"));
        }
        return served;
    }
}

package io.rdmaplane.it.cluster;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * HDFS over verbs across the Soft-RoCE VM's cluster ({@code run.sh --hosts N}, each host a network namespace with its
 * own rxe device): the NameNode and the client on host 1, a DataNode with the RDMA plug-in on every further host, all
 * plug-ins on the verbs provider (another with {@code -Drdma.ring.transport.provider}: tcp checks the harness on a host). The client ({@link RingHdfsRead}, plug-in on its class path) writes a file of several
 * blocks and reads it back sequentially and positioned; every byte must equal what it wrote, the DataNodes must have
 * served every block read over RDMA on that provider with nothing refused, and the client must have read with RDMA enabled
 * and no read fallen back to TCP. Prints {@code verbs-hdfs:} lines, the last one {@code verbs-hdfs: PASSED|FAILED ...};
 * exits 1 when a check failed, 2 when not in the VM's cluster.
 *
 * <p>Arguments: {@code DIR} (the ring's folder: logs, HDFS data), {@code SIZE} (bytes of the file), {@code PREADS}
 * (random positioned reads besides one across each block boundary). The transport settings are the system
 * properties {@code rdma.ring.transport.NAME} (default {@code provider=verbs}).
 */
public final class VerbsHdfsRing {
    private VerbsHdfsRing() {
    }

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: VerbsHdfsRing DIR SIZE PREADS");
            System.exit(2);
        }
        Path dir = Path.of(args[0]);
        int size = Integer.parseInt(args[1]);
        int preads = Integer.parseInt(args[2]);
        HostRing adopted = vmRing("verbs-hdfs");
        Map<String, String> transport = transport();
        String want = transport.get("provider");
        System.out.println("verbs-hdfs: hosts " + adopted.describe() + "; transport " + transport);
        List<String> problems = new ArrayList<>();
        long t0 = System.nanoTime();
        try (HostRing ring = adopted;
             RingCluster cluster = RingCluster.startHdfs(ring, RingLines.fromTestClassPath(), dir, Duration.ofMinutes(25), transport)) {
            System.out.printf("verbs-hdfs: NameNode on %s, %d DataNode(s) live with their RDMA block service RUNNING after %d s%n",
                    ring.address(0), cluster.workers, (System.nanoTime() - t0) / 1_000_000_000);
            readBack(cluster, size, preads, want, problems);
        } catch (RuntimeException e) {
            e.printStackTrace(System.out);
            problems.add(e.toString().lines().findFirst().orElse("?"));
        }
        if (problems.isEmpty()) {
            System.out.println("verbs-hdfs: PASSED");
            System.exit(0);
        }
        System.out.println("verbs-hdfs: FAILED: " + String.join("; ", problems));
        System.exit(1);
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
     * provider or refusing reads, fewer RDMA reads served than two per block. Prints {@code verbs-hdfs:} lines.
     */
    static void readBack(RingCluster cluster, int size, int preads, String want, List<String> problems) {
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
    }

    static long[] served(RingCluster cluster) {
        long[] served = new long[cluster.workers];
        for (int w = 1; w <= cluster.workers; w++) {
            served[w - 1] = Math.max(0, RingCluster.jsonLong(cluster.dataNodeBean(w), "Served"));
        }
        return served;
    }
}

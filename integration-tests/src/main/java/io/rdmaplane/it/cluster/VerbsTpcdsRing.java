package io.rdmaplane.it.cluster;

import io.rdmaplane.spark.ShuffleMetrics;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * TPC-DS with its tables in HDFS across the Soft-RoCE VM's cluster ({@code run.sh --hosts 3}): the Spark Master, the
 * NameNode and the drivers on host 1, a Spark Worker (one executor) and a DataNode with the RDMA plug-in on every
 * further host, each process bound to its own host's address (and so its own rxe device). On one cluster:
 * <ol>
 * <li>with {@code HDFS_SIZE > 0}, {@link VerbsHdfsRing#readBack}: a file of several blocks written and read back
 * sequentially and positioned through the client plug-in (what {@code hdfs-verbs.sh} proves, on this cluster);</li>
 * <li>the stock HDFS client puts the TPC-DS tables ({@link TpcdsTables}, Parquet files generated on the host:
 * {@code TABLES_DIR}) into HDFS;</li>
 * <li>the baseline application (Spark's sort shuffle over Netty, the stock HDFS reader over TCP) runs every query, or,
 * with {@code -Drdma.tpcds.expected=DIR}, each query's rows are those {@link TpcdsExpectedRows} wrote there on the host
 * (no baseline application and no stock client's read-back, and so no time ratio: what CI runs);</li>
 * <li>the RDMA application (RdmaShuffleManager, the HDFS client plug-in, both on the transport's provider) runs the
 * same queries over the same files.</li>
 * </ol>
 * Checks: every query gives the baseline's rows (sorted); in the RDMA application every executor ran the provider,
 * published map outputs, every one from its data file's registered mapping (zero-copy, none copied), and fetched
 * blocks over RDMA with no fallback of any level, the blocks fetched over RDMA equal
 * the remote blocks Spark's task metrics counted, the executors' and the driver's HDFS reads went through the client
 * plug-in (RDMA bytes on every executor, no fallback, nothing declined) and every DataNode served RDMA reads on the
 * provider, refusing none. Prints {@code tpcds-verbs:} lines, per query the job-time ratio RDMA/(Netty+TCP), the
 * lines {@code tpcds-verbs: qN time = X.XXx} and last {@code tpcds-verbs: PASSED|FAILED ...}; exits 1 when a check
 * failed, 2 when not in the VM's cluster.
 *
 * <p>Arguments: {@code DIR} (the ring's folder), {@code TABLES_DIR} (what {@link TpcdsTables#main} wrote), {@code QUERIES} (comma-separated, e.g. {@code q3,q19}),
 * {@code HDFS_SIZE} and {@code HDFS_PREADS} (the read-back; 0 leaves it out). The transport settings are the system
 * properties {@code rdma.ring.transport.NAME} (default {@code provider=verbs}); {@code -Drdma.ring.hostRing=true}
 * runs on a ring of 3 namespaces this JVM creates on a host (with {@code provider=tcp}: a check of the harness).
 */
public final class VerbsTpcdsRing {
    private static final String BASE = "/tpcds";
    private static final Duration QUERY_DEADLINE = Duration.ofMinutes(15);
    /** What the HDFS client ("fell back to TCP") and the shuffle ("falls back") log when they leave RDMA. */
    private static final java.util.regex.Pattern FALLBACK_LOG_LINE = java.util.regex.Pattern.compile("fell back|falls? back|declined");
    /** One reduce partition per executor: the emulated guest pays much for each task. */
    static final Map<String, String> SQL = Map.of("spark.sql.shuffle.partitions", "2", "spark.sql.adaptive.enabled", "true",
            "spark.sql.autoBroadcastJoinThreshold", "-1", "spark.sql.ansi.enabled", "false");

    private VerbsTpcdsRing() {
    }

    public static void main(String[] args) {
        if (args.length != 5) {
            System.err.println("usage: VerbsTpcdsRing DIR TABLES_DIR QUERIES HDFS_SIZE HDFS_PREADS");
            System.exit(2);
        }
        Path dir = Path.of(args[0]).toAbsolutePath();
        Path tables = Path.of(args[1]).toAbsolutePath();
        if (!Files.isRegularFile(tables.resolve("COMPLETE"))) {
            System.out.println("tpcds-verbs: FAILED: no tables under " + tables + " (write them with io.rdmaplane.it.cluster.TpcdsTables "
                    + tables + ")");
            System.exit(1);
        }
        // "none" (or nothing): the read-back alone, on HDFS alone
        List<String> queries = args[2].isBlank() || args[2].equals("none") ? List.of() : List.of(args[2].split(","));
        int hdfsSize = Integer.parseInt(args[3]);
        int hdfsPreads = Integer.parseInt(args[4]);
        HostRing adopted = Boolean.getBoolean("rdma.ring.hostRing") ? HostRing.create(3) : VerbsHdfsRing.vmRing("tpcds-verbs");
        Map<String, String> transport = VerbsHdfsRing.transport();
        String want = transport.get("provider");
        System.out.println("tpcds-verbs: hosts " + adopted.describe() + "; transport " + transport + "; queries " + queries
                + " at scale " + TpcdsTables.SCALE);
        String expected = System.getProperty("rdma.tpcds.expected");
        List<String> problems = new ArrayList<>();
        Map<String, long[]> times = new LinkedHashMap<>(); // query: {stock ms, rdma ms}
        long t0 = System.nanoTime();
        try (HostRing ring = adopted;
             RingCluster cluster = queries.isEmpty()
                     ? RingCluster.startHdfs(ring, RingLines.fromTestClassPath(), dir, Duration.ofMinutes(25), transport)
                     : RingCluster.start(ring, RingLines.fromTestClassPath(), dir, Duration.ofMinutes(40), transport)) {
            System.out.printf("tpcds-verbs: %sNameNode with %d DataNodes (RDMA block service RUNNING) after %d s%n",
                    queries.isEmpty() ? "" : "Master with " + cluster.workers + " Workers, ", cluster.workers, secondsSince(t0));
            if (hdfsSize > 0) {
                // with the baseline's rows from the host, no baseline runs here: neither the stock client's read
                VerbsHdfsRing.readBack(cluster, hdfsSize, hdfsPreads, want, problems, expected == null);
            }
            if (!queries.isEmpty()) {
                runQueries(cluster, dir, tables, queries, expected == null ? null : Path.of(expected), want, problems, times);
            }
        } catch (RuntimeException | IOException e) {
            e.printStackTrace(System.out);
            problems.add(e.toString().lines().findFirst().orElse("?"));
        }
        for (Map.Entry<String, long[]> e : times.entrySet()) {
            long[] t = e.getValue();
            if (t[0] > 0 && t[1] > 0) {
                System.out.printf("tpcds-verbs: %s: RDMA %.1f s, Netty+TCP %.1f s: RDMA/(Netty+TCP) %.2fx%n", e.getKey(), t[1] / 1e3,
                        t[0] / 1e3, (double) t[1] / t[0]);
            }
        }
        for (Map.Entry<String, long[]> e : times.entrySet()) {
            if (e.getValue()[0] > 0 && e.getValue()[1] > 0) {
                System.out.printf("tpcds-verbs: %s time = %.2fx%n", e.getKey(), (double) e.getValue()[1] / e.getValue()[0]);
            }
        }
        System.out.printf("tpcds-verbs: the ring ran %d s%n", secondsSince(t0));
        if (problems.isEmpty()) {
            System.out.println("tpcds-verbs: PASSED");
            System.exit(0);
        }
        System.out.println("tpcds-verbs: FAILED: " + String.join("; ", problems));
        System.exit(1);
    }

    /**
     * Puts the tables into HDFS, runs every query in the baseline application (or, with {@code expectedRows}, takes its
     * rows from there), then in the RDMA application, and checks rows, reports and DataNodes (into {@code problems}); each
     * query's job times into {@code times} (0 for a baseline not run).
     */
    private static void runQueries(RingCluster cluster, Path dir, Path tables, List<String> queries, Path expectedRows, String want,
            List<String> problems, Map<String, long[]> times) throws IOException {
        Path rows = Files.createDirectories(dir.resolve("rows"));
        long tPut = System.nanoTime();
        cluster.fsShellOk("tpcds-put", false, null, "-put", tables.toString(), BASE);
        System.out.printf("tpcds-verbs: tables %s (Parquet, %d bytes) put into HDFS %s with the stock client in %d s%n",
                TpcdsTables.TABLES, bytesUnder(tables), BASE, secondsSince(tPut));

        Map<String, RingDriver.QueryResult> baseline = new LinkedHashMap<>();
        if (expectedRows != null) {
            for (String q : queries) {
                RingDriver.QueryResult r = TpcdsExpectedRows.read(expectedRows, q);
                System.out.println("tpcds-verbs: baseline " + q + " rows=" + r.rows() + " hash=" + r.hash() + " (a local Spark's on the host, "
                        + expectedRows + ")");
                baseline.put(q, r);
                times.put(q, new long[] {0, 0});
            }
        } else {
            long t1 = System.nanoTime();
            try (RingDriver stock = cluster.submit("tpcds-stock", false, SQL)) {
                System.out.printf("tpcds-verbs: baseline application (sort shuffle, stock HDFS reader) up in %d s%n", secondsSince(t1));
                for (String q : queries) {
                    RingDriver.QueryResult r = query(stock, q, rows.resolve("stock-" + q));
                    baseline.put(q, r);
                    times.put(q, new long[] {r.millis(), 0});
                }
            }
        }
        long[] servedBefore = VerbsHdfsRing.served(cluster);
        long t2 = System.nanoTime();
        long stopping;
        try (RingDriver rdma = cluster.submit("tpcds-rdma", true, SQL)) {
            System.out.printf("tpcds-verbs: RDMA application (RdmaShuffleManager, HDFS client plug-in, %s) up in %d s%n", want,
                    secondsSince(t2));
            long remoteBlocks = 0;
            for (String q : queries) {
                RingDriver.QueryResult r = query(rdma, q, rows.resolve("rdma-" + q));
                RingDriver.QueryResult expected = baseline.get(q);
                times.get(q)[1] = r.millis();
                remoteBlocks += r.remoteBlocks();
                if (expected.rows() == 0) {
                    problems.add(q + " has no rows");
                } else if (!r.equalsBaseline(expected)) {
                    long[] lostAndDuplicated = r.lostAndDuplicated(expected);
                    problems.add(q + " over RDMA gave " + r + ", other than the baseline's " + expected + " (" + lostAndDuplicated[0]
                            + " rows lost, " + lostAndDuplicated[1] + " duplicated)");
                }
            }
            long t3 = System.nanoTime();
            RingDriver.Reports reports = rdma.report(cluster.workers, Duration.ofMinutes(10));
            System.out.printf("tpcds-verbs: the RDMA application's reports in %d s%n", secondsSince(t3));
            checkReports(reports, cluster, remoteBlocks, want, problems);
            stopping = System.nanoTime();
        }
        System.out.printf("tpcds-verbs: the RDMA application stopped in %d s%n", secondsSince(stopping));
        checkDataNodes(cluster, servedBefore, want, problems);
    }

    /** Runs query {@code q} in the application of {@code driver} ({@link RingTpcds}), its sorted rows into {@code out}. */
    private static RingDriver.QueryResult query(RingDriver driver, String q, Path out) {
        long t0 = System.nanoTime();
        RingDriver.QueryResult r = driver.query(q, BASE, out, TpcdsTables.TABLES, null, null, QUERY_DEADLINE.multipliedBy(RingCluster.WAIT_SCALE));
        System.out.println("tpcds-verbs: " + driver.process.name + " " + r + " (command to result " + secondsSince(t0) + " s)");
        if (r.failed()) {
            throw new IllegalStateException(driver.process.name + ": " + r.failure() + "\n" + driver.cluster.tails());
        }
        return r;
    }

    /** Every shuffle block and every HDFS byte of the RDMA application went over RDMA, nothing fell back. */
    private static void checkReports(RingDriver.Reports reports, RingCluster cluster, long sparkRemoteBlocks, String want, List<String> problems) {
        Set<String> hosts = new TreeSet<>();
        long rdmaBlocks = 0;
        long unreadBlocks = 0;
        boolean fellBack = false;
        for (Map<String, String> r : reports.executors().values()) {
            String who = "executor " + r.get("executorId") + " on " + r.get("host");
            hosts.add(r.get("host"));
            System.out.println("tpcds-verbs: " + who + ": provider " + r.get("provider") + ", published maps "
                    + RingDriver.number(r, ShuffleMetrics.PUBLISHED_MAPS) + " (mapped, zero-copy, " + RingDriver.number(r, ShuffleMetrics.PUBLISHED_MAPPED)
                    + ", copied " + RingDriver.number(r, ShuffleMetrics.PUBLISHED_COPIED) + "), blocks fetched over RDMA "
                    + RingDriver.number(r, ShuffleMetrics.FETCH_RDMA_BLOCKS) + " (" + RingDriver.number(r, ShuffleMetrics.FETCH_RDMA_BYTES)
                    + " bytes; released unopened " + RingDriver.number(r, ShuffleMetrics.FETCH_UNREAD_BLOCKS) + "), fetch fallbacks "
                    + RingDriver.number(r, ShuffleMetrics.FALLBACK_FETCH) + "; HDFS client: RDMA bytes "
                    + RingDriver.number(r, "hdfs.client.rdma.bytes") + ", accessors " + RingDriver.number(r, "hdfs.client.accessors") + ", fallbacks "
                    + RingDriver.number(r, "hdfs.client.fallbacks") + ", declined " + RingDriver.number(r, "hdfs.client.declined"));
            rdmaBlocks += RingDriver.number(r, ShuffleMetrics.FETCH_RDMA_BLOCKS);
            unreadBlocks += RingDriver.number(r, ShuffleMetrics.FETCH_UNREAD_BLOCKS);
            if (!String.valueOf(r.get("provider")).equals(want)) {
                problems.add(who + " runs provider " + r.get("provider"));
            }
            // every executor serves map outputs and reads HDFS; which of them fetch remote blocks is the scheduler's choice
            // every map output served from its data file's registered mapping (7.2 registers read-only file mappings)
            positive(problems, who, r, ShuffleMetrics.PUBLISHED_MAPS, ShuffleMetrics.PUBLISHED_MAPPED, "hdfs.client.rdma.bytes");
            fellBack |= zero(problems, who, r, ShuffleMetrics.PUBLISHED_COPIED, ShuffleMetrics.FALLBACK_FETCH, ShuffleMetrics.FALLBACK_APP, ShuffleMetrics.NOT_PUBLISHED_OVER_CAP,
                    ShuffleMetrics.NOT_PUBLISHED_FAILED, ShuffleMetrics.NOT_PUBLISHED_STOPPED, "hdfs.client.fallbacks", "hdfs.client.declined");
        }
        Map<String, String> driver = reports.driver();
        System.out.println("tpcds-verbs: driver: shuffle fallbacks " + RingDriver.number(driver, ShuffleMetrics.FALLBACK_SHUFFLE)
                + "; HDFS client: RDMA bytes " + RingDriver.number(driver, "hdfs.client.rdma.bytes") + ", fallbacks " + RingDriver.number(driver, "hdfs.client.fallbacks")
                + ", declined " + RingDriver.number(driver, "hdfs.client.declined"));
        fellBack |= zero(problems, "the driver", driver, ShuffleMetrics.FALLBACK_SHUFFLE, ShuffleMetrics.FALLBACK_APP, "hdfs.client.fallbacks",
                "hdfs.client.declined");
        if (fellBack) {
            // the counters say that something fell back (or was copied, or not published); the executors' logs say why
            for (String line : cluster.executorLogLines(FALLBACK_LOG_LINE, 12)) {
                System.out.println("tpcds-verbs: executor log: " + line);
            }
        }
        Set<String> workerHosts = new TreeSet<>();
        for (int w = 1; w <= cluster.workers; w++) {
            workerHosts.add(cluster.ring.address(w));
        }
        if (!hosts.equals(workerHosts)) {
            problems.add("executors on " + hosts + ", expected one on each worker host " + workerHosts);
        }
        // Spark counts a remote block when the task opens it: a task that stops reading early (a join whose other side
        // ran out) leaves blocks fetched for it unopened, and the client counts those apart
        System.out.printf("tpcds-verbs: remote shuffle blocks: %d fetched over RDMA (%d of them released unopened), %d counted by Spark's"
                + " task metrics%n", rdmaBlocks, unreadBlocks, sparkRemoteBlocks);
        if (rdmaBlocks - unreadBlocks != sparkRemoteBlocks || rdmaBlocks == 0) {
            problems.add(rdmaBlocks + " blocks fetched over RDMA, " + unreadBlocks + " of them released unopened, but Spark counted "
                    + sparkRemoteBlocks + " remote blocks");
        }
    }

    /** Every DataNode serves on the provider and served RDMA reads to the RDMA application, refusing none. */
    private static void checkDataNodes(RingCluster cluster, long[] before, String want, List<String> problems) {
        long[] after = VerbsHdfsRing.served(cluster);
        for (int w = 1; w <= cluster.workers; w++) {
            String bean = cluster.dataNodeBean(w);
            String who = "DataNode " + cluster.ring.address(w);
            long served = after[w - 1] - before[w - 1];
            System.out.printf("tpcds-verbs: %s: provider %s, RDMA reads served to the RDMA application %d, refused %d, token refused %d%n",
                    who, RingCluster.jsonString(bean, "Provider"), served, RingCluster.jsonLong(bean, "Refused"),
                    RingCluster.jsonLong(bean, "TokenRefused"));
            if (!want.equals(RingCluster.jsonString(bean, "Provider")) || served <= 0) {
                problems.add(who + " served " + served + " RDMA reads on " + RingCluster.jsonString(bean, "Provider"));
            }
            if (RingCluster.jsonLong(bean, "Refused") != 0 || RingCluster.jsonLong(bean, "TokenRefused") != 0) {
                problems.add(who + " refused reads");
            }
        }
    }

    private static void positive(List<String> problems, String who, Map<String, String> r, String... counters) {
        for (String c : counters) {
            if (RingDriver.number(r, c) <= 0) {
                problems.add(who + ": " + c + " = " + r.get(c) + ", expected > 0");
            }
        }
    }

    /** Adds a problem for each of {@code counters} that is not 0; whether there was one. */
    private static boolean zero(List<String> problems, String who, Map<String, String> r, String... counters) {
        boolean any = false;
        for (String c : counters) {
            if (RingDriver.number(r, c) != 0) {
                problems.add(who + ": " + c + " = " + r.get(c) + reasons(r, c) + ", expected 0");
                any = true;
            }
        }
        return any;
    }

    /**
     * The counters of {@code r} that break {@code counter} down by reason (for {@code hdfs.client.fallbacks}: the
     * {@code hdfs.client.fallback.*} ones), as " (name n, ...)", or "" when there are none.
     */
    private static String reasons(Map<String, String> r, String counter) {
        String prefix = (counter.endsWith("s") ? counter.substring(0, counter.length() - 1) : counter) + ".";
        String found = new TreeMap<>(r).entrySet().stream().filter(e -> e.getKey().startsWith(prefix))
                .map(e -> e.getKey() + " " + e.getValue()).collect(java.util.stream.Collectors.joining(", "));
        return found.isEmpty() ? "" : " (" + found + ")";
    }

    private static long bytesUnder(Path dir) throws IOException {
        try (java.util.stream.Stream<Path> files = Files.walk(dir)) {
            return files.filter(Files::isRegularFile).filter(p -> p.toString().endsWith(".parquet")).mapToLong(p -> p.toFile().length()).sum();
        }
    }

    private static long secondsSince(long t0) {
        return (System.nanoTime() - t0) / 1_000_000_000;
    }
}

package io.rdmaplane.it.cluster;

import io.rdmaplane.spark.ShuffleMetrics;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * A ring of 3 hosts with Spark and HDFS on it, the sort-shuffle baseline measured once, an RDMA application
 * submitted and kept for the faults, and the faults themselves ({@link Fault}). What the host-ring test and the
 * soak command share. Everything it starts ends at {@link #close()} or at its time limit.
 */
public final class RingSession implements AutoCloseable {
    /** The shuffle every case runs: 16 maps into 16 reduce tasks of at least 300 ms each, so READs go on through the stage. */
    static final RingDriver.Workload WORKLOAD = new RingDriver.Workload(200_000, 16, 16, 300);
    /**
     * The shuffle of the faults that wait for READs ({@link Fault#waitsForReads}): 64 maps into 2 reduce tasks (one on each executor,
     * started together) that read their records slowly for at least 4 s, so that each asks for more remote blocks
     * through the whole task: READs go on on every executor when the links are cut (the usual shuffle's tasks fetch all
     * their blocks in their first milliseconds, and while a link is down no new task reaches its executor).
     */
    static final RingDriver.Workload PACED_WORKLOAD = new RingDriver.Workload(400_000, 64, 2, 4_000, true);
    static final Duration JOB_DEADLINE = Duration.ofMinutes(4);
    /** The TPC-DS tables' generation (on the driver) and write: the session's longest job (155 s on a loaded 2-core machine). */
    static final Duration TABLES_DEADLINE = Duration.ofMinutes(10);
    /**
     * The TPC-DS query every case runs too, over tables in the ring's HDFS: store_sales joined with date_dim and item,
     * aggregated and ordered (three shuffles and a scan of several blocks per table; RingCluster turns broadcast joins off).
     */
    static final String QUERY = "q3";
    static final List<String> TABLES = List.of("store_sales", "date_dim", "item");
    /** The tables' columns q3 (and q55) read: the only ones written (Parquet reads no others). */
    static final List<String> COLUMNS = List.of("ss_sold_date_sk", "ss_item_sk", "ss_ext_sales_price", "d_date_sk", "d_year", "d_moy",
            "i_item_sk", "i_brand_id", "i_brand", "i_manufact_id", "i_manager_id");
    /** Where the tables live in the ring's HDFS (written once per session, replication 2). */
    static final String TPCDS_BASE = "/ring/tpcds";

    /** The faults of the fault-ring issue's section 2 that the host ring runs (netem needs sch_netem: the VM ring). */
    public enum Fault {
        LINK_DOWN_150MS("one worker host's link down 150 ms mid-shuffle (under the 200 ms detection window)"),
        LINK_DOWN_2S("one worker host's link down 2 s mid-shuffle (past the detection window)"),
        LINK_DOWN_30S("one worker host's link down 30 s mid-shuffle (past the reconnect attempts)"),
        ALL_LINKS_FLAP_1S("every link down 1 s at once mid-shuffle (a switch flap)"),
        STOP_EXECUTOR_3S("SIGSTOP of a mapper executor for 3 s, then SIGCONT, while reducers READ from it"),
        KILL_EXECUTOR("kill -9 of a mapper executor mid-READ (its outputs recomputed)"),
        REPLACE_EXECUTOR("kill -9 of an executor; its Worker starts a new one at the same address and ports while reducers READ"),
        KILL_DATANODE("kill -9 of a DataNode mid-read of an HDFS file (the client goes on from the other replica)"),
        FLIP_READ_PAYLOAD("a bit flipped in READ payloads above TCP's checksum (a relay process) while a reader READs real map outputs");

        final String description;

        Fault(String description) {
            this.description = description;
        }

        /**
         * Link faults and a stopped or killed mapper executor: injected while every reduce task of {@link #PACED_WORKLOAD}
         * READs ({@code RingJob.ReadingMark}), so the fault meets READs in flight and the detection window, the
         * reconnects and the fallbacks are what is tested.
         */
        boolean waitsForReads() {
            return this == LINK_DOWN_150MS || this == LINK_DOWN_2S || this == LINK_DOWN_30S || this == ALL_LINKS_FLAP_1S
                    || this == STOP_EXECUTOR_3S || this == KILL_EXECUTOR;
        }
    }

    /**
     * One fault's outcome: the report's row. {@code resources}: each long-lived process's resources before the fault
     * and once settled after it; {@code leaks}: what did not come back to its baseline within {@link #SETTLE} ("" when
     * everything did); {@code staleReads}: in REPLACE_EXECUTOR, what READs with the replaced executor's descriptors got
     * ({@link RingStaleRead}'s result); in FLIP_READ_PAYLOAD, what the relay flipped and what the reader got and caught
     * ({@link RingFlipRelay}, {@link RingFlipRead}); in ALL_LINKS_FLAP_1S, the reconnect storm across the executors
     * ({@link ReconnectStorm}: each one's first attempt after the cut and after link-up, their spread); "" in the other cases.
     */
    public record Row(Fault fault, boolean ok, String detail, long jobMillis, long extraMillis, long recoveredMillis, long suspected,
            long reconnects, long fallbackFetch, long fallbackShuffle, long fallbackApp, int stageResubmits, long rdmaBlocks, int replaced,
            long settledMillis, String resources, String leaks, String staleReads, long lost, long duplicated, QueryRow query) {
        /** A row without the query's part (a ring without HDFS runs none). */
        public Row(Fault fault, boolean ok, String detail, long jobMillis, long extraMillis, long recoveredMillis, long suspected,
                long reconnects, long fallbackFetch, long fallbackShuffle, long fallbackApp, int stageResubmits, long rdmaBlocks, int replaced,
                long settledMillis, String resources, String leaks, String staleReads, long lost, long duplicated) {
            this(fault, ok, detail, jobMillis, extraMillis, recoveredMillis, suspected, reconnects, fallbackFetch, fallbackShuffle, fallbackApp,
                    stageResubmits, rdmaBlocks, replaced, settledMillis, resources, leaks, staleReads, lost, duplicated, QueryRow.NONE);
        }

        Row withQuery(QueryRow q) {
            return new Row(fault, ok, detail, jobMillis, extraMillis, recoveredMillis, suspected, reconnects, fallbackFetch, fallbackShuffle,
                    fallbackApp, stageResubmits, rdmaBlocks, replaced, settledMillis, resources, leaks, staleReads, lost, duplicated, q);
        }

        public static String header() {
            return String.format(Locale.ROOT, "%-18s %-6s %8s %9s %10s %5s %5s %6s %5s %5s %6s %7s %4s %7s  %s", "case", "result", "job ms", "+ms",
                    "recover ms", "susp", "recon", "fb.fet", "fb.sh", "fb.ap", "stage.", "rdma.bl", "repl", "settle",
                    "resources (baseline->settled) / leaks");
        }

        public String line() {
            return String.format(Locale.ROOT, "%-18s %-6s %8d %9d %10d %5d %5d %6d %5d %5d %6d %7d %4d %7d  %s", fault, ok ? "same" : "DIFF", jobMillis,
                    extraMillis, recoveredMillis, suspected, reconnects, fallbackFetch, fallbackShuffle, fallbackApp, stageResubmits, rdmaBlocks,
                    replaced, settledMillis, leaks.isEmpty() ? "back to baseline" : "LEAK " + leaks)
                    + (resources.isEmpty() ? "" : "\n    " + resources.replace("; ", "\n    "))
                    + (staleReads.isEmpty() ? "" : "\n    " + switch (fault) {
                        case FLIP_READ_PAYLOAD -> "flipped READs: ";
                        case ALL_LINKS_FLAP_1S -> "reconnect storm: ";
                        default -> "stale descriptors: ";
                    } + staleReads)
                    + (detail.isEmpty() ? "" : "\n    " + detail)
                    + (query == QueryRow.NONE ? "" : "\n    " + query.line());
        }
    }

    /**
     * The TPC-DS query's outcome under the same fault, injected again while the query runs: its rows equal the
     * baseline's (sort shuffle, stock HDFS reader) or not, its time and the time past the second clean RDMA run's, from the
     * fault's end to its result, the fallbacks (shuffle fetches to Netty, HDFS block reads to TCP), stage resubmits,
     * RDMA blocks fetched, and the baseline's rows lost or duplicated.
     */
    public record QueryRow(String query, boolean ok, long jobMillis, long extraMillis, long recoveredMillis, long fallbackFetch,
            long hdfsFallbacks, int stageResubmits, long rdmaBlocks, long lost, long duplicated, String detail, long remoteBlocks,
            String rdmaBlocksNote, long settledMillis, String resources, String leaks) {
        static final QueryRow NONE = notRun("none", "no TPC-DS query (a ring without HDFS)");

        static QueryRow notRun(String query, String why) {
            return new QueryRow(query, true, 0, 0, 0, 0, 0, 0, 0, 0, 0, why, 0, "", 0, "", "");
        }

        public String line() {
            return String.format(Locale.ROOT, "tpcds %s: %s job %d ms (%+d), recovered %d ms, fb.fetch %d, hdfs fb %d, stage resubmits %d,"
                    + " rdma blocks %d (of %d remote in Spark's metrics%s), lost %d, duplicated %d, settle %d ms %s%s", query, ok ? "same rows" : "DIFF",
                    jobMillis, extraMillis, recoveredMillis, fallbackFetch, hdfsFallbacks, stageResubmits, rdmaBlocks, remoteBlocks,
                    rdmaBlocksNote.isEmpty() ? "" : ": " + rdmaBlocksNote, lost, duplicated, settledMillis,
                    leaks.isEmpty() ? "back to baseline" : "LEAK " + leaks, detail.isEmpty() ? "" : "; " + detail)
                    + (resources.isEmpty() ? "" : "\n      " + resources.replace("; ", "\n      "));
        }
    }

    /**
     * Why the query's RDMA block count is what it is, or "" when Spark's remote blocks went over RDMA or fell back as
     * counted. A query whose tasks reading shuffle output all ran on one executor (the other dead, cut off, or slow
     * through the scans, and Spark's reduce locality then keeps the reducers with the map outputs) fetches no remote
     * block: nothing for RDMA (or Netty) to carry. Remote blocks that neither went over RDMA nor fell back, with every
     * executor still there to count them, are UNEXPLAINED (and fail the case).
     */
    static String rdmaBlocksNote(long rdmaBlocks, long fallbackFetch, RingDriver.QueryResult r, boolean executorsLost) {
        if (r.failed()) {
            return "";
        }
        if (r.remoteBlocks() == 0) {
            String[] readers = r.readers().equals("none") ? new String[0] : r.readers().split(",");
            return "0 remote: all " + r.localBlocks() + " shuffle blocks were local, nothing to READ: "
                    + (readers.length == 1 ? "every task reading shuffle output ran on executor " + readers[0].replace(":", " (") + " tasks)"
                            : "the tasks reading shuffle output (by executor: " + r.readers() + ") each read only its own executor's map outputs");
        }
        if (rdmaBlocks + fallbackFetch == 0 && !executorsLost) {
            return "UNEXPLAINED: Spark fetched " + r.remoteBlocks() + " remote blocks, none over RDMA and none fell back";
        }
        return "";
    }

    /** The ports of the project's servers in the ring (executors', DataNodes', the driver's registry): their sockets are the transport's. */
    static final Set<Integer> TRANSPORT_PORTS = Set.of(RingCluster.RDMA_PORT, RingCluster.REGISTRY_PORT, RingCluster.DATANODE_RDMA);

    /** How long a fault's processes may take, once its job is done, to give back what they held (idle timeouts, reconnects). */
    static final Duration SETTLE = Duration.ofSeconds(90);

    public final HostRing ring;
    public final RingCluster cluster;
    final RingDriver.Result sortBaseline;
    /** {@link #PACED_WORKLOAD} under sort shuffle, and a clean RDMA run of it (warm, what the link faults' extra time is measured against). */
    final RingDriver.Result sortPaced;
    private final RingDriver.Result cleanPaced;
    final RingDriver.Result rdmaBaseline;
    final RingDriver.Reports reportsAfterBaseline;
    /** A clean RDMA run after the first (warm): what a fault's extra time is measured against. */
    final RingDriver.Result clean;
    /** The TPC-DS query under sort shuffle with the stock HDFS reader (the baseline), and its first RDMA run; null without HDFS. */
    final RingDriver.QueryResult sortQuery;
    final RingDriver.QueryResult rdmaQuery;
    /** The executors' reports after the RDMA application's first query (against {@link #reportsAfterBaseline}: what it did). */
    final RingDriver.Reports reportsAfterQuery;
    /** A second clean RDMA run of the query, warm like the faulted ones: what a fault's extra time is measured against. */
    private final RingDriver.QueryResult cleanQuery;
    private final RingDriver rdma;
    /** The executors that have run a whole RDMA shuffle (the baseline of a fault is measured with these only). */
    private Set<String> warmExecutors;
    /**
     * The executors and DataNodes (by pid) that have run or served the TPC-DS query ({@link #queryParticipants}): the
     * baseline of a fault on the query is measured with these only.
     */
    private Set<String> queryWarm;

    private RingSession(HostRing ring, RingCluster cluster, RingDriver.Result sort, RingDriver rdma, RingDriver.Result rdmaBaseline,
            RingDriver.Result clean, RingDriver.Reports reports, RingDriver.QueryResult sortQuery, RingDriver.QueryResult rdmaQuery,
            RingDriver.Reports reportsAfterQuery, RingDriver.QueryResult cleanQuery, RingDriver.Result sortPaced, RingDriver.Result cleanPaced) {
        this.clean = clean;
        this.sortPaced = sortPaced;
        this.cleanPaced = cleanPaced;
        this.cleanQuery = cleanQuery;
        this.sortQuery = sortQuery;
        this.rdmaQuery = rdmaQuery;
        this.reportsAfterQuery = reportsAfterQuery;
        this.ring = ring;
        this.cluster = cluster;
        this.sortBaseline = sort;
        this.rdma = rdma;
        this.rdmaBaseline = rdmaBaseline;
        this.reportsAfterBaseline = reports;
        this.warmExecutors = Set.copyOf(reports.executors().keySet());
        this.queryWarm = reportsAfterQuery == null ? Set.of() : queryParticipants(reportsAfterQuery);
    }

    /**
     * The names' prefix of the session's ring ({@code fring-} by default): its own, so that a ring built beside it removes
     * nothing of it (CI runs HostRingTest beside the Spark lines' builds, whose LineDeploymentTest builds rings of the
     * default prefix).
     */
    static final String RING_PREFIX = "f" + HostRing.PREFIX;

    /** Builds the ring, starts the cluster, runs the baseline with sort shuffle, then submits the RDMA application. */
    public static RingSession start(RingLines lines, Path dir, Duration limit) {
        HostRing ring = HostRing.create(RING_PREFIX, 3);
        RingCluster cluster = null;
        try {
            cluster = RingCluster.start(ring, lines, dir, limit);
            RingDriver.Result sort;
            RingDriver.Result sortPaced;
            RingDriver.QueryResult sortQuery = null;
            try (RingDriver baseline = cluster.submit("sort", false, Map.of())) {
                sort = baseline.shuffle("baseline", WORKLOAD, null, JOB_DEADLINE);
                sortPaced = baseline.shuffle("baseline-paced", PACED_WORKLOAD, null, JOB_DEADLINE);
                if (!sortPaced.equalsExpected()) {
                    throw new IllegalStateException("the paced shuffle under sort shuffle gave " + sortPaced + "\n" + cluster.tails());
                }
                if (cluster.hdfs()) {
                    long t0 = System.nanoTime();
                    baseline.writeTpcds(TPCDS_BASE, COLUMNS, TABLES, TABLES_DEADLINE);
                    long t1 = System.nanoTime();
                    sortQuery = baseline.query(QUERY, TPCDS_BASE, queryOut(cluster, "sort"), TABLES, null, null, JOB_DEADLINE);
                    System.out.printf(Locale.ROOT, "ring: TPC-DS tables %s (scale %s) written into HDFS in %d ms; %s under sort shuffle, stock HDFS:"
                            + " %s%n", TABLES, TpcdsTables.SCALE, (t1 - t0) / 1_000_000, QUERY, sortQuery);
                    if (sortQuery.failed() || sortQuery.rows() == 0) {
                        throw new IllegalStateException("the TPC-DS baseline gave " + sortQuery + "\n" + cluster.tails());
                    }
                }
            }
            RingDriver rdma = cluster.submit("rdma", true, Map.of());
            RingDriver.Result first = rdma.shuffle("baseline", WORKLOAD, null, JOB_DEADLINE);
            RingDriver.Reports reports = rdma.report(cluster.workers, Duration.ofMinutes(2));
            RingDriver.QueryResult rdmaQuery = null;
            RingDriver.Reports afterQuery = null;
            RingDriver.QueryResult cleanQuery = null;
            if (sortQuery != null) {
                rdmaQuery = rdma.query(QUERY, TPCDS_BASE, queryOut(cluster, "rdma"), TABLES, null, null, JOB_DEADLINE);
                afterQuery = rdma.report(cluster.workers, Duration.ofMinutes(2));
                cleanQuery = rdma.query(QUERY, TPCDS_BASE, queryOut(cluster, "clean"), TABLES, null, null, JOB_DEADLINE);
                System.out.println("ring: " + QUERY + " under RDMA shuffle, HDFS plug-in: " + rdmaQuery + "\nring: " + QUERY + " again: " + cleanQuery);
                if (!cleanQuery.equalsBaseline(sortQuery)) {
                    throw new IllegalStateException("the clean RDMA run of " + QUERY + " gave " + cleanQuery + " against " + sortQuery);
                }
            }
            // a second clean run, warm like the faulted ones: the time a fault adds is measured against it
            RingDriver.Result clean = rdma.shuffle("clean", WORKLOAD, null, JOB_DEADLINE);
            RingDriver.Result cleanPaced = rdma.shuffle("clean-paced", PACED_WORKLOAD, null, JOB_DEADLINE);
            System.out.println("ring: sort shuffle " + sort + "\nring: rdma shuffle " + first + "\nring: rdma shuffle again " + clean
                    + "\nring: the paced shuffle, sort " + sortPaced + ", rdma " + cleanPaced);
            if (!cleanPaced.equalsExpected()) {
                throw new IllegalStateException("the clean RDMA run of the paced shuffle gave " + cleanPaced + "\n" + cluster.tails());
            }
            return new RingSession(ring, cluster, sort, rdma, first, clean, reports, sortQuery, rdmaQuery, afterQuery, cleanQuery, sortPaced,
                    cleanPaced);
        } catch (RuntimeException | Error e) {
            if (cluster != null) {
                System.out.println("ring: start failed: " + e.getMessage() + "\n" + cluster.tails());
                cluster.close();
            }
            ring.close();
            throw e;
        }
    }

    // ---- the deployment checks

    /**
     * Every listening socket in a host's namespace is on that host's address (or its own loopback), the expected
     * daemons listen there, and what each advertises is its own address: the Master's workers, the executors' block
     * managers (each a child of its host's Worker), the NameNode's DataNodes.
     */
    public void assertAddresses() {
        List<String> problems = new ArrayList<>();
        Map<Integer, List<Integer>> expected = Map.of(0, List.of(RingCluster.MASTER_PORT, RingCluster.MASTER_UI, RingCluster.DRIVER_PORT,
                RingCluster.BLOCK_MANAGER_PORT, RingCluster.NAMENODE_RPC, RingCluster.NAMENODE_HTTP), 1, workerPorts(), 2, workerPorts());
        for (int h = 0; h < ring.hosts(); h++) {
            List<String> listening = ring.listening(h);
            System.out.println("ring: host " + h + " (" + ring.namespace(h) + ", " + ring.address(h) + ") listens on " + listening);
            for (String local : listening) {
                String address = local.substring(0, local.lastIndexOf(':'));
                if (!address.equals(ring.address(h)) && !address.startsWith("127.")) {
                    problems.add("host " + h + ": a socket listens on " + local + ", not on " + ring.address(h));
                }
            }
            for (int port : expected.get(h)) {
                if (!listening.contains(ring.address(h) + ":" + port)) {
                    problems.add("host " + h + ": nothing listens on " + ring.address(h) + ":" + port);
                }
            }
        }
        String masterJson = cluster.curl(0, "http://" + ring.address(0) + ":" + RingCluster.MASTER_UI + "/json/");
        Set<String> workerHosts = new HashSet<>(RingCluster.jsonStrings(masterJson, "host"));
        if (!workerHosts.equals(Set.of(ring.address(1), ring.address(2)))) {
            problems.add("the Master advertises workers at " + workerHosts);
        }
        String liveNodes = cluster.curl(0, cluster.nameNodeJmx("Hadoop:service=NameNode,name=NameNodeInfo"));
        for (int w = 1; w <= cluster.workers; w++) {
            if (!liveNodes.contains(ring.address(w) + ":" + RingCluster.DATANODE_XFER)) {
                problems.add("the NameNode does not list DataNode " + ring.address(w) + ":" + RingCluster.DATANODE_XFER);
            }
        }
        RingDriver.Reports reports = rdma.report(cluster.workers, Duration.ofMinutes(2));
        for (Map<String, String> r : reports.executors().values()) {
            int host = ring.hostOf(r.get("host"));
            long pid = RingDriver.number(r, "pid");
            if (host < 1 || cluster.executorsOn(host).stream().noneMatch(p -> p.pid() == pid)) {
                problems.add("executor " + r.get("executorId") + " (pid " + pid + ") advertises " + r.get("host")
                        + ", which is not the host whose Worker runs it");
            }
        }
        if (!problems.isEmpty()) {
            throw new AssertionError("wrong addresses:\n  " + String.join("\n  ", problems));
        }
    }

    private static List<Integer> workerPorts() {
        return List.of(RingCluster.WORKER_PORT, RingCluster.WORKER_UI, RingCluster.BLOCK_MANAGER_PORT, RingCluster.RDMA_PORT,
                RingCluster.DATANODE_XFER, RingCluster.DATANODE_HTTP, RingCluster.DATANODE_IPC, RingCluster.DATANODE_RDMA);
    }

    // ---- faults

    /** Runs {@code fault} against the running cluster; the row says whether the output equals the baseline. */
    public Row run(Fault fault) {
        Row row = fault == Fault.KILL_DATANODE ? killDataNodeMidRead() : sparkFault(fault);
        return row.withQuery(queryUnder(fault));
    }

    /** The local file a query run's sorted rows go to (the application writes it; the harness compares it). */
    private static Path queryOut(RingCluster cluster, String run) {
        return cluster.dir.resolve("tpcds-" + QUERY + "-" + run + ".rows");
    }

    /**
     * The TPC-DS query with {@code fault} injected again while it runs: KILL_DATANODE once its first task is done (its
     * scans reading HDFS; DataNode 1 started again after), every other fault when its first stage reading shuffle
     * output is submitted. Its rows are compared with the sort-shuffle, stock-HDFS baseline's.
     */
    private QueryRow queryUnder(Fault fault) {
        if (sortQuery == null) {
            return QueryRow.NONE;
        }
        if (!hitsTheQuery(fault)) {
            return QueryRow.notRun("none", "not run under " + fault + ": its relay carries only its own reader's READs");
        }
        RingDriver.Reports before = warmQueryReport();
        Map<String, ProcessResources> baseline = resources(before);
        StringBuilder detail = new StringBuilder();
        long[] healed = {0};
        String moment = fault == Fault.KILL_DATANODE ? "RING-READING" : "RING-REDUCING";
        RingDriver.QueryResult r;
        try {
            r = rdma.query(QUERY, TPCDS_BASE, queryOut(cluster, fault.name().toLowerCase(Locale.ROOT)), TABLES, moment, () -> {
                injectIntoQuery(fault, detail);
                healed[0] = System.nanoTime();
            }, JOB_DEADLINE);
        } finally {
            if (fault == Fault.KILL_DATANODE) {
                cluster.restartDataNode(1);
            }
        }
        long recovered = (System.nanoTime() - healed[0]) / 1_000_000;
        RingDriver.Reports after = rdma.report(cluster.workers, Duration.ofMinutes(3));
        boolean ok = r.equalsBaseline(sortQuery);
        long[] lostAndDuplicated = r.failed() ? new long[] {sortQuery.rows(), 0} : r.lostAndDuplicated(sortQuery);
        if (!ok) {
            detail.append(" result ").append(r).append(" against the baseline ").append(sortQuery);
        }
        long fallbacks = delta(before, after, ShuffleMetrics.FALLBACK_FETCH);
        long blocks = delta(before, after, ShuffleMetrics.FETCH_RDMA_BLOCKS);
        boolean executorsLost = !after.executors().keySet().containsAll(before.executors().keySet());
        // the same settle as the shuffle's: what the query's HDFS reads and shuffles held comes back too
        Settled settled = settle(baseline);
        return new QueryRow(QUERY, ok, r.millis(), r.millis() - cleanQuery.millis(), recovered, fallbacks, delta(before, after, "hdfs.client.fallbacks"),
                r.stageResubmits(), blocks, lostAndDuplicated[0], lostAndDuplicated[1], detail.toString().trim(), r.remoteBlocks(),
                rdmaBlocksNote(blocks, fallbacks, r, executorsLost), settled.millis, settled.resources, settled.leaks);
    }

    /** Whether {@code fault} can hit the TPC-DS query (FLIP_READ_PAYLOAD's relay sits in front of its own reader only). */
    public static boolean hitsTheQuery(Fault fault) {
        return fault != Fault.FLIP_READ_PAYLOAD;
    }

    /** {@code fault} into a running query: as into the shuffle, but an executor replaced without a stale reader. */
    private void injectIntoQuery(Fault fault, StringBuilder detail) {
        switch (fault) {
            case KILL_DATANODE -> {
                cluster.dataNodes.get(0).kill();
                detail.append("DataNode 1 killed while the query's scans read");
            }
            case REPLACE_EXECUTOR -> {
                ProcessHandle old = executor(1);
                old.destroyForcibly();
                String port = ring.address(1) + ":" + RingCluster.RDMA_PORT;
                RingCluster.waitUntil(() -> cluster.executorsOn(1).stream().anyMatch(p -> p.pid() != old.pid()) && ring.listening(1).contains(port),
                        Duration.ofMinutes(2), () -> "a new executor on host 1 listens on " + port);
                detail.append("executor pid ").append(old.pid()).append(" replaced at ").append(port);
            }
            default -> inject(fault, detail);
        }
    }

    private Row sparkFault(Fault fault) {
        RingDriver.Reports before = warmReport();
        Map<String, ProcessResources> baseline = resources(before);
        long[] healed = {0};
        StringBuilder detail = new StringBuilder();
        String name = fault.name().toLowerCase(Locale.ROOT) + "-" + System.nanoTime() % 100000;
        RingProcess stale = fault == Fault.REPLACE_EXECUTOR ? cluster.staleReader(1) : null;
        RingProcess[] flip = fault == Fault.FLIP_READ_PAYLOAD ? cluster.flipReaders(1, FLIP_EVERY, FLIP_MAX) : null;
        String[] staleReads = {""};
        boolean flap = fault == Fault.ALL_LINKS_FLAP_1S;
        boolean paced = fault.waitsForReads();
        RingDriver.Workload workload = paced ? PACED_WORKLOAD : WORKLOAD;
        RingDriver.Result sortRun = paced ? sortPaced : sortBaseline;
        RingDriver.Result cleanRun = paced ? cleanPaced : clean;
        long[] cut = {0, 0}; // the fault's start and end (the flap's links down and up again), epoch microseconds
        RingDriver.Result r;
        try {
            r = rdma.shuffle(name, workload, () -> {
                if (stale != null) {
                    staleReads[0] = replaceExecutor(before, stale, detail);
                } else if (flip != null) {
                    staleReads[0] = flipReadPayloads(before, flip);
                } else if (paced) {
                    injectWhileReading(fault, name, detail, cut);
                } else {
                    inject(fault, detail);
                }
                healed[0] = System.nanoTime();
            }, JOB_DEADLINE);
        } finally {
            if (stale != null) {
                stale.kill();
            }
            if (flip != null) {
                Arrays.stream(flip).forEach(RingProcess::kill);
            }
        }
        long recovered = (System.nanoTime() - healed[0]) / 1_000_000;
        RingDriver.Reports after = rdma.report(cluster.workers, Duration.ofMinutes(3));
        boolean ok = r.equalsExpected() && r.hash().equals(sortRun.hash()) && r.count() == sortRun.count();
        if (r.failed()) {
            detail.append(" the job failed: ").append(r.failure());
        }
        if (!ok) {
            detail.append(" result ").append(r).append(" against the baseline ").append(sortRun);
        }
        if (flap) {
            staleReads[0] = storm(before, after, cut[0], cut[1]);
        }
        int replaced = (int) after.executors().keySet().stream().filter(id -> !before.executors().containsKey(id)).count();
        Settled settled = settle(baseline);
        return new Row(fault, ok, detail.toString().trim(), r.millis(), r.millis() - cleanRun.millis(), recovered,
                deltaMatching(before, after, "_to_suspect"), delta(before, after, "rdma.reconnects"),
                delta(before, after, ShuffleMetrics.FALLBACK_FETCH),
                RingDriver.number(after.driver(), ShuffleMetrics.FALLBACK_SHUFFLE) - RingDriver.number(before.driver(), ShuffleMetrics.FALLBACK_SHUFFLE),
                delta(before, after, ShuffleMetrics.FALLBACK_APP), r.stageResubmits(), delta(before, after, ShuffleMetrics.FETCH_RDMA_BLOCKS),
                replaced, settled.millis, settled.resources, settled.leaks, staleReads[0], r.lost(), r.duplicated());
    }

    /**
     * The executors' reports once every executor has been through a whole RDMA shuffle: after a fault replaced one, a
     * clean shuffle first, so that the replacement's pool, its server and its peers' channels to it exist before the
     * baseline is measured (they are what the first shuffle creates, not what a fault leaks).
     */
    private RingDriver.Reports warmReport() {
        RingDriver.Reports report = rdma.report(cluster.workers, Duration.ofMinutes(2));
        if (!report.executors().keySet().equals(warmExecutors)) {
            RingDriver.Result warm = rdma.shuffle("warm-" + System.nanoTime() % 100000, WORKLOAD, null, JOB_DEADLINE);
            if (!warm.equalsExpected()) {
                throw new IllegalStateException("the clean shuffle after a replaced executor gave " + warm + "\n" + cluster.tails());
            }
            report = rdma.report(cluster.workers, Duration.ofMinutes(2));
            warmExecutors = Set.copyOf(report.executors().keySet());
        }
        return report;
    }

    /** The executors (by id) and the running DataNodes (by pid) of the ring now. */
    private Set<String> queryParticipants(RingDriver.Reports report) {
        Set<String> out = new java.util.TreeSet<>(report.executors().keySet());
        for (int w = 1; w <= cluster.dataNodes.size(); w++) {
            RingProcess dn = cluster.dataNodes.get(w - 1);
            if (dn.isAlive()) {
                out.add("datanode " + w + " pid " + dn.pid());
            }
        }
        return out;
    }

    /**
     * The executors' reports once every executor and DataNode has run or served the TPC-DS query: after a fault replaced
     * an executor or restarted a DataNode, a clean run of the query first, so that the executor's HDFS client (node,
     * pool, threads) and the DataNode's transport threads (a lane's thread starts with its first channel) exist before
     * the baseline is measured.
     */
    private RingDriver.Reports warmQueryReport() {
        RingDriver.Reports report = rdma.report(cluster.workers, Duration.ofMinutes(2));
        if (!queryParticipants(report).equals(queryWarm)) {
            RingDriver.QueryResult warm = rdma.query(QUERY, TPCDS_BASE, queryOut(cluster, "warm"), TABLES, null, null, JOB_DEADLINE);
            if (!warm.equalsBaseline(sortQuery)) {
                throw new IllegalStateException("the clean run of " + QUERY + " after a replaced executor gave " + warm + "\n" + cluster.tails());
            }
            report = rdma.report(cluster.workers, Duration.ofMinutes(2));
            queryWarm = queryParticipants(report);
        }
        return report;
    }

    /** The settled state after a fault: how long it took, each process's baseline->settled resources, what leaked. */
    private record Settled(long millis, String resources, String leaks) {
    }

    /**
     * The resources of every long-lived process running the project's code (each executor, each DataNode), from
     * {@code /proc} ({@link ProcessResources}) and the registered bytes their metrics report (the executors' pools,
     * the DataNodes' {@code RdmaBlockService} bean). {@code report}: the executors' reports (pid, registered bytes).
     */
    private Map<String, ProcessResources> resources(RingDriver.Reports report) {
        Map<String, ProcessResources> out = new java.util.TreeMap<>();
        for (Map<String, String> r : report.executors().values()) {
            ProcessResources p = ProcessResources.of("executor " + r.get("executorId"), RingDriver.number(r, "pid"), registered(r), 0,
                    TRANSPORT_PORTS);
            if (p != null) {
                out.put(p.name(), p);
            }
        }
        for (int w = 1; w <= cluster.dataNodes.size(); w++) {
            RingProcess dn = cluster.dataNodes.get(w - 1);
            long registered = RingCluster.jsonLong(cluster.dataNodeBean(w), "RegisteredBytes");
            // its region cache keeps the replicas it served: at most one of each block of the ring's file
            ProcessResources p = dn.isAlive() && registered >= 0 ? ProcessResources.of("datanode " + w, dn.pid(), registered, RingCluster.HDFS_FILE,
                    TRANSPORT_PORTS)
                    : null;
            if (p != null) {
                out.put(p.name(), p);
            }
        }
        return out;
    }

    /**
     * Polls (every half second, at most {@link #SETTLE}) until every process of {@code baseline} that still runs (the
     * same pid: a replaced process has no baseline) holds no more descriptors, rdma-* threads and registered bytes
     * than it did before the fault. A process that never gets there is a leak: the row names it.
     */
    private Settled settle(Map<String, ProcessResources> baseline) {
        long started = System.nanoTime();
        long end = started + SETTLE.toNanos();
        String waitedFor = "";
        Map<String, Integer> warmRdmaThreads = new HashMap<>(); // by role: the most a process of it held at the baseline
        Map<String, Integer> warmPeerGroup = new HashMap<>(); // by role: the most sockets a process of it held to one peer
        for (ProcessResources b : baseline.values()) {
            warmRdmaThreads.merge(b.role(), b.rdmaThreads(), Math::max);
            warmPeerGroup.merge(b.role(), b.largestPeerGroup(), Math::max);
        }
        while (true) {
            Map<String, ProcessResources> now = resources(rdma.report(cluster.workers, Duration.ofMinutes(2)));
            List<String> changes = new ArrayList<>();
            List<String> leaks = new ArrayList<>();
            for (Map.Entry<String, ProcessResources> e : now.entrySet()) {
                ProcessResources b = baseline.get(e.getKey());
                if (b == null || b.pid() != e.getValue().pid()) {
                    changes.add(e.getKey() + ": replaced (pid " + e.getValue().pid() + "), no baseline");
                    continue;
                }
                changes.add(e.getValue().change(b));
                String leak = e.getValue().leaksAgainst(b, warmRdmaThreads.getOrDefault(b.role(), 0), warmPeerGroup.getOrDefault(b.role(), 0));
                if (!leak.isEmpty()) {
                    leaks.add(e.getKey() + " (pid " + b.pid() + "): " + leak);
                }
            }
            long millis = (System.nanoTime() - started) / 1_000_000;
            if (leaks.isEmpty() || System.nanoTime() > end) {
                if (leaks.isEmpty() && !waitedFor.isEmpty()) {
                    changes.add("above the baseline until settled: " + waitedFor);
                }
                return new Settled(millis, String.join("; ", changes), String.join(", ", leaks));
            }
            waitedFor = String.join(", ", leaks);
            try {
                Thread.sleep(500); // the poll's period
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting for the ring to settle");
            }
        }
    }

    /** The growth of every {@code rdma.state.*} counter whose name ends with {@code suffix} (channel state transitions). */
    private static long deltaMatching(RingDriver.Reports before, RingDriver.Reports after, String suffix) {
        long sum = 0;
        for (Map.Entry<String, Map<String, String>> e : after.executors().entrySet()) {
            Map<String, String> b = before.executors().get(e.getKey());
            for (String name : e.getValue().keySet()) {
                if (name.startsWith("rdma.state.") && name.endsWith(suffix)) {
                    sum += RingDriver.number(e.getValue(), name) - (b == null ? 0 : RingDriver.number(b, name));
                }
            }
        }
        return sum;
    }

    /** A counter's growth over the executors (a replacement executor counts from 0; a killed one's counters are gone with it). */
    private static long delta(RingDriver.Reports before, RingDriver.Reports after, String counter) {
        long sum = 0;
        for (Map.Entry<String, Map<String, String>> e : after.executors().entrySet()) {
            Map<String, String> b = before.executors().get(e.getKey());
            sum += RingDriver.number(e.getValue(), counter) - (b == null ? 0 : RingDriver.number(b, counter));
        }
        return sum;
    }

    /**
     * The bytes an executor holds registered for work: all it registered, less its pools' idle chunks (a pool's
     * registered bytes above its in-use bytes). A pool keeps the chunks it grew to as its working set (bounded by
     * {@code pool.capacity}), and which executor reaches a new working set depends on where Spark runs the reducers
     * (one q3 ran 22 of its reduce tasks on the executor that had run 1 before, and its pool grew a chunk, all of it idle
     * after); a buffer not given back stays in use and still counts.
     */
    private static long registered(Map<String, String> report) {
        long registered = 0;
        for (Map.Entry<String, String> e : report.entrySet()) {
            if (e.getKey().endsWith(".registeredBytes")) {
                registered += RingDriver.number(report, e.getKey());
                String pool = e.getKey().substring(0, e.getKey().length() - ".registeredBytes".length());
                if (pool.startsWith("rdma.pool.") && report.containsKey(pool + ".inUseBytes")) {
                    registered -= RingDriver.number(report, e.getKey()) - RingDriver.number(report, pool + ".inUseBytes");
                }
            }
        }
        return registered;
    }

    private void inject(Fault fault, StringBuilder detail) {
        switch (fault) {
            case LINK_DOWN_150MS -> linkDown(List.of(1), 150);
            case LINK_DOWN_2S -> linkDown(List.of(1), 2_000);
            case LINK_DOWN_30S -> linkDown(List.of(1), 30_000);
            case ALL_LINKS_FLAP_1S -> linkDown(List.of(0, 1, 2), 1_000);
            case STOP_EXECUTOR_3S -> {
                long pid = executor(1).pid();
                HostRing.sh("kill", "-STOP", String.valueOf(pid));
                try {
                    pause(3_000);
                } finally {
                    HostRing.sh("kill", "-CONT", String.valueOf(pid));
                }
            }
            case KILL_EXECUTOR -> executor(1).destroyForcibly();
            default -> throw new IllegalArgumentException(fault.name());
        }
    }

    /**
     * REPLACE_EXECUTOR: {@code stale} (a reducer's client outside Spark) LOCATEs blocks of two of this shuffle's maps on
     * host 1's executor and keeps their descriptors; the executor is killed with -9, its Worker starts a new one at
     * the same address and ports, and {@code stale} READs with the old descriptors there. Returns what they got.
     */
    private String replaceExecutor(RingDriver.Reports before, RingProcess stale, StringBuilder detail) {
        ProcessHandle old = executor(1);
        String oldId = before.executors().values().stream().filter(e -> RingDriver.number(e, "pid") == old.pid()).map(e -> e.get("executorId"))
                .findFirst().orElseThrow(() -> new IllegalStateException("no report of the executor with pid " + old.pid() + ": " + before));
        Map<String, String> maps = lastMaps();
        String ids = maps.getOrDefault(oldId, "");
        if (ids.isEmpty()) {
            throw new IllegalStateException("executor " + oldId + " ran none of the shuffle's maps: " + rdma.lastMaps);
        }
        String twoMaps = String.join(",", Arrays.asList(ids.split(",")).subList(0, Math.min(2, ids.split(",").length)));
        stale.send("locate " + maps.get("shuffle") + " " + WORKLOAD.reduces() + " " + twoMaps);
        String located = RingCluster.awaitLog(stale, "RING-STALE-LOCATED", Duration.ofMinutes(1));
        old.destroyForcibly();
        String port = ring.address(1) + ":" + RingCluster.RDMA_PORT;
        RingCluster.waitUntil(() -> cluster.executorsOn(1).stream().anyMatch(p -> p.pid() != old.pid())
                && ring.listening(1).contains(port), Duration.ofMinutes(2), () -> "a new executor on host 1 listens on " + port);
        detail.append("replacement executor pid ").append(cluster.executorsOn(1).get(0).pid()).append(" listens on ").append(port)
                .append(" (the old one, executor ").append(oldId).append(", pid ").append(old.pid()).append(", did too)");
        stale.send("read");
        String result = RingCluster.awaitLog(stale, "RING-STALE-RESULT", Duration.ofMinutes(2));
        return "maps " + twoMaps + " of shuffle " + maps.get("shuffle") + " on executor " + oldId + ", " + located.substring("RING-STALE-".length())
                + ", after the replacement: " + result.substring("RING-STALE-RESULT ".length());
    }

    /** FLIP_READ_PAYLOAD's relay flips a bit in the first and every 7th READ response after it, 10 at most. */
    static final int FLIP_EVERY = 7;
    static final int FLIP_MAX = 10;

    /**
     * FLIP_READ_PAYLOAD: {@code flip[1]} (a reducer's block client outside Spark) READs the blocks of every map host 1's
     * executor wrote in this shuffle, twice, through {@code flip[0]}, a relay that flips bits in READ payloads. The
     * relay stands between that reader and the executor only: Spark's own reducers, whose addresses come from the
     * executors' registrations, READ as before, and the shuffle's result is checked as in every case. Returns what
     * the relay flipped and what the reader got and caught.
     */
    private String flipReadPayloads(RingDriver.Reports before, RingProcess[] flip) {
        long pid = executor(1).pid();
        String id = before.executors().values().stream().filter(e -> RingDriver.number(e, "pid") == pid).map(e -> e.get("executorId"))
                .findFirst().orElseThrow(() -> new IllegalStateException("no report of the executor with pid " + pid + ": " + before));
        Map<String, String> maps = lastMaps();
        String ids = maps.getOrDefault(id, "");
        if (ids.isEmpty()) {
            throw new IllegalStateException("executor " + id + " ran none of the shuffle's maps: " + rdma.lastMaps);
        }
        flip[1].send("read " + maps.get("shuffle") + " " + WORKLOAD.reduces() + " " + ids + " 2");
        String result = RingCluster.awaitLog(flip[1], "RING-FLIP-RESULT", Duration.ofMinutes(3));
        flip[0].send("count");
        String count = RingCluster.awaitLog(flip[0], "RING-FLIP-COUNT", Duration.ofMinutes(1));
        return "relay " + count.substring("RING-FLIP-COUNT ".length()) + "; reader of maps " + ids + " of shuffle " + maps.get("shuffle")
                + " on executor " + id + " (2 passes): " + result.substring("RING-FLIP-RESULT ".length());
    }

    /** The last shuffle's id ({@code shuffle}) and each executor's map ids (by executor id), from {@link RingDriver#lastMaps}. */
    private Map<String, String> lastMaps() {
        Map<String, String> maps = new java.util.HashMap<>();
        for (String field : rdma.lastMaps.split(" ")) {
            int eq = field.indexOf('=');
            if (eq > 0) {
                maps.put(field.substring(0, eq), field.substring(eq + 1));
            }
        }
        return maps;
    }

    private ProcessHandle executor(int host) {
        List<ProcessHandle> executors = cluster.executorsOn(host);
        if (executors.isEmpty()) {
            throw new IllegalStateException("no executor runs on host " + host);
        }
        return executors.get(0);
    }

    /** How long a fault waits for every reduce task's mark that its READs go on before it strikes anyway (and the case fails). */
    static final Duration READS_EVIDENCE_DEADLINE = Duration.ofMinutes(1);
    /** How the row says a fault came while READs went on (what {@code HostRingTest} asserts). */
    static final String WHILE_READING = "injected while every reduce task's READs went on";

    /**
     * A fault that waits for READs ({@link Fault#waitsForReads}) on the paced shuffle: once every reduce task of
     * {@code name} has marked that its READs go on in the middle of the task ({@code RingJob.ReadingMark}: its
     * executor's RDMA block count grew at two of its pauses while a quarter of its records was still to come), the
     * fault is injected. The tasks' own marks, not the harness's view of the sockets, decide, so the fault meets READs
     * on a fast machine as on a loaded one (polling {@code ss} for bytes arriving in 3 polls in a row saw none on a quiet
     * host: the paced fetches come in bursts shorter than a poll). {@code cut} gets the moments the fault began and
     * ended (epoch microseconds).
     */
    private void injectWhileReading(Fault fault, String name, StringBuilder detail, long[] cut) {
        List<java.nio.file.Path> marks = new ArrayList<>();
        for (int p = 0; p < PACED_WORKLOAD.reduces(); p++) {
            marks.add(rdma.readingMarks().resolve(name + "-" + p));
        }
        long started = System.nanoTime();
        long end = started + READS_EVIDENCE_DEADLINE.toNanos();
        while (!marks.stream().allMatch(java.nio.file.Files::exists) && System.nanoTime() < end) {
            pause(10); // the poll's period: a task's pauses are 100 ms apart
        }
        if (marks.stream().allMatch(java.nio.file.Files::exists)) {
            detail.append(String.format(Locale.ROOT, "%s (%d ms after the reduce stage was submitted; marks: %s)", WHILE_READING,
                    (System.nanoTime() - started) / 1_000_000, marks.stream().map(RingSession::readMark).collect(java.util.stream.Collectors.joining(", "))));
        } else {
            detail.append("NO EVIDENCE of READs going on in every reduce task within ").append(READS_EVIDENCE_DEADLINE.toSeconds())
                    .append(" s (marks present: ").append(marks.stream().filter(java.nio.file.Files::exists).map(p -> p.getFileName().toString()).toList())
                    .append("): injected anyway");
        }
        cut[0] = epochMicros();
        try {
            inject(fault, detail);
        } finally {
            cut[1] = epochMicros();
        }
    }

    private static String readMark(java.nio.file.Path mark) {
        try {
            return mark.getFileName() + " " + java.nio.file.Files.readString(mark).trim();
        } catch (java.io.IOException e) {
            return mark.getFileName() + " (unreadable: " + e.getMessage() + ")";
        }
    }

    static long epochMicros() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /**
     * The flap's reconnect storm from the executors' reports ({@link ReconnectStorm}), and what each executor that lived
     * through it did: reconnected, fell back, or neither (the case then fails: the flap did not reach it).
     */
    private String storm(RingDriver.Reports before, RingDriver.Reports after, long cutMicros, long upMicros) {
        Map<String, String> attempts = new java.util.TreeMap<>();
        List<String> neither = new ArrayList<>();
        for (Map.Entry<String, Map<String, String>> e : after.executors().entrySet()) {
            Map<String, String> b = before.executors().get(e.getKey());
            String name = "executor " + e.getKey();
            attempts.put(name, e.getValue().getOrDefault("rdma.reconnect.attempts", ""));
            if (b == null) {
                continue;
            }
            long reconnects = RingDriver.number(e.getValue(), "rdma.reconnects") - RingDriver.number(b, "rdma.reconnects");
            long fallbacks = RingDriver.number(e.getValue(), ShuffleMetrics.FALLBACK_FETCH) - RingDriver.number(b, ShuffleMetrics.FALLBACK_FETCH);
            if (reconnects <= 0 && fallbacks <= 0) {
                neither.add(name);
            }
        }
        ReconnectStorm storm = ReconnectStorm.of(cutMicros, upMicros, attempts);
        return storm.describe() + "; neither reconnected nor fell back: " + neither + "; jitter applied: " + storm.jitterApplied();
    }

    private void linkDown(List<Integer> hosts, long millis) {
        hosts.forEach(ring::linkDown);
        try {
            pause(millis); // the fault's length itself
        } finally {
            hosts.forEach(ring::linkUp);
        }
    }

    private static void pause(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted during a fault");
        }
    }

    /**
     * {@code hdfs dfs -cat} through the plug-in into a pipe; after a quarter of the file, the DataNode that answered the
     * client's latest block request is killed (the DataNodes' served-request counters, read at every eighth of the file,
     * tell which: the client picks a replica per block); the rest comes from the other DataNode (every block has a
     * replica on each). Then the killed DataNode is started again.
     */
    private Row killDataNodeMidRead() {
        byte[] data = cluster.hdfsFile();
        Map<String, ProcessResources> baseline = resources(warmReport());
        long started = System.nanoTime();
        long[] served = VerbsHdfsRing.served(cluster);
        long[] servedAtStart = served.clone();
        int serving = 0; // 1-based: the DataNode whose counter grew last; 0 while none did
        RingProcess cat = cluster.fsShell("fs-cat-kill-" + System.nanoTime() % 100000, true, RingProcess.PIPE, "-cat", "/ring/data.bin");
        java.io.ByteArrayOutputStream got = new java.io.ByteArrayOutputStream();
        long killedAt = 0;
        int victim = 0;
        int eighths = 0;
        try (InputStream in = cat.output()) {
            byte[] buf = new byte[8192];
            for (int n; (n = in.read(buf)) >= 0; ) {
                got.write(buf, 0, n);
                if (killedAt == 0 && got.size() >= (long) data.length * (eighths + 1) / 8) {
                    eighths++;
                    long[] now = VerbsHdfsRing.served(cluster);
                    for (int w = 1; w <= now.length; w++) {
                        if (now[w - 1] > served[w - 1]) {
                            serving = w;
                        }
                    }
                    served = now;
                    if (eighths >= 2) {
                        victim = serving == 0 ? 1 : serving;
                        cluster.dataNodes.get(victim - 1).kill();
                        killedAt = System.nanoTime();
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        int code = cat.waitFor(Duration.ofMinutes(2));
        long done = System.nanoTime();
        boolean ok = code == 0 && Arrays.equals(data, got.toByteArray());
        String log = String.join("\n", cat.lines());
        long fallbacks = log.lines().filter(l -> l.contains("fell back to TCP")).count();
        StringBuilder byNode = new StringBuilder();
        for (int w = 1; w <= served.length; w++) {
            byNode.append(w == 1 ? "" : ", ").append("DataNode ").append(w).append(' ').append(served[w - 1] - servedAtStart[w - 1]);
        }
        String killed = victim == 0 ? "no DataNode killed (the file was shorter than a quarter)"
                : "killed DataNode " + victim + (serving == 0 ? " (no DataNode had answered a block request yet)" : ", which answered the latest block request")
                + "; block requests answered before the kill: " + byNode;
        if (victim != 0) {
            cluster.restartDataNode(victim);
        }
        Settled settled = settle(baseline);
        return new Row(Fault.KILL_DATANODE, ok, ok ? killed + "; client log: " + fallbacks + " block read(s) fell back to TCP" : "exit " + code + ", "
                + got.size() + " of " + data.length + " bytes\n" + cat.tail(30), (done - started) / 1_000_000, 0,
                killedAt == 0 ? -1 : (done - killedAt) / 1_000_000, 0, 0, fallbacks, 0, 0, 0, 0, 1, settled.millis, settled.resources,
                settled.leaks, "", Math.max(0, data.length - got.size()), Math.max(0, got.size() - data.length));
    }

    public static String describeFaults() {
        StringBuilder b = new StringBuilder();
        for (Fault f : Fault.values()) {
            b.append(String.format(Locale.ROOT, "  %-18s %s%n", f, f.description));
        }
        return b.append("  (tc netem loss/delay/reordering: the host kernel has no sch_netem; that case belongs to the VM ring)").toString();
    }

    @Override
    public void close() {
        try {
            rdma.close();
        } finally {
            cluster.close();
            ring.close();
        }
    }
}

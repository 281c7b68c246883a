package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.CRC32C;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * {@link RingJob}'s TPC-DS commands (a class of its own: RingJob's other commands need no Spark SQL):
 * <ul>
 * <li>{@code tpcds-write BASE [columns=A,B,..] TABLE...}: generates the tables (only the columns named, when named) ({@link TpcdsTables}) and writes them as Parquet under
 * {@code BASE} (a path of the default filesystem: the ring's HDFS); prints {@code RING-TPCDS-WRITTEN millis=..}.</li>
 * <li>{@code tpcds-query NAME BASE OUT TABLE...}: runs TPC-DS query NAME over the tables under {@code BASE} (their
 * views registered once per application), writes its rows, sorted, to the local file {@code OUT} and prints
 * {@code RING-TPCDS-RESULT NAME rows=.. hash=.. millis=.. remoteBlocks=.. remoteBytes=.. inputBytes=.. localBlocks=..
 * readers=EXECUTOR:TASKS,.. setupMillis=.. afterMillis=..}: the row count, an order-free hash of the rows (a lost or
 * duplicated row changes count or hash), the job time and what Spark's task metrics counted for the query's jobs
 * (shuffle blocks fetched from other executors, bytes read from the filesystem, shuffle blocks read from the task's own
 * executor, and the tasks that read shuffle blocks by the executor that ran them), and the time before the query (the
 * session and, the first time, the views) and after it (its jobs' metrics, its rows written); {@code RING-FAILED NAME why} when it fails. While it runs, {@link RingJob}'s listener announces
 * {@code RING-READING NAME} (its first task done: the scans read the filesystem) and {@code RING-REDUCING NAME} (its
 * first stage reading shuffle output submitted): the moments the ring injects a fault.</li>
 * </ul>
 */
final class RingTpcds {
    private static final Set<String> VIEWS = ConcurrentHashMap.newKeySet();
    private static final Map<String, long[]> METRICS = new ConcurrentHashMap<>();
    /** Per job group: the successful tasks that read shuffle blocks, by the executor that ran them. */
    private static final Map<String, Map<String, Integer>> READERS = new ConcurrentHashMap<>();
    private static final Set<Integer> ENDED = ConcurrentHashMap.newKeySet();
    /** The job group of each stage submitted (its job's local properties). */
    private static final Map<Integer, String> GROUPS = new ConcurrentHashMap<>();
    private static volatile boolean listening;

    private RingTpcds() {
    }

    /** {@code tables}: table names, optionally after {@code columns=A,B,..} (the only columns written, {@link TpcdsTables}). */
    static void write(JavaSparkContext sc, String base, List<String> tables) {
        long t0 = System.nanoTime();
        java.util.Set<String> columns = null;
        if (!tables.isEmpty() && tables.get(0).startsWith("columns=")) {
            columns = java.util.Set.of(tables.get(0).substring("columns=".length()).split(","));
            tables = tables.subList(1, tables.size());
        }
        TpcdsTables.writeParquet(session(sc), base, tables, columns);
        RingJob.say("RING-TPCDS-WRITTEN millis=" + (System.nanoTime() - t0) / 1_000_000);
    }

    static void query(JavaSparkContext sc, String name, String base, Path out, List<String> tables) {
        long setup = System.nanoTime();
        SparkSession spark = session(sc);
        if (VIEWS.add(base)) {
            TpcdsTables.registerViews(spark, base, tables);
        }
        String group = "tpcds-" + name + "-" + System.nanoTime();
        sc.setJobGroup(group, "TPC-DS " + name, false);
        long t0 = System.nanoTime();
        long setupMillis = (t0 - setup) / 1_000_000;
        List<String> rows;
        RingJob.begin(name);
        try {
            Dataset<Row> df = spark.sql(TpcdsTables.query(name));
            rows = df.collectAsList().stream().map(Row::toString).sorted().toList();
        } finally {
            RingJob.end();
            sc.clearJobGroup();
        }
        long millis = (System.nanoTime() - t0) / 1_000_000;
        long after = System.nanoTime();
        long[] m = metricsOf(sc, group);
        try {
            Files.write(out, rows);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        long afterMillis = (System.nanoTime() - after) / 1_000_000;
        String readers = new java.util.TreeMap<>(READERS.getOrDefault(group, Map.of())).entrySet().stream()
                .map(e -> e.getKey() + ":" + e.getValue()).collect(java.util.stream.Collectors.joining(","));
        RingJob.say("RING-TPCDS-RESULT " + name + " rows=" + rows.size() + " hash=" + hash(rows) + " millis=" + millis + " remoteBlocks=" + m[0]
                + " remoteBytes=" + m[1] + " inputBytes=" + m[2] + " localBlocks=" + m[3] + " readers=" + (readers.isEmpty() ? "none" : readers) + " setupMillis=" + setupMillis + " afterMillis=" + afterMillis);
    }

    /** The order-free hash of {@code rows} that RING-TPCDS-RESULT prints: a lost or duplicated row changes it. */
    static String hash(List<String> rows) {
        long hash = 0;
        for (String row : rows) {
            CRC32C crc = new CRC32C();
            crc.update(row.getBytes(StandardCharsets.UTF_8));
            hash += RingJob.mix(crc.getValue());
        }
        return Long.toHexString(hash);
    }

    /**
     * The task metrics of the jobs of {@code group}, summed: remote shuffle blocks, remote shuffle bytes, input bytes.
     * The listener hears a job's tasks before its end, on its own thread: waited for until every job of the group
     * ended there (at most a minute).
     */
    private static long[] metricsOf(JavaSparkContext sc, String group) {
        int[] jobs = sc.statusTracker().getJobIdsForGroup(group);
        long end = System.nanoTime() + 60_000_000_000L;
        for (int job : jobs) {
            while (!ENDED.contains(job)) {
                if (System.nanoTime() > end) {
                    throw new IllegalStateException("the listener did not hear job " + job + " of " + group + " end within a minute");
                }
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(e);
                }
            }
        }
        long[] m = METRICS.getOrDefault(group, new long[4]);
        synchronized (m) {
            return m.clone();
        }
    }

    private static SparkSession session(JavaSparkContext sc) {
        if (!listening) {
            listening = true;
            sc.sc().addSparkListener(new SparkListener() {
                @Override
                public void onTaskEnd(SparkListenerTaskEnd end) {
                    TaskMetrics t = end.taskMetrics();
                    String g = GROUPS.get(end.stageId());
                    if (t == null || g == null) {
                        return;
                    }
                    long[] m = METRICS.computeIfAbsent(g, k -> new long[4]);
                    synchronized (m) {
                        m[0] += t.shuffleReadMetrics().remoteBlocksFetched();
                        m[1] += t.shuffleReadMetrics().remoteBytesRead();
                        m[2] += t.inputMetrics().bytesRead();
                        m[3] += t.shuffleReadMetrics().localBlocksFetched();
                    }
                    if (end.taskInfo().successful() && t.shuffleReadMetrics().totalBlocksFetched() > 0) {
                        READERS.computeIfAbsent(g, k -> new ConcurrentHashMap<>()).merge(end.taskInfo().executorId(), 1, Integer::sum);
                    }
                }

                @Override
                public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
                    Properties p = submitted.properties();
                    String g = p == null ? null : p.getProperty("spark.jobGroup.id");
                    if (g != null) {
                        GROUPS.put(submitted.stageInfo().stageId(), g);
                    }
                }

                @Override
                public void onJobEnd(SparkListenerJobEnd jobEnd) {
                    ENDED.add(jobEnd.jobId());
                }
            });
        }
        return SparkSession.builder().getOrCreate();
    }
}

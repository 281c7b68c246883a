package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.RdmaVmOnly;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import scala.Tuple2;

/**
 * Spark shuffle over real verbs: {@code local-cluster[2,1,M]} (two executor JVMs) in the Soft-RoCE
 * VM of integration-tests/vm, with {@code spark.shuffle.rdma.provider} from the system property
 * {@code rdma.spark.provider} (default {@code verbs}). Two shuffles (reduceByKey with map-side
 * combine; groupByKey of ~0.5 KiB values, so blocks span many RoCE packets) must give the results
 * computed without Spark, and the executors' own counters must show that every remote block Spark
 * fetched came by RDMA READ on that provider: provider named on both executors, both published map
 * outputs, fetch.rdma.blocks equal to Spark's remote blocks fetched (and above 0), no fallback at
 * any level. Addresses: every JVM binds to {@code SPARK_LOCAL_IP} (integration-tests/vm/spark-verbs.sh
 * sets RDMA_VM_ADDR_A), so executor-to-executor READs loop back on one rxe device.
 *
 * <p>Runs only with RDMA_VM=1 (in the VM: integration-tests/vm/spark-verbs.sh, part of vm/ci.sh, run by integration-tests/ci.sh);
 * elsewhere it is skipped and says so on stderr. Other {@code spark.*} system properties reach the
 * SparkConf (e.g. {@code -Dspark.shuffle.rdma.operationTimeout=10s}).
 */
@ExtendWith(RdmaVmOnly.class)
class VerbsLocalClusterTest {
    private static final int KEYS = 500;
    private static final int NUMBERS = 40_000;
    private static final int RECORDS = 4_000;
    private static final int GROUPS = 97;

    @Test
    void shuffleBlocksMoveByRdmaReadBetweenTwoExecutorJvms() throws Exception {
        String provider = System.getProperty("rdma.spark.provider", "verbs");
        SparkConf conf = conf(2, provider);

        Map<Integer, Long> expectedSums = new TreeMap<>();
        for (int i = 0; i < NUMBERS; i++) {
            expectedSums.merge(i % KEYS, (long) i, Long::sum);
        }
        Map<Integer, String> expectedGroups = new TreeMap<>();
        for (int i = 0; i < RECORDS; i++) {
            expectedGroups.merge(i % GROUPS, summary(1, payload(i).hashCode()), VerbsLocalClusterTest::mergeSummaries);
        }

        long t0 = System.nanoTime();
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            AtomicLong remoteBlocks = new AtomicLong();
            AtomicLong remoteBytes = new AtomicLong();
            AtomicLong localBlocks = new AtomicLong();
            sc.sc().addSparkListener(new SparkListener() {
                @Override
                public void onTaskEnd(SparkListenerTaskEnd end) {
                    if (end.taskMetrics() != null) {
                        ShuffleReadMetrics read = end.taskMetrics().shuffleReadMetrics();
                        remoteBlocks.addAndGet(read.remoteBlocksFetched());
                        remoteBytes.addAndGet(read.remoteBytesRead());
                        localBlocks.addAndGet(read.localBlocksFetched());
                    }
                }
            });
            SparkJobs.awaitExecutors(sc, 2, java.time.Duration.ofMinutes(10));
            long started = System.nanoTime();
            System.out.printf("spark-verbs: context and 2 executors up in %.1f s%n", (started - t0) / 1e9);

            Map<Integer, Long> sums = sums(sc);
            assertEquals(expectedSums, sums, "reduceByKey");

            Map<Integer, String> groups = groups(sc);
            assertEquals(expectedGroups, groups, "groupByKey");
            System.out.printf("spark-verbs: 2 shuffle jobs ran in %.1f s, results equal the ones computed without Spark%n",
                    (System.nanoTime() - started) / 1e9);

            Map<String, Map<String, String>> reports = reports(sc);
            sc.sc().listenerBus().waitUntilEmpty();
            for (Map.Entry<String, Map<String, String>> e : reports.entrySet()) {
                System.out.println("spark-verbs: executor " + e.getKey() + " report " + e.getValue());
            }
            System.out.println("spark-verbs: Spark's shuffle read metrics: remote blocks " + remoteBlocks.get()
                    + ", remote bytes " + remoteBytes.get() + ", local blocks " + localBlocks.get());

            assertEquals(2, reports.size(), "both executors reported: " + reports.keySet());
            long rdmaBlocks = 0;
            long rdmaBytes = 0;
            long mapped = 0;
            long copied = 0;
            for (Map<String, String> r : reports.values()) {
                assertEquals(provider, r.get("provider"), "the executor's RDMA provider: " + r);
                assertTrue(count(r, ShuffleMetrics.PUBLISHED_MAPS) > 0, "the executor published map outputs: " + r);
                assertEquals(count(r, ShuffleMetrics.PUBLISHED_MAPS),
                        count(r, ShuffleMetrics.PUBLISHED_MAPPED) + count(r, ShuffleMetrics.PUBLISHED_COPIED),
                        "every published map output is either mapped or copied: " + r);
                if (mapsFiles(provider, conf)) {
                    assertTrue(count(r, ShuffleMetrics.PUBLISHED_MAPPED) > 0, "map outputs served from their file mappings"
                            + " (zero-copy) on " + provider + ", kernel " + System.getProperty("os.version") + ": " + r);
                }
                mapped += count(r, ShuffleMetrics.PUBLISHED_MAPPED);
                copied += count(r, ShuffleMetrics.PUBLISHED_COPIED);
                for (String fallback : List.of(ShuffleMetrics.FALLBACK_FETCH, ShuffleMetrics.FALLBACK_SHUFFLE,
                        ShuffleMetrics.FALLBACK_APP, ShuffleMetrics.NOT_PUBLISHED_OVER_CAP, ShuffleMetrics.NOT_PUBLISHED_FAILED)) {
                    assertEquals(0, count(r, fallback), fallback + " on executor " + r.get("executorId") + ": " + r);
                }
                rdmaBlocks += count(r, ShuffleMetrics.FETCH_RDMA_BLOCKS);
                rdmaBytes += count(r, ShuffleMetrics.FETCH_RDMA_BYTES);
            }
            assertTrue(rdmaBlocks > 0, "blocks were fetched by RDMA READ: " + reports);
            assertEquals(remoteBlocks.get(), rdmaBlocks, "every remote block Spark fetched came by RDMA READ");
            assertEquals(remoteBytes.get(), rdmaBytes, "every remote byte Spark read came by RDMA READ");
            System.out.printf("spark-verbs: provider %s on both executors, fetch.rdma.blocks %d (%d bytes) = Spark's remote"
                    + " blocks, fallback.fetch 0, map outputs mapped (zero-copy) %d, copied %d%n", provider, rdmaBlocks, rdmaBytes,
                    mapped, copied);
        } finally {
            copyExecutorLogs();
        }
    }

    /**
     * Copies the executors' stdout/stderr to the directory named by {@code rdma.spark.logs.dir}, if set:
     * local-cluster keeps them in worker directories under java.io.tmpdir, deleted when the driver exits.
     * Called after the context is closed (the executors have exited) and before the driver's JVM exits.
     */
    private static void copyExecutorLogs() throws java.io.IOException {
        String to = System.getProperty("rdma.spark.logs.dir");
        if (to == null) {
            return;
        }
        Path target = Files.createDirectories(Path.of(to));
        try (var workers = Files.list(Path.of(System.getProperty("java.io.tmpdir")))) {
            for (Path worker : workers.filter(d -> d.getFileName().toString().startsWith("worker-")).toList()) {
                try (var files = Files.walk(worker)) {
                    for (Path f : files.filter(Files::isRegularFile).toList()) {
                        String name = f.getFileName().toString();
                        if (name.equals("stdout") || name.equals("stderr")) {
                            // <worker>/<app>/<executor id>/stdout -> executor-<id>.stdout
                            Files.copy(f, target.resolve("executor-" + f.getParent().getFileName() + "." + name),
                                    java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                        }
                    }
                }
            }
        }
    }

    /**
     * A training run for class-data sharing (spark-verbs.sh runs it on the host, with
     * -XX:ArchiveClassesAtExit on the driver and the executor): the same jobs in
     * {@code local-cluster[1,1,M]} on the provider of {@code rdma.spark.provider} (tcp there), no checks.
     * One executor, so that its archive has a single writer.
     */
    public static void main(String[] args) throws Exception {
        try (JavaSparkContext sc = new JavaSparkContext(conf(1, System.getProperty("rdma.spark.provider", "tcp")))) {
            SparkJobs.awaitExecutors(sc, 1, java.time.Duration.ofMinutes(10));
            System.out.println("spark-verbs training run: " + sums(sc).size() + " sums, " + groups(sc).size() + " groups, "
                    + reports(sc).size() + " executor report(s)");
        }
    }

    /** The application's conf: {@code executors} workers of one core, our manager on {@code provider}. */
    static SparkConf conf(int executors, String provider) throws java.io.IOException {
        String executorMemory = System.getProperty("rdma.spark.executor.memory", "512m");
        long workerMb = Math.max(512, toMb(executorMemory));
        Path home = Files.createDirectories(Path.of(System.getProperty("spark.test.home", "target")));
        System.setProperty("spark.test.home", home.toAbsolutePath().toString());
        SparkConf conf = new SparkConf().setMaster("local-cluster[" + executors + ",1," + workerMb + "]")
                .setAppName("rdma-verbs-local-cluster")
                .set("spark.testing", "1")
                .set("spark.ui.enabled", "false")
                .set("spark.executor.memory", executorMemory)
                .set("spark.shuffle.manager", SparkJobs.MANAGER)
                .set("spark.shuffle.rdma.provider", provider)
                .set("spark.executor.extraJavaOptions", System.getProperty("rdma.jvm.module.flags", "")
                        + " " + System.getProperty("rdma.spark.executor.jvm.flags", "-XX:TieredStopAtLevel=1"))
                .setIfMissing("spark.shuffle.rdma.pool.capacity", "32m")
                .setIfMissing("spark.shuffle.rdma.mapOutput.capacity", "64m");
        System.out.println("spark-verbs: master " + conf.get("spark.master") + ", executor memory " + executorMemory
                + ", provider " + provider + ", SPARK_LOCAL_IP " + System.getenv("SPARK_LOCAL_IP"));
        return conf;
    }

    /** reduceByKey with map-side combine: 4 map tasks, 4 reducers, each reading the other executor's blocks. */
    static Map<Integer, Long> sums(JavaSparkContext sc) {
        List<Integer> numbers = IntStream.range(0, NUMBERS).boxed().toList();
        return new TreeMap<>(sc.parallelize(numbers, 4)
                .mapToPair(i -> new Tuple2<>(i % KEYS, (long) i))
                .reduceByKey(Long::sum, 4)
                .collectAsMap());
    }

    /** groupByKey of ~0.5 KiB values (blocks of many RoCE packets), summarized per key. */
    static Map<Integer, String> groups(JavaSparkContext sc) {
        List<Integer> records = IntStream.range(0, RECORDS).boxed().toList();
        return new TreeMap<>(sc.parallelize(records, 4)
                .mapToPair(i -> new Tuple2<>(i % GROUPS, payload(i)))
                .groupByKey(4)
                .mapValues(values -> {
                    String s = summary(0, 0);
                    for (String v : values) {
                        s = mergeSummaries(s, summary(1, v.hashCode()));
                    }
                    return s;
                })
                .collectAsMap());
    }

    /** Every executor's {@link RdmaShuffleManager#executorReport()}, by executor id. */
    static Map<String, Map<String, String>> reports(JavaSparkContext sc) {
        Map<String, Map<String, String>> reports = new TreeMap<>();
        // Both executors are free when this job starts, so each runs at least one of its tasks.
        for (Map<String, String> r : sc.parallelize(IntStream.range(0, 8).boxed().toList(), 8)
                .map(i -> RdmaShuffleManager.executorReport()).collect()) {
            reports.merge(r.get("executorId"), r, (a, b) -> count(a, ShuffleMetrics.FETCH_RDMA_BLOCKS)
                    >= count(b, ShuffleMetrics.FETCH_RDMA_BLOCKS) ? a : b);
        }
        return reports;
    }

    /** A value of about half a KiB, different for every record. */
    static String payload(int i) {
        StringBuilder s = new StringBuilder(512);
        long x = i * 0x9E3779B97F4A7C15L + 1;
        while (s.length() < 512) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            s.append(Long.toHexString(x));
        }
        return s.toString();
    }

    /** count:sum of hashes, order-independent, so groups compare without sorting values. */
    static String summary(long count, long hashSum) {
        return count + ":" + hashSum;
    }

    static String mergeSummaries(String a, String b) {
        String[] x = a.split(":");
        String[] y = b.split(":");
        return summary(Long.parseLong(x[0]) + Long.parseLong(y[0]), Long.parseLong(x[1]) + Long.parseLong(y[1]));
    }

    /**
     * Whether map outputs must be served from their file mappings: mapOutput.mapFiles on (the default) and a provider
     * that registers read-only shared file mappings (tcp; verbs from Linux 6.2, e.g. the VM's 7.2; 6.1 refuses them).
     */
    private static boolean mapsFiles(String provider, SparkConf conf) {
        if (!conf.getBoolean("spark.shuffle.rdma.mapOutput.mapFiles", true)) {
            return false;
        }
        if (!"verbs".equals(provider)) {
            return true;
        }
        String[] v = System.getProperty("os.version").split("[.-]");
        int major = Integer.parseInt(v[0]);
        int minor = v.length > 1 ? Integer.parseInt(v[1]) : 0;
        return major > 6 || (major == 6 && minor >= 2);
    }

    private static long count(Map<String, String> report, String name) {
        return Long.parseLong(report.getOrDefault(name, "0"));
    }

    private static long toMb(String size) {
        String s = size.trim().toLowerCase();
        long n = Long.parseLong(s.replaceAll("[^0-9]", ""));
        return s.endsWith("g") ? n * 1024 : s.endsWith("k") ? n / 1024 : n;
    }
}

package io.rdmaplane.it.spark;

import static io.rdmaplane.it.spark.RdmaReports.counter;
import static io.rdmaplane.it.spark.RdmaReports.sum;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.faulty.FaultyProvider;
import io.rdmaplane.rdma.testing.Skip;
import io.rdmaplane.spark.ShuffleMetrics;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import scala.Tuple2;

/**
 * The three fallback levels of the RDMA shuffle manager in {@code local-cluster} (issue 5, section 4), and
 * executors that come and go. Every job's result must equal Spark's sort shuffle's ({@link Baselines}); the
 * executors' reports say which path ran. Each test starts its own cluster with its own settings.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RdmaShuffleFallbackTest {
    static final String KEY = "spark.shuffle.rdma.";
    /** Light jobs of the catalogue, including blocks over 8 MiB. */
    static final List<String> JOBS = List.of("reduceByKey", "sortByKey", "join", "skewedPartition", "recordsOver8MiB");

    private Map<String, List<String>> baseline;

    @BeforeAll
    void baselines() {
        List<String> jobs = new java.util.ArrayList<>(JOBS);
        jobs.add("reducePartitions2000");
        baseline = Baselines.of(SparkClusterHarness.baseline("fallback"), jobs);
    }

    /** Runs {@code body} in a fresh cluster with the RDMA manager and {@code settings}. */
    void withCluster(String name, UnaryOperator<SparkConf> settings, Consumer<SparkSession> body) {
        SparkSession spark = SparkClusterHarness.start(settings.apply(SparkClusterHarness.cluster(name, SparkClusterHarness.RDMA)), 2);
        try {
            body.accept(spark);
        } finally {
            SparkClusterHarness.stop(spark);
        }
    }

    void runAndCompare(SparkSession spark, List<String> jobs, String what) {
        for (String job : jobs) {
            AbstractShuffleCatalogueTest.assertSameRows(job + " " + what, baseline.get(job),
                    ShuffleJobs.catalogue().get(job).run(spark));
        }
    }

    /** Level 1: the plug-in disabled. Every JVM is Spark's sort shuffle, and says why. */
    @Test
    void appFallbackWhenDisabled() {
        withCluster("fallback-disabled", c -> c.set(KEY + "enabled", "false"), spark -> {
            runAndCompare(spark, JOBS, "with " + KEY + "enabled=false");
            Map<String, Map<String, String>> reports = RdmaReports.executors(spark, 2);
            System.out.println("enabled=false:" + RdmaReports.describe(reports) + "\n  driver: " + RdmaReports.driver());
            for (Map<String, String> r : reports.values()) {
                assertTrue(r.get("provider").startsWith("off: ") && r.get("provider").contains("enabled=false"), r.toString());
                assertTrue(counter(r, ShuffleMetrics.FALLBACK_APP) >= 1, r.toString());
                assertEquals(0, counter(r, ShuffleMetrics.PUBLISHED_MAPS), r.toString());
                assertEquals(0, counter(r, ShuffleMetrics.FETCH_RDMA_BLOCKS), r.toString());
            }
            assertTrue(RdmaReports.driver().get("provider").contains("enabled=false"), RdmaReports.driver().toString());
        });
    }

    /** Level 1: a provider that is not usable here (verbs on a host without an RDMA device). */
    @Test
    void appFallbackWhenProviderUnusable() {
        try {
            Providers.select("verbs");
            Skip.now("the verbs provider IS usable on this host (an RDMA device is present), so"
                    + " the unusable-provider fallback cannot be shown here");
        } catch (TransportException | IllegalArgumentException expected) {
            // the premise: verbs cannot run here
        }
        withCluster("fallback-verbs", c -> c.set(KEY + "provider", "verbs"), spark -> {
            runAndCompare(spark, JOBS, "with " + KEY + "provider=verbs on a host without RDMA device");
            Map<String, Map<String, String>> reports = RdmaReports.executors(spark, 2);
            System.out.println("provider=verbs:" + RdmaReports.describe(reports));
            for (Map<String, String> r : reports.values()) {
                assertTrue(r.get("provider").startsWith("off: ") && r.get("provider").contains("verbs"), r.toString());
                assertTrue(counter(r, ShuffleMetrics.FALLBACK_APP) >= 1, r.toString());
                assertEquals(0, counter(r, ShuffleMetrics.PUBLISHED_MAPS), r.toString());
                assertEquals(0, counter(r, ShuffleMetrics.FETCH_RDMA_BLOCKS), r.toString());
            }
        });
    }

    /**
     * Level 2: a shuffle with more blocks than {@code maxBlocksPerShuffle} takes Spark's standard path (counted on
     * the driver, where shuffles are registered) while smaller shuffles of the same application still use RDMA.
     */
    @Test
    void shuffleFallbackOverMaxBlocks() {
        withCluster("fallback-shuffle", c -> c.set(KEY + "maxBlocksPerShuffle", "1000"), spark -> {
            long shuffleFallbacks = counter(RdmaReports.driver(), ShuffleMetrics.FALLBACK_SHUFFLE);
            runAndCompare(spark, List.of("reduceByKey"), "(128 blocks, under maxBlocksPerShuffle=1000)");
            Map<String, Map<String, String>> before = RdmaReports.executors(spark, 2);
            assertTrue(sum(before, ShuffleMetrics.FETCH_RDMA_BLOCKS) > 0, "the small shuffle used RDMA" + RdmaReports.describe(before));
            assertEquals(shuffleFallbacks, counter(RdmaReports.driver(), ShuffleMetrics.FALLBACK_SHUFFLE));

            runAndCompare(spark, List.of("reducePartitions2000"), "(8000 blocks, over maxBlocksPerShuffle=1000)");
            Map<String, Map<String, String>> after = RdmaReports.executors(spark, 2);
            System.out.println("maxBlocksPerShuffle=1000:" + RdmaReports.describe(after) + "\n  driver: " + RdmaReports.driver());
            assertEquals(shuffleFallbacks + 1, counter(RdmaReports.driver(), ShuffleMetrics.FALLBACK_SHUFFLE),
                    "one shuffle routed to the standard path: " + RdmaReports.driver());
            assertEquals(sum(before, ShuffleMetrics.FETCH_RDMA_BLOCKS), sum(after, ShuffleMetrics.FETCH_RDMA_BLOCKS),
                    "the big shuffle fetched nothing over RDMA" + RdmaReports.describe(after));
            assertEquals(sum(before, ShuffleMetrics.PUBLISHED_MAPS), sum(after, ShuffleMetrics.PUBLISHED_MAPS),
                    "the big shuffle published nothing");
            assertEquals(0, sum(after, ShuffleMetrics.FALLBACK_FETCH));
        });
    }

    /**
     * Level 3: executor 1's data node is closed after it answered 3 LOCATEs, in the middle of the first job. Blocks
     * of executor 1 then come through Spark's Netty transfer, block by block: every result equals the baseline and
     * no task fails. Before that, the first 6 READ payloads landing on executor 0 have a bit flipped: with every
     * block's checksum verified, each is caught (re-READ, then Netty), never delivered. The faults come from the
     * test-only {@code faulty} provider (common-rdma's test jar, on the executors' class path), armed per executor
     * by system properties ({@link #faults}).
     */
    @Test
    void fetchFallbackWhenAnExecutorBreaksMidJob() {
        withCluster("fallback-fetch", c -> faults(c, Map.of("1." + FaultyProvider.CLOSE_AFTER_REQUESTS, "3",
                                "0." + FaultyProvider.CORRUPT_READS, "6"))
                        .set(KEY + "checksum.sampleRate", "1")
                        .set(KEY + "locate.inlineThreshold", "0"), // every block READ, none inline: READs are what is corrupted
                spark -> {
                    AtomicInteger failedTasks = new AtomicInteger();
                    spark.sparkContext().addSparkListener(new SparkListener() {
                        @Override
                        public void onTaskEnd(SparkListenerTaskEnd end) {
                            if (!end.taskInfo().successful()) {
                                failedTasks.incrementAndGet();
                            }
                        }
                    });
                    runAndCompare(spark, JOBS, "with executor 1 broken after 3 LOCATEs");
                    Map<String, Map<String, String>> reports = RdmaReports.executors(spark, 2);
                    System.out.println("breakExecutor=1 after 3 LOCATEs:" + RdmaReports.describe(reports));
                    assertTrue(sum(reports, ShuffleMetrics.FALLBACK_FETCH) > 0, "blocks fell back to Netty" + RdmaReports.describe(reports));
                    assertTrue(sum(reports, ShuffleMetrics.FETCH_RDMA_BLOCKS) > 0,
                            "blocks came over RDMA before the break" + RdmaReports.describe(reports));
                    assertTrue(Long.parseLong(reports.get("0").getOrDefault("rdma.checksum.failures", "0")) > 0,
                            "executor 0's checksums caught the corrupted READs" + RdmaReports.describe(reports));
                    try {
                        spark.sparkContext().listenerBus().waitUntilEmpty(60_000);
                    } catch (java.util.concurrent.TimeoutException e) {
                        throw new AssertionError("Spark's listener bus did not drain", e);
                    }
                    assertEquals(0, failedTasks.get(), "no task failed: the fallback is per block");
                });
    }

    /**
     * The data nodes of {@code conf}'s executors from the {@code faulty} provider, each armed with the faults of
     * its executor id ({@code "<id>.<fault>" -> count}): Spark puts each executor's id in place of
     * {@code {{EXECUTOR_ID}}} in its JVM options.
     */
    static SparkConf faults(SparkConf conf, Map<String, String> faults) {
        StringBuilder options = new StringBuilder(conf.get("spark.executor.extraJavaOptions", ""))
                .append(" -D").append(FaultyProvider.ID).append("={{EXECUTOR_ID}}");
        faults.forEach((fault, count) -> options.append(" -D").append(FaultyProvider.PREFIX).append(fault).append('=').append(count));
        return conf.set(KEY + "provider", FaultyProvider.NAME).set("spark.executor.extraJavaOptions", options.toString().trim());
    }

    /**
     * Executors that come and go: executor 1 is killed after a shuffle; reading that shuffle again recomputes its
     * lost map outputs as Spark decides; a new executor then joins, registers, and serves and fetches over RDMA.
     */
    @Test
    void executorKilledAndReplaced() {
        withCluster("executor-killed", c -> c, spark -> {
            JavaSparkContext sc = ShuffleJobs.jsc(spark);
            JavaPairRDD<Integer, Long> reduced = sc.parallelize(ShuffleJobs.range(200_000), 8)
                    .mapToPair(i -> new Tuple2<>(i % 1000, (long) i))
                    .reduceByKey(Long::sum, 16);
            List<String> expected = baseline.get("reduceByKey");
            AbstractShuffleCatalogueTest.assertSameRows("before the kill", expected, ShuffleJobs.sorted(reduced.collect()));

            assertTrue(sc.sc().killExecutor("1"), "kill requested");
            SparkClusterHarness.awaitExecutorCount(spark.sparkContext(), 1);
            AbstractShuffleCatalogueTest.assertSameRows("the same shuffle read after executor 1 was killed", expected,
                    ShuffleJobs.sorted(reduced.mapValues(v -> v).collect()));
            runAndCompare(spark, List.of("sortByKey"), "on the one executor left");

            // killExecutor lowered the application's executor target (to 0: Spark counts the executors it started
            // by default as not requested); ask for two in total again, so that the Master starts one more.
            assertTrue(sc.sc().requestTotalExecutors(2, 0, scala.collection.immutable.Map$.MODULE$.empty()),
                    "a new executor requested");
            SparkClusterHarness.awaitExecutorCount(spark.sparkContext(), 2);
            Map<String, Map<String, String>> before = RdmaReports.executors(spark, 2);
            runAndCompare(spark, List.of("reduceByKey", "skewedPartition"), "after a new executor joined");
            Map<String, Map<String, String>> after = RdmaReports.executors(spark, 2);
            System.out.println("after kill and replace:" + RdmaReports.describe(after));
            assertTrue(after.keySet().stream().noneMatch("1"::equals), "executor 1 is gone: " + after.keySet());
            for (String id : after.keySet()) {
                long fetched = counter(after.get(id), ShuffleMetrics.FETCH_RDMA_BLOCKS)
                        - (before.containsKey(id) ? counter(before.get(id), ShuffleMetrics.FETCH_RDMA_BLOCKS) : 0);
                assertTrue(fetched > 0, "executor " + id + " fetched over RDMA after the new executor joined" + RdmaReports.describe(after));
            }
        });
    }
}

package io.rdmaplane.it.spark;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import io.rdmaplane.rdma.testing.Skip;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Runs the whole {@link ShuffleJobs} catalogue in one {@code local-cluster} context with the shuffle
 * manager under test and compares every result with the same job under Spark's sort shuffle in
 * {@code local[2]} ({@link Baselines}). A subclass chooses the cluster context's settings (serializer,
 * compression, ...). The last test checks, from the executors' reports, that the RDMA manager really served
 * the shuffles: blocks fetched over RDMA on both executors and no fallback at any level.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
abstract class AbstractShuffleCatalogueTest {
    private Map<String, List<String>> baseline;
    private SparkSession cluster;
    private String description;

    /** The application name, for logs. */
    abstract String name();

    /** The settings of this class's cluster context (and of the baselines, if this class computes them). */
    abstract SparkConf settings(SparkConf conf);

    /** The shuffle manager under test. */
    String manager() {
        return SparkClusterHarness.managerUnderTest();
    }

    @BeforeAll
    void start() {
        long t0 = System.nanoTime();
        baseline = Baselines.of(settings(SparkClusterHarness.baseline(name())), ShuffleJobs.catalogue().keySet());
        long t1 = System.nanoTime();
        SparkConf conf = settings(SparkClusterHarness.cluster(name(), manager()));
        description = SparkClusterHarness.describe(conf);
        cluster = SparkClusterHarness.start(conf, 2);
        System.out.printf("%s: baselines %.1f s, cluster start %.1f s (%s)%n", getClass().getSimpleName(),
                (t1 - t0) / 1e9, (System.nanoTime() - t1) / 1e9, description);
    }

    @AfterAll
    void stop() {
        SparkClusterHarness.stop(cluster);
        cluster = null;
    }

    /** Runs the job on the cluster and compares its canonical result with the baseline's. */
    void check(String job) {
        List<String> expected = baseline.get(job);
        assertNotNull(expected, job);
        assertFalse(expected.isEmpty(), job + ": the baseline has a result");
        long t0 = System.nanoTime();
        List<String> actual = ShuffleJobs.catalogue().get(job).run(cluster);
        System.out.printf("%s.%s: %d rows, %.1f s%n", getClass().getSimpleName(), job, actual.size(),
                (System.nanoTime() - t0) / 1e9);
        assertSameRows(job + " under " + description, expected, actual);
    }

    /** Equal lists, reported by their first difference instead of two huge lists. */
    static void assertSameRows(String what, List<String> expected, List<String> actual) {
        int n = Math.min(expected.size(), actual.size());
        for (int i = 0; i < n; i++) {
            if (!expected.get(i).equals(actual.get(i))) {
                fail(what + ": row " + i + " differs: expected <" + abbreviate(expected.get(i)) + "> but was <"
                        + abbreviate(actual.get(i)) + "> (" + expected.size() + " vs " + actual.size() + " rows)");
            }
        }
        if (expected.size() != actual.size()) {
            fail(what + ": " + expected.size() + " rows expected, " + actual.size() + " returned");
        }
    }

    private static String abbreviate(String s) {
        return s.length() <= 300 ? s : s.substring(0, 300) + "...";
    }

    @Test
    void reduceByKey() {
        check("reduceByKey");
    }

    @Test
    void groupByKey() {
        check("groupByKey");
    }

    @Test
    void sortByKeyInOrder() {
        check("sortByKey");
    }

    @Test
    void join() {
        check("join");
    }

    @Test
    void cogroup() {
        check("cogroup");
    }

    @Test
    void repartition() {
        check("repartition");
    }

    @Test
    void partitionByManyPartitionsWithoutAggregation() {
        check("partitionBy300");
    }

    @Test
    void sqlAggregationAdaptive() {
        check("sqlAggregation");
    }

    @Test
    void sqlJoinsAdaptive() {
        check("sqlJoins");
    }

    @Test
    void emptyPartitions() {
        check("emptyPartitions");
    }

    @Test
    void skewedPartitionOverLargestBuffer() {
        check("skewedPartition");
    }

    @Test
    void recordsOver8MiB() {
        check("recordsOver8MiB");
    }

    @Test
    void reducePartitions2000() {
        check("reducePartitions2000");
    }

    /**
     * Proof that the manager under test really served the shuffles over RDMA: runs last (after the whole
     * catalogue) plus one small shuffle of its own, then asks every executor for its report. Both executors
     * published map outputs and fetched blocks over RDMA, and nothing fell back at any level.
     */
    @Test
    @Order(Integer.MAX_VALUE)
    void rdmaServedEveryShuffle() {
        Skip.unless(SparkClusterHarness.RDMA.equals(manager()), "the manager under test is "
                + manager() + ", not " + SparkClusterHarness.RDMA + ": no RDMA report to check");
        check("reduceByKey");
        RdmaReports.assertEveryShuffleOverRdma(getClass().getSimpleName(), cluster, 2);
    }
}

package io.rdmaplane.it.spark;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.it.cluster.TpcdsTables;
import io.rdmaplane.rdma.testing.Skip;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * TPC-DS queries (Spark's own texts) over tables generated in-process at scale 0.01: their joins and
 * aggregations are shuffles (broadcast joins are off), run under the shuffle manager under test in
 * {@code local-cluster} and compared, as sorted row strings, with Spark's sort shuffle in {@code local[2]}.
 * Both sessions read the same Parquet files, written once by the baseline session.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class TpcdsShuffleTest {
    static final List<String> TABLES = TpcdsTables.TABLES;
    static final List<String> QUERIES = TpcdsTables.QUERIES;

    private final Map<String, List<String>> baseline = new HashMap<>();
    private Path dir;
    private SparkSession cluster;
    private String description;

    /** The shuffle manager under test. */
    String manager() {
        return SparkClusterHarness.managerUnderTest();
    }

    static SparkConf settings(SparkConf conf) {
        return conf.set("spark.sql.shuffle.partitions", "6");
    }

    @BeforeAll
    void start() throws IOException {
        dir = Files.createTempDirectory("tpcds-sf" + TpcdsTables.SCALE);
        long t0 = System.nanoTime();
        SparkSession local = SparkClusterHarness.start(settings(SparkClusterHarness.baseline("tpcds")), 0);
        try {
            TpcdsTables.writeParquet(local, dir.toString(), TABLES);
            TpcdsTables.registerViews(local, dir.toString(), TABLES);
            for (String q : QUERIES) {
                baseline.put(q, run(local, q));
            }
        } finally {
            SparkClusterHarness.stop(local);
        }
        long t1 = System.nanoTime();
        SparkConf conf = settings(SparkClusterHarness.cluster("tpcds", manager()));
        description = SparkClusterHarness.describe(conf);
        cluster = SparkClusterHarness.start(conf, 2);
        TpcdsTables.registerViews(cluster, dir.toString(), TABLES);
        System.out.printf("TpcdsShuffleTest: tables and baselines %.1f s, cluster start %.1f s (%s)%n",
                (t1 - t0) / 1e9, (System.nanoTime() - t1) / 1e9, description);
    }

    @AfterAll
    void stop() throws IOException {
        SparkClusterHarness.stop(cluster);
        if (dir != null) {
            try (Stream<Path> files = Files.walk(dir)) {
                files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    static List<String> run(SparkSession spark, String query) {
        Dataset<Row> df = spark.sql(TpcdsTables.query(query));
        List<String> rows = ShuffleJobs.sorted(ShuffleJobs.rows(df));
        String plan = df.queryExecution().executedPlan().toString();
        assertTrue(plan.contains("AdaptiveSparkPlan"), query + " ran adaptively");
        return rows;
    }

    static Stream<String> queries() {
        return QUERIES.stream();
    }

    @ParameterizedTest
    @MethodSource("queries")
    void queryGivesTheBaselineRows(String query) {
        List<String> expected = baseline.get(query);
        assertFalse(expected.isEmpty(), query + " has rows at scale " + TpcdsTables.SCALE);
        long t0 = System.nanoTime();
        List<String> actual = run(cluster, query);
        System.out.printf("TpcdsShuffleTest.%s: %d rows, %.1f s%n", query, actual.size(), (System.nanoTime() - t0) / 1e9);
        AbstractShuffleCatalogueTest.assertSameRows(query + " under " + description, expected, actual);
    }

    /** The queries' shuffles really went over RDMA: every executor fetched blocks, nothing fell back. */
    @Test
    @Order(Integer.MAX_VALUE)
    void rdmaServedTheQueries() {
        Skip.unless(SparkClusterHarness.RDMA.equals(manager()), "the manager under test is "
                + manager() + ", not " + SparkClusterHarness.RDMA + ": no RDMA report to check");
        run(cluster, "q3");
        RdmaReports.assertEveryShuffleOverRdma("TpcdsShuffleTest", cluster, 2);
    }
}

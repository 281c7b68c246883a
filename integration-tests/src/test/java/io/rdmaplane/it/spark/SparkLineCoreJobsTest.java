package io.rdmaplane.it.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The catalogue's core jobs (reduceByKey, join, sortByKey, SQL aggregation with AQE) on the Spark line this build is
 * for, in {@code local-cluster} mode with the RDMA manager, each equal to Spark's sort shuffle in {@code local[2]};
 * then the executors' counters prove RDMA served them and the executors ran this line's jar. Run by
 * integration-tests/lines/ci.sh for every line besides the default one (whose build runs the whole catalogue), so
 * it is tagged {@value #TAG} and left out of the default build (surefire's excludedGroups, rdma.excluded.groups).
 */
@Tag(SparkLineCoreJobsTest.TAG)
class SparkLineCoreJobsTest {
    static final String TAG = "spark-line";
    static final List<String> CORE_JOBS = List.of("reduceByKey", "join", "sortByKey", "sqlAggregation");

    @Test
    void coreJobsEqualSortShuffleAndMoveOverRdma() {
        String line = System.getProperty("rdma.spark.line");
        assertNotNull(line, "surefire passes rdma.spark.line");
        Map<String, List<String>> baseline = Baselines.of(SparkClusterHarness.baseline("spark-line"), CORE_JOBS);
        SparkConf conf = SparkClusterHarness.cluster("spark-line", SparkClusterHarness.RDMA);
        String description = line + ", " + SparkClusterHarness.describe(conf);
        SparkSession cluster = SparkClusterHarness.start(conf, 2);
        try {
            for (String job : CORE_JOBS) {
                long t0 = System.nanoTime();
                List<String> actual = ShuffleJobs.catalogue().get(job).run(cluster);
                System.out.printf("%s %s: %d rows, %.1f s%n", line, job, actual.size(), (System.nanoTime() - t0) / 1e9);
                AbstractShuffleCatalogueTest.assertSameRows(job + " under " + description, baseline.get(job), actual);
            }
            RdmaReports.assertEveryShuffleOverRdma(line, cluster, 2);
            RdmaReports.executors(cluster, 2).forEach((id, report) ->
                    assertEquals(line, report.get("sparkLine"), "executor " + id + " runs the jar of " + line + ": " + report));
        } finally {
            SparkClusterHarness.stop(cluster);
        }
    }
}

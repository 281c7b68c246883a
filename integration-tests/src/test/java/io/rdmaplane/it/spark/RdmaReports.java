package io.rdmaplane.it.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.rdmaplane.spark.RdmaShuffleManager;
import io.rdmaplane.spark.ShuffleMetrics;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * The RDMA shuffle manager's reports ({@link RdmaShuffleManager#executorReport()}: executor id, provider or why it
 * is off, every counter) collected from the executors with a small job, and from the driver.
 */
final class RdmaReports {
    private RdmaReports() {
    }

    /** The latest report of each of the {@code executors} executors, by executor id. */
    static Map<String, Map<String, String>> executors(SparkSession spark, int executors) {
        JavaSparkContext sc = ShuffleJobs.jsc(spark);
        Map<String, Map<String, String>> byId = new TreeMap<>();
        int tasks = 8 * executors;
        for (int attempt = 0; attempt < 10 && byId.size() < executors; attempt++) {
            // tasks that last a little, so that every executor's free core takes some: the sleep is the load
            // itself, not a wait for something (the loop polls for the reports it still lacks)
            List<Map<String, String>> reports = sc.parallelize(ShuffleJobs.range(tasks), tasks).map(i -> {
                Thread.sleep(50);
                return (Map<String, String>) new HashMap<>(RdmaShuffleManager.executorReport());
            }).collect();
            for (Map<String, String> r : reports) {
                byId.put(r.get("executorId"), r);
            }
        }
        if (byId.size() < executors) {
            fail("reports from " + byId.keySet() + ", expected " + executors + " executors");
        }
        return byId;
    }

    /** The driver's report (this JVM): where registerShuffle decides and counts shuffle-level fallbacks. */
    static Map<String, String> driver() {
        return RdmaShuffleManager.executorReport();
    }

    /**
     * Every executor runs a provider, published map outputs and fetched blocks over RDMA, and nothing fell back at
     * any level (the driver counts shuffle-level fallbacks).
     */
    static void assertEveryShuffleOverRdma(String what, SparkSession spark, int executors) {
        Map<String, Map<String, String>> reports = executors(spark, executors);
        Map<String, String> driver = driver();
        System.out.println(what + " reports:" + describe(reports) + "\n  driver: " + driver);
        for (Map.Entry<String, Map<String, String>> e : reports.entrySet()) {
            Map<String, String> r = e.getValue();
            String where = what + ", executor " + e.getKey() + ": " + r;
            assertFalse(r.get("provider").startsWith("off") || r.get("provider").startsWith("not started"), where);
            assertTrue(counter(r, ShuffleMetrics.PUBLISHED_MAPS) > 0, where);
            assertTrue(counter(r, ShuffleMetrics.FETCH_RDMA_BLOCKS) > 0, where);
            assertTrue(counter(r, ShuffleMetrics.FETCH_RDMA_BYTES) > 0, where);
            assertEquals(0, counter(r, ShuffleMetrics.FALLBACK_FETCH), where);
            assertEquals(0, counter(r, ShuffleMetrics.FALLBACK_APP), where);
            assertEquals(0, counter(r, ShuffleMetrics.NOT_PUBLISHED_OVER_CAP), where);
            assertEquals(0, counter(r, ShuffleMetrics.NOT_PUBLISHED_FAILED), where);
        }
        assertEquals(0, counter(driver, ShuffleMetrics.FALLBACK_SHUFFLE), what + ", driver: " + driver);
        assertEquals(0, counter(driver, ShuffleMetrics.FALLBACK_APP), what + ", driver: " + driver);
    }

    static long counter(Map<String, String> report, String name) {
        String value = report.get(name);
        if (value == null) {
            fail("no counter " + name + " in " + report);
        }
        return Long.parseLong(value);
    }

    /** A counter summed over the executors. */
    static long sum(Map<String, Map<String, String>> reports, String name) {
        return reports.values().stream().mapToLong(r -> counter(r, name)).sum();
    }

    static String describe(Map<String, Map<String, String>> reports) {
        StringBuilder b = new StringBuilder();
        reports.forEach((id, r) -> b.append("\n  executor ").append(id).append(": ").append(r));
        return b.toString();
    }
}

package io.rdmaplane.it.spark;

import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;

/**
 * The {@link ShuffleJobs} results under Spark's sort shuffle in {@code local[2]}, computed once per JVM (in a
 * local session started with the settings of the first test that asks for a job): a job's canonical result is
 * data, the same whatever the serializer or compression, and computing it once keeps later test classes short.
 * Only one SparkContext may run in a JVM at a time, so a test asks for its baselines before it starts its cluster.
 */
final class Baselines {
    private static final Map<String, List<String>> RESULTS = new HashMap<>();

    private Baselines() {
    }

    static synchronized Map<String, List<String>> of(SparkConf conf, Collection<String> jobs) {
        List<String> missing = jobs.stream().filter(j -> !RESULTS.containsKey(j)).toList();
        if (!missing.isEmpty()) {
            SparkSession local = SparkClusterHarness.start(conf, 0);
            try {
                StringBuilder times = new StringBuilder();
                for (String job : missing) {
                    long t = System.nanoTime();
                    RESULTS.put(job, ShuffleJobs.catalogue().get(job).run(local));
                    times.append(String.format(" %s %.1f s", job, (System.nanoTime() - t) / 1e9));
                }
                System.out.println("baselines (" + SparkClusterHarness.describe(conf) + "):" + times);
            } finally {
                SparkClusterHarness.stop(local);
            }
        }
        Map<String, List<String>> out = new LinkedHashMap<>();
        for (String job : jobs) {
            out.put(job, RESULTS.get(job));
        }
        return out;
    }
}

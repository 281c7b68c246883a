package io.rdmaplane.it.shuffle;

import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaSparkContext;

/** The executors' shuffle counters (placeholder until RdmaShuffleManager.executorReport() is merged). */
final class ExecutorReports {
    private ExecutorReports() {
    }

    static List<Map<String, String>> collect(JavaSparkContext jsc, int workers) {
        return List.of();
    }
}

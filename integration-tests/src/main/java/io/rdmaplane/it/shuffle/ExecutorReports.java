package io.rdmaplane.it.shuffle;

import io.rdmaplane.spark.RdmaShuffleManager;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.api.java.JavaSparkContext;

/** Every executor's {@link RdmaShuffleManager#executorReport()} (its provider and counters), by a few tiny jobs. */
final class ExecutorReports {
    private ExecutorReports() {
    }

    /** One report per executor, ordered by executor id; tries a few times until all {@code workers} answered. */
    static List<Map<String, String>> collect(JavaSparkContext jsc, int workers) {
        Map<String, Map<String, String>> byExecutor = new TreeMap<>();
        List<Integer> tasks = IntStream.range(0, 4 * workers).boxed().collect(Collectors.toList());
        for (int attempt = 0; attempt < 5 && byExecutor.size() < workers; attempt++) {
            for (Map<String, String> report : jsc.parallelize(tasks, tasks.size()).map(i -> RdmaShuffleManager.executorReport()).collect()) {
                byExecutor.putIfAbsent(report.get("executorId"), report);
            }
        }
        return new ArrayList<>(byExecutor.values());
    }
}

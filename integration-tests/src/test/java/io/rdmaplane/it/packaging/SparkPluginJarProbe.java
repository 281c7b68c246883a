package io.rdmaplane.it.packaging;

import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.verbs.DisniRuntime;
import io.rdmaplane.spark.RdmaShuffleManager;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * Runs inside {@link SparkPluginJarTest}'s isolated class loader (defined there from this class
 * file; its parent holds only the plug-in jar and Spark's class path): a local Spark application
 * with {@code spark.shuffle.manager=io.rdmaplane.spark.RdmaShuffleManager} runs a shuffle and
 * reports which manager and class loaders were used and the executor's counters.
 */
public final class SparkPluginJarProbe {
    private SparkPluginJarProbe() {
    }

    public static Map<String, String> run() {
        Map<String, String> facts = new LinkedHashMap<>();
        facts.put("disniCause", String.valueOf(DisniRuntime.unavailabilityCause()));
        facts.put("providers", String.valueOf(Providers.names()));
        SparkConf conf = new SparkConf(false).setMaster("local[2]").setAppName("spark-plugin-jar")
                .set("spark.ui.enabled", "false")
                .set("spark.driver.host", "127.0.0.1")
                .set("spark.shuffle.manager", RdmaShuffleManager.class.getName());
        try (JavaSparkContext jsc = new JavaSparkContext(conf)) {
            facts.put("shuffleManager", SparkEnv.get().shuffleManager().getClass().getName());
            facts.put("managerLoader", String.valueOf(SparkEnv.get().shuffleManager().getClass().getClassLoader().getName()));
            facts.put("sparkLoader", String.valueOf(SparkConf.class.getClassLoader().getName()));
            List<Integer> numbers = new ArrayList<>();
            for (int i = 0; i < 10_000; i++) {
                numbers.add(i);
            }
            List<Tuple2<Integer, Integer>> sums = jsc.parallelize(numbers, 4)
                    .mapToPair(i -> new Tuple2<>(i % 10, 1))
                    .reduceByKey(Integer::sum, 3)
                    .collect();
            facts.put("keys", String.valueOf(sums.size()));
            facts.put("records", String.valueOf(sums.stream().mapToInt(Tuple2::_2).sum()));
            Map<String, String> report = jsc.parallelize(List.of(1), 1).map(i -> RdmaShuffleManager.executorReport()).collect().get(0);
            report.forEach((k, v) -> facts.put("report." + k, v));
        }
        return facts;
    }
}

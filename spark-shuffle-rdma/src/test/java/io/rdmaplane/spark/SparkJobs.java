package io.rdmaplane.spark;

import io.rdmaplane.rdma.testing.Polling;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.stream.IntStream;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/** The jobs the Spark tests compare between our manager and Spark's sort shuffle. */
final class SparkJobs {
    static final String MANAGER = RdmaShuffleManager.class.getName();

    private SparkJobs() {
    }

    /** A local-mode conf with two task threads, no UI, Kryo (so the serialized writer path is reachable). */
    static SparkConf localConf(String app) {
        return new SparkConf().setMaster("local[2]").setAppName(app)
                .set("spark.ui.enabled", "false")
                .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
                .set("spark.shuffle.rdma.pool.capacity", "32m")
                .set("spark.shuffle.rdma.mapOutput.capacity", "64m");
    }

    static SparkConf rdma(SparkConf conf) {
        return conf.set("spark.shuffle.manager", MANAGER);
    }

    /**
     * Runs the jobs and returns their results as text, in an order that does not depend on
     * scheduling: reduceByKey (sort writer with map-side combine), groupByKey into 3 partitions
     * (bypass-merge writer), sortByKey (range partitioner, key ordering in the reader), and
     * partitionBy into 250 partitions with Kryo (serialized/unsafe writer, many empty partitions).
     */
    static Map<String, List<String>> run(JavaSparkContext sc) {
        return run(sc, c -> { });
    }

    /** As {@link #run(JavaSparkContext)}; {@code afterEach} sees the context after each job. */
    static Map<String, List<String>> run(JavaSparkContext sc, Consumer<JavaSparkContext> afterEach) {
        Map<String, List<String>> results = new TreeMap<>();
        List<Integer> numbers = IntStream.range(0, 20_000).boxed().toList();
        JavaPairRDD<Integer, Integer> pairs = sc.parallelize(numbers, 4).mapToPair(i -> new Tuple2<>(i % 997, i));

        results.put("reduceByKey", sorted(pairs.reduceByKey(Integer::sum, 6).collect()));
        afterEach.accept(sc);
        results.put("groupByKey", sorted(pairs.groupByKey(3).mapValues(values -> {
            List<Integer> list = new ArrayList<>();
            values.forEach(list::add);
            list.sort(null);
            return list.toString();
        }).collect()));
        afterEach.accept(sc);
        List<String> ordered = new ArrayList<>();
        sc.parallelize(numbers, 4).mapToPair(i -> new Tuple2<>((i * 7919) % 10007, i)).sortByKey(true, 5).collect()
                .forEach(t -> ordered.add(t._1() + "=" + t._2()));
        results.put("sortByKey", ordered);
        afterEach.accept(sc);
        results.put("partitionBy250", sorted(pairs.partitionBy(new HashPartitioner(250))
                .mapPartitionsWithIndex((index, it) -> {
                    long sum = 0;
                    int count = 0;
                    while (it.hasNext()) {
                        sum += it.next()._2();
                        count++;
                    }
                    return List.of(index + ":" + count + ":" + sum).iterator();
                }, true).collect()));
        afterEach.accept(sc);
        return results;
    }

    private static <T> List<String> sorted(List<T> values) {
        List<String> out = new ArrayList<>();
        values.forEach(v -> out.add(String.valueOf(v)));
        out.sort(null);
        return out;
    }

    /** The jobs under Spark's own sort shuffle, computed once per test JVM. */
    static synchronized Map<String, List<String>> baseline() {
        if (baseline == null) {
            try (JavaSparkContext sc = new JavaSparkContext(localConf("baseline").set("spark.shuffle.manager", "sort"))) {
                baseline = run(sc);
            }
        }
        return baseline;
    }

    /**
     * Waits up to {@code limit} until {@code count} executors (besides the driver) have registered; executor JVMs take
     * a while to start (minutes in the emulated VM).
     */
    static void awaitExecutors(JavaSparkContext sc, int count, Duration limit) {
        Polling.waitUntil(() -> sc.sc().statusTracker().getExecutorInfos().length >= count + 1, limit, () -> {
            List<String> seen = new ArrayList<>();
            for (var info : sc.sc().statusTracker().getExecutorInfos()) {
                seen.add(info.host() + ":" + info.port());
            }
            return count + " executors started (besides the driver); registered: " + seen;
        });
    }

    private static Map<String, List<String>> baseline;
}

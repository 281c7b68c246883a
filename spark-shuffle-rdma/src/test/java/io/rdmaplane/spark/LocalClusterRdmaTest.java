package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.IntStream;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Smoke test with real executor JVMs ({@code local-cluster[2,1,1024]}): the map outputs of one
 * executor reach the reducers on the other by RDMA READ (over the tcp provider here), shown by the
 * executors' own counters, and the result equals the one computed without Spark.
 */
class LocalClusterRdmaTest {
    @Test
    void blocksMoveByRdmaBetweenTwoExecutorJvms() throws Exception {
        Path home = Files.createDirectories(Path.of(System.getProperty("spark.test.home", "target")));
        System.setProperty("spark.test.home", home.toAbsolutePath().toString());
        SparkConf conf = new SparkConf().setMaster("local-cluster[2,1,1024]").setAppName("rdma-local-cluster")
                .set("spark.testing", "1")
                .set("spark.ui.enabled", "false")
                .set("spark.shuffle.manager", SparkJobs.MANAGER)
                .set("spark.executor.extraJavaOptions",
                        System.getProperty("rdma.jvm.module.flags", "") + " -XX:TieredStopAtLevel=1")
                .set("spark.shuffle.rdma.pool.capacity", "32m")
                .set("spark.shuffle.rdma.mapOutput.capacity", "64m");
        int keys = 500;
        int n = 40_000;
        Map<Integer, Long> expected = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            expected.merge(i % keys, (long) i, Long::sum);
        }
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            SparkJobs.awaitExecutors(sc, 2, java.time.Duration.ofMinutes(2));
            List<Integer> numbers = IntStream.range(0, n).boxed().toList();
            // 8 map tasks over 2 executors, 4 reducers: each reducer reads blocks of the other executor.
            Map<Integer, Long> actual = new TreeMap<>(sc.parallelize(numbers, 8)
                    .mapToPair(i -> new Tuple2<>(i % keys, (long) i))
                    .reduceByKey(Long::sum, 4)
                    .collectAsMap());
            assertEquals(expected, actual);

            Map<String, Map<String, String>> reports = new TreeMap<>();
            for (Map<String, String> r : sc.parallelize(IntStream.range(0, 32).boxed().toList(), 32)
                    .map(i -> RdmaShuffleManager.executorReport()).collect()) {
                reports.merge(r.get("executorId"), r, (a, b) -> rdmaBlocks(a) >= rdmaBlocks(b) ? a : b);
            }
            System.out.println("executor reports: " + reports);
            assertEquals(2, reports.size(), "both executors reported: " + reports.keySet());
            long rdmaBlocks = 0;
            for (Map<String, String> r : reports.values()) {
                assertEquals("tcp", r.get("provider"), r.toString());
                assertTrue(Long.parseLong(r.get(ShuffleMetrics.PUBLISHED_MAPS)) > 0, "each executor published: " + r);
                // tcp registers the data files' mappings (mapOutput.mapFiles, on by default): no map output is copied
                assertEquals(r.get(ShuffleMetrics.PUBLISHED_MAPS), r.get(ShuffleMetrics.PUBLISHED_MAPPED), "every map output mapped: " + r);
                assertEquals("0", r.get(ShuffleMetrics.PUBLISHED_COPIED), "no map output copied: " + r);
                // the runtime's start is timed: wall time, and the starting thread's CPU within it
                long startMicros = Long.parseLong(r.get(ShuffleMetrics.START_MICROS));
                long startCpuMicros = Long.parseLong(r.get(ShuffleMetrics.START_CPU_MICROS));
                assertTrue(startMicros > 0 && startCpuMicros > 0, "the runtime's start counted: " + r);
                rdmaBlocks += rdmaBlocks(r);
            }
            assertTrue(rdmaBlocks > 0, "blocks were fetched by RDMA READ: " + reports);
        }
    }

    private static long rdmaBlocks(Map<String, String> report) {
        return Long.parseLong(report.getOrDefault(ShuffleMetrics.FETCH_RDMA_BLOCKS, "0"));
    }

}

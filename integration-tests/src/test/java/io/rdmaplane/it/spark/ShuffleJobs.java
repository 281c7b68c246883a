package io.rdmaplane.it.spark;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Random;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.StreamSupport;
import java.util.zip.CRC32;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import scala.Tuple2;

/**
 * The job catalogue of the shuffle tests. Every job returns a canonical result: a sorted list of strings
 * where the job does not define an order, the collected order where it does (sortByKey, ORDER BY). Jobs with
 * big values return digests (count, length, CRC32) computed on the executors, so the comparison does not drag
 * tens of MiB to the driver. Every job is deterministic: the same input partitioning, seeded randomness.
 */
final class ShuffleJobs {
    /** A job of the catalogue. */
    interface Job {
        List<String> run(SparkSession spark);
    }

    /** One MiB. */
    static final int MIB = 1 << 20;

    /** The pool's largest buffer (and one RDMA READ): the skew and big-record jobs go over it. */
    static final int POOL_MAX_BUFFER = 8 * MIB;

    private ShuffleJobs() {
    }

    /** Every job of the catalogue, by test name. */
    static Map<String, Job> catalogue() {
        Map<String, Job> jobs = new LinkedHashMap<>();
        jobs.put("reduceByKey", ShuffleJobs::reduceByKey);
        jobs.put("groupByKey", ShuffleJobs::groupByKey);
        jobs.put("sortByKey", ShuffleJobs::sortByKey);
        jobs.put("join", ShuffleJobs::join);
        jobs.put("cogroup", ShuffleJobs::cogroup);
        jobs.put("repartition", ShuffleJobs::repartition);
        jobs.put("partitionBy300", ShuffleJobs::partitionBy300);
        jobs.put("sqlAggregation", ShuffleJobs::sqlAggregation);
        jobs.put("sqlJoins", ShuffleJobs::sqlJoins);
        jobs.put("emptyPartitions", ShuffleJobs::emptyPartitions);
        jobs.put("skewedPartition", ShuffleJobs::skewedPartition);
        jobs.put("recordsOver8MiB", ShuffleJobs::recordsOver8MiB);
        jobs.put("reducePartitions2000", ShuffleJobs::reducePartitions2000);
        return jobs;
    }

    static JavaSparkContext jsc(SparkSession spark) {
        return JavaSparkContext.fromSparkContext(spark.sparkContext());
    }

    static List<Integer> range(int n) {
        return IntStream.range(0, n).boxed().collect(Collectors.toList());
    }

    static List<String> sorted(List<?> values) {
        return values.stream().map(String::valueOf).sorted().collect(Collectors.toList());
    }

    /** Sort-based writer with map-side combine. */
    static List<String> reduceByKey(SparkSession spark) {
        return sorted(jsc(spark).parallelize(range(200_000), 8)
                .mapToPair(i -> new Tuple2<>(i % 1000, (long) i))
                .reduceByKey(Long::sum, 16)
                .collect());
    }

    /** No map-side combine and few partitions: the bypass-merge writer. */
    static List<String> groupByKey(SparkSession spark) {
        return sorted(jsc(spark).parallelize(range(100_000), 6)
                .mapToPair(i -> new Tuple2<>(i % 500, i))
                .groupByKey(12)
                .mapValues(ShuffleJobs::digestInts)
                .collect());
    }

    /** A global order: compared in order. Keys are distinct (an odd multiplier is a bijection mod 2^32). */
    static List<String> sortByKey(SparkSession spark) {
        return jsc(spark).parallelize(range(60_000), 6)
                .mapToPair(i -> new Tuple2<>((int) (i * 2654435761L), "v" + i))
                .sortByKey(true, 10)
                .map(t -> t._1 + "=" + t._2)
                .collect();
    }

    static List<String> join(SparkSession spark) {
        JavaSparkContext sc = jsc(spark);
        JavaPairRDD<Integer, String> left = sc.parallelize(range(30_000), 5).mapToPair(i -> new Tuple2<>(i % 3000, "L" + i));
        JavaPairRDD<Integer, String> right = sc.parallelize(range(9000), 3).mapToPair(i -> new Tuple2<>(i % 4500, "R" + i));
        List<String> out = sorted(left.join(right, 9).collect());
        assertTrue(out.size() == 60_000, "join pairs: " + out.size()); // 3000 keys x 10 left x 2 right
        return out;
    }

    static List<String> cogroup(SparkSession spark) {
        JavaSparkContext sc = jsc(spark);
        JavaPairRDD<Integer, Integer> a = sc.parallelize(range(20_000), 4).mapToPair(i -> new Tuple2<>(i % 700, i));
        JavaPairRDD<Integer, String> b = sc.parallelize(range(5000), 2).mapToPair(i -> new Tuple2<>(i % 900, "b" + i));
        JavaPairRDD<Integer, Long> c = sc.parallelize(range(3000), 3).mapToPair(i -> new Tuple2<>(i % 1100, (long) i * 7));
        return sorted(a.cogroup(b, c, 7)
                .mapValues(t -> digestInts(t._1()) + "|" + sortedJoin(t._2()) + "|" + sortedJoin(t._3()))
                .collect());
    }

    /** Round-robin from a seeded start: which record lands in which partition is deterministic, compared per partition. */
    static List<String> repartition(SparkSession spark) {
        return sorted(jsc(spark).parallelize(range(50_000), 5)
                .map(i -> "r" + i)
                .repartition(7)
                .mapPartitionsWithIndex((idx, it) -> {
                    long count = 0;
                    long hashes = 0;
                    while (it.hasNext()) {
                        count++;
                        hashes += it.next().hashCode();
                    }
                    return Collections.singletonList(idx + ":" + count + ":" + hashes).iterator();
                }, true)
                .collect());
    }

    /**
     * No aggregation and more than 200 partitions: the serialized (unsafe) writer with a relocatable
     * serializer (Kryo), the sort writer with Java serialization.
     */
    static List<String> partitionBy300(SparkSession spark) {
        return sorted(jsc(spark).parallelize(range(60_000), 4)
                .mapToPair(i -> new Tuple2<>((long) i * 31 % 10_007, "p" + i))
                .partitionBy(new HashPartitioner(300))
                .mapPartitionsWithIndex((idx, it) -> {
                    List<String> rows = new ArrayList<>();
                    it.forEachRemaining(t -> rows.add(idx + ":" + t._1 + ":" + t._2));
                    return rows.iterator();
                }, true)
                .collect());
    }

    /** SQL aggregation under adaptive execution, compared in the query's order. */
    static List<String> sqlAggregation(SparkSession spark) {
        spark.range(0, 300_000, 1, 6)
                .selectExpr("id % 997 AS k", "id AS v", "CAST(id % 13 AS STRING) AS s", "id % 5 AS g")
                .createOrReplaceTempView("agg_src");
        Dataset<Row> df = spark.sql("SELECT k, count(*) AS n, sum(v) AS sv, max(s) AS ms, count(DISTINCT g) AS dg"
                + " FROM agg_src GROUP BY k ORDER BY k");
        List<String> out = rows(df);
        assertAdaptive(df);
        assertTrue(out.size() == 997, "groups: " + out.size());
        return out;
    }

    /** Shuffled joins (inner, left outer, and a join then an aggregation) under adaptive execution. */
    static List<String> sqlJoins(SparkSession spark) {
        spark.range(0, 120_000, 1, 5).selectExpr("id AS a_id", "id % 5000 AS k", "id * 3 AS x").createOrReplaceTempView("ja");
        spark.range(0, 40_000, 1, 3).selectExpr("id % 7000 AS k", "id AS y", "concat('y', id) AS ys").createOrReplaceTempView("jb");
        List<String> out = new ArrayList<>();
        Dataset<Row> inner = spark.sql("SELECT ja.k, count(*) AS n, sum(x) AS sx, sum(y) AS sy, max(ys) AS mys"
                + " FROM ja JOIN jb ON ja.k = jb.k GROUP BY ja.k ORDER BY ja.k");
        out.addAll(rows(inner));
        assertAdaptive(inner);
        assertTrue(inner.queryExecution().executedPlan().toString().contains("SortMergeJoin")
                || inner.queryExecution().executedPlan().toString().contains("ShuffledHashJoin"), "a shuffled join");
        Dataset<Row> outer = spark.sql("SELECT jb.k, count(ja.a_id) AS n, sum(ja.x) AS sx FROM jb LEFT JOIN ja"
                + " ON ja.k = jb.k WHERE jb.y % 3 = 0 GROUP BY jb.k");
        out.addAll(sorted(rows(outer)));
        return out;
    }

    /** Five keys into 200 partitions (most of them empty in every map output), and a shuffle of nothing at all. */
    static List<String> emptyPartitions(SparkSession spark) {
        JavaSparkContext sc = jsc(spark);
        List<String> out = sorted(sc.parallelize(range(10_000), 4)
                .mapToPair(i -> new Tuple2<>(i % 5, 1L))
                .reduceByKey(Long::sum, 200)
                .mapPartitionsWithIndex((idx, it) -> {
                    List<String> rows = new ArrayList<>();
                    it.forEachRemaining(t -> rows.add("p" + idx + ":" + t._1 + "=" + t._2));
                    return rows.iterator();
                }, true)
                .collect());
        assertTrue(out.size() == 5, "five non-empty partitions: " + out);
        long nothing = sc.parallelize(Collections.<Integer>emptyList(), 3)
                .mapToPair(i -> new Tuple2<>(i, i))
                .groupByKey(4)
                .count();
        out.add("emptyShuffle=" + nothing);
        return out;
    }

    /**
     * Two map tasks each write ~12 MiB of incompressible values under one key: the reducer of that key
     * fetches two blocks, each bigger than the pool's largest buffer, ~24 MiB in one partition.
     */
    static List<String> skewedPartition(SparkSession spark) {
        int valuesPerMap = 6000;
        int valueSize = 2048;
        assertTrue((long) valuesPerMap * valueSize > POOL_MAX_BUFFER + MIB, "the block must exceed 8 MiB");
        return sorted(jsc(spark).parallelize(Arrays.asList(0, 1), 2)
                .flatMapToPair(map -> skewedRecords(map, valuesPerMap, valueSize))
                .groupByKey(4)
                .mapValues(ShuffleJobs::digestBytes)
                .collect());
    }

    /** Single records of 9 to 10 MiB: every block holding one is over 8 MiB. */
    static List<String> recordsOver8MiB(SparkSession spark) {
        return sorted(jsc(spark).parallelize(Arrays.asList(0, 1, 2, 3), 2)
                .mapToPair(i -> new Tuple2<>(i, randomBytes(9 * MIB + i * 256 * 1024, 1000 + i)))
                .partitionBy(new HashPartitioner(3))
                .map(t -> t._1 + ":" + t._2.length + ":" + crc(t._2))
                .collect());
    }

    /** 2000 reduce partitions from 4 maps: 8000 blocks, most of them a few records. */
    static List<String> reducePartitions2000(SparkSession spark) {
        return sorted(jsc(spark).parallelize(range(40_000), 4)
                .mapToPair(i -> new Tuple2<>(i % 9000, (long) i * i))
                .reduceByKey(Long::sum, 2000)
                .collect());
    }

    // ---- helpers (run on executors; static, no captured state) ----

    static List<String> rows(Dataset<Row> df) {
        return df.collectAsList().stream().map(Row::toString).collect(Collectors.toList());
    }

    static void assertAdaptive(Dataset<Row> df) {
        String plan = df.queryExecution().executedPlan().toString();
        assertTrue(plan.contains("AdaptiveSparkPlan"), "adaptive execution ran: " + plan);
    }

    static String digestInts(Iterable<Integer> values) {
        List<Integer> list = new ArrayList<>();
        values.forEach(list::add);
        Collections.sort(list);
        long sum = 0;
        for (int v : list) {
            sum += v;
        }
        return list.size() + ":" + sum + ":" + list.hashCode();
    }

    static String sortedJoin(Iterable<?> values) {
        return StreamSupport.stream(values.spliterator(), false).map(String::valueOf).sorted()
                .collect(Collectors.joining(","));
    }

    /** Count, total length and an order-independent sum of CRC32s. */
    static String digestBytes(Iterable<byte[]> values) {
        long count = 0;
        long bytes = 0;
        long crcs = 0;
        for (byte[] v : values) {
            count++;
            bytes += v.length;
            crcs += crc(v);
        }
        return count + ":" + bytes + ":" + crcs;
    }

    static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    static byte[] randomBytes(int size, long seed) {
        byte[] b = new byte[size];
        new Random(seed).nextBytes(b);
        return b;
    }

    /** Map {@code map}'s records: key 0 gets {@code n} random values, keys 1..50 one small value each. */
    static Iterator<Tuple2<Integer, byte[]>> skewedRecords(int map, int n, int size) {
        Random random = new Random(map * 7919L + 17);
        return new Iterator<>() {
            int i;

            @Override
            public boolean hasNext() {
                return i < n + 50;
            }

            @Override
            public Tuple2<Integer, byte[]> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                int at = i++;
                byte[] value = new byte[at < n ? size : 16 + at % 7];
                random.nextBytes(value);
                return new Tuple2<>(at < n ? 0 : at - n + 1, value);
            }
        };
    }
}

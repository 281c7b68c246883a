package io.rdmaplane.it.shuffle;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.SplittableRandom;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.zip.CRC32C;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * The shuffle the main job and the benchmark run: {@code maps} map tasks generate records
 * (a random long key, a value of {@code valueBytes} random bytes; the same records for the same
 * seed on every run), {@code reduceByKey} XORs the values of equal keys across
 * {@code partitions} reduce partitions, and the result is summarized as an order-independent
 * digest (count, sum and XOR of a 64-bit hash of every result record) so two runs can be compared
 * without collecting the data. Keys are drawn from as many values as there are records, so
 * map-side combining removes little and about {@code bytes} go through the shuffle.
 *
 * @param bytes      raw record bytes to generate (keys and values)
 * @param valueBytes bytes of one value
 */
public record ShuffleWorkload(long bytes, int valueBytes, int maps, int partitions, long seed) implements Serializable {

    public ShuffleWorkload {
        if (bytes < 1 << 20 || valueBytes < 1 || maps < 1 || partitions < 1) {
            throw new IllegalArgumentException("need bytes >= 1m, valueBytes, maps, partitions >= 1: " + bytes + " "
                    + valueBytes + " " + maps + " " + partitions);
        }
    }

    public long records() {
        return bytes / (valueBytes + Long.BYTES);
    }

    /** The result of one run. */
    public record Digest(long count, long sum, long xor) {
        @Override
        public String toString() {
            return String.format("%d records, hash %016x/%016x", count, sum, xor);
        }
    }

    /** What one application measured. */
    public record Outcome(String manager, double jobSeconds, ShuffleTaskListener.Totals metrics, Digest digest,
                          List<Map<String, String>> executors) {
    }

    /**
     * An untimed small application (16 MiB, sort shuffle) in this driver JVM: the first application in a JVM is
     * slower whatever its shuffle (sort against sort measured 1.15x and 1.29x without it), which would count
     * against whichever manager runs first. {@code settings}: spark.* settings, as the timed runs have them.
     */
    public void warmUpDriver(int workers, Map<String, String> settings) {
        new ShuffleWorkload(16 << 20, valueBytes, maps, partitions, seed)
                .run(SparkLocalCluster.conf("shuffle-warm-up", workers, 1024, "1g", SparkLocalCluster.SORT_MANAGER, settings, ""), workers);
    }

    /**
     * Starts a fresh application with {@code conf}, runs the shuffle once, collects the
     * executors' reports and stops the application.
     */
    public Outcome run(SparkConf conf, int workers) {
        ShuffleTaskListener listener = new ShuffleTaskListener();
        try (JavaSparkContext jsc = new JavaSparkContext(conf)) {
            jsc.sc().addSparkListener(listener);
            // executors register asynchronously; a job started before both are up would run its maps on one
            waitForExecutors(jsc, workers);
            long start = System.nanoTime();
            Digest digest = runJob(jsc);
            double seconds = (System.nanoTime() - start) / 1e9;
            ShuffleTaskListener.Totals totals = listener.awaitTotals();
            List<Map<String, String>> reports = ExecutorReports.collect(jsc, workers);
            return new Outcome(conf.get("spark.shuffle.manager"), seconds, totals, digest, reports);
        }
    }

    private Digest runJob(JavaSparkContext jsc) {
        long perMap = records() / maps;
        long extra = records() % maps;
        long keySpace = Math.max(1, records());
        int value = valueBytes;
        long s = seed;
        List<Integer> mapIds = IntStream.range(0, maps).boxed().collect(Collectors.toList());
        JavaPairRDD<Long, byte[]> input = jsc.parallelize(mapIds, maps)
                .flatMapToPair(m -> new Generator(s, m, perMap + (m < extra ? 1 : 0), keySpace, value));
        // long[] {count, sum, xor} per partition: Kryo, if a run chooses it, cannot build records
        List<long[]> parts = input.reduceByKey(ShuffleWorkload::xor, partitions)
                .mapPartitions(ShuffleWorkload::digest)
                .collect();
        long count = 0;
        long sum = 0;
        long xor = 0;
        for (long[] d : parts) {
            count += d[0];
            sum += d[1];
            xor ^= d[2];
        }
        return new Digest(count, sum, xor);
    }

    private static void waitForExecutors(JavaSparkContext jsc, int workers) {
        long deadline = System.nanoTime() + 120_000_000_000L;
        // the driver is in the list too
        while (jsc.sc().getExecutorMemoryStatus().size() < workers + 1) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("only " + (jsc.sc().getExecutorMemoryStatus().size() - 1) + " of "
                        + workers + " executors registered within 120 s");
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
    }

    static byte[] xor(byte[] a, byte[] b) {
        byte[] out = new byte[Math.max(a.length, b.length)];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) ((i < a.length ? a[i] : 0) ^ (i < b.length ? b[i] : 0));
        }
        return out;
    }

    static Iterator<long[]> digest(Iterator<Tuple2<Long, byte[]>> records) {
        long count = 0;
        long sum = 0;
        long xor = 0;
        CRC32C crc = new CRC32C();
        while (records.hasNext()) {
            Tuple2<Long, byte[]> r = records.next();
            crc.reset();
            crc.update(r._2());
            long h = mix(mix(r._1()) ^ (crc.getValue() << 32 | r._2().length));
            count++;
            sum += h;
            xor ^= h;
        }
        List<long[]> one = new ArrayList<>(1);
        one.add(new long[] {count, sum, xor});
        return one.iterator();
    }

    /** SplitMix64's finalizer: a good 64-bit mixing function. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    /** The records of one map task, generated lazily from (seed, map id). */
    static final class Generator implements Iterator<Tuple2<Long, byte[]>> {
        private final SplittableRandom random;
        private final long keySpace;
        private final int valueBytes;
        private long left;

        Generator(long seed, int map, long count, long keySpace, int valueBytes) {
            this.random = new SplittableRandom(mix(seed) + map);
            this.left = count;
            this.keySpace = keySpace;
            this.valueBytes = valueBytes;
        }

        @Override
        public boolean hasNext() {
            return left > 0;
        }

        @Override
        public Tuple2<Long, byte[]> next() {
            if (left <= 0) {
                throw new NoSuchElementException();
            }
            left--;
            long key = random.nextLong(keySpace);
            byte[] value = new byte[valueBytes];
            random.nextBytes(value);
            return new Tuple2<>(key, value);
        }
    }
}

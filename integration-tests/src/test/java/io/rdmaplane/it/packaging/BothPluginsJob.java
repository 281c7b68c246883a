package io.rdmaplane.it.packaging;

import io.rdmaplane.spark.RdmaShuffleManager;
import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.util.LongAccumulator;
import scala.Tuple2;

/**
 * The application {@link BothPluginsOneClassPathTest} starts in a JVM of its own, on Spark's class path and the plug-in
 * jars only (never this build's module classes): {@code local-cluster[2,1,...]} reads a file of 16-byte records
 * ({@code key:i64 value:i64}) from HDFS, one task per block with a positioned read, sums the values per key through a
 * shuffle and prints the sums. Run {@code rdma}: RdmaShuffleManager with map outputs served from their file mappings and
 * the HDFS client plug-in; each task counts, around its own read, the client plug-in's RDMA bytes, fallbacks and
 * declined reads (one core per executor, so a task's delta is its own). Run {@code sort}: Spark's sort shuffle and the
 * stock HDFS client, in local mode. Prints {@code fact RUN.NAME VALUE} lines for the test to check.
 *
 * <p>Started through SparkSubmit (its jar the application's, the plug-in jars on the class path or in {@code --jars}).
 * Arguments: {@code runs hdfsUri path fileLength blockLength}, runs being {@code sort}, {@code rdma} or both
 * ({@code sort,rdma}), one application each, one after the other. System properties of the JVM: {@code spark.*}
 * settings (SparkConf's), among them {@code spark.shuffle.rdma.provider} (default tcp) and
 * {@code spark.hadoop.dfs.rdma.*}, the HDFS client plug-in's settings for the tasks' reads; {@value #ADDRESS_PROPERTY},
 * the driver's and executors' address (default 127.0.0.1).
 */
public final class BothPluginsJob {
    static final String ACCESSOR_KEY = "dfs.client.replica.accessor.builder.classes";
    static final String ACCESSOR = "io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder";
    static final int RECORD = 16;
    static final int PARTITIONS = 6;
    static final String ADDRESS_PROPERTY = "rdma.both.address";

    private BothPluginsJob() {
    }

    public static void main(String[] args) throws Exception {
        for (String run : args[0].split(",")) {
            run("rdma".equals(run), args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]));
        }
    }

    private static void run(boolean rdma, String uri, String path, long length, long block) throws Exception {
        String name = rdma ? "rdma" : "sort";
        String address = System.getProperty(ADDRESS_PROPERTY, "127.0.0.1");
        // SparkSubmit's settings (spark.jars: this job's jar, and --jars) come in as system properties
        // the baseline needs no executor JVMs: Spark's sort shuffle gives the same sums in local mode
        SparkConf conf = new SparkConf().setMaster(rdma ? "local-cluster[2,1,768]" : "local[2]").setAppName("both-plugins-" + name)
                .set("spark.ui.enabled", "false")
                .set("spark.driver.host", address)
                .set("spark.driver.bindAddress", address)
                .set("spark.testing", "1")
                .set("spark.test.home", System.getProperty("spark.test.home"))
                .set("spark.executor.memory", "512m")
                .set("spark.executor.extraJavaOptions", System.getProperty("rdma.jvm.module.flags", "") + " -XX:TieredStopAtLevel=1")
                .set("spark.executorEnv.SPARK_LOCAL_IP", address)
                // reduce tasks spread over both executors, so each READs the other's map outputs
                .set("spark.locality.wait", "0");
        if (rdma) {
            conf.set("spark.shuffle.manager", "io.rdmaplane.spark.RdmaShuffleManager")
                    .set("spark.shuffle.rdma.mapOutput.mapFiles", "true")
                    .setIfMissing("spark.shuffle.rdma.provider", "tcp");
        } else {
            conf.set("spark.shuffle.manager", "sort");
        }
        // the HDFS client plug-in's settings, for the tasks' own Hadoop configurations
        HashMap<String, String> client = new HashMap<>();
        for (Tuple2<String, String> kv : conf.getAllWithPrefix("spark.hadoop.dfs.rdma.")) {
            client.put("dfs.rdma." + kv._1(), kv._2());
        }
        try (JavaSparkContext jsc = new JavaSparkContext(conf)) {
            LongAccumulator rdmaBytes = jsc.sc().longAccumulator("hdfs.client.rdma.bytes");
            LongAccumulator fallbacks = jsc.sc().longAccumulator("hdfs.client.fallbacks");
            LongAccumulator declined = jsc.sc().longAccumulator("hdfs.client.declined");
            LongAccumulator read = jsc.sc().longAccumulator("bytes read");
            List<Long> offsets = new ArrayList<>();
            for (long at = 0; at < length; at += block) {
                offsets.add(at);
            }
            List<Tuple2<Long, Long>> sums = jsc.parallelize(offsets, offsets.size())
                    .flatMapToPair(offset -> {
                        Map<String, Long> before = clientCounters(rdma);
                        ByteBuffer records = readBlock(uri, path, offset, (int) Math.min(block, length - offset), rdma, client);
                        Map<String, Long> after = clientCounters(rdma);
                        read.add(records.remaining());
                        rdmaBytes.add(after.get("hdfs.client.rdma.bytes") - before.get("hdfs.client.rdma.bytes"));
                        fallbacks.add(after.get("hdfs.client.fallbacks") - before.get("hdfs.client.fallbacks"));
                        declined.add(after.get("hdfs.client.declined") - before.get("hdfs.client.declined"));
                        List<Tuple2<Long, Long>> pairs = new ArrayList<>(records.remaining() / RECORD);
                        while (records.remaining() >= RECORD) {
                            pairs.add(new Tuple2<>(records.getLong(), records.getLong()));
                        }
                        return pairs.iterator();
                    })
                    .reduceByKey(Long::sum, PARTITIONS)
                    .collect();
            long checksum = 0;
            for (Map.Entry<Long, Long> e : new TreeMap<>(toMap(sums)).entrySet()) {
                checksum = checksum * 31 + e.getKey() * 1_000_003L + e.getValue();
            }
            fact(name, "keys", sums.size());
            fact(name, "checksum", checksum);
            fact(name, "bytesRead", read.value());
            fact(name, "hdfsRdmaBytes", rdmaBytes.value());
            fact(name, "hdfsFallbacks", fallbacks.value());
            fact(name, "hdfsDeclined", declined.value());
            if (rdma) {
                // one report per executor: tasks of a one-slot-per-executor cluster, until both answered
                Map<String, Map<String, String>> reports = new TreeMap<>();
                for (int round = 0; round < 20 && reports.size() < 2; round++) {
                    for (Map<String, String> r : jsc.parallelize(List.of(1, 2, 3, 4), 4).map(i -> RdmaShuffleManager.executorReport()).collect()) {
                        reports.put(r.get("executorId"), r);
                    }
                }
                fact(name, "executors", reports.size());
                long blocks = 0;
                long fetchFallbacks = 0;
                long published = 0;
                long mapped = 0;
                long copied = 0;
                StringBuilder providers = new StringBuilder();
                long appFallbacks = 0;
                for (Map<String, String> r : reports.values()) {
                    blocks += count(r, "rdma.shuffle.fetch.rdma.blocks");
                    fetchFallbacks += count(r, "rdma.shuffle.fallback.fetch");
                    appFallbacks += count(r, "rdma.shuffle.fallback.app");
                    published += count(r, "rdma.shuffle.published.maps");
                    mapped += count(r, "rdma.shuffle.published.mapped");
                    copied += count(r, "rdma.shuffle.published.copied");
                    providers.append(r.get("provider")).append(' ');
                }
                fact(name, "shuffleRdmaBlocks", blocks);
                fact(name, "shuffleFetchFallbacks", fetchFallbacks);
                fact(name, "shuffleAppFallbacks", appFallbacks);
                fact(name, "shufflePublishedMaps", published);
                fact(name, "shuffleMappedMaps", mapped);
                fact(name, "shuffleCopiedMaps", copied);
                System.out.println("fact rdma.providers " + providers.toString().trim());
            }
        }
    }

    private static long count(Map<String, String> report, String name) {
        String v = report.get(name);
        return v == null ? 0 : Long.parseLong(v);
    }

    private static Map<Long, Long> toMap(List<Tuple2<Long, Long>> pairs) {
        Map<Long, Long> map = new TreeMap<>();
        for (Tuple2<Long, Long> p : pairs) {
            map.put(p._1(), p._2());
        }
        return map;
    }

    private static void fact(String run, String name, long value) {
        System.out.println("fact " + run + "." + name + " " + value);
    }

    /** One positioned read of a block of the file, through the client plug-in or the stock client. */
    private static ByteBuffer readBlock(String uri, String path, long offset, int length, boolean rdma, Map<String, String> client)
            throws IOException {
        Configuration conf = new Configuration();
        // the accessor reads files of the default filesystem only
        conf.set("fs.defaultFS", uri);
        if (rdma) {
            conf.set(ACCESSOR_KEY, ACCESSOR);
            client.forEach(conf::set);
        }
        byte[] bytes = new byte[length];
        try (FileSystem fs = FileSystem.newInstance(java.net.URI.create(uri), conf); FSDataInputStream in = fs.open(new Path(path))) {
            in.readFully(offset, bytes);
        }
        return ByteBuffer.wrap(bytes);
    }

    /**
     * This JVM's client plug-in counters, reached by reflection: in the HDFS plug-in jar their registry is the
     * relocated Dropwizard type. All zero for the stock client.
     */
    private static Map<String, Long> clientCounters(boolean rdma) throws ReflectiveOperationException {
        Map<String, Long> counters = new TreeMap<>();
        for (String name : List.of("hdfs.client.rdma.bytes", "hdfs.client.fallbacks", "hdfs.client.declined")) {
            counters.put(name, 0L);
        }
        if (!rdma) {
            return counters;
        }
        Object registry = Class.forName(ACCESSOR, true, Thread.currentThread().getContextClassLoader()).getMethod("metrics").invoke(null);
        Method counter = registry.getClass().getMethod("counter", String.class);
        for (Iterator<String> it = new ArrayList<>(counters.keySet()).iterator(); it.hasNext(); ) {
            String name = it.next();
            Object c = counter.invoke(registry, name);
            counters.put(name, (Long) c.getClass().getMethod("getCount").invoke(c));
        }
        return counters;
    }
}

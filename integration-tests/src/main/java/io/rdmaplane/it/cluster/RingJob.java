package io.rdmaplane.it.cluster;

import io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder;
import io.rdmaplane.spark.RdmaShuffleManager;
import io.rdmaplane.spark.ShuffleMetrics;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import java.util.zip.CRC32C;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import scala.Tuple2;

/**
 * The ring's Spark application (submitted with SparkSubmit; its jar is built from this class by the harness).
 * It reads commands from its standard input, one a line, and answers on its output with lines starting
 * {@code RING-}:
 * <ul>
 * <li>{@code shuffle NAME RECORDS MAPS REDUCES SLOW_MS [paced MARKS]}: a shuffle of RECORDS generated records (a 64-byte
 * value each) from MAPS map tasks into REDUCES reduce tasks, each lasting at least SLOW_MS, so that reduce tasks start
 * in waves and READs go on through the stage ({@code paced}: each task reads its records slowly, pausing
 * {@value #PACE_STEPS} times, so that its fetches go on through the task, and marks in the directory MARKS when they
 * do: {@link ReadingMark}). Prints {@code RING-MAPS NAME shuffle=ID EXECUTOR=MAP_ID,...} (the
 * shuffle's id and each executor's map ids) and {@code RING-REDUCING NAME} when the reduce stage is submitted (the
 * moment a fault is injected), then {@code RING-RESULT NAME count=.. hash=.. expectedCount=..
 * expectedHash=.. millis=..} or {@code RING-FAILED NAME why}. The hash is an order-free sum over the records,
 * so a lost or duplicated record changes count or hash.</li>
 * <li>{@code tpcds-write BASE TABLE...} and {@code tpcds-query NAME BASE OUT TABLE...}: TPC-DS tables written into
 * the default filesystem (the ring's HDFS) and a query over them ({@link RingTpcds}).</li>
 * <li>{@code report EXECUTORS}: one {@code RING-REPORT} line per executor (its RDMA report, its HDFS client plug-in's
 * {@code hdfs.client.*} counters when it has the plug-in, pid, host, Spark version, threads, open files), a
 * {@code RING-DRIVER} line (the driver's RDMA report and HDFS client counters), then {@code RING-REPORT-END}.</li>
 * <li>{@code quit}.</li>
 * </ul>
 */
public final class RingJob {
    private static final Set<String> ANNOUNCED = ConcurrentHashMap.newKeySet();
    /** The runs whose first finished task was announced ({@code RING-READING}). */
    private static final Set<String> READING = ConcurrentHashMap.newKeySet();
    private static volatile String running;
    /** The running shuffle's id, and its map tasks' ids (Spark's map ids) by the executor that ran them. */
    private static volatile int runningShuffle = -1;
    private static final Map<String, List<Long>> MAPS = new ConcurrentHashMap<>();

    private RingJob() {
    }

    public static void main(String[] args) throws Exception {
        try (JavaSparkContext sc = new JavaSparkContext(new SparkConf())) {
            sc.sc().addSparkListener(new SparkListener() {
                @Override
                public void onTaskEnd(SparkListenerTaskEnd end) {
                    String name = running;
                    if (name != null && end.taskInfo().successful() && READING.add(name)) {
                        say("RING-READING " + name);
                    }
                    if (running != null && "ShuffleMapTask".equals(end.taskType()) && end.taskInfo().successful()) {
                        MAPS.computeIfAbsent(end.taskInfo().executorId(), e -> new java.util.concurrent.CopyOnWriteArrayList<>())
                                .add(end.taskInfo().taskId());
                    }
                }

                @Override
                public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
                    String name = running;
                    if (name != null && !submitted.stageInfo().parentIds().isEmpty() && ANNOUNCED.add(name)) {
                        say("RING-MAPS " + name + " shuffle=" + runningShuffle + " " + MAPS.entrySet().stream()
                                .map(e -> e.getKey() + "=" + e.getValue().stream().map(String::valueOf).collect(Collectors.joining(",")))
                                .collect(Collectors.joining(" ")));
                        say("RING-REDUCING " + name);
                    }
                }
            });
            say("RING-READY " + sc.sc().applicationId() + " shuffleManager=" + sc.getConf().get("spark.shuffle.manager", "sort")
                    + " sparkVersion=" + sc.version());
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                String[] w = line.trim().split("\\s+");
                try {
                    switch (w[0]) {
                        case "shuffle" -> shuffle(sc, w[1], Long.parseLong(w[2]), Integer.parseInt(w[3]), Integer.parseInt(w[4]),
                                Long.parseLong(w[5]), w.length > 7 && w[6].equals("paced") ? w[7] : null);
                        case "tpcds-write" -> RingTpcds.write(sc, w[1], List.of(w).subList(2, w.length));
                        case "tpcds-query" -> RingTpcds.query(sc, w[1], w[2], java.nio.file.Path.of(w[3]), List.of(w).subList(4, w.length));
                        case "report" -> report(sc, Integer.parseInt(w[1]));
                        case "quit" -> {
                            say("RING-BYE");
                            return;
                        }
                        default -> say("RING-FAILED " + w[0] + " unknown command: " + line);
                    }
                } catch (Exception e) {
                    say("RING-FAILED " + (w.length > 1 ? w[1] : w[0]) + " " + e.toString().replace('\n', ' '));
                }
            }
        }
    }

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** A run named {@code name} begins: the listener announces its moments ({@code RING-READING}, {@code RING-REDUCING}) once each. */
    static void begin(String name) {
        MAPS.clear();
        ANNOUNCED.remove(name);
        READING.remove(name);
        running = name;
    }

    static void end() {
        running = null;
    }

    /** Pauses of a paced reduce task: its least time in this many steps, one every 1/PACE_STEPS of its expected records. */
    static final int PACE_STEPS = 40;

    /** {@code marks}: the directory of a paced shuffle's {@link ReadingMark}s; null: not paced. */
    private static void shuffle(JavaSparkContext sc, String name, long records, int maps, int reduces, long slowMillis, String marks) {
        boolean paced = marks != null;
        long perMap = records / maps;
        long perReduce = records / reduces;
        long pauseEvery = Math.max(1, perReduce / PACE_STEPS);
        long started = System.nanoTime();
        begin(name);
        List<long[]> parts;
        try {
            JavaRDD<Integer> seeds = sc.parallelize(range(maps), maps);
            JavaPairRDD<Long, byte[]> partitioned = seeds.flatMapToPair(p -> {
                        List<Tuple2<Long, byte[]>> out = new ArrayList<>((int) perMap);
                        for (long i = p * perMap; i < (p + 1) * perMap; i++) {
                            out.add(new Tuple2<>(key(i), value(i)));
                        }
                        return out.iterator();
                    })
                    .partitionBy(new HashPartitioner(reduces));
            runningShuffle = ((ShuffleDependency<?, ?, ?>) partitioned.rdd().dependencies().head()).shuffleId();
            parts = partitioned
                    .mapPartitions(it -> {
                        long n = 0;
                        long h = 0;
                        ReadingMark mark = paced ? new ReadingMark(java.nio.file.Path.of(marks, name + "-" + TaskContext.getPartitionId())) : null;
                        while (it.hasNext()) {
                            Tuple2<Long, byte[]> r = it.next();
                            n++;
                            h += recordHash(r._1(), r._2());
                            if (paced && n % pauseEvery == 0) {
                                Thread.sleep(slowMillis / PACE_STEPS); // read slowly: the fetcher asks for more blocks as this takes them
                                mark.pause(n, perReduce);
                            }
                        }
                        if (!paced) {
                            Thread.sleep(slowMillis); // the reduce work: keeps the stage's tasks in waves
                        }
                        return List.of(new long[] {n, h}).iterator();
                    })
                    .collect();
        } finally {
            end();
        }
        long millis = (System.nanoTime() - started) / 1_000_000;
        long count = 0;
        long hash = 0;
        for (long[] p : parts) {
            count += p[0];
            hash += p[1];
        }
        long expectedHash = 0;
        for (long i = 0; i < perMap * maps; i++) {
            expectedHash += recordHash(key(i), value(i));
        }
        say("RING-RESULT " + name + " count=" + count + " hash=" + Long.toHexString(hash) + " expectedCount=" + perMap * maps
                + " expectedHash=" + Long.toHexString(expectedHash) + " millis=" + millis);
    }

    /** Pauses of a paced reduce task at which its executor's RDMA block count grew (after its first) before it marks. */
    static final int READING_GROWTH_PAUSES = 2;

    /**
     * A paced reduce task's sign to the harness that its READs go on in the middle of the task, where a fault can
     * meet them whatever the machine's speed: the file {@code MARKS/NAME-PARTITION}, written once its executor's count
     * of blocks READ over RDMA has grown at {@value #READING_GROWTH_PAUSES} of the task's pauses after the first (fetches
     * that follow the task's reading, not its first burst) while a quarter of its records or more is still to come
     * (and with them more fetches: Spark's fetcher asks for blocks as the task takes them, within maxSizeInFlight).
     * Under sort shuffle the count stays 0 and nothing is marked.
     */
    static final class ReadingMark {
        private final java.nio.file.Path file;
        private long lastBlocks = -1;
        private int grew;
        private boolean marked;

        ReadingMark(java.nio.file.Path file) {
            this.file = file;
        }

        void pause(long read, long expected) throws java.io.IOException {
            long blocks = Long.parseLong(RdmaShuffleManager.executorReport().getOrDefault(ShuffleMetrics.FETCH_RDMA_BLOCKS, "0"));
            if (lastBlocks >= 0 && blocks > lastBlocks) {
                grew++;
            }
            lastBlocks = blocks;
            if (!marked && grew >= READING_GROWTH_PAUSES && read * 4 <= expected * 3) {
                marked = true;
                java.nio.file.Files.writeString(file, "read=" + read + " of " + expected + " rdmaBlocks=" + blocks + "\n");
            }
        }
    }

    private static void report(JavaSparkContext sc, int executors) {
        Map<String, Map<String, String>> byId = new TreeMap<>();
        int tasks = 8 * executors;
        for (int attempt = 0; attempt < 10 && byId.size() < executors; attempt++) {
            // tasks that last a little, so that every executor's core takes some: the sleep is the load itself
            List<Map<String, String>> reports = sc.parallelize(range(tasks), tasks).map(i -> {
                Thread.sleep(50);
                return executorFacts();
            }).collect();
            reports.forEach(r -> byId.put(r.get("executorId"), r));
        }
        byId.values().forEach(r -> say("RING-REPORT " + encode(r)));
        Map<String, String> driver = new HashMap<>(RdmaShuffleManager.executorReport());
        driver.putAll(hdfsClientCounters());
        say("RING-DRIVER " + encode(driver));
        say("RING-REPORT-END " + byId.size());
    }

    /**
     * This executor's RDMA report, its HDFS client plug-in's counters when the plug-in is on its class path, plus what
     * an operator sees from outside: pid, host, threads, open files.
     */
    private static Map<String, String> executorFacts() {
        Map<String, String> r = new HashMap<>(RdmaShuffleManager.executorReport());
        r.putAll(hdfsClientCounters());
        r.put("pid", String.valueOf(ProcessHandle.current().pid()));
        r.put("host", SparkEnv.get().blockManager().blockManagerId().host());
        r.put("sparkVersion", org.apache.spark.package$.MODULE$.SPARK_VERSION()); // the Spark this executor JVM runs
        r.put("threads", String.valueOf(ManagementFactory.getThreadMXBean().getThreadCount()));
        String[] fds = new File("/proc/self/fd").list();
        r.put("fds", String.valueOf(fds == null ? -1 : fds.length));
        return r;
    }

    /** The HDFS client plug-in's counters in this JVM ({@code hdfs.client.*}), none without the plug-in jar. */
    private static Map<String, String> hdfsClientCounters() {
        Map<String, String> out = new HashMap<>();
        try {
            RdmaReplicaAccessorBuilder.clientCounters().forEach((name, count) -> out.put(name, String.valueOf(count)));
        } catch (NoClassDefFoundError noPlugin) {
            // an application without the HDFS client plug-in (the sort-shuffle baseline reads with the stock client)
        }
        return out;
    }

    private static String encode(Map<String, String> report) {
        return new TreeMap<>(report).entrySet().stream().map(e -> e.getKey() + "=" + e.getValue().replace('\t', ' ').replace('\n', ' '))
                .collect(Collectors.joining("\t"));
    }

    private static List<Integer> range(int n) {
        List<Integer> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(i);
        }
        return out;
    }

    static long mix(long z) {
        z = (z ^ (z >>> 33)) * 0xff51afd7ed558ccdL;
        z = (z ^ (z >>> 33)) * 0xc4ceb9fe1a85ec53L;
        return z ^ (z >>> 33);
    }

    static long key(long i) {
        return mix(i) & 0xffffffL;
    }

    static byte[] value(long i) {
        byte[] v = new byte[64];
        for (int k = 0; k < 8; k++) {
            long m = mix(i * 8 + k + 0x9e3779b97f4a7c15L);
            for (int b = 0; b < 8; b++) {
                v[k * 8 + b] = (byte) (m >>> (8 * b));
            }
        }
        return v;
    }

    static long recordHash(long key, byte[] value) {
        CRC32C crc = new CRC32C();
        crc.update(value);
        return mix(key * 31 + crc.getValue());
    }
}

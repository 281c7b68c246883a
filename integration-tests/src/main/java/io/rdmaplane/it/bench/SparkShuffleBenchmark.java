package io.rdmaplane.it.bench;

import io.rdmaplane.it.Args;
import io.rdmaplane.it.shuffle.ShuffleReport;
import io.rdmaplane.it.shuffle.ShuffleWorkload;
import io.rdmaplane.it.shuffle.ShuffleWorkload.Outcome;
import io.rdmaplane.it.shuffle.SparkLocalCluster;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;

/**
 * The RDMA shuffle manager against Spark's sort shuffle (Netty) on a larger shuffle, measured in
 * one run: the {@link ShuffleWorkload} job in a {@code local-cluster[2,1,<MiB>]} application,
 * a fresh application per run, the two managers alternating (A B, then B A, ...), for
 * {@code rounds} rounds, after an untimed small application that warms the driver JVM. Prints every
 * run, the medians of job time and fetch wait (summed over reduce tasks) for both, and the ratios
 * RDMA/Netty next to the goals (fetch wait at most 0.8x, job time at most 1.0x). A benchmark, not a test: it asserts no time, but it exits with status 1
 * when any run's result differs from the others.
 *
 * <p>Arguments (all optional): {@code size=2g rounds=3 value=1000 maps=<size/64m> partitions=<maps>
 * executorMemory=<2g from size=1g> capacity=<map-output bytes per executor, with headroom>
 * manager=<class>} and any {@code spark.*=value} (set in every application). Run it with
 * {@code mvn -B -q -Prun -DskipTests verify -Drun.main=io.rdmaplane.it.bench.SparkShuffleBenchmark -Drun.args="size=2g"}.
 */
public final class SparkShuffleBenchmark {
    private static final long MIB = 1 << 20;

    public static void main(String[] args) {
        long size = Args.bytes(args, "size", "2g");
        int rounds = Integer.parseInt(Args.get(args, "rounds", "3"));
        int maps = Integer.parseInt(Args.get(args, "maps", String.valueOf(Math.max(8, size / (64 * MIB)))));
        int partitions = Integer.parseInt(Args.get(args, "partitions", String.valueOf(maps)));
        int value = Integer.parseInt(Args.get(args, "value", "1000"));
        int workers = 2;
        if (rounds < 1) {
            throw new IllegalArgumentException("rounds must be at least 1, was " + rounds);
        }
        // Heap: a map task holds its records in Spark's map-side combine, a reduce task its partition's.
        long heap = Args.bytes(args, "executorMemory", size >= 1L << 30 ? "2g" : "1g");
        // Registered memory for map outputs: every executor keeps what its map tasks wrote (half of
        // the shuffle with two executors, unevenly when tasks land unevenly), plus headroom.
        long capacity = Args.bytes(args, "capacity", String.valueOf(roundUp(size * 3 / 4 + 64 * MIB, MIB)));
        // Direct memory: the map outputs, the reduce pool (256m by default) and Netty's buffers.
        long direct = capacity + 1024 * MIB;
        String manager = Args.get(args, "manager", SparkLocalCluster.RDMA_MANAGER);
        Map<String, String> common = Args.sparkSettings(args);
        Map<String, String> rdmaSettings = new HashMap<>(common);
        if (manager.equals(SparkLocalCluster.RDMA_MANAGER)) {
            rdmaSettings.putIfAbsent("spark.shuffle.rdma.mapOutput.capacity", (capacity / MIB) + "m");
        }
        SparkLocalCluster.prepare();
        ShuffleWorkload workload = new ShuffleWorkload(size, value, maps, partitions, 7);
        int workerMiB = (int) (heap / MIB);
        String executorJvm = "-XX:MaxDirectMemorySize=" + (direct / MIB) + "m";

        System.out.printf(Locale.ROOT, "Spark shuffle benchmark: local-cluster[%d,1,%d], reduceByKey over %s records (%s, %d-byte values),"
                        + " %d maps -> %d partitions, %d rounds, managers alternating, a fresh application per run%n",
                workers, workerMiB, ShuffleReport.count(workload.records()), ShuffleReport.mib(size), value, maps, partitions, rounds);
        System.out.printf(Locale.ROOT, "executors: %s heap, %s direct memory%s%n", ShuffleReport.mib(heap), ShuffleReport.mib(direct),
                rdmaSettings.containsKey("spark.shuffle.rdma.mapOutput.capacity")
                        ? ", spark.shuffle.rdma.mapOutput.capacity=" + rdmaSettings.get("spark.shuffle.rdma.mapOutput.capacity") : "");

        workload.warmUpDriver(workers, common);
        List<Outcome> rdma = new ArrayList<>();
        List<Outcome> netty = new ArrayList<>();
        ShuffleWorkload.Digest expected = null;
        for (int round = 0; round < rounds; round++) {
            for (int turn = 0; turn < 2; turn++) {
                boolean rdmaTurn = (round + turn) % 2 == 0;
                String m = rdmaTurn ? manager : SparkLocalCluster.SORT_MANAGER;
                Outcome o = workload.run(SparkLocalCluster.conf("shuffle-bench-" + (rdmaTurn ? "rdma" : "netty") + "-" + round,
                        workers, workerMiB, workerMiB + "m", m, rdmaTurn ? rdmaSettings : common, executorJvm), workers);
                (rdmaTurn ? rdma : netty).add(o);
                System.out.printf(Locale.ROOT, "round %d %-20s job %7.2f s (map %6.2f s, reduce %6.2f s, outside them %5.2f s)"
                                + "  fetch wait %6d ms  read %s remote + %s local  written %s  failed tasks %d%s%n",
                        round + 1, name(m), o.jobSeconds(), o.metrics().mapStageMs() / 1e3, o.metrics().reduceStageMs() / 1e3,
                        outsideStages(o), o.metrics().fetchWaitMs(),
                        ShuffleReport.mib(o.metrics().remoteBytesRead()), ShuffleReport.mib(o.metrics().localBytesRead()),
                        ShuffleReport.mib(o.metrics().bytesWritten()), o.metrics().failedTasks(), rdmaTurn ? rdmaCounters(o) : "");
                if (expected == null) {
                    expected = o.digest();
                } else if (!expected.equals(o.digest())) {
                    System.err.printf("RESULTS DIFFER: %s gave %s, an earlier run %s%n", m, o.digest(), expected);
                    System.exit(1);
                }
            }
        }
        double rdmaJob = median(rdma, Outcome::jobSeconds);
        double nettyJob = median(netty, Outcome::jobSeconds);
        double rdmaWait = median(rdma, o -> o.metrics().fetchWaitMs());
        double nettyWait = median(netty, o -> o.metrics().fetchWaitMs());
        double rdmaMap = median(rdma, o -> o.metrics().mapStageMs() / 1e3);
        double nettyMap = median(netty, o -> o.metrics().mapStageMs() / 1e3);
        double rdmaReduce = median(rdma, o -> o.metrics().reduceStageMs() / 1e3);
        double nettyReduce = median(netty, o -> o.metrics().reduceStageMs() / 1e3);
        double rdmaOutside = median(rdma, SparkShuffleBenchmark::outsideStages);
        double nettyOutside = median(netty, SparkShuffleBenchmark::outsideStages);
        // where the map stage's time goes, summed over its tasks (as the main job's table shows it)
        double rdmaMapCpu = median(rdma, o -> o.metrics().mapTasks().cpuMs() / 1e3);
        double nettyMapCpu = median(netty, o -> o.metrics().mapTasks().cpuMs() / 1e3);
        double rdmaWrite = median(rdma, o -> o.metrics().mapTasks().writeMs() / 1e3);
        double nettyWrite = median(netty, o -> o.metrics().mapTasks().writeMs() / 1e3);
        double rdmaPublish = median(rdma, o -> ShuffleReport.sum(o.executors(), "publish.micros") / 1e6);
        System.out.print(new ShuffleReport()
                .row("median of " + rounds, name(manager), "sort shuffle (Netty)", "ratio", "goal")
                .row("job time", fmt("%.2f s", rdmaJob), fmt("%.2f s", nettyJob), ShuffleReport.ratio(rdmaJob, nettyJob), "<= 1.00x")
                .row("  map stage", fmt("%.2f s", rdmaMap), fmt("%.2f s", nettyMap), ShuffleReport.ratio(rdmaMap, nettyMap), "")
                .row("  reduce stage", fmt("%.2f s", rdmaReduce), fmt("%.2f s", nettyReduce), ShuffleReport.ratio(rdmaReduce, nettyReduce), "")
                .row("  outside the stages", fmt("%.2f s", rdmaOutside), fmt("%.2f s", nettyOutside), ShuffleReport.ratio(rdmaOutside, nettyOutside), "")
                .row("  map tasks' CPU (sum)", fmt("%.2f s", rdmaMapCpu), fmt("%.2f s", nettyMapCpu), ShuffleReport.ratio(rdmaMapCpu, nettyMapCpu), "")
                .row("  map tasks' shuffle write (sum)", fmt("%.2f s", rdmaWrite), fmt("%.2f s", nettyWrite),
                        ShuffleReport.ratio(rdmaWrite, nettyWrite), "")
                .row("  map tasks' publish for READ (sum)", rdmaPublish < 0 ? "-" : fmt("%.2f s", rdmaPublish), "-", "", "")
                .row("fetch wait (sum of tasks)", fmt("%.0f ms", rdmaWait), fmt("%.0f ms", nettyWait),
                        ShuffleReport.ratio(rdmaWait, nettyWait), "<= 0.80x")
                .render());
        System.out.printf(Locale.ROOT, "ratios RDMA/Netty: job time %s (goal <= 1.0x), fetch wait %s (goal <= 0.8x); results equal in all %d runs (%s)%n",
                ShuffleReport.ratio(rdmaJob, nettyJob), ShuffleReport.ratio(rdmaWait, nettyWait), 2 * rounds, expected);
        System.out.printf(Locale.ROOT, "spark-shuffle: registrations per GiB fetched after warm-up = %.2f (goal <= 0)%n",
                median(rdma, o -> ShuffleReport.perBlockPerGiB(o.executors())));
    }

    private static String rdmaCounters(Outcome o) {
        return "  rdma " + ShuffleReport.providers(o.executors()) + ", RDMA blocks " + ShuffleReport.counter(o.executors(), "fetch.rdma.blocks")
                + " (" + ShuffleReport.counter(o.executors(), "fetch.inline.blocks") + " inline)"
                + ", registrations " + ShuffleReport.registrations(o.executors())
                + ", fallbacks fetch/shuffle/app " + ShuffleReport.counter(o.executors(), "fallback.fetch") + "/"
                + ShuffleReport.counter(o.executors(), "fallback.shuffle") + "/" + ShuffleReport.counter(o.executors(), "fallback.app");
    }

    /** The driver's job time outside both stages: building the job, scheduling between the stages, returning the result. */
    static double outsideStages(Outcome o) {
        return o.jobSeconds() - (o.metrics().mapStageMs() + o.metrics().reduceStageMs()) / 1e3;
    }

    static double median(List<Outcome> outcomes, ToDoubleFunction<Outcome> metric) {
        double[] v = outcomes.stream().mapToDouble(metric).sorted().toArray();
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }

    private static long roundUp(long v, long unit) {
        return (v + unit - 1) / unit * unit;
    }

    private static String name(String manager) {
        return manager.equals(SparkLocalCluster.SORT_MANAGER) ? "sort (Netty)" : manager.substring(manager.lastIndexOf('.') + 1);
    }

    private static String fmt(String format, double v) {
        return String.format(Locale.ROOT, format, v);
    }
}

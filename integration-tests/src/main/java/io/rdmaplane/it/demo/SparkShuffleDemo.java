package io.rdmaplane.it.demo;

import static io.rdmaplane.it.shuffle.ShuffleReport.count;
import static io.rdmaplane.it.shuffle.ShuffleReport.counter;
import static io.rdmaplane.it.shuffle.ShuffleReport.mib;
import static io.rdmaplane.it.shuffle.ShuffleReport.ratio;

import io.rdmaplane.it.Args;
import io.rdmaplane.it.shuffle.ShuffleReport;
import io.rdmaplane.it.shuffle.ShuffleTaskListener;
import io.rdmaplane.it.shuffle.ShuffleTaskListener.Totals;
import io.rdmaplane.it.shuffle.ShuffleWorkload;
import io.rdmaplane.it.shuffle.ShuffleWorkload.Outcome;
import io.rdmaplane.it.shuffle.SparkLocalCluster;
import io.rdmaplane.spark.ShuffleMetrics;
import java.util.Locale;
import java.util.Map;

/**
 * The main job: a real Spark shuffle on the embedded default. A {@code local-cluster[2,1,1024]}
 * application (two executor JVMs) runs {@code reduceByKey} over generated records with
 * {@code spark.shuffle.manager=io.rdmaplane.spark.RdmaShuffleManager}; then a fresh application
 * runs the same job with Spark's sort shuffle (served and fetched by Netty). Prints both side by
 * side (job time, shuffle bytes written and read, remote and local, fetch wait summed over tasks,
 * records, the provider the executors ran, RDMA reads (inline ones among them), memory registrations and fallbacks) and the ratios, and exits
 * with status 1 when the two results differ.
 *
 * <p>Arguments (all optional): {@code size=256m value=1000 maps=8 partitions=8 seed=1},
 * {@code manager=<class>} (the first timed application's manager; {@code sort} runs Spark's on both sides),
 * and any {@code spark.*=value}, set in both applications. Run it with
 * {@code mvn -B -q -Prun -DskipTests verify} (the run profile's default main).
 */
public final class SparkShuffleDemo {
    public static void main(String[] args) {
        ShuffleWorkload workload = new ShuffleWorkload(Args.bytes(args, "size", "256m"),
                Integer.parseInt(Args.get(args, "value", "1000")), Integer.parseInt(Args.get(args, "maps", "8")),
                Integer.parseInt(Args.get(args, "partitions", "8")), Long.parseLong(Args.get(args, "seed", "1")));
        String manager = Args.get(args, "manager", SparkLocalCluster.RDMA_MANAGER);
        Map<String, String> extra = Args.sparkSettings(args);
        int workers = 2;
        SparkLocalCluster.prepare();

        System.out.printf(Locale.ROOT, "Spark shuffle demo: local-cluster[%d,1,1024], reduceByKey over %s generated records"
                        + " (%s, %d-byte values), %d map tasks -> %d reduce partitions%n",
                workers, count(workload.records()), mib(workload.bytes()), workload.valueBytes(), workload.maps(),
                workload.partitions());
        workload.warmUpDriver(workers, extra);
        Outcome rdma = workload.run(SparkLocalCluster.conf("shuffle-demo-rdma", workers, 1024, "1g", manager, extra, ""), workers);
        Outcome netty = workload.run(SparkLocalCluster.conf("shuffle-demo-netty", workers, 1024, "1g",
                SparkLocalCluster.SORT_MANAGER, extra, ""), workers);
        boolean equal = rdma.digest().equals(netty.digest());

        System.out.print(table(rdma, netty, equal));
        System.out.printf(Locale.ROOT, "ratios %s/Netty: job time %s, fetch wait %s, shuffle bytes read %s%n",
                shortName(rdma.manager()), ratio(rdma.jobSeconds(), netty.jobSeconds()),
                ratio(rdma.metrics().fetchWaitMs(), netty.metrics().fetchWaitMs()),
                ratio(rdma.metrics().bytesRead(), netty.metrics().bytesRead()));
        System.out.printf(Locale.ROOT, "spark-shuffle: registrations per GiB fetched after warm-up = %.2f (goal <= 0)%n",
                ShuffleReport.perBlockPerGiB(rdma.executors()));
        if (!equal) {
            System.err.printf("RESULTS DIFFER: %s gave %s, Netty gave %s%n", rdma.manager(), rdma.digest(), netty.digest());
            System.exit(1);
        }
    }

    static String table(Outcome rdma, Outcome netty, boolean equal) {
        Totals a = rdma.metrics();
        Totals b = netty.metrics();
        return new ShuffleReport()
                .row("", shortName(rdma.manager()), "sort shuffle (Netty)")
                .row("provider", ShuffleReport.providers(rdma.executors()), "-")
                .row("job wall time", seconds(rdma.jobSeconds()), seconds(netty.jobSeconds()))
                .row("  map stage / reduce stage", seconds(a.mapStageMs() / 1e3) + " / " + seconds(a.reduceStageMs() / 1e3),
                        seconds(b.mapStageMs() / 1e3) + " / " + seconds(b.reduceStageMs() / 1e3))
                .row("  outside the stages: before / between / after / driver", gaps(rdma), gaps(netty))
                .row("  map tasks: run / CPU / GC", mapTasks(a.mapTasks()), mapTasks(b.mapTasks()))
                .row("  map tasks: write / publish", seconds(a.mapTasks().writeMs() / 1e3) + " / " + publishSeconds(rdma),
                        seconds(b.mapTasks().writeMs() / 1e3) + " / -")
                .row("  executors' RDMA start: wall / CPU", startSeconds(rdma), "-")
                .row("shuffle written", mib(a.bytesWritten()) + ", " + count(a.recordsWritten()) + " rec",
                        mib(b.bytesWritten()) + ", " + count(b.recordsWritten()) + " rec")
                .row("shuffle read remote", mib(a.remoteBytesRead()) + ", " + count(a.remoteBlocks()) + " blocks",
                        mib(b.remoteBytesRead()) + ", " + count(b.remoteBlocks()) + " blocks")
                .row("shuffle read local", mib(a.localBytesRead()) + ", " + count(a.localBlocks()) + " blocks",
                        mib(b.localBytesRead()) + ", " + count(b.localBlocks()) + " blocks")
                .row("fetch wait (sum of tasks)", a.fetchWaitMs() + " ms", b.fetchWaitMs() + " ms")
                .row("records read", count(a.recordsRead()), count(b.recordsRead()))
                .row("blocks read with RDMA READ", counter(rdma.executors(), "fetch.rdma.blocks")
                        + " (" + bytesCounter(rdma, "fetch.rdma.bytes") + ")", "-")
                .row("  of them inline in LOCATE", counter(rdma.executors(), "fetch.inline.blocks"), "-")
                .row("memory registrations", ShuffleReport.registrations(rdma.executors()), "-")
                .row("fallbacks fetch/shuffle/app", counter(rdma.executors(), "fallback.fetch") + "/"
                        + counter(rdma.executors(), "fallback.shuffle") + "/" + counter(rdma.executors(), "fallback.app"), "-")
                .row("failed tasks", count(a.failedTasks()), count(b.failedTasks()))
                .row("result", rdma.digest().toString(), equal ? "equal" : "DIFFERENT: " + netty.digest())
                .render();
    }

    /**
     * The job's time outside its stages: from the job's start to its first stage (on the driver's scheduler
     * clock), between the stages, after the last one; then the driver's wall time outside the job's own (building
     * it before its start event, taking its result after its end).
     */
    static String gaps(Outcome o) {
        ShuffleTaskListener.Gaps g = o.metrics().gaps();
        double driver = Math.max(0, o.jobSeconds() - g.jobsMs() / 1e3);
        return seconds(g.beforeMs() / 1e3) + " / " + seconds(g.betweenMs() / 1e3) + " / " + seconds(g.afterMs() / 1e3)
                + " / " + seconds(driver);
    }

    /** Sums over the map tasks: run time, and of it CPU and GC time. */
    static String mapTasks(ShuffleTaskListener.MapTasks t) {
        return seconds(t.runMs() / 1e3) + " / " + seconds(t.cpuMs() / 1e3) + " / " + seconds(t.gcMs() / 1e3);
    }

    /** Time the map tasks spent publishing their outputs for RDMA READ (summed over executors), or "-" without reports. */
    static String publishSeconds(Outcome o) {
        long micros = ShuffleReport.sum(o.executors(), "publish.micros");
        return micros < 0 ? "-" : seconds(micros / 1e6);
    }

    /**
     * The executors' RDMA runtime starts, summed: wall time, and the starting threads' CPU time (on Spark 4 taken while
     * the first map tasks run, from the same cores).
     */
    static String startSeconds(Outcome o) {
        long wall = ShuffleReport.sum(o.executors(), ShuffleMetrics.START_MICROS);
        long cpu = ShuffleReport.sum(o.executors(), ShuffleMetrics.START_CPU_MICROS);
        return wall < 0 ? "-" : seconds(wall / 1e6) + " / " + (cpu < 0 ? "-" : seconds(cpu / 1e6));
    }

    static String bytesCounter(Outcome o, String suffix) {
        long v = ShuffleReport.sum(o.executors(), suffix);
        return v < 0 ? "-" : mib(v);
    }

    static String shortName(String manager) {
        return manager.substring(manager.lastIndexOf('.') + 1);
    }

    static String seconds(double s) {
        return String.format(Locale.ROOT, "%.2f s", s);
    }
}

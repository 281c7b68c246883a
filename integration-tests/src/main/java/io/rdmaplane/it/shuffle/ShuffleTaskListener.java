package io.rdmaplane.it.shuffle;

import org.apache.spark.Success$;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.executor.ShuffleWriteMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.scheduler.SparkListenerTaskEnd;

/**
 * Sums the shuffle metrics Spark reports for every finished task (what the Spark UI shows):
 * bytes and records written, remote and local bytes read, fetch wait time, records read, plus
 * tasks that did not succeed, and where the map side's time went (run, CPU, GC and shuffle-write
 * time of the tasks that wrote shuffle output), and the jobs' time outside their stages ({@link Gaps}).
 * Listener events arrive asynchronously, in order; a job's task-end events come before its job-end
 * event, so {@link #awaitTotals()} waits for the job ends.
 */
public final class ShuffleTaskListener extends SparkListener {
    /** Sums over the tasks of every job so far. */
    public record Totals(long bytesWritten, long recordsWritten, long remoteBytesRead, long localBytesRead,
                         long fetchWaitMs, long recordsRead, long remoteBlocks, long localBlocks, long failedTasks,
                         long mapStageMs, long reduceStageMs, MapTasks mapTasks, Gaps gaps) {
        public long bytesRead() {
            return remoteBytesRead + localBytesRead;
        }
    }

    /**
     * The jobs' time outside their stages, in milliseconds, from the driver's scheduler clock: from a job's
     * start to its first stage's submission, between one stage's completion and the next one's submission,
     * and from its last stage's completion to the job's end; {@code jobsMs}: from start to end. Summed over jobs.
     */
    public record Gaps(long beforeMs, long betweenMs, long afterMs, long jobsMs) { }

    /** Sums over the tasks that wrote shuffle output, in milliseconds: their run time and, of it, CPU, GC and Spark's shuffle-write time. */
    public record MapTasks(long runMs, long cpuMs, long gcMs, long writeMs) { }

    private long bytesWritten;
    private long recordsWritten;
    private long remoteBytesRead;
    private long localBytesRead;
    private long fetchWaitMs;
    private long recordsRead;
    private long remoteBlocks;
    private long localBlocks;
    private long failedTasks;
    private long mapStageMs;
    private long reduceStageMs;
    private long mapRunMs;
    private long mapCpuNanos;
    private long mapGcMs;
    private long mapWriteNanos;
    private int jobsStarted;
    private int jobsEnded;
    // the running job's timeline (jobs here run one at a time)
    private long jobStartMs;
    private long lastStageEndMs;
    private long beforeMs;
    private long betweenMs;
    private long afterMs;
    private long jobsMs;

    @Override
    public synchronized void onTaskEnd(SparkListenerTaskEnd end) {
        if (end.reason() != Success$.MODULE$) {
            failedTasks++;
        }
        TaskMetrics m = end.taskMetrics();
        if (m == null) {
            return;
        }
        ShuffleWriteMetrics w = m.shuffleWriteMetrics();
        if (w.bytesWritten() > 0) {
            mapRunMs += m.executorRunTime();
            mapCpuNanos += m.executorCpuTime();
            mapGcMs += m.jvmGCTime();
            mapWriteNanos += w.writeTime();
        }
        bytesWritten += w.bytesWritten();
        recordsWritten += w.recordsWritten();
        ShuffleReadMetrics r = m.shuffleReadMetrics();
        remoteBytesRead += r.remoteBytesRead();
        localBytesRead += r.localBytesRead();
        fetchWaitMs += r.fetchWaitTime();
        recordsRead += r.recordsRead();
        remoteBlocks += r.remoteBlocksFetched();
        localBlocks += r.localBlocksFetched();
    }

    /** Wall time of stages that wrote shuffle output (map side) and of the others (the final, reduce side). */
    @Override
    public synchronized void onStageCompleted(SparkListenerStageCompleted completed) {
        StageInfo stage = completed.stageInfo();
        if (stage.submissionTime().isEmpty() || stage.completionTime().isEmpty()) {
            return;
        }
        long submitted = (Long) stage.submissionTime().get();
        long ms = (Long) stage.completionTime().get() - submitted;
        if (lastStageEndMs == 0) {
            beforeMs += Math.max(0, submitted - jobStartMs);
        } else {
            betweenMs += Math.max(0, submitted - lastStageEndMs);
        }
        lastStageEndMs = (Long) stage.completionTime().get();
        if (stage.taskMetrics() != null && stage.taskMetrics().shuffleWriteMetrics().bytesWritten() > 0) {
            mapStageMs += ms;
        } else {
            reduceStageMs += ms;
        }
    }

    @Override
    public synchronized void onJobStart(SparkListenerJobStart start) {
        jobsStarted++;
        jobStartMs = start.time();
        lastStageEndMs = 0;
    }

    @Override
    public synchronized void onJobEnd(SparkListenerJobEnd end) {
        jobsEnded++;
        jobsMs += Math.max(0, end.time() - jobStartMs);
        if (lastStageEndMs != 0) {
            afterMs += Math.max(0, end.time() - lastStageEndMs);
        }
        notifyAll();
    }

    /** The sums once every job the driver started has been reported ended (waits at most 60 s). */
    public synchronized Totals awaitTotals() {
        long deadline = System.currentTimeMillis() + 60_000;
        // the job's own start event may itself still be queued: wait for at least one job
        while (jobsStarted == 0 || jobsEnded < jobsStarted) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                throw new IllegalStateException("listener saw " + jobsEnded + " of " + jobsStarted + " jobs end within 60 s");
            }
            try {
                wait(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
        return new Totals(bytesWritten, recordsWritten, remoteBytesRead, localBytesRead, fetchWaitMs, recordsRead,
                remoteBlocks, localBlocks, failedTasks, mapStageMs, reduceStageMs,
                new MapTasks(mapRunMs, mapCpuNanos / 1_000_000, mapGcMs, mapWriteNanos / 1_000_000),
                new Gaps(beforeMs, betweenMs, afterMs, jobsMs));
    }
}

package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Class-data sharing for the JVMs a ring starts (system property {@code rdma.ring.cds}): {@code record:DIR} makes each
 * one write the classes it loaded to {@code DIR/NAME.jsa} when it exits ({@code -XX:ArchiveClassesAtExit}, with a log
 * {@code DIR/NAME.jsa.log} whose "Written dynamic archive" line says the archive is whole), {@code use:DIR} makes each
 * one map its archive. Why: on the emulated guest's CPUs a JVM spends minutes loading Spark's and Hadoop's classes;
 * archives recorded by the same ring on the host ({@code vm/tpcds-verbs.sh}) cut that. The JVM itself checks that an
 * archive matches its class path (paths, sizes and times of the jars it took classes from) and runs without it
 * otherwise, printing a {@code [warning][cds} line to its log.
 *
 * <p>An archive depends on the order of the class path, so with sharing on the ring names the Spark jars one by one, in
 * name order, where it would give {@code jars/*} (whose expansion follows the directory's order, which differs between
 * file systems): on its own JVMs' class paths and ahead of the executors' ({@code spark.executor.extraClassPath}).
 */
record RingCds(boolean record, Path dir) {
    static final String PROPERTY = "rdma.ring.cds";
    /** The name of the executors' archives: Spark puts each executor's id in its place. */
    static final String EXECUTOR = "executor-{{EXECUTOR_ID}}";

    /** The archive of the executor {@code executorId}. */
    Path executorArchive(String executorId) {
        return dir.resolve(EXECUTOR.replace("{{EXECUTOR_ID}}", executorId) + ".jsa");
    }

    /**
     * Has the running JVM {@code pid}, an executor started with the recording flags, dump its archive now ({@code jcmd PID
     * VM.cds dynamic_dump}, at most 2 minutes); what the command did, in a line.
     */
    String dumpExecutor(long pid, String executorId) {
        List<String> jcmd = List.of(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(), String.valueOf(pid), "VM.cds",
                "dynamic_dump", executorArchive(executorId).toString());
        try {
            Process p = new ProcessBuilder(jcmd).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            boolean ended = p.waitFor(2, TimeUnit.MINUTES);
            if (!ended) {
                p.destroyForcibly();
            }
            return String.join(" ", jcmd) + (ended ? " exited " + p.exitValue() : " did not end") + (out.isEmpty() ? "" : ": " + out.replace('\n', ' '));
        } catch (IOException e) {
            return String.join(" ", jcmd) + " failed: " + e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return String.join(" ", jcmd) + " interrupted";
        }
    }

    /** The setting of {@link #PROPERTY}, or null when it is not set. */
    static RingCds fromSystemProperty() {
        return of(System.getProperty(PROPERTY, ""));
    }

    /** {@code value} of {@link #PROPERTY}: null when blank. */
    static RingCds of(String value) {
        value = value.trim();
        if (value.isEmpty()) {
            return null;
        }
        int colon = value.indexOf(':');
        String mode = colon < 0 ? "" : value.substring(0, colon);
        if (!mode.equals("record") && !mode.equals("use") || colon == value.length() - 1) {
            throw new IllegalArgumentException(PROPERTY + "=" + value + ": expected record:DIR or use:DIR");
        }
        return new RingCds(mode.equals("record"), Path.of(value.substring(colon + 1)).toAbsolutePath());
    }

    /**
     * The JVM flags of the process {@code name}: recording, its archive and log; using, its archive when there is one
     * ({@code checkExists}: an executor's name holds a placeholder Spark fills in, so its archive is named blind; a JVM
     * given no archive file runs without sharing, silently).
     */
    List<String> jvmFlags(String name, boolean checkExists) {
        Path jsa = dir.resolve(name + ".jsa");
        if (record) {
            String log = "-Xlog:cds+dynamic=info:file=" + dir.resolve(name + ".jsa.log");
            // a Worker gives an exiting executor 10 s before it kills it, less than the archive takes: the ring dumps it
            // before the application ends instead (RingCluster.recordExecutorArchives)
            return name.equals(EXECUTOR) ? List.of("-XX:+RecordDynamicDumpInfo", log) : List.of("-XX:ArchiveClassesAtExit=" + jsa, log);
        }
        return !checkExists || Files.isRegularFile(jsa) ? List.of("-XX:SharedArchiveFile=" + jsa) : List.of();
    }
}

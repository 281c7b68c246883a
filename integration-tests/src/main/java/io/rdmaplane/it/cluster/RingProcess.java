package io.rdmaplane.it.cluster;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * One process of the ring, started inside a host's namespace ({@code ip netns exec NS ...}, which execs the
 * command: the process's pid is the JVM's), its output in a log file under the ring's log folder, killed with
 * its children when its time limit passes or the ring closes.
 */
public final class RingProcess implements AutoCloseable {
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "ring-watchdog");
        t.setDaemon(true);
        return t;
    });

    final String name;
    final int host;
    final Path log;
    private final Process process;
    private final OutputStream stdin;
    private volatile boolean timedOut;

    private RingProcess(String name, int host, Path log, Process process) {
        this.name = name;
        this.host = host;
        this.log = log;
        this.process = process;
        this.stdin = process.getOutputStream();
    }

    /** As {@code stdout}: the output goes to a pipe this JVM reads ({@link #output()}), so the process runs at its reader's pace. */
    static final Path PIPE = Path.of("|pipe|");

    /**
     * Starts {@code command} in {@code host}'s namespace with {@code env} added to (and {@code SPARK_TESTING}
     * removed from) this JVM's environment; output and errors go to {@code <logs>/<name>.log}, or only errors
     * there and the output to {@code stdout} when that is given.
     */
    static RingProcess start(HostRing ring, int host, String name, List<String> command, Map<String, String> env, Path logs,
            Path stdout, Duration limit) {
        List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", ring.namespace(host)));
        cmd.addAll(command);
        Path log = logs.resolve(name + ".log");
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().remove("SPARK_TESTING"); // a real deployment: executors from SPARK_HOME's jars
        pb.environment().putAll(env);
        if (stdout == null) {
            pb.redirectErrorStream(true).redirectOutput(log.toFile());
        } else if (stdout == PIPE) {
            pb.redirectError(log.toFile());
        } else {
            pb.redirectOutput(stdout.toFile()).redirectError(log.toFile());
        }
        try {
            Files.createDirectories(logs);
            Files.writeString(logs.resolve(name + ".cmd"), String.join(" ", cmd) + "\n" + env + "\n");
            RingProcess p = new RingProcess(name, host, log, pb.start());
            WATCHDOG.schedule(() -> {
                if (p.process.isAlive()) {
                    p.timedOut = true;
                    p.kill();
                }
            }, limit.toMillis(), TimeUnit.MILLISECONDS);
            return p;
        } catch (IOException e) {
            throw new UncheckedIOException("could not start " + name + ": " + cmd, e);
        }
    }

    /** The java command of a lean JVM: C1 only, serial GC, {@code heap} at most, the module flags Spark and Arrow need. */
    static List<String> java(String heap, List<Path> classPath, List<String> jvmOptions, String mainClass, List<String> args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(List.of("-Xmx" + heap, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xss512k",
                "-Djava.net.preferIPv4Stack=true"));
        cmd.addAll(moduleFlags());
        cmd.addAll(jvmOptions);
        cmd.add("-cp");
        cmd.add(String.join(File.pathSeparator, classPath.stream().map(Path::toString).toList()));
        cmd.add(mainClass);
        cmd.addAll(args);
        return cmd;
    }

    /** {@code rdma.jvm.module.flags} (the parent pom's module flags, which Maven hands to tests and commands). */
    static List<String> moduleFlags() {
        String flags = System.getProperty("rdma.jvm.module.flags", "").trim();
        return flags.isEmpty() ? List.of() : List.of(flags.split("\\s+"));
    }

    /** The standard output, when started with {@link #PIPE}. */
    java.io.InputStream output() {
        return process.getInputStream();
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    public boolean timedOut() {
        return timedOut;
    }

    /** Waits at most {@code limit} for the process to end; its exit code, or -1 if it still runs (then it is killed). */
    int waitFor(Duration limit) {
        try {
            if (process.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) {
                return process.exitValue();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        kill();
        return -1;
    }

    /** Writes one line to the process's standard input. */
    void send(String line) {
        try {
            stdin.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            stdin.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(name + " no longer reads its input (" + (isAlive() ? "alive" : "exited") + ")\n" + tail(40), e);
        }
    }

    /** The log's lines so far. */
    List<String> lines() {
        try {
            return Files.exists(log) ? Files.readAllLines(log, StandardCharsets.ISO_8859_1) : List.of();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The last {@code n} lines of the log, headed by the process's name and state. */
    public String tail(int n) {
        List<String> all = lines();
        StringBuilder b = new StringBuilder("---- last " + Math.min(n, all.size()) + " lines of " + log + " ("
                + (isAlive() ? "running" : "exited " + process.exitValue()) + (timedOut ? ", killed at its time limit" : "") + ")\n");
        for (String line : all.subList(Math.max(0, all.size() - n), all.size())) {
            b.append("    ").append(line.length() > 400 ? line.substring(0, 400) + " ..." : line).append('\n');
        }
        return b.toString();
    }

    /** kill -9 of the process and its children (a Worker's executors). */
    void kill() {
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public void close() {
        kill();
    }
}

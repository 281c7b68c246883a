package io.rdmaplane.rdma.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A JVM started in one host's network namespace of the VM's cluster (run.sh --hosts N) with
 * {@code ip netns exec}, this JVM's flags and the test class path: its stdout lines as they come
 * (its report, one fact a line), its stderr in a file, commands to its stdin. What the tests
 * between the cluster's hosts share (VerbsClusterTest, VerbsRingTest).
 */
public final class VmHostJvm implements AutoCloseable {
    public final String name;
    private final Process process;
    private final Path stderr;
    private final OutputStream stdin;
    public final List<String> lines = new CopyOnWriteArrayList<>();
    private final Duration wait;

    private VmHostJvm(String name, Process process, Path stderr, Duration wait) {
        this.name = name;
        this.process = process;
        this.stderr = stderr;
        this.stdin = process.getOutputStream();
        this.wait = wait;
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                    lines.add(line);
                }
            } catch (IOException e) {
                lines.add("(stdout unreadable: " + e + ")");
            }
        }, "vm-host-jvm-stdout");
        reader.setDaemon(true);
        reader.start();
    }

    /** The cluster's value {@code RDMA_VM_HOST<index>_<what>} (NS, ADDR, DEV, PORT, ...); fails when unset. */
    public static String host(int index, String what) {
        String value = System.getenv("RDMA_VM_HOST" + index + "_" + what);
        if (value == null || value.isEmpty()) {
            throw new AssertionError("RDMA_VM_HOST" + index + "_" + what + " is not set (run.sh --hosts)");
        }
        return value;
    }

    /** Starts {@code mainClass} with {@code args} in host {@code index}'s namespace; {@code wait} bounds every wait on it. */
    public static VmHostJvm start(int index, Class<?> mainClass, Duration wait, String... args) throws IOException {
        String classpath = System.getenv("RDMA_VM_TEST_CLASSPATH");
        if (classpath == null || classpath.isEmpty()) {
            classpath = System.getProperty("java.class.path");
        }
        List<String> command = new ArrayList<>(List.of("ip", "netns", "exec", host(index, "NS"),
                Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        command.addAll(List.of("-cp", classpath, mainClass.getName()));
        command.addAll(List.of(args));
        Path err = Files.createTempFile("vm-host" + index + "-", ".err");
        Process process = new ProcessBuilder(command).redirectError(err.toFile()).start();
        return new VmHostJvm("host" + index + " " + String.join(" ", args), process, err, wait);
    }

    /** The first line starting with {@code prefix}, waiting for it; fails when the JVM ends first. */
    public String awaitLine(String prefix) {
        return awaitLine(prefix, 0);
    }

    /** The first line starting with {@code prefix} among the lines from index {@code from} on. */
    public String awaitLine(String prefix, int from) {
        return awaitLine(l -> l.startsWith(prefix), from, "'" + prefix + "'");
    }

    /** The first line {@code match} accepts among the lines from index {@code from} on ({@code what} names it). */
    public String awaitLine(Predicate<String> match, int from, String what) {
        return Polling.waitFor(() -> {
            // A copy first: a sub-list of a CopyOnWriteArrayList breaks (CME) when the reader thread adds a line.
            List<String> seen = List.copyOf(lines);
            for (String l : seen.subList(Math.min(from, seen.size()), seen.size())) {
                if (match.test(l)) {
                    return l;
                }
            }
            if (!process.isAlive()) {
                throw new AssertionError(name + " ended before printing " + what + ": " + describe());
            }
            return null;
        }, wait, () -> what + " from " + describe());
    }

    /** Writes one command line to the JVM's stdin. */
    public void send(String line) throws IOException {
        stdin.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        stdin.flush();
    }

    /** Sends {@code signal} (e.g. STOP, CONT) to the JVM: {@code ip netns exec} execs it, so the process is the JVM. */
    public void signal(String signal) throws IOException, InterruptedException {
        Process kill = new ProcessBuilder("kill", "-" + signal, String.valueOf(process.pid())).redirectErrorStream(true).start();
        if (!kill.waitFor(30, TimeUnit.SECONDS) || kill.exitValue() != 0) {
            throw new IOException("kill -" + signal + " " + process.pid() + " failed: "
                    + new String(kill.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim());
        }
    }

    /** Kills the JVM with SIGKILL (nothing of it runs again: its QPs and memory go with the process) and waits for its end. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(wait.toSeconds(), TimeUnit.SECONDS)) {
            throw new AssertionError(name + " still runs " + wait.toSeconds() + " s after SIGKILL");
        }
    }

    public int exitCode() throws InterruptedException {
        Polling.waitUntil(() -> !process.isAlive(), wait, () -> name + " to finish: " + describe());
        return process.exitValue();
    }

    public String describe() {
        String tail;
        try {
            List<String> err = Files.readAllLines(stderr);
            tail = String.join("\n  ", err.subList(Math.max(0, err.size() - 30), err.size()));
        } catch (IOException e) {
            tail = e.toString();
        }
        return name + " (" + (process.isAlive() ? "running" : "exit " + process.exitValue()) + "), stdout " + lines
                + ", stderr's last lines:\n  " + tail;
    }

    /** Closes its stdin (a serving peer's signal to end), then ends it, forcibly after 30 s. */
    @Override
    public void close() throws InterruptedException {
        try {
            stdin.close();
        } catch (IOException ignored) {
            // already gone
        }
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroy();
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        }
    }
}

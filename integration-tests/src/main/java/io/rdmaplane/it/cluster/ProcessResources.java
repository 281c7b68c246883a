package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * What the harness sees of a long-lived process of the ring from outside, in {@code /proc/<pid>} (it runs as root):
 * its open file descriptors, its threads, and how many of them are the project's ({@code rdma-*}: the kernel keeps a
 * Java thread's name, cut to 15 characters, in {@code task/<tid>/comm}), plus the bytes it has registered for RDMA
 * as its own metrics say. A fault's resources must come back to the snapshot taken before it: {@link #leaksAgainst}.
 */
record ProcessResources(String name, long pid, int fds, int threads, int rdmaThreads, long registeredBytes, long registeredBound) {
    /** The project's thread names all start with this ({@code rdma-tcp-node-...}, {@code rdma-policy-...}). */
    static final String THREAD_PREFIX = "rdma-";

    /**
     * The process {@code pid}'s resources now, or null when it is gone. {@code registeredBound}: what its registered
     * bytes may reach whatever the baseline (a DataNode's region cache holds the replicas it served, up to all it
     * stores), or 0.
     */
    static ProcessResources of(String name, long pid, long registeredBytes, long registeredBound) {
        Path proc = Path.of("/proc", String.valueOf(pid));
        try {
            int fds;
            try (Stream<Path> s = Files.list(proc.resolve("fd"))) {
                fds = (int) s.count();
            }
            List<Path> tasks;
            try (Stream<Path> s = Files.list(proc.resolve("task"))) {
                tasks = s.toList();
            }
            int rdma = 0;
            for (Path task : tasks) {
                try {
                    if (Files.readString(task.resolve("comm")).startsWith(THREAD_PREFIX)) {
                        rdma++;
                    }
                } catch (IOException threadEnded) {
                    // a thread that ended while listed is not counted
                }
            }
            return new ProcessResources(name, pid, fds, tasks.size(), rdma, registeredBytes, registeredBound);
        } catch (IOException | java.io.UncheckedIOException gone) {
            return null;
        }
    }

    /**
     * What grew from {@code before} (the same process, measured before the fault): open descriptors, rdma-* threads or
     * registered bytes above the baseline (or above {@link #registeredBound}, if higher), as {@code "fds 310>305 ..."},
     * or "" when nothing did. The JVM's thread
     * count is not compared: Spark's and Hadoop's own pools (task launch workers, Netty event loops, IPC clients)
     * grow on demand and idle out on their own clocks; it is reported.
     */
    String leaksAgainst(ProcessResources before) {
        StringBuilder b = new StringBuilder();
        if (fds > before.fds) {
            b.append("fds ").append(fds).append(">").append(before.fds).append(' ');
        }
        if (rdmaThreads > before.rdmaThreads) {
            b.append(THREAD_PREFIX).append("* threads ").append(rdmaThreads).append(">").append(before.rdmaThreads).append(" (")
                    .append(rdmaThreadNames()).append(") ");
        }
        long allowed = Math.max(before.registeredBytes, registeredBound);
        if (registeredBytes > allowed) {
            b.append("registered bytes ").append(registeredBytes).append(">").append(allowed).append(' ');
        }
        return b.toString().trim();
    }

    /** The process's rdma-* threads by name (as the kernel keeps it), digits folded, with their counts. */
    String rdmaThreadNames() {
        java.util.Map<String, Integer> byName = new java.util.TreeMap<>();
        try (Stream<Path> s = Files.list(Path.of("/proc", String.valueOf(pid), "task"))) {
            for (Path task : s.toList()) {
                try {
                    String comm = Files.readString(task.resolve("comm")).trim();
                    if (comm.startsWith(THREAD_PREFIX)) {
                        byName.merge(comm.replaceAll("[0-9]+", "#"), 1, Integer::sum);
                    }
                } catch (IOException threadEnded) {
                    // gone while listed
                }
            }
        } catch (IOException | java.io.UncheckedIOException gone) {
            return "process gone";
        }
        return byName.toString();
    }

    /** {@code name: fds a->b, threads a->b (rdma-* a->b), registered a->b} against {@code before}. */
    String change(ProcessResources before) {
        return String.format(Locale.ROOT, "%s: fds %d->%d, threads %d->%d (rdma-* %d->%d), registered %d->%d", name, before.fds, fds,
                before.threads, threads, before.rdmaThreads, rdmaThreads, before.registeredBytes, registeredBytes);
    }
}

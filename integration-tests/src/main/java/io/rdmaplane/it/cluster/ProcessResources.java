package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * What the harness sees of a long-lived process of the ring from outside, in {@code /proc/<pid>} (it runs as root):
 * its open file descriptors (all; the non-socket ones; and the sockets of the project's RDMA transport, the TCP
 * connections to or from its ports, from the process's own {@code net/tcp}), its threads, and how many of them are
 * the project's ({@code rdma-*}: the kernel keeps a Java thread's name, cut to 15 characters, in
 * {@code task/<tid>/comm}), plus the bytes it has registered for RDMA as its own metrics say. A fault's resources
 * must come back to the snapshot taken before it: {@link #leaksAgainst}.
 */
record ProcessResources(String name, long pid, int fds, int nonSocketFds, int rdmaSockets, int threads, int rdmaThreads,
        long registeredBytes, long registeredBound) {
    /** The project's thread names all start with this ({@code rdma-tcp-node-...}, {@code rdma-policy-...}). */
    static final String THREAD_PREFIX = "rdma-";

    /**
     * The process {@code pid}'s resources now, or null when it is gone. {@code rdmaPorts}: the ports of the project's
     * RDMA servers in the ring (a socket with one of them at either end is the transport's). {@code registeredBound}:
     * what its registered bytes may reach whatever the baseline (a DataNode's region cache holds the replicas it
     * served, up to all it stores), or 0.
     */
    static ProcessResources of(String name, long pid, long registeredBytes, long registeredBound, Set<Integer> rdmaPorts) {
        Path proc = Path.of("/proc", String.valueOf(pid));
        try {
            Set<String> transportInodes = new HashSet<>();
            for (String table : List.of("tcp", "tcp6")) {
                Path file = proc.resolve("net").resolve(table);
                if (!Files.exists(file)) {
                    continue;
                }
                for (String line : Files.readAllLines(file)) {
                    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
                    String[] cols = line.trim().split("\\s+");
                    if (cols.length > 9 && cols[1].contains(":") && (rdmaPorts.contains(port(cols[1])) || rdmaPorts.contains(port(cols[2])))) {
                        transportInodes.add("socket:[" + cols[9] + "]");
                    }
                }
            }
            int fds = 0;
            int nonSocket = 0;
            int transport = 0;
            try (Stream<Path> s = Files.list(proc.resolve("fd"))) {
                for (Path fd : s.toList()) {
                    fds++;
                    String target;
                    try {
                        target = Files.readSymbolicLink(fd).toString();
                    } catch (IOException closed) {
                        continue; // closed while listed
                    }
                    if (!target.startsWith("socket:")) {
                        nonSocket++;
                    } else if (transportInodes.contains(target)) {
                        transport++;
                    }
                }
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
            return new ProcessResources(name, pid, fds, nonSocket, transport, tasks.size(), rdma, registeredBytes, registeredBound);
        } catch (IOException | java.io.UncheckedIOException gone) {
            return null;
        }
    }

    /** The role of a process of the ring, its name without its number: {@code executor}, {@code datanode}. */
    String role() {
        return name.replaceAll("[\\s0-9]+$", "");
    }

    /** The port of {@code net/tcp}'s {@code HEXADDRESS:HEXPORT}. */
    private static int port(String address) {
        return Integer.parseInt(address.substring(address.lastIndexOf(':') + 1), 16);
    }

    /**
     * What grew from {@code before} (the same process, measured before the fault): non-socket descriptors (files,
     * pipes, epoll), the transport's sockets, rdma-* threads, or registered bytes above the baseline (or above
     * {@link #registeredBound}, if higher), as {@code "transport sockets 5>4 ..."}, or "" when nothing did. Other
     * sockets and the JVM's whole thread count are not compared: Spark's and Hadoop's own connection pools (Netty's
     * shuffle client after a fallback, IPC clients) and thread pools grow on demand and idle out on their own clocks
     * (Spark's connection timeout is 120 s); they are reported.
     */
    String leaksAgainst(ProcessResources before) {
        return leaksAgainst(before, 0);
    }

    /**
     * As {@link #leaksAgainst(ProcessResources)}, with {@code warmRdmaThreads} rdma-* threads allowed whatever the
     * baseline: what a warmed process of the same role held at the baseline. The project starts some threads on first
     * use (a transport lane's selector, the grant-expiry timer), so a process that had served nothing yet when its
     * baseline was taken (a DataNode restarted earlier that no query read from since) grows to that set; a thread
     * beyond it is a leak.
     */
    String leaksAgainst(ProcessResources before, int warmRdmaThreads) {
        StringBuilder b = new StringBuilder();
        if (nonSocketFds > before.nonSocketFds) {
            b.append("non-socket fds ").append(nonSocketFds).append(">").append(before.nonSocketFds).append(' ');
        }
        if (rdmaSockets > before.rdmaSockets) {
            b.append("transport sockets ").append(rdmaSockets).append(">").append(before.rdmaSockets).append(' ');
        }
        int allowedThreads = Math.max(before.rdmaThreads, warmRdmaThreads);
        if (rdmaThreads > allowedThreads) {
            b.append(THREAD_PREFIX).append("* threads ").append(rdmaThreads).append(">").append(allowedThreads).append(" (")
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

    /** {@code name: fds a->b (non-socket a->b, transport sockets a->b), threads a->b (rdma-* a->b), registered a->b}. */
    String change(ProcessResources before) {
        return String.format(Locale.ROOT, "%s: fds %d->%d (non-socket %d->%d, transport sockets %d->%d), threads %d->%d (rdma-* %d->%d),"
                + " registered %d->%d", name, before.fds, fds, before.nonSocketFds, nonSocketFds, before.rdmaSockets, rdmaSockets,
                before.threads, threads, before.rdmaThreads, rdmaThreads, before.registeredBytes, registeredBytes);
    }
}

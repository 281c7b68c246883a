package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * What the harness sees of a long-lived process of the ring from outside, in {@code /proc/<pid>} (it runs as root):
 * its open file descriptors (all; the non-socket ones; and the sockets of the project's RDMA transport, the TCP
 * connections to or from its ports, from the process's own {@code net/tcp}), its threads, and how many of them are
 * the project's ({@code rdma-*}: the kernel keeps a Java thread's name, cut to 15 characters, in
 * {@code task/<tid>/comm}), plus the bytes it has registered for RDMA as its own metrics say. A fault's resources
 * must come back to the snapshot taken before it: {@link #leaksAgainst}. {@code socketsByPeer}: the transport's
 * sockets by the server end they belong to ({@link #peer}), the sockets of one channel group each; {@code halfClosed}:
 * those of them in CLOSE_WAIT (the peer closed its end, this process has not).
 */
record ProcessResources(String name, long pid, int fds, int nonSocketFds, int rdmaSockets, Map<String, Integer> socketsByPeer,
        int halfClosed, int threads, int rdmaThreads, long registeredBytes, long registeredBound) {
    /** The project's thread names all start with this ({@code rdma-tcp-node-...}, {@code rdma-policy-...}). */
    static final String THREAD_PREFIX = "rdma-";
    /** {@code net/tcp}'s {@code st} column for TCP_CLOSE_WAIT. */
    private static final String CLOSE_WAIT = "08";

    /**
     * The process {@code pid}'s resources now, or null when it is gone. {@code rdmaPorts}: the ports of the project's
     * RDMA servers in the ring (a socket with one of them at either end is the transport's). {@code registeredBound}:
     * what its registered bytes may reach whatever the baseline (a DataNode's region cache holds the replicas it
     * served, up to all it stores), or 0.
     */
    static ProcessResources of(String name, long pid, long registeredBytes, long registeredBound, Set<Integer> rdmaPorts) {
        Path proc = Path.of("/proc", String.valueOf(pid));
        try {
            Map<String, String> transportInodes = new HashMap<>(); // socket:[inode] -> its peer
            Set<String> closeWait = new HashSet<>();
            for (String table : List.of("tcp", "tcp6")) {
                Path file = proc.resolve("net").resolve(table);
                if (!Files.exists(file)) {
                    continue;
                }
                for (String line : Files.readAllLines(file)) {
                    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
                    String[] cols = line.trim().split("\\s+");
                    String peer = cols.length > 9 && cols[1].contains(":") ? peer(cols[1], cols[2], rdmaPorts) : null;
                    if (peer != null) {
                        transportInodes.put("socket:[" + cols[9] + "]", peer);
                        if (cols[3].equals(CLOSE_WAIT)) {
                            closeWait.add("socket:[" + cols[9] + "]");
                        }
                    }
                }
            }
            int fds = 0;
            int nonSocket = 0;
            int transport = 0;
            Map<String, Integer> byPeer = new TreeMap<>();
            int halfClosed = 0;
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
                    } else if (transportInodes.containsKey(target)) {
                        transport++;
                        byPeer.merge(transportInodes.get(target), 1, Integer::sum);
                        halfClosed += closeWait.contains(target) ? 1 : 0;
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
            return new ProcessResources(name, pid, fds, nonSocket, transport, Map.copyOf(byPeer), halfClosed, tasks.size(), rdma, registeredBytes,
                    registeredBound);
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
     * The server end a transport socket belongs to, from {@code net/tcp}'s local and remote {@code HEXADDRESS:HEXPORT}:
     * {@code "from 10.77.0.2 to :7337"} for one the process accepted on its port, {@code "to 10.77.0.3:7337"} for one it
     * opened, null for a socket of no port in {@code rdmaPorts}. Keyed so, a channel group's sockets to one peer share a
     * key whatever their ephemeral ports.
     */
    static String peer(String local, String remote, Set<Integer> rdmaPorts) {
        if (rdmaPorts.contains(port(local))) {
            return "from " + host(remote) + " to :" + port(local);
        }
        return rdmaPorts.contains(port(remote)) ? "to " + host(remote) + ":" + port(remote) : null;
    }

    /** The address of {@code net/tcp}'s {@code HEXADDRESS:HEXPORT}: dotted for IPv4 (kept little-endian there), else the hex. */
    private static String host(String address) {
        String hex = address.substring(0, address.lastIndexOf(':'));
        if (hex.length() != 8) {
            return hex;
        }
        int a = (int) Long.parseLong(hex, 16);
        return (a & 0xff) + "." + (a >>> 8 & 0xff) + "." + (a >>> 16 & 0xff) + "." + (a >>> 24 & 0xff);
    }

    /** The most sockets this process holds to one peer ({@link #socketsByPeer}): the size of its largest channel group. */
    int largestPeerGroup() {
        return socketsByPeer.values().stream().mapToInt(Integer::intValue).max().orElse(0);
    }

    /**
     * What grew from {@code before} (the same process, measured before the fault), as {@code "transport sockets to
     * 10.77.0.3:7337 4>2 ..."}, or "" when nothing did: non-socket descriptors (files, pipes, epoll), rdma-* threads
     * beyond {@code warmRdmaThreads}, the transport's sockets to a peer, or registered bytes above the baseline (or
     * above {@link #registeredBound}, if higher).
     * <ul>
     * <li>rdma-* threads: {@code warmRdmaThreads} is what a warmed process of the same role held at the baseline. The
     * project starts some threads on first use (a transport lane's selector, the grant-expiry timer), so a process that
     * had served nothing yet when its baseline was taken (a DataNode restarted earlier that no query read from since)
     * grows to that set; a thread beyond it is a leak.
     * <li>Sockets, by peer: to a peer it held sockets to at the baseline, no more than then (an old channel not closed
     * after the peer was replaced at the same address shows here); to a new one, no more than {@code warmPeerGroup},
     * the largest group a warmed process of the role held to one peer. A fault's job may be the first to fetch between
     * two executors in one direction (after a replacement, the warm-up's shuffle set up the other), and the channels it
     * opens are kept for reuse, not leaked. And no more of them half closed than at the baseline: a channel whose
     * peer went away that this process never closed.
     * </ul>
     * Other sockets and the JVM's whole thread count are not compared: Spark's and Hadoop's own connection pools
     * (Netty's shuffle client after a fallback, IPC clients) and thread pools grow on demand and idle out on their own
     * clocks (Spark's connection timeout is 120 s); they are reported.
     */
    String leaksAgainst(ProcessResources before, int warmRdmaThreads, int warmPeerGroup) {
        StringBuilder b = new StringBuilder();
        if (nonSocketFds > before.nonSocketFds) {
            b.append("non-socket fds ").append(nonSocketFds).append(">").append(before.nonSocketFds).append(' ');
        }
        for (Map.Entry<String, Integer> peer : socketsByPeer.entrySet()) {
            Integer held = before.socketsByPeer.get(peer.getKey());
            int allowed = held != null ? held : Math.max(warmPeerGroup, before.largestPeerGroup());
            if (peer.getValue() > allowed) {
                b.append("transport sockets ").append(peer.getKey()).append(' ').append(peer.getValue()).append(">").append(allowed)
                        .append(held == null ? " (a new peer) " : " ");
            }
        }
        if (halfClosed > before.halfClosed) {
            b.append("half-closed transport sockets ").append(halfClosed).append(">").append(before.halfClosed).append(' ');
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
        Map<String, Integer> byName = new TreeMap<>();
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

package io.rdmaplane.it.bench;

import io.rdmaplane.rdma.provider.Node;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * CPU time of one node's threads, from {@link ThreadMXBean}: every transport thread is named
 * after its node ({@code rdma-tcp-node-3-bulk}, {@code rdma-verbs-node-2-cq}), so a node's share
 * of a process running both ends of a benchmark can be told apart. Application callbacks run on
 * those threads and count too. Threads that ended meanwhile are not counted.
 */
final class CpuTime {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private CpuTime() {
    }

    /** Nanoseconds of CPU the node's threads have used so far. */
    static long of(Node node) {
        String name = node.toString();
        int at = name.indexOf('@');
        String prefix = (at < 0 ? name : name.substring(0, at)) + "-";
        long total = 0;
        for (Map.Entry<Thread, Long> thread : byThread().entrySet()) {
            if (thread.getKey().getName().startsWith(prefix)) {
                total += thread.getValue();
            }
        }
        return total;
    }

    /** CPU nanoseconds of every live thread, to see later which threads a measurement kept busy. */
    static Map<Thread, Long> byThread() {
        Map<Thread, Long> cpu = new HashMap<>();
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            long nanos = THREADS.getThreadCpuTime(thread.getId());
            if (nanos > 0) {
                cpu.put(thread, nanos);
            }
        }
        return cpu;
    }

    /**
     * The threads that used CPU since {@code before}, busiest first, as "name us" per operation
     * ({@code operations} of them), up to {@code most}: where a measurement's CPU went.
     */
    static String busiest(Map<Thread, Long> before, int operations, int most) {
        return byThread().entrySet().stream()
                .map(e -> Map.entry(e.getKey().getName(), e.getValue() - before.getOrDefault(e.getKey(), 0L)))
                .filter(e -> e.getValue() > 0)
                .sorted(Map.Entry.<String, Long>comparingByValue().reversed())
                .limit(most)
                .map(e -> String.format("%s %.1f", e.getKey(), e.getValue() / 1e3 / operations))
                .collect(Collectors.joining(", "));
    }
}

package io.rdmaplane.it.bench;

import io.rdmaplane.rdma.provider.Node;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

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
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            if (thread.getName().startsWith(prefix)) {
                long cpu = THREADS.getThreadCpuTime(thread.getId());
                if (cpu > 0) {
                    total += cpu;
                }
            }
        }
        return total;
    }
}

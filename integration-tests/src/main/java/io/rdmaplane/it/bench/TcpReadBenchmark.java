package io.rdmaplane.it.bench;

import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.it.Args;

/**
 * The tcp provider's READ throughput (64 KiB READs, N outstanding) and latency (64 B READs,
 * one at a time), each next to a baseline measured in the same run between the same two
 * loopback endpoints: a plain socket stream for throughput, a plain socket ping-pong for
 * latency. Prints both and the ratio. A benchmark, not a test: nothing here asserts a time.
 * It also prints what the wire's CRC32C of every READ payload costs: two passes over each block
 * (the responder's and the requester's), as a share of the CPU a READ of that block took in this
 * run. CPU time, not wall time: on a shared machine wall time mostly measures the neighbours.
 *
 * <p>Arguments (all optional): {@code seconds=3 outstanding=64 latencyRounds=20000}.
 */
public final class TcpReadBenchmark {
    private static final int BLOCK = 64 << 10;
    private static final int SMALL = 64;
    private static final NodeOptions LOOPBACK = NodeOptions.loopback();

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(Args.get(args, "seconds", "3"));
        int outstanding = Integer.parseInt(Args.get(args, "outstanding", "64"));
        int rounds = Integer.parseInt(Args.get(args, "latencyRounds", "20000"));
        long nanos = (long) (seconds * 1e9);

        System.out.printf("tcp provider READ benchmark on loopback: %d KiB READs, %d outstanding, %.1f s per measurement%n",
                BLOCK >> 10, outstanding, seconds);
        SocketBaseline.streamThroughput(nanos / 3); // warm-up of both paths before measuring
        ReadLoad.throughput(TcpProvider.INSTANCE, LOOPBACK, LOOPBACK, BLOCK, nanos / 3, outstanding);
        double stream = SocketBaseline.streamThroughput(nanos);
        long cpuBefore = processCpuNanos();
        double read = ReadLoad.throughput(TcpProvider.INSTANCE, LOOPBACK, LOOPBACK, BLOCK, nanos, outstanding);
        double readCpuPerMiB = (processCpuNanos() - cpuBefore) / (read * seconds);
        System.out.printf("throughput  plain socket stream: %8.1f MiB/s%n", stream);
        System.out.printf("throughput  tcp provider READ:   %8.1f MiB/s%n", read);
        System.out.printf("throughput  ratio READ/stream:   %8.2fx (goal >= 0.80x)%n", read / stream);
        double crcCpuPerMiB = crc32cCpuPerMiB(nanos / 3);
        System.out.printf("cpu         tcp provider READ:   %8.3f ms per MiB (both nodes, the process's CPU time)%n", readCpuPerMiB / 1e6);
        System.out.printf("cpu         CRC32C of %d KiB:    %8.3f ms per MiB (one pass, the thread's CPU time)%n", BLOCK >> 10,
                crcCpuPerMiB / 1e6);
        System.out.printf("tcp-read-crc32c: CPU share of a READ = %.3fx (goal <= 0.10)%n", 2 * crcCpuPerMiB / readCpuPerMiB);

        SocketBaseline.pingPong(rounds / 4, SMALL);
        ReadLoad.latency(TcpProvider.INSTANCE, LOOPBACK, LOOPBACK, SMALL, rounds / 4);
        long[] base = Samples.percentiles(SocketBaseline.pingPong(rounds, SMALL));
        long[] lat = ReadLoad.latency(TcpProvider.INSTANCE, LOOPBACK, LOOPBACK, SMALL, rounds);
        System.out.printf("latency     plain socket 64 B ping-pong: p50 %6.1f us  p99 %6.1f us%n", base[0] / 1e3, base[1] / 1e3);
        System.out.printf("latency     tcp provider 64 B READ:      p50 %6.1f us  p99 %6.1f us%n", lat[0] / 1e3, lat[1] / 1e3);
        System.out.printf("latency     ratio READ/ping-pong:        p50 %6.2fx    p99 %6.2fx%n",
                (double) lat[0] / base[0], (double) lat[1] / base[1]);
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    /** CPU nanoseconds per MiB of CRC32C over one direct {@link #BLOCK}-byte buffer, run for {@code nanos}. */
    private static double crc32cCpuPerMiB(long nanos) {
        java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
        java.nio.ByteBuffer block = java.nio.ByteBuffer.allocateDirect(BLOCK);
        new java.util.Random(1).ints(BLOCK / 4).forEach(block::putInt);
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        long bytes = 0;
        long sink = 0;
        long cpu = threads.getCurrentThreadCpuTime();
        long end = System.nanoTime() + nanos;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 64; i++) {
                crc.reset();
                crc.update(block.clear());
                sink += crc.getValue();
                bytes += BLOCK;
            }
        }
        cpu = threads.getCurrentThreadCpuTime() - cpu;
        if (sink == 42) {
            System.out.print(""); // keeps the loop's result alive
        }
        return cpu / ((double) bytes / (1 << 20));
    }
}

package io.rdmaplane.it.bench;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import java.net.InetSocketAddress;
import io.rdmaplane.it.Args;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The tcp provider's READ throughput (64 KiB READs, N outstanding) and latency (64 B READs,
 * one at a time), each next to a baseline measured in the same run between the same two
 * loopback endpoints: a plain socket stream for throughput, a plain socket ping-pong for
 * latency. Prints both and the ratio. A benchmark, not a test: nothing here asserts a time.
 *
 * <p>Arguments (all optional): {@code seconds=3 outstanding=64 latencyRounds=20000}.
 */
public final class TcpReadBenchmark {
    private static final int BLOCK = 64 << 10;
    private static final int SMALL = 64;
    private static final int STREAM_CHUNK = 1 << 20;
    private static final NodeOptions LOOPBACK = NodeOptions.loopback();

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(Args.get(args, "seconds", "3"));
        int outstanding = Integer.parseInt(Args.get(args, "outstanding", "64"));
        int rounds = Integer.parseInt(Args.get(args, "latencyRounds", "20000"));
        long nanos = (long) (seconds * 1e9);

        System.out.printf("tcp provider READ benchmark on loopback: %d KiB READs, %d outstanding, %.1f s per measurement%n",
                BLOCK >> 10, outstanding, seconds);
        streamThroughput(nanos / 3); // warm-up of both paths before measuring
        ReadLoad.throughput(TcpProvider.INSTANCE, LOOPBACK, LOOPBACK, BLOCK, nanos / 3, outstanding);
        double stream = streamThroughput(nanos);
        double read = ReadLoad.throughput(TcpProvider.INSTANCE, LOOPBACK, LOOPBACK, BLOCK, nanos, outstanding);
        System.out.printf("throughput  plain socket stream: %8.1f MiB/s%n", stream);
        System.out.printf("throughput  tcp provider READ:   %8.1f MiB/s%n", read);
        System.out.printf("throughput  ratio READ/stream:   %8.2fx (goal >= 0.80x)%n", read / stream);

        pingPongLatency(rounds / 4);
        ReadLoad.latency(TcpProvider.INSTANCE, LOOPBACK, LOOPBACK, SMALL, rounds / 4);
        long[] base = pingPongLatency(rounds);
        long[] lat = ReadLoad.latency(TcpProvider.INSTANCE, LOOPBACK, LOOPBACK, SMALL, rounds);
        System.out.printf("latency     plain socket 64 B ping-pong: p50 %6.1f us  p99 %6.1f us%n", base[0] / 1e3, base[1] / 1e3);
        System.out.printf("latency     tcp provider 64 B READ:      p50 %6.1f us  p99 %6.1f us%n", lat[0] / 1e3, lat[1] / 1e3);
        System.out.printf("latency     ratio READ/ping-pong:        p50 %6.2fx    p99 %6.2fx%n",
                (double) lat[0] / base[0], (double) lat[1] / base[1]);
    }

    /**
     * MiB/s of a plain socket stream between two loopback sockets: 1 MiB writes and reads of
     * direct buffers, the best case for a stream, so the ratio errs against the provider.
     */
    private static double streamThroughput(long nanos) throws Exception {
        try (ServerSocketChannel listener = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0))) {
            SocketChannel sender = SocketChannel.open(listener.getLocalAddress());
            SocketChannel receiver = listener.accept();
            AtomicLong received = new AtomicLong();
            Thread reader = new Thread(() -> {
                ByteBuffer in = ByteBuffer.allocateDirect(STREAM_CHUNK);
                try {
                    for (int n; (n = receiver.read(in.clear())) >= 0; ) {
                        received.addAndGet(n);
                    }
                } catch (Exception e) {
                    // the sender closed
                }
            }, "stream-reader");
            reader.setDaemon(true);
            reader.start();
            ByteBuffer out = ByteBuffer.allocateDirect(STREAM_CHUNK);
            long start = System.nanoTime();
            while (System.nanoTime() - start < nanos) {
                out.clear();
                while (out.hasRemaining()) {
                    sender.write(out);
                }
            }
            sender.close();
            reader.join();
            long elapsed = System.nanoTime() - start;
            receiver.close();
            return received.get() / (1024.0 * 1024.0) / (elapsed / 1e9);
        }
    }

    /** p50 and p99 nanoseconds of a plain socket round trip: a 25 B request answered with 64 B. */
    private static long[] pingPongLatency(int rounds) throws Exception {
        try (ServerSocketChannel listener = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0))) {
            SocketChannel pinger = SocketChannel.open(listener.getLocalAddress());
            SocketChannel ponger = listener.accept();
            pinger.socket().setTcpNoDelay(true);
            ponger.socket().setTcpNoDelay(true);
            Thread echo = new Thread(() -> {
                ByteBuffer request = ByteBuffer.allocateDirect(25);
                ByteBuffer answer = ByteBuffer.allocateDirect(25 + SMALL);
                try {
                    while (true) {
                        request.clear();
                        while (request.hasRemaining()) {
                            if (ponger.read(request) < 0) {
                                return;
                            }
                        }
                        answer.clear();
                        while (answer.hasRemaining()) {
                            ponger.write(answer);
                        }
                    }
                } catch (Exception e) {
                    // the pinger closed
                }
            }, "ping-pong-echo");
            echo.setDaemon(true);
            echo.start();
            ByteBuffer request = ByteBuffer.allocateDirect(25);
            ByteBuffer answer = ByteBuffer.allocateDirect(25 + SMALL);
            long[] samples = new long[rounds];
            for (int i = 0; i < rounds; i++) {
                long t0 = System.nanoTime();
                request.clear();
                while (request.hasRemaining()) {
                    pinger.write(request);
                }
                answer.clear();
                while (answer.hasRemaining()) {
                    pinger.read(answer);
                }
                samples[i] = System.nanoTime() - t0;
            }
            pinger.close();
            echo.join();
            ponger.close();
            return percentiles(samples);
        }
    }

    static long[] percentiles(long[] samples) {
        long[] sorted = samples.clone();
        Arrays.sort(sorted);
        return new long[] {sorted[sorted.length / 2], sorted[(int) (sorted.length * 0.99)]};
    }
}

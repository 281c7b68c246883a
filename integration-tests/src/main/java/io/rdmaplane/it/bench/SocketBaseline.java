package io.rdmaplane.it.bench;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What plain sockets do between two loopback endpoints, the tcp provider's baseline measured in
 * the same run: a stream for throughput, a ping-pong for latency.
 */
final class SocketBaseline {
    private static final int STREAM_CHUNK = 1 << 20;
    /** A ping is a tcp READ request's size (its 25-byte header); the pong carries the header and the payload. */
    private static final int PING = 25;

    private SocketBaseline() {
    }

    /**
     * MiB/s of a plain socket stream between two loopback sockets: 1 MiB writes and reads of
     * direct buffers, the best case for a stream, so the ratio errs against the provider.
     */
    static double streamThroughput(long nanos) throws Exception {
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

    /** Nanoseconds of each of {@code rounds} plain socket round trips: a 25 B request answered with 25 + {@code size} B. */
    static long[] pingPong(int rounds, int size) throws Exception {
        try (ServerSocketChannel listener = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0))) {
            SocketChannel pinger = SocketChannel.open(listener.getLocalAddress());
            SocketChannel ponger = listener.accept();
            pinger.socket().setTcpNoDelay(true);
            ponger.socket().setTcpNoDelay(true);
            Thread echo = new Thread(() -> {
                ByteBuffer request = ByteBuffer.allocateDirect(PING);
                ByteBuffer answer = ByteBuffer.allocateDirect(PING + size);
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
            ByteBuffer request = ByteBuffer.allocateDirect(PING);
            ByteBuffer answer = ByteBuffer.allocateDirect(PING + size);
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
            return samples;
        }
    }
}

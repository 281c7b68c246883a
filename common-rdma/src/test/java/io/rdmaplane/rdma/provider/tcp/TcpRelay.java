package io.rdmaplane.rdma.provider.tcp;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A TCP relay on loopback between a tcp node and its peer, for the tcp provider's own tests of a link
 * that stalls or is cut: each connection to {@link #address()} is forwarded to the target, byte for
 * byte, by two threads. {@link #stall(boolean)} stops forwarding (the sockets' buffers fill up, as
 * with a hung peer); {@link #stallReplies(boolean)} stops only what the target sends back (a peer
 * that sends requests but stops reading); {@link #cut()} resets every connection on both sides, as a
 * pulled cable; {@link #flipReadPayloads(int, int)} flips one bit in some READ responses' payloads (a
 * corruption above TCP's checksum: what the wire's own CRC32C is for).
 */
final class TcpRelay implements AutoCloseable {
    private final InetSocketAddress target;
    private final ServerSocket server;
    private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();
    private final Object gate = new Object();
    private boolean stalled; // guarded by gate
    private boolean repliesStalled; // guarded by gate
    private final AtomicLong repliesRead = new AtomicLong();
    private volatile boolean closed;
    private volatile int flipEvery; // 0: no flips
    private volatile int flipMax;
    private final AtomicLong readResponses = new AtomicLong();
    private final AtomicLong flipped = new AtomicLong();

    TcpRelay(InetSocketAddress target) throws IOException {
        this.target = target;
        this.server = new ServerSocket(0, 50, target.getAddress());
        daemon("tcp-relay-accept", this::acceptLoop);
    }

    InetSocketAddress address() {
        return new InetSocketAddress(server.getInetAddress(), server.getLocalPort());
    }

    void stall(boolean stall) {
        synchronized (gate) {
            stalled = stall;
            gate.notifyAll();
        }
    }

    void stallReplies(boolean stall) {
        synchronized (gate) {
            repliesStalled = stall;
            gate.notifyAll();
        }
    }

    /**
     * From now on, flips one random bit in the payload of every {@code every}-th READ response that carries bytes
     * (the first one included), {@code max} times at most.
     */
    void flipReadPayloads(int every, int max) {
        flipMax = max;
        flipEvery = every;
    }

    /** How many bits the relay has flipped so far. */
    long flipped() {
        return flipped.get();
    }

    /** Bytes the relay has taken from the target so far (forwarded or held by a stall). */
    long repliesRead() {
        return repliesRead.get();
    }

    /** Resets every connection open now (SO_LINGER 0); new ones are relayed as before. */
    void cut() {
        for (Socket socket : List.copyOf(sockets)) {
            try {
                socket.setSoLinger(true, 0);
            } catch (SocketException e) {
                // already closed
            }
            closeQuietly(socket);
        }
    }

    private void acceptLoop() {
        while (!closed) {
            try {
                Socket from = server.accept();
                Socket to = new Socket(target.getAddress(), target.getPort());
                sockets.add(from);
                sockets.add(to);
                daemon("tcp-relay-out", () -> pump(from, to, false));
                daemon("tcp-relay-back", () -> pump(to, from, true));
            } catch (IOException e) {
                if (!closed) {
                    throw new IllegalStateException("relay to " + target + " failed", e);
                }
            }
        }
    }

    private void pump(Socket from, Socket to, boolean replies) {
        byte[] buffer = new byte[64 << 10];
        Frames frames = new Frames();
        try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
            for (int n; (n = in.read(buffer)) > 0; ) {
                if (replies) {
                    repliesRead.addAndGet(n);
                    frames.scan(buffer, n);
                }
                awaitNotStalled(replies);
                out.write(buffer, 0, n);
            }
        } catch (IOException | InterruptedException e) {
            // the connection ended (or was cut): end its other half too
        } finally {
            sockets.remove(from);
            sockets.remove(to);
            closeQuietly(from);
            closeQuietly(to);
        }
    }

    /** Follows the frames of what a target sends back (see {@link Wire}) to find READ payload bytes to flip. */
    private final class Frames {
        private final byte[] header = new byte[Wire.HEADER_BYTES];
        private final Random random = new Random(14);
        private int headerBytes;
        private long payloadLeft;
        private long flipAt = -1; // the payload byte to flip, counted from here; -1: none in this payload

        void scan(byte[] bytes, int n) {
            for (int i = 0; i < n; ) {
                if (payloadLeft == 0) {
                    int take = Math.min(Wire.HEADER_BYTES - headerBytes, n - i);
                    System.arraycopy(bytes, i, header, headerBytes, take);
                    headerBytes += take;
                    i += take;
                    if (headerBytes == Wire.HEADER_BYTES) {
                        headerBytes = 0;
                        ByteBuffer h = ByteBuffer.wrap(header);
                        byte type = h.get(0);
                        int length = h.getInt(21);
                        payloadLeft = type == Wire.READ_RESP || type == Wire.SEND ? length : 0;
                        flipAt = type == Wire.READ_RESP && length > 0 && flipThisOne() ? random.nextInt(length) : -1;
                    }
                } else {
                    int take = (int) Math.min(payloadLeft, n - i);
                    if (flipAt >= 0 && flipAt < take) {
                        bytes[i + (int) flipAt] ^= (byte) (1 << random.nextInt(8));
                        flipped.incrementAndGet();
                        flipAt = -1;
                    } else if (flipAt >= 0) {
                        flipAt -= take;
                    }
                    payloadLeft -= take;
                    i += take;
                }
            }
        }

        private boolean flipThisOne() {
            int every = flipEvery;
            return every > 0 && readResponses.getAndIncrement() % every == 0 && flipped.get() < flipMax;
        }
    }

    private void awaitNotStalled(boolean replies) throws InterruptedException {
        synchronized (gate) {
            while ((stalled || replies && repliesStalled) && !closed) {
                gate.wait();
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        stall(false);
        closeQuietly(server);
        for (Socket socket : List.copyOf(sockets)) {
            closeQuietly(socket);
        }
    }

    private static void daemon(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.setDaemon(true);
        t.start();
    }

    private static void closeQuietly(java.io.Closeable closeable) {
        try {
            closeable.close();
        } catch (IOException e) {
            // nothing to do
        }
    }
}

package io.rdmaplane.it.cluster;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The host ring's FLIP_READ_PAYLOAD relay: a process in a ring namespace between a tcp-provider peer and an
 * executor's RDMA port that forwards every connection byte for byte, except that it flips one random bit in the
 * payload of some READ responses. It stands for what corrupts bytes above the kernel's TCP checksum (a middlebox, a
 * NIC, memory on the way): a flip below it, in the kernel, TCP would drop. Arguments:
 * {@code LISTEN_ADDRESS LISTEN_PORT TARGET_ADDRESS TARGET_PORT EVERY MAX}: the first and then every EVERY-th READ
 * response carrying bytes (counted over all connections) gets one bit flipped, MAX times at most. Says
 * {@code RING-FLIP-READY}; on {@code count} in its input, {@code RING-FLIP-COUNT responses=N flipped=F}.
 * <p>It follows the tcp provider's frames ({@code io.rdmaplane.rdma.provider.tcp.Wire}): a 25-byte header
 * {@code type:u8 id:i64 a:i64 b:i32 c:i32}; READ_RESP (3) and SEND (4) are followed by {@code c} payload bytes.
 */
public final class RingFlipRelay {
    private static final int HEADER_BYTES = 25;
    private static final byte READ_RESP = 3;
    private static final byte SEND = 4;

    private final InetSocketAddress target;
    private final int every;
    private final int max;
    private final AtomicLong responses = new AtomicLong();
    private final AtomicLong flipped = new AtomicLong();
    private final Random random = new Random(14);

    private RingFlipRelay(InetSocketAddress target, int every, int max) {
        this.target = target;
        this.every = every;
        this.max = max;
    }

    public static void main(String[] args) throws Exception {
        RingFlipRelay relay = new RingFlipRelay(new InetSocketAddress(args[2], Integer.parseInt(args[3])), Integer.parseInt(args[4]),
                Integer.parseInt(args[5]));
        ServerSocket server = new ServerSocket(Integer.parseInt(args[1]), 50, InetAddress.getByName(args[0]));
        daemon("ring-flip-accept", () -> relay.accept(server));
        say("RING-FLIP-READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.trim().equals("count")) {
                say("RING-FLIP-COUNT responses=" + relay.responses.get() + " flipped=" + relay.flipped.get());
            }
        }
        server.close();
    }

    private void accept(ServerSocket server) {
        while (true) {
            try {
                Socket from = server.accept();
                Socket to = new Socket(target.getAddress(), target.getPort());
                daemon("ring-flip-out", () -> pump(from, to, null));
                daemon("ring-flip-back", () -> pump(to, from, new Frames()));
            } catch (IOException e) {
                return; // closed
            }
        }
    }

    /** Forwards {@code from} to {@code to}; {@code frames} (what the target sends back) picks bits to flip. */
    private static void pump(Socket from, Socket to, Frames frames) {
        byte[] buffer = new byte[64 << 10];
        try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
            for (int n; (n = in.read(buffer)) > 0; ) {
                if (frames != null) {
                    frames.scan(buffer, n);
                }
                out.write(buffer, 0, n);
            }
        } catch (IOException e) {
            // the connection ended: end its other half too
        } finally {
            close(from);
            close(to);
        }
    }

    /** Follows one connection's frames from the target to find READ payload bytes. */
    private final class Frames {
        private final byte[] header = new byte[HEADER_BYTES];
        private int headerBytes;
        private long payloadLeft;
        private long flipAt = -1; // the payload byte to flip, counted from here; -1: none in this payload

        void scan(byte[] bytes, int n) {
            for (int i = 0; i < n; ) {
                if (payloadLeft == 0) {
                    int take = Math.min(HEADER_BYTES - headerBytes, n - i);
                    System.arraycopy(bytes, i, header, headerBytes, take);
                    headerBytes += take;
                    i += take;
                    if (headerBytes == HEADER_BYTES) {
                        headerBytes = 0;
                        byte type = header[0];
                        int length = ByteBuffer.wrap(header).getInt(21);
                        payloadLeft = type == READ_RESP || type == SEND ? length : 0;
                        flipAt = type == READ_RESP && length > 0 ? pick(length) : -1;
                    }
                } else {
                    int take = (int) Math.min(payloadLeft, n - i);
                    if (flipAt >= 0 && flipAt < take) {
                        synchronized (random) {
                            bytes[i + (int) flipAt] ^= (byte) (1 << random.nextInt(8));
                        }
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

        /** The payload byte of this READ response to flip, or -1 to leave it alone. */
        private long pick(int length) {
            if (responses.getAndIncrement() % every != 0 || flipped.get() >= max) {
                return -1;
            }
            synchronized (random) {
                return random.nextInt(length);
            }
        }
    }

    /** A line for the harness (which needs nothing but the JDK here: no Spark on this process's class path). */
    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static void daemon(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.setDaemon(true);
        t.start();
    }

    private static void close(Socket socket) {
        try {
            socket.close();
        } catch (IOException e) {
            // already closed
        }
    }
}

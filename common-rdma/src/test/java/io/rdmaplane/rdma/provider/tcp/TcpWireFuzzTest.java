package io.rdmaplane.rdma.provider.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.code_intelligence.jazzer.api.BugDetectors;
import com.code_intelligence.jazzer.api.SilentCloseable;
import com.code_intelligence.jazzer.junit.FuzzTest;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.time.Duration;

/**
 * Coverage-guided fuzzing of the tcp wire header parser, over a real socket: a peer sends any bytes
 * (after a valid HELLO, or instead of it, as the first input byte says). The node must answer or close
 * the channel, never hang on it and never die: its transport stays up for everyone else. Stored
 * inputs (TcpWireFuzzTestInputs) run in every build; JAZZER_FUZZ=1 fuzzes (CI's fuzz step).
 */
class TcpWireFuzzTest {
    private static final int WAIT_MILLIS = 10_000;

    /** One server node for all inputs (its daemon threads end with the JVM). */
    private static final class Server {
        static final Node NODE = start();

        private static Node start() {
            try {
                Node node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback().withOperationTimeout(Duration.ofSeconds(2)));
                node.listen(channel -> new ChannelHandler() { });
                node.register(ByteBuffer.allocateDirect(1 << 16));
                return node;
            } catch (TransportException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    @FuzzTest(maxDuration = "20s")
    void anyBytesAreAnsweredOrClosedAndTheNodeSurvives(byte[] input) throws IOException {
        Node node = Server.NODE;
        // Connecting to our own node is the point here, not a request forgery.
        try (SilentCloseable allowed = BugDetectors.allowNetworkConnections();
             Socket raw = new Socket(node.localAddress().getAddress(), node.localAddress().getPort())) {
            raw.setSoTimeout(WAIT_MILLIS);
            boolean hello = input.length == 0 || (input[0] & 1) == 0;
            if (hello) {
                raw.getOutputStream().write(ByteBuffer.allocate(Wire.HEADER_BYTES).put(Wire.HELLO).putLong(0)
                        .putLong(Wire.MAGIC << 32 | Wire.VERSION).putInt(64 << 10).putInt(16).array());
                DataInputStream in = new DataInputStream(raw.getInputStream());
                assertEquals(Wire.HELLO, in.readByte());
                in.readNBytes(Wire.HEADER_BYTES - 1);
            }
            try {
                if (input.length > 1) {
                    raw.getOutputStream().write(input, 1, input.length - 1);
                }
                raw.shutdownOutput(); // always: a peer that says nothing more is waited for, as it should be
            } catch (java.net.SocketException closedAlready) {
                // the node closed the channel before it read everything: allowed
            }
            drain(raw);
        }
        assertFalse(node.terminated().isDone(), "the node's transport died on a peer's bytes");
    }

    private static void drain(Socket raw) throws IOException {
        InputStream in = raw.getInputStream();
        try {
            while (in.read() >= 0) {
                // answers, until the node closes
            }
        } catch (SocketTimeoutException e) {
            throw new UncheckedIOException("the node neither answered fully nor closed within " + WAIT_MILLIS + " ms", e);
        } catch (java.net.SocketException e) {
            // closed by reset
        }
    }
}

package io.rdmaplane.rdma.provider.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What only the tcp provider has: its wire format facing hostile peers, and its own timeouts and
 * errors when the link stalls or is cut (a {@link TcpRelay} between the nodes).
 */
class TcpProviderTest {
    private static final int WAIT = 20;
    private Node server;
    private Node client;
    private MemoryRegion source;

    @BeforeEach
    void start() throws Exception {
        NodeOptions options = NodeOptions.loopback().withOperationTimeout(Duration.ofMillis(400));
        server = TcpProvider.INSTANCE.createNode(options);
        server.listen(channel -> new ChannelHandler() { });
        client = TcpProvider.INSTANCE.createNode(options);
        ByteBuffer memory = ByteBuffer.allocateDirect(1 << 20);
        new Random(1).ints(1 << 18).forEach(memory::putInt);
        source = server.register(memory.flip());
    }

    @AfterEach
    void stop() {
        client.close();
        server.close();
    }

    @Test
    void autoChoosesTcpWhenItIsTheOnlyAvailableProviderAndUnknownNamesAreRejected() throws Exception {
        assertEquals("tcp", Providers.select("auto").name());
        assertEquals("tcp", Providers.select(" TCP ").name());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Providers.select("infiniband"));
        assertTrue(e.getMessage().contains("infiniband") && e.getMessage().contains("tcp"), e.getMessage());
    }

    @Test
    void regionAddressesAreNeitherSequentialNorAdjacentAndRkeysDistinct() throws Exception {
        List<MemoryRegion> regions = new ArrayList<>();
        Random sizes = new Random(7);
        for (int i = 0; i < 64; i++) {
            regions.add(server.register(ByteBuffer.allocateDirect(1 + sizes.nextInt(3 * 4096))));
        }
        int successors = 0;
        for (int i = 1; i < regions.size(); i++) {
            MemoryRegion before = regions.get(i - 1);
            long gap = regions.get(i).address() - (before.address() + before.length());
            if (gap >= 0 && gap <= 2 * 4096) {
                successors++; // where a sequential allocator would put the next region
            }
        }
        assertEquals(0, successors, "a region's address must not follow from the previous one's");
        regions.add(source);
        for (MemoryRegion a : regions) {
            assertTrue(a.rkey() != 0 && a.address() % 4096 == 0, () -> "rkey " + a.rkey() + " at 0x" + Long.toHexString(a.address()));
            for (MemoryRegion b : regions) {
                if (a != b) {
                    assertTrue(a.rkey() != b.rkey(), "rkeys are distinct");
                    assertTrue(a.address() + a.length() + 4096 <= b.address() || b.address() + b.length() + 4096 <= a.address(),
                            "regions are at least a page apart");
                }
            }
        }
    }

    @Test
    void aReadTheChannelsHandlerDoesNotPermitIsARemoteAccessError() throws Exception {
        try (Node guarded = TcpProvider.INSTANCE.createNode(NodeOptions.loopback())) {
            MemoryRegion secret = guarded.register(ByteBuffer.allocateDirect(4096));
            MemoryRegion open = guarded.register(ByteBuffer.allocateDirect(4096).put(0, (byte) 9));
            guarded.listen(channel -> new ChannelHandler() {
                @Override
                public boolean permitsRemoteRead(Channel ch, int rkey) {
                    return rkey == open.rkey();
                }
            });
            MemoryRegion landing = client.register(ByteBuffer.allocateDirect(4096), EnumSet.of(Access.LOCAL_WRITE));
            Channel channel = client.connect(guarded.localAddress(), 4, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
            channel.read(open.address(), open.rkey(), 4096, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(9, landing.buffer().get(0));
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> channel.read(secret.address(), secret.rkey(), 4096, landing, 0).get(WAIT, TimeUnit.SECONDS));
            assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, e.getCause()).status());
        }
    }

    /**
     * A bit flipped in a READ payload above TCP's checksum (here by the relay; in the ring by a relay process): the
     * READ fails with BAD_RESPONSE and completes no bytes, its channel closes as a queue pair does on a completion
     * error, and a new channel READs the right bytes. Without the wire's CRC32C the first READ would succeed with a
     * wrong byte.
     */
    @Test
    void aReadWhosePayloadChangedOnTheWayFailsAndANewChannelReadsTheRightBytes() throws Exception {
        try (TcpRelay link = new TcpRelay(server.localAddress())) {
            link.flipReadPayloads(1, 1); // the first READ response's payload only
            Channel channel = connect(link, 4);
            MemoryRegion landing = landing(256 << 10);
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> channel.read(source.address(), source.rkey(), 256 << 10, landing, 0).get(WAIT, TimeUnit.SECONDS),
                    "a READ whose payload was corrupted on the way must not succeed");
            assertEquals(1, link.flipped());
            TransportException t = assertInstanceOf(TransportException.class, e.getCause());
            assertEquals(Status.BAD_RESPONSE, t.status(), t.getMessage());
            assertTrue(t.getMessage().contains("CRC32C"), t.getMessage());
            assertFalse(channel.isOpen(), "the channel goes with the corrupted READ");
            Channel again = connect(link, 4);
            again.read(source.address(), source.rkey(), 256 << 10, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertArrayEquals(bytes(source.buffer().slice(0, 256 << 10)), bytes(landing.buffer()));
            assertEquals(1, link.flipped());
        }
    }

    @Test
    void postingBeyondTheQueueDepthFailsAtOnceAndLeavesTheChannelUsable() throws Exception {
        try (TcpRelay link = new TcpRelay(server.localAddress())) {
            Channel channel = connect(link, 4);
            MemoryRegion landing = landing(5 * 4096);
            link.stall(true);
            List<CompletableFuture<Void>> held = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                held.add(channel.read(source.address(), source.rkey(), 4096, landing, i * 4096));
            }
            CompletableFuture<Void> extra = channel.read(source.address(), source.rkey(), 4096, landing, 4 * 4096);
            assertStatus(Status.QUEUE_FULL, extra);
            assertEquals(4, channel.outstanding());
            assertTrue(channel.isOpen());
            link.stall(false);
            for (CompletableFuture<Void> f : held) {
                f.get(WAIT, TimeUnit.SECONDS);
            }
            channel.read(source.address(), source.rkey(), 4096, landing, 4 * 4096).get(WAIT, TimeUnit.SECONDS);
        }
    }

    @Test
    void aPeerThatStopsAnsweringFailsOutstandingReadsAfterTheOperationTimeout() throws Exception {
        try (TcpRelay link = new TcpRelay(server.localAddress())) {
            Channel channel = connect(link, 4);
            link.stall(true);
            CompletableFuture<Void> read = channel.read(source.address(), source.rkey(), 4096, landing(4096), 0);
            assertStatus(Status.RETRY_EXCEEDED, read);
            assertFalse(channel.isOpen());
        }
    }

    @Test
    void aCutConnectionFailsOutstandingReadsAndANewChannelWorks() throws Exception {
        try (TcpRelay link = new TcpRelay(server.localAddress())) {
            Channel channel = connect(link, 16);
            MemoryRegion landing = landing(1 << 20);
            link.stall(true);
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                reads.add(channel.read(source.address(), source.rkey(), 1 << 16, landing, i << 16));
            }
            link.cut();
            for (CompletableFuture<Void> f : reads) {
                assertStatus(Status.RETRY_EXCEEDED, f);
            }
            link.stall(false);
            Channel fresh = connect(link, 4);
            fresh.read(source.address(), source.rkey(), 4096, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertArrayEquals(bytes(source.buffer().slice(0, 4096)), bytes(landing.buffer().slice(0, 4096)));
        }
    }

    @Test
    void aRejectedChannelFailsToConnect() throws Exception {
        try (Node picky = TcpProvider.INSTANCE.createNode(NodeOptions.loopback())) {
            picky.listen(channel -> null);
            CompletableFuture<Channel> attempt = client.connect(picky.localAddress(), 4, new ChannelHandler() { });
            ExecutionException e = assertThrows(ExecutionException.class, () -> attempt.get(WAIT, TimeUnit.SECONDS));
            assertInstanceOf(TransportException.class, e.getCause());
        }
    }

    // ------------------------------------------------------------------ hostile peers on the wire

    @Test
    void aPeerThatDoesNotSpeakTheProtocolIsDisconnected() throws Exception {
        try (Socket raw = rawSocket()) {
            raw.getOutputStream().write("GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes());
            assertClosedByServer(raw);
        }
        assertServerStillServes();
    }

    @Test
    void aMessageLongerThanTheMaximumClosesTheChannelWithoutAllocatingIt() throws Exception {
        try (Socket raw = handshaken()) {
            raw.getOutputStream().write(frame(Wire.SEND, 0, 0, 0, Integer.MAX_VALUE));
            assertClosedByServer(raw);
        }
        try (Socket raw = handshaken()) {
            raw.getOutputStream().write(frame(Wire.SEND, 0, 0, 0, -1));
            assertClosedByServer(raw);
        }
        assertServerStillServes();
    }

    @Test
    void readRequestsOfBadLengthOrOutsideARegionGetAnErrorAnswerNotData() throws Exception {
        try (Socket raw = handshaken()) {
            DataInputStream in = new DataInputStream(raw.getInputStream());
            long[][] requests = {
                {1, source.address(), source.rkey(), Integer.MAX_VALUE, 2},
                {2, source.address(), source.rkey(), -5, 2},
                {3, source.address(), source.rkey(), 0, 2},
                {4, Long.MAX_VALUE - 8, source.rkey(), 4096, 1},
                {5, source.address() + source.length() - 1, source.rkey(), 2, 1},
                {6, Long.MIN_VALUE, source.rkey(), 16, 1},
                {7, source.address(), source.rkey() + 1, 16, 1},
            };
            for (long[] r : requests) {
                raw.getOutputStream().write(frame(Wire.READ_REQ, r[0], r[1], (int) r[2], (int) r[3]));
                assertEquals(Wire.READ_RESP, in.readByte());
                assertEquals(r[0], in.readLong());
                in.readLong();
                assertEquals((int) r[4], in.readInt(), "status of request " + r[0]);
                assertEquals(0, in.readInt(), "no payload for refused request " + r[0]);
            }
            // The connection survives refusals: a good READ on it still returns the bytes.
            raw.getOutputStream().write(frame(Wire.READ_REQ, 8, source.address() + 8, source.rkey(), 32));
            assertEquals(Wire.READ_RESP, in.readByte());
            assertEquals(8, in.readLong());
            long crc32c = in.readLong();
            assertEquals(0, in.readInt());
            assertEquals(32, in.readInt());
            byte[] data = in.readNBytes(32);
            assertArrayEquals(bytes(source.buffer().slice(8, 32)), data);
            CRC32C expected = new CRC32C();
            expected.update(data);
            assertEquals(expected.getValue(), crc32c, "a READ response carries its payload's CRC32C");
        }
    }

    @Test
    void unknownFrameTypesAndUnsolicitedResponsesCloseTheChannel() throws Exception {
        try (Socket raw = handshaken()) {
            raw.getOutputStream().write(frame((byte) 99, 0, 0, 0, 0));
            assertClosedByServer(raw);
        }
        try (Socket raw = handshaken()) {
            raw.getOutputStream().write(frame(Wire.READ_RESP, 12345, 0, 0, 4096));
            assertClosedByServer(raw);
        }
        assertServerStillServes();
    }

    @Test
    void randomBytesAfterTheHandshakeNeverCrashTheNode() throws Exception {
        Random random = new Random(42);
        for (int round = 0; round < 40; round++) {
            try (Socket raw = handshaken()) {
                byte[] junk = new byte[1 + random.nextInt(400)];
                random.nextBytes(junk);
                if (round % 2 == 0) {
                    junk[0] = (byte) (1 + random.nextInt(4)); // a valid type, then junk fields
                }
                raw.getOutputStream().write(junk);
                raw.shutdownOutput();
                drain(raw); // the server answers or closes; it must never hang or die
            }
        }
        assertServerStillServes();
    }

    // ------------------------------------------------------------------ helpers

    private Channel connect(int depth) throws Exception {
        return client.connect(server.localAddress(), depth, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
    }

    /** A channel to the server through {@code link}, which can stall or cut it. */
    private Channel connect(TcpRelay link, int depth) throws Exception {
        return client.connect(link.address(), depth, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
    }

    private MemoryRegion landing(int size) throws TransportException {
        return client.register(ByteBuffer.allocateDirect(size), EnumSet.of(Access.LOCAL_WRITE));
    }

    private void assertServerStillServes() throws Exception {
        MemoryRegion landing = landing(4096);
        connect(4).read(source.address(), source.rkey(), 4096, landing, 0).get(WAIT, TimeUnit.SECONDS);
        assertArrayEquals(bytes(source.buffer().slice(0, 4096)), bytes(landing.buffer()));
    }

    private Socket rawSocket() throws IOException {
        Socket raw = new Socket(server.localAddress().getAddress(), server.localAddress().getPort());
        raw.setSoTimeout(WAIT * 1000);
        return raw;
    }

    /** A raw socket past the handshake: it sent a HELLO and read the server's. */
    private Socket handshaken() throws IOException {
        Socket raw = rawSocket();
        raw.getOutputStream().write(frame(Wire.HELLO, 0, Wire.MAGIC << 32 | Wire.VERSION, 64 << 10, 16));
        DataInputStream in = new DataInputStream(raw.getInputStream());
        assertEquals(Wire.HELLO, in.readByte());
        in.readNBytes(Wire.HEADER_BYTES - 1);
        return raw;
    }

    private static byte[] frame(byte type, long id, long a, int b, int c) {
        return ByteBuffer.allocate(Wire.HEADER_BYTES).put(type).putLong(id).putLong(a).putInt(b).putInt(c).array();
    }

    private static void assertClosedByServer(Socket raw) throws IOException {
        try {
            assertEquals(-1, raw.getInputStream().read(), "the server should close the connection");
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the server kept a hostile connection open", e);
        } catch (IOException e) {
            // a reset also closes it
        }
    }

    private static void drain(Socket raw) throws IOException {
        InputStream in = raw.getInputStream();
        try {
            while (in.read() >= 0) {
                // discard answers until the server closes or stops
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the server neither answered fully nor closed", e);
        } catch (EOFException | java.net.SocketException e) {
            // closed by reset
        }
    }

    private static void assertStatus(Status expected, CompletableFuture<?> future) throws Exception {
        ExecutionException e = assertThrows(ExecutionException.class, () -> future.get(WAIT, TimeUnit.SECONDS));
        assertEquals(expected, assertInstanceOf(TransportException.class, e.getCause()).status(), e.getCause().getMessage());
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.duplicate().get(out);
        return out;
    }
}

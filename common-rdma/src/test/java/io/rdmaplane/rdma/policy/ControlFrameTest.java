package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.UnsupportedVersionException;
import io.rdmaplane.rdma.policy.ControlFrame.Type;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.testing.WireFuzz;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

/** The control frame and the handshake payloads on the shared codec, and what the server does with a frame of another version. */
class ControlFrameTest {
    @Test
    void everyTypeRoundTripsWithItsOwnExplicitId() {
        Set<Integer> ids = new HashSet<>();
        for (Type type : Type.values()) {
            ControlFrame frame = new ControlFrame(type, 0x0102030405060708L, ByteBuffer.wrap(new byte[] {1, 2, 3}));
            ByteBuffer encoded = frame.encode();
            assertEquals(ControlFrame.VERSION, encoded.get(0));
            assertEquals(type.wireId, encoded.get(1), "the wire id, not the ordinal");
            assertTrue(ids.add(type.wireId));
            ControlFrame back = ControlFrame.decode(encoded);
            assertEquals(type, back.type());
            assertEquals(frame.requestId(), back.requestId());
            assertEquals(ByteBuffer.wrap(new byte[] {1, 2, 3}), back.payload());
            assertEquals(encoded.limit(), encoded.position(), "a decoded frame is consumed");
        }
        assertEquals(2 + 8 + 4, ControlFrame.of(Type.PING, 1).encode().remaining(), "header, request id and CRC32C");
        String longReason = "é".repeat(ControlFrame.MAX_REASON_BYTES);
        String cut = ControlFrame.decode(ControlFrame.withReason(Type.REJECT, 0, longReason).encode()).reason();
        assertEquals(longReason.substring(0, ControlFrame.MAX_REASON_BYTES / 2), cut, "a long reason is cut between characters");
    }

    @Test
    void handshakePayloadsRoundTripAndAreMeasuredOnlyByTheirDecoder() {
        UUID instance = UUID.randomUUID();
        byte[] nonce = Auth.nonce();
        for (TrafficClass c : TrafficClass.values()) {
            Handshake.Hello hello = Handshake.Hello.decode(new Handshake.Hello(c, instance, nonce, true).encode());
            assertEquals(c, hello.trafficClass());
            assertEquals(instance, hello.instance());
            assertArrayEquals(nonce, hello.nonce());
            assertTrue(hello.wantsAuth());
        }
        byte[] mac = new byte[Auth.MAC_BYTES];
        new Random(4).nextBytes(mac);
        Handshake.Challenge challenge = Handshake.Challenge.decode(new Handshake.Challenge(nonce, mac).encode());
        assertArrayEquals(nonce, challenge.nonce());
        assertArrayEquals(mac, challenge.mac());
        assertArrayEquals(mac, Handshake.Proof.decode(new Handshake.Proof(mac).encode()).mac());

        ByteBuffer hello = new Handshake.Hello(TrafficClass.DATA, instance, nonce, false).encode();
        assertMalformed("class: unknown traffic class id 0", () -> Handshake.Hello.decode(with(hello, 0, (byte) 0)));
        assertMalformed("wantsAuth: expected 0 or 1, was 7", () -> Handshake.Hello.decode(with(hello, hello.limit() - 1 - Integer.BYTES, (byte) 7)));
        assertMalformed("nonce: needs 16 bytes", () -> Handshake.Hello.decode(hello.duplicate().limit(20)));
        assertMalformed("trailing: 1 bytes after the control HELLO message",
                () -> Handshake.Hello.decode(ByteBuffer.allocate(hello.limit() + 1).put(hello.duplicate()).put((byte) 0).flip()));
        byte[] credential = {9, 8, 7};
        assertArrayEquals(credential, Handshake.Hello.decode(new Handshake.Hello(TrafficClass.CONTROL, instance, nonce,
                Handshake.NO_SESSION, true, credential).encode()).credential(), "the credential round-trips");
        ByteBuffer huge = with(hello, hello.limit() - 2, (byte) 0x7f); // announces 32 KiB of credential
        assertMalformed("credential: ", () -> Handshake.Hello.decode(huge));
        assertMalformed("mac: needs 32 bytes", () -> Handshake.Challenge.decode(ByteBuffer.wrap(nonce)));
        assertMalformed("mac: needs 32 bytes", () -> Handshake.Proof.decode(ByteBuffer.wrap(nonce)));
    }

    @Test
    void corruptShortOrForeignFramesAreRefusedWithTheCodecsError() {
        ByteBuffer good = new ControlFrame(Type.REQUEST, 9, ByteBuffer.wrap(new byte[] {5})).encode();
        assertMalformed("crc32c: mismatch", () -> ControlFrame.decode(with(good, 5, (byte) 0x55)));
        assertMalformed("crc32c: a control message has at least", () -> ControlFrame.decode(ByteBuffer.allocate(3)));
        assertMalformed("requestId: needs 8 bytes", () -> ControlFrame.decode(checksummed(new byte[] {(byte) ControlFrame.VERSION, 0x06, 0, 0})));
        assertMalformed("type: unknown control message id 0", () -> ControlFrame.decode(checksummed(new byte[] {(byte) ControlFrame.VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0})));
        UnsupportedVersionException e = assertThrows(UnsupportedVersionException.class,
                () -> ControlFrame.decode(checksummed(new byte[] {(byte) (ControlFrame.VERSION + 1), 0x01, 0, 0, 0, 0, 0, 0, 0, 0})));
        assertEquals("version: unsupported control version " + (ControlFrame.VERSION + 1) + ", this build speaks "
                + ControlFrame.VERSION, e.getMessage());
    }

    @Test
    void fuzzedFramesAndPayloadsOnlyEverThrowMalformedMessageException() {
        Random random = new Random(20250611);
        List<ByteBuffer> seeds = new ArrayList<>();
        for (Type type : Type.values()) {
            byte[] payload = new byte[random.nextInt(40)];
            random.nextBytes(payload);
            seeds.add(new ControlFrame(type, random.nextLong(), ByteBuffer.wrap(payload)).encode());
        }
        seeds.add(new Handshake.Hello(TrafficClass.CONTROL, UUID.randomUUID(), Auth.nonce(), true).encode());
        seeds.add(new Handshake.Challenge(Auth.nonce(), new byte[Auth.MAC_BYTES]).encode());
        seeds.add(ControlFrame.withReason(Type.ERROR, 1, "no such block").payload());
        int decoded = 0;
        for (int round = 0; round < 10_000; round++) {
            ByteBuffer input = WireFuzz.mutation(random, seeds, round, 64);
            decoded += WireFuzz.decodes(() -> ControlFrame.decode(input.duplicate()));
            decoded += WireFuzz.decodes(() -> Handshake.Hello.decode(input));
            decoded += WireFuzz.decodes(() -> Handshake.Challenge.decode(input));
            decoded += WireFuzz.decodes(() -> Handshake.Proof.decode(input));
            decoded += WireFuzz.decodes(() -> new ControlFrame(Type.ERROR, 0, input).reason());
        }
        assertTrue(decoded > 0, "some inputs (whole payloads, untouched tails) still decode");
    }

    /** A peer of another build: the server says why and closes that channel only, and goes on serving. */
    @Test
    void aFrameOfAnotherVersionIsRejectedAndOnlyThatChannelCloses() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), PolicyFixture.echo())) {
            f.server.markReady();
            CompletableFuture<String> rejected = new CompletableFuture<>();
            CompletableFuture<Void> closed = new CompletableFuture<>();
            Channel foreign = f.clientNode.connect(f.serverNode.localAddress(), 4, new ChannelHandler() {
                @Override
                public void onMessage(Channel channel, ByteBuffer message) {
                    ControlFrame frame = ControlFrame.decode(message);
                    rejected.complete(frame.type() == Type.REJECT ? frame.reason() : "got " + frame.type());
                }

                @Override
                public void onClosed(Channel channel, TransportException cause) {
                    closed.complete(null);
                }
            }).get(30, TimeUnit.SECONDS);
            ByteBuffer hello = new ControlFrame(Type.HELLO, 0,
                    new Handshake.Hello(TrafficClass.CONTROL, UUID.randomUUID(), Auth.nonce(), false).encode()).encode();
            byte[] bytes = new byte[hello.remaining()];
            hello.get(bytes);
            bytes[0] = (byte) (ControlFrame.VERSION + 1);
            foreign.send(checksummed(java.util.Arrays.copyOf(bytes, bytes.length - 4)));
            assertEquals("version: unsupported control version " + (ControlFrame.VERSION + 1) + ", this build speaks "
                    + ControlFrame.VERSION, rejected.get(30, TimeUnit.SECONDS));
            closed.get(30, TimeUnit.SECONDS);
            assertEquals(7, f.peer().request(ByteBuffer.wrap(new byte[] {7})).get(30, TimeUnit.SECONDS).get(0),
                    "the server goes on serving everyone else");
            assertEquals(0, f.serverMetrics.registry().counter("rdma.control.dropped").getCount(), "refused, not dropped");
        }
    }

    private static void assertMalformed(String prefix, Runnable decode) {
        MalformedMessageException e = assertThrows(MalformedMessageException.class, decode::run);
        assertInstanceOf(IllegalArgumentException.class, e, "what the callers already handle");
        assertTrue(e.getMessage().startsWith(prefix), "'" + e.getMessage() + "' should start with '" + prefix + "'");
    }

    private static ByteBuffer with(ByteBuffer original, int index, byte value) {
        ByteBuffer copy = ByteBuffer.allocate(original.remaining()).put(original.duplicate()).flip();
        return copy.put(index, value);
    }

    /** {@code body} followed by its CRC32C: a frame that is intact whatever it says. */
    private static ByteBuffer checksummed(byte[] body) {
        CRC32C crc = new CRC32C();
        crc.update(body);
        return ByteBuffer.allocate(body.length + 4).put(body).putInt((int) crc.getValue()).flip();
    }
}

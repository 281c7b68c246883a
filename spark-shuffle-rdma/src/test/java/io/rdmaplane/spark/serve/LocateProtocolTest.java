package io.rdmaplane.spark.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.Protocol;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.testing.WireFuzz;
import io.rdmaplane.spark.serve.LocateProtocol.BlockRef;
import io.rdmaplane.spark.serve.LocateProtocol.Inline;
import io.rdmaplane.spark.serve.LocateProtocol.Location;
import io.rdmaplane.spark.serve.LocateProtocol.Read;
import io.rdmaplane.spark.serve.LocateProtocol.Request;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

class LocateProtocolTest {
    @Test
    void testRequestRoundTrip() {
        Request request = new Request(7, List.of(new BlockRef(0, 0), new BlockRef(Long.MAX_VALUE, 1999), new BlockRef(42, 3)));
        ByteBuffer encoded = LocateProtocol.encodeRequest(request);
        assertEquals(LocateProtocol.requestBytes(3), encoded.remaining());
        assertEquals(LocateProtocol.VERSION, encoded.get(0));
        assertEquals(LocateProtocol.Type.LOCATE.wireId(), encoded.get(1));
        assertEquals(request, LocateProtocol.decodeRequest(encoded));
        assertEquals(0, encoded.position(), "decoding does not move the caller's buffer");
    }

    @Test
    void testResponseRoundTripWithEveryKind() {
        List<Location> located = List.of(read(0x1000_0000_0000L, -5, 1, 0, 1, 0), LocateProtocol.NOT_SERVED,
                read(-1L, 17, 1 << 30, -123456, LocateProtocol.MAX_HEADER_BYTES, LocateProtocol.MAX_TRAILER_BYTES),
                new Inline(bytes(300, 7)), LocateProtocol.DEFERRED);
        ByteBuffer encoded = LocateProtocol.encodeResponse(located);
        assertEquals(Protocol.HEADER_BYTES + 4 + (1 + 4 + 1 + 4 + 0 + 20) + 1
                + (1 + 4 + LocateProtocol.MAX_HEADER_BYTES + 4 + LocateProtocol.MAX_TRAILER_BYTES + 20) + (1 + 4 + 300) + 1,
                encoded.remaining());
        assertEquals(LocateProtocol.responseBytes(located), encoded.remaining());
        assertEquals(located, LocateProtocol.decodeResponse(encoded, 5));
        assertEquals(0, encoded.position(), "decoding does not move the caller's buffer");
    }

    @Test
    void testFramingOverItsBoundIsRefusedOnBothSides() {
        assertThrows(IllegalArgumentException.class, () -> read(1, 2, 3, 4, LocateProtocol.MAX_HEADER_BYTES + 1, 0));
        assertThrows(IllegalArgumentException.class, () -> read(1, 2, 3, 4, 0, LocateProtocol.MAX_TRAILER_BYTES + 1));
        assertThrows(IllegalArgumentException.class, () -> new Inline(ByteBuffer.allocate(0)));
        assertThrows(IllegalArgumentException.class, () -> new Inline(ByteBuffer.allocate(LocateProtocol.MAX_INLINE_BYTES + 1)));
        assertThrows(IllegalArgumentException.class, () -> read(1, 2, Integer.MAX_VALUE - 4000, 4, 2048, 64));
    }

    @Test
    void testMalformedMessagesNameTheField() {
        // Offsets are past the codec's header: version at 0, type at 1.
        int h = Protocol.HEADER_BYTES;
        ByteBuffer good = LocateProtocol.encodeRequest(new Request(1, List.of(new BlockRef(5, 6))));
        assertField("version", () -> LocateProtocol.decodeRequest(ByteBuffer.allocate(0)));
        assertField("version", () -> LocateProtocol.decodeRequest(copyWith(good, 0, (byte) 1)));
        assertField("type", () -> LocateProtocol.decodeRequest(copyWith(good, 1, (byte) 3)));
        assertField("type", () -> LocateProtocol.decodeRequest(copyWith(good, 1, (byte) LocateProtocol.Type.LOCATED.wireId())));
        assertField("count", () -> LocateProtocol.decodeRequest(withInt(good, h + 4, 0)));
        assertField("count", () -> LocateProtocol.decodeRequest(withInt(good, h + 4, LocateProtocol.MAX_BLOCKS + 1)));
        assertField("count", () -> LocateProtocol.decodeRequest(withInt(good, h + 4, 2)));
        assertField("shuffleId", () -> LocateProtocol.decodeRequest(withInt(good, h, -1)));
        assertField("mapId", () -> LocateProtocol.decodeRequest(copyWith(good, h + 8, (byte) 0x80)));
        assertField("reduceId", () -> LocateProtocol.decodeRequest(copyWith(good, h + 16, (byte) 0x80)));
        assertField("count", () -> LocateProtocol.decodeRequest(concat(good, new byte[1])));

        ByteBuffer answer = LocateProtocol.encodeResponse(List.of(read(1, 2, 3, 4, 5, 6)));
        int header = h + 4 + 1; // the header's length
        int trailer = header + 4 + 5;
        int payload = trailer + 4 + 6;
        assertField("type", () -> LocateProtocol.decodeResponse(good, 1));
        assertField("count", () -> LocateProtocol.decodeResponse(answer, 2));
        assertField("kind of block 0", () -> LocateProtocol.decodeResponse(copyWith(answer, h + 4, (byte) 4), 1));
        assertField("kind of block 0", () -> LocateProtocol.decodeResponse(copyWith(answer, h + 4, (byte) -1), 1));
        assertField("header of block 0", () -> LocateProtocol.decodeResponse(withInt(answer, header, -1), 1));
        assertField("header of block 0", () -> LocateProtocol.decodeResponse(withInt(answer, header,
                LocateProtocol.MAX_HEADER_BYTES + 1), 1));
        assertField("header of block 0", () -> LocateProtocol.decodeResponse(withInt(answer, header, 1000), 1));
        assertField("trailer of block 0", () -> LocateProtocol.decodeResponse(withInt(answer, trailer,
                LocateProtocol.MAX_TRAILER_BYTES + 1), 1));
        assertField("trailer of block 0", () -> LocateProtocol.decodeResponse(withInt(answer, trailer, Integer.MIN_VALUE), 1));
        assertField("length of payload of block 0", () -> LocateProtocol.decodeResponse(withInt(answer, payload + 8 + 4, 0), 1));
        assertField("length of block 0", () -> LocateProtocol.decodeResponse(withInt(answer, payload + 8 + 4,
                Integer.MAX_VALUE - 4000), 1));
        assertField("location of payload of block 0", () -> LocateProtocol.decodeResponse(answer.duplicate()
                .limit(payload + 10), 1));
        assertField("count", () -> LocateProtocol.decodeResponse(concat(answer, new byte[] {0}), 1));

        ByteBuffer inline = LocateProtocol.encodeResponse(List.of(new Inline(bytes(10, 1))));
        assertField("inline block 0", () -> LocateProtocol.decodeResponse(withInt(inline, h + 4 + 1, 0), 1));
        assertField("inline block 0", () -> LocateProtocol.decodeResponse(withInt(inline, h + 4 + 1, 11), 1));
        assertField("inline block 0", () -> LocateProtocol.decodeResponse(withInt(inline, h + 4 + 1,
                LocateProtocol.MAX_INLINE_BYTES + 1), 1));
        assertField("inline block 0", () -> LocateProtocol.decodeResponse(withInt(inline, h + 4 + 1, -7), 1));

    }

    @Test
    void testFuzzedBytesOnlyEverThrowMalformedMessageException() {
        Random random = new Random(20240605);
        List<ByteBuffer> seeds = new ArrayList<>();
        for (int n : new int[] {1, 2, 17, LocateProtocol.MAX_BLOCKS}) {
            List<BlockRef> blocks = new ArrayList<>();
            List<Location> located = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                blocks.add(new BlockRef(random.nextLong() & Long.MAX_VALUE, random.nextInt(Integer.MAX_VALUE)));
                located.add(switch (random.nextInt(4)) {
                    case 0 -> LocateProtocol.NOT_SERVED;
                    case 1 -> LocateProtocol.DEFERRED;
                    case 2 -> new Inline(bytes(1 + random.nextInt(40), random.nextInt()));
                    default -> read(random.nextLong(), random.nextInt(), 1 + random.nextInt(1 << 29), random.nextInt(),
                            random.nextInt(40), random.nextInt(16));
                });
            }
            seeds.add(LocateProtocol.encodeRequest(new Request(random.nextInt(1000), blocks)));
            seeds.add(LocateProtocol.encodeResponse(located));
        }
        int decoded = 0;
        for (int round = 0; round < 6_000; round++) {
            ByteBuffer input;
            int kind = round % 4;
            if (kind == 0) { // random bytes, sometimes with a plausible head
                byte[] bytes = new byte[random.nextInt(64)];
                random.nextBytes(bytes);
                if (bytes.length > 1 && random.nextBoolean()) {
                    bytes[0] = LocateProtocol.VERSION;
                    bytes[1] = (byte) LocateProtocol.Type.values()[random.nextInt(2)].wireId();
                }
                input = ByteBuffer.wrap(bytes);
            } else {
                ByteBuffer seed = seeds.get(random.nextInt(seeds.size()));
                byte[] bytes = new byte[seed.remaining()];
                seed.duplicate().get(bytes);
                if (kind == 1) { // truncation
                    input = ByteBuffer.wrap(bytes, 0, random.nextInt(bytes.length + 1)).slice();
                } else if (kind == 2) { // bit flips
                    for (int f = 0; f < 1 + random.nextInt(3); f++) {
                        int at = random.nextInt(Math.min(bytes.length, 64));
                        bytes[at] ^= (byte) (1 << random.nextInt(8));
                    }
                    input = ByteBuffer.wrap(bytes);
                } else { // random tail
                    byte[] longer = new byte[bytes.length + random.nextInt(30)];
                    System.arraycopy(bytes, 0, longer, 0, bytes.length);
                    for (int i = bytes.length; i < longer.length; i++) {
                        longer[i] = (byte) random.nextInt();
                    }
                    input = ByteBuffer.wrap(longer);
                }
            }
            decoded += WireFuzz.decodes(() -> LocateProtocol.decodeRequest(input));
            int expected = random.nextInt(3) == 0 ? 1 + random.nextInt(LocateProtocol.MAX_BLOCKS)
                    : input.remaining() >= Protocol.HEADER_BYTES + 4 ? input.getInt(Protocol.HEADER_BYTES) : 1;
            decoded += WireFuzz.decodes(() -> LocateProtocol.decodeResponse(input, expected));
        }
        assertTrue(decoded > 0, "some fuzzed inputs (e.g. untouched tails of valid messages) still decode");
    }

    private static Read read(long address, int rkey, int length, int crc32c, int headerBytes, int trailerBytes) {
        return new Read(bytes(headerBytes, 0x11), new RemoteBlock(address, rkey, length, crc32c), bytes(trailerBytes, 0x22));
    }

    private static ByteBuffer bytes(int n, int seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return ByteBuffer.wrap(b);
    }

    private static void assertField(String field, Runnable decode) {
        MalformedMessageException e = assertThrows(MalformedMessageException.class, decode::run);
        assertTrue(e.getMessage().startsWith(field), "'" + e.getMessage() + "' should name " + field);
    }

    private static ByteBuffer copyWith(ByteBuffer original, int index, byte value) {
        return mutate(original, b -> b.put(index, value));
    }

    private static ByteBuffer withInt(ByteBuffer original, int index, int value) {
        return mutate(original, b -> b.putInt(index, value));
    }

    private static ByteBuffer mutate(ByteBuffer original, Consumer<ByteBuffer> change) {
        ByteBuffer copy = ByteBuffer.allocate(original.remaining()).put(original.duplicate()).flip();
        change.accept(copy);
        return copy;
    }

    private static ByteBuffer concat(ByteBuffer original, byte[] more) {
        return ByteBuffer.allocate(original.remaining() + more.length).put(original.duplicate()).put(more).flip();
    }
}

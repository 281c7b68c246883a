package io.rdmaplane.rdma.codec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

class CodecTest {
    enum Kind {
        ALPHA, BETA
    }

    /** Ids far from the ordinals, so a codec that wrote ordinals would fail these tests. */
    private static final Protocol<Kind> PLAIN = Protocol.of("test", 2, Kind.class, k -> switch (k) {
        case ALPHA -> 0x51;
        case BETA -> 0x52;
    });
    private static final Protocol<Kind> CHECKED = Protocol.checksummed("checked", 7, Kind.class, k -> switch (k) {
        case ALPHA -> 0x61;
        case BETA -> 0x62;
    });
    private static final WireIds<Kind> FIELD_IDS = WireIds.of(Kind.class, "kind", k -> k == Kind.ALPHA ? 200 : 3);

    record Block(long address, int rkey, int length, int crc32c) {
    }

    /** One message with a field of every kind. */
    private static ByteBuffer everything(Protocol<Kind> protocol) {
        return protocol.write(Kind.BETA).u8(255).bool(true).bool(false).u16(65535).i32(-7).i64(Long.MIN_VALUE).i32(3)
                .id(FIELD_IDS, Kind.ALPHA).fixed(new byte[] {9, 8, 7}).string("name", "exécuteur €𝄞", 64)
                .string("empty", "", 0).bytes("token", new byte[] {1, 2}, 2).remoteBlock(-1L, 0xCAFE, 300, -5)
                .rest(ByteBuffer.wrap(new byte[] {42, 43})).finish();
    }

    private static void readEverything(MessageReader<?> r) {
        assertEquals(255, r.u8("u8"));
        assertTrue(r.bool("yes"));
        assertFalse(r.bool("no"));
        assertEquals(65535, r.u16("u16"));
        assertEquals(-7, r.i32("i32"));
        assertEquals(Long.MIN_VALUE, r.i64("i64"));
        assertEquals(3, r.count("count", 0, 3));
        assertEquals(Kind.ALPHA, r.id("kind", FIELD_IDS));
        assertArrayEquals(new byte[] {9, 8, 7}, r.fixed("fixed", 3));
        assertEquals("exécuteur €𝄞", r.string("name", 64));
        assertEquals("", r.string("empty", 0));
        assertArrayEquals(new byte[] {1, 2}, r.bytes("token", 2));
        assertEquals(new Block(-1L, 0xCAFE, 300, -5), r.remoteBlock("block", 300, Block::new));
        assertEquals(ByteBuffer.wrap(new byte[] {42, 43}), r.rest());
        assertEquals(0, r.remaining());
        r.end();
    }

    @Test
    void everyPrimitiveRoundTripsInBothForms() {
        for (Protocol<Kind> protocol : List.of(PLAIN, CHECKED)) {
            ByteBuffer message = everything(protocol);
            assertEquals(protocol.version(), message.get(0), "the version comes first");
            assertEquals(protocol.wireId(Kind.BETA), message.get(1), "then the explicit id, not the ordinal");
            MessageReader<Kind> r = protocol.read(message, Kind.BETA);
            assertEquals(Kind.BETA, r.type());
            readEverything(r);
            assertEquals(0, message.position(), "decoding does not move the caller's buffer");
        }
        assertEquals(PLAIN.overhead() + 4, CHECKED.overhead(), "a CRC32C of 4 bytes");
        ByteBuffer body = MessageWriter.body().u16(5).finish();
        assertEquals(2, body.remaining(), "a body has no header");
        MessageReader<Void> r = MessageReader.body("test BODY", body);
        assertNull(r.type());
        assertEquals(5, r.u16("u16"));
        r.end();
    }

    @Test
    void anotherVersionIsRefusedNamingBoth() {
        ByteBuffer message = PLAIN.write(Kind.ALPHA).finish();
        message.put(0, (byte) 3);
        UnsupportedVersionException e = assertThrows(UnsupportedVersionException.class, () -> PLAIN.read(message));
        assertEquals("version: unsupported test version 3, this build speaks 2", e.getMessage());
        ByteBuffer checked = reChecksummed(CHECKED.write(Kind.ALPHA).finish(), b -> b.put(0, (byte) 1));
        assertEquals("version: unsupported checked version 1, this build speaks 7",
                assertThrows(UnsupportedVersionException.class, () -> CHECKED.read(checked)).getMessage());
    }

    @Test
    void anUnknownIdIsRefusedNamingTheIdAndTheMessage() {
        ByteBuffer message = ByteBuffer.wrap(new byte[] {2, 0x01});
        assertEquals("type: unknown test message id 1 (this build knows ALPHA=81, BETA=82)",
                assertThrows(MalformedMessageException.class, () -> PLAIN.read(message)).getMessage());
        assertEquals("type: expected a test ALPHA message, was BETA",
                assertThrows(MalformedMessageException.class, () -> PLAIN.read(PLAIN.write(Kind.BETA).finish(), Kind.ALPHA))
                        .getMessage());
        ByteBuffer field = PLAIN.write(Kind.ALPHA).u8(4).finish();
        assertEquals("kind: unknown kind id 4 (this build knows BETA=3, ALPHA=200)",
                assertThrows(MalformedMessageException.class, () -> PLAIN.read(field).id("kind", FIELD_IDS)).getMessage());
    }

    @Test
    void wireIdsMustBeBytesAndDistinct() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> WireIds.of(Kind.class, "kind", k -> 7)).getMessage()
                .contains("wire id 7 is ALPHA's already"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> WireIds.of(Kind.class, "kind", k -> 256)).getMessage()
                .contains("not in 0..255"));
    }

    @Test
    void lengthsOverTheirBoundAreRefusedBeforeAnythingIsAllocated() {
        // Each length below is far larger than the message: the bound is named, not the shortage.
        assertMalformed("name: 65535 bytes is more than the 64-byte bound",
                PLAIN.write(Kind.ALPHA).u16(65535).finish(), r -> r.string("name", 64));
        assertMalformed("token: 2147483647 bytes is more than the 1024-byte bound",
                PLAIN.write(Kind.ALPHA).i32(Integer.MAX_VALUE).finish(), r -> r.bytes("token", 1024));
        assertMalformed("token: a length of -1 bytes", PLAIN.write(Kind.ALPHA).i32(-1).finish(), r -> r.bytes("token", 1024));
        assertMalformed("count: must be 1..512, was 100000", PLAIN.write(Kind.ALPHA).i32(100_000).finish(),
                r -> r.count("count", 1, 512));
        assertMalformed("length of block: must be 1..4096, was 4097", PLAIN.write(Kind.ALPHA).remoteBlock(1, 2, 4097, 3).finish(),
                r -> r.remoteBlock("block", 4096, Block::new));
        assertMalformed("length of block: must be 1..4096, was 0", PLAIN.write(Kind.ALPHA).remoteBlock(1, 2, 0, 3).finish(),
                r -> r.remoteBlock("block", 4096, Block::new));
        assertMalformed("flag: expected 0 or 1, was 2", PLAIN.write(Kind.ALPHA).u8(2).finish(), r -> r.bool("flag"));
        assertMalformed("name: is not valid UTF-8", PLAIN.write(Kind.ALPHA).u16(2).fixed(new byte[] {(byte) 0xC3, 0x28}).finish(),
                r -> r.string("name", 64));
        assertMalformed("trailing: 1 bytes after the test ALPHA message", PLAIN.write(Kind.ALPHA).u8(0).finish(), MessageReader::end);
    }

    @Test
    void everyTruncationIsRefusedNamingAField() {
        for (Protocol<Kind> protocol : List.of(PLAIN, CHECKED)) {
            ByteBuffer message = everything(protocol);
            for (int cut = 0; cut < message.limit() - 2; cut++) { // the last 2 bytes are the free-length rest (or the CRC)
                ByteBuffer shorter = message.duplicate().limit(cut);
                MalformedMessageException e = assertThrows(MalformedMessageException.class,
                        () -> readEverything(protocol.read(shorter)), protocol.name() + " cut at " + cut);
                assertTrue(e.getMessage().matches("^[a-z][\\w ]*: .*"), e.getMessage());
            }
        }
        assertEquals("version: needs 1 bytes, 0 remain",
                assertThrows(MalformedMessageException.class, () -> PLAIN.read(ByteBuffer.allocate(0))).getMessage());
        assertEquals("crc32c: a checked message has at least 6 bytes, this one 5",
                assertThrows(MalformedMessageException.class, () -> CHECKED.read(ByteBuffer.allocate(5))).getMessage());
    }

    @Test
    void everyFlippedBitOfAChecksummedMessageIsCaught() {
        ByteBuffer message = everything(CHECKED);
        for (int bit = 0; bit < message.limit() * 8; bit++) {
            int at = bit;
            ByteBuffer flipped = copy(message, b -> b.put(at / 8, (byte) (b.get(at / 8) ^ (1 << (at % 8)))));
            MalformedMessageException e = assertThrows(MalformedMessageException.class, () -> CHECKED.read(flipped));
            assertTrue(e.getMessage().startsWith("crc32c: mismatch on a " + message.limit() + "-byte checked message"),
                    e.getMessage());
        }
    }

    @Test
    void writersRefuseValuesThatDoNotFit() {
        assertThrows(IllegalArgumentException.class, () -> MessageWriter.body().u8(256));
        assertThrows(IllegalArgumentException.class, () -> MessageWriter.body().u16(-1));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> MessageWriter.body().string("host", "é".repeat(3), 5))
                .getMessage().startsWith("host: 6 bytes of UTF-8 is more than the 5-byte bound"));
        assertThrows(IllegalArgumentException.class, () -> MessageWriter.body().bytes("token", new byte[3], 2));
        assertEquals("ab", MessageWriter.truncated("abé", 3), "cut between characters, never inside one");
        assertEquals("abé", MessageWriter.truncated("abé", 4));
        assertEquals("", MessageWriter.truncated("𝄞", 3));
        MessageWriter done = MessageWriter.body();
        done.finish();
        assertThrows(IllegalStateException.class, () -> done.u8(1));
        // A writer grows past its first buffer.
        byte[] big = new byte[100_000];
        new Random(1).nextBytes(big);
        MessageReader<Kind> r = PLAIN.read(PLAIN.write(Kind.ALPHA).bytes("big", big, big.length).finish());
        assertArrayEquals(big, r.bytes("big", big.length));
    }

    /** Random bytes and mutations of valid messages, read with every kind of field: only the codec's error comes out. */
    @Test
    void fuzzedInputOnlyEverThrowsMalformedMessageException() {
        Random random = new Random(20250610);
        List<ByteBuffer> seeds = new ArrayList<>(List.of(everything(PLAIN), everything(CHECKED)));
        int decoded = 0;
        for (int round = 0; round < 20_000; round++) {
            byte[] bytes;
            int kind = round % 4;
            if (kind == 0) {
                bytes = new byte[random.nextInt(80)];
                random.nextBytes(bytes);
                if (bytes.length > 1 && random.nextBoolean()) {
                    bytes[0] = 2;
                    bytes[1] = 0x52;
                }
            } else {
                ByteBuffer seed = seeds.get(random.nextInt(seeds.size()));
                bytes = new byte[seed.remaining()];
                seed.duplicate().get(bytes);
                if (kind == 1) {
                    bytes = java.util.Arrays.copyOf(bytes, random.nextInt(bytes.length + 1));
                } else if (kind == 2) {
                    for (int f = 0; f < 1 + random.nextInt(3); f++) {
                        bytes[random.nextInt(bytes.length)] ^= (byte) (1 + random.nextInt(255));
                    }
                } else {
                    byte[] longer = java.util.Arrays.copyOf(bytes, bytes.length + random.nextInt(30));
                    for (int i = bytes.length; i < longer.length; i++) {
                        longer[i] = (byte) random.nextInt();
                    }
                    bytes = longer;
                }
            }
            ByteBuffer input = ByteBuffer.wrap(bytes);
            for (Protocol<Kind> protocol : List.of(PLAIN, CHECKED)) {
                try {
                    readFields(protocol.read(input));
                    decoded++;
                } catch (MalformedMessageException expected) {
                    assertTrue(expected.getMessage().contains(": "), expected.getMessage());
                } catch (RuntimeException e) {
                    fail("decoding threw " + e + " instead of MalformedMessageException", e);
                }
            }
        }
        assertTrue(decoded > 0, "some fuzzed inputs (untouched prefixes of valid messages with random tails) still decode");
    }

    /** Reads everything's fields without asserting their values. */
    private static void readFields(MessageReader<Kind> r) {
        r.u8("u8");
        r.bool("yes");
        r.bool("no");
        r.u16("u16");
        r.i32("i32");
        r.i64("i64");
        r.count("count", 0, 3);
        r.id("kind", FIELD_IDS);
        r.fixed("fixed", 3);
        r.string("name", 64);
        r.string("empty", 0);
        r.bytes("token", 2);
        r.remoteBlock("block", 300, Block::new);
        r.rest();
    }

    private static void assertMalformed(String message, ByteBuffer input, Consumer<MessageReader<Kind>> read) {
        MalformedMessageException e = assertThrows(MalformedMessageException.class, () -> read.accept(PLAIN.read(input)));
        assertEquals(message, e.getMessage());
    }

    private static ByteBuffer copy(ByteBuffer original, Consumer<ByteBuffer> change) {
        ByteBuffer copy = ByteBuffer.allocate(original.remaining()).put(original.duplicate()).flip();
        change.accept(copy);
        return copy;
    }

    /** {@code change} applied to a checksummed message, with its CRC32C made to match again. */
    private static ByteBuffer reChecksummed(ByteBuffer original, Consumer<ByteBuffer> change) {
        ByteBuffer copy = copy(original, change);
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(copy.duplicate().limit(copy.limit() - 4));
        copy.putInt(copy.limit() - 4, (int) crc.getValue());
        return copy;
    }
}

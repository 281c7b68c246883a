package io.rdmaplane.rdma.format;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import io.rdmaplane.rdma.testing.HostileSchema;
import org.apache.arrow.flatbuf.Type;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ArrowBlockTest {
    private static final Map<String, String> KEY = Map.of("spark.shuffle.id", "3", "spark.map.id", "17", "spark.partition.id", "5");
    private final BufferAllocator allocator = new RootAllocator();

    @AfterEach
    void noLeaks() {
        allocator.close(); // fails if the writer kept a buffer
    }

    @ParameterizedTest(name = "payload of {0} bytes")
    @ValueSource(ints = {0, 1, 999, 1000, 1001, 3005})
    void aBlockDecodesInPlaceToItsPayloadAndMetadata(int size) throws Exception {
        byte[] payload = random(size, size);
        byte[] block = write(payload, 1000, true);
        assertTrue(block.length <= ArrowBlock.maxFramedSize(size, KEY), block.length + " bytes of framing exceed the bound");
        ByteBuffer segment = ByteBuffer.wrap(block);
        ArrowBlock.Block decoded = ArrowBlock.read(segment, true);
        assertArrayEquals(payload, concat(decoded));
        assertEquals(size, decoded.payloadLength());
        assertEquals("17", decoded.metadata().get("spark.map.id"));
        assertEquals(Integer.toString(size), decoded.metadata().get(ArrowBlock.LENGTH_KEY));
        for (ByteBuffer part : decoded.payload()) {
            assertSame(block, part.array(), "payload views share the segment's memory: no copy");
        }
        assertEquals(0, segment.position(), "reading leaves the caller's buffer alone");
    }

    /** The warm-up an executor runs at start frames, writes and decodes a block, and keeps no Arrow memory (noLeaks). */
    @Test
    void theWarmUpRunsEveryCodecPathAndKeepsNoArrowMemory() throws Exception {
        ArrowBlock.warmUp(allocator);
        assertEquals(0, allocator.getAllocatedMemory());
    }

    @Test
    void aDirectPayloadIsWrittenFromWhereItLies() throws Exception {
        byte[] payload = random(5000, 1);
        ByteBuffer direct = ByteBuffer.allocateDirect(payload.length + 10).position(10);
        direct.put(payload).position(10);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ArrowBlock.write(KEY, direct, Channels.newChannel(out), allocator);
        assertEquals(10, direct.position());
        assertArrayEquals(payload, concat(ArrowBlock.read(ByteBuffer.wrap(out.toByteArray()), true)));
    }

    @ParameterizedTest(name = "payload of {0} bytes")
    @ValueSource(ints = {1, 7, 8, 4096, 1_000_003})
    void framingAroundThePayloadIsExactlyWhatWriteProduces(int size) throws Exception {
        byte[] payload = random(size, size + 7);
        ByteBuffer direct = ByteBuffer.allocateDirect(size + 3).position(3);
        direct.put(payload).position(3);
        ByteArrayOutputStream whole = new ByteArrayOutputStream();
        ArrowBlock.write(KEY, direct, Channels.newChannel(whole), allocator);

        ArrowBlock.Framing framing = ArrowBlock.frame(KEY, direct, allocator);
        assertEquals(3, direct.position(), "framing leaves the payload's position alone");
        ByteBuffer gathered = ByteBuffer.allocate(framing.header().remaining() + size + framing.trailer().remaining());
        gathered.put(framing.header().duplicate()).put(payload).put(framing.trailer().duplicate()).flip();
        assertArrayEquals(whole.toByteArray(), gathered.array(), "header + payload + trailer = the written block");
        assertArrayEquals(payload, concat(ArrowBlock.read(gathered, true)));
    }

    @Test
    void anyArrowIpcReaderOpensABlock() throws Exception {
        byte[] payload = random(2500, 2);
        byte[] block = write(payload, 1000, false);
        try (ArrowStreamReader reader = new ArrowStreamReader(new ByteArrayInputStream(block), allocator)) {
            VectorSchemaRoot root = reader.getVectorSchemaRoot();
            assertEquals("17", root.getSchema().getCustomMetadata().get("spark.map.id"));
            ByteArrayOutputStream rows = new ByteArrayOutputStream();
            int batches = 0;
            while (reader.loadNextBatch()) {
                batches++;
                VarBinaryVector column = (VarBinaryVector) root.getVector(ArrowBlock.PAYLOAD_FIELD);
                assertEquals(3, root.getRowCount(), "1000-byte rows");
                for (int i = 0; i < root.getRowCount(); i++) {
                    rows.write(column.get(i));
                }
            }
            assertEquals(1, batches);
            assertArrayEquals(payload, rows.toByteArray());
        }
    }

    @Test
    void aFlippedPayloadBitIsCaughtWhenVerifiedAndOnlyThen() throws Exception {
        byte[] payload = random(4000, 3);
        byte[] block = write(payload, 1000, false);
        int at = indexOf(block, Arrays.copyOfRange(payload, 2000, 2016)) + 5;
        block[at] ^= 0x08;
        CorruptBlockException e = assertThrows(CorruptBlockException.class, () -> ArrowBlock.read(ByteBuffer.wrap(block), true));
        assertTrue(e.getMessage().contains("CRC32C"), e.getMessage());
        // Unverified (not sampled) reads decode it: sampling is the caller's choice.
        assertEquals(4000, ArrowBlock.read(ByteBuffer.wrap(block), false).payloadLength());
    }

    @Test
    void truncatedBlocksAndForeignBytesAreCorruptNotCrashes() throws Exception {
        byte[] block = write(random(3000, 4), 1000, false);
        for (int cut = 0; cut < block.length; cut += 7) {
            byte[] truncated = Arrays.copyOf(block, cut);
            assertThrows(CorruptBlockException.class, () -> ArrowBlock.read(ByteBuffer.wrap(truncated), true), "cut at " + cut);
        }
        assertThrows(CorruptBlockException.class, () -> ArrowBlock.read(ByteBuffer.wrap("PAR1 not arrow".getBytes()), false));
        byte[] hugeLength = {-1, -1, -1, -1, (byte) 0xF8, -1, -1, 0x7F};
        assertThrows(CorruptBlockException.class, () -> ArrowBlock.read(ByteBuffer.wrap(hugeLength), false));
    }

    @Test
    void fuzzedBlocksEitherDecodeIntactOrAreRejectedCleanly() throws Exception {
        byte[] payload = random(3000, 5);
        byte[] block = write(payload, 1000, false);
        Random random = new Random(6);
        int rejected = 0;
        for (int round = 0; round < 3000; round++) {
            byte[] mutated = block.clone();
            for (int flips = 1 + random.nextInt(4); flips > 0; flips--) {
                mutated[random.nextInt(mutated.length)] = (byte) random.nextInt(256);
            }
            try {
                ArrowBlock.Block decoded = ArrowBlock.read(ByteBuffer.wrap(mutated), true);
                assertArrayEquals(payload, concat(decoded), "a verified block is the original payload or an error");
            } catch (CorruptBlockException e) {
                rejected++;
            }
        }
        for (int round = 0; round < 500; round++) {
            byte[] garbage = random(random.nextInt(600), round);
            if (garbage.length >= 4) {
                garbage[0] = garbage[1] = garbage[2] = garbage[3] = -1; // looks like an IPC message start
            }
            try {
                ArrowBlock.read(ByteBuffer.wrap(garbage), true);
            } catch (CorruptBlockException e) {
                rejected++;
            }
        }
        assertTrue(rejected > 500, "most mutations must be caught: " + rejected);
    }

    /** The schema we write, rebuilt by hand: the baseline every hostile variant below differs from in one thing. */
    @Test
    void theOneSchemaWeWriteRebuiltByHandDecodes() throws Exception {
        byte[] payload = random(2500, 7);
        byte[] block = HostileSchema.replaceSchema(write(payload, 1000, false), new HostileSchema().message(KEY, payload));
        assertArrayEquals(payload, concat(ArrowBlock.read(ByteBuffer.wrap(block), true)));
    }

    /**
     * A field that lists itself as its child sent Arrow's schema conversion (recursive) into a
     * StackOverflowError; it and every other schema than the one we write are a CorruptBlockException,
     * found on the flatbuffer before Arrow converts anything.
     */
    @Test
    void aSelfNestingSchemaAndEveryOtherForeignSchemaAreCorrupt() throws Exception {
        byte[] payload = random(2500, 8);
        byte[] block = write(payload, 1000, false);
        Map<String, HostileSchema> variants = new java.util.LinkedHashMap<>();
        variants.put("self-nesting", new HostileSchema().selfNesting());
        variants.put("a child", new HostileSchema().child());
        variants.put("an extra field", new HostileSchema().extraField());
        variants.put("nullable", new HostileSchema().nullable());
        variants.put("of type Utf8", new HostileSchema().type(Type.Utf8));
        variants.put("another name", new HostileSchema().name("rows"));
        variants.put("dictionary-encoded", new HostileSchema().dictionary());
        variants.put("with field metadata", new HostileSchema().fieldMetadata());
        variants.put("without the length key", new HostileSchema().without(ArrowBlock.LENGTH_KEY));
        for (Map.Entry<String, HostileSchema> v : variants.entrySet()) {
            byte[] hostile = HostileSchema.replaceSchema(block, v.getValue().message(KEY, payload));
            CorruptBlockException e = assertThrows(CorruptBlockException.class, () -> ArrowBlock.read(ByteBuffer.wrap(hostile), true),
                    "a schema " + v.getKey());
            assertTrue(e.getMessage().contains("schema"), v.getKey() + ": " + e.getMessage());
        }
    }

    private byte[] write(byte[] payload, int rowBytes, boolean direct) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteBuffer bytes = direct ? ByteBuffer.allocateDirect(payload.length).put(payload).flip() : ByteBuffer.wrap(payload);
        long written = ArrowBlock.write(KEY, bytes, Channels.newChannel(out), allocator, rowBytes);
        assertEquals(written, out.size());
        return out.toByteArray();
    }

    private static byte[] concat(ArrowBlock.Block block) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (ByteBuffer part : block.payload()) {
            byte[] bytes = new byte[part.remaining()];
            part.duplicate().get(bytes);
            out.writeBytes(bytes);
        }
        return out.toByteArray();
    }

    private static byte[] random(int size, long seed) {
        byte[] bytes = new byte[size];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }

    private static int indexOf(byte[] haystack, byte[] needle) {
        outer:
        for (int i = 0; i <= haystack.length - needle.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (haystack[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        throw new AssertionError("payload not found in the block");
    }
}

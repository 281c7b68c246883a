package io.rdmaplane.rdma.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.TransportException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.OutOfMemoryException;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.dictionary.DictionaryProvider;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageMetadataResult;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;

class ArrowOverPoolTest {
    private static final int KiB = 1 << 10;
    private static final int MiB = 1 << 20;
    private static final int ROWS = 1000;
    private static final Schema SCHEMA = new Schema(List.of(
            Field.nullable("id", new ArrowType.Int(32, true)),
            Field.nullable("name", ArrowType.Utf8.INSTANCE)));

    private final RegistrationOnlyNode node = new RegistrationOnlyNode();

    private RegisteredMemoryPool pool(long capacityBytes) {
        return new RegisteredMemoryPool(node, new PoolOptions(capacityBytes, Duration.ZERO));
    }

    @Test
    void arrowBuffersAreSlicesRoundedToTheSizeClasses() {
        try (RegisteredMemoryPool pool = pool(16 * MiB);
             BufferAllocator allocator = pool.newArrowAllocator("rounding", 16 * MiB)) {
            ArrowBuf small = allocator.buffer(100);
            assertEquals(4 * KiB, small.capacity());
            assertEquals(4 * KiB, allocator.getAllocatedMemory(), "Arrow accounts for the whole registered slice");
            RegisteredBuffer slice = pool.locate(small.memoryAddress()).orElseThrow();
            assertEquals(small.memoryAddress(), slice.memoryAddress());
            assertEquals(4 * KiB, slice.capacity());
            small.setLong(0, 42L);
            assertEquals(42L, Long.reverseBytes(slice.buffer().getLong(0)), "Arrow writes little-endian into the slice");
            small.close();
            assertTrue(pool.locate(slice.memoryAddress()).isEmpty(), "closing the ArrowBuf gives the slice back");
            assertEquals(0, allocator.getAllocatedMemory());
        }
    }

    @Test
    void arrowRequestsAbove8MiBFailClearlyAndLeaveNothingAllocated() {
        try (RegisteredMemoryPool pool = pool(32 * MiB);
             BufferAllocator allocator = pool.newArrowAllocator("big", 32 * MiB)) {
            for (long size : new long[] {8 * MiB + 1, 20L * MiB}) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> allocator.buffer(size));
                assertTrue(e.getMessage().contains(size + "-byte buffer"), e.getMessage());
                assertTrue(e.getMessage().contains("at most 8388608 bytes"), e.getMessage());
                assertEquals(0, allocator.getAllocatedMemory());
            }
            try (IntVector tooLong = new IntVector("tooLong", allocator)) {
                assertThrows(IllegalArgumentException.class, () -> tooLong.allocateNew(3 * MiB)); // 12 MiB of values
                assertEquals(0, tooLong.getValueCapacity());
            }
            try (ArrowBuf largest = allocator.buffer(8 * MiB)) {
                assertEquals(8 * MiB, largest.capacity());
            }
            assertEquals(0, allocator.getAllocatedMemory());
        }
    }

    @Test
    void anExhaustedPoolIsArrowsOutOfMemory() {
        try (RegisteredMemoryPool pool = pool(8 * MiB);
             BufferAllocator allocator = pool.newArrowAllocator("exhausted", 64 * MiB);
             ArrowBuf all = allocator.buffer(8 * MiB)) {
            OutOfMemoryException e = assertThrows(OutOfMemoryException.class, () -> allocator.buffer(1));
            assertTrue(e instanceof PoolExhaustedException, e.toString());
            assertTrue(e.getMessage().contains("pool.capacity"), e.getMessage());
            assertEquals(8 * MiB, allocator.getAllocatedMemory());
        }
    }

    @Test
    void aSliceWrappedForAnAllocatorThatRefusesItGoesBackToThePool() throws TransportException {
        try (RegisteredMemoryPool pool = pool(8 * MiB);
             BufferAllocator tiny = pool.newArrowAllocator("tiny", 4 * KiB)) {
            RegisteredBuffer slice = pool.acquire(64 * KiB);
            assertThrows(OutOfMemoryException.class, () -> slice.asArrowBuf(tiny));
            assertTrue(pool.locate(slice.memoryAddress()).isEmpty());
            assertThrows(IllegalStateException.class, slice::close, "the failed wrap released it already");
        }
    }

    @Test
    void closingThePoolBeforeItsAllocatorsReportsTheirBuffersAndLetsThemCloseLater() {
        RegisteredMemoryPool pool = pool(8 * MiB);
        BufferAllocator allocator = pool.newArrowAllocator("late", 8 * MiB);
        ArrowBuf open = allocator.buffer(5000);
        pool.close();
        assertEquals(List.of(8 * KiB), pool.leakedOnClose().stream().map(RegisteredBuffer::capacity).toList());
        assertEquals(0, node.validRegions());
        open.close();
        allocator.close();
        assertEquals(0, allocator.getAllocatedMemory());
    }

    @Test
    void anIpcStreamWrittenToRegisteredMemoryIsDecodedInPlaceWhereItLands() throws Exception {
        RegisteredMemoryPool pool = pool(32 * MiB);
        try (BufferAllocator writerAllocator = pool.newArrowAllocator("writer", 16 * MiB);
             BufferAllocator readerAllocator = pool.newArrowAllocator("reader", 16 * MiB);
             RegisteredBuffer sent = pool.acquire(256 * KiB)) {
            try (VectorSchemaRoot root = VectorSchemaRoot.create(SCHEMA, writerAllocator);
                 ArrowStreamWriter writer = new ArrowStreamWriter(root, new DictionaryProvider.MapDictionaryProvider(),
                         new ByteBufferChannel(sent.buffer()))) {
                writer.start();
                for (int batch = 0; batch < 2; batch++) {
                    fill(root, batch);
                    for (FieldVector vector : root.getFieldVectors()) {
                        for (ArrowBuf buf : vector.getFieldBuffers()) {
                            assertTrue(pool.locate(buf.memoryAddress()).isPresent(), "vector memory is registered");
                        }
                    }
                    writer.writeBatch();
                }
                writer.end();
            }
            int length = sent.buffer().position();
            // A READ lands the stream in another registered slice.
            RegisteredBuffer landed = pool.acquire(length);
            landed.buffer().put(sent.buffer().flip());
            try (ArrowBuf received = landed.asArrowBuf(readerAllocator)) {
                decodeInPlace(received, length, readerAllocator, pool, landed);
            }
            assertTrue(pool.locate(landed.memoryAddress()).isEmpty(), "the slice is back once the ArrowBuf is released");
            assertEquals(0, writerAllocator.getAllocatedMemory());
            assertEquals(0, readerAllocator.getAllocatedMemory());
        } // closing the allocators would throw if a buffer were still open
        pool.close();
        assertEquals(List.of(), pool.leakedOnClose());
    }

    private static void fill(VectorSchemaRoot root, int batch) {
        IntVector id = (IntVector) root.getVector("id");
        VarCharVector name = (VarCharVector) root.getVector("name");
        root.allocateNew();
        for (int i = 0; i < ROWS; i++) {
            id.setSafe(i, batch * ROWS + i);
            if (i % 10 == 0) {
                name.setNull(i);
            } else {
                name.setSafe(i, ("row-" + (batch * ROWS + i)).getBytes(StandardCharsets.UTF_8));
            }
        }
        root.setRowCount(ROWS);
    }

    /** Reads the stream's messages and loads each record batch's body where it lies in {@code received}. */
    private static void decodeInPlace(ArrowBuf received, int length, BufferAllocator allocator,
                                      RegisteredMemoryPool pool, RegisteredBuffer landed) throws IOException {
        ByteBuffer bytes = received.nioBuffer(0, length);
        ReadChannel in = new ReadChannel(new ByteBufferChannel(bytes));
        Schema schema = MessageSerializer.deserializeSchema(in);
        assertEquals(SCHEMA, schema);
        try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
            VectorLoader loader = new VectorLoader(root);
            int batch = 0;
            for (MessageMetadataResult message; (message = MessageSerializer.readMessage(in)) != null; batch++) {
                assertEquals(MessageHeader.RecordBatch, message.headerType());
                long bodyLength = message.getMessageBodyLength();
                ArrowBuf body = received.slice(bytes.position(), bodyLength);
                body.getReferenceManager().retain(); // deserializeRecordBatch releases one reference of the body
                try (ArrowRecordBatch recordBatch = MessageSerializer.deserializeRecordBatch(message, body)) {
                    loader.load(recordBatch);
                }
                bytes.position(bytes.position() + (int) bodyLength);

                IntVector id = (IntVector) root.getVector("id");
                VarCharVector name = (VarCharVector) root.getVector("name");
                assertEquals(ROWS, root.getRowCount());
                for (int i = 0; i < ROWS; i++) {
                    assertEquals(batch * ROWS + i, id.get(i));
                    if (i % 10 == 0) {
                        assertNull(name.getObject(i));
                    } else {
                        assertEquals("row-" + (batch * ROWS + i), name.getObject(i).toString());
                    }
                }
                for (ArrowBuf buf : List.of(id.getDataBuffer(), name.getDataBuffer(), name.getOffsetBuffer())) {
                    long at = buf.memoryAddress() - landed.memoryAddress();
                    assertTrue(at >= 0 && at + buf.capacity() <= length, "decoded where it landed, not copied: " + at);
                    assertSame(landed, pool.locate(buf.memoryAddress()).orElseThrow());
                    assertEquals(landed.remoteAddress() + at, landed.remoteAddressOf(buf.memoryAddress()));
                }
            }
            assertEquals(2, batch);
            assertFalse(bytes.hasRemaining());
        }
    }

    /** A channel over a ByteBuffer: writes fill it (and fail when it is full), reads drain it. */
    static final class ByteBufferChannel implements WritableByteChannel, ReadableByteChannel {
        private final ByteBuffer buffer;

        ByteBufferChannel(ByteBuffer buffer) {
            this.buffer = buffer;
        }

        @Override
        public int write(ByteBuffer src) throws IOException {
            int n = src.remaining();
            if (n > buffer.remaining()) {
                throw new IOException("registered buffer full: " + n + " bytes to write, " + buffer.remaining() + " left");
            }
            buffer.put(src);
            return n;
        }

        @Override
        public int read(ByteBuffer dst) {
            if (!buffer.hasRemaining()) {
                return -1;
            }
            int n = Math.min(dst.remaining(), buffer.remaining());
            dst.put(buffer.slice(buffer.position(), n));
            buffer.position(buffer.position() + n);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }
}

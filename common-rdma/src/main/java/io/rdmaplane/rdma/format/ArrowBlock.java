package io.rdmaplane.rdma.format;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.channels.WritableByteChannel;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.MetadataVersion;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.ForeignAllocation;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * A block as an Arrow IPC stream: one non-nullable binary column {@code payload} whose rows,
 * concatenated, are the block's bytes (for Spark, the serialized and compressed records of one
 * partition), with the block's identity, length and CRC32C in the schema's metadata. Any Arrow
 * IPC reader opens it. {@link #read} decodes one in place: the payload comes back as views of
 * the bytes it was given, with no copy and no allocation proportional to the block.
 */
public final class ArrowBlock {
    public static final String PAYLOAD_FIELD = "payload";
    public static final String CRC32C_KEY = "rdma.payload.crc32c";
    public static final String LENGTH_KEY = "rdma.payload.length";
    /** Rows are at most this long, so a block of any size fits Arrow's 32-bit offsets. */
    public static final int DEFAULT_ROW_BYTES = 64 << 20;
    /** Bytes of framing a block adds to its payload at most (schema, batch header, padding, end marker). */
    public static final int MAX_FRAMING_BYTES = 4096;
    private static final int CONTINUATION = 0xFFFFFFFF;
    private static final int MAX_METADATA_ENTRIES = 32;
    private static final int MAX_METADATA_CHARS = 256;

    /** A decoded block: its metadata (identity, length, CRC32C) and views of its payload bytes. */
    public record Block(Map<String, String> metadata, List<ByteBuffer> payload, long payloadLength, int crc32c) {
    }

    private ArrowBlock() {
    }

    /**
     * Writes a one-byte block and decodes it: loads and initialises what every {@link #frame} (which
     * writes through the same path), {@link #write} and {@link #read} needs (Arrow's {@code Schema} alone builds a
     * Jackson {@code ObjectMapper}: about 75 ms of CPU per JVM), so that a process can pay for it when
     * it starts instead of in its first task.
     */
    public static void warmUp(BufferAllocator allocator) throws IOException {
        ByteBuffer payload = ByteBuffer.allocateDirect(1);
        ByteArrayOutputStream whole = new ByteArrayOutputStream();
        write(Map.of(), payload, Channels.newChannel(whole), allocator);
        try {
            read(ByteBuffer.wrap(whole.toByteArray()), true);
        } catch (CorruptBlockException e) {
            throw new IllegalStateException("the warm-up block did not decode", e);
        }
    }

    /** Bytes a destination must have to hold the block of {@code payloadLength} bytes with {@code metadata}. */
    public static long maxFramedSize(long payloadLength, Map<String, String> metadata) {
        long rows = (payloadLength + DEFAULT_ROW_BYTES - 1) / DEFAULT_ROW_BYTES;
        long metadataBytes = 0;
        for (Map.Entry<String, String> e : metadata.entrySet()) {
            metadataBytes += 4L * (e.getKey().length() + e.getValue().length()) + 32; // UTF-8 worst case, table overhead
        }
        return payloadLength + 8 * (rows + 2) + MAX_FRAMING_BYTES + metadataBytes;
    }

    /**
     * Writes {@code payload} (its remaining bytes; its position is unchanged) as a block with
     * {@code metadata} plus the payload's length and CRC32C. A direct payload is written without
     * an intermediate copy. Returns the bytes written.
     */
    public static long write(Map<String, String> metadata, ByteBuffer payload, WritableByteChannel out,
                             BufferAllocator allocator) throws IOException {
        return write(metadata, payload, out, allocator, DEFAULT_ROW_BYTES);
    }

    static long write(Map<String, String> metadata, ByteBuffer payload, WritableByteChannel out, BufferAllocator allocator,
                      int rowBytes) throws IOException {
        return write(metadata, payload, out, allocator, rowBytes, crc32c(payload.duplicate()));
    }

    private static long write(Map<String, String> metadata, ByteBuffer payload, WritableByteChannel out,
                              BufferAllocator allocator, int rowBytes, int payloadCrc32c) throws IOException {
        ByteBuffer bytes = payload.duplicate();
        int length = bytes.remaining();
        Map<String, String> all = new LinkedHashMap<>(metadata);
        all.put(LENGTH_KEY, Integer.toString(length));
        all.put(CRC32C_KEY, Integer.toUnsignedString(payloadCrc32c));
        Schema schema = new Schema(List.of(new Field(PAYLOAD_FIELD, FieldType.notNullable(ArrowType.Binary.INSTANCE), null)), all);
        WriteChannel channel = new WriteChannel(out);
        MessageSerializer.serialize(channel, schema);
        int rows = (length + rowBytes - 1) / rowBytes;
        try (ArrowBuf validity = allocator.getEmpty();
             ArrowBuf offsets = allocator.buffer(4L * (rows + 1));
             ArrowBuf data = wrap(bytes, allocator)) {
            for (int row = 0; row <= rows; row++) {
                offsets.setInt(4L * row, (int) Math.min(length, (long) row * rowBytes));
            }
            // The serializer writes each buffer's readable bytes: mark them written.
            offsets.writerIndex(4L * (rows + 1));
            data.writerIndex(length);
            try (ArrowRecordBatch batch = new ArrowRecordBatch(rows, List.of(new ArrowFieldNode(rows, 0)),
                    List.of(validity, offsets, data))) {
                MessageSerializer.serialize(channel, batch);
            }
        }
        ArrowStreamWriter.writeEndOfStream(channel, IpcOption.DEFAULT);
        return channel.getCurrentPosition();
    }

    /**
     * The bytes a block adds around its payload: {@code header + payload + trailer} is exactly
     * what {@link #write} produces for the same metadata and payload. Lets a block be served from
     * three places (framing in memory, payload where it already lies, e.g. a mapped file) and
     * gathered into one contiguous Arrow IPC stream by the reader.
     */
    public record Framing(ByteBuffer header, ByteBuffer trailer, int payloadCrc32c) {
    }

    /**
     * The framing of the block {@link #write} would make of {@code payload} (a direct buffer; its
     * remaining bytes are read once, for their CRC32C, and never copied).
     */
    public static Framing frame(Map<String, String> metadata, ByteBuffer payload, BufferAllocator allocator)
            throws IOException {
        return frame(metadata, payload, crc32c(payload.duplicate()), allocator);
    }

    /**
     * The framing of the block {@link #write} would make of {@code payload}, whose CRC32C the
     * caller already has: the payload's bytes are not read at all (e.g. a file mapping whose pages
     * need not be touched).
     */
    public static Framing frame(Map<String, String> metadata, ByteBuffer payload, int payloadCrc32c,
                                BufferAllocator allocator) throws IOException {
        if (!payload.isDirect()) {
            throw new IllegalArgumentException("framing needs a direct payload, so it is recognised without a copy");
        }
        FramingChannel out = new FramingChannel(MemoryUtil.getByteBufferAddress(payload) + payload.position(),
                payload.remaining());
        int crc = payloadCrc32c;
        write(metadata, payload, out, allocator, DEFAULT_ROW_BYTES, crc);
        if (out.payloadSeen != payload.remaining()) {
            throw new IllegalStateException("the payload was written as " + out.payloadSeen + " of " + payload.remaining()
                    + " bytes");
        }
        return new Framing(out.header.toByteBuffer(), out.trailer.toByteBuffer(), crc);
    }

    /** Keeps what comes before and after the payload's own memory; skips the payload without reading it. */
    private static final class FramingChannel implements WritableByteChannel {
        private final long payloadAddress;
        private final long payloadLength;
        private final Bytes header = new Bytes();
        private final Bytes trailer = new Bytes();
        private long payloadSeen;

        FramingChannel(long payloadAddress, long payloadLength) {
            this.payloadAddress = payloadAddress;
            this.payloadLength = payloadLength;
        }

        @Override
        public int write(ByteBuffer src) {
            int n = src.remaining();
            long address = src.isDirect() ? MemoryUtil.getByteBufferAddress(src) + src.position() : -1;
            if (address >= payloadAddress && address + n <= payloadAddress + payloadLength && n > 0) {
                payloadSeen += n;
                src.position(src.limit());
            } else if (payloadSeen == 0 && payloadLength > 0) {
                header.put(src);
            } else {
                trailer.put(src);
            }
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

    /** A growable byte array for the few framing bytes. */
    private static final class Bytes extends java.io.ByteArrayOutputStream {
        void put(ByteBuffer src) {
            byte[] chunk = new byte[src.remaining()];
            src.get(chunk);
            write(chunk, 0, chunk.length);
        }

        ByteBuffer toByteBuffer() {
            return ByteBuffer.wrap(toByteArray());
        }
    }

    /** The payload as an ArrowBuf: over the same memory when direct, else a copy. */
    private static ArrowBuf wrap(ByteBuffer bytes, BufferAllocator allocator) {
        if (bytes.isDirect()) {
            long address = MemoryUtil.getByteBufferAddress(bytes) + bytes.position();
            return allocator.wrapForeignAllocation(new ForeignAllocation(bytes.remaining(), address) {
                @Override
                protected void release0() {
                    // the caller owns the payload's memory
                }
            });
        }
        ArrowBuf copy = allocator.buffer(bytes.remaining());
        copy.setBytes(0, bytes.duplicate());
        return copy;
    }

    /**
     * Decodes the block in {@code segment} (from its position to its limit) in place. When
     * {@code verify} is set the payload must match the CRC32C in the metadata.
     *
     * @throws CorruptBlockException for anything that is not a well-formed block, or a payload that fails its CRC32C
     */
    public static Block read(ByteBuffer segment, boolean verify) throws CorruptBlockException {
        ByteBuffer in = segment.slice().order(ByteOrder.LITTLE_ENDIAN);
        try {
            Message schemaMessage = nextMessage(in);
            if (schemaMessage == null || schemaMessage.headerType() != MessageHeader.Schema) {
                throw new CorruptBlockException("a block starts with an Arrow schema message");
            }
            Map<String, String> metadata = readSchema(schemaMessage);
            long expectedLength = parseLong(metadata, LENGTH_KEY);
            int expectedCrc = (int) parseLong(metadata, CRC32C_KEY);
            List<ByteBuffer> payload = new ArrayList<>();
            long length = 0;
            for (Message message; (message = nextMessage(in)) != null; ) {
                if (message.headerType() != MessageHeader.RecordBatch) {
                    throw new CorruptBlockException("unexpected message type " + message.headerType() + " in a block");
                }
                ByteBuffer rows = readBatch(message, in);
                payload.add(rows);
                length += rows.remaining();
            }
            if (length != expectedLength) {
                throw new CorruptBlockException("payload has " + length + " bytes, metadata says " + expectedLength);
            }
            if (verify) {
                CRC32C crc = new CRC32C();
                payload.forEach(part -> crc.update(part.duplicate()));
                if ((int) crc.getValue() != expectedCrc) {
                    throw new CorruptBlockException("payload fails its CRC32C (block " + metadata + ")");
                }
            }
            return new Block(metadata, payload, length, expectedCrc);
        } catch (RuntimeException e) {
            // Flatbuffer accessors on hostile bytes throw index errors: that is a corrupt block too.
            throw new CorruptBlockException("malformed Arrow block: " + e, e);
        }
    }

    /**
     * The next IPC message's metadata (the stream advances past it, to its body), or null at the
     * end-of-stream marker. Every length is checked against the bytes present before use.
     */
    private static Message nextMessage(ByteBuffer in) throws CorruptBlockException {
        if (in.remaining() < 8 || in.getInt() != CONTINUATION) {
            throw new CorruptBlockException("expected an Arrow IPC message at byte " + in.position());
        }
        int size = in.getInt();
        if (size == 0) {
            return null;
        }
        if (size < 0 || size > in.remaining() || size % 8 != 0) {
            throw new CorruptBlockException("message metadata of " + size + " bytes at byte " + in.position()
                    + " does not fit the " + in.remaining() + " left");
        }
        Message message = Message.getRootAsMessage(in.slice(in.position(), size).order(ByteOrder.LITTLE_ENDIAN));
        in.position(in.position() + size);
        if (message.version() < MetadataVersion.V4 || message.bodyLength() < 0 || message.bodyLength() > in.remaining()) {
            throw new CorruptBlockException("message of version " + message.version() + " with a body of "
                    + message.bodyLength() + " bytes (" + in.remaining() + " left)");
        }
        return message;
    }

    /**
     * The metadata of a block's schema, once it is known to be the one {@link #write} makes: one
     * field {@value #PAYLOAD_FIELD}, non-nullable Binary, with no children, no dictionary and no
     * metadata of its own; at most {@value #MAX_METADATA_ENTRIES} schema metadata entries, distinct
     * keys, the length and CRC32C keys among them. Checked on the flatbuffer itself, and Arrow never
     * converts it: its conversion recurses into children, so a field that lists itself as its own
     * child overflowed the stack.
     */
    private static Map<String, String> readSchema(Message message) throws CorruptBlockException {
        org.apache.arrow.flatbuf.Schema flat = (org.apache.arrow.flatbuf.Schema) message.header(new org.apache.arrow.flatbuf.Schema());
        if (flat == null) {
            throw new CorruptBlockException("a block's schema message has no schema");
        }
        if (flat.fieldsLength() != 1) {
            throw new CorruptBlockException("a block's schema has exactly one field, not " + flat.fieldsLength());
        }
        org.apache.arrow.flatbuf.Field field = flat.fields(0);
        String problem = field == null ? "is missing"
                : !PAYLOAD_FIELD.equals(field.name()) ? "is named '" + field.name() + "'"
                : field.nullable() ? "is nullable"
                : field.typeType() != org.apache.arrow.flatbuf.Type.Binary ? "has Arrow type id " + field.typeType()
                : field.childrenLength() != 0 ? "has " + field.childrenLength() + " children"
                : field.dictionary() != null ? "is dictionary-encoded"
                : field.customMetadataLength() != 0 ? "has metadata of its own"
                : null;
        if (problem != null) {
            throw new CorruptBlockException("a block's schema has one non-nullable Binary field '" + PAYLOAD_FIELD
                    + "' without children, dictionary or metadata; this one's field " + problem);
        }
        int entries = flat.customMetadataLength();
        if (entries > MAX_METADATA_ENTRIES) {
            throw new CorruptBlockException("a block's schema has at most " + MAX_METADATA_ENTRIES + " metadata entries, not "
                    + entries);
        }
        Map<String, String> metadata = new LinkedHashMap<>();
        for (int i = 0; i < entries; i++) {
            org.apache.arrow.flatbuf.KeyValue entry = flat.customMetadata(i);
            String key = entry == null ? null : entry.key();
            String value = entry == null ? null : entry.value();
            if (key == null || value == null || key.length() > MAX_METADATA_CHARS || value.length() > MAX_METADATA_CHARS) {
                throw new CorruptBlockException("a block's schema metadata entry " + i + " is not a key and a value of at most "
                        + MAX_METADATA_CHARS + " characters");
            }
            if (metadata.put(key, value) != null) {
                throw new CorruptBlockException("a block's schema metadata has the key '" + key + "' twice");
            }
        }
        for (String key : List.of(LENGTH_KEY, CRC32C_KEY)) {
            if (!metadata.containsKey(key)) {
                throw new CorruptBlockException("a block's schema metadata has no " + key);
            }
        }
        return metadata;
    }

    /** The rows of one record batch, as one view: its data buffer from the first offset to the last. */
    private static ByteBuffer readBatch(Message message, ByteBuffer in) throws CorruptBlockException {
        RecordBatch batch = (RecordBatch) message.header(new RecordBatch());
        long bodyLength = message.bodyLength();
        if (batch == null || batch.compression() != null || batch.nodesLength() != 1 || batch.buffersLength() != 3) {
            throw new CorruptBlockException("a block's batch has one uncompressed binary column");
        }
        long rows = batch.nodes(0).length();
        ByteBuffer body = in.slice(in.position(), (int) bodyLength).order(ByteOrder.LITTLE_ENDIAN);
        in.position(in.position() + (int) bodyLength);
        ByteBuffer offsets = buffer(body, batch, 1);
        ByteBuffer data = buffer(body, batch, 2);
        if (batch.nodes(0).nullCount() != 0 || rows < 0 || rows > Integer.MAX_VALUE / 4 || offsets.remaining() < 4 * (rows + 1)) {
            throw new CorruptBlockException("batch of " + rows + " rows with " + offsets.remaining() + " offset bytes");
        }
        int previous = offsets.getInt(0);
        for (int row = 1; row <= rows; row++) {
            int next = offsets.getInt(4 * row);
            if (next < previous) {
                throw new CorruptBlockException("row offsets go backwards at row " + row);
            }
            previous = next;
        }
        int first = offsets.getInt(0);
        if (first < 0 || previous > data.remaining()) {
            throw new CorruptBlockException("rows [" + first + ", " + previous + ") outside a data buffer of "
                    + data.remaining() + " bytes");
        }
        return data.slice(first, previous - first).order(ByteOrder.BIG_ENDIAN);
    }

    private static ByteBuffer buffer(ByteBuffer body, RecordBatch batch, int index) throws CorruptBlockException {
        long offset = batch.buffers(index).offset();
        long length = batch.buffers(index).length();
        if (offset < 0 || length < 0 || offset > body.remaining() - length) {
            throw new CorruptBlockException("buffer " + index + " [" + offset + ", +" + length + ") outside a body of "
                    + body.remaining() + " bytes");
        }
        return body.slice((int) offset, (int) length).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static long parseLong(Map<String, String> metadata, String key) throws CorruptBlockException {
        String value = metadata.get(key);
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new CorruptBlockException("metadata " + key + " is '" + value + "', not a number");
        }
    }

    private static int crc32c(ByteBuffer bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes.duplicate());
        return (int) crc.getValue();
    }
}

package io.rdmaplane.rdma.testing;

import com.google.flatbuffers.FlatBufferBuilder;
import io.rdmaplane.rdma.format.ArrowBlock;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.arrow.flatbuf.Binary;
import org.apache.arrow.flatbuf.DictionaryEncoding;
import org.apache.arrow.flatbuf.Endianness;
import org.apache.arrow.flatbuf.Field;
import org.apache.arrow.flatbuf.KeyValue;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.MetadataVersion;
import org.apache.arrow.flatbuf.Schema;
import org.apache.arrow.flatbuf.Type;

/**
 * An Arrow schema message as a hostile peer may write it, built on the flatbuffer directly; by
 * default exactly the one {@link ArrowBlock} writes. {@link #replaceSchema} puts it in front of a
 * real block's batches.
 */
public final class HostileSchema {
    private String name = ArrowBlock.PAYLOAD_FIELD;
    private boolean nullable;
    private byte type = Type.Binary;
    private boolean extraField;
    private boolean child;
    private boolean selfNesting;
    private boolean dictionary;
    private boolean fieldMetadata;
    private String without;

    public HostileSchema name(String value) {
        name = value;
        return this;
    }

    public HostileSchema nullable() {
        nullable = true;
        return this;
    }

    public HostileSchema type(byte value) {
        type = value;
        return this;
    }

    public HostileSchema extraField() {
        extraField = true;
        return this;
    }

    public HostileSchema child() {
        child = true;
        return this;
    }

    public HostileSchema selfNesting() {
        selfNesting = true;
        return this;
    }

    public HostileSchema dictionary() {
        dictionary = true;
        return this;
    }

    public HostileSchema fieldMetadata() {
        fieldMetadata = true;
        return this;
    }

    public HostileSchema without(String key) {
        without = key;
        return this;
    }

    /** The schema message's flatbuffer, with {@code metadata} plus the payload's length and CRC32C (unless left out). */
    public byte[] message(Map<String, String> metadata, byte[] payload) {
        FlatBufferBuilder b = new FlatBufferBuilder();
        int children = 0;
        if (child || selfNesting) {
            int inner = field(b, 0);
            children = Field.createChildrenVector(b, new int[] {inner});
        }
        int field = field(b, children);
        int[] fields = extraField ? new int[] {field, field(b, 0)} : new int[] {field};
        int fieldsVector = Schema.createFieldsVector(b, fields);
        Map<String, String> all = new java.util.LinkedHashMap<>(metadata);
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(payload);
        all.put(ArrowBlock.LENGTH_KEY, Integer.toString(payload.length));
        all.put(ArrowBlock.CRC32C_KEY, Long.toString(crc.getValue()));
        all.remove(without);
        int metadataVector = Schema.createCustomMetadataVector(b, keyValues(b, all));
        int schema = Schema.createSchema(b, Endianness.Little, fieldsVector, metadataVector, 0);
        int message = Message.createMessage(b, MetadataVersion.V5, MessageHeader.Schema, schema, 0, 0);
        b.finish(message);
        ByteBuffer bytes = b.dataBuffer();
        if (selfNesting) {
            // The child's offset (relative to where it is stored) now points at the field itself.
            int element = bytes.capacity() - children + 4;
            bytes.putInt(element, (bytes.capacity() - field) - element);
        }
        byte[] out = new byte[bytes.remaining()];
        bytes.get(out);
        return out;
    }

    private int field(FlatBufferBuilder b, int children) {
        int nameOffset = b.createString(name);
        Binary.startBinary(b);
        int typeOffset = Binary.endBinary(b);
        int dictionaryOffset = dictionary ? DictionaryEncoding.createDictionaryEncoding(b, 1, 0, false, (short) 0) : 0;
        int metadata = fieldMetadata ? Field.createCustomMetadataVector(b, keyValues(b, Map.of("k", "v"))) : 0;
        return Field.createField(b, nameOffset, nullable, type, typeOffset, dictionaryOffset, children, metadata);
    }

    private static int[] keyValues(FlatBufferBuilder b, Map<String, String> entries) {
        List<Integer> offsets = new ArrayList<>();
        entries.forEach((k, v) -> offsets.add(KeyValue.createKeyValue(b, b.createString(k), b.createString(v))));
        return offsets.stream().mapToInt(Integer::intValue).toArray();
    }

    /** {@code block} with its schema message replaced by {@code schemaMessage} (flatbuffer bytes). */
    public static byte[] replaceSchema(byte[] block, byte[] schemaMessage) {
        ByteBuffer in = ByteBuffer.wrap(block).order(ByteOrder.LITTLE_ENDIAN);
        int rest = 8 + in.getInt(4); // continuation, size, the schema's metadata (a schema message has no body)
        int padded = (schemaMessage.length + 7) / 8 * 8;
        ByteBuffer out = ByteBuffer.allocate(8 + padded + block.length - rest).order(ByteOrder.LITTLE_ENDIAN);
        out.putInt(-1).putInt(padded).put(schemaMessage).position(8 + padded);
        out.put(block, rest, block.length - rest);
        return out.array();
    }
}

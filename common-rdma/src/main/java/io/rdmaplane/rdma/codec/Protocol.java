package io.rdmaplane.rdma.codec;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.function.ToIntFunction;
import java.util.zip.CRC32C;

/**
 * One protocol's messages: its name, its version and its message types with their wire ids.
 * Every message starts with {@code version:u8 type:u8}; a checksummed protocol's messages end
 * with {@code crc32c:i32} over all the bytes before it (for messages that travel on their own;
 * those carried inside a checksummed control frame need none of their own). Big-endian.
 *
 * <p>Decoding checks, in this order: the CRC32C, the version, the message id. Each failure is a
 * {@link MalformedMessageException} naming the field ({@link UnsupportedVersionException} for
 * the version), as is everything the {@link MessageReader} then finds wrong.
 */
public final class Protocol<T extends Enum<T>> {
    /** {@code version:u8 type:u8}. */
    public static final int HEADER_BYTES = 2;
    public static final int CRC_BYTES = 4;

    private final String name;
    private final int version;
    private final WireIds<T> types;
    private final boolean checksummed;

    private Protocol(String name, int version, WireIds<T> types, boolean checksummed) {
        if (version < 1 || version > 255) {
            throw new IllegalArgumentException(name + ": version " + version + " is not in 1..255");
        }
        this.name = name;
        this.version = version;
        this.types = types;
        this.checksummed = checksummed;
    }

    /** A protocol whose messages travel inside checksummed frames. */
    public static <T extends Enum<T>> Protocol<T> of(String name, int version, Class<T> types, ToIntFunction<T> wireId) {
        return new Protocol<>(name, version, WireIds.of(types, name + " message", wireId), false);
    }

    /** A protocol whose messages travel on their own and carry a CRC32C each. */
    public static <T extends Enum<T>> Protocol<T> checksummed(String name, int version, Class<T> types,
                                                              ToIntFunction<T> wireId) {
        return new Protocol<>(name, version, WireIds.of(types, name + " message", wireId), true);
    }

    public String name() {
        return name;
    }

    public int version() {
        return version;
    }

    public int wireId(T type) {
        return types.id(type);
    }

    /** Bytes every message has besides its fields: the header and, if checksummed, the CRC32C. */
    public int overhead() {
        return HEADER_BYTES + (checksummed ? CRC_BYTES : 0);
    }

    /** A message of {@code type}: the header is written, the fields follow, {@link MessageWriter#finish()} ends it. */
    public MessageWriter write(T type) {
        return new MessageWriter(checksummed).u8(version).u8(types.id(type));
    }

    /**
     * Checks {@code message}'s CRC32C (if checksummed), version and id, and returns a reader of
     * its fields. The caller's buffer is not moved.
     *
     * @throws MalformedMessageException naming the field at fault
     */
    public MessageReader<T> read(ByteBuffer message) {
        ByteBuffer b = message.duplicate().order(ByteOrder.BIG_ENDIAN);
        if (checksummed) {
            int size = b.remaining();
            if (size < overhead()) {
                throw new MalformedMessageException("crc32c: a " + name + " message has at least " + overhead() + " bytes, this one "
                        + size);
            }
            int end = b.limit() - CRC_BYTES;
            CRC32C crc = new CRC32C();
            crc.update(b.duplicate().limit(end));
            if ((int) crc.getValue() != b.getInt(end)) {
                throw new MalformedMessageException("crc32c: mismatch on a " + size + "-byte " + name + " message");
            }
            b.limit(end);
        }
        MessageReader<T> header = new MessageReader<>(b, name + " message", null);
        int got = header.u8("version");
        if (got != version) {
            throw new UnsupportedVersionException(name, got, version);
        }
        T type = types.decode("type", header.u8("type"));
        return new MessageReader<>(b, name + " " + type, type);
    }

    /**
     * As {@link #read(ByteBuffer)}, for a message that can only be of one type (an answer).
     *
     * @throws MalformedMessageException also when the message is of another type
     */
    public MessageReader<T> read(ByteBuffer message, T expected) {
        MessageReader<T> reader = read(message);
        if (reader.type() != expected) {
            throw new MalformedMessageException("type: expected a " + name + " " + expected + " message, was " + reader.type());
        }
        return reader;
    }

    @Override
    public String toString() {
        return name + " v" + version + " (" + types.known() + ")";
    }
}

package io.rdmaplane.rdma.codec;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Reads one message's fields in order. Every read first checks that the bytes are there, and
 * every length read from the wire is checked against its bound before anything is allocated;
 * a failure is a {@link MalformedMessageException} whose text starts with the field's name.
 * Nothing else escapes a reader.
 *
 * @param <T> the protocol's message types ({@link Void} for a {@linkplain #body body} reader)
 */
public final class MessageReader<T> {
    /** Bytes of a remote-block descriptor: {@code address:i64 rkey:i32 length:i32 crc32c:i32}. */
    public static final int REMOTE_BLOCK_BYTES = 8 + 4 + 4 + 4;

    /** Makes the caller's descriptor type from the primitive fields, so the codec needs none of its own. */
    @FunctionalInterface
    public interface RemoteBlockFactory<B> {
        B create(long address, int rkey, int length, int crc32c);
    }

    private final ByteBuffer b;
    private final String message;
    private final T type;

    MessageReader(ByteBuffer b, String message, T type) {
        this.b = b;
        this.message = message;
        this.type = type;
    }

    /**
     * A reader of a message body without a header of its own, such as the payload of a control
     * frame whose header already said what it is. The caller's buffer is not moved.
     *
     * @param message what the body is, for error messages ("control HELLO")
     */
    public static MessageReader<Void> body(String message, ByteBuffer bytes) {
        return new MessageReader<>(bytes.duplicate().order(ByteOrder.BIG_ENDIAN), message, null);
    }

    /** The message's type, as its header said (null for a body reader). */
    public T type() {
        return type;
    }

    public int remaining() {
        return b.remaining();
    }

    /** Checks that {@code bytes} more bytes are there, e.g. all of a repeated group before reading any of it. */
    public MessageReader<T> need(String field, long bytes) {
        if (bytes < 0 || b.remaining() < bytes) {
            throw malformed(field, "needs " + bytes + " bytes, " + b.remaining() + " remain");
        }
        return this;
    }

    public int u8(String field) {
        need(field, 1);
        return Byte.toUnsignedInt(b.get());
    }

    public boolean bool(String field) {
        int value = u8(field);
        if (value > 1) {
            throw malformed(field, "expected 0 or 1, was " + value);
        }
        return value == 1;
    }

    public int u16(String field) {
        need(field, 2);
        return Short.toUnsignedInt(b.getShort());
    }

    public int i32(String field) {
        need(field, 4);
        return b.getInt();
    }

    public long i64(String field) {
        need(field, 8);
        return b.getLong();
    }

    /** An {@code i32} that must lie in {@code min..max}, e.g. how many entries follow. */
    public int count(String field, int min, int max) {
        int value = i32(field);
        if (value < min || value > max) {
            throw malformed(field, "must be " + min + ".." + max + ", was " + value);
        }
        return value;
    }

    /** The constant whose wire id is the next {@code u8}. */
    public <E extends Enum<E>> E id(String field, WireIds<E> ids) {
        return ids.decode(field, u8(field));
    }

    /** Exactly {@code length} bytes (a nonce, a MAC): the length is the protocol's, not the wire's. */
    public byte[] fixed(String field, int length) {
        need(field, length);
        byte[] bytes = new byte[length];
        b.get(bytes);
        return bytes;
    }

    /** {@code length:u16} and that many bytes of UTF-8, at most {@code maxBytes} of them. */
    public String string(String field, int maxBytes) {
        int length = u16(field);
        bound(field, length, maxBytes);
        need(field, length);
        ByteBuffer bytes = b.slice(b.position(), length);
        b.position(b.position() + length);
        try {
            CharBuffer chars = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(bytes);
            return chars.toString();
        } catch (CharacterCodingException e) {
            throw malformed(field, "is not valid UTF-8");
        }
    }

    /** {@code length:i32} and that many bytes, at most {@code maxBytes} of them. */
    public byte[] bytes(String field, int maxBytes) {
        int length = i32(field);
        if (length < 0) {
            throw malformed(field, "a length of " + length + " bytes");
        }
        bound(field, length, maxBytes);
        return fixed(field, length);
    }

    /** All bytes left, copied (the message's buffer may be reused once it is decoded). */
    public ByteBuffer rest() {
        ByteBuffer copy = ByteBuffer.allocate(b.remaining()).put(b).flip();
        return copy;
    }

    /**
     * A remote-block descriptor {@code address:i64 rkey:i32 length:i32 crc32c:i32}, its length in
     * {@code 1..maxLength}.
     *
     * @param field names the block in errors: "location of" it when it is short, "length of" it when the length is wrong
     */
    public <B> B remoteBlock(String field, int maxLength, RemoteBlockFactory<B> make) {
        need("location of " + field, REMOTE_BLOCK_BYTES);
        long address = b.getLong();
        int rkey = b.getInt();
        int length = b.getInt();
        int crc32c = b.getInt();
        if (length < 1 || length > maxLength) {
            throw malformed("length of " + field, "must be 1.." + maxLength + ", was " + length);
        }
        return make.create(address, rkey, length, crc32c);
    }

    /** The message must end here. */
    public void end() {
        if (b.hasRemaining()) {
            throw malformed("trailing", b.remaining() + " bytes after the " + message + " message");
        }
    }

    /** An error about {@code field} for a check of the protocol's own (a value out of range); the caller throws it. */
    public MalformedMessageException malformed(String field, String problem) {
        return new MalformedMessageException(field + ": " + problem);
    }

    private void bound(String field, int length, int maxBytes) {
        if (length > maxBytes) {
            throw malformed(field, length + " bytes is more than the " + maxBytes + "-byte bound");
        }
    }
}

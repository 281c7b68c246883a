package io.rdmaplane.rdma.codec;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32C;

/**
 * Writes one message's fields in order into a buffer that grows as needed; {@link #finish()}
 * returns the message. The encodings mirror {@link MessageReader}'s. A value that does not fit
 * its field (a string over its bound) is the caller's mistake: {@link IllegalArgumentException}.
 */
public final class MessageWriter {
    private final boolean checksummed;
    private ByteBuffer out = ByteBuffer.allocate(64);

    MessageWriter(boolean checksummed) {
        this.checksummed = checksummed;
    }

    /** A writer of a message body without a header of its own (see {@link MessageReader#body}). */
    public static MessageWriter body() {
        return new MessageWriter(false);
    }

    /** The longest prefix of {@code s} whose UTF-8 has at most {@code maxBytes} bytes (cut between characters). */
    public static String truncated(String s, int maxBytes) {
        if (s.length() * 3L <= maxBytes || s.getBytes(StandardCharsets.UTF_8).length <= maxBytes) {
            return s;
        }
        int bytes = 0;
        int i = 0;
        while (i < s.length()) {
            int cp = s.codePointAt(i);
            int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            if (bytes + n > maxBytes) {
                break;
            }
            bytes += n;
            i += Character.charCount(cp);
        }
        return s.substring(0, i);
    }

    public MessageWriter u8(int value) {
        if (value < 0 || value > 255) {
            throw new IllegalArgumentException("a u8 field holds 0..255, not " + value);
        }
        room(1).put((byte) value);
        return this;
    }

    public MessageWriter bool(boolean value) {
        return u8(value ? 1 : 0);
    }

    public MessageWriter u16(int value) {
        if (value < 0 || value > 0xFFFF) {
            throw new IllegalArgumentException("a u16 field holds 0..65535, not " + value);
        }
        room(2).putShort((short) value);
        return this;
    }

    public MessageWriter i32(int value) {
        room(4).putInt(value);
        return this;
    }

    public MessageWriter i64(long value) {
        room(8).putLong(value);
        return this;
    }

    public <E extends Enum<E>> MessageWriter id(WireIds<E> ids, E value) {
        return u8(ids.id(value));
    }

    /** Bytes whose length the protocol fixes (a nonce, a MAC): no length goes on the wire. */
    public MessageWriter fixed(byte[] value) {
        room(value.length).put(value);
        return this;
    }

    /** {@code length:u16} and the UTF-8 of {@code value}, which must have at most {@code maxBytes} (≤ 65535) bytes. */
    public MessageWriter string(String field, String value, int maxBytes) {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > Math.min(maxBytes, 0xFFFF)) {
            throw new IllegalArgumentException(field + ": " + bytes.length + " bytes of UTF-8 is more than the "
                    + Math.min(maxBytes, 0xFFFF) + "-byte bound");
        }
        return u16(bytes.length).fixed(bytes);
    }

    /** {@code length:i32} and {@code value}, which must have at most {@code maxBytes} bytes. */
    public MessageWriter bytes(String field, byte[] value, int maxBytes) {
        if (value.length > maxBytes) {
            throw new IllegalArgumentException(field + ": " + value.length + " bytes is more than the " + maxBytes + "-byte bound");
        }
        return i32(value.length).fixed(value);
    }

    /** {@code value}'s remaining bytes with no length: what {@link MessageReader#rest()} reads (it is not moved). */
    public MessageWriter rest(ByteBuffer value) {
        ByteBuffer bytes = value.duplicate();
        room(bytes.remaining()).put(bytes);
        return this;
    }

    /** A remote-block descriptor {@code address:i64 rkey:i32 length:i32 crc32c:i32}. */
    public MessageWriter remoteBlock(long address, int rkey, int length, int crc32c) {
        room(MessageReader.REMOTE_BLOCK_BYTES).putLong(address).putInt(rkey).putInt(length).putInt(crc32c);
        return this;
    }

    /** The message, ready to send (with its CRC32C if the protocol is checksummed). The writer is done. */
    public ByteBuffer finish() {
        if (checksummed) {
            CRC32C crc = new CRC32C();
            crc.update(out.array(), 0, out.position());
            room(Protocol.CRC_BYTES).putInt((int) crc.getValue());
        }
        ByteBuffer message = out.flip();
        out = null;
        return message;
    }

    private ByteBuffer room(int bytes) {
        if (out == null) {
            throw new IllegalStateException("the message is finished");
        }
        if (out.remaining() < bytes) {
            int capacity = Math.max(out.capacity() * 2, out.position() + bytes);
            out = ByteBuffer.allocate(capacity).put(out.flip());
        }
        return out;
    }
}

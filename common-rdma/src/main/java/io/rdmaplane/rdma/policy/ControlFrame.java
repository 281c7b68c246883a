package io.rdmaplane.rdma.policy;

import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * A policy-layer message, carried as one two-sided provider message:
 * {@code type:u8 flags:u8 reserved:u16 requestId:i64 length:i32 payload crc32c:i32}, the CRC32C
 * covering everything before it. A frame that fails to decode is dropped by the receiver and
 * counted; the sender's retry covers it.
 */
record ControlFrame(Type type, long requestId, ByteBuffer payload) {
    static final int OVERHEAD = 1 + 1 + 2 + 8 + 4 + 4;

    enum Type {
        /** client → server: {@code version:i32 class:u8 instance:16B nonce:16B wantsAuth:u8}. */
        HELLO,
        /** server → client: {@code nonce:16B mac:32B}, the server's proof over both nonces. */
        CHALLENGE,
        /** client → server: {@code mac:32B}, the client's proof. */
        PROOF,
        /** server → client: regions are registered; the client may now READ and send requests. */
        READY,
        /** server → client: {@code reason (UTF-8)}; the server closes the channel after it. */
        REJECT,
        REQUEST,
        RESPONSE,
        /** The handler failed: {@code reason (UTF-8)}. Final, not retried. */
        ERROR,
        PING,
        PONG;

        private static final Type[] VALUES = values();
    }

    ControlFrame {
        payload = payload == null ? ByteBuffer.allocate(0) : payload;
    }

    static ControlFrame of(Type type, long requestId) {
        return new ControlFrame(type, requestId, null);
    }

    ByteBuffer encode() {
        ByteBuffer body = payload.duplicate();
        ByteBuffer out = ByteBuffer.allocate(OVERHEAD + body.remaining());
        out.put((byte) type.ordinal()).put((byte) 0).putShort((short) 0).putLong(requestId).putInt(body.remaining()).put(body);
        CRC32C crc = new CRC32C();
        crc.update(out.array(), 0, out.position());
        out.putInt((int) crc.getValue());
        return out.flip();
    }

    /**
     * Decodes a received message (consumed; the payload is copied, the buffer may be reused).
     *
     * @throws CorruptFrameException if the checksum, the length or the type is wrong
     */
    static ControlFrame decode(ByteBuffer message) throws CorruptFrameException {
        int size = message.remaining();
        if (size < OVERHEAD) {
            throw new CorruptFrameException("frame of " + size + " bytes is shorter than the " + OVERHEAD + "-byte minimum");
        }
        ByteBuffer in = message.slice();
        CRC32C crc = new CRC32C();
        crc.update(in.slice(0, size - 4));
        if ((int) crc.getValue() != in.getInt(size - 4)) {
            throw new CorruptFrameException("CRC32C mismatch on a " + size + "-byte frame");
        }
        int type = Byte.toUnsignedInt(in.get());
        in.get();
        in.getShort();
        long requestId = in.getLong();
        int length = in.getInt();
        if (length != size - OVERHEAD) {
            throw new CorruptFrameException("frame says " + length + " payload bytes but carries " + (size - OVERHEAD));
        }
        if (type >= Type.VALUES.length) {
            throw new CorruptFrameException("unknown frame type " + type);
        }
        ByteBuffer payload = ByteBuffer.allocate(length);
        payload.put(in.slice(in.position(), length)).flip();
        message.position(message.limit());
        return new ControlFrame(Type.VALUES[type], requestId, payload);
    }

    /** A received frame that must be dropped. */
    static final class CorruptFrameException extends Exception {
        CorruptFrameException(String message) {
            super(message);
        }
    }
}

package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.MessageReader;
import io.rdmaplane.rdma.codec.MessageWriter;
import io.rdmaplane.rdma.codec.Protocol;
import java.nio.ByteBuffer;

/**
 * A policy-layer message, carried as one two-sided provider message, in the shared codec's
 * checksummed form: {@code version:u8 type:u8 requestId:i64 payload crc32c:i32}, the CRC32C
 * covering everything before it and the payload running up to it. A frame that fails to decode
 * is dropped by the receiver and counted; the sender's retry covers it.
 */
record ControlFrame(Type type, long requestId, ByteBuffer payload) {
    /** 3: HELLO carries a credential (2 was the first on the shared codec; the hand-written frames said 1). */
    static final int VERSION = 3;
    /** The most bytes of a REJECT's or ERROR's reason; a longer one is cut. */
    static final int MAX_REASON_BYTES = 1024;

    enum Type {
        /** client → server: {@link Handshake.Hello}. */
        HELLO(0x01),
        /** server → client: {@link Handshake.Challenge}, the server's proof over both nonces. */
        CHALLENGE(0x02),
        /** client → server: {@link Handshake.Proof}, the client's proof. */
        PROOF(0x03),
        /**
         * server → client: regions are registered; the client may now READ and send requests. On a
         * control channel it carries the session its data channels name ({@link Handshake.Ready}).
         */
        READY(0x04),
        /** server → client: {@code reason:string}; the server closes the channel after it. */
        REJECT(0x05),
        /** client → server: the caller's request (a message of its own protocol). */
        REQUEST(0x06),
        /** server → client: the handler's answer to the request of the same id. */
        RESPONSE(0x07),
        /** The handler failed: {@code reason:string}. Final, not retried. */
        ERROR(0x08),
        PING(0x09),
        PONG(0x0A),
        /**
         * server → client: {@code reason:string}; the data channel names no live control session of
         * its peer (ended, another's, or none). The server closes the channel; the client connects
         * it again once its control channel has a session.
         */
        UNBOUND(0x0B);

        final int wireId;

        Type(int wireId) {
            this.wireId = wireId;
        }
    }

    static final Protocol<Type> PROTOCOL = Protocol.checksummed("control", VERSION, Type.class, t -> t.wireId);

    ControlFrame {
        payload = payload == null ? ByteBuffer.allocate(0) : payload;
    }

    static ControlFrame of(Type type, long requestId) {
        return new ControlFrame(type, requestId, null);
    }

    /** A REJECT or ERROR frame; a reason over {@value #MAX_REASON_BYTES} bytes is cut. */
    static ControlFrame withReason(Type type, long requestId, String reason) {
        return new ControlFrame(type, requestId, MessageWriter.body()
                .string("reason", MessageWriter.truncated(String.valueOf(reason), MAX_REASON_BYTES), MAX_REASON_BYTES).finish());
    }

    /** The reason a REJECT or ERROR frame carries. */
    String reason() throws MalformedMessageException {
        MessageReader<Void> r = MessageReader.body("control " + type, payload);
        String reason = r.string("reason", MAX_REASON_BYTES);
        r.end();
        return reason;
    }

    ByteBuffer encode() {
        return PROTOCOL.write(type).i64(requestId).rest(payload).finish();
    }

    /**
     * Decodes a received message (consumed; the payload is copied, the buffer may be reused).
     *
     * @throws MalformedMessageException if the checksum, the version or the type is wrong, or the frame is short
     */
    static ControlFrame decode(ByteBuffer message) throws MalformedMessageException {
        MessageReader<Type> r = PROTOCOL.read(message);
        long requestId = r.i64("requestId");
        ByteBuffer payload = r.rest();
        message.position(message.limit());
        return new ControlFrame(r.type(), requestId, payload);
    }
}

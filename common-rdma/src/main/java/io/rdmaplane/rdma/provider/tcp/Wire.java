package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.Status;

/**
 * The tcp provider's frames. Every frame starts with a fixed 25-byte header
 * {@code type:u8 id:i64 a:i64 b:i32 c:i32} (big-endian); READ_RESP and SEND are followed by
 * {@code c} payload bytes. Fixed headers keep the parser a two-state machine and let a
 * READ payload be read from the socket straight into the caller's registered buffer.
 * <pre>
 * HELLO      id=lane         a=MAGIC&lt;&lt;32|VERSION  b=max message size  c=queue depth
 * READ_REQ   id=request id   a=remote address     b=rkey               c=length
 * READ_RESP  id=request id   a=CRC32C of payload  b=status code        c=payload length (0 on error)
 * SEND       id=0            a=0                  b=0                  c=payload length
 * </pre>
 * A connector's HELLO names its channel's lane (0 bulk, 1 control): the acceptor serves the
 * channel on that lane's thread.
 * <p>A READ_RESP's {@code a} is the CRC32C (in its low 32 bits) of the payload as the responder sent it,
 * computed while its region is pinned; the requester checks it as the payload arrives and fails the
 * READ with {@code BAD_RESPONSE} on a mismatch, so no corrupted byte is ever completed as a READ. It is
 * this wire's ICRC: TCP's own 16-bit checksum covers only the kernel-to-kernel hop, not a relay,
 * a NIC offload or memory on the way (version 2 of the protocol; version 1 had no checksum).
 */
final class Wire {
    static final int HEADER_BYTES = 25;
    static final byte HELLO = 1;
    static final byte READ_REQ = 2;
    static final byte READ_RESP = 3;
    static final byte SEND = 4;
    static final long MAGIC = 0x52444d54L; // "RDMT"
    static final int VERSION = 2;

    private Wire() {
    }

    static long code(Lane lane) {
        return lane == Lane.CONTROL ? 1 : 0;
    }

    /** The lane a HELLO's code stands for, or null for a code the protocol does not define. */
    static Lane lane(long code) {
        return code == 0 ? Lane.BULK : code == 1 ? Lane.CONTROL : null;
    }

    /** Explicit wire codes, so reordering the enum never changes the protocol. */
    static int code(Status status) {
        return switch (status) {
            case SUCCESS -> 0;
            case REMOTE_ACCESS_ERROR -> 1;
            case REMOTE_INVALID_REQUEST -> 2;
            default -> throw new IllegalArgumentException("a responder never sends " + status);
        };
    }

    /** The status a READ_RESP code stands for, or null for a code the protocol does not define. */
    static Status status(int code) {
        return switch (code) {
            case 0 -> Status.SUCCESS;
            case 1 -> Status.REMOTE_ACCESS_ERROR;
            case 2 -> Status.REMOTE_INVALID_REQUEST;
            default -> null;
        };
    }
}

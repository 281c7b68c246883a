package io.rdmaplane.rdma.provider.verbs.impl;

import java.nio.ByteBuffer;

/**
 * What one SEND carries: a 4-byte header (type, reserved, credits as an unsigned short) and,
 * for DATA, the application's message (possibly empty). Credits are receive buffers the sender
 * re-posted since its last frame: the peer may send that many more (see VerbsChannel).
 *
 * <pre>
 * HELLO  body: int magic, int version, int maxMessageSize, int queueDepth, int receiveBuffers
 * DATA   body: the message
 * CREDIT body: none (returns credits when no DATA goes the other way)
 * </pre>
 * Byte order is big-endian (ByteBuffer's default) on both ends.
 */
final class Frames {
    static final int HEADER = 4;
    static final byte HELLO = 1;
    static final byte DATA = 2;
    static final byte CREDIT = 3;
    static final int MAGIC = 0x52444d56; // "RDMV"
    static final int VERSION = 1;
    static final int HELLO_BYTES = HEADER + 5 * Integer.BYTES;
    /** Room of a control slot (HELLO or CREDIT). */
    static final int CONTROL_SLOT = 64;

    private Frames() {
    }

    static void header(ByteBuffer at, int offset, byte type, int credits) {
        at.put(offset, type);
        at.put(offset + 1, (byte) 0);
        at.putShort(offset + 2, (short) credits);
    }

    static byte type(ByteBuffer at, int offset) {
        return at.get(offset);
    }

    static int credits(ByteBuffer at, int offset) {
        return Short.toUnsignedInt(at.getShort(offset + 2));
    }

    static int hello(ByteBuffer at, int offset, int maxMessageSize, int queueDepth, int receiveBuffers) {
        header(at, offset, HELLO, 0);
        at.putInt(offset + HEADER, MAGIC);
        at.putInt(offset + HEADER + 4, VERSION);
        at.putInt(offset + HEADER + 8, maxMessageSize);
        at.putInt(offset + HEADER + 12, queueDepth);
        at.putInt(offset + HEADER + 16, receiveBuffers);
        return HELLO_BYTES;
    }

    /** Rounds up to a cache line, so slots never share one. */
    static int align(int bytes) {
        return (bytes + 63) & ~63;
    }
}

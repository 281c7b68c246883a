package io.rdmaplane.rdma.provider.verbs.impl;

import io.rdmaplane.rdma.provider.ConnectRequest;
import io.rdmaplane.rdma.provider.Lane;
import java.nio.ByteBuffer;

/**
 * The private data of this provider's RDMA-CM connect: the channel's lane, then the caller's
 * {@link ConnectRequest#data()} untouched. The accepting end needs the lane before it creates
 * the QP (at the connect request), to put it on the lane's completion queue.
 * <pre>
 * lane:u8 (1 bulk, 2 control) length:u8 data:length bytes     (RoCE pads the rest with zeros)
 * </pre>
 */
record ConnectData(Lane lane, ByteBuffer data) {
    /** Bytes this provider takes of RDMA-CM's private data, ahead of the caller's. */
    static final int HEADER = 2;
    private static final byte BULK = 1;
    private static final byte CONTROL = 2;

    static byte[] encode(Lane lane, byte[] data) {
        if (data.length > ConnectRequest.MAX_DATA) {
            throw new IllegalArgumentException("connect data of " + data.length + " bytes; at most " + ConnectRequest.MAX_DATA);
        }
        byte[] out = new byte[HEADER + data.length];
        out[0] = lane == Lane.CONTROL ? CONTROL : BULK;
        out[1] = (byte) data.length;
        System.arraycopy(data, 0, out, HEADER, data.length);
        return out;
    }

    /** The lane and the caller's data of a connect request; a {@link IllegalArgumentException} naming what is wrong. */
    static ConnectData decode(ByteBuffer privateData) {
        ByteBuffer in = privateData.duplicate();
        if (in.remaining() < HEADER) {
            throw new IllegalArgumentException("a connect request of " + in.remaining() + " bytes, without this provider's lane");
        }
        int at = in.position();
        Lane lane = switch (in.get(at)) {
            case BULK -> Lane.BULK;
            case CONTROL -> Lane.CONTROL;
            default -> throw new IllegalArgumentException("a connect request for unknown lane " + in.get(at));
        };
        int length = in.get(at + 1) & 0xff;
        if (length > ConnectRequest.MAX_DATA || length > in.remaining() - HEADER) {
            throw new IllegalArgumentException("a connect request saying " + length + " bytes of data; it carries "
                    + (in.remaining() - HEADER));
        }
        return new ConnectData(lane, in.position(at + HEADER).limit(at + HEADER + length).slice().asReadOnlyBuffer());
    }
}

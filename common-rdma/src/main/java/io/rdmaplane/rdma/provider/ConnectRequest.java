package io.rdmaplane.rdma.provider;

import java.nio.ByteBuffer;

/**
 * What a connect carries besides the channel itself, for a listener that decides before a
 * channel exists ({@link ChannelAcceptor#admit}).
 *
 * @param data           bytes the listener reads before it accepts (verbs: RDMA-CM private data, at
 *                       most {@link #MAX_DATA} bytes); empty for none. The tcp provider does not send
 *                       them: its READs are checked one by one ({@link ChannelHandler#permitsRemoteRead}).
 * @param remoteReadable whether the peer may READ this end over the channel at all (verbs: false
 *                       offers the peer no responder resources, so the QP serves no READ)
 */
public record ConnectRequest(byte[] data, boolean remoteReadable) {
    /**
     * RDMA-CM's private data room in a connect request on a RoCE or InfiniBand port (56 bytes),
     * less the 2 the verbs provider puts first (the channel's lane).
     */
    public static final int MAX_DATA = 54;
    /** No data, and the peer may READ this end (the SPI's default: both ends of a channel may READ). */
    public static final ConnectRequest OPEN = new ConnectRequest(new byte[0], true);

    public ConnectRequest {
        data = data == null ? new byte[0] : data.clone();
        if (data.length > MAX_DATA) {
            throw new IllegalArgumentException("connect data of " + data.length + " bytes; at most " + MAX_DATA);
        }
    }

    @Override
    public byte[] data() {
        return data.clone();
    }

    /** The data as a read-only buffer. */
    public ByteBuffer dataBuffer() {
        return ByteBuffer.wrap(data).asReadOnlyBuffer();
    }
}

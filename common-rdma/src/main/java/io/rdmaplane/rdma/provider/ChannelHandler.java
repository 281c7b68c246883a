package io.rdmaplane.rdma.provider;

import java.nio.ByteBuffer;

/**
 * Callbacks of one channel. They run on the provider's transport thread: do not block in them.
 */
public interface ChannelHandler {
    /**
     * A message the peer sent. The buffer is valid only during the call; copy what you keep.
     * Messages arrive in the order the peer sent them.
     */
    default void onMessage(Channel channel, ByteBuffer message) {
    }

    /**
     * Whether the peer may READ this node's region {@code rkey} over this channel, asked before
     * each READ the peer sends; a refused READ ends {@link Status#REMOTE_ACCESS_ERROR} at the
     * peer, like one the region's access flags refuse. Open by default. An owner that
     * authenticates its peers answers false until the channel belongs to an authenticated
     * session (and then only for what that session was granted). The tcp provider asks on every
     * READ; the verbs provider, whose NIC serves READs without the CPU, does not ask: there the
     * listener decides per connect ({@link ChannelAcceptor#admit}) whether the QP serves READs at
     * all, and a connecting end says so in its {@link ConnectRequest}.
     */
    default boolean permitsRemoteRead(Channel channel, int rkey) {
        return true;
    }

    /** The channel closed or broke; {@code cause} is null for an orderly local close. */
    default void onClosed(Channel channel, TransportException cause) {
    }
}

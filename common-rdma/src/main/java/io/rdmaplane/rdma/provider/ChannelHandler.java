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

    /** The channel closed or broke; {@code cause} is null for an orderly local close. */
    default void onClosed(Channel channel, TransportException cause) {
    }
}

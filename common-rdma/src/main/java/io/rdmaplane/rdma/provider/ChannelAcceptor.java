package io.rdmaplane.rdma.provider;

/** Decides what handles a channel a peer opened to a listening node. */
@FunctionalInterface
public interface ChannelAcceptor {
    /** Returns the handler for {@code channel}; the channel is usable once this returns. */
    ChannelHandler accept(Channel channel);
}

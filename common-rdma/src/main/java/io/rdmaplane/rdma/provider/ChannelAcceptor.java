package io.rdmaplane.rdma.provider;

import java.net.SocketAddress;
import java.nio.ByteBuffer;

/** Decides what handles a channel a peer opened to a listening node. */
@FunctionalInterface
public interface ChannelAcceptor {
    /** Returns the handler for {@code channel}; the channel is usable once this returns. */
    ChannelHandler accept(Channel channel);

    /**
     * Whether to take a connect request at all, and whether its peer may READ this node over the
     * channel, from the {@link ConnectRequest#data() data} the request carried (empty for none).
     * Asked before any channel exists, on the transport thread: the verbs provider asks before it
     * creates a QP, since its NIC then serves READs without the CPU; the tcp provider, which checks
     * every READ ({@link ChannelHandler#permitsRemoteRead}), does not ask. Accepts by default.
     */
    default Admission admit(SocketAddress from, ByteBuffer connectData) {
        return Admission.ACCEPT;
    }

    /**
     * The {@link KeyDomain} an admitted request's channel joins (null: none), asked right after {@link #admit}
     * accepted it, before the channel exists: the verbs provider creates the channel's QP in it. The tcp
     * provider does not ask; it binds keys per channel ({@link io.rdmaplane.rdma.provider.PeerKey#bindTo}).
     */
    default KeyDomain keyDomain(SocketAddress from, ByteBuffer connectData) {
        return null;
    }
}

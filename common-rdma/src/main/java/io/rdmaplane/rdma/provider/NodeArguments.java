package io.rdmaplane.rdma.provider;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.Set;

/** The argument rules of {@link Node}'s methods, the same on every provider. */
public final class NodeArguments {
    private NodeArguments() {
    }

    /**
     * What {@link Node#register(ByteBuffer, Set)} accepts: a non-empty direct buffer, and no
     * {@link Access#LOCAL_WRITE} on a read-only one.
     *
     * @throws IllegalArgumentException otherwise
     */
    public static void checkRegister(ByteBuffer buffer, Set<Access> access) {
        Objects.requireNonNull(buffer, "buffer");
        Objects.requireNonNull(access, "access");
        if (!buffer.isDirect()) {
            throw new IllegalArgumentException("only direct buffers can be registered (as with ibv_reg_mr, memory must not move)");
        }
        if (!buffer.hasRemaining()) {
            throw new IllegalArgumentException("cannot register an empty buffer");
        }
        if (buffer.isReadOnly() && access.contains(Access.LOCAL_WRITE)) {
            throw new IllegalArgumentException("a read-only buffer cannot be registered with LOCAL_WRITE access");
        }
    }

    /**
     * What {@link Node#peerKey} accepts: a range of 1 or more bytes inside {@code region}.
     *
     * @throws IllegalArgumentException otherwise
     */
    public static void checkKeyRange(MemoryRegion region, long address, int length) {
        Objects.requireNonNull(region, "region");
        long offset = address - region.address();
        if (length < 1 || address < region.address() || offset > region.length() - (long) length) {
            throw new IllegalArgumentException("a key's range [0x" + Long.toHexString(address) + ", +" + length
                    + ") is not 1 or more bytes inside " + region);
        }
    }

    /**
     * What {@link Node#connect} accepts: a peer, a handler and a queue depth of at least 1.
     *
     * @throws IllegalArgumentException for a queue depth below 1
     */
    public static void checkConnect(InetSocketAddress peer, int queueDepth, ChannelHandler handler) {
        Objects.requireNonNull(peer, "peer");
        Objects.requireNonNull(handler, "handler");
        if (queueDepth < 1) {
            throw new IllegalArgumentException("queueDepth must be at least 1, was " + queueDepth);
        }
    }
}

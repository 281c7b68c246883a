package io.rdmaplane.rdma.provider;

import java.io.IOException;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

/**
 * A reliable, ordered, connected channel: an RC queue pair on verbs, a socket on tcp.
 * Operations complete asynchronously: normally on success, exceptionally with a
 * {@link TransportException} carrying the {@link Status}. At most {@link #queueDepth()}
 * operations are outstanding; one more fails at once with {@link Status#QUEUE_FULL}.
 * After any other error the channel is broken, as a verbs QP in the error state:
 * outstanding and later operations end {@link Status#FLUSHED}. Open a new channel.
 */
public interface Channel extends AutoCloseable {
    /** The largest READ the SPI accepts: rxe's maximum message size, kept on every provider. */
    int MAX_READ_BYTES = 8 << 20;

    /**
     * One-sided READ of {@code length} bytes at {@code remoteAddress} of the peer's region
     * {@code rkey} into {@code local} at {@code localOffset}. The peer's application code does
     * not run. {@code local} must be a valid region of this channel's node with
     * {@link Access#LOCAL_WRITE}, else the READ ends {@link Status#LOCAL_PROTECTION_ERROR}.
     *
     * @throws IllegalArgumentException if {@code length} is not in 1..{@link #MAX_READ_BYTES}
     */
    CompletableFuture<Void> read(long remoteAddress, int rkey, int length, MemoryRegion local, int localOffset);

    /**
     * Two-sided SEND of the buffer's remaining bytes; the peer's handler receives them.
     * Completes once the message has left this node (not when the peer has processed it).
     *
     * @throws IllegalArgumentException if the message is longer than {@link #maxMessageSize()}
     */
    CompletableFuture<Void> send(ByteBuffer message);

    int queueDepth();

    int maxMessageSize();

    /** Operations posted and not yet completed. */
    int outstanding();

    /**
     * {@link System#nanoTime()} of the last time the peer was heard from on this channel: bytes
     * arrived, or an operation completed (what this node posts or writes does not count). A large
     * READ on a busy host moves bytes long before it completes; a cut or hung link moves none.
     * Only differences between two values mean anything.
     */
    long lastHeardNanos();

    /** True until the channel is closed or broken. */
    boolean isOpen();

    SocketAddress remoteAddress();

    /** The provider's own channel under any wrapper (a test's fault injector): what a {@link PeerKey} binds to. */
    default Channel transport() {
        return this;
    }

    /**
     * From now on refuses every READ the peer sends on this channel: for a channel its owner is about
     * to refuse. A verbs QP serves READs in the NIC without asking the handler, so it loses its remote
     * access; tcp asks {@link ChannelHandler#permitsRemoteRead} for every READ and needs nothing more.
     */
    default void denyRemoteReads() throws IOException {
    }

    /**
     * Lets the peer READ this end from now on, on a channel admitted {@link Admission#ACCEPT_REMOTE_READ_LATER}
     * once its owner trusts it: a verbs QP gets remote read access; tcp asks
     * {@link ChannelHandler#permitsRemoteRead} for every READ and needs nothing more.
     */
    default void allowRemoteReads() throws IOException {
    }

    /** Closes the channel; outstanding operations end {@link Status#FLUSHED}. Idempotent. */
    @Override
    void close();
}

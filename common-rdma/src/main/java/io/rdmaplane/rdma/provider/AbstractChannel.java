package io.rdmaplane.rdma.provider;

import java.net.SocketAddress;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What every provider's channel shares: the argument checks of {@link #read} and
 * {@link #send}, the errors a channel reports (closed, queue full, no handshake, no progress,
 * protocol violation, rejected by the acceptor), how a closing channel settles its operations
 * and tells its handler, and the settings agreed at the handshake. A provider keeps its own
 * state, locking, posting and completions.
 */
public abstract class AbstractChannel implements Channel {
    /** The provider's logger (e.g. TcpChannel's), so its log settings cover these lines too. */
    private final Logger log = LoggerFactory.getLogger(getClass());

    /** The life of a channel: both providers open with a HELLO each way before any operation. */
    public enum State { CONNECTING, HANDSHAKE, OPEN, CLOSED }

    /** Fails what a closing channel had outstanding. */
    @FunctionalInterface
    protected interface Outstanding {
        /**
         * Fails the operation that caused the close (if any) with {@code culpritError} and every
         * other outstanding operation with {@code othersError}.
         *
         * @return how many operations failed
         */
        int failAll(TransportException culpritError, TransportException othersError);
    }

    private final int queueDepth;
    private final int localMaxMessageSize;
    private final Duration operationTimeout;
    private final Duration idleTimeout;
    private final long handshakeDeadline;
    /** Completed when a channel this node opened is ready; null for an accepted channel. */
    private final CompletableFuture<Channel> connected;
    private volatile ChannelHandler handler;
    private volatile int maxMessageSize;
    private volatile long lastProgress = System.nanoTime();
    private volatile long lastHeard = lastProgress;
    private volatile SocketAddress remote;

    /**
     * @param options   the node's settings (maximum message size, operation timeout)
     * @param handler   the handler, or null for an accepted channel until its acceptor chose one
     * @param connected the future of {@link Node#connect}, or null for an accepted channel
     * @param remote    the peer's address if known yet, else null
     */
    protected AbstractChannel(NodeOptions options, int queueDepth, ChannelHandler handler,
                              CompletableFuture<Channel> connected, SocketAddress remote) {
        this.queueDepth = queueDepth;
        this.localMaxMessageSize = options.maxMessageSize();
        this.maxMessageSize = localMaxMessageSize;
        this.operationTimeout = options.operationTimeout();
        this.idleTimeout = options.idleTimeout();
        this.handler = handler;
        this.connected = connected;
        this.remote = remote;
        this.handshakeDeadline = System.nanoTime() + operationTimeout.toNanos();
    }

    // ---------------------------------------------------------------- argument checks

    /** @throws IllegalArgumentException unless {@code length} is 1..{@link #MAX_READ_BYTES} */
    protected static void checkReadLength(int length) {
        if (length < 1 || length > MAX_READ_BYTES) {
            throw new IllegalArgumentException("READ length must be 1.." + MAX_READ_BYTES + " bytes (split larger blocks), was "
                    + length);
        }
    }

    /** @throws IllegalArgumentException if a message of {@code length} bytes exceeds {@link #maxMessageSize()} */
    protected final void checkMessageLength(int length) {
        int max = maxMessageSize;
        if (length > max) {
            throw new IllegalArgumentException("message of " + length + " bytes exceeds the channel's maximum of "
                    + max + " (maxMessageSize)");
        }
    }

    // ---------------------------------------------------------------- errors

    /** What an operation on a closed (or broken) channel ends with. */
    protected final TransportException closedError() {
        return new TransportException(Status.FLUSHED, this + " is closed");
    }

    /** What an operation posted at the queue depth ends with; the channel stays usable. */
    protected final TransportException queueFullError() {
        return new TransportException(Status.QUEUE_FULL, "queue depth " + queueDepth + " reached on " + this);
    }

    /**
     * The timeout that ends the channel now, or null: the handshake is not done within the
     * operation timeout, or operations are outstanding with no progress for that long.
     */
    protected final TransportException timeoutError(long now, State state, int outstanding) {
        if (state == State.CONNECTING || state == State.HANDSHAKE) {
            if (now - handshakeDeadline > 0) {
                return new TransportException(Status.RETRY_EXCEEDED, "no handshake with " + remote + " within "
                        + operationTimeout.toMillis() + " ms");
            }
        } else if (state == State.OPEN && outstanding > 0 && now - lastProgress > operationTimeout.toNanos()) {
            return new TransportException(Status.RETRY_EXCEEDED, "no progress from " + remote + " for "
                    + TimeUnit.NANOSECONDS.toMillis(now - lastProgress) + " ms with " + outstanding
                    + " operations outstanding (operationTimeout)");
        }
        return null;
    }

    /**
     * The error that closes an idle accepted channel now, or null: open, nothing outstanding, and no
     * byte moved either way for the idle timeout. (A provider calls it only where it sees every
     * byte a peer makes it move, as tcp does.)
     */
    protected final TransportException idleError(long now, State state, int outstanding) {
        if (accepted() && state == State.OPEN && outstanding == 0 && now - lastProgress > idleTimeout.toNanos()) {
            return new TransportException(Status.FLUSHED, "channel from " + remote + " idle for "
                    + TimeUnit.NANOSECONDS.toMillis(now - lastProgress) + " ms (idleTimeout)");
        }
        return null;
    }

    /** Logs a protocol violation by the peer and returns the error that closes the channel for it. */
    protected final TransportException protocolViolation(String what) {
        log.warn("{}: protocol violation from {}: {}; closing the channel", this, remote, what);
        return new TransportException(Status.BAD_RESPONSE, "protocol violation from " + remote + ": " + what);
    }

    // ---------------------------------------------------------------- handshake

    /** Asks the acceptor for this accepted channel's handler; null (logged if it threw) rejects the channel. */
    protected final ChannelHandler askAcceptor(ChannelAcceptor acceptor) {
        try {
            return acceptor.accept(this);
        } catch (RuntimeException e) {
            log.warn("{}: the acceptor failed for a channel from {}; closing it", this, remote, e);
            return null;
        }
    }

    /** What closes a channel its acceptor rejected. */
    protected final TransportException rejectedError() {
        return new TransportException(Status.FLUSHED, "channel from " + remote + " rejected by the acceptor");
    }

    /** The peer's HELLO announced its largest message: messages of both ends stay within both limits. */
    protected final void agreeMaxMessageSize(int peerMaxMessageSize) {
        maxMessageSize = Math.min(localMaxMessageSize, peerMaxMessageSize);
    }

    /** A channel this node opened is ready: its connect future completes. */
    protected final void connectDone() {
        connected.complete(this);
    }

    // ---------------------------------------------------------------- close

    /**
     * Settles a channel that has just moved to {@link State#CLOSED} (call once, holding no
     * lock): a channel that never opened fails its connect future and nothing else happens;
     * otherwise {@code outstanding} fails the culprit with {@code cause} and every other
     * operation with {@code others} (the cause itself when it has that status), the close is
     * logged (WARN when operations failed) and the handler hears {@code cause}. A null cause is
     * an orderly local close: operations end with {@link #closedError()} and the handler hears null.
     */
    protected final void settleClosed(TransportException cause, Status others, Outstanding outstanding) {
        TransportException reason = cause != null ? cause : closedError();
        if (connected != null && !connected.isDone()) {
            connected.completeExceptionally(reason);
            return;
        }
        TransportException rest = others == reason.status() ? reason
                : new TransportException(others, this + " broke: " + reason.getMessage(), reason);
        int failed = outstanding.failAll(reason, rest);
        if (cause != null) {
            if (failed > 0) {
                log.warn("{}: closed with {} operations failed: {}", this, failed, cause.getMessage());
            } else {
                log.debug("{}: closed: {}", this, cause.getMessage());
            }
        }
        ChannelHandler h = handler;
        if (h != null) {
            try {
                h.onClosed(this, cause);
            } catch (RuntimeException e) {
                log.error("{}: onClosed handler failed", this, e);
            }
        }
    }

    // ---------------------------------------------------------------- shared state

    /** The peer made progress (bytes moved, a completion): the operation timeout counts from now. */
    protected final void progress() {
        lastProgress = System.nanoTime();
    }

    /** The peer was heard from (bytes arrived, an operation completed): progress, and a sign of life. */
    protected final void heard() {
        long now = System.nanoTime();
        lastProgress = now;
        lastHeard = now;
    }

    @Override
    public final long lastHeardNanos() {
        return lastHeard;
    }

    protected final boolean accepted() {
        return connected == null;
    }

    protected final ChannelHandler handler() {
        return handler;
    }

    protected final void handler(ChannelHandler chosen) {
        handler = chosen;
    }

    protected final void remote(SocketAddress address) {
        remote = address;
    }

    @Override
    public final int queueDepth() {
        return queueDepth;
    }

    @Override
    public final int maxMessageSize() {
        return maxMessageSize;
    }

    @Override
    public final SocketAddress remoteAddress() {
        return remote;
    }
}

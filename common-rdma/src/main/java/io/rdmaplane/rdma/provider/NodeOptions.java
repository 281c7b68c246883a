package io.rdmaplane.rdma.provider;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;

/**
 * Settings of one {@link Node}.
 *
 * @param bindAddress      where {@link Node#listen} accepts channels (port 0 picks a free one)
 * @param maxMessageSize   largest two-sided message, in bytes, both directions
 * @param operationTimeout an outstanding operation with no progress from the peer for this
 *                         long fails the channel with {@link Status#RETRY_EXCEEDED}; so does a peer
 *                         that takes none of the bytes waiting for it (READ responses on tcp) for this long
 * @param acceptQueueDepth queue depth of channels this node accepts
 * @param idleTimeout      an accepted channel that moved no byte either way for this long is closed
 *                         (tcp; on verbs the one-sided READs a server serves are invisible to it)
 * @param verbs            what only the verbs provider reads (others ignore it)
 */
public record NodeOptions(InetSocketAddress bindAddress, int maxMessageSize, Duration operationTimeout,
                          int acceptQueueDepth, Duration idleTimeout, VerbsOptions verbs) {
    /** The default {@link #idleTimeout}: long enough that a client between two stages keeps its channels. */
    public static final Duration DEFAULT_IDLE_TIMEOUT = Duration.ofMinutes(10);

    public NodeOptions {
        Objects.requireNonNull(bindAddress, "bindAddress");
        Objects.requireNonNull(operationTimeout, "operationTimeout");
        Objects.requireNonNull(idleTimeout, "idleTimeout");
        Objects.requireNonNull(verbs, "verbs");
        if (maxMessageSize < 64) {
            throw new IllegalArgumentException("maxMessageSize must be at least 64 bytes, was " + maxMessageSize);
        }
        if (operationTimeout.isNegative() || operationTimeout.isZero()) {
            throw new IllegalArgumentException("operationTimeout must be positive, was " + operationTimeout);
        }
        if (acceptQueueDepth < 1) {
            throw new IllegalArgumentException("acceptQueueDepth must be at least 1, was " + acceptQueueDepth);
        }
        if (idleTimeout.isNegative() || idleTimeout.isZero()) {
            throw new IllegalArgumentException("idleTimeout must be positive, was " + idleTimeout);
        }
    }

    /** With the {@linkplain #DEFAULT_IDLE_TIMEOUT default idle timeout}. */
    public NodeOptions(InetSocketAddress bindAddress, int maxMessageSize, Duration operationTimeout, int acceptQueueDepth,
                       VerbsOptions verbs) {
        this(bindAddress, maxMessageSize, operationTimeout, acceptQueueDepth, DEFAULT_IDLE_TIMEOUT, verbs);
    }

    /** With the {@linkplain VerbsOptions#defaults() default verbs settings} and idle timeout. */
    public NodeOptions(InetSocketAddress bindAddress, int maxMessageSize, Duration operationTimeout, int acceptQueueDepth) {
        this(bindAddress, maxMessageSize, operationTimeout, acceptQueueDepth, VerbsOptions.defaults());
    }

    /** Loopback, free port, 64 KiB messages, 2 s operation timeout, accepted depth 256. */
    public static NodeOptions loopback() {
        return new NodeOptions(new InetSocketAddress("127.0.0.1", 0), 64 << 10, Duration.ofSeconds(2), 256);
    }

    public NodeOptions withOperationTimeout(Duration timeout) {
        return new NodeOptions(bindAddress, maxMessageSize, timeout, acceptQueueDepth, idleTimeout, verbs);
    }

    public NodeOptions withIdleTimeout(Duration timeout) {
        return new NodeOptions(bindAddress, maxMessageSize, operationTimeout, acceptQueueDepth, timeout, verbs);
    }

    public NodeOptions withVerbs(VerbsOptions settings) {
        return new NodeOptions(bindAddress, maxMessageSize, operationTimeout, acceptQueueDepth, idleTimeout, settings);
    }
}

package io.rdmaplane.rdma.provider;

/**
 * How an operation ended: the verbs work-completion statuses that upper layers act on.
 * Every completion error status also moves the channel to its error state (QUEUE_FULL and
 * UNAVAILABLE are not completions),
 * as an RC queue pair does: later operations on it end {@link #FLUSHED}.
 */
public enum Status {
    SUCCESS,
    /** The peer refused a READ: unknown or revoked rkey, out of the region's bounds, or no remote-read access. */
    REMOTE_ACCESS_ERROR,
    /** The peer could not take the request (malformed, or larger than it allows). */
    REMOTE_INVALID_REQUEST,
    /** The peer answered with something the protocol does not allow (verbs: bad response). */
    BAD_RESPONSE,
    /** The peer is gone or stopped answering within the operation timeout. */
    RETRY_EXCEEDED,
    /**
     * A connect was turned away: nothing listens at the peer's address and port (the process is gone or not
     * started yet; tcp: connection refused, verbs: the connect request rejected), or the peer refused it.
     */
    CONNECTION_REFUSED,
    /** The channel was closed or broken while the operation was outstanding. */
    FLUSHED,
    /** The local buffer is not inside a valid local region with the access the operation needs. */
    LOCAL_PROTECTION_ERROR,
    /** The provider or node cannot do this here at all: no usable device, cannot listen, cannot start. */
    UNAVAILABLE,
    /** The channel's queue depth was already reached; nothing was posted and the channel stays usable. */
    QUEUE_FULL
}

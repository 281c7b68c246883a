package io.rdmaplane.rdma.policy;

/** States of one managed channel to a peer. */
public enum ChannelState {
    /** Opening the connection and handshaking (auth, then waiting for the server's READY). */
    CONNECTING,
    /** Usable: work is posted. */
    READY,
    /** Work outstanding and no progress within the detection window; a probe is out. */
    SUSPECT,
    /** The old channel is closed; a new one is being built after a backoff. */
    RECONNECTING,
    /** Gave up after the maximum attempts (or a refused handshake): callers fall back. */
    FAILED,
    /** Closed by its owner. */
    CLOSED
}

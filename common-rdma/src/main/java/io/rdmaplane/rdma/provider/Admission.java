package io.rdmaplane.rdma.provider;

/** A listener's answer to a connect request, given before any channel (verbs: any QP) exists. */
public enum Admission {
    /** Refused: no channel is created (verbs: the request is rejected, no QP). */
    REFUSE,
    /** Accepted; the peer may not READ this end over the channel (verbs: the QP serves no READ). */
    ACCEPT_WITHOUT_REMOTE_READ,
    /**
     * Accepted; the peer may READ this end once the listener allows it ({@link Channel#allowRemoteReads}),
     * and not before (verbs: the QP is connected able to serve READs, but with no remote access until then).
     */
    ACCEPT_REMOTE_READ_LATER,
    /** Accepted; the peer may READ this end's regions whose rkeys it holds. */
    ACCEPT
}

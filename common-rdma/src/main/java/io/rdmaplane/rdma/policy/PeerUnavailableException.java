package io.rdmaplane.rdma.policy;

import java.io.IOException;

/** The policy layer gave up on a peer (or was closed): the caller falls back to its other path. */
public class PeerUnavailableException extends IOException {
    public PeerUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}

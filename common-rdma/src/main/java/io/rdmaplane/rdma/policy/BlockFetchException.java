package io.rdmaplane.rdma.policy;

import java.io.IOException;

/**
 * A block could not be delivered intact: the peer refused the READ (revoked rkey, out of
 * bounds), or its bytes failed the checksum twice. Never retried further: the caller falls back.
 */
public class BlockFetchException extends IOException {
    private final boolean checksumMismatch;

    public BlockFetchException(String message, boolean checksumMismatch, Throwable cause) {
        super(message, cause);
        this.checksumMismatch = checksumMismatch;
    }

    public boolean isChecksumMismatch() {
        return checksumMismatch;
    }
}

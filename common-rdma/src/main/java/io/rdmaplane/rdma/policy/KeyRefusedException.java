package io.rdmaplane.rdma.policy;

/**
 * The peer refused a READ's key or range (REMOTE_ACCESS_ERROR): the grant it was made with is gone (its
 * session ended, its window went with an earlier data channel, the region was revoked) or never covered
 * it. Not a link fault: the READ is not re-issued and the peer is not reconnected for it. The reader asks
 * for a new grant (Spark: LOCATE again; HDFS: ask the DataNode again with the block token), a bounded number
 * of times, and then falls back.
 */
public final class KeyRefusedException extends BlockFetchException {
    public KeyRefusedException(String message, Throwable cause) {
        super(message, false, cause);
    }
}

package io.rdmaplane.rdma.provider;

/** Access rights of a registered {@link MemoryRegion}, as in {@code ibv_reg_mr(3)}. */
public enum Access {
    /** The local node may write into the region (needed to READ into it or receive into it). */
    LOCAL_WRITE,
    /** Peers may READ the region with its rkey. The default for exposed regions. */
    REMOTE_READ
}

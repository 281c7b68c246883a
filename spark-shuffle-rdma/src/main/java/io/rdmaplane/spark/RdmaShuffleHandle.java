package io.rdmaplane.spark;

import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleHandle;

/**
 * Spark's own handle for a shuffle (the sort manager chose it: bypass-merge, serialized or
 * sort) plus the shuffle-level decision whether its blocks are published and fetched over RDMA.
 * Writers and readers unwrap it before they call the sort manager.
 */
public final class RdmaShuffleHandle<K, V, C> extends ShuffleHandle {
    private static final long serialVersionUID = 1L;

    private final BaseShuffleHandle<K, V, C> delegate;
    private final boolean rdma;

    public RdmaShuffleHandle(BaseShuffleHandle<K, V, C> delegate, boolean rdma) {
        super(delegate.shuffleId());
        this.delegate = delegate;
        this.rdma = rdma;
    }

    /** The sort manager's handle. */
    public BaseShuffleHandle<K, V, C> delegate() {
        return delegate;
    }

    /** Whether this shuffle uses the RDMA path (false: Spark's standard path for the whole shuffle). */
    public boolean rdma() {
        return rdma;
    }

    @Override
    public String toString() {
        return "RdmaShuffleHandle(" + shuffleId() + ", rdma=" + rdma + ", " + delegate.getClass().getSimpleName() + ")";
    }
}

package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.spark.ShuffleMetrics;
import java.io.File;

/** Committed map outputs of this executor as Arrow segments in registered memory (REMOTE_READ only), under a cap. */
public final class MapOutputStore implements AutoCloseable {
    public MapOutputStore(Node node, long capacityBytes, ShuffleMetrics metrics) {
        throw new UnsupportedOperationException("not yet");
    }

    /** Frames and registers every non-empty partition of a committed map output; false if over cap/failed (logged, counted). */
    public boolean publish(int shuffleId, long mapId, File dataFile, long[] partitionLengths) {
        throw new UnsupportedOperationException("not yet");
    }

    /** The registered segment of one block, or null if not held. */
    public RemoteBlock locate(int shuffleId, long mapId, int reduceId) {
        throw new UnsupportedOperationException("not yet");
    }

    /** Deregisters (rkeys revoked) and frees every map output of the shuffle. */
    public void removeShuffle(int shuffleId) {
        throw new UnsupportedOperationException("not yet");
    }

    public long usedBytes() {
        throw new UnsupportedOperationException("not yet");
    }

    @Override
    public void close() {
        throw new UnsupportedOperationException("not yet");
    }
}

package io.rdmaplane.spark;

import io.rdmaplane.spark.serve.MapOutputStore;
import java.io.IOException;
import java.util.function.Supplier;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.Product2;
import scala.collection.Iterator;

/**
 * Spark's own writer (bypass-merge, unsafe/serialized or sort, with its spills) plus one step
 * after a successful commit: the map output's partitions are published for RDMA READ, before
 * the MapStatus goes back, so a reducer that learns of the output can LOCATE its blocks. A
 * failed publish only logs: the files are on disk and Netty serves them. The store is asked for
 * then (null: RDMA is off in this executor, and Netty serves the output).
 */
final class RdmaShuffleWriter<K, V> extends ShuffleWriter<K, V> {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaShuffleWriter.class);

    private final ShuffleWriter<K, V> delegate;
    private final int shuffleId;
    private final long mapId;
    private final IndexShuffleBlockResolver resolver;
    private final Supplier<MapOutputStore> store;

    RdmaShuffleWriter(ShuffleWriter<K, V> delegate, int shuffleId, long mapId, IndexShuffleBlockResolver resolver,
                      Supplier<MapOutputStore> store) {
        this.delegate = delegate;
        this.shuffleId = shuffleId;
        this.mapId = mapId;
        this.resolver = resolver;
        this.store = store;
    }

    @Override
    public void write(Iterator<Product2<K, V>> records) throws IOException {
        delegate.write(records);
    }

    @Override
    public Option<MapStatus> stop(boolean success) {
        Option<MapStatus> status = delegate.stop(success);
        if (success && status.isDefined()) {
            publish();
        }
        return status;
    }

    private void publish() {
        try {
            long[] lengths = delegate.getPartitionLengths();
            long total = 0;
            for (long length : lengths) {
                total += length;
            }
            if (total == 0) {
                return; // nothing to serve: every partition is empty
            }
            MapOutputStore to = store.get();
            if (to == null) {
                return;
            }
            to.publish(shuffleId, mapId, resolver.getDataFile(shuffleId, mapId), lengths);
        } catch (RuntimeException e) {
            LOG.warn("RDMA shuffle: publishing map output {} of shuffle {} failed; Netty serves it", mapId, shuffleId, e);
        }
    }

    @Override
    public long[] getPartitionLengths() {
        return delegate.getPartitionLengths();
    }
}

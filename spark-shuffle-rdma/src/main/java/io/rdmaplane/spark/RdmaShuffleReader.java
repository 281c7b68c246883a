package io.rdmaplane.spark;

import java.io.InputStream;
import java.io.Serializable;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.function.Supplier;
import org.apache.spark.Aggregator;
import org.apache.spark.InterruptibleIterator;
import org.apache.spark.MapOutputTracker;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.internal.config.package$;
import org.apache.spark.network.shuffle.BlockStoreClient;
import org.apache.spark.serializer.SerializerInstance;
import org.apache.spark.serializer.SerializerManager;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockFetcherIterator;
import org.apache.spark.util.SystemClock;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Function1;
import scala.Option;
import scala.Product2;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.Seq;

/**
 * Reads the combined records of one reduce task: Spark's {@code BlockStoreShuffleReader.read()}
 * written in Java, except that the {@link ShuffleBlockFetcherIterator} it builds gets the given
 * {@link BlockStoreClient} (the RDMA one) instead of the block manager's. So Spark still reads
 * local blocks locally, bounds bytes and requests in flight, unwraps compression and encryption,
 * detects corruption, records fetch metrics and raises {@code FetchFailedException}; then records
 * are deserialized, aggregated and sorted as Spark's reader does.
 *
 * <p>Batch fetch of contiguous blocks is off: a batch is one Netty request for several blocks,
 * which the RDMA client has no block-level location for.
 */
final class RdmaShuffleReader<K, C> implements ShuffleReader<K, C> {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(RdmaShuffleReader.class);
    private final BaseShuffleHandle<K, ?, C> handle;
    private final List<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> blocksByAddress;
    private final TaskContext context;
    private final ShuffleReadMetricsReporter readMetrics;
    private final Supplier<BlockStoreClient> client;

    /**
     * @param blocksByAddress what {@code MapOutputTracker.getMapSizesByExecutorId} returned, materialized
     * @param client          builds the client the fetcher uses, once, when {@link #read()} starts
     */
    RdmaShuffleReader(BaseShuffleHandle<K, ?, C> handle,
                      List<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> blocksByAddress,
                      TaskContext context, ShuffleReadMetricsReporter readMetrics, Supplier<BlockStoreClient> client) {
        this.handle = handle;
        this.blocksByAddress = blocksByAddress;
        this.context = context;
        this.readMetrics = readMetrics;
        this.client = client;
    }

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public Iterator<Product2<K, C>> read() {
        SparkEnv env = SparkEnv.get();
        SparkConf conf = env.conf();
        package$ config = package$.MODULE$;
        SerializerManager serializerManager = env.serializerManager();
        BlockManager blockManager = env.blockManager();
        MapOutputTracker tracker = env.mapOutputTracker();
        BlockStoreClient blockClient = client.get();
        // Registered before the fetcher registers its clean-up: listeners run in reverse order, so the
        // task's RDMA client is closed after the fetcher has released its buffers.
        context.addTaskCompletionListener((TaskCompletionListener) ctx -> {
            try {
                blockClient.close();
            } catch (java.io.IOException | RuntimeException e) {
                LOG.warn("RDMA shuffle: closing the block client of task {} failed", ctx.taskAttemptId(), e);
            }
        });
        ShuffleBlockFetcherIterator fetcher = new ShuffleBlockFetcherIterator(
                context,
                blockClient,
                blockManager,
                tracker,
                new JavaIterator<>(blocksByAddress.iterator()),
                (BlockId blockId, InputStream in) -> serializerManager.wrapStream(blockId, in),
                // spark.reducer.maxSizeInFlight is read in MiB, as Spark's reader does
                (Long) conf.get(config.REDUCER_MAX_SIZE_IN_FLIGHT()) * 1024 * 1024,
                (Integer) conf.get(config.REDUCER_MAX_REQS_IN_FLIGHT()),
                (Integer) conf.get(config.REDUCER_MAX_BLOCKS_IN_FLIGHT_PER_ADDRESS()),
                (Long) conf.get(config.MAX_REMOTE_BLOCK_SIZE_FETCH_TO_MEM()),
                (Integer) conf.get(config.SHUFFLE_MAX_ATTEMPTS_ON_NETTY_OOM()),
                (Boolean) conf.get(config.SHUFFLE_DETECT_CORRUPT()),
                (Boolean) conf.get(config.SHUFFLE_DETECT_CORRUPT_MEMORY()),
                (Boolean) conf.get(config.SHUFFLE_CHECKSUM_ENABLED()),
                conf.get(config.SHUFFLE_CHECKSUM_ALGORITHM()),
                readMetrics,
                false,
                new SystemClock());
        Iterator<Tuple2<BlockId, InputStream>> streams = fetcher.toCompletionIterator();

        ShuffleDependency<K, ?, C> dep = handle.dependency();
        SerializerInstance serializer = dep.serializer().newInstance();
        Iterator<Product2<Object, Object>> records = new RecordIterator(streams, serializer);
        InterruptibleIterator<Product2<Object, Object>> interruptible = new InterruptibleIterator<>(context, records);

        Option<Aggregator<K, Object, C>> aggregator = (Option) dep.aggregator();
        Iterator<? extends Product2<K, C>> result;
        if (dep.keyOrdering().isDefined()) {
            ExternalSorter sorter;
            if (aggregator.isDefined()) {
                if (dep.mapSideCombine()) {
                    // the values are combiners already: merge them, never create one
                    Aggregator<K, Object, C> agg = aggregator.get();
                    Function1<C, C> identity = (Function1<C, C> & Serializable) c -> c;
                    sorter = SparkLine.CURRENT.sorter(context,
                            Option.apply(new Aggregator<K, C, C>(identity, agg.mergeCombiners(), agg.mergeCombiners())),
                            dep.keyOrdering(), dep.serializer());
                } else {
                    sorter = SparkLine.CURRENT.sorter(context, aggregator, dep.keyOrdering(), dep.serializer());
                }
            } else {
                sorter = SparkLine.CURRENT.<K, C, C>sorter(context, Option.empty(), dep.keyOrdering(), dep.serializer());
            }
            result = sorter.insertAllAndUpdateMetrics((Iterator) interruptible);
        } else if (aggregator.isDefined()) {
            if (dep.mapSideCombine()) {
                result = ((Aggregator<K, C, C>) (Aggregator) aggregator.get())
                        .combineCombinersByKey((Iterator) interruptible, context);
            } else {
                result = aggregator.get().combineValuesByKey((Iterator) interruptible, context);
            }
        } else {
            result = (Iterator) interruptible;
        }
        if (result instanceof InterruptibleIterator) {
            return (Iterator<Product2<K, C>>) result;
        }
        // The aggregator or sorter consumed the first interruptible iterator: cancellation needs another.
        return new InterruptibleIterator<Product2<K, C>>(context, (Iterator<Product2<K, C>>) result);
    }

    /**
     * A Java iterator as a Scala one. Written here rather than taken from Scala's converters, which Scala 2.12
     * and 2.13 name differently ({@code JavaConverters} and {@code scala.jdk.javaapi.CollectionConverters}):
     * {@code AbstractIterator} is the same on both, so the reader compiles unchanged on every line.
     */
    private static final class JavaIterator<T> extends AbstractIterator<T> {
        private final java.util.Iterator<T> it;

        JavaIterator(java.util.Iterator<T> it) {
            this.it = it;
        }

        @Override
        public boolean hasNext() {
            return it.hasNext();
        }

        @Override
        public T next() {
            return it.next();
        }
    }

    /**
     * The records of every fetched stream in turn. Counts each record read, and when the last
     * stream is exhausted merges this task's shuffle read metrics (once), as Spark's reader does.
     */
    private final class RecordIterator extends AbstractIterator<Product2<Object, Object>> {
        private final Iterator<Tuple2<BlockId, InputStream>> streams;
        private final SerializerInstance serializer;
        private Iterator<Tuple2<Object, Object>> current = new JavaIterator<>(java.util.Collections.emptyIterator());
        private boolean completed;

        RecordIterator(Iterator<Tuple2<BlockId, InputStream>> streams, SerializerInstance serializer) {
            this.streams = streams;
            this.serializer = serializer;
        }

        @Override
        public boolean hasNext() {
            while (!current.hasNext()) {
                if (!streams.hasNext()) {
                    if (!completed) {
                        completed = true;
                        context.taskMetrics().mergeShuffleReadMetrics();
                    }
                    return false;
                }
                // closes the stream once its records are read
                current = serializer.deserializeStream(streams.next()._2()).asKeyValueIterator();
            }
            return true;
        }

        @Override
        public Product2<Object, Object> next() {
            if (!hasNext()) {
                throw new NoSuchElementException("no more shuffle records");
            }
            readMetrics.incRecordsRead(1);
            return current.next();
        }
    }
}

package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.format.ArrowBlock;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.spark.ShuffleMetrics;
import io.rdmaplane.spark.serve.MapOutputPublisher.Held;
import io.rdmaplane.spark.serve.MapOutputPublisher.MapOutput;
import io.rdmaplane.spark.serve.MapOutputPublisher.OverCapException;
import java.io.File;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * This executor's committed map outputs, each non-empty partition framed as one Arrow IPC
 * block ({@link ArrowBlock}: shuffle, map and partition id in its metadata, the partition's raw,
 * already compressed/encrypted bytes as payload) in memory registered with REMOTE_READ only, so
 * reducers READ them one-sidedly. At most {@code capacityBytes} are registered at once.
 *
 * <p>Two ways to publish, one class each, chosen in {@link #publish}:
 * <ul>
 * <li>{@link MappedPublisher} (the default, where the provider can register file mappings: tcp;
 *     verbs on kernels from 6.2): the data file's read-only mapping is registered as it is (one
 *     registration per map output), a segment's payload is READ from it and its Arrow framing
 *     travels in the LOCATE answer ({@link #block});</li>
 * <li>{@link CopyingPublisher} (verbs on kernels before 6.2, whose first refusal switches this store
 *     to copies for good; or {@code mapFiles} false): one copy per map output in regions of its own,
 *     a segment one piece, the memory recycled after a quarantine. Registered for grants
 *     ({@link Node#registerForGrants}).</li>
 * </ul>
 * Every LOCATE grant, of either kind, is a key of its own over the block's bytes, READ on the reducer's
 * data channels only: on tcp the provider checks it per READ; on verbs it is a registration of the block's
 * bytes in the reducer process's key domain (see {@link #keyBinding}). Either way a map output costs its
 * registrations once per map task (not per IO), and on verbs each block a key registration per reducer
 * process that LOCATEs it; it exposes exactly its segments (REMOTE_READ only), and {@link #removeShuffle}
 * deregisters it and every key over it: a later READ fails with REMOTE_ACCESS_ERROR.
 *
 * <p>Thread-safe: map tasks publish concurrently, LOCATE is answered on a transport thread,
 * {@link #removeShuffle} may race both.
 */
public final class MapOutputStore implements AutoCloseable {
    /** Metadata keys of every segment, checked by the reducer against the block it asked for. */
    public static final String SHUFFLE_ID_KEY = "spark.shuffle.id";
    public static final String MAP_ID_KEY = "spark.map.id";
    public static final String PARTITION_ID_KEY = "spark.partition.id";
    /** Segments are packed into regions of at most this many bytes (one segment may exceed it alone). */
    public static final long MAX_REGION_BYTES = 1L << 30;
    /** Seconds the memory of a deregistered map output waits before a later publish reuses it. */
    public static final int DEFAULT_QUARANTINE_SECONDS = 5;
    /** The default of {@code spark.shuffle.rdma.mapOutput.maxPublishFailures}. */
    public static final int DEFAULT_MAX_PUBLISH_FAILURES = 3;

    private static final Logger LOG = LoggerFactory.getLogger(MapOutputStore.class);

    private final Node node;
    private final ShuffleMetrics metrics;
    private final RegisteredBytes cap;
    private final Map<Integer, ShuffleOutputs> shuffles = new ConcurrentHashMap<>();
    private final Set<Integer> removed = ConcurrentHashMap.newKeySet();
    private final Set<Integer> overCapLogged = ConcurrentHashMap.newKeySet();
    /** Only for ArrowBlock's few small framing buffers; payloads are written from the region itself. */
    private final BufferAllocator allocator = new RootAllocator();
    /** Null when told to copy every map output. */
    private final MappedPublisher mapped;
    private final CopyingPublisher copying;
    /** Consecutive publisher failures after which publishing stops for good (0: never). */
    private final int maxConsecutiveFailures;
    private final java.util.concurrent.atomic.AtomicInteger consecutiveFailures = new java.util.concurrent.atomic.AtomicInteger();
    private volatile boolean stopped;
    private volatile boolean closed;

    /** The map outputs of one shuffle; once closed (removed), nothing is added. */
    private static final class ShuffleOutputs {
        final Map<Long, MapOutput> maps = new ConcurrentHashMap<>();
        boolean closed; // guarded by this
    }

    public MapOutputStore(Node node, long capacityBytes, ShuffleMetrics metrics) {
        this(node, capacityBytes, metrics, true);
    }

    /**
     * @param mapFiles serve payloads from read-only mappings of the data files (no copy) where the
     *                 provider can register them; false copies every map output
     */
    public MapOutputStore(Node node, long capacityBytes, ShuffleMetrics metrics, boolean mapFiles) {
        this(node, capacityBytes, metrics, mapFiles, DEFAULT_MAX_PUBLISH_FAILURES);
    }

    /**
     * @param maxConsecutiveFailures consecutive failures to register a map output (the data node is
     *                               broken) after which this store publishes nothing more, said once
     *                               in the log; 0 never stops
     */
    public MapOutputStore(Node node, long capacityBytes, ShuffleMetrics metrics, boolean mapFiles, int maxConsecutiveFailures) {
        if (maxConsecutiveFailures < 0) {
            throw new IllegalArgumentException("maxConsecutiveFailures must be at least 0, was " + maxConsecutiveFailures);
        }
        this.maxConsecutiveFailures = maxConsecutiveFailures;
        this.node = node;
        this.cap = new RegisteredBytes(capacityBytes);
        this.metrics = metrics;
        this.mapped = mapFiles ? new MappedPublisher(node, cap, allocator) : null;
        this.copying = new CopyingPublisher(node, cap, allocator);
    }

    /**
     * Loads and initialises what framing a map output takes (Arrow: {@link ArrowBlock#warmUp}), so that an
     * executor pays for it when its runtime starts rather than in its first map task. Never throws: the first
     * publish would then pay instead.
     */
    public void warmUp() {
        try {
            ArrowBlock.warmUp(allocator);
        } catch (IOException | RuntimeException e) {
            LOG.debug("warming up the Arrow framing failed; the first map output pays for it", e);
        }
    }

    /** How the READ keys of this store's map outputs are bound, for the log: copied and mapped alike, as the node binds them. */
    public String keyBinding() {
        return (mapped == null ? "copied map outputs " : "map outputs, copied and mapped, ") + node.keyBinding();
    }

    /**
     * Frames and registers every non-empty partition of a committed map output; false if over cap/failed (logged,
     * counted). Its time, whatever the outcome, counts in {@link ShuffleMetrics#PUBLISH_MICROS}.
     */
    public boolean publish(int shuffleId, long mapId, File dataFile, long[] partitionLengths) {
        long started = System.nanoTime();
        try {
            return publishOnce(shuffleId, mapId, dataFile, partitionLengths);
        } finally {
            metrics.publishMicros().inc((System.nanoTime() - started) / 1000);
        }
    }

    private boolean publishOnce(int shuffleId, long mapId, File dataFile, long[] partitionLengths) {
        if (closed || removed.contains(shuffleId)) {
            return false;
        }
        if (stopped) {
            metrics.notPublishedStopped().inc();
            return false;
        }
        long payload = 0;
        for (int i = 0; i < partitionLengths.length; i++) {
            if (partitionLengths[i] < 0) {
                return failed(shuffleId, mapId, dataFile, "partition " + i + " has a negative length " + partitionLengths[i]);
            }
            payload += partitionLengths[i];
        }
        if (!dataFile.isFile() || dataFile.length() < payload) {
            return failed(shuffleId, mapId, dataFile, dataFile.isFile()
                    ? "the data file has " + dataFile.length() + " bytes, its partitions " + payload : "the data file is missing");
        }
        if (!cap.fits(payload)) {
            return overCap(shuffleId, mapId, payload);
        }
        MapOutput output;
        try {
            // The one place the way is chosen: the data file's mapping where the provider registers
            // it, else (and whenever the mapping was refused: null) a copy.
            output = mapped != null && mapped.serves(payload)
                    ? mapped.publish(shuffleId, mapId, dataFile, partitionLengths, payload) : null;
            if (output == null) {
                output = copying.publish(shuffleId, mapId, dataFile, partitionLengths, payload);
            }
        } catch (OverCapException e) {
            return overCap(shuffleId, mapId, e.bytes);
        } catch (IOException | RuntimeException e) {
            failed(shuffleId, mapId, dataFile, e.toString());
            publisherFailed(e);
            return false;
        }
        consecutiveFailures.set(0);
        if (!keep(shuffleId, mapId, output)) {
            return false;
        }
        metrics.publishedMaps().inc();
        (output.publisher() == mapped ? metrics.publishedMapped() : metrics.publishedCopied()).inc();
        metrics.publishedBytes().inc(output.bytes());
        LOG.debug("published shuffle {} map {}: {} payload bytes as {} registered bytes in {} region(s)", shuffleId, mapId,
                payload, output.bytes(), output.regions().size());
        return true;
    }

    /**
     * Where one block's registered bytes are, or null if not held: the pieces a reader READs, in
     * order, into one buffer. For a copy that is the whole Arrow block; for a mapped output the
     * payload alone, its framing being in {@link #block}'s header and trailer.
     */
    public RemoteBlock[] locate(int shuffleId, long mapId, int reduceId) {
        ShuffleOutputs outputs = shuffles.get(shuffleId);
        MapOutput output = outputs == null ? null : outputs.maps.get(mapId);
        if (output == null || reduceId < 0 || reduceId >= output.segments().length) {
            return null;
        }
        return output.segments()[reduceId];
    }

    /** One block as LOCATE serves it (its framing, its payload's remote block and memory), or null if not held. */
    MapOutputPublisher.Block block(int shuffleId, long mapId, int reduceId) {
        ShuffleOutputs outputs = shuffles.get(shuffleId);
        MapOutput output = outputs == null ? null : outputs.maps.get(mapId);
        if (output == null || reduceId < 0 || reduceId >= output.blocks().length) {
            return null;
        }
        return output.blocks()[reduceId];
    }

    /** Deregisters (rkeys revoked) and frees every map output of the shuffle. */
    public void removeShuffle(int shuffleId) {
        ShuffleOutputs outputs;
        synchronized (shuffles) {
            removed.add(shuffleId);
            outputs = shuffles.remove(shuffleId);
        }
        overCapLogged.remove(shuffleId);
        if (outputs != null) {
            int count = release(outputs);
            LOG.debug("removed shuffle {}: {} map outputs deregistered", shuffleId, count);
        }
    }

    /** The regions of one map output (for tests); empty if not held. */
    List<MemoryRegion> regions(int shuffleId, long mapId) {
        ShuffleOutputs outputs = shuffles.get(shuffleId);
        MapOutput output = outputs == null ? null : outputs.maps.get(mapId);
        return output == null ? List.of() : output.regions().stream().map(Held::region).toList();
    }

    /** Registered bytes held now (framed segments of every map output kept). */
    public long usedBytes() {
        return cap.used();
    }

    public long capacityBytes() {
        return cap.capacity();
    }

    /** Sets how long the memory of a deregistered copy waits before it is reused (for tests and benchmarks). */
    public void setRecycleQuarantine(Duration quarantine) {
        copying.setQuarantine(quarantine);
    }

    /** Idle (deregistered, reusable) memory of copies held now. */
    public long idleBytes() {
        return copying.idleBytes();
    }

    /** Deregisters everything; later publishes return false. Does not close the node. */
    @Override
    public void close() {
        List<ShuffleOutputs> all;
        synchronized (shuffles) {
            closed = true;
            all = new ArrayList<>(shuffles.values());
            shuffles.clear();
        }
        copying.close(); // first: the memory of what is released now is not kept
        all.forEach(this::release);
        try {
            allocator.close();
        } catch (RuntimeException e) {
            LOG.debug("framing allocator closed while a publish was running", e);
        }
    }

    static Map<String, String> metadata(int shuffleId, long mapId, int reduceId) {
        Map<String, String> metadata = new LinkedHashMap<>();
        metadata.put(SHUFFLE_ID_KEY, Integer.toString(shuffleId));
        metadata.put(MAP_ID_KEY, Long.toString(mapId));
        metadata.put(PARTITION_ID_KEY, Integer.toString(reduceId));
        return metadata;
    }

    // ---------------------------------------------------------------- bookkeeping

    /** Adds the output to its shuffle unless the shuffle was removed or the store closed meanwhile. */
    private boolean keep(int shuffleId, long mapId, MapOutput output) {
        ShuffleOutputs outputs;
        synchronized (shuffles) {
            outputs = closed || removed.contains(shuffleId) ? null : shuffles.computeIfAbsent(shuffleId, s -> new ShuffleOutputs());
        }
        MapOutput replaced = null;
        boolean kept = false;
        if (outputs != null) {
            synchronized (outputs) {
                if (!outputs.closed) {
                    replaced = outputs.maps.put(mapId, output);
                    kept = true;
                }
            }
        }
        if (!kept) {
            drop(output);
            LOG.debug("shuffle {} was removed while map {} was being published; dropped it", shuffleId, mapId);
            return false;
        }
        if (replaced != null) {
            drop(replaced); // a second publish of the same map output: the newer one serves
        }
        return true;
    }

    private int release(ShuffleOutputs outputs) {
        List<MapOutput> all;
        synchronized (outputs) {
            outputs.closed = true;
            all = new ArrayList<>(outputs.maps.values());
            outputs.maps.clear();
        }
        all.forEach(this::drop);
        return all.size();
    }

    /** Gives the output's bytes back to the cap, then has its publisher release its regions and memory. */
    private void drop(MapOutput output) {
        cap.release(output.bytes());
        output.publisher().release(output);
    }

    private boolean overCap(int shuffleId, long mapId, long bytes) {
        metrics.notPublishedOverCap().inc();
        if (overCapLogged.add(shuffleId)) {
            LOG.info("shuffle {}: map output {} ({} bytes) and others over the registered-memory cap of {} bytes ({} used)"
                    + " are served by Spark's block transfer; raise spark.shuffle.rdma.mapOutput.capacity to serve more"
                    + " over RDMA", shuffleId, mapId, bytes, cap.capacity(), cap.used());
        }
        return false;
    }

    /** One more failure of the publisher itself (registering, copying): past the bound, publishing stops. */
    private void publisherFailed(Exception e) {
        int failures = consecutiveFailures.incrementAndGet();
        if (maxConsecutiveFailures > 0 && failures >= maxConsecutiveFailures && !stopped) {
            synchronized (this) {
                if (stopped) {
                    return;
                }
                stopped = true;
            }
            LOG.warn("RDMA shuffle: {} map outputs in a row could not be published (last: {}); this executor stops publishing"
                    + " map outputs for RDMA READ, and Spark's block transfer serves every later one (see"
                    + " spark.shuffle.rdma.mapOutput.maxPublishFailures)", failures, e.toString());
        }
    }

    /** True once publishing stopped after consecutive failures: nothing more is published. */
    public boolean publishingStopped() {
        return stopped;
    }

    private boolean failed(int shuffleId, long mapId, File dataFile, String why) {
        metrics.notPublishedFailed().inc();
        LOG.warn("shuffle {} map {}: not published over RDMA ({}), Spark's block transfer serves it: {}", shuffleId, mapId,
                dataFile, why);
        return false;
    }

    @Override
    public String toString() {
        Map<Integer, Integer> counts = new HashMap<>();
        shuffles.forEach((id, outputs) -> counts.put(id, outputs.maps.size()));
        return "MapOutputStore[" + cap.used() + " of " + cap.capacity() + " bytes, map outputs by shuffle " + counts + "]";
    }
}

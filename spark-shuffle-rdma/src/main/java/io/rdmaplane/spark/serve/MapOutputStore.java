package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.format.ArrowBlock;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.spark.DirectMemory;
import io.rdmaplane.spark.ShuffleMetrics;
import java.io.EOFException;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;
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
 * <p><b>Memory: one copy per map output, in regions of its own.</b> The bytes are copied from
 * the data file (the page cache, just written) into direct memory allocated for this map output
 * and registered as one region (several only above {@value #MAX_REGION_BYTES} bytes), with every
 * partition's segment packed back to back. Why not the alternatives:
 * <ul>
 * <li>Mapping the data file: the file holds raw partition bytes, not Arrow framing, so a mapping
 *     cannot be served as Arrow blocks; and kernel 6.1 cannot register read-only shared file
 *     mappings with verbs.</li>
 * <li>Packing segments into slices of a {@code RegisteredMemoryPool}: no registration per map
 *     output, but the pool's power-of-two size classes waste up to half of every slice against
 *     the cap, segments over 8 MiB need registrations of their own anyway, the pool registers
 *     LOCAL_WRITE as well, and above all a slice given back is reused under the same rkey: a READ
 *     after {@link #removeShuffle} would read another shuffle's bytes instead of failing.</li>
 * </ul>
 * A region per map output costs one registration per map task (not per IO), exposes exactly the
 * segments (REMOTE_READ only, nothing else in the region), and {@link #removeShuffle}
 * deregisters it: a later READ fails with REMOTE_ACCESS_ERROR. The memory itself is freed by
 * the garbage collector once deregistered and unreferenced, never earlier: a provider may still
 * be sending from it (the tcp provider writes READ responses straight from the region).
 *
 * <p>Each segment is written in place: its payload is read from the file into the end of the
 * space reserved for it (its {@link ArrowBlock#maxFramedSize} bound) and the framing is written
 * from the front, moving the payload down to its place; so the file is read once, straight into
 * the region, with no staging buffer. When the bounds leave much unused space at the end (many
 * tiny partitions) the region is compacted into an exact-size copy before registration.
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

    private static final Logger LOG = LoggerFactory.getLogger(MapOutputStore.class);
    private static final int PAGE = 4096;
    /** The largest segment bound a direct buffer can hold. */
    private static final long MAX_SEGMENT_BOUND = Integer.MAX_VALUE - 3 * PAGE;

    private final Node node;
    private final long capacityBytes;
    private final ShuffleMetrics metrics;
    private final AtomicLong used = new AtomicLong();
    private final Map<Integer, ShuffleOutputs> shuffles = new ConcurrentHashMap<>();
    private final Set<Integer> removed = ConcurrentHashMap.newKeySet();
    private final Set<Integer> overCapLogged = ConcurrentHashMap.newKeySet();
    /** Only for ArrowBlock's few small framing buffers; payloads are written from the region itself. */
    private final BufferAllocator allocator = new RootAllocator();
    private volatile boolean closed;

    /** One map output: its regions and each reduce partition's segment (null for an empty one). */
    private record MapOutput(List<MemoryRegion> regions, RemoteBlock[] segments, long bytes) {
        void deregister() {
            regions.forEach(MemoryRegion::deregister);
        }
    }

    /** The map outputs of one shuffle; once closed (removed), nothing is added. */
    private static final class ShuffleOutputs {
        final Map<Long, MapOutput> maps = new ConcurrentHashMap<>();
        boolean closed; // guarded by this
    }

    public MapOutputStore(Node node, long capacityBytes, ShuffleMetrics metrics) {
        if (capacityBytes < 0) {
            throw new IllegalArgumentException("capacityBytes must not be negative, was " + capacityBytes);
        }
        this.node = node;
        this.capacityBytes = capacityBytes;
        this.metrics = metrics;
    }

    /** Frames and registers every non-empty partition of a committed map output; false if over cap/failed (logged, counted). */
    public boolean publish(int shuffleId, long mapId, File dataFile, long[] partitionLengths) {
        if (closed || removed.contains(shuffleId)) {
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
        if (used.get() + payload > capacityBytes) {
            return overCap(shuffleId, mapId, payload);
        }
        List<Built> built;
        try {
            built = build(shuffleId, mapId, dataFile, partitionLengths);
        } catch (IOException | RuntimeException e) {
            return failed(shuffleId, mapId, dataFile, e.toString());
        }
        long bytes = built.stream().mapToLong(b -> b.memory.remaining()).sum();
        if (!reserve(bytes)) {
            return overCap(shuffleId, mapId, bytes);
        }
        List<MemoryRegion> regions = new ArrayList<>(built.size());
        RemoteBlock[] segments = new RemoteBlock[partitionLengths.length];
        try {
            for (Built b : built) {
                MemoryRegion region = node.register(b.memory, Set.of(Access.REMOTE_READ));
                regions.add(region);
                for (Segment s : b.segments) {
                    segments[s.reduceId] = new RemoteBlock(region.address() + s.offset, region.rkey(), s.length, s.crc32c);
                }
            }
        } catch (TransportException | RuntimeException e) {
            regions.forEach(MemoryRegion::deregister);
            used.addAndGet(-bytes);
            return failed(shuffleId, mapId, dataFile, "registration failed: " + e);
        }
        MapOutput output = new MapOutput(List.copyOf(regions), segments, bytes);
        if (!keep(shuffleId, mapId, output)) {
            return false;
        }
        metrics.publishedMaps().inc();
        metrics.publishedBytes().inc(bytes);
        LOG.debug("published shuffle {} map {}: {} payload bytes as {} registered bytes in {} region(s)", shuffleId, mapId,
                payload, bytes, regions.size());
        return true;
    }

    /** The registered segment of one block, or null if not held. */
    public RemoteBlock locate(int shuffleId, long mapId, int reduceId) {
        ShuffleOutputs outputs = shuffles.get(shuffleId);
        MapOutput output = outputs == null ? null : outputs.maps.get(mapId);
        if (output == null || reduceId < 0 || reduceId >= output.segments.length) {
            return null;
        }
        return output.segments[reduceId];
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
        return output == null ? List.of() : output.regions;
    }

    /** Registered bytes held now (framed segments of every map output kept). */
    public long usedBytes() {
        return used.get();
    }

    public long capacityBytes() {
        return capacityBytes;
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
        all.forEach(this::release);
        try {
            allocator.close();
        } catch (RuntimeException e) {
            LOG.debug("framing allocator closed while a publish was running", e);
        }
    }

    // ---------------------------------------------------------------- publishing

    /** A region's worth of framed segments, in memory not yet registered. */
    private record Built(ByteBuffer memory, List<Segment> segments) {
    }

    private record Segment(int reduceId, int offset, int length, int crc32c) {
    }

    private List<Built> build(int shuffleId, long mapId, File dataFile, long[] partitionLengths) throws IOException {
        // Group the non-empty partitions into regions by their framed-size bounds.
        List<List<Integer>> groups = new ArrayList<>();
        List<Long> groupBounds = new ArrayList<>();
        List<Integer> current = new ArrayList<>();
        long currentBound = 0;
        long[] bounds = new long[partitionLengths.length];
        for (int r = 0; r < partitionLengths.length; r++) {
            if (partitionLengths[r] == 0) {
                continue;
            }
            bounds[r] = ArrowBlock.maxFramedSize(partitionLengths[r], metadata(shuffleId, mapId, r));
            if (bounds[r] > MAX_SEGMENT_BOUND) {
                throw new IOException("partition " + r + " has " + partitionLengths[r]
                        + " bytes; a segment READ over RDMA holds less than 2 GiB");
            }
            if (!current.isEmpty() && currentBound + bounds[r] > MAX_REGION_BYTES) {
                groups.add(current);
                groupBounds.add(currentBound);
                current = new ArrayList<>();
                currentBound = 0;
            }
            current.add(r);
            currentBound += bounds[r];
        }
        if (!current.isEmpty()) {
            groups.add(current);
            groupBounds.add(currentBound);
        }
        long[] fileOffsets = new long[partitionLengths.length];
        for (int r = 1; r < partitionLengths.length; r++) {
            fileOffsets[r] = fileOffsets[r - 1] + partitionLengths[r - 1];
        }
        List<Built> built = new ArrayList<>(groups.size());
        try (FileChannel file = FileChannel.open(dataFile.toPath(), StandardOpenOption.READ)) {
            for (int g = 0; g < groups.size(); g++) {
                ByteBuffer memory = DirectMemory.pageAligned(Math.toIntExact(groupBounds.get(g)));
                List<Segment> segments = new ArrayList<>(groups.get(g).size());
                int position = 0;
                for (int r : groups.get(g)) {
                    int length = (int) partitionLengths[r];
                    int window = (int) bounds[r];
                    // The payload goes to the end of its window; the framing, written from the front,
                    // never reaches bytes not yet moved (framing + payload <= the bound).
                    int tail = position + window - length;
                    readFully(file, memory.duplicate().limit(tail + length).position(tail), fileOffsets[r], dataFile);
                    ByteBuffer out = memory.duplicate().limit(position + window).position(position);
                    long written = ArrowBlock.write(metadata(shuffleId, mapId, r),
                            memory.duplicate().limit(tail + length).position(tail), new BufferChannel(out), allocator);
                    CRC32C crc = new CRC32C();
                    crc.update(memory.slice(position, (int) written));
                    segments.add(new Segment(r, position, (int) written, (int) crc.getValue()));
                    position += (int) written;
                }
                built.add(new Built(compact(memory, position), segments));
            }
        }
        return built;
    }

    /** The first {@code used} bytes as the region: in place, or copied to an exact-size buffer when the rest is much. */
    private static ByteBuffer compact(ByteBuffer memory, int used) {
        if (memory.capacity() - used <= used / 16) {
            return memory.duplicate().limit(used).position(0).slice();
        }
        ByteBuffer exact = DirectMemory.pageAligned(used);
        exact.put(memory.duplicate().limit(used).position(0)).flip();
        return exact;
    }

    private static void readFully(FileChannel file, ByteBuffer target, long position, File dataFile) throws IOException {
        long at = position;
        while (target.hasRemaining()) {
            int n = file.read(target, at);
            if (n < 0) {
                throw new EOFException(dataFile + " ended at byte " + at + " before the partition's end");
            }
            at += n;
        }
    }

    static Map<String, String> metadata(int shuffleId, long mapId, int reduceId) {
        Map<String, String> metadata = new LinkedHashMap<>();
        metadata.put(SHUFFLE_ID_KEY, Integer.toString(shuffleId));
        metadata.put(MAP_ID_KEY, Long.toString(mapId));
        metadata.put(PARTITION_ID_KEY, Integer.toString(reduceId));
        return metadata;
    }

    /** Writes into a byte buffer; refuses to go past its limit (a segment outgrowing its bound). */
    private static final class BufferChannel implements WritableByteChannel {
        private final ByteBuffer target;

        BufferChannel(ByteBuffer target) {
            this.target = target;
        }

        @Override
        public int write(ByteBuffer src) throws IOException {
            int n = src.remaining();
            if (n > target.remaining()) {
                throw new IOException("a framed segment outgrew its bound by " + (n - target.remaining()) + " bytes");
            }
            target.put(src);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }

    // ---------------------------------------------------------------- bookkeeping

    private boolean reserve(long bytes) {
        while (true) {
            long now = used.get();
            if (now + bytes > capacityBytes) {
                return false;
            }
            if (used.compareAndSet(now, now + bytes)) {
                return true;
            }
        }
    }

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
            output.deregister();
            used.addAndGet(-output.bytes);
            LOG.debug("shuffle {} was removed while map {} was being published; dropped it", shuffleId, mapId);
            return false;
        }
        if (replaced != null) {
            replaced.deregister(); // a second publish of the same map output: the newer one serves
            used.addAndGet(-replaced.bytes);
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
        for (MapOutput output : all) {
            output.deregister(); // rkeys revoked first; the memory goes only when nothing refers to it
            used.addAndGet(-output.bytes);
        }
        return all.size();
    }

    private boolean overCap(int shuffleId, long mapId, long bytes) {
        metrics.notPublishedOverCap().inc();
        if (overCapLogged.add(shuffleId)) {
            LOG.info("shuffle {}: map output {} ({} bytes) and others over the registered-memory cap of {} bytes ({} used)"
                    + " are served by Spark's block transfer; raise spark.shuffle.rdma.mapOutput.capacity to serve more"
                    + " over RDMA", shuffleId, mapId, bytes, capacityBytes, used.get());
        }
        return false;
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
        return "MapOutputStore[" + used.get() + " of " + capacityBytes + " bytes, map outputs by shuffle " + counts + "]";
    }
}

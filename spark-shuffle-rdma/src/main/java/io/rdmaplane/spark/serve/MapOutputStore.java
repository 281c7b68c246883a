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
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
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
 * <p><b>Served where the bytes lie: the data file's mapping</b> (the default, where the provider
 * can register file mappings: tcp; verbs on kernels from 6.2). The data file, just written and
 * so in the page cache, is mapped read-only and registered as it is; each segment's Arrow framing
 * (schema and batch header before the payload; padding and end-of-stream after it) goes into one
 * small registered buffer per map output. A segment is then three pieces a reader READs, in
 * order, into one buffer, which holds exactly the Arrow block {@link ArrowBlock#write} would have
 * made ({@link ArrowBlock#frame}). The payload is neither copied nor put into fresh memory, which
 * on this project's 2-core VM costs about 270 MiB/s of page faults against about 1.5 GiB/s to map
 * page-cache pages (measured with a 64 MiB file; see the issue note).
 *
 * <p><b>Else one copy per map output, in regions of its own</b> (verbs on kernels before 6.2
 * cannot pin a read-only shared file mapping; the first refusal switches this store to copies).
 * The bytes are copied from the data file into direct memory allocated for this map output and
 * registered as one region (several only above {@value #MAX_REGION_BYTES} bytes), with every
 * partition's segment packed back to back. Not slices of a {@code RegisteredMemoryPool}: its
 * power-of-two size classes waste up to half of every slice against the cap, segments over 8 MiB
 * need registrations of their own anyway, the pool registers LOCAL_WRITE as well, and above all a
 * slice given back is reused under the same rkey: a READ after {@link #removeShuffle} would read
 * another shuffle's bytes instead of failing. Either way a map output costs its registrations
 * once per map task (not per IO), exposes exactly its segments (REMOTE_READ only), and
 * {@link #removeShuffle} deregisters it: a later READ fails with REMOTE_ACCESS_ERROR.
 *
 * <p><b>Copies' memory is recycled.</b> Touching fresh memory is what a publish costs most (page faults:
 * about 230 MiB/s on the 2-core VM this was measured on, against GiB/s for the copy itself), so
 * the memory of removed map outputs is kept, unregistered, and reused by later publishes of a
 * similar size (within 1/16), after a quarantine ({@link #setRecycleQuarantine}, default
 * {@value #DEFAULT_QUARANTINE_SECONDS} s) so that a READ response a provider was still sending
 * when the rkey was revoked (the tcp provider writes responses straight from the region) never
 * carries bytes of a later map output. Memory never registered (a staging buffer) is reusable at
 * once. Idle memory is bounded by what the cap leaves unused ({@code capacityBytes - usedBytes()});
 * beyond that it is dropped to the garbage collector, which frees it once nothing refers to it.
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
    /** Seconds the memory of a deregistered map output waits before a later publish reuses it. */
    public static final int DEFAULT_QUARANTINE_SECONDS = 5;

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
    private final Recycler recycler = new Recycler();
    private volatile long quarantineNanos = TimeUnit.SECONDS.toNanos(DEFAULT_QUARANTINE_SECONDS);
    private volatile boolean closed;
    /** Whether payloads are served from mappings of the data files; turned off for good when the provider refuses one. */
    private volatile boolean mapFiles;

    /** One registered region of a map output and the memory under it (a file mapping is never recycled). */
    private record Held(MemoryRegion region, ByteBuffer memory, boolean recyclable) {
    }

    /**
     * One map output: its regions and each reduce partition's segment as the pieces a reader
     * gathers in order (one piece when copied; framing, payload, framing when mapped), null for an
     * empty partition.
     */
    private record MapOutput(List<Held> regions, RemoteBlock[][] segments, long bytes) {
    }

    /** Thrown inside a publish when the output does not fit the cap. */
    private static final class OverCapException extends Exception {
        final long bytes;

        OverCapException(long bytes) {
            super(null, null, false, false);
            this.bytes = bytes;
        }
    }

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
        if (capacityBytes < 0) {
            throw new IllegalArgumentException("capacityBytes must not be negative, was " + capacityBytes);
        }
        this.node = node;
        this.capacityBytes = capacityBytes;
        this.metrics = metrics;
        this.mapFiles = mapFiles;
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
        MapOutput output;
        try {
            output = mapFiles && payload > 0 && payload <= Integer.MAX_VALUE
                    ? mapped(shuffleId, mapId, dataFile, partitionLengths, payload) : null;
            if (output == null) {
                output = copied(shuffleId, mapId, dataFile, partitionLengths);
            }
        } catch (OverCapException e) {
            return overCap(shuffleId, mapId, e.bytes);
        } catch (IOException | RuntimeException e) {
            return failed(shuffleId, mapId, dataFile, e.toString());
        }
        if (!keep(shuffleId, mapId, output)) {
            return false;
        }
        metrics.publishedMaps().inc();
        metrics.publishedBytes().inc(output.bytes);
        LOG.debug("published shuffle {} map {}: {} payload bytes as {} registered bytes in {} region(s)", shuffleId, mapId,
                payload, output.bytes, output.regions.size());
        return true;
    }

    /**
     * The map output served where it lies: the data file (just written, so in the page cache) is
     * mapped read-only and registered REMOTE_READ as it is, and each segment's Arrow framing
     * (header, then padding and end-of-stream) goes into one small registered buffer; a reader
     * READs header, payload and trailer into one buffer, which is then exactly the Arrow block.
     * No copy and no fresh memory for the payload. Null when the provider cannot register a file
     * mapping (verbs on kernels before 6.2): then, and from then on, outputs are copied.
     */
    private MapOutput mapped(int shuffleId, long mapId, File dataFile, long[] lengths, long payload)
            throws IOException, OverCapException {
        ByteBuffer mapping;
        int[] crcs = new int[lengths.length];
        try (FileChannel file = FileChannel.open(dataFile.toPath(), StandardOpenOption.READ)) {
            mapping = file.map(FileChannel.MapMode.READ_ONLY, 0, payload);
            // Through a small reused buffer (page cache to a hot buffer, GiB/s), not the mapping: its pages
            // would each fault in; READs (or verbs' pinning) touch them later anyway.
            ByteBuffer chunk = ByteBuffer.allocateDirect(1 << 20);
            long from = 0;
            for (int r = 0; r < lengths.length; r++) {
                CRC32C crc = new CRC32C();
                for (long done = 0; done < lengths[r]; ) {
                    int n = (int) Math.min(chunk.capacity(), lengths[r] - done);
                    readFully(file, chunk.clear().limit(n), from + done, dataFile);
                    crc.update(chunk.flip());
                    done += n;
                }
                crcs[r] = (int) crc.getValue();
                from += lengths[r];
            }
        }
        ArrowBlock.Framing[] framings = new ArrowBlock.Framing[lengths.length];
        int[] fileOffsets = new int[lengths.length];
        long framingBytes = 0;
        int at = 0;
        for (int r = 0; r < lengths.length; r++) {
            fileOffsets[r] = at;
            if (lengths[r] > 0) {
                framings[r] = ArrowBlock.frame(metadata(shuffleId, mapId, r), mapping.slice(at, (int) lengths[r]), crcs[r],
                        allocator);
                framingBytes += framings[r].header().remaining() + framings[r].trailer().remaining();
            }
            at += (int) lengths[r];
        }
        long bytes = payload + framingBytes;
        if (!reserve(bytes)) {
            throw new OverCapException(bytes);
        }
        ByteBuffer framing = DirectMemory.pageAligned(Math.toIntExact(framingBytes));
        int[] headerAt = new int[lengths.length];
        int[] trailerAt = new int[lengths.length];
        for (int r = 0; r < lengths.length; r++) {
            if (framings[r] != null) {
                headerAt[r] = framing.position();
                framing.put(framings[r].header().duplicate());
                trailerAt[r] = framing.position();
                framing.put(framings[r].trailer().duplicate());
            }
        }
        framing.clear();
        MemoryRegion payloadRegion;
        try {
            payloadRegion = node.register(mapping, Set.of(Access.REMOTE_READ));
        } catch (TransportException | RuntimeException e) {
            used.addAndGet(-bytes);
            mapFiles = false;
            LOG.info("RDMA shuffle: the {} provider cannot register a mapping of a shuffle data file here ({}); map outputs"
                    + " are copied into registered memory from now on", node.providerName(), e.getMessage());
            return null;
        }
        MemoryRegion framingRegion;
        try {
            framingRegion = node.register(framing, Set.of(Access.REMOTE_READ));
        } catch (TransportException | RuntimeException e) {
            payloadRegion.deregister();
            used.addAndGet(-bytes);
            throw new IOException("registering the framing failed: " + e, e);
        }
        RemoteBlock[][] segments = new RemoteBlock[lengths.length][];
        for (int r = 0; r < lengths.length; r++) {
            if (framings[r] != null) {
                ByteBuffer header = framings[r].header();
                ByteBuffer trailer = framings[r].trailer();
                segments[r] = new RemoteBlock[] {
                    new RemoteBlock(framingRegion.address() + headerAt[r], framingRegion.rkey(), header.remaining(), crc(header)),
                    new RemoteBlock(payloadRegion.address() + fileOffsets[r], payloadRegion.rkey(), (int) lengths[r],
                            framings[r].payloadCrc32c()),
                    new RemoteBlock(framingRegion.address() + trailerAt[r], framingRegion.rkey(), trailer.remaining(),
                            crc(trailer))};
            }
        }
        return new MapOutput(List.of(new Held(payloadRegion, mapping, false), new Held(framingRegion, framing, false)),
                segments, bytes);
    }

    private static int crc(ByteBuffer bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes.duplicate());
        return (int) crc.getValue();
    }

    /** The map output copied into registered memory, each segment framed in place. */
    private MapOutput copied(int shuffleId, long mapId, File dataFile, long[] partitionLengths)
            throws IOException, OverCapException {
        List<Built> built = build(shuffleId, mapId, dataFile, partitionLengths);
        long bytes = built.stream().mapToLong(b -> b.used).sum();
        if (!reserve(bytes)) {
            built.forEach(b -> recycler.give(b.memory, 0));
            throw new OverCapException(bytes);
        }
        List<Held> regions = new ArrayList<>(built.size());
        RemoteBlock[][] segments = new RemoteBlock[partitionLengths.length][];
        try {
            for (Built b : built) {
                MemoryRegion region = node.register(b.memory.duplicate().limit(b.used).position(0), Set.of(Access.REMOTE_READ));
                regions.add(new Held(region, b.memory, true));
                for (Segment seg : b.segments) {
                    segments[seg.reduceId] = new RemoteBlock[] {
                        new RemoteBlock(region.address() + seg.offset, region.rkey(), seg.length, seg.crc32c)};
                }
            }
        } catch (TransportException | RuntimeException e) {
            used.addAndGet(-bytes);
            release(regions);
            built.subList(regions.size(), built.size()).forEach(b -> recycler.give(b.memory, 0));
            throw new IOException("registration failed: " + e, e);
        }
        return new MapOutput(List.copyOf(regions), segments, bytes);
    }

    /**
     * Where one block is: the pieces a reader READs, in order, into one buffer (together the
     * Arrow block), or null if not held.
     */
    public RemoteBlock[] locate(int shuffleId, long mapId, int reduceId) {
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
        return output == null ? List.of() : output.regions.stream().map(Held::region).toList();
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
        recycler.clear();
        try {
            allocator.close();
        } catch (RuntimeException e) {
            LOG.debug("framing allocator closed while a publish was running", e);
        }
    }

    // ---------------------------------------------------------------- publishing

    /** A region's worth of framed segments in the first {@code used} bytes of {@code memory}, not yet registered. */
    private record Built(ByteBuffer memory, int used, List<Segment> segments) {
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
        ByteBuffer memory = null;
        try (FileChannel file = FileChannel.open(dataFile.toPath(), StandardOpenOption.READ)) {
            for (int g = 0; g < groups.size(); g++) {
                memory = take(Math.toIntExact(groupBounds.get(g)));
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
                built.add(new Built(compact(memory, position), position, segments));
                memory = null;
            }
        } catch (IOException | RuntimeException e) {
            if (memory != null) {
                recycler.give(memory, 0);
            }
            built.forEach(b -> recycler.give(b.memory, 0));
            throw e;
        }
        return built;
    }

    /**
     * Memory for the first {@code used} bytes of {@code memory}: itself, or, when much of it
     * would stay unused (framing bounds of many tiny partitions), a copy in memory of about
     * that size, the staging memory going back for reuse at once (it was never registered).
     */
    private ByteBuffer compact(ByteBuffer memory, int used) {
        if (memory.capacity() - used <= used / 8) {
            return memory;
        }
        ByteBuffer exact = take(used);
        exact.put(memory.duplicate().limit(used).position(0)).clear();
        recycler.give(memory, 0);
        return exact;
    }

    /** Memory of at least {@code bytes}: recycled if some of about that size is idle, else fresh. */
    private ByteBuffer take(int bytes) {
        ByteBuffer recycled = recycler.take(bytes);
        if (recycled != null) {
            return recycled;
        }
        recycler.trim(bytes); // fresh memory, and idle memory, stay within what the cap leaves
        return DirectMemory.pageAligned(bytes);
    }

    /** Sets how long the memory of a deregistered map output waits before it is reused (for tests and benchmarks). */
    public void setRecycleQuarantine(Duration quarantine) {
        if (quarantine.isNegative()) {
            throw new IllegalArgumentException("the recycle quarantine must not be negative, was " + quarantine);
        }
        quarantineNanos = quarantine.toNanos();
    }

    /** Idle (deregistered, reusable) memory held now. */
    public long idleBytes() {
        return recycler.idleBytes();
    }

    /**
     * Idle memory by capacity, oldest first. A buffer is reused for a request of {@code bytes}
     * when its capacity is within [bytes, bytes + bytes/16] and its quarantine is over.
     */
    private final class Recycler {
        private record Idle(ByteBuffer memory, long reusableAt) {
        }

        private final TreeMap<Integer, ArrayDeque<Idle>> idle = new TreeMap<>();
        private long idleBytes;

        synchronized ByteBuffer take(int bytes) {
            long now = System.nanoTime();
            int most = (int) Math.min(Integer.MAX_VALUE, bytes + (long) bytes / 16);
            for (Map.Entry<Integer, ArrayDeque<Idle>> e : idle.subMap(bytes, true, most, true).entrySet()) {
                for (java.util.Iterator<Idle> it = e.getValue().iterator(); it.hasNext(); ) {
                    Idle candidate = it.next();
                    if (candidate.reusableAt - now <= 0) {
                        it.remove();
                        if (e.getValue().isEmpty()) {
                            idle.remove(e.getKey());
                        }
                        idleBytes -= candidate.memory.capacity();
                        return candidate.memory.clear();
                    }
                }
            }
            return null;
        }

        /** Keeps {@code memory} for reuse after {@code quarantine} nanoseconds, if the cap leaves room for it. */
        void give(ByteBuffer memory, long quarantine) {
            if (closed) {
                return;
            }
            synchronized (this) {
                idle.computeIfAbsent(memory.capacity(), c -> new ArrayDeque<>())
                        .addLast(new Idle(memory, System.nanoTime() + quarantine));
                idleBytes += memory.capacity();
            }
            trim(0);
        }

        /** Drops idle memory (largest first) until idle + registered + {@code more} fit the cap. */
        synchronized void trim(long more) {
            while (idleBytes > 0 && idleBytes + used.get() + more > capacityBytes) {
                Map.Entry<Integer, ArrayDeque<Idle>> largest = idle.lastEntry();
                Idle dropped = largest.getValue().pollFirst();
                if (largest.getValue().isEmpty()) {
                    idle.remove(largest.getKey());
                }
                idleBytes -= dropped.memory.capacity();
            }
        }

        synchronized long idleBytes() {
            return idleBytes;
        }

        synchronized void clear() {
            idle.clear();
            idleBytes = 0;
        }
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

    /** Gives the output's bytes back to the cap, then releases its regions. */
    private void drop(MapOutput output) {
        used.addAndGet(-output.bytes);
        release(output.regions);
    }

    /** Deregisters (rkeys revoked first), then keeps copied outputs' memory for reuse after the quarantine. */
    private void release(List<Held> regions) {
        long quarantine = quarantineNanos;
        for (Held held : regions) {
            held.region.deregister();
            if (held.recyclable) {
                recycler.give(held.memory, quarantine);
            }
        }
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

package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.format.ArrowBlock;
import io.rdmaplane.rdma.memory.Recycler;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.spark.DirectMemory;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.BufferAllocator;

/**
 * Map outputs copied, one copy per map output, into regions of their own (where the provider
 * cannot register file mappings, or when the store is told to copy). The bytes are copied from
 * the data file into direct memory allocated for this map output and registered as one region
 * (several only above {@value MapOutputStore#MAX_REGION_BYTES} bytes), every partition's segment
 * packed back to back. Not slices of a {@code RegisteredMemoryPool}: its power-of-two size classes
 * waste up to half of every slice against the cap, segments over 8 MiB need registrations of their
 * own anyway, the pool registers LOCAL_WRITE as well, and above all a slice given back is reused
 * under the same rkey: a READ after a shuffle's removal would read another shuffle's bytes instead
 * of failing.
 *
 * <p>Each segment is written in place: its payload is read from the file into the end of the
 * space reserved for it (its {@link ArrowBlock#maxFramedSize} bound) and the framing is written
 * from the front, moving the payload down to its place; so the file is read once, straight into
 * the region, with no staging buffer. When the bounds leave much unused space at the end (many
 * tiny partitions) the region is compacted into an exact-size copy before registration.
 *
 * <p><b>The memory is recycled</b> ({@link Recycler}): touching fresh memory is what a copy costs
 * most (page faults: about 230 MiB/s on the 2-core VM this was measured on, against GiB/s for the
 * copy itself), so the memory of released map outputs is kept, unregistered, and reused by later
 * publishes of a similar size, after a quarantine ({@link #setQuarantine}, default
 * {@value MapOutputStore#DEFAULT_QUARANTINE_SECONDS} s) so that a READ response a provider was
 * still sending when the rkey was revoked never carries bytes of a later map output. Memory never
 * registered (a staging buffer) is reusable at once. Idle memory stays within what the cap leaves
 * unused.
 */
final class CopyingPublisher implements MapOutputPublisher {
    private static final int PAGE = 4096;
    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0).asReadOnlyBuffer();
    /** The largest segment bound a direct buffer can hold. */
    private static final long MAX_SEGMENT_BOUND = Integer.MAX_VALUE - 3 * PAGE;

    private final Node node;
    private final RegisteredBytes cap;
    private final BufferAllocator allocator;
    private final Recycler recycler;
    private volatile Duration quarantine = Duration.ofSeconds(MapOutputStore.DEFAULT_QUARANTINE_SECONDS);

    CopyingPublisher(Node node, RegisteredBytes cap, BufferAllocator allocator) {
        this.node = node;
        this.cap = cap;
        this.allocator = allocator;
        this.recycler = new Recycler(cap::unused);
    }

    /** The map output copied into registered memory, each segment framed in place; never null. */
    @Override
    public MapOutput publish(int shuffleId, long mapId, File dataFile, long[] lengths, long payload)
            throws IOException, OverCapException {
        List<Built> built = build(shuffleId, mapId, dataFile, lengths);
        long bytes = built.stream().mapToLong(b -> b.used).sum();
        if (!cap.reserve(bytes)) {
            built.forEach(b -> recycler.give(b.memory, Duration.ZERO));
            throw new OverCapException(bytes);
        }
        List<Held> regions = new ArrayList<>(built.size());
        RemoteBlock[][] segments = new RemoteBlock[lengths.length][];
        Block[] blocks = new Block[lengths.length];
        try {
            for (Built b : built) {
                // For grants: the region's own rkey READs nothing remotely (verbs); each reducer READs with a key of its own.
                MemoryRegion region = node.registerForGrants(b.memory.duplicate().limit(b.used).position(0));
                regions.add(new Held(region, b.memory));
                for (Segment seg : b.segments) {
                    RemoteBlock remote = new RemoteBlock(region.address() + seg.offset, region.rkey(), seg.length, seg.crc32c);
                    segments[seg.reduceId] = new RemoteBlock[] {remote};
                    blocks[seg.reduceId] = new Block(EMPTY, remote, EMPTY,
                            b.memory.duplicate().limit(seg.offset + seg.length).position(seg.offset).slice(), region);
                }
            }
        } catch (TransportException | RuntimeException e) {
            cap.release(bytes);
            release(regions);
            built.subList(regions.size(), built.size()).forEach(b -> recycler.give(b.memory, Duration.ZERO));
            throw new IOException("registration failed: " + e, e);
        }
        return new MapOutput(this, List.copyOf(regions), segments, blocks, bytes);
    }

    /** Deregisters (rkeys revoked first), then keeps the memory for reuse after the quarantine. */
    @Override
    public void release(MapOutput output) {
        release(output.regions());
    }

    private void release(List<Held> regions) {
        Duration wait = quarantine;
        for (Held held : regions) {
            held.region().deregister();
            recycler.give(held.memory(), wait);
        }
    }

    /** Sets how long the memory of a released map output waits before it is reused. */
    void setQuarantine(Duration quarantine) {
        if (quarantine.isNegative()) {
            throw new IllegalArgumentException("the recycle quarantine must not be negative, was " + quarantine);
        }
        this.quarantine = quarantine;
    }

    /** Idle (deregistered, reusable) memory held now. */
    long idleBytes() {
        return recycler.idleBytes();
    }

    /** Drops idle memory; memory released later is dropped too. */
    void close() {
        recycler.close();
    }

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
            bounds[r] = ArrowBlock.maxFramedSize(partitionLengths[r], MapOutputStore.metadata(shuffleId, mapId, r));
            if (bounds[r] > MAX_SEGMENT_BOUND) {
                throw new IOException("partition " + r + " has " + partitionLengths[r]
                        + " bytes; a segment READ over RDMA holds less than 2 GiB");
            }
            if (!current.isEmpty() && currentBound + bounds[r] > MapOutputStore.MAX_REGION_BYTES) {
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
                    MapOutputPublisher.readFully(file, memory.duplicate().limit(tail + length).position(tail), fileOffsets[r],
                            dataFile);
                    ByteBuffer out = memory.duplicate().limit(position + window).position(position);
                    long written = ArrowBlock.write(MapOutputStore.metadata(shuffleId, mapId, r),
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
                recycler.give(memory, Duration.ZERO);
            }
            built.forEach(b -> recycler.give(b.memory, Duration.ZERO));
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
        recycler.give(memory, Duration.ZERO);
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
}

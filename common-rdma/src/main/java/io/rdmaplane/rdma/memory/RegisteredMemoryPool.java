package io.rdmaplane.rdma.memory;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.HostMemory;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.stream.Collectors;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.rounding.RoundingPolicy;
import org.apache.arrow.memory.util.MemoryUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Memory registered with a {@link Node} up front and handed out in slices, so that no IO ever
 * registers memory: after warm-up, {@link #registrations()} stays still.
 *
 * <p>Slices come in size classes, powers of two from {@value #MIN_SLICE_BYTES} bytes to
 * {@link Channel#MAX_READ_BYTES} (the largest single READ). Each class has a free list; when it
 * is empty the pool registers a chunk of {@value #CHUNK_BYTES} bytes and carves it into slices
 * of that class, as long as the registered total stays within the cap. All chunks have the size
 * of the largest class, so at the cap an idle chunk (no slice out) of another class is simply
 * carved again for the class asked: the region and its rkey cover the whole chunk whatever the
 * slices, so a shift in the mix of sizes costs no registration and strands no memory. At the cap
 * with no idle chunk, {@link #acquire} waits for a release up to the acquire timeout
 * (back-pressure), then throws {@link PoolExhaustedException}. The pool never registers more than
 * its cap.
 *
 * <p>Thread-safe: one lock guards the free lists and chunks, one condition wakes the waiters.
 * Registering a chunk happens under the lock; it only happens while the pool grows to its cap.
 */
public final class RegisteredMemoryPool implements AutoCloseable {
    public static final int MIN_SLICE_BYTES = 4 << 10;
    public static final int MAX_SLICE_BYTES = Channel.MAX_READ_BYTES;
    /** The largest class, so that any idle chunk can be carved for any class. */
    public static final int CHUNK_BYTES = MAX_SLICE_BYTES;

    private static final Logger LOG = LoggerFactory.getLogger(RegisteredMemoryPool.class);
    private static final int MIN_SHIFT = Integer.numberOfTrailingZeros(MIN_SLICE_BYTES);
    private static final int CLASS_COUNT = Integer.numberOfTrailingZeros(MAX_SLICE_BYTES) - MIN_SHIFT + 1;

    /** Rounds Arrow's requests to the size classes, so Arrow accounts for the registered bytes a buffer really holds. */
    private static final RoundingPolicy SIZE_CLASS_ROUNDING =
            size -> size >= 1 && size <= MAX_SLICE_BYTES ? sliceSizeFor((int) size) : size;

    private final Node node;
    private final PoolOptions options;
    private final long acquireTimeoutNanos;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition sliceReleased = lock.newCondition();
    /** Free slices per class, used as stacks: the most recently released slice is the warmest. */
    private final List<ArrayDeque<Slice>> free = new ArrayList<>();
    /** Registered chunks by native address, for {@link #locate}. */
    private final TreeMap<Long, Chunk> chunks = new TreeMap<>();
    private final RootAllocator arrowRoot;
    private final ChunkMemory memory;
    private long registrations;
    private boolean closed;
    private List<RegisteredBuffer> leakedOnClose = List.of();

    /**
     * A pool whose chunks are of {@link PoolOptions#memory()}, mapped by the native library
     * ({@link Providers#hostMemory()}) on the node's {@linkplain Node#numaNode() NUMA node}.
     */
    public RegisteredMemoryPool(Node node, PoolOptions options) {
        this(node, options, Providers::hostMemory);
    }

    /** With the native library's memory from {@code hostMemory} (tests: a library that is missing). */
    RegisteredMemoryPool(Node node, PoolOptions options, Callable<HostMemory> hostMemory) {
        this.node = node;
        this.options = options;
        this.memory = new ChunkMemory(options.memory(), node.numaNode(), hostMemory);
        this.acquireTimeoutNanos = TimeUnit.NANOSECONDS.convert(options.acquireTimeout()); // saturates
        for (int i = 0; i < CLASS_COUNT; i++) {
            free.add(new ArrayDeque<>());
        }
        this.arrowRoot = new RootAllocator(RootAllocator.configBuilder()
                .allocationManagerFactory(new PoolAllocationManager.Factory(this))
                .roundingPolicy(SIZE_CLASS_ROUNDING)
                .maxAllocation(Long.MAX_VALUE) // the pool enforces its cap itself, with back-pressure
                .build());
    }

    /**
     * The slice size a request of {@code size} bytes gets: the next power of two, at least
     * {@value #MIN_SLICE_BYTES}.
     *
     * @throws IllegalArgumentException if {@code size} is not in 1..{@link #MAX_SLICE_BYTES}
     */
    public static int sliceSizeFor(int size) {
        if (size < 1 || size > MAX_SLICE_BYTES) {
            throw new IllegalArgumentException("a registered slice holds 1 to " + MAX_SLICE_BYTES
                    + " bytes (Channel.MAX_READ_BYTES, the largest single READ), " + size
                    + " bytes were asked for; split larger blocks into several slices");
        }
        return Math.max(MIN_SLICE_BYTES, Integer.highestOneBit(size - 1) << 1);
    }

    /**
     * Hands out a slice of at least {@code size} bytes. If the class has no free slice, registers
     * a chunk if the cap allows, else carves an idle chunk; if there is none, waits up to the
     * acquire timeout for a release.
     *
     * @throws IllegalArgumentException if {@code size} is not in 1..{@link #MAX_SLICE_BYTES}
     * @throws PoolExhaustedException   if no slice came free in time (or the wait was interrupted)
     * @throws IllegalStateException    if the pool is closed
     * @throws TransportException       if the node refused to register a chunk
     */
    public RegisteredBuffer acquire(int size) throws TransportException {
        int sliceSize = sliceSizeFor(size);
        int sizeClass = Integer.numberOfTrailingZeros(sliceSize) - MIN_SHIFT;
        long waitNanos = acquireTimeoutNanos;
        lock.lock();
        try {
            while (true) {
                if (closed) {
                    throw new IllegalStateException("registered memory pool is closed; cannot acquire " + size + " bytes");
                }
                Slice slice = free.get(sizeClass).poll();
                if (slice == null && carveChunk(sizeClass)) {
                    slice = free.get(sizeClass).poll();
                }
                if (slice != null) {
                    return handOut(slice);
                }
                if (waitNanos <= 0) {
                    throw exhausted(size, sliceSize);
                }
                try {
                    waitNanos = sliceReleased.awaitNanos(waitNanos);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new PoolExhaustedException("interrupted while waiting for a free " + sliceSize
                            + "-byte slice of the registered memory pool (" + size + " bytes asked)");
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * An Arrow allocator whose every buffer is a slice of this pool, so Arrow vectors live in
     * registered memory and peers can READ them (see {@link #locate}). Arrow rounds requests to
     * the size classes; a request above {@link #MAX_SLICE_BYTES} fails with
     * {@link IllegalArgumentException}. Close it before the pool; closing it with buffers still
     * open throws, as for any Arrow allocator.
     *
     * @param limit the most bytes this allocator may hold (Arrow's own limit, on top of the pool's cap)
     */
    public BufferAllocator newArrowAllocator(String name, long limit) {
        return arrowRoot.newChildAllocator(name, 0, limit);
    }

    /**
     * The slice handed out by this pool that contains {@code memoryAddress}, for instance the
     * {@code memoryAddress()} of an ArrowBuf from {@link #newArrowAllocator}; empty if no slice
     * that is out contains it. Its {@link RegisteredBuffer#remoteAddressOf} names the bytes to peers.
     */
    public Optional<RegisteredBuffer> locate(long memoryAddress) {
        lock.lock();
        try {
            Map.Entry<Long, Chunk> entry = chunks.floorEntry(memoryAddress);
            if (entry == null || memoryAddress - entry.getKey() >= CHUNK_BYTES) {
                return Optional.empty();
            }
            Chunk chunk = entry.getValue();
            return Optional.ofNullable(chunk.slices[(int) (memoryAddress - chunk.memoryAddress) / chunk.sliceSize].holder);
        } finally {
            lock.unlock();
        }
    }

    /** Chunks this pool has registered: it stops growing once the pool reaches its cap or its working set. */
    public long registrations() {
        lock.lock();
        try {
            return registrations;
        } finally {
            lock.unlock();
        }
    }

    /** Bytes registered now: never more than {@link PoolOptions#capacityBytes()}. */
    public long registeredBytes() {
        lock.lock();
        try {
            return (long) chunks.size() * CHUNK_BYTES;
        } finally {
            lock.unlock();
        }
    }

    /** Bytes of slices handed out and not yet released (by slice size, not request size). */
    public long inUseBytes() {
        lock.lock();
        try {
            long bytes = 0;
            for (Chunk chunk : chunks.values()) {
                bytes += (long) chunk.slicesOut * chunk.sliceSize;
            }
            return bytes;
        } finally {
            lock.unlock();
        }
    }

    /** The chunks registered now, by what their memory is made of (see {@link PoolOptions#memory()}). */
    public Map<MemoryKind, Integer> chunksByKind() {
        lock.lock();
        try {
            return memory.chunksByKind();
        } finally {
            lock.unlock();
        }
    }

    /** Why the first chunk not made of {@link PoolOptions#memory()} was not (what the log said), or empty. */
    public Optional<String> memoryFallback() {
        lock.lock();
        try {
            return Optional.ofNullable(memory.fallback());
        } finally {
            lock.unlock();
        }
    }

    public PoolOptions options() {
        return options;
    }

    /** The slices that were still out when the pool was closed; empty before close. */
    public List<RegisteredBuffer> leakedOnClose() {
        lock.lock();
        try {
            return leakedOnClose;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Deregisters every chunk (revoking their rkeys), unmaps those with no slice out, and wakes
     * waiting acquires, which then fail. Slices still out are logged as leaks and listed by
     * {@link #leakedOnClose()}; their chunks stay mapped, so a late writer corrupts nothing. Idempotent.
     */
    @Override
    public void close() {
        List<RegisteredBuffer> leaks = new ArrayList<>();
        lock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            for (Chunk chunk : chunks.values()) {
                for (Slice slice : chunk.slices) {
                    if (slice.holder != null) {
                        leaks.add(slice.holder);
                    }
                }
                chunk.region.deregister();
                if (chunk.slicesOut == 0) {
                    memory.free(chunk.mapping);
                }
            }
            chunks.clear();
            free.forEach(ArrayDeque::clear);
            leakedOnClose = List.copyOf(leaks);
            sliceReleased.signalAll();
        } finally {
            lock.unlock();
        }
        if (!leaks.isEmpty()) {
            LOG.warn("Registered memory pool closed with {} slices still out (leaked), by size and acquiring thread: {}",
                    leaks.size(), leaks.stream().collect(Collectors.groupingBy(
                            b -> b.capacity() + " bytes by '" + b.acquiredBy() + "'", TreeMap::new, Collectors.counting())));
        }
        if (!arrowRoot.getChildAllocators().isEmpty()) {
            LOG.warn("Registered memory pool closed before its Arrow allocators: {}", arrowRoot.getChildAllocators());
        } else {
            arrowRoot.close();
        }
    }

    /** Called by {@link RegisteredBuffer#close()}. */
    void release(RegisteredBuffer buffer) {
        lock.lock();
        try {
            if (buffer.released) {
                throw new IllegalStateException("registered slice released twice: " + buffer);
            }
            buffer.released = true;
            Slice slice = buffer.slice;
            slice.holder = null;
            if (closed) {
                return; // its chunk is deregistered already
            }
            slice.chunk.slicesOut--;
            free.get(slice.chunk.sizeClass).push(slice);
            sliceReleased.signalAll();
        } finally {
            lock.unlock();
        }
    }

    private RegisteredBuffer handOut(Slice slice) {
        RegisteredBuffer buffer = new RegisteredBuffer(this, slice, Thread.currentThread().getName());
        slice.holder = buffer;
        slice.chunk.slicesOut++;
        return buffer;
    }

    /**
     * Carves a chunk into free slices of {@code sizeClass}: a newly registered one if the cap
     * allows, else an idle one of another class (an idle chunk of this class would have had a
     * free slice). False if there is neither.
     */
    private boolean carveChunk(int sizeClass) throws TransportException {
        Chunk chunk;
        if ((long) (chunks.size() + 1) * CHUNK_BYTES <= options.capacityBytes()) {
            chunk = registerChunk();
        } else {
            chunk = chunks.values().stream().filter(c -> c.slicesOut == 0).findFirst().orElse(null);
            if (chunk == null) {
                return false;
            }
            Chunk idle = chunk;
            free.get(idle.sizeClass).removeIf(slice -> slice.chunk == idle);
            LOG.debug("Carving an idle chunk of {}-byte slices into {}-byte slices", idle.sliceSize, MIN_SLICE_BYTES << sizeClass);
        }
        chunk.carve(sizeClass);
        for (int i = chunk.slices.length - 1; i >= 0; i--) {
            free.get(sizeClass).push(chunk.slices[i]); // lowest offset on top
        }
        return true;
    }

    private Chunk registerChunk() throws TransportException {
        ChunkMemory.Mapping mapping = memory.allocate(CHUNK_BYTES);
        MemoryRegion region;
        try {
            region = node.register(mapping.buffer(), EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_READ));
        } catch (TransportException | RuntimeException e) {
            memory.free(mapping);
            throw e;
        }
        registrations++;
        Chunk chunk = new Chunk(region, mapping);
        chunks.put(chunk.memoryAddress, chunk);
        LOG.debug("Registered a {}-byte {} chunk ({} bytes registered now)", CHUNK_BYTES, mapping.kind().settingValue(),
                (long) chunks.size() * CHUNK_BYTES);
        return chunk;
    }

    private PoolExhaustedException exhausted(int size, int sliceSize) {
        long out = chunks.values().stream().mapToLong(c -> c.slicesOut).sum();
        return new PoolExhaustedException("registered memory pool exhausted: no free " + sliceSize + "-byte slice for "
                + size + " bytes within " + options.acquireTimeout().toMillis() + " ms. "
                + PoolOptions.CAPACITY_SETTING + " = " + options.capacityBytes() + " bytes allows " + chunks.size()
                + " chunks of " + CHUNK_BYTES + " bytes, all registered, and " + out + " slices are out (a chunk with"
                + " a slice out cannot be carved for another size). Raise " + PoolOptions.CAPACITY_SETTING
                + " or release buffers sooner");
    }

    /** One registered chunk, carved into slices of one class at a time. */
    static final class Chunk {
        final MemoryRegion region;
        final ChunkMemory.Mapping mapping;
        final ByteBuffer memory;
        final long memoryAddress;
        int sizeClass;
        int sliceSize;
        Slice[] slices;
        int slicesOut;

        Chunk(MemoryRegion region, ChunkMemory.Mapping mapping) {
            this.region = region;
            this.mapping = mapping;
            this.memory = mapping.buffer();
            this.memoryAddress = MemoryUtil.getByteBufferAddress(memory);
        }

        /** Cuts the chunk into slices of {@code sizeClass}; only while none of its slices is out. */
        void carve(int sizeClass) {
            this.sizeClass = sizeClass;
            this.sliceSize = MIN_SLICE_BYTES << sizeClass;
            this.slices = new Slice[CHUNK_BYTES / sliceSize];
            for (int i = 0; i < slices.length; i++) {
                slices[i] = new Slice(this, i * sliceSize, memory.slice(i * sliceSize, sliceSize));
            }
        }
    }

    /** A piece of a chunk; a new {@link RegisteredBuffer} is its handle each time it is handed out. */
    static final class Slice {
        final Chunk chunk;
        final int offset;
        final int size;
        final ByteBuffer view;
        RegisteredBuffer holder;

        Slice(Chunk chunk, int offset, ByteBuffer view) {
            this.chunk = chunk;
            this.offset = offset;
            this.size = view.capacity();
            this.view = view;
        }
    }
}

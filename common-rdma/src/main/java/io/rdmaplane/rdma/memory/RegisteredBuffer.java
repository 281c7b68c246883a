package io.rdmaplane.rdma.memory;

import io.rdmaplane.rdma.provider.MemoryRegion;
import java.nio.ByteBuffer;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.ForeignAllocation;

/**
 * One slice of a {@link RegisteredMemoryPool}, held until {@link #close()} gives it back.
 * Locally it is {@link #buffer()} or native memory at {@link #memoryAddress()}; a READ lands in
 * it at ({@link #region()}, {@link #offset()}); a peer READs it at ({@link #remoteAddress()},
 * {@code region().rkey()}).
 */
public final class RegisteredBuffer implements AutoCloseable {
    private final RegisteredMemoryPool pool;
    final RegisteredMemoryPool.Slice slice;
    private final String acquiredBy;
    private final ByteBuffer buffer;
    /** Written under the pool's lock; read without it to fail fast on use after release. */
    volatile boolean released;

    RegisteredBuffer(RegisteredMemoryPool pool, RegisteredMemoryPool.Slice slice, String acquiredBy) {
        this.pool = pool;
        this.slice = slice;
        this.acquiredBy = acquiredBy;
        this.buffer = slice.view.duplicate(); // the holder's own position and limit
    }

    /** The registered region this slice is part of. */
    public MemoryRegion region() {
        return slice.chunk.region;
    }

    /** Where the slice starts within {@link #region()}: the {@code localOffset} of {@code Channel.read}. */
    public int offset() {
        return slice.offset;
    }

    /** The slice's size: its size class, at least what was asked for. */
    public int capacity() {
        return slice.size;
    }

    /**
     * A view of exactly this slice (position 0 and limit {@link #capacity()} when acquired; big-endian
     * like any new ByteBuffer). The same object on every call.
     *
     * @throws IllegalStateException once released
     */
    public ByteBuffer buffer() {
        checkHeld();
        return buffer;
    }

    /** The native address of the slice's first byte, for Arrow and other off-heap code. */
    public long memoryAddress() {
        return slice.chunk.memoryAddress + slice.offset;
    }

    /**
     * The address a peer names in a READ of this slice. Provider-defined (opaque on tcp): never
     * use it as a native pointer; that is {@link #memoryAddress()}.
     */
    public long remoteAddress() {
        return region().address() + slice.offset;
    }

    /**
     * The address a peer names to READ the byte at native address {@code memoryAddress} of this
     * slice, e.g. a vector buffer decoded in place.
     *
     * @throws IllegalArgumentException if the address is outside this slice
     */
    public long remoteAddressOf(long memoryAddress) {
        long index = memoryAddress - memoryAddress();
        if (index < 0 || index >= capacity()) {
            throw new IllegalArgumentException("native address " + memoryAddress + " is outside " + this);
        }
        return remoteAddress() + index;
    }

    /** The name of the thread that acquired the slice, for leak reports. */
    public String acquiredBy() {
        return acquiredBy;
    }

    /**
     * Wraps the whole slice as an ArrowBuf of {@code allocator}, e.g. to decode Arrow IPC bytes a
     * READ landed here without copying them. The ArrowBuf then owns the slice: releasing its last
     * reference gives the slice back to the pool (so do not close this buffer as well). If the
     * allocator refuses the wrap, the slice goes back to the pool at once.
     *
     * @throws IllegalStateException once released
     */
    public ArrowBuf asArrowBuf(BufferAllocator allocator) {
        checkHeld();
        SliceAllocation allocation = new SliceAllocation(capacity(), memoryAddress());
        try {
            return allocator.wrapForeignAllocation(allocation);
        } catch (RuntimeException e) {
            if (!allocation.released) { // Arrow releases it on some failures, not on an allocator limit
                close();
            }
            throw e;
        }
    }

    /** This slice as Arrow's foreign allocation: released once, by Arrow. */
    private final class SliceAllocation extends ForeignAllocation {
        private boolean released;

        SliceAllocation(long size, long memoryAddress) {
            super(size, memoryAddress);
        }

        @Override
        protected void release0() {
            released = true;
            RegisteredBuffer.this.close();
        }
    }

    /**
     * Gives the slice back to the pool (waking an acquire waiting for it).
     *
     * @throws IllegalStateException if it was already given back
     */
    @Override
    public void close() {
        pool.release(this);
    }

    @Override
    public String toString() {
        return "RegisteredBuffer[" + capacity() + " bytes at offset " + offset() + " of region rkey " + region().rkey()
                + ", acquired by '" + acquiredBy + "'" + (released ? ", released" : "") + "]";
    }

    private void checkHeld() {
        if (released) {
            throw new IllegalStateException("registered slice used after release: " + this);
        }
    }
}

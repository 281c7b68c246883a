package io.rdmaplane.rdma.memory;

import io.rdmaplane.rdma.provider.TransportException;
import java.nio.ByteBuffer;
import org.apache.arrow.memory.AllocationManager;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.OutOfMemoryException;
import org.apache.arrow.memory.ReferenceManager;
import org.apache.arrow.memory.util.MemoryUtil;

/** One Arrow allocation backed by one pool slice, so Arrow buffers live in registered memory. */
final class PoolAllocationManager extends AllocationManager {
    private final RegisteredBuffer slice;
    private final long size;

    private PoolAllocationManager(BufferAllocator accountingAllocator, RegisteredBuffer slice, long size) {
        super(accountingAllocator);
        this.slice = slice;
        this.size = size;
    }

    /** What Arrow reserved: it must get exactly this back on release. The pool's rounding makes it the slice size. */
    @Override
    public long getSize() {
        return size;
    }

    @Override
    protected long memoryAddress() {
        return slice.memoryAddress();
    }

    @Override
    protected void release0() {
        slice.close();
    }

    /** Creates the allocations of the pool's Arrow allocators. */
    static final class Factory implements AllocationManager.Factory {
        /** Backs the shared empty buffer with a real address, as Arrow's own factories do. */
        private static final ByteBuffer EMPTY_MEMORY = ByteBuffer.allocateDirect(0);

        private final RegisteredMemoryPool pool;
        private final ArrowBuf empty =
                new ArrowBuf(ReferenceManager.NO_OP, null, 0, MemoryUtil.getByteBufferAddress(EMPTY_MEMORY));

        Factory(RegisteredMemoryPool pool) {
            this.pool = pool;
        }

        @Override
        public AllocationManager create(BufferAllocator accountingAllocator, long size) {
            if (size > RegisteredMemoryPool.MAX_SLICE_BYTES) {
                throw new IllegalArgumentException("Arrow asked for a " + size + "-byte buffer; registered memory hands out at most "
                        + RegisteredMemoryPool.MAX_SLICE_BYTES + " bytes per buffer (Channel.MAX_READ_BYTES, one READ): "
                        + "write smaller record batches");
            }
            RegisteredBuffer slice;
            try {
                slice = pool.acquire((int) size);
            } catch (TransportException e) {
                throw new OutOfMemoryException("could not register memory for a " + size + "-byte Arrow buffer", e);
            }
            try {
                return new PoolAllocationManager(accountingAllocator, slice, size);
            } catch (RuntimeException e) {
                slice.close();
                throw e;
            }
        }

        @Override
        public ArrowBuf empty() {
            return empty;
        }
    }
}

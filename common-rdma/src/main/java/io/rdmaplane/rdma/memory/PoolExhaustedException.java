package io.rdmaplane.rdma.memory;

import org.apache.arrow.memory.OutOfMemoryException;

/**
 * The pool is at its registration cap and no slice came back within the acquire timeout.
 * Callers back off or fall back to TCP; the pool never registers beyond its cap.
 * It is Arrow's {@link OutOfMemoryException} because that is what Arrow's
 * {@code BufferAllocator.buffer} promises its callers when the pool backs an Arrow allocator.
 */
public class PoolExhaustedException extends OutOfMemoryException {
    public PoolExhaustedException(String message) {
        super(message);
    }
}

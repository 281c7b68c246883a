package io.rdmaplane.rdma.memory;

import java.time.Duration;
import java.util.Objects;

/**
 * Settings of one {@link RegisteredMemoryPool}.
 *
 * @param capacityBytes  the most memory the pool registers, in bytes ({@value #CAPACITY_SETTING}).
 *                       It registers whole chunks of {@link RegisteredMemoryPool#CHUNK_BYTES}, so
 *                       at least one chunk; a remainder below a chunk stays unused.
 * @param acquireTimeout how long an acquire waits for a release when the pool is at its cap;
 *                       zero fails at once ({@value #ACQUIRE_TIMEOUT_SETTING})
 * @param memory         what the chunks are made of ({@value MemoryKind#SETTING})
 */
public record PoolOptions(long capacityBytes, Duration acquireTimeout, MemoryKind memory) {
    /** The setting that raises the cap, named in errors so an operator knows what to change. */
    public static final String CAPACITY_SETTING = "pool.capacity";
    public static final String ACQUIRE_TIMEOUT_SETTING = "pool.acquireTimeout";

    /** With {@link MemoryKind#AUTO} memory, the setting's default. */
    public PoolOptions(long capacityBytes, Duration acquireTimeout) {
        this(capacityBytes, acquireTimeout, MemoryKind.AUTO);
    }

    public PoolOptions {
        Objects.requireNonNull(acquireTimeout, "acquireTimeout");
        Objects.requireNonNull(memory, "memory");
        if (capacityBytes < RegisteredMemoryPool.CHUNK_BYTES) {
            throw new IllegalArgumentException(CAPACITY_SETTING + " must be at least " + RegisteredMemoryPool.CHUNK_BYTES
                    + " bytes (one 8 MiB chunk, the largest slice), was " + capacityBytes);
        }
        if (acquireTimeout.isNegative()) {
            throw new IllegalArgumentException(ACQUIRE_TIMEOUT_SETTING + " must not be negative, was " + acquireTimeout);
        }
    }
}


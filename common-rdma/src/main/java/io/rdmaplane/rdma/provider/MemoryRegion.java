package io.rdmaplane.rdma.provider;

import java.nio.ByteBuffer;
import java.util.Set;

/**
 * Memory registered with a {@link Node}: peers READ it by ({@link #address()}, {@link #rkey()}),
 * the local node READs into it. Deregistering revokes the rkey at once: a READ that
 * arrives afterwards fails with {@link Status#REMOTE_ACCESS_ERROR}.
 */
public interface MemoryRegion extends AutoCloseable {
    /** The address peers name in a READ; the first byte of {@link #buffer()}. */
    long address();

    int length();

    int rkey();

    Set<Access> access();

    /** A view of the whole registered memory (position 0, limit {@link #length()}). */
    ByteBuffer buffer();

    /** False once deregistered (or its node closed). */
    boolean isValid();

    /** Revokes the rkey. Idempotent. */
    void deregister();

    /**
     * Tells {@code listener} once, on the deregistering thread, when this region is deregistered
     * (at once if it already is). A listener registered again (equal to one registered before) is
     * kept once; the region forgets its listeners when it tells them.
     */
    void whenDeregistered(java.util.function.Consumer<MemoryRegion> listener);

    @Override
    default void close() {
        deregister();
    }
}

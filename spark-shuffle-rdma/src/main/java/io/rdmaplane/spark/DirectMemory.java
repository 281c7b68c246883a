package io.rdmaplane.spark;

import java.nio.ByteBuffer;

/** Direct memory for registration, page-aligned (fewer pages pinned), freed by the collector once unreferenced. */
public final class DirectMemory {
    private static final int PAGE = 4096;

    private DirectMemory() {
    }

    /** {@code bytes} of zeroed direct memory starting on a page boundary (position 0, limit and capacity {@code bytes}). */
    public static ByteBuffer pageAligned(int bytes) {
        long pages = ((long) bytes + PAGE - 1) / PAGE * PAGE; // alignedSlice rounds the end down to a page too
        ByteBuffer memory = ByteBuffer.allocateDirect(Math.toIntExact(pages + PAGE - 1)).alignedSlice(PAGE);
        return memory.limit(bytes).slice();
    }
}

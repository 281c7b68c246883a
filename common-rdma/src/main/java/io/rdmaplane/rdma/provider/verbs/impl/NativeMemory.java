package io.rdmaplane.rdma.provider.verbs.impl;

import io.rdmaplane.rdma.provider.HostMemory;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * {@link HostMemory} from the project's JNI library (src/main/native/memory.c): mmap with
 * MAP_HUGETLB, or an anonymous mapping aligned to 2 MiB with madvise(MADV_HUGEPAGE); mbind to the
 * preferred NUMA node before the pages are faulted in (MADV_POPULATE_WRITE); munmap. Defined by the
 * class loader that loads the library (DisniRuntime); the verbs provider hands it out.
 */
public final class NativeMemory implements HostMemory {

    @Override
    public ByteBuffer mapHugetlb(int bytes, int numaNode) throws IOException {
        return finish(check("mmap(MAP_HUGETLB) of " + bytes + " bytes", mapHugetlb(bytes)), bytes, numaNode);
    }

    @Override
    public ByteBuffer mapTransparent(int bytes, int numaNode) throws IOException {
        return finish(check("mmap + madvise(MADV_HUGEPAGE) of " + bytes + " bytes", mapTransparent(bytes)), bytes, numaNode);
    }

    @Override
    public void unmap(ByteBuffer mapping) throws IOException {
        check("munmap of " + mapping.capacity() + " bytes", munmap(mapping));
    }

    /** Places the untouched pages on the node, faults them in, and wraps them; unmaps again on failure. */
    private static ByteBuffer finish(long address, int bytes, int numaNode) throws IOException {
        boolean done = false;
        try {
            if (numaNode >= 0) {
                check("mbind(MPOL_PREFERRED, node " + numaNode + ")", preferNode(address, bytes, numaNode));
            }
            check("madvise(MADV_POPULATE_WRITE) of " + bytes + " bytes", populate(address, bytes));
            ByteBuffer buffer = wrap(address, bytes);
            if (buffer == null) {
                throw new IOException("NewDirectByteBuffer failed for " + bytes + " bytes");
            }
            done = true;
            return buffer;
        } finally {
            if (!done) {
                ByteBuffer whole = wrap(address, bytes);
                if (whole != null) {
                    munmap(whole);
                }
            }
        }
    }

    private static long check(String call, long result) throws IOException {
        if (result < 0 && result > -4096) {
            int errno = (int) -result;
            throw new IOException(call + " failed: " + describe(errno) + " (errno " + errno + ")");
        }
        return result;
    }

    private static native long mapHugetlb(long bytes);

    private static native long mapTransparent(long bytes);

    private static native int preferNode(long address, long bytes, int node);

    private static native int populate(long address, long bytes);

    private static native int munmap(ByteBuffer buffer);

    private static native ByteBuffer wrap(long address, long bytes);

    private static native String describe(int errno);
}

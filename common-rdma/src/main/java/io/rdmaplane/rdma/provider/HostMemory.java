package io.rdmaplane.rdma.provider;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * Anonymous memory mapped outside the Java heap's direct-buffer allocator, for the chunks of a
 * registered-memory pool: huge pages and a preferred NUMA node, which the NIC translates and reaches
 * faster than scattered 4 KiB pages. A provider with a native library supplies it
 * ({@link TransportProvider#hostMemory()}, found by {@link Providers#hostMemory()}).
 *
 * <p>Every mapping is page-aligned, zero-filled, faulted in before it is returned, and stays valid
 * until {@link #unmap}: after that, touching any view of it crashes the JVM, so only unmap memory that
 * nothing refers to any more.
 */
public interface HostMemory {

    /**
     * {@code bytes} backed by huge pages the administrator reserved ({@code vm.nr_hugepages}), of the
     * default huge page size, which must divide {@code bytes}.
     *
     * @param numaNode the node the pages should come from, or -1 for the kernel's choice
     * @throws IOException naming the call and errno, e.g. when too few huge pages are free
     */
    ByteBuffer mapHugetlb(int bytes, int numaNode) throws IOException;

    /**
     * {@code bytes} of ordinary anonymous memory aligned to 2 MiB and advised for transparent huge
     * pages, which the kernel uses when {@code transparent_hugepage/enabled} is {@code always} or
     * {@code madvise} (with base pages where it finds no free huge page).
     */
    ByteBuffer mapTransparent(int bytes, int numaNode) throws IOException;

    /** Unmaps a buffer this returned (whole); nothing may touch it or its views afterwards. */
    void unmap(ByteBuffer mapping) throws IOException;
}

package io.rdmaplane.rdma.provider.verbs.impl;

/**
 * Memory advice the project's JNI library gives (src/main/native/mapping.c). Defined by the same
 * class loader as DiSNI's classes, which loads the library.
 */
final class NativeMapping {
    private NativeMapping() {
    }

    /** madvise(MADV_NOHUGEPAGE) over the pages holding [address, address + length): 0 or a negative errno. */
    static native int adviseNoHugePages(long address, long length);
}

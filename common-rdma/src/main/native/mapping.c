/*
 * Memory advice for io.rdmaplane.rdma.provider.verbs.impl.NativeMapping, asked for before a file
 * mapping is registered. On Linux 7.2 (ext4) ibv_reg_mr of a read-only MAP_PRIVATE file mapping
 * hung unless madvise(MADV_NOHUGEPAGE) came first (issue 12's table); VerbsNode advises such a
 * mapping off huge pages before registering it.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "disni_native.h"

#define NMAP(name) Java_io_rdmaplane_rdma_provider_verbs_impl_NativeMapping_##name
/* NativeMapping relocated in the HDFS plug-in jar (see RP_ALIAS) */
#define NMAP_SHADED(name) Java_io_rdmaplane_shaded_rdma_provider_verbs_impl_NativeMapping_##name

/* madvise(MADV_NOHUGEPAGE) over the pages that hold [addr, addr + length): 0 or a negative errno. */
JNIEXPORT jint JNICALL NMAP(adviseNoHugePages)(JNIEnv *env, jclass cls, jlong addr, jlong length) {
    long page = sysconf(_SC_PAGESIZE);
    if (addr == 0 || length <= 0 || page <= 0) {
        return -EINVAL;
    }
    uintptr_t mask = (uintptr_t) page - 1;
    uintptr_t start = (uintptr_t) addr & ~mask;
    uintptr_t end = ((uintptr_t) addr + (uintptr_t) length + mask) & ~mask;
    return madvise(PTR(void, start), end - start, MADV_NOHUGEPAGE) == 0 ? 0 : -rp_errno();
}

RP_ALIAS(NMAP_SHADED(adviseNoHugePages), NMAP(adviseNoHugePages))

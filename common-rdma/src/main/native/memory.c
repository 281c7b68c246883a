/*
 * Anonymous memory for the registered-memory pool's chunks, for
 * io.rdmaplane.rdma.provider.verbs.impl.NativeMemory: huge pages reserved by the administrator
 * (mmap(2) MAP_HUGETLB), transparent huge pages (madvise(2) MADV_HUGEPAGE on a mapping aligned to
 * 2 MiB), a preferred NUMA node (mbind(2)), and munmap(2). Written from those man pages.
 *
 * Addresses and lengths travel as jlong; a call returns 0 (or an address) on success and a
 * negative errno on failure, which the Java side turns into an IOException with describe().
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mempolicy.h>

#include "disni_native.h"

#define NMEM(name) Java_io_rdmaplane_rdma_provider_verbs_impl_NativeMemory_##name
/* NativeMemory relocated in the HDFS plug-in jar (see RP_ALIAS) */
#define NMEM_SHADED(name) Java_io_rdmaplane_shaded_rdma_provider_verbs_impl_NativeMemory_##name

/* The size transparent huge pages come in on x86_64 and aarch64 (4 KiB base pages). */
#define THP_BYTES ((uintptr_t) 2 << 20)

/* bytes of huge pages of the default size (Hugepagesize), not yet touched: the address, or a negative errno
 * (ENOMEM when too few huge pages are free, EINVAL when bytes is not a multiple of the huge page size). */
JNIEXPORT jlong JNICALL NMEM(mapHugetlb)(JNIEnv *env, jclass cls, jlong bytes) {
    void *p = mmap(NULL, (size_t) bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    return p == MAP_FAILED ? -rp_errno() : HANDLE(p);
}
RP_ALIAS(NMEM_SHADED(mapHugetlb), NMEM(mapHugetlb))

/* bytes of ordinary anonymous memory starting on a 2 MiB boundary, advised MADV_HUGEPAGE so that the kernel backs
 * it with transparent huge pages (enabled = always or madvise): the address, or a negative errno. Maps 2 MiB more
 * than asked and unmaps the unaligned head and tail. */
JNIEXPORT jlong JNICALL NMEM(mapTransparent)(JNIEnv *env, jclass cls, jlong bytes) {
    size_t length = (size_t) bytes;
    char *raw = mmap(NULL, length + THP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        return -rp_errno();
    }
    char *start = (char *) (((uintptr_t) raw + THP_BYTES - 1) & ~(THP_BYTES - 1));
    char *end = start + length;
    if (start > raw) {
        munmap(raw, (size_t) (start - raw));
    }
    if (raw + length + THP_BYTES > end) {
        munmap(end, (size_t) (raw + length + THP_BYTES - end));
    }
    if (madvise(start, length, MADV_HUGEPAGE) != 0) {
        int err = rp_errno();
        munmap(start, length);
        return -err;
    }
    return HANDLE(start);
}
RP_ALIAS(NMEM_SHADED(mapTransparent), NMEM(mapTransparent))

/* Makes node the preferred node of [address, address + bytes) (MPOL_PREFERRED: a node out of free pages falls
 * back to another instead of failing the fault, which for huge pages would be SIGBUS). Before the pages are
 * touched. 0, or a negative errno. */
JNIEXPORT jint JNICALL NMEM(preferNode)(JNIEnv *env, jclass cls, jlong address, jlong bytes, jint node) {
    unsigned long mask[16];
    const int bits = (int) (sizeof mask * 8);
    if (node < 0 || node >= bits - 1) {
        return -EINVAL;
    }
    memset(mask, 0, sizeof mask);
    mask[node / (8 * sizeof mask[0])] |= 1UL << (node % (8 * sizeof mask[0]));
    if (syscall(SYS_mbind, PTR(void, address), (unsigned long) bytes, MPOL_PREFERRED, mask, (unsigned long) bits, 0UL) != 0) {
        return -rp_errno();
    }
    return 0;
}
RP_ALIAS(NMEM_SHADED(preferNode), NMEM(preferNode))

/* Faults every page in for writing now (MADV_POPULATE_WRITE, Linux 5.14), so that a page the kernel cannot supply
 * is an error here rather than SIGBUS at the first write. 0 (also on kernels without it), or a negative errno. */
JNIEXPORT jint JNICALL NMEM(populate)(JNIEnv *env, jclass cls, jlong address, jlong bytes) {
#ifdef MADV_POPULATE_WRITE
    if (madvise(PTR(void, address), (size_t) bytes, MADV_POPULATE_WRITE) != 0) {
        int err = rp_errno();
        return err == EINVAL ? 0 : -err; /* EINVAL: an older kernel that does not know the advice */
    }
#endif
    return 0;
}
RP_ALIAS(NMEM_SHADED(populate), NMEM(populate))

/* Unmaps the whole of a direct buffer wrap() made: 0, or a negative errno (EINVAL: not a direct buffer). */
JNIEXPORT jint JNICALL NMEM(munmap)(JNIEnv *env, jclass cls, jobject buffer) {
    void *address = (*env)->GetDirectBufferAddress(env, buffer);
    jlong bytes = (*env)->GetDirectBufferCapacity(env, buffer);
    if (address == NULL || bytes <= 0) {
        return -EINVAL;
    }
    return munmap(address, (size_t) bytes) == 0 ? 0 : -rp_errno();
}
RP_ALIAS(NMEM_SHADED(munmap), NMEM(munmap))

/* A direct ByteBuffer over [address, address + bytes), or null (an OutOfMemoryError is pending). */
JNIEXPORT jobject JNICALL NMEM(wrap)(JNIEnv *env, jclass cls, jlong address, jlong bytes) {
    return (*env)->NewDirectByteBuffer(env, PTR(void, address), bytes);
}
RP_ALIAS(NMEM_SHADED(wrap), NMEM(wrap))

/* strerror's text for a positive errno. */
JNIEXPORT jstring JNICALL NMEM(describe)(JNIEnv *env, jclass cls, jint err) {
    return (*env)->NewStringUTF(env, strerror(err));
}
RP_ALIAS(NMEM_SHADED(describe), NMEM(describe))

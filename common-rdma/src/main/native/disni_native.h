/*
 * The project's own JNI library behind DiSNI 2.1's Java classes
 * (com.ibm.disni.verbs.impl.NativeDispatcher and com.ibm.disni.util.NativeAffinity).
 * Written from the contract visible in DiSNI's bytecode and from rdma-core's man pages.
 *
 * Conventions, taken from what DiSNI's Java callers do with return values:
 *  - Handles are native pointers passed as jlong (ibv_context*, ibv_pd*, rdma_cm_id*, ...).
 *    A 0 handle is an error, never dereferenced.
 *  - Methods that create an object (return long), return void, or read a field of an object
 *    (_getQpNum, _getContextFd, ...), and that declare IOException, throw an IOException
 *    naming the failed call and errno.
 *  - The other int-returning methods return 0 (or a count/value >= 0) on success and a
 *    negative errno on failure: their Java callers test the sign and turn a negative into an
 *    exception, a null or false.
 *
 * Facts of the contract that are easy to get wrong (all read from DiSNI 2.1's bytecode):
 *  - All 48 NativeDispatcher methods are instance methods; NativeAffinity's two are static.
 *  - _getCmEvent gets two output addresses: listen_id (only CONNECT_REQUEST has one) and id.
 *    _ackCmEvent only gets the event type, so events are acknowledged in _getCmEvent.
 *  - RdmaCmNat passes the cm id, not the QP, to _destroyQP; _modifyQP always gets attr 0.
 *  - _createQP gets no scatter/gather limits (IbvQPCap's are never passed), and _connect /
 *    _accept get only the retry counts (RdmaConnParam's read depths, flow control, srq and
 *    qp_num are never passed): cm.c chooses those.
 *  - SockAddrIn writes only family, port and address (8 bytes); the rest of its buffer may
 *    hold stale bytes from DiSNI's buffer pool.
 *  - NatRegMrCall expects a handle > 0; NatGetCqCall wants exactly 0 from _getCqEvent.
 */
#ifndef RDMAPLANE_DISNI_NATIVE_H
#define RDMAPLANE_DISNI_NATIVE_H

#include <errno.h>
#include <stdint.h>
#include <jni.h>

/* Handles <-> pointers. */
#define PTR(type, handle) ((type *) (uintptr_t) (handle))
#define HANDLE(ptr) ((jlong) (uintptr_t) (ptr))

/* Throws java.io.IOException("<what> failed: <strerror(err)> (errno <err>)") unless an
 * exception is already pending. err is a positive errno value. */
void rp_throw_io(JNIEnv *env, const char *what, int err);

/* Throws java.io.IOException("<what>: invalid handle 0") for a missing handle. */
void rp_throw_bad_handle(JNIEnv *env, const char *what);

/* Returns the positive errno of a failed call that reports errors through errno, falling
 * back to EIO when the library left errno at 0. */
static inline int rp_errno(void) {
    return errno != 0 ? errno : EIO;
}

/* Waits until fd is readable or timeout_ms passes (negative: no limit).
 * Returns 0 when readable, -ETIMEDOUT on timeout, or another negative errno. */
int rp_wait_readable(int fd, int timeout_ms);

/* The NativeDispatcher JNI name prefix, to keep the function definitions readable. */
#define ND(name) Java_com_ibm_disni_verbs_impl_NativeDispatcher__1##name

/* The HDFS plug-in jar relocates common-rdma to io.rdmaplane.shaded.rdma (hdfs-transfer-rdma/pom.xml), so that
 * it shares a JVM and a class path with the Spark plug-in jar without a clash. JNI binds a native method by its
 * class's name (no RegisterNatives here), so each native method of common-rdma's own classes (NativeCm,
 * NativeMw) is exported under its relocated name too, as an alias of the same function. DiSNI's classes keep
 * their names in both jars. */
#define RP_STRING(x) RP_STRING_(x)
#define RP_STRING_(x) #x
#define RP_ALIAS(shaded, target) \
    JNIEXPORT extern __typeof__(target) shaded __attribute__((alias(RP_STRING(target))));

#endif

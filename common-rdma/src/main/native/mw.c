/*
 * Memory windows (libibverbs) for io.rdmaplane.rdma.provider.verbs.impl.NativeMw: a type 2
 * window over part of a memory region, bound by a BIND_MW work request on one QP, serves remote
 * READs on that QP only (ibv_alloc_mw(3), ibv_post_send(3)). Handles: ibv_context*, ibv_pd*,
 * ibv_qp*, ibv_mr*, ibv_mw*.
 */
#include <string.h>
#include <infiniband/verbs.h>

#include "disni_native.h"

#define NMW(name) Java_io_rdmaplane_rdma_provider_verbs_impl_NativeMw_##name
/* NativeMw relocated in the HDFS plug-in jar (see RP_ALIAS) */
#define NMW_SHADED(name) Java_io_rdmaplane_shaded_rdma_provider_verbs_impl_NativeMw_##name

/* The device's type 2 window count (max_mw), 0 when it binds no type 2 window, or a negative errno. */
JNIEXPORT jint JNICALL NMW(type2Windows)(JNIEnv *env, jclass cls, jlong context) {
    if (context == 0) {
        return -EINVAL;
    }
    struct ibv_device_attr attr;
    memset(&attr, 0, sizeof attr);
    int rc = ibv_query_device(PTR(struct ibv_context, context), &attr);
    if (rc != 0) {
        return -(rc > 0 ? rc : rp_errno());
    }
    unsigned int type2 = IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
    if ((attr.device_cap_flags & type2) == 0 || attr.max_mw <= 0) {
        return 0;
    }
    return attr.max_mw;
}

JNIEXPORT jlong JNICALL NMW(alloc)(JNIEnv *env, jclass cls, jlong pd) {
    if (pd == 0) {
        rp_throw_bad_handle(env, "ibv_alloc_mw");
        return 0;
    }
    errno = 0;
    struct ibv_mw *mw = ibv_alloc_mw(PTR(struct ibv_pd, pd), IBV_MW_TYPE_2);
    if (mw == NULL) {
        rp_throw_io(env, "ibv_alloc_mw (type 2)", rp_errno());
        return 0;
    }
    return HANDLE(mw);
}

/* The window's current rkey (its index in the upper 24 bits, its key in the low 8). */
JNIEXPORT jint JNICALL NMW(rkey)(JNIEnv *env, jclass cls, jlong mw) {
    return mw == 0 ? 0 : (jint) PTR(struct ibv_mw, mw)->rkey;
}

/*
 * Posts a signaled BIND_MW of [addr, addr + length) of mr, remote READ only, on qp with the rkey
 * new_rkey (the window's index with a new key byte) and wr_id; the completion comes on qp's send
 * CQ. Returns 0 or a negative errno (the post was refused).
 */
JNIEXPORT jint JNICALL NMW(postBind)(JNIEnv *env, jclass cls, jlong qp, jlong mw, jlong mr, jlong addr, jlong length,
                                     jint new_rkey, jlong wr_id) {
    if (qp == 0 || mw == 0 || mr == 0 || length <= 0) {
        return -EINVAL;
    }
    struct ibv_mw *window = PTR(struct ibv_mw, mw);
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = (uint64_t) wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = window;
    wr.bind_mw.rkey = (uint32_t) new_rkey;
    wr.bind_mw.bind_info.mr = PTR(struct ibv_mr, mr);
    wr.bind_mw.bind_info.addr = (uint64_t) addr;
    wr.bind_mw.bind_info.length = (uint64_t) length;
    wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(PTR(struct ibv_qp, qp), &wr, &bad);
    if (rc != 0) {
        return -rc;
    }
    window->rkey = (uint32_t) new_rkey; /* type 2: the application keeps the bound rkey */
    return 0;
}

/* ibv_dealloc_mw: the window and any binding of it are gone (its rkey READs nothing) when it returns. */
JNIEXPORT jint JNICALL NMW(dealloc)(JNIEnv *env, jclass cls, jlong mw) {
    if (mw == 0) {
        return -EINVAL;
    }
    int rc = ibv_dealloc_mw(PTR(struct ibv_mw, mw));
    return rc == 0 ? 0 : -rc;
}

RP_ALIAS(NMW_SHADED(type2Windows), NMW(type2Windows))
RP_ALIAS(NMW_SHADED(alloc), NMW(alloc))
RP_ALIAS(NMW_SHADED(rkey), NMW(rkey))
RP_ALIAS(NMW_SHADED(postBind), NMW(postBind))
RP_ALIAS(NMW_SHADED(dealloc), NMW(dealloc))

/*
 * Chained work requests for io.rdmaplane.rdma.provider.verbs.impl.NativePost: the pieces of one
 * READ posted as one list in one ibv_post_send (ibv_post_send(3)), so the device is rung once.
 * Handles: ibv_qp*.
 */
#include <string.h>
#include <infiniband/verbs.h>

#include "disni_native.h"

#define NPOST(name) Java_io_rdmaplane_rdma_provider_verbs_impl_NativePost_##name
/* NativePost relocated in the HDFS plug-in jar (see RP_ALIAS) */
#define NPOST_SHADED(name) Java_io_rdmaplane_shaded_rdma_provider_verbs_impl_NativePost_##name

#define MAX_PIECES 64

/*
 * Posts [remote, remote + length) READ into [local, local + length) as ceil(length / piece)
 * signaled RDMA_READ work requests over consecutive ranges, each with wr_id, chained in one list.
 * Returns 0, or a negative errno: the post was refused (some of the first pieces may have been
 * posted: the QP is to be closed then, as after any refused post).
 */
JNIEXPORT jint JNICALL NPOST(postRead)(JNIEnv *env, jclass cls, jlong qp, jlong wr_id, jlong local, jint lkey,
                                       jlong remote, jint rkey, jint length, jint piece) {
    if (qp == 0 || length <= 0 || piece <= 0) {
        return -EINVAL;
    }
    int pieces = (int) (((long long) length + piece - 1) / piece);
    if (pieces > MAX_PIECES) {
        return -EINVAL;
    }
    struct ibv_send_wr wrs[MAX_PIECES];
    struct ibv_sge sges[MAX_PIECES];
    memset(wrs, 0, sizeof(struct ibv_send_wr) * (size_t) pieces);
    for (int i = 0; i < pieces; i++) {
        long long offset = (long long) i * piece;
        int n = length - offset < piece ? (int) (length - offset) : piece;
        sges[i].addr = (uint64_t) local + (uint64_t) offset;
        sges[i].length = (uint32_t) n;
        sges[i].lkey = (uint32_t) lkey;
        wrs[i].wr_id = (uint64_t) wr_id;
        wrs[i].sg_list = &sges[i];
        wrs[i].num_sge = 1;
        wrs[i].opcode = IBV_WR_RDMA_READ;
        wrs[i].send_flags = IBV_SEND_SIGNALED;
        wrs[i].wr.rdma.remote_addr = (uint64_t) remote + (uint64_t) offset;
        wrs[i].wr.rdma.rkey = (uint32_t) rkey;
        wrs[i].next = i + 1 < pieces ? &wrs[i + 1] : NULL;
    }
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(PTR(struct ibv_qp, qp), wrs, &bad);
    return rc == 0 ? 0 : -(rc > 0 ? rc : EIO);
}

RP_ALIAS(NPOST_SHADED(postRead), NPOST(postRead))

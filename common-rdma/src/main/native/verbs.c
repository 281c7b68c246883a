/*
 * Verbs (libibverbs) for NativeDispatcher, as called by DiSNI's RdmaVerbsNat and its
 * Nat*Call classes. Handles: ibv_context*, ibv_pd*, ibv_comp_channel*, ibv_cq*, ibv_qp*,
 * ibv_mr*.
 *
 * Work requests are not copied: NatPostSendCall/NatPostRecvCall serialise a linked list of
 * real ibv_send_wr/ibv_recv_wr structures (with absolute next and sg_list pointers) into a
 * direct buffer using the sizes and offsets reported by layout.c, and pass its address.
 * Likewise NatPollCqCall passes a buffer of ibv_wc entries.
 */
#include <string.h>
#include <infiniband/verbs.h>

#include "disni_native.h"

JNIEXPORT jlong JNICALL ND(allocPd)(JNIEnv *env, jobject self, jlong context) {
    if (context == 0) {
        rp_throw_bad_handle(env, "ibv_alloc_pd");
        return -1;
    }
    errno = 0;
    struct ibv_pd *pd = ibv_alloc_pd(PTR(struct ibv_context, context));
    if (pd == NULL) {
        rp_throw_io(env, "ibv_alloc_pd", rp_errno());
        return -1;
    }
    return HANDLE(pd);
}

JNIEXPORT jlong JNICALL ND(createCompChannel)(JNIEnv *env, jobject self, jlong context) {
    if (context == 0) {
        rp_throw_bad_handle(env, "ibv_create_comp_channel");
        return -1;
    }
    errno = 0;
    struct ibv_comp_channel *channel = ibv_create_comp_channel(PTR(struct ibv_context, context));
    if (channel == NULL) {
        rp_throw_io(env, "ibv_create_comp_channel", rp_errno());
        return -1;
    }
    return HANDLE(channel);
}

JNIEXPORT jlong JNICALL ND(createCQ)(JNIEnv *env, jobject self, jlong context, jlong channel, jint ncqe,
                                     jint comp_vector) {
    if (context == 0) {
        rp_throw_bad_handle(env, "ibv_create_cq");
        return -1;
    }
    if (ncqe <= 0 || comp_vector < 0) {
        rp_throw_io(env, "ibv_create_cq", EINVAL);
        return -1;
    }
    errno = 0;
    struct ibv_cq *cq = ibv_create_cq(PTR(struct ibv_context, context), ncqe, NULL,
                                      PTR(struct ibv_comp_channel, channel), comp_vector);
    if (cq == NULL) {
        rp_throw_io(env, "ibv_create_cq", rp_errno());
        return -1;
    }
    return HANDLE(cq);
}

/*
 * RdmaVerbsNat.modifyQP always passes a null attribute pointer and no attribute mask (the
 * rdma_cm drives the QP through its states). With no attributes there is nothing to change:
 * report the QP's current state (enum ibv_qp_state, >= 0) so the caller learns the QP is
 * alive. A non-null pointer cannot be interpreted without a mask and is rejected.
 */
JNIEXPORT jint JNICALL ND(modifyQP)(JNIEnv *env, jobject self, jlong qp, jlong attr_ptr) {
    if (qp == 0 || attr_ptr != 0) {
        return -EINVAL;
    }
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;
    memset(&attr, 0, sizeof attr);
    int rc = ibv_query_qp(PTR(struct ibv_qp, qp), &attr, IBV_QP_STATE, &init);
    return rc == 0 ? (jint) attr.qp_state : -rc;
}

/*
 * Registers [addr, addr + length) and stores lkey, rkey and the kernel handle (32 bits each,
 * native order) at the three output addresses, as NatRegMrCall reads them back.
 */
JNIEXPORT jlong JNICALL ND(regMr)(JNIEnv *env, jobject self, jlong pd, jlong addr, jint length,
                                  jint access, jlong lkey_out, jlong rkey_out, jlong handle_out) {
    if (pd == 0 || lkey_out == 0 || rkey_out == 0 || handle_out == 0) {
        rp_throw_bad_handle(env, "ibv_reg_mr");
        return -1;
    }
    if (addr == 0 || length <= 0) {
        rp_throw_io(env, "ibv_reg_mr", EINVAL);
        return -1;
    }
    errno = 0;
    struct ibv_mr *mr = ibv_reg_mr(PTR(struct ibv_pd, pd), PTR(void, addr), (size_t) length, access);
    if (mr == NULL) {
        rp_throw_io(env, "ibv_reg_mr", rp_errno());
        return -1;
    }
    *PTR(uint32_t, lkey_out) = mr->lkey;
    *PTR(uint32_t, rkey_out) = mr->rkey;
    *PTR(uint32_t, handle_out) = mr->handle;
    return HANDLE(mr);
}

/*
 * On-demand paging support: -1 when the device has none, otherwise its RC transport ODP
 * capability bits (IBV_ODP_SUPPORT_SEND/RECV/WRITE/READ/...), which may be 0.
 */
JNIEXPORT jint JNICALL ND(queryOdpSupport)(JNIEnv *env, jobject self, jlong context) {
    if (context == 0) {
        return -EINVAL;
    }
    struct ibv_device_attr_ex attr;
    memset(&attr, 0, sizeof attr);
    if (ibv_query_device_ex(PTR(struct ibv_context, context), NULL, &attr) != 0) {
        return -1;
    }
    if ((attr.odp_caps.general_caps & IBV_ODP_SUPPORT) == 0) {
        return -1;
    }
    return (jint) attr.odp_caps.per_transport_caps.rc_odp_caps;
}

/*
 * Prefetches [addr, addr + length) of an ODP memory region (DiSNI's name comes from the old
 * Mellanox "experimental" verbs; rdma-core's equivalent is ibv_advise_mr). Prefetches for
 * reading, which any region allows, and waits for it (IBV_ADVISE_MR_FLAG_FLUSH).
 * Returns 0 or a negative errno (-EOPNOTSUPP where the provider has no ODP, e.g. rxe).
 */
JNIEXPORT jint JNICALL ND(expPrefetchMr)(JNIEnv *env, jobject self, jlong mr_handle, jlong addr,
                                         jint length) {
    if (mr_handle == 0) {
        return -EINVAL;
    }
    struct ibv_mr *mr = PTR(struct ibv_mr, mr_handle);
    uint64_t start = (uint64_t) addr;
    uint64_t mr_start = (uint64_t) (uintptr_t) mr->addr;
    if (length <= 0 || start < mr_start || start + (uint64_t) length > mr_start + mr->length) {
        return -EINVAL;
    }
    struct ibv_sge sge = { .addr = start, .length = (uint32_t) length, .lkey = mr->lkey };
    int rc = ibv_advise_mr(mr->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
    return rc == 0 ? 0 : -(rc > 0 ? rc : rp_errno());
}

JNIEXPORT void JNICALL ND(deregMr)(JNIEnv *env, jobject self, jlong mr) {
    if (mr == 0) {
        rp_throw_bad_handle(env, "ibv_dereg_mr");
        return;
    }
    int rc = ibv_dereg_mr(PTR(struct ibv_mr, mr));
    if (rc != 0) {
        rp_throw_io(env, "ibv_dereg_mr", rc);
    }
}

JNIEXPORT void JNICALL ND(postSend)(JNIEnv *env, jobject self, jlong qp, jlong wr_list) {
    if (qp == 0 || wr_list == 0) {
        rp_throw_bad_handle(env, "ibv_post_send");
        return;
    }
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(PTR(struct ibv_qp, qp), PTR(struct ibv_send_wr, wr_list), &bad);
    if (rc != 0) {
        rp_throw_io(env, "ibv_post_send", rc);
    }
}

JNIEXPORT void JNICALL ND(postRecv)(JNIEnv *env, jobject self, jlong qp, jlong wr_list) {
    if (qp == 0 || wr_list == 0) {
        rp_throw_bad_handle(env, "ibv_post_recv");
        return;
    }
    struct ibv_recv_wr *bad = NULL;
    int rc = ibv_post_recv(PTR(struct ibv_qp, qp), PTR(struct ibv_recv_wr, wr_list), &bad);
    if (rc != 0) {
        rp_throw_io(env, "ibv_post_recv", rc);
    }
}

/*
 * Waits up to timeout_ms for a completion event on the channel and takes it. Returns 0, or
 * -ETIMEDOUT / another negative errno (DiSNI maps any non-zero result to "no event"). The
 * event must still be acknowledged through _ackCqEvent, as DiSNI does.
 */
JNIEXPORT jint JNICALL ND(getCqEvent)(JNIEnv *env, jobject self, jlong channel, jint timeout_ms) {
    if (channel == 0) {
        return -EINVAL;
    }
    struct ibv_comp_channel *ch = PTR(struct ibv_comp_channel, channel);
    int rc = rp_wait_readable(ch->fd, timeout_ms);
    if (rc != 0) {
        return rc;
    }
    struct ibv_cq *cq = NULL;
    void *cq_context = NULL;
    errno = 0;
    if (ibv_get_cq_event(ch, &cq, &cq_context) != 0) {
        return -rp_errno();
    }
    return 0;
}

/* Polls up to ne completions into the ibv_wc array at wc_out; returns the count (>= 0). */
JNIEXPORT jint JNICALL ND(pollCQ)(JNIEnv *env, jobject self, jlong cq, jint ne, jlong wc_out) {
    if (cq == 0 || ne < 0 || (ne > 0 && wc_out == 0)) {
        return -EINVAL;
    }
    int n = ibv_poll_cq(PTR(struct ibv_cq, cq), ne, PTR(struct ibv_wc, wc_out));
    return n >= 0 ? n : -EIO; /* ibv_poll_cq reports errors only as a negative count */
}

JNIEXPORT jint JNICALL ND(reqNotifyCQ)(JNIEnv *env, jobject self, jlong cq, jint solicited_only) {
    if (cq == 0) {
        return -EINVAL;
    }
    int rc = ibv_req_notify_cq(PTR(struct ibv_cq, cq), solicited_only != 0);
    return rc == 0 ? 0 : -rc;
}

JNIEXPORT jint JNICALL ND(ackCqEvent)(JNIEnv *env, jobject self, jlong cq, jint nevents) {
    if (cq == 0 || nevents < 0) {
        return -EINVAL;
    }
    ibv_ack_cq_events(PTR(struct ibv_cq, cq), (unsigned int) nevents);
    return 0;
}

JNIEXPORT jint JNICALL ND(destroyCompChannel)(JNIEnv *env, jobject self, jlong channel) {
    if (channel == 0) {
        return -EINVAL;
    }
    int rc = ibv_destroy_comp_channel(PTR(struct ibv_comp_channel, channel));
    return rc == 0 ? 0 : -rc;
}

JNIEXPORT jint JNICALL ND(deallocPd)(JNIEnv *env, jobject self, jlong pd) {
    if (pd == 0) {
        return -EINVAL;
    }
    int rc = ibv_dealloc_pd(PTR(struct ibv_pd, pd));
    return rc == 0 ? 0 : -rc;
}

JNIEXPORT jint JNICALL ND(destroyCQ)(JNIEnv *env, jobject self, jlong cq) {
    if (cq == 0) {
        return -EINVAL;
    }
    int rc = ibv_destroy_cq(PTR(struct ibv_cq, cq));
    return rc == 0 ? 0 : -rc;
}

JNIEXPORT jint JNICALL ND(getQpNum)(JNIEnv *env, jobject self, jlong qp) {
    if (qp == 0) {
        rp_throw_bad_handle(env, "getQpNum");
        return -1;
    }
    return (jint) PTR(struct ibv_qp, qp)->qp_num;
}

JNIEXPORT jint JNICALL ND(getContextFd)(JNIEnv *env, jobject self, jlong context) {
    if (context == 0) {
        rp_throw_bad_handle(env, "getContextFd");
        return -1;
    }
    return PTR(struct ibv_context, context)->cmd_fd;
}

JNIEXPORT jint JNICALL ND(getContextNumCompVectors)(JNIEnv *env, jobject self, jlong context) {
    if (context == 0) {
        rp_throw_bad_handle(env, "getContextNumCompVectors");
        return -1;
    }
    return PTR(struct ibv_context, context)->num_comp_vectors;
}

JNIEXPORT jint JNICALL ND(getPdHandle)(JNIEnv *env, jobject self, jlong pd) {
    if (pd == 0) {
        rp_throw_bad_handle(env, "getPdHandle");
        return -1;
    }
    return (jint) PTR(struct ibv_pd, pd)->handle;
}

/*
 * Connection management (librdmacm) for NativeDispatcher, as called by DiSNI's RdmaCmNat.
 * Handles: rdma_event_channel*, rdma_cm_id*. Socket addresses arrive in a buffer written by
 * DiSNI's SockAddrIn (family, network-order port, network-order IPv4 address; the rest of the
 * buffer is not written, so it is never read here).
 */
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include "disni_native.h"

/* Outstanding RDMA READs per connection, in each direction, when the device allows more. */
#define MAX_RD_ATOMIC 16

/* A connection-request id remembers the peer's proposed read depths and its private data in
 * its user context (rdma_cm leaves the context to the application; DiSNI never uses it). The
 * event carrying them is acknowledged inside _getCmEvent, so _accept and NativeCm.connectData
 * would otherwise not know them. Freed with the id (_destroyCmId, _destroyEp). */
#define CONN_REQ_TAG 0x52444351u /* "RDCQ" */
#define CONN_REQ_DATA_MAX 224

struct conn_request {
    uint32_t tag;
    uint8_t responder_resources;
    uint8_t initiator_depth;
    uint8_t data_len;
    uint8_t data[CONN_REQ_DATA_MAX];
};

static struct conn_request *conn_request_of(const struct rdma_cm_id *id) {
    struct conn_request *req = (struct conn_request *) id->context;
    return req != NULL && req->tag == CONN_REQ_TAG ? req : NULL;
}

static void remember_conn_request(struct rdma_cm_id *id, const struct rdma_conn_param *param) {
    struct conn_request *req = calloc(1, sizeof *req);
    if (req == NULL) {
        return; /* _accept then offers the default depths; connectData reports no data */
    }
    req->tag = CONN_REQ_TAG;
    req->responder_resources = param->responder_resources;
    req->initiator_depth = param->initiator_depth;
    size_t len = param->private_data != NULL ? param->private_data_len : 0;
    if (len > CONN_REQ_DATA_MAX) {
        len = CONN_REQ_DATA_MAX;
    }
    memcpy(req->data, param->private_data, len);
    req->data_len = (uint8_t) len;
    id->context = req;
}

static int recall_conn_request(const struct rdma_cm_id *id, uint8_t *responder_resources,
                               uint8_t *initiator_depth) {
    const struct conn_request *req = conn_request_of(id);
    if (req == NULL) {
        return 0;
    }
    *responder_resources = req->responder_resources;
    *initiator_depth = req->initiator_depth;
    return 1;
}

static void forget_conn_request(struct rdma_cm_id *id) {
    struct conn_request *req = conn_request_of(id);
    if (req != NULL) {
        req->tag = 0;
        free(req);
        id->context = NULL;
    }
}

static uint8_t min3(int a, int b, int c) {
    int m = a < b ? a : b;
    m = m < c ? m : c;
    return (uint8_t) (m < 0 ? 0 : m);
}

/* The read depths this side can offer: the device limits, capped at MAX_RD_ATOMIC. */
static void local_read_depths(struct rdma_cm_id *id, int *rd_atom, int *init_rd_atom) {
    struct ibv_device_attr attr;
    *rd_atom = 1;
    *init_rd_atom = 1;
    if (id->verbs != NULL && ibv_query_device(id->verbs, &attr) == 0) {
        *rd_atom = attr.max_qp_rd_atom;
        *init_rd_atom = attr.max_qp_init_rd_atom;
    }
}

/* Copies DiSNI's serialised IPv4 address into a clean sockaddr_in. Returns 0 or an errno. */
static int read_sockaddr(jlong addr, struct sockaddr_in *out) {
    memset(out, 0, sizeof *out);
    if (addr == 0) {
        return EINVAL;
    }
    const unsigned char *src = PTR(const unsigned char, addr);
    memcpy(&out->sin_family, src + offsetof(struct sockaddr_in, sin_family), sizeof out->sin_family);
    memcpy(&out->sin_port, src + offsetof(struct sockaddr_in, sin_port), sizeof out->sin_port);
    memcpy(&out->sin_addr, src + offsetof(struct sockaddr_in, sin_addr), sizeof out->sin_addr);
    return out->sin_family == AF_INET ? 0 : EAFNOSUPPORT;
}

/* Writes an IPv4 socket address for SockAddrIn.update. Returns 0 or a negative errno. */
static int write_sockaddr(const struct sockaddr *sa, jlong out) {
    if (out == 0) {
        return -EINVAL;
    }
    if (sa == NULL || sa->sa_family == AF_UNSPEC) {
        return -ENOTCONN; /* not bound / not resolved yet */
    }
    if (sa->sa_family != AF_INET) {
        return -EAFNOSUPPORT; /* DiSNI's SockAddrIn only knows IPv4 */
    }
    memcpy(PTR(void, out), sa, sizeof(struct sockaddr_in));
    return 0;
}

JNIEXPORT jlong JNICALL ND(createEventChannel)(JNIEnv *env, jobject self) {
    errno = 0;
    struct rdma_event_channel *channel = rdma_create_event_channel();
    if (channel == NULL) {
        rp_throw_io(env, "rdma_create_event_channel", rp_errno());
        return -1;
    }
    return HANDLE(channel);
}

JNIEXPORT jlong JNICALL ND(createId)(JNIEnv *env, jobject self, jlong channel, jshort ps) {
    if (channel == 0) {
        rp_throw_bad_handle(env, "rdma_create_id");
        return -1;
    }
    struct rdma_cm_id *id = NULL;
    errno = 0;
    if (rdma_create_id(PTR(struct rdma_event_channel, channel), &id, NULL,
                       (enum rdma_port_space) (uint16_t) ps) != 0) {
        rp_throw_io(env, "rdma_create_id", rp_errno());
        return -1;
    }
    return HANDLE(id);
}

JNIEXPORT jlong JNICALL ND(createQP)(JNIEnv *env, jobject self, jlong id, jlong pd, jlong send_cq,
                                     jlong recv_cq, jint qp_type, jint max_send_wr, jint max_recv_wr,
                                     jint max_inline) {
    if (id == 0 || pd == 0 || send_cq == 0 || recv_cq == 0) {
        rp_throw_bad_handle(env, "rdma_create_qp");
        return -1;
    }
    if (max_send_wr < 0 || max_recv_wr < 0 || max_inline < 0) {
        rp_throw_io(env, "rdma_create_qp", EINVAL);
        return -1;
    }
    struct rdma_cm_id *cm_id = PTR(struct rdma_cm_id, id);
    struct ibv_pd *ibv_pd = PTR(struct ibv_pd, pd);

    /* DiSNI passes no scatter/gather limits: allow up to 4 entries per work request
     * (DiSNI's own users post one), within what the device supports. */
    uint32_t max_sge = 4;
    struct ibv_device_attr dev;
    if (ibv_query_device(ibv_pd->context, &dev) == 0 && dev.max_sge > 0 && (uint32_t) dev.max_sge < max_sge) {
        max_sge = (uint32_t) dev.max_sge;
    }

    struct ibv_qp_init_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.send_cq = PTR(struct ibv_cq, send_cq);
    attr.recv_cq = PTR(struct ibv_cq, recv_cq);
    attr.qp_type = (enum ibv_qp_type) qp_type;
    attr.cap.max_send_wr = (uint32_t) max_send_wr;
    attr.cap.max_recv_wr = (uint32_t) max_recv_wr;
    attr.cap.max_send_sge = max_sge;
    attr.cap.max_recv_sge = max_sge;
    attr.cap.max_inline_data = (uint32_t) max_inline;
    attr.sq_sig_all = 0; /* DiSNI sets IBV_SEND_SIGNALED per work request */

    errno = 0;
    if (rdma_create_qp(cm_id, ibv_pd, &attr) != 0) {
        rp_throw_io(env, "rdma_create_qp", rp_errno());
        return -1;
    }
    return HANDLE(cm_id->qp);
}

JNIEXPORT void JNICALL ND(bindAddr)(JNIEnv *env, jobject self, jlong id, jlong addr) {
    if (id == 0) {
        rp_throw_bad_handle(env, "rdma_bind_addr");
        return;
    }
    struct sockaddr_in sin;
    int err = read_sockaddr(addr, &sin);
    if (err != 0) {
        rp_throw_io(env, "rdma_bind_addr", err);
        return;
    }
    errno = 0;
    if (rdma_bind_addr(PTR(struct rdma_cm_id, id), (struct sockaddr *) &sin) != 0) {
        rp_throw_io(env, "rdma_bind_addr", rp_errno());
    }
}

JNIEXPORT void JNICALL ND(listen)(JNIEnv *env, jobject self, jlong id, jint backlog) {
    if (id == 0) {
        rp_throw_bad_handle(env, "rdma_listen");
        return;
    }
    errno = 0;
    if (rdma_listen(PTR(struct rdma_cm_id, id), backlog) != 0) {
        rp_throw_io(env, "rdma_listen", rp_errno());
    }
}

JNIEXPORT void JNICALL ND(resolveAddr)(JNIEnv *env, jobject self, jlong id, jlong src, jlong dst,
                                       jint timeout_ms) {
    if (id == 0) {
        rp_throw_bad_handle(env, "rdma_resolve_addr");
        return;
    }
    struct sockaddr_in src_sin, dst_sin;
    int err = read_sockaddr(dst, &dst_sin);
    if (err == 0 && src != 0) {
        err = read_sockaddr(src, &src_sin);
    }
    if (err != 0) {
        rp_throw_io(env, "rdma_resolve_addr", err);
        return;
    }
    errno = 0;
    if (rdma_resolve_addr(PTR(struct rdma_cm_id, id), src != 0 ? (struct sockaddr *) &src_sin : NULL,
                          (struct sockaddr *) &dst_sin, timeout_ms) != 0) {
        rp_throw_io(env, "rdma_resolve_addr", rp_errno());
    }
}

JNIEXPORT void JNICALL ND(resolveRoute)(JNIEnv *env, jobject self, jlong id, jint timeout_ms) {
    if (id == 0) {
        rp_throw_bad_handle(env, "rdma_resolve_route");
        return;
    }
    errno = 0;
    if (rdma_resolve_route(PTR(struct rdma_cm_id, id), timeout_ms) != 0) {
        rp_throw_io(env, "rdma_resolve_route", rp_errno());
    }
}

/* The status of the last event _getCmEvent returned on this thread (a node's one CM thread):
 * for REJECTED the peer's reject reason, which DiSNI's interface does not carry. */
static __thread int last_event_status;

/*
 * Waits up to timeout_ms for the next event on the channel, stores the event's listen_id
 * (set only for CONNECT_REQUEST) and id at the two addresses, acknowledges the event and
 * returns its type. DiSNI's _ackCmEvent only gets the event type, so the event must be
 * copied out and acknowledged here; acknowledging at once also keeps rdma_destroy_id from
 * blocking on events the application never acknowledged.
 * Returns a negative errno on failure and -ETIMEDOUT when no event came in time.
 */
JNIEXPORT jint JNICALL ND(getCmEvent)(JNIEnv *env, jobject self, jlong channel, jlong listen_id_out,
                                      jlong id_out, jint timeout_ms) {
    if (channel == 0 || listen_id_out == 0 || id_out == 0) {
        return -EINVAL;
    }
    struct rdma_event_channel *ch = PTR(struct rdma_event_channel, channel);
    int rc = rp_wait_readable(ch->fd, timeout_ms);
    if (rc != 0) {
        return rc;
    }
    struct rdma_cm_event *event = NULL;
    errno = 0;
    if (rdma_get_cm_event(ch, &event) != 0) {
        return -rp_errno();
    }
    int type = (int) event->event;
    last_event_status = event->status;
    if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        remember_conn_request(event->id, &event->param.conn);
    }
    *PTR(jlong, listen_id_out) = HANDLE(event->listen_id);
    *PTR(jlong, id_out) = HANDLE(event->id);
    rdma_ack_cm_event(event);
    return type;
}

static uint8_t retries(jint count) {
    return (uint8_t) (count < 0 ? 0 : count > 7 ? 7 : count);
}

/* rdma_connect. readable = 0 offers the peer no responder resources: the QP serves no READ
 * (the peer's READs end in an error), whatever its access flags say. */
static void connect_id(JNIEnv *env, struct rdma_cm_id *cm_id, jint retry_count, jint rnr_retry_count,
                       const void *private_data, uint8_t len, int readable) {
    int rd_atom, init_rd_atom;
    local_read_depths(cm_id, &rd_atom, &init_rd_atom);

    struct rdma_conn_param param;
    memset(&param, 0, sizeof param);
    param.private_data = len != 0 ? private_data : NULL;
    param.private_data_len = len;
    param.responder_resources = readable ? min3(rd_atom, MAX_RD_ATOMIC, MAX_RD_ATOMIC) : 0;
    param.initiator_depth = min3(init_rd_atom, MAX_RD_ATOMIC, MAX_RD_ATOMIC);
    param.flow_control = 1;
    param.retry_count = retries(retry_count);
    param.rnr_retry_count = retries(rnr_retry_count);

    errno = 0;
    if (rdma_connect(cm_id, &param) != 0) {
        rp_throw_io(env, "rdma_connect", rp_errno());
    }
}

/* Moves the id's QP (INIT, as rdma_create_qp left it) through INIT, RTR and RTS with the
 * attributes the CM computes for this connection, except for the remote access flags, which are
 * `access` from the first transition on, and the read depths of `param`. rdma_accept would apply
 * the CM's flags itself (REMOTE_READ whenever the peer asked for responder resources), so a QP
 * admitted to be READ only later could serve READs between the accept and a later change of its
 * flags; ready this way, it never has more access than asked for. Returns 0 or an errno. */
static int ready_qp(struct rdma_cm_id *cm_id, const struct rdma_conn_param *param, int access) {
    struct ibv_qp_attr attr;
    int mask = 0;
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_INIT;
    errno = 0;
    if (rdma_init_qp_attr(cm_id, &attr, &mask) != 0) {
        return rp_errno();
    }
    attr.qp_access_flags = access;
    int rc = ibv_modify_qp(cm_id->qp, &attr, mask | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        return rc > 0 ? rc : rp_errno();
    }
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(cm_id, &attr, &mask) != 0) {
        return rp_errno();
    }
    /* As librdmacm does: on an InfiniBand port an older kernel reports RoCE-only attribute bits. */
    struct ibv_port_attr port;
    if (ibv_query_port(cm_id->verbs, cm_id->port_num, &port) == 0 && port.link_layer == IBV_LINK_LAYER_INFINIBAND) {
        mask &= ~0xe00000;
    }
    attr.max_dest_rd_atomic = param->responder_resources;
    rc = ibv_modify_qp(cm_id->qp, &attr, mask);
    if (rc != 0) {
        return rc > 0 ? rc : rp_errno();
    }
    memset(&attr, 0, sizeof attr);
    attr.qp_state = IBV_QPS_RTS;
    if (rdma_init_qp_attr(cm_id, &attr, &mask) != 0) {
        return rp_errno();
    }
    attr.max_rd_atomic = param->initiator_depth;
    rc = ibv_modify_qp(cm_id->qp, &attr, mask);
    return rc == 0 ? 0 : rc > 0 ? rc : rp_errno();
}

/* rdma_accept. readable = 0: no responder resources, as for connect_id, and no remote access.
 * readable = 1: responder resources; remote access is REMOTE_READ when access_now, else none
 * until NativeCm.allowRemoteReads. The QP is made ready here (ready_qp), not by rdma_accept. */
static void accept_id(JNIEnv *env, struct rdma_cm_id *cm_id, jint retry_count, jint rnr_retry_count, int readable,
                      int access_now) {
    int rd_atom, init_rd_atom;
    local_read_depths(cm_id, &rd_atom, &init_rd_atom);
    /* Serve no more reads than the peer will issue, and issue no more than it serves. The request
     * event states the depths from this side's view (the kernel's CM swaps the REQ's fields):
     * its responder_resources are the reads the peer will issue, its initiator_depth the reads
     * the peer will serve (0: the peer may not be READ). */
    uint8_t peer_issues = MAX_RD_ATOMIC, peer_serves = MAX_RD_ATOMIC;
    recall_conn_request(cm_id, &peer_issues, &peer_serves);

    struct rdma_conn_param param;
    memset(&param, 0, sizeof param);
    param.responder_resources = readable ? min3(rd_atom, peer_issues, MAX_RD_ATOMIC) : 0;
    param.initiator_depth = min3(init_rd_atom, peer_serves, MAX_RD_ATOMIC);
    param.flow_control = 1;
    param.retry_count = retries(retry_count);
    param.rnr_retry_count = retries(rnr_retry_count);

    struct ibv_qp *qp = cm_id->qp;
    if (qp == NULL) {
        rp_throw_bad_handle(env, "rdma_accept (no QP)");
        return;
    }
    int rc = ready_qp(cm_id, &param, readable && access_now ? IBV_ACCESS_REMOTE_READ : 0);
    if (rc != 0) {
        rp_throw_io(env, "rdma_accept (making the QP ready)", rc);
        return;
    }
    /* Without a QP on the id rdma_accept leaves the QP alone and announces param's qp_num. */
    param.qp_num = qp->qp_num;
    param.srq = qp->srq != NULL;
    cm_id->qp = NULL;
    errno = 0;
    rc = rdma_accept(cm_id, &param);
    int err = rp_errno();
    cm_id->qp = qp;
    if (rc != 0) {
        rp_throw_io(env, "rdma_accept", err);
    }
}

JNIEXPORT void JNICALL ND(connect)(JNIEnv *env, jobject self, jlong id, jint retry_count,
                                   jint rnr_retry_count, jlong private_data, jbyte private_data_len) {
    if (id == 0) {
        rp_throw_bad_handle(env, "rdma_connect");
        return;
    }
    uint8_t len = (uint8_t) private_data_len;
    if (len != 0 && private_data == 0) {
        rp_throw_io(env, "rdma_connect", EINVAL);
        return;
    }
    connect_id(env, PTR(struct rdma_cm_id, id), retry_count, rnr_retry_count, PTR(const void, private_data), len, 1);
}

JNIEXPORT void JNICALL ND(accept)(JNIEnv *env, jobject self, jlong id, jint retry_count,
                                  jint rnr_retry_count) {
    if (id == 0) {
        rp_throw_bad_handle(env, "rdma_accept");
        return;
    }
    accept_id(env, PTR(struct rdma_cm_id, id), retry_count, rnr_retry_count, 1, 1);
}

/* ---- io.rdmaplane.rdma.provider.verbs.impl.NativeCm: what DiSNI's interface cannot say. */
#define NCM(name) Java_io_rdmaplane_rdma_provider_verbs_impl_NativeCm_##name
/* NativeCm relocated in the HDFS plug-in jar (see RP_ALIAS) */
#define NCM_SHADED(name) Java_io_rdmaplane_shaded_rdma_provider_verbs_impl_NativeCm_##name

JNIEXPORT void JNICALL NCM(connect)(JNIEnv *env, jclass cls, jlong id, jint retry_count, jint rnr_retry_count,
                                    jobject data, jint length, jboolean readable) {
    if (id == 0) {
        rp_throw_bad_handle(env, "rdma_connect");
        return;
    }
    const void *bytes = NULL;
    if (length > 0) {
        bytes = data != NULL ? (*env)->GetDirectBufferAddress(env, data) : NULL;
        if (bytes == NULL || length > 255 || (*env)->GetDirectBufferCapacity(env, data) < length) {
            rp_throw_io(env, "rdma_connect (private data)", EINVAL);
            return;
        }
    }
    connect_id(env, PTR(struct rdma_cm_id, id), retry_count, rnr_retry_count, bytes, (uint8_t) (length > 0 ? length : 0),
               readable == JNI_TRUE);
}

JNIEXPORT void JNICALL NCM(accept)(JNIEnv *env, jclass cls, jlong id, jint retry_count, jint rnr_retry_count,
                                   jboolean readable, jboolean access_now) {
    if (id == 0) {
        rp_throw_bad_handle(env, "rdma_accept");
        return;
    }
    accept_id(env, PTR(struct rdma_cm_id, id), retry_count, rnr_retry_count, readable == JNI_TRUE,
              access_now == JNI_TRUE);
}

/* Takes remote access away from the id's QP (RTS to RTS, access flags only): a READ that reaches
 * it anyway is refused by the responder. For the end that may not be READ, once connected: the
 * responder resources its connect offered are what the peer chose, which a hostile peer may
 * ignore. Throws an IOException when the QP cannot be changed. */
static void set_remote_access(JNIEnv *env, jlong id, int flags) {
    struct rdma_cm_id *cm_id = PTR(struct rdma_cm_id, id);
    if (id == 0 || cm_id->qp == NULL) {
        rp_throw_bad_handle(env, "ibv_modify_qp (access flags)");
        return;
    }
    struct ibv_qp_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.qp_access_flags = flags;
    errno = 0;
    int rc = ibv_modify_qp(cm_id->qp, &attr, IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        rp_throw_io(env, "ibv_modify_qp (access flags)", rc > 0 ? rc : rp_errno());
    }
}

JNIEXPORT void JNICALL NCM(denyRemoteAccess)(JNIEnv *env, jclass cls, jlong id) {
    set_remote_access(env, id, 0);
}

/* Gives the id's QP remote read access, and no other (RTS to RTS, access flags only): for a QP
 * accepted with responder resources but no access, once its owner trusts the peer. Throws an
 * IOException when the QP cannot be changed. */
JNIEXPORT void JNICALL NCM(allowRemoteReads)(JNIEnv *env, jclass cls, jlong id) {
    set_remote_access(env, id, IBV_ACCESS_REMOTE_READ);
}

/* The id's QP's access flags (ibv_query_qp); throws an IOException when the QP cannot be queried. */
JNIEXPORT jint JNICALL NCM(remoteAccessFlags)(JNIEnv *env, jclass cls, jlong id) {
    struct rdma_cm_id *cm_id = PTR(struct rdma_cm_id, id);
    if (id == 0 || cm_id->qp == NULL) {
        rp_throw_bad_handle(env, "ibv_query_qp");
        return 0;
    }
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;
    memset(&attr, 0, sizeof attr);
    errno = 0;
    int rc = ibv_query_qp(cm_id->qp, &attr, IBV_QP_ACCESS_FLAGS, &init);
    if (rc != 0) {
        rp_throw_io(env, "ibv_query_qp", rc > 0 ? rc : rp_errno());
        return 0;
    }
    return (jint) attr.qp_access_flags;
}

/* Copies the private data of a connection request id into the direct buffer out; returns the
 * bytes copied (0: none came, or the id is not a connection request), or a negative errno. */
JNIEXPORT jint JNICALL NCM(connectData)(JNIEnv *env, jclass cls, jlong id, jobject out) {
    if (id == 0 || out == NULL) {
        return -EINVAL;
    }
    unsigned char *dst = (*env)->GetDirectBufferAddress(env, out);
    jlong capacity = (*env)->GetDirectBufferCapacity(env, out);
    if (dst == NULL || capacity < 0) {
        return -EINVAL;
    }
    const struct conn_request *req = conn_request_of(PTR(struct rdma_cm_id, id));
    if (req == NULL) {
        return 0;
    }
    size_t len = req->data_len < (size_t) capacity ? req->data_len : (size_t) capacity;
    memcpy(dst, req->data, len);
    return (jint) len;
}

/* The status of the last event _getCmEvent returned on the calling thread (0 before any). */
JNIEXPORT jint JNICALL NCM(lastEventStatus)(JNIEnv *env, jclass cls) {
    return (jint) last_event_status;
}

/* Events are acknowledged inside _getCmEvent; nothing is left to do here. */
JNIEXPORT jint JNICALL ND(ackCmEvent)(JNIEnv *env, jobject self, jint event_type) {
    return 0;
}

JNIEXPORT jint JNICALL ND(disconnect)(JNIEnv *env, jobject self, jlong id) {
    if (id == 0) {
        return -EINVAL;
    }
    errno = 0;
    return rdma_disconnect(PTR(struct rdma_cm_id, id)) == 0 ? 0 : -rp_errno();
}

JNIEXPORT jint JNICALL ND(destroyEventChannel)(JNIEnv *env, jobject self, jlong channel) {
    if (channel == 0) {
        return -EINVAL;
    }
    rdma_destroy_event_channel(PTR(struct rdma_event_channel, channel));
    return 0;
}

JNIEXPORT jint JNICALL ND(destroyCmId)(JNIEnv *env, jobject self, jlong id) {
    if (id == 0) {
        return -EINVAL;
    }
    struct rdma_cm_id *cm_id = PTR(struct rdma_cm_id, id);
    forget_conn_request(cm_id);
    errno = 0;
    return rdma_destroy_id(cm_id) == 0 ? 0 : -rp_errno();
}

/* Called with the cm id (RdmaCmNat.destroyQP passes the id, not the QP). */
JNIEXPORT jint JNICALL ND(destroyQP)(JNIEnv *env, jobject self, jlong id) {
    if (id == 0) {
        return -EINVAL;
    }
    struct rdma_cm_id *cm_id = PTR(struct rdma_cm_id, id);
    if (cm_id->qp == NULL) {
        return -ENOENT;
    }
    rdma_destroy_qp(cm_id);
    return 0;
}

JNIEXPORT jint JNICALL ND(getSrcAddr)(JNIEnv *env, jobject self, jlong id, jlong out) {
    if (id == 0) {
        return -EINVAL;
    }
    return write_sockaddr(rdma_get_local_addr(PTR(struct rdma_cm_id, id)), out);
}

JNIEXPORT jint JNICALL ND(getDstAddr)(JNIEnv *env, jobject self, jlong id, jlong out) {
    if (id == 0) {
        return -EINVAL;
    }
    return write_sockaddr(rdma_get_peer_addr(PTR(struct rdma_cm_id, id)), out);
}

/* Destroys the id's QP (if any) and the id. */
JNIEXPORT jint JNICALL ND(destroyEp)(JNIEnv *env, jobject self, jlong id) {
    if (id == 0) {
        return -EINVAL;
    }
    forget_conn_request(PTR(struct rdma_cm_id, id));
    rdma_destroy_ep(PTR(struct rdma_cm_id, id));
    return 0;
}

/* The verbs context of the id's device; -1 while the id is not bound to a device yet
 * (DiSNI treats a negative handle as "no context"). */
JNIEXPORT jlong JNICALL ND(getContext)(JNIEnv *env, jobject self, jlong id) {
    if (id == 0) {
        rp_throw_bad_handle(env, "getContext");
        return -1;
    }
    struct ibv_context *verbs = PTR(struct rdma_cm_id, id)->verbs;
    return verbs != NULL ? HANDLE(verbs) : -1;
}

RP_ALIAS(NCM_SHADED(connect), NCM(connect))
RP_ALIAS(NCM_SHADED(accept), NCM(accept))
RP_ALIAS(NCM_SHADED(denyRemoteAccess), NCM(denyRemoteAccess))
RP_ALIAS(NCM_SHADED(allowRemoteReads), NCM(allowRemoteReads))
RP_ALIAS(NCM_SHADED(remoteAccessFlags), NCM(remoteAccessFlags))
RP_ALIAS(NCM_SHADED(connectData), NCM(connectData))
RP_ALIAS(NCM_SHADED(lastEventStatus), NCM(lastEventStatus))

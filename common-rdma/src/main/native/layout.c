/*
 * Version and layout probes. NativeDispatcher's constructor refuses to start unless
 * _getVersion() is 32, and adopts the sizes/offsets returned here for the structures it
 * serialises into direct buffers (NatIbvSendWR, NatIbvRecvWR, NatIbvSge, IbvWC, SockAddrIn).
 * Those buffers are handed to ibv_post_send/ibv_post_recv/ibv_poll_cq as they are, so the
 * answers must be the real rdma-core layouts.
 *
 * Only the sizes and the RDMA remote_addr/rkey offsets are adopted; every other field
 * offset is fixed in DiSNI's bytecode (sequential ByteBuffer puts/gets). The static
 * assertions below pin those fixed offsets: if rdma-core ever moved a field, the build
 * fails instead of posting corrupt work requests.
 */
#include <stddef.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>

#include "disni_native.h"

/* The native interface version DiSNI 2.1's Java side requires. */
#define DISNI_JNI_VERSION 32

/* NatIbvSendWR.writeBack: wr_id, next, sg_list (8 bytes each), num_sge, opcode,
 * send_flags, imm_data (4 bytes each); NatPostSendCall patches wr_id at 0 and
 * send_flags at 32 in place. NatIbvSendWR$NatRdma writes remote_addr, rkey and a
 * 4-byte "reserved" word at rkey + 4 (padding inside wr.rdma). */
_Static_assert(offsetof(struct ibv_send_wr, wr_id) == 0, "send wr_id");
_Static_assert(offsetof(struct ibv_send_wr, next) == 8, "send next");
_Static_assert(offsetof(struct ibv_send_wr, sg_list) == 16, "send sg_list");
_Static_assert(offsetof(struct ibv_send_wr, num_sge) == 24, "send num_sge");
_Static_assert(offsetof(struct ibv_send_wr, opcode) == 28, "send opcode");
_Static_assert(offsetof(struct ibv_send_wr, send_flags) == 32, "send send_flags");
_Static_assert(offsetof(struct ibv_send_wr, imm_data) == 36, "send imm_data");
_Static_assert(offsetof(struct ibv_send_wr, wr.rdma.rkey) + 8
               <= offsetof(struct ibv_send_wr, wr) + sizeof(((struct ibv_send_wr *) 0)->wr),
               "the reserved word after rkey stays inside the wr union");

/* NatIbvRecvWR.writeBack: wr_id, next, sg_list, num_sge. */
_Static_assert(offsetof(struct ibv_recv_wr, wr_id) == 0, "recv wr_id");
_Static_assert(offsetof(struct ibv_recv_wr, next) == 8, "recv next");
_Static_assert(offsetof(struct ibv_recv_wr, sg_list) == 16, "recv sg_list");
_Static_assert(offsetof(struct ibv_recv_wr, num_sge) == 24, "recv num_sge");

/* NatIbvSge: addr at 0, length at 8, lkey at 12. */
_Static_assert(offsetof(struct ibv_sge, addr) == 0, "sge addr");
_Static_assert(offsetof(struct ibv_sge, length) == 8, "sge length");
_Static_assert(offsetof(struct ibv_sge, lkey) == 12, "sge lkey");

/* NatPollCqCall.update reads ibv_wc sequentially: wr_id, status, opcode, vendor_err,
 * byte_len, imm_data, qp_num, src_qp, wc_flags, pkey_index, slid, sl, dlid_path_bits. */
_Static_assert(offsetof(struct ibv_wc, wr_id) == 0, "wc wr_id");
_Static_assert(offsetof(struct ibv_wc, status) == 8, "wc status");
_Static_assert(offsetof(struct ibv_wc, opcode) == 12, "wc opcode");
_Static_assert(offsetof(struct ibv_wc, vendor_err) == 16, "wc vendor_err");
_Static_assert(offsetof(struct ibv_wc, byte_len) == 20, "wc byte_len");
_Static_assert(offsetof(struct ibv_wc, imm_data) == 24, "wc imm_data");
_Static_assert(offsetof(struct ibv_wc, qp_num) == 28, "wc qp_num");
_Static_assert(offsetof(struct ibv_wc, src_qp) == 32, "wc src_qp");
_Static_assert(offsetof(struct ibv_wc, wc_flags) == 36, "wc wc_flags");
_Static_assert(offsetof(struct ibv_wc, pkey_index) == 40, "wc pkey_index");
_Static_assert(offsetof(struct ibv_wc, slid) == 42, "wc slid");
_Static_assert(offsetof(struct ibv_wc, sl) == 44, "wc sl");
_Static_assert(offsetof(struct ibv_wc, dlid_path_bits) == 45, "wc dlid_path_bits");

/* SockAddrIn.writeBack/update: family, port (network order), IPv4 address. */
_Static_assert(offsetof(struct sockaddr_in, sin_family) == 0, "sin_family");
_Static_assert(offsetof(struct sockaddr_in, sin_port) == 2, "sin_port");
_Static_assert(offsetof(struct sockaddr_in, sin_addr) == 4, "sin_addr");

JNIEXPORT jint JNICALL ND(getVersion)(JNIEnv *env, jobject self) {
    return DISNI_JNI_VERSION;
}

JNIEXPORT jint JNICALL ND(getSockAddrInSize)(JNIEnv *env, jobject self) {
    return (jint) sizeof(struct sockaddr_in);
}

JNIEXPORT jint JNICALL ND(getIbvRecvWRSize)(JNIEnv *env, jobject self) {
    return (jint) sizeof(struct ibv_recv_wr);
}

JNIEXPORT jint JNICALL ND(getIbvSendWRSize)(JNIEnv *env, jobject self) {
    return (jint) sizeof(struct ibv_send_wr);
}

JNIEXPORT jint JNICALL ND(getIbvSgeSize)(JNIEnv *env, jobject self) {
    return (jint) sizeof(struct ibv_sge);
}

JNIEXPORT jint JNICALL ND(getIbvWCSize)(JNIEnv *env, jobject self) {
    return (jint) sizeof(struct ibv_wc);
}

JNIEXPORT jint JNICALL ND(getRemoteAddressOffset)(JNIEnv *env, jobject self) {
    return (jint) offsetof(struct ibv_send_wr, wr.rdma.remote_addr);
}

JNIEXPORT jint JNICALL ND(getRKeyOffset)(JNIEnv *env, jobject self) {
    return (jint) offsetof(struct ibv_send_wr, wr.rdma.rkey);
}

package io.rdmaplane.rdma.provider.verbs.impl;

import io.rdmaplane.rdma.provider.Status;

/**
 * {@code enum ibv_wc_status} (verbs.h; DiSNI's {@code IbvWC.IbvWcStatus} has the same order)
 * mapped to the SPI's {@link Status}. Pure Java, no DiSNI type: testable on any machine.
 */
public final class WcStatus {
    static final int SUCCESS = 0;
    static final int WR_FLUSH_ERR = 5;

    private static final String[] NAMES = {
        "IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR", "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR", "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR", "IBV_WC_INV_EECN_ERR", "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR", "IBV_WC_GENERAL_ERR",
    };

    private static final Status[] STATUSES = {
        Status.SUCCESS,
        Status.LOCAL_PROTECTION_ERROR,  // LOC_LEN_ERR: a message longer than the posted receive buffer
        Status.LOCAL_PROTECTION_ERROR,  // LOC_QP_OP_ERR: the local work request was malformed
        Status.LOCAL_PROTECTION_ERROR,  // LOC_EEC_OP_ERR (RD only)
        Status.LOCAL_PROTECTION_ERROR,  // LOC_PROT_ERR: lkey/bounds/access of the local buffer
        Status.FLUSHED,                 // WR_FLUSH_ERR: the QP went to the error state
        Status.LOCAL_PROTECTION_ERROR,  // MW_BIND_ERR
        Status.BAD_RESPONSE,            // BAD_RESP_ERR
        Status.LOCAL_PROTECTION_ERROR,  // LOC_ACCESS_ERR: local access violation (e.g. receive into read-only memory)
        Status.REMOTE_INVALID_REQUEST,  // REM_INV_REQ_ERR
        Status.REMOTE_ACCESS_ERROR,     // REM_ACCESS_ERR: rkey, bounds or access of the peer's region
        Status.REMOTE_INVALID_REQUEST,  // REM_OP_ERR: the peer could not complete the request
        Status.RETRY_EXCEEDED,          // RETRY_EXC_ERR: the peer stopped answering
        Status.RETRY_EXCEEDED,          // RNR_RETRY_EXC_ERR: the peer never posted a receive
        Status.LOCAL_PROTECTION_ERROR,  // LOC_RDD_VIOL_ERR (RD only)
        Status.REMOTE_INVALID_REQUEST,  // REM_INV_RD_REQ_ERR
        Status.REMOTE_INVALID_REQUEST,  // REM_ABORT_ERR: the peer aborted the operation
        Status.REMOTE_INVALID_REQUEST,  // INV_EECN_ERR (RD only)
        Status.REMOTE_INVALID_REQUEST,  // INV_EEC_STATE_ERR (RD only)
        Status.FLUSHED,                 // FATAL_ERR: the device failed; every QP is gone
        Status.RETRY_EXCEEDED,          // RESP_TIMEOUT_ERR
        Status.FLUSHED,                 // GENERAL_ERR
    };

    private WcStatus() {
    }

    /** The SPI status of a work completion status; unknown codes (newer verbs) are FLUSHED. */
    public static Status toStatus(int code) {
        return code >= 0 && code < STATUSES.length ? STATUSES[code] : Status.FLUSHED;
    }

    /** The verbs name, for messages ({@code IBV_WC_REM_ACCESS_ERR}), or the number if unknown. */
    public static String name(int code) {
        return code >= 0 && code < NAMES.length ? NAMES[code] : "ibv_wc_status " + code;
    }

    /** Number of known codes. */
    static int count() {
        return NAMES.length;
    }
}

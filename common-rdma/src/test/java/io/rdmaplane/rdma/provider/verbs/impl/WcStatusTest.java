package io.rdmaplane.rdma.provider.verbs.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.ibm.disni.verbs.IbvWC;
import io.rdmaplane.rdma.provider.Status;
import org.junit.jupiter.api.Test;

/** ibv_wc_status to Status. Pure Java: loads no native code. */
class WcStatusTest {

    @Test
    void theStatusesUpperLayersActOnMapOneToOne() {
        assertEquals(Status.SUCCESS, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_SUCCESS)));
        assertEquals(Status.REMOTE_ACCESS_ERROR, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_REM_ACCESS_ERR)));
        assertEquals(Status.REMOTE_INVALID_REQUEST, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_REM_INV_REQ_ERR)));
        assertEquals(Status.RETRY_EXCEEDED, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_RETRY_EXC_ERR)));
        assertEquals(Status.RETRY_EXCEEDED, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_RNR_RETRY_EXC_ERR)));
        assertEquals(Status.FLUSHED, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_WR_FLUSH_ERR)));
        assertEquals(Status.LOCAL_PROTECTION_ERROR, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_LOC_PROT_ERR)));
        assertEquals(Status.BAD_RESPONSE, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_BAD_RESP_ERR)));
    }

    @Test
    void theOthersMapToTheClosestAndKeepTheirVerbsName() {
        assertEquals(Status.LOCAL_PROTECTION_ERROR, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_LOC_LEN_ERR)));
        assertEquals(Status.LOCAL_PROTECTION_ERROR, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_LOC_ACCESS_ERR)));
        assertEquals(Status.REMOTE_INVALID_REQUEST, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_REM_OP_ERR)));
        assertEquals(Status.RETRY_EXCEEDED, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_RESP_TIMEOUT_ERR)));
        assertEquals(Status.FLUSHED, WcStatus.toStatus(code(IbvWC.IbvWcStatus.IBV_WC_FATAL_ERR)));
        assertEquals(Status.FLUSHED, WcStatus.toStatus(99));
        assertEquals("ibv_wc_status 99", WcStatus.name(99));
    }

    @Test
    void namesFollowDisnisEnumOrderWhichIsVerbsH() {
        assertEquals(IbvWC.IbvWcStatus.values().length, WcStatus.count());
        for (IbvWC.IbvWcStatus status : IbvWC.IbvWcStatus.values()) {
            assertEquals(status.name(), WcStatus.name(status.ordinal()));
        }
        assertEquals(0, WcStatus.SUCCESS);
        assertEquals(code(IbvWC.IbvWcStatus.IBV_WC_WR_FLUSH_ERR), WcStatus.WR_FLUSH_ERR);
    }

    private static int code(IbvWC.IbvWcStatus status) {
        return status.ordinal();
    }
}

package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.util.MemoryUtils;
import com.ibm.disni.verbs.IbvContext;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.SVCRegMr;
import com.ibm.disni.verbs.impl.NatObject;
import io.rdmaplane.rdma.provider.Access;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Set;

/** Small helpers over DiSNI's verbs calls. */
final class Verbs {
    private Verbs() {
    }

    /** The verbs context an id is bound to, or null (an unbound or wildcard-bound id has none). */
    static IbvContext contextOf(RdmaCmId id) throws IOException {
        IbvContext context = id.getVerbs();
        if (context == null) {
            return null;
        }
        // DiSNI wraps whatever pointer the native side returns: never use a wrapped NULL.
        if (context instanceof NatObject nat && nat.getObjId() == 0) {
            return null;
        }
        return context;
    }

    /** Whether two contexts are the same open device (DiSNI makes a new wrapper per lookup). */
    static boolean sameDevice(IbvContext a, IbvContext b) throws IOException {
        if (a instanceof NatObject x && b instanceof NatObject y) {
            return x.getObjId() == y.getObjId();
        }
        return a.getCmd_fd() == b.getCmd_fd();
    }

    /** ibv_reg_mr access flags of the SPI's access rights. */
    static int accessFlags(Set<Access> access) {
        int flags = 0;
        if (access.contains(Access.LOCAL_WRITE)) {
            flags |= IbvMr.IBV_ACCESS_LOCAL_WRITE;
        }
        if (access.contains(Access.REMOTE_READ)) {
            flags |= IbvMr.IBV_ACCESS_REMOTE_READ;
        }
        return flags;
    }

    /**
     * ibv_reg_mr flags of memory READ through memory windows only: MW_BIND and nothing remote, so the
     * region's own rkey READs nothing; each window grants REMOTE_READ on its own QP.
     */
    static int windowedAccessFlags() {
        return IbvMr.IBV_ACCESS_MW_BIND;
    }

    /** The native address of a direct buffer's first byte (index 0, not its position). */
    static long address(ByteBuffer direct) {
        return MemoryUtils.getAddress(direct);
    }

    /**
     * ibv_reg_mr over [address, address + length): every registration of the provider comes here.
     * Never On-Demand Paging: on rxe (Linux 7.2) an ODP region registers, but at RoCE MTU 1024 three
     * quarters of READ data came back wrong with a successful completion (issue 12's table). Were ODP
     * ever wanted for a real NIC, every READ from such a region would need its checksum verified.
     */
    static IbvMr register(IbvPd pd, long address, int length, int flags) throws IOException {
        if ((flags & IbvMr.IBV_ACCESS_ON_DEMAND) != 0) {
            throw new IllegalArgumentException("the verbs provider never registers On-Demand Paging memory"
                    + " (IBV_ACCESS_ON_DEMAND): on rxe it returned wrong READ data with a successful completion");
        }
        SVCRegMr call = pd.regMr(address, length, flags);
        try {
            IbvMr mr = call.execute().getMr();
            if (mr == null) {
                throw new IOException("ibv_reg_mr returned no region");
            }
            return mr;
        } finally {
            call.free();
        }
    }

    /** ibv_dereg_mr. */
    static void deregister(IbvMr mr) throws IOException {
        mr.deregMr().execute().free();
    }
}

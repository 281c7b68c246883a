package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvContext;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.IbvQP;
import com.ibm.disni.verbs.impl.NatObject;
import java.io.IOException;

/**
 * Type 2 memory windows, which DiSNI's native interface cannot express, in the project's own JNI
 * library (src/main/native/mw.c): a window over a region, bound by a work request on one QP, is
 * READ through that QP only. Defined by the same class loader as DiSNI's classes, which loads the library.
 */
final class NativeMw {
    private NativeMw() {
    }

    /** How many type 2 windows the device holds; 0 when it binds none. */
    static int type2Windows(IbvContext context) throws IOException {
        int n = type2Windows(handle(context));
        if (n < 0) {
            throw new IOException("ibv_query_device failed (errno " + -n + ")");
        }
        return n;
    }

    static long alloc(IbvPd pd) throws IOException {
        return alloc(handle(pd));
    }

    /** Posts a signaled BIND_MW (remote READ of [address, address + length) of mr) with {@code wrId}: 0, or the negative errno of a refused post. */
    static int postBind(IbvQP qp, long window, IbvMr mr, long address, long length, int newRkey, long wrId) throws IOException {
        return postBind(handle(qp), window, handle(mr), address, length, newRkey, wrId);
    }

    private static long handle(Object verbsObject) throws IOException {
        if (verbsObject instanceof NatObject nat && nat.getObjId() != 0) {
            return nat.getObjId();
        }
        throw new IOException("not a native verbs object: " + verbsObject);
    }

    private static native int type2Windows(long context);

    private static native long alloc(long pd) throws IOException;

    static native int rkey(long window);

    private static native int postBind(long qp, long window, long mr, long address, long length, int newRkey, long wrId);

    static native int dealloc(long window);
}

package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvQP;
import com.ibm.disni.verbs.impl.NatObject;
import java.io.IOException;

/**
 * Work requests DiSNI's stateful calls cannot chain, in the project's own JNI library
 * (src/main/native/post.c): a READ split into pieces goes to the device as one list in one
 * ibv_post_send (one doorbell), built on the native stack from scalars (nothing allocated per
 * READ). Defined by the same class loader as DiSNI's classes, which loads the library.
 */
final class NativePost {
    /** Most work requests one READ is posted as (VerbsOptions.MAX_READ_PIECES). */
    static final int MAX_PIECES = 64;

    private NativePost() {
    }

    /**
     * Posts {@code length} bytes of remote memory at {@code remoteAddress} READ into {@code localAddress}
     * as ceil(length / piece) signaled RDMA_READ work requests over consecutive ranges, all with
     * {@code wrId}: 0, or the negative errno of a refused post (EINVAL for more than {@link #MAX_PIECES} pieces).
     */
    static int postRead(IbvQP qp, long wrId, long localAddress, int lkey, long remoteAddress, int rkey, int length, int piece)
            throws IOException {
        if (!(qp instanceof NatObject nat) || nat.getObjId() == 0) {
            throw new IOException("not a native queue pair: " + qp);
        }
        return postRead(nat.getObjId(), wrId, localAddress, lkey, remoteAddress, rkey, length, piece);
    }

    private static native int postRead(long qp, long wrId, long localAddress, int lkey, long remoteAddress, int rkey,
                                       int length, int piece);
}

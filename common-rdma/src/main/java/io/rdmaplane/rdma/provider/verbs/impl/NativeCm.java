package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.impl.NatObject;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * RDMA-CM calls that DiSNI's native interface cannot express, in the project's own JNI library
 * (src/main/native/cm.c): a connect or accept that offers the peer no responder resources (the
 * QP then serves no READ), and the private data of a connection request, read before anything
 * is created for it. Defined by the same class loader as DiSNI's classes, which loads the library.
 */
final class NativeCm {
    /** Room for a connection request's private data (RoCE/InfiniBand carry 56 bytes after RDMA-CM's header). */
    private static final int DATA_ROOM = 224;

    private NativeCm() {
    }

    /** rdma_connect with {@code data} as private data; without remote read the peer may READ nothing here. */
    static void connect(RdmaCmId id, int retryCount, int rnrRetryCount, byte[] data, boolean remoteReadable)
            throws IOException {
        ByteBuffer direct = null;
        if (data.length > 0) {
            direct = ByteBuffer.allocateDirect(data.length).put(data).flip();
        }
        connect(handle(id), retryCount, rnrRetryCount, direct, data.length, remoteReadable);
    }

    /**
     * rdma_accept, the QP made ready first with exactly this access: without {@code remoteReadable}
     * it serves no READ of the peer (no responder resources); with it but without {@code readableNow}
     * it has responder resources and no remote access until {@link #allowRemoteReads}, from its first
     * state on (rdma_accept alone would give it REMOTE_READ for as long as it took to take that away).
     */
    static void accept(RdmaCmId id, int retryCount, int rnrRetryCount, boolean remoteReadable, boolean readableNow)
            throws IOException {
        accept(handle(id), retryCount, rnrRetryCount, remoteReadable, readableNow);
    }

    /** The id's QP's remote access flags (ibv_query_qp), e.g. IBV_ACCESS_REMOTE_READ. */
    static int remoteAccessFlags(RdmaCmId id) throws IOException {
        return remoteAccessFlags(handle(id));
    }

    /**
     * Takes remote access away from the id's connected QP: a READ that reaches it anyway is refused.
     * The end that may not be READ calls it once connected, since the responder resources it
     * offered are the peer's to honour.
     */
    static void denyRemoteAccess(RdmaCmId id) throws IOException {
        denyRemoteAccess(handle(id));
    }

    /** Gives the id's connected QP remote read access (and no other): for a channel admitted to be READ later. */
    static void allowRemoteReads(RdmaCmId id) throws IOException {
        allowRemoteReads(handle(id));
    }

    /** The private data the connection request of {@code id} carried (RoCE pads it with zeros to 56 bytes). */
    static ByteBuffer connectData(RdmaCmId id) throws IOException {
        ByteBuffer out = ByteBuffer.allocateDirect(DATA_ROOM);
        int length = connectData(handle(id), out);
        if (length < 0) {
            throw new IOException("reading the connect request's private data failed (errno " + -length + ")");
        }
        return out.limit(length).asReadOnlyBuffer();
    }

    /**
     * The status of the last CM event the calling thread took (the node's CM thread, right after
     * taking it): for REJECTED, the reject reason the peer's CM sent ({@link #rejectReason}).
     */
    static native int lastEventStatus();

    /** What a REJECTED event's status says, in words: the IB CM reject reasons RDMA-CM passes on (RoCE included). */
    static String rejectReason(int status) {
        return switch (status) {
            case 8 -> "no listener on that address and port (reject reason 8, invalid service id)";
            case 10 -> "the peer's CM took the request for a stale connection (reject reason 10)";
            case 28 -> "the peer's acceptor turned the request away (reject reason 28, consumer defined)";
            default -> "reject reason " + status;
        };
    }

    private static long handle(RdmaCmId id) throws IOException {
        if (id instanceof NatObject nat && nat.getObjId() != 0) {
            return nat.getObjId();
        }
        throw new IOException("not a native RDMA-CM id: " + id);
    }

    private static native void connect(long id, int retryCount, int rnrRetryCount, ByteBuffer data, int length,
                                        boolean remoteReadable) throws IOException;

    private static native void accept(long id, int retryCount, int rnrRetryCount, boolean remoteReadable, boolean readableNow)
            throws IOException;

    private static native int remoteAccessFlags(long id) throws IOException;

    private static native int connectData(long id, ByteBuffer out);

    private static native void denyRemoteAccess(long id) throws IOException;

    private static native void allowRemoteReads(long id) throws IOException;
}

package io.rdmaplane.rdma.provider.verbs.impl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvCompChannel;
import com.ibm.disni.verbs.IbvContext;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.IbvQP;
import com.ibm.disni.verbs.IbvQPInitAttr;
import com.ibm.disni.verbs.IbvRecvWR;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvSge;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaCm;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaConnParam;
import com.ibm.disni.verbs.RdmaEventChannel;
import com.ibm.disni.verbs.SVCPollCq;
import com.ibm.disni.verbs.SVCRegMr;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.LinkedList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Real verbs through plain DiSNI API and the project's native library: rdma_cm connection
 * between two addresses (two Soft-RoCE devices inside the test VM), memory registration, a
 * SEND of the server's address/rkey to a posted receive (completion-channel path), a chain of
 * two RDMA READs (one scattering into two SGEs) compared byte by byte, addresses of both ends,
 * a READ with a wrong rkey completing with a remote access error, and an orderly teardown.
 * Loaded through {@code DisniRuntime.loader()}, called from {@code DisniRealVerbsTest}.
 */
public final class DisniReadCheck {

    static final int TIMEOUT_MS = 120_000; // TCG emulation is ~25x slower than the host
    static final int LENGTH = 64 * 1024;

    private DisniReadCheck() {
    }

    /** One side of a connection: the verbs objects hanging off an rdma_cm id. */
    static final class Side {
        final RdmaCmId id;
        final IbvContext context;
        final IbvPd pd;
        final IbvCompChannel channel;
        final IbvCQ cq;
        final IbvQP qp;
        final List<IbvMr> regions = new ArrayList<>();

        Side(RdmaCmId id) throws Exception {
            this.id = id;
            this.context = id.getVerbs();
            assertNotNull(context, "the id is bound to a device");
            this.pd = context.allocPd();
            this.channel = context.createCompChannel();
            this.cq = context.createCQ(channel, 32, 0);
            IbvQPInitAttr attr = new IbvQPInitAttr();
            attr.cap().setMax_send_wr(16);
            attr.cap().setMax_recv_wr(16);
            attr.cap().setMax_send_sge(2);
            attr.cap().setMax_recv_sge(2);
            attr.cap().setMax_inline_data(0);
            attr.setSend_cq(cq);
            attr.setRecv_cq(cq);
            attr.setQp_type(IbvQP.IBV_QPT_RC);
            this.qp = id.createQP(pd, attr);
            assertNotNull(qp, "createQP");
        }

        IbvMr register(ByteBuffer buffer, int access) throws Exception {
            SVCRegMr call = pd.regMr(buffer, access);
            IbvMr mr = call.execute().getMr();
            call.free();
            regions.add(mr);
            return mr;
        }

        void close() throws Exception {
            id.destroyQP();
            for (IbvMr mr : regions) {
                mr.deregMr().execute().free();
            }
            assertEquals(0, cq.destroyCQ());
            assertEquals(0, channel.destroyCompChannel());
            assertEquals(0, pd.deallocPd());
        }
    }

    public static String run(String addressA, String addressB) throws Exception {
        StringBuilder report = new StringBuilder();
        int port = 20000 + ThreadLocalRandom.current().nextInt(20000);
        InetSocketAddress serverAddress = new InetSocketAddress(addressB, port);

        RdmaEventChannel serverEvents = RdmaEventChannel.createEventChannel();
        RdmaEventChannel clientEvents = RdmaEventChannel.createEventChannel();
        RdmaCmId listener = serverEvents.createId(RdmaCm.RDMA_PS_TCP);
        listener.bindAddr(serverAddress);
        listener.listen(8);

        RdmaCmId client = clientEvents.createId(RdmaCm.RDMA_PS_TCP);
        client.bindAddr(new InetSocketAddress(addressA, 0)); // DiSNI's resolveAddr drops the source
        client.resolveAddr(null, serverAddress, 10_000);
        expect(clientEvents, RdmaCmEvent.EventType.RDMA_CM_EVENT_ADDR_RESOLVED);
        client.resolveRoute(10_000);
        expect(clientEvents, RdmaCmEvent.EventType.RDMA_CM_EVENT_ROUTE_RESOLVED);

        Side c = new Side(client);
        ByteBuffer inbox = ByteBuffer.allocateDirect(16).order(ByteOrder.LITTLE_ENDIAN);
        IbvMr inboxMr = c.register(inbox, IbvMr.IBV_ACCESS_LOCAL_WRITE);
        postRecv(c.qp, 1L, inboxMr, 16);

        RdmaConnParam param = new RdmaConnParam();
        param.setRetry_count((byte) 6);
        param.setRnr_retry_count((byte) 7);
        client.connect(param);

        RdmaCmEvent request = expect(serverEvents, RdmaCmEvent.EventType.RDMA_CM_EVENT_CONNECT_REQUEST);
        RdmaCmId serverConn = request.getConnIdPriv();
        assertNotNull(serverConn, "connect request carries the new id");
        Side s = new Side(serverConn);

        byte[] pattern = new byte[LENGTH];
        ThreadLocalRandom.current().nextBytes(pattern);
        ByteBuffer source = ByteBuffer.allocateDirect(LENGTH);
        source.put(pattern).clear();
        IbvMr sourceMr = s.register(source, IbvMr.IBV_ACCESS_REMOTE_READ | IbvMr.IBV_ACCESS_LOCAL_WRITE);
        ByteBuffer outbox = ByteBuffer.allocateDirect(16).order(ByteOrder.LITTLE_ENDIAN);
        outbox.putLong(0, sourceMr.getAddr()).putInt(8, sourceMr.getRkey()).putInt(12, LENGTH);
        IbvMr outboxMr = s.register(outbox, IbvMr.IBV_ACCESS_LOCAL_WRITE);

        serverConn.accept(param);
        // The client's librdmacm answers the server's reply (RTU) while it takes the event, so
        // the client's ESTABLISHED comes first.
        expect(clientEvents, RdmaCmEvent.EventType.RDMA_CM_EVENT_ESTABLISHED);
        expect(serverEvents, RdmaCmEvent.EventType.RDMA_CM_EVENT_ESTABLISHED);
        report.append("connected ").append(client.getSource()).append(" -> ").append(client.getDestination())
                .append(" (server sees ").append(serverConn.getDestination()).append("); ");
        assertEquals(serverAddress, client.getDestination());
        assertEquals(addressA, ((InetSocketAddress) serverConn.getDestination()).getHostString());
        assertTrue(c.qp.getQp_num() > 0 && s.qp.getQp_num() > 0, "QP numbers");

        // Two-sided: the server SENDs address, rkey and length; the client takes the completion
        // through its completion channel.
        c.cq.reqNotification(false).execute().free();
        postSend(s.qp, 2L, IbvSendWR.IbvWrOcode.IBV_WR_SEND, outboxMr, 0, 16, 0L, 0);
        assertTrue(c.channel.getCqEvent(c.cq, TIMEOUT_MS), "completion event for the receive");
        assertEquals(0, c.cq.ackEvents(1));
        IbvWC received = pollOne(c.cq);
        assertEquals(1L, received.getWr_id());
        assertEquals(IbvWC.IbvWcStatus.IBV_WC_SUCCESS.ordinal(), received.getStatus(), "receive status");
        assertEquals(16, received.getByte_len());
        IbvWC sent = pollOne(s.cq);
        assertEquals(2L, sent.getWr_id());
        assertEquals(IbvWC.IbvWcStatus.IBV_WC_SUCCESS.ordinal(), sent.getStatus(), "send status");
        long remoteAddr = inbox.getLong(0);
        int rkey = inbox.getInt(8);
        int length = inbox.getInt(12);
        assertEquals(LENGTH, length);

        // One-sided: one postSend with two chained READs; the second scatters into two SGEs.
        ByteBuffer sink = ByteBuffer.allocateDirect(LENGTH);
        IbvMr sinkMr = c.register(sink, IbvMr.IBV_ACCESS_LOCAL_WRITE);
        int half = LENGTH / 2;
        List<IbvSendWR> reads = new ArrayList<>();
        reads.add(read(10L, remoteAddr, rkey, sge(sinkMr, 0, half)));
        reads.add(read(11L, remoteAddr + half, rkey, sge(sinkMr, half, half / 2),
                sge(sinkMr, half + half / 2, half / 2)));
        c.qp.postSend(reads, null).execute().free();
        IbvWC first = pollOne(c.cq);
        IbvWC second = pollOne(c.cq);
        assertEquals(10L, first.getWr_id());
        assertEquals(11L, second.getWr_id());
        assertEquals(IbvWC.IbvWcStatus.IBV_WC_SUCCESS.ordinal(), first.getStatus(), "read status");
        assertEquals(IbvWC.IbvWcStatus.IBV_WC_SUCCESS.ordinal(), second.getStatus(), "read status");
        byte[] copy = new byte[LENGTH];
        sink.get(copy).clear();
        assertArrayEquals(pattern, copy, "the READ copied the server's bytes");
        report.append("read ").append(LENGTH).append(" bytes in 2 chained WRs, equal; ");

        report.append("ODP: ").append(c.context.queryOdpSupport()).append("; ");

        // A READ with a wrong rkey completes with a remote access error.
        c.qp.postSend(List.of(read(12L, remoteAddr, rkey ^ 0x5a5a00, sge(sinkMr, 0, 64))), null).execute().free();
        IbvWC denied = pollOne(c.cq);
        assertEquals(12L, denied.getWr_id());
        assertEquals(IbvWC.IbvWcStatus.IBV_WC_REM_ACCESS_ERR.ordinal(), denied.getStatus(),
                "a wrong rkey is refused by the remote side");
        report.append("wrong rkey -> status ").append(denied.getStatus()).append("; ");

        assertEquals(0, client.disconnect());
        expect(serverEvents, RdmaCmEvent.EventType.RDMA_CM_EVENT_DISCONNECTED);
        assertEquals(0, serverConn.disconnect()); // answers the client's disconnect request
        expect(clientEvents, RdmaCmEvent.EventType.RDMA_CM_EVENT_DISCONNECTED);
        c.close();
        s.close();
        assertEquals(0, client.destroyId());
        assertEquals(0, serverConn.destroyId());
        assertEquals(0, listener.destroyId());
        assertEquals(0, clientEvents.destroyEventChannel());
        assertEquals(0, serverEvents.destroyEventChannel());
        report.append("disconnected and destroyed");
        return report.toString();
    }

    static RdmaCmEvent expect(RdmaEventChannel channel, RdmaCmEvent.EventType type) throws Exception {
        long deadline = System.nanoTime() + TIMEOUT_MS * 1_000_000L;
        while (System.nanoTime() < deadline) {
            RdmaCmEvent event = channel.getCmEvent(1000);
            if (event == null) {
                continue;
            }
            event.ackEvent();
            if (event.getEvent() == type.ordinal()) {
                return event;
            }
            fail("expected " + type + ", got " + RdmaCmEvent.EventType.values()[event.getEvent()]);
        }
        return fail("no " + type + " within " + TIMEOUT_MS + " ms");
    }

    static IbvWC pollOne(IbvCQ cq) throws Exception {
        IbvWC[] wcs = {new IbvWC()};
        SVCPollCq poll = cq.poll(wcs, 1);
        try {
            long deadline = System.nanoTime() + TIMEOUT_MS * 1_000_000L;
            while (System.nanoTime() < deadline) {
                if (poll.execute().getPolls() == 1) {
                    return wcs[0];
                }
                Thread.onSpinWait();
            }
        } finally {
            poll.free();
        }
        return fail("no completion within " + TIMEOUT_MS + " ms");
    }

    static IbvSge sge(IbvMr mr, int offset, int length) {
        IbvSge sge = new IbvSge();
        sge.setAddr(mr.getAddr() + offset);
        sge.setLength(length);
        sge.setLkey(mr.getLkey());
        return sge;
    }

    static IbvSendWR read(long id, long remoteAddr, int rkey, IbvSge... sges) {
        IbvSendWR wr = new IbvSendWR();
        wr.setWr_id(id);
        wr.setOpcode(IbvSendWR.IbvWrOcode.IBV_WR_RDMA_READ.ordinal());
        wr.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
        wr.getRdma().setRemote_addr(remoteAddr);
        wr.getRdma().setRkey(rkey);
        for (IbvSge sge : sges) {
            wr.getSg_list().add(sge);
        }
        wr.setNum_sge(sges.length);
        return wr;
    }

    static void postSend(IbvQP qp, long id, IbvSendWR.IbvWrOcode opcode, IbvMr mr, int offset, int length,
                         long remoteAddr, int rkey) throws Exception {
        IbvSendWR wr = new IbvSendWR();
        wr.setWr_id(id);
        wr.setOpcode(opcode.ordinal());
        wr.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
        wr.getRdma().setRemote_addr(remoteAddr);
        wr.getRdma().setRkey(rkey);
        wr.getSg_list().add(sge(mr, offset, length));
        wr.setNum_sge(1);
        qp.postSend(List.of(wr), null).execute().free();
    }

    static void postRecv(IbvQP qp, long id, IbvMr mr, int length) throws Exception {
        IbvRecvWR wr = new IbvRecvWR();
        wr.setWr_id(id);
        wr.setSg_list(new LinkedList<>(List.of(sge(mr, 0, length)))); // null by default
        wr.setNum_sge(1);
        qp.postRecv(List.of(wr), null).execute().free();
    }
}

package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvContext;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.IbvQP;
import com.ibm.disni.verbs.IbvQPInitAttr;
import com.ibm.disni.verbs.IbvRecvWR;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvSge;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.SVCPostRecv;
import com.ibm.disni.verbs.SVCPostSend;
import io.rdmaplane.rdma.provider.AbstractChannel;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.ConnectRequest;
import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.LocalAccess;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.VerbsOptions;
import java.io.IOException;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One RC queue pair, connected with RDMA-CM. Any thread may post; completions arrive on the
 * completion thread of the channel's lane, or in hybrid mode on a thread waiting for a READ of that
 * lane (one thread at a time, in CQ order: {@link CqPolling}), connection events on the node's CM thread. One lock (this) guards the
 * work-request slots, the stateful verb calls (DiSNI's serialized work requests, reused for
 * every post) and the state; futures and handler callbacks run outside it.
 *
 * <p><b>Handshake.</b> Both ends post their receive buffers before the connection exists. The
 * connecting end sends HELLO (its maxMessageSize, queue depth and number of receive buffers)
 * once RDMA-CM reports ESTABLISHED; the accepting end, on that HELLO, asks its acceptor for a
 * handler and answers with its own HELLO. That answer is the READY: the connecting end's future
 * completes on it, and nothing the acceptor sends can overtake it.
 *
 * <p><b>Large READs.</b> A READ longer than the node's READ piece ({@link VerbsOptions#readPieceBytes()},
 * 256 KiB by default) is posted as several work requests over consecutive ranges, chained in one
 * ibv_post_send (one doorbell), each signaled
 * (progress for the operation timeout); an RC send queue completes in order, so the op
 * completes with its last piece, and an error on any piece fails it. Soft-RoCE needs this: it
 * answers a READ in one burst of packets, and past about a thousand packets (1 MiB at RoCE MTU
 * 1024) a dropped packet makes it re-request the whole remainder, again and again (0.5 MB/s
 * instead of 10-20 MB/s for 8 MiB in the QEMU VM). Real NICs do not mind either way. The send
 * queue has room for {@link #SQ_SPARE} work requests beyond the queue depth; an op that does
 * not fit yet waits in {@link #waiting}.
 *
 * <p><b>Credits.</b> The peer's receive-not-ready timer is RDMA-CM's default (0 = 655 ms), so a
 * SEND must never find no receive buffer posted. A sender holds one credit per free receive
 * buffer of its peer; every frame returns the buffers its sender re-posted meanwhile; when no
 * DATA goes back, a CREDIT frame returns them once a quarter of them are waiting. DATA needs
 * two credits, a CREDIT frame one, so the last credit always stays free to return credits and
 * two peers can never both wait for the other. DATA without a credit waits in order in
 * {@link #waiting} (it counts as outstanding); the operation timeout bounds that wait too.
 * Waiting work leaves in posting order, READs and SENDs alike, as a send queue would.
 */
final class VerbsChannel extends AbstractChannel {
    private static final Logger LOG = LoggerFactory.getLogger(VerbsChannel.class);
    /** Work-request slots beyond the queue depth, for HELLO and CREDIT frames. */
    static final int CONTROL_SLOTS = 4;
    /** Send-queue entries beyond the queue depth, for the extra work requests of split READs. */
    static final int SQ_SPARE = VerbsOptions.MAX_READ_PIECES;
    private static final long RECV_FLAG = 1L << 31;
    /**
     * Inline data a QP asks for: a control request or answer with its frame header fits (Soft-RoCE
     * allows 512 bytes, ConnectX-class NICs about 200 to 900 depending on the send queue's WQE size).
     */
    static final int INLINE_BYTES = 192;

    private enum Kind { READ, SEND, CONTROL, BIND }

    /** A posted (or waiting) READ or SEND. */
    private static final class Op {
        final Kind kind;
        final CompletableFuture<Void> future;
        final SendPool.Slot slot;
        final int length;
        long remoteAddress;
        int rkey;
        long localAddress;
        int lkey;
        int sqEntries = 1;
        /** Work requests of this op not completed yet (READ pieces). */
        int piecesLeft;
        int index = -1;
        /** The window a BIND binds. */
        VerbsWindow window;

        Op(Kind kind, CompletableFuture<Void> future, SendPool.Slot slot, int length) {
            this.kind = kind;
            this.future = future;
            this.slot = slot;
            this.length = length;
        }
    }

    private static final Op CONTROL = new Op(Kind.CONTROL, null, null, 0);

    private final VerbsNode node;
    /** The poller of this channel's lane: READ waiters poll the CQ through it in hybrid mode. */
    private final CompletionPoller poller;
    final int id;
    /** The lane: which of the node's CQs (and completion threads) this QP's completions go to. */
    final Lane lane;
    private final int receiveBuffers;
    private final int recvSlotBytes;
    private final int creditThreshold;
    private final int readPiece;
    private final int sqEntries;
    final int cqEntries;

    // ---- guarded by this
    private State state = State.CONNECTING;
    private RdmaCmId cmId;
    /** The key domain an accepted channel joined (its QP and buffers are there), or null: the node's PD. */
    private volatile VerbsDomain domain;
    private IbvQP qp;
    private ByteBuffer slab;
    private IbvMr slabMr;
    private SVCPostRecv[] receives;
    private SVCPostSend sendCall;
    private final Op[] ops;
    private final int[] freeSlots;
    private int freeCount;
    private final ArrayDeque<Op> waiting = new ArrayDeque<>();
    /** BIND_MW work requests waiting for a control slot, in order. */
    private final ArrayDeque<Op> bindsWaiting = new ArrayDeque<>();
    /** Windows bound (or being bound) on this QP: deallocated when the channel closes, before its QP is disconnected. */
    private final List<VerbsWindow> windows = new ArrayList<>();
    private int credits;
    private int sqFree;
    private int toReturn;
    private boolean holdForAccept;
    private boolean destroyed;
    private final List<SendPool.Slot> orphans = new ArrayList<>();
    private Exception lastPostError;
    /** Longest SEND posted inline: {@link #INLINE_BYTES}, or 0 if the device gave the QP none. */
    private int maxInline;

    // ---- read by any thread
    private volatile int outstanding;
    /** Set when the node forgets this channel (its QP destroyed): completions no longer go to it. */
    volatile boolean forgotten;

    /** What this end's connect carries (connecting end only; set before the CM thread connects). */
    volatile ConnectRequest connectRequest = ConnectRequest.OPEN;

    // ---- CM thread only
    boolean established;
    boolean disconnectSeen;
    long destroyAfter;
    /** When the peer disconnected with operations outstanding: fail them then, unless a completion said why first. */
    long disconnectDeadline;

    VerbsChannel(VerbsNode node, int id, int queueDepth, Lane lane, ChannelHandler handler,
                 CompletableFuture<Channel> connected, SocketAddress remote) {
        super(node.options, queueDepth, handler, connected, remote);
        this.node = node;
        this.id = id;
        this.lane = lane;
        this.poller = node.poller(lane);
        this.receiveBuffers = node.receiveBuffers(queueDepth);
        this.recvSlotBytes = Frames.align(node.options.maxMessageSize() + Frames.HEADER);
        this.creditThreshold = Math.max(2, receiveBuffers / 4);
        this.readPiece = node.readPiece();
        this.sqEntries = queueDepth + SQ_SPARE;
        this.sqFree = sqEntries;
        this.cqEntries = sqEntries + CONTROL_SLOTS + receiveBuffers;
        this.ops = new Op[queueDepth + CONTROL_SLOTS];
        this.freeSlots = new int[queueDepth];
        for (int i = 0; i < queueDepth; i++) {
            freeSlots[i] = queueDepth - 1 - i;
        }
        this.freeCount = queueDepth;
    }

    // ================================================================ set-up (CM thread)

    synchronized void attach(RdmaCmId cmId) {
        this.cmId = cmId;
    }

    /** Joins {@code keys} before set-up (CM thread): false when it is closed already. */
    synchronized boolean join(VerbsDomain keys) {
        if (!keys.enter()) {
            return false;
        }
        domain = keys;
        return true;
    }

    VerbsDomain domain() {
        return domain;
    }

    /** The protection domain of this channel's QP and buffers. */
    private IbvPd pd() {
        return domain != null ? domain.pd() : node.pd();
    }

    /** The send buffers of this channel's PD. */
    private SendPool sendPool() {
        return domain != null ? domain.sendPool() : node.sendPool();
    }

    synchronized RdmaCmId cmId() {
        return cmId;
    }

    @Override
    public void denyRemoteReads() throws IOException {
        RdmaCmId id = cmId();
        if (id != null && isOpen()) {
            NativeCm.denyRemoteAccess(id);
        }
    }

    @Override
    public void allowRemoteReads() throws IOException {
        RdmaCmId id = cmId();
        if (id == null || !isOpen()) {
            throw new IOException("the channel to " + remoteAddress() + " is closed");
        }
        NativeCm.allowRemoteReads(id);
    }

    /**
     * Creates the QP on the node's PD (its key domain's, if it joined one) and its lane's CQ,
     * registers the receive buffers and posts them all. The QP asks for {@link #INLINE_BYTES} of
     * inline data (SENDs that short are copied into the work request: no DMA read of the send
     * buffer before the first packet); a device that refuses gets a QP without.
     */
    synchronized void setUp(IbvContext context) throws IOException {
        if (state == State.CLOSED) {
            throw new IOException(this + " closed during set-up");
        }
        if (!Verbs.sameDevice(context, node.context())) {
            throw new IOException("the peer is reached through another RDMA device than the one this node uses "
                    + "(bound to " + node.options.bindAddress() + "); bind the node to an address of that device");
        }
        try {
            qp = createQp(INLINE_BYTES);
            maxInline = INLINE_BYTES;
        } catch (IOException e) {
            LOG.debug("{}: rdma_create_qp with {} bytes of inline data failed ({}); without", this, INLINE_BYTES, e.toString());
            qp = null;
        }
        if (qp == null) {
            qp = createQp(0);
            maxInline = 0;
        }
        if (qp == null) {
            throw new IOException("rdma_create_qp failed (send depth " + (sqEntries + CONTROL_SLOTS) + ", receive depth "
                    + receiveBuffers + ")");
        }
        int recvBytes = receiveBuffers * recvSlotBytes;
        slab = ByteBuffer.allocateDirect(recvBytes + CONTROL_SLOTS * Frames.CONTROL_SLOT);
        long base = Verbs.address(slab);
        slabMr = Verbs.register(pd(), base, slab.capacity(), Verbs.accessFlags(java.util.Set.of(Access.LOCAL_WRITE)));
        int lkey = slabMr.getLkey();
        receives = new SVCPostRecv[receiveBuffers];
        for (int i = 0; i < receiveBuffers; i++) {
            IbvSge sge = new IbvSge();
            sge.setAddr(base + (long) i * recvSlotBytes);
            sge.setLength(recvSlotBytes);
            sge.setLkey(lkey);
            LinkedList<IbvSge> sges = new LinkedList<>();
            sges.add(sge);
            IbvRecvWR wr = new IbvRecvWR();
            wr.setWr_id(wrId(i, true));
            wr.setSg_list(sges);
            wr.setNum_sge(1);
            receives[i] = qp.postRecv(List.of(wr), null);
        }
        sendCall = qp.postSend(List.of(work(IbvSendWR.IBV_WR_SEND)), null);
        for (SVCPostRecv receive : receives) {
            receive.execute();
        }
    }

    private IbvQP createQp(int inline) throws IOException {
        IbvQPInitAttr attr = new IbvQPInitAttr();
        attr.cap().setMax_send_wr(sqEntries + CONTROL_SLOTS);
        attr.cap().setMax_recv_wr(receiveBuffers);
        attr.cap().setMax_send_sge(1);
        attr.cap().setMax_recv_sge(1);
        attr.cap().setMax_inline_data(inline);
        attr.setQp_type(IbvQP.IBV_QPT_RC);
        attr.setSend_cq(node.cq(lane));
        attr.setRecv_cq(node.cq(lane));
        return cmId.createQP(pd(), attr);
    }

    private static IbvSendWR work(int opcode) {
        IbvSge sge = new IbvSge();
        LinkedList<IbvSge> sges = new LinkedList<>();
        sges.add(sge);
        IbvSendWR wr = new IbvSendWR();
        wr.setOpcode(opcode);
        wr.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
        wr.setSg_list(sges);
        wr.setNum_sge(1);
        return wr;
    }

    /**
     * RDMA-CM retry counts: 7 transport retries (the operation timeout decides earlier) and 7 RNR
     * retries (infinite; credits keep RNR from happening). The project's native library offers
     * the device's READ depths, up to 16 outstanding READs each way (none to a peer that may not
     * READ this end: see {@link NativeCm}).
     */
    static final int RETRY_COUNT = 7;
    static final int RNR_RETRY_COUNT = 7;

    private long wrId(int index, boolean receive) {
        return ((long) id << 32) | (receive ? RECV_FLAG : 0) | index;
    }

    static int channelOf(long wrId) {
        return (int) (wrId >>> 32);
    }

    void setRemote(SocketAddress address) {
        if (address != null) {
            remote(address);
        }
    }

    /** Client, on ESTABLISHED: say HELLO; the peer's HELLO will open the channel. */
    void onEstablished() {
        established = true;
        if (accepted()) {
            return;
        }
        synchronized (this) {
            if (state != State.CONNECTING) {
                return;
            }
            state = State.HANDSHAKE;
            postHello();
        }
    }

    // ================================================================ posting (any thread)

    VerbsNode node() {
        return node;
    }

    /**
     * Posts a BIND_MW of {@code window} on this QP in a control slot (or once one is free);
     * completes with its completion. A failed bind breaks the channel, as any failed work request does.
     */
    synchronized CompletableFuture<Void> bindWindow(VerbsWindow window) {
        CompletableFuture<Void> future = new CompletableFuture<>();
        if (state != State.OPEN) {
            future.completeExceptionally(closedError());
            return future;
        }
        if (domain != null) { // a window lives in the node's PD; this QP is in another
            future.completeExceptionally(new IllegalArgumentException(window + " cannot be bound on " + this
                    + ", whose QP is in " + domain + ": its keys are the domain's"));
            return future;
        }
        Op op = new Op(Kind.BIND, future, null, 0);
        op.window = window;
        bindsWaiting.add(op);
        drainBinds();
        return future;
    }

    /** Posts waiting binds while control slots are free. Holds this. */
    private void drainBinds() {
        while (!bindsWaiting.isEmpty() && state == State.OPEN) {
            int slot = freeControlSlot();
            if (slot < 0) {
                return; // retried when a control slot completes
            }
            Op op = bindsWaiting.poll();
            VerbsWindow window = op.window;
            VerbsRegion region = window.region();
            op.index = slot;
            ops[slot] = op;
            windows.add(window);
            int rc;
            try {
                rc = NativeMw.postBind(qp, window.handle(), region.mr(), window.address(), window.length(), window.rkey(),
                        wrId(slot, false));
            } catch (IOException | RuntimeException e) {
                lastPostError = e;
                rc = -1;
            }
            if (rc != 0) {
                ops[slot] = null;
                postFailed(op, rc == -1 ? lastPostError : new IOException("ibv_post_send (BIND_MW) failed (errno " + -rc + ")"));
                return;
            }
        }
    }

    /**
     * In hybrid mode the future's waiter polls this lane's CQ itself ({@link PolledFuture}); the
     * pieces of a long READ go to the device as one chained list ({@link NativePost#postRead}).
     */
    @Override
    public CompletableFuture<Void> read(long remoteAddress, int rkey, int length, MemoryRegion local, int localOffset) {
        checkReadLength(length);
        CompletableFuture<Void> future = poller.hybrid() ? new PolledFuture(poller) : new CompletableFuture<>();
        String protection;
        synchronized (this) {
            if (!reserve(future)) {
                return future;
            }
            protection = checkLocal(local, localOffset, length);
            if (protection == null) {
                VerbsRegion region = (VerbsRegion) local;
                Op op = new Op(Kind.READ, future, null, length);
                op.remoteAddress = remoteAddress;
                op.rkey = rkey;
                op.localAddress = region.address() + localOffset;
                op.lkey = region.lkey();
                op.sqEntries = (length + readPiece - 1) / readPiece;
                waiting.add(op);
                drainWaiting();
                return future;
            }
        }
        // As on verbs: the work request completes in error and the queue pair breaks.
        terminate(new TransportException(Status.LOCAL_PROTECTION_ERROR, protection),
                new Op(Kind.READ, future, null, length), Status.FLUSHED);
        return future;
    }

    @Override
    public CompletableFuture<Void> send(ByteBuffer message) {
        int length = message.remaining();
        checkMessageLength(length);
        CompletableFuture<Void> future = new CompletableFuture<>();
        synchronized (this) {
            if (!reserve(future)) {
                return future;
            }
            SendPool.Slot slot;
            try {
                slot = sendPool().take();
            } catch (IOException | RuntimeException e) {
                outstanding--;
                future.completeExceptionally(new TransportException(Status.FLUSHED, "no send buffer: " + e, e));
                return future;
            }
            // Copied now: the caller may reuse its buffer as soon as send returns.
            slot.buffer.put(Frames.HEADER, message, message.position(), length);
            Op op = new Op(Kind.SEND, future, slot, length);
            waiting.add(op);
            drainWaiting();
        }
        return future;
    }

    /** Counts an operation in, or fails it (FLUSHED when closed, QUEUE_FULL at the depth). Holds this. */
    private boolean reserve(CompletableFuture<Void> future) {
        if (state != State.OPEN) {
            future.completeExceptionally(closedError());
            return false;
        }
        if (outstanding >= queueDepth()) {
            future.completeExceptionally(queueFullError());
            return false;
        }
        if (outstanding++ == 0) {
            progress(); // the timeout counts from the first outstanding operation
        }
        return true;
    }

    /** Gives the op a work-request slot (one is free: reserve counted it). Holds this. */
    private void track(Op op) {
        op.index = freeSlots[--freeCount];
        ops[op.index] = op;
    }

    private void untrack(Op op) {
        if (op.index >= 0 && ops[op.index] == op) {
            ops[op.index] = null;
            freeSlots[freeCount++] = op.index;
        }
    }

    /**
     * Posts waiting work in order while the send queue has room, and for DATA while the peer has
     * a receive buffer for it (keeping the last credit for CREDIT frames). Holds this.
     */
    private void drainWaiting() {
        while (!waiting.isEmpty() && !holdForAccept && state == State.OPEN) {
            Op op = waiting.peek();
            if (sqFree < op.sqEntries || (op.kind == Kind.SEND && credits < 2)) {
                return;
            }
            waiting.poll();
            track(op);
            sqFree -= op.sqEntries;
            op.piecesLeft = op.sqEntries;
            boolean posted;
            if (op.kind == Kind.READ) {
                posted = postRead(op);
            } else {
                credits--;
                Frames.header(op.slot.buffer, 0, Frames.DATA, takeCredits());
                posted = postSend(wrId(op.index, false), op.slot.address, Frames.HEADER + op.length, op.slot.lkey);
            }
            if (!posted) {
                untrack(op);
                if (op.slot != null) {
                    orphans.add(op.slot);
                }
                postFailed(op, lastPostError);
                return;
            }
        }
    }

    /**
     * ibv_post_send of a READ: one signaled work request per piece, all with the op's slot in wr_id,
     * chained in one list and posted with one doorbell. Holds this.
     */
    private boolean postRead(Op op) {
        try {
            int rc = NativePost.postRead(qp, wrId(op.index, false), op.localAddress, op.lkey, op.remoteAddress, op.rkey,
                    op.length, readPiece);
            if (rc == 0) {
                return true;
            }
            lastPostError = new IOException("ibv_post_send (RDMA_READ, " + op.sqEntries + " work requests) failed (errno "
                    + -rc + ")");
        } catch (IOException | RuntimeException e) {
            lastPostError = e;
        }
        return false;
    }

    /** Sends a CREDIT frame when enough re-posted buffers wait to be returned. Holds this. */
    private void maybeReturnCredits() {
        if (state != State.OPEN || holdForAccept || toReturn < creditThreshold || credits < 1) {
            return;
        }
        int slot = freeControlSlot();
        if (slot < 0) {
            return; // retried when a control frame completes
        }
        int offset = receiveBuffers * recvSlotBytes + (slot - queueDepth()) * Frames.CONTROL_SLOT;
        Frames.header(slab, offset, Frames.CREDIT, takeCredits());
        credits--;
        ops[slot] = CONTROL;
        if (!postSend(wrId(slot, false), slabMr.getAddr() + offset, Frames.HEADER, slabMr.getLkey())) {
            ops[slot] = null;
            postFailed(null, lastPostError);
        }
    }

    /** Posts this end's HELLO. Holds this. False (and the channel failing) if the post failed. */
    private boolean postHello() {
        int slot = freeControlSlot();
        if (slot < 0) {
            postFailed(null, new IOException("no control slot for HELLO"));
            return false;
        }
        int offset = receiveBuffers * recvSlotBytes + (slot - queueDepth()) * Frames.CONTROL_SLOT;
        int length = Frames.hello(slab, offset, node.options.maxMessageSize(), queueDepth(), receiveBuffers);
        ops[slot] = CONTROL;
        if (!postSend(wrId(slot, false), slabMr.getAddr() + offset, length, slabMr.getLkey())) {
            ops[slot] = null;
            postFailed(null, lastPostError);
            return false;
        }
        return true;
    }

    private int freeControlSlot() {
        for (int i = queueDepth(); i < ops.length; i++) {
            if (ops[i] == null) {
                return i;
            }
        }
        return -1;
    }

    private int takeCredits() {
        int n = toReturn;
        toReturn = 0;
        return n;
    }

    /** ibv_post_send of one SEND, inline when it is short enough. Holds this. */
    private boolean postSend(long wrId, long address, int length, int lkey) {
        try {
            SVCPostSend.SendWRMod wr = sendCall.getWrMod(0);
            wr.setWr_id(wrId);
            wr.setSend_flags(length <= maxInline ? IbvSendWR.IBV_SEND_SIGNALED | IbvSendWR.IBV_SEND_INLINE
                    : IbvSendWR.IBV_SEND_SIGNALED);
            SVCPostSend.SgeMod sge = wr.getSgeMod(0);
            sge.setAddr(address);
            sge.setLength(length);
            sge.setLkey(lkey);
            sendCall.execute();
            return true;
        } catch (IOException | RuntimeException e) {
            lastPostError = e;
            return false;
        }
    }

    /** A post was refused: the QP is unusable. Fails the op and the channel (after the lock is released). */
    private void postFailed(Op op, Exception e) {
        TransportException cause = new TransportException(Status.FLUSHED, "ibv_post_send failed on " + this + ": " + e, e);
        node.later(() -> terminate(cause, op, Status.FLUSHED));
    }

    private String checkLocal(MemoryRegion local, int offset, int length) {
        if (domain != null) {
            return this + " is in " + domain + ", and the node's memory is not: a channel accepted into a key domain is READ"
                    + " from, it READs nothing";
        }
        return LocalAccess.problem(local, local instanceof VerbsRegion region && region.node() == node, offset, length);
    }

    // ================================================================ completions (completion thread)

    void onCompletion(long wrId, int status, int byteLength) {
        int index = (int) (wrId & (RECV_FLAG - 1));
        if ((wrId & RECV_FLAG) != 0) {
            onReceive(index, status, byteLength);
        } else {
            onSendCompletion(index, status);
        }
    }

    private void onSendCompletion(int index, int status) {
        Op op;
        synchronized (this) {
            if (index >= ops.length || (op = ops[index]) == null) {
                return; // already failed by a close: this is its flush
            }
            heard();
            if (index < queueDepth()) {
                sqFree++;
                if (status == WcStatus.SUCCESS && --op.piecesLeft > 0) {
                    if (!waiting.isEmpty()) {
                        drainWaiting();
                    }
                    return; // a READ piece: the op completes with its last one
                }
                freeSlots[freeCount++] = index;
                outstanding--;
            }
            ops[index] = null;
            if (status != WcStatus.SUCCESS) {
                if (op.slot != null) {
                    orphans.add(op.slot);
                }
            } else if (op.slot != null) {
                sendPool().release(op.slot);
            }
            if (status == WcStatus.SUCCESS) {
                if (index >= queueDepth() && !bindsWaiting.isEmpty()) {
                    drainBinds();
                }
                if (op == CONTROL || op.kind == Kind.BIND) {
                    maybeReturnCredits();
                } else if (!waiting.isEmpty()) {
                    drainWaiting();
                }
            }
        }
        if (status == WcStatus.SUCCESS) {
            if (op.future != null) {
                op.future.complete(null);
            }
            return;
        }
        String what = op.kind == Kind.READ ? "READ" : op.kind == Kind.SEND ? "SEND" : op.kind == Kind.BIND ? "BIND_MW" : "control SEND";
        failed(status, what, op == CONTROL ? null : op);
    }

    private void onReceive(int index, int status, int byteLength) {
        if (status != WcStatus.SUCCESS) {
            failed(status, "receive", null);
            return;
        }
        ByteBuffer buffer;
        int offset = index * recvSlotBytes;
        synchronized (this) {
            if (state == State.CLOSED || index >= receiveBuffers) {
                return;
            }
            buffer = slab;
            heard();
            if (byteLength >= Frames.HEADER) {
                credits += Frames.credits(buffer, offset);
            }
        }
        if (byteLength < Frames.HEADER) {
            violation("frame of " + byteLength + " bytes");
            return;
        }
        byte type = Frames.type(buffer, offset);
        switch (type) {
            case Frames.HELLO -> {
                if (!onHello(buffer, offset, byteLength)) {
                    return;
                }
            }
            case Frames.DATA -> {
                if (!isOpen()) {
                    violation("DATA before the handshake");
                    return;
                }
                ChannelHandler h = handler();
                try {
                    h.onMessage(this, buffer.slice(offset + Frames.HEADER, byteLength - Frames.HEADER));
                } catch (RuntimeException e) {
                    LOG.error("{}: message handler failed", this, e);
                } catch (Throwable e) { // an Error: this channel goes, the node stays
                    LOG.error("{}: message handler failed; closing the channel", this, e);
                    terminate(new TransportException(Status.FLUSHED, "message handler failed: " + e, e), null, Status.FLUSHED);
                    return;
                }
            }
            case Frames.CREDIT -> {
            }
            default -> {
                violation("unknown frame type " + type);
                return;
            }
        }
        synchronized (this) {
            if (state == State.CLOSED) {
                return;
            }
            try {
                receives[index].execute();
            } catch (IOException | RuntimeException e) {
                postFailed(null, e);
                return;
            }
            toReturn++;
            drainWaiting();
            maybeReturnCredits();
        }
    }

    /** The peer's HELLO: connecting end opens; accepting end asks its acceptor, then answers. */
    private boolean onHello(ByteBuffer buffer, int offset, int length) {
        if (length < Frames.HELLO_BYTES || buffer.getInt(offset + Frames.HEADER) != Frames.MAGIC
                || buffer.getInt(offset + Frames.HEADER + 4) != Frames.VERSION) {
            violation("not a HELLO of this provider's version " + Frames.VERSION);
            return false;
        }
        int peerMax = buffer.getInt(offset + Frames.HEADER + 8);
        int peerDepth = buffer.getInt(offset + Frames.HEADER + 12);
        int peerReceives = buffer.getInt(offset + Frames.HEADER + 16);
        if (peerMax < 64 || peerDepth < 1 || peerReceives < 2) {
            violation("HELLO with maxMessageSize " + peerMax + ", depth " + peerDepth + ", " + peerReceives + " receive buffers");
            return false;
        }
        synchronized (this) {
            if (state != (accepted() ? State.CONNECTING : State.HANDSHAKE)) {
                violation("HELLO in state " + state);
                return false;
            }
            agreeMaxMessageSize(peerMax);
            credits += peerReceives - 1; // our own HELLO took one of the peer's buffers
            state = State.OPEN;
            heard();
            holdForAccept = accepted();
        }
        if (!accepted()) {
            LOG.debug("{} open (peer depth {}, {} receive buffers)", this, peerDepth, peerReceives);
            connectDone();
            return true;
        }
        ChannelHandler chosen = askAcceptor(node.acceptor());
        if (chosen == null) {
            terminate(rejectedError(), null, Status.FLUSHED);
            return false;
        }
        handler(chosen);
        synchronized (this) {
            holdForAccept = false;
            if (state != State.OPEN) {
                return false;
            }
            // READY: the answer goes ahead of anything the acceptor already sent.
            if (!postHello()) {
                return false;
            }
            drainWaiting();
        }
        return true;
    }

    private void failed(int status, String what, Op culprit) {
        boolean closed;
        boolean connecting;
        synchronized (this) {
            closed = state == State.CLOSED;
            connecting = state == State.CONNECTING && !accepted();
        }
        if (connecting && status == WcStatus.WR_FLUSH_ERR && culprit == null) {
            // The receives posted for a connect that failed: librdmacm moved the QP to the error state on REJECTED
            // (or CONNECT_ERROR, UNREACHABLE), whose event the CM thread may not have handled yet. That event says
            // why the connect failed (refused or not) and closes the channel.
            return;
        }
        if (closed) {
            if (culprit != null) {
                // Its own completion says why it failed: a refused READ whose channel the peer's disconnect
                // closed meanwhile (its op was already out of the table) is still refused, not flushed.
                culprit.future.completeExceptionally(status == WcStatus.WR_FLUSH_ERR ? closedError()
                        : new TransportException(WcStatus.toStatus(status), WcStatus.name(status) + " on a " + what
                                + " of " + this + " (closed meanwhile)"));
            }
            return; // the flush of a channel already closed
        }
        if (status == WcStatus.WR_FLUSH_ERR) {
            // Nothing of ours failed, yet the QP is in the error state: librdmacm moved it there on
            // REJECTED or DISCONNECTED (whose event the CM thread may not have handled yet), or the
            // device did. The connection is gone, as when the peer stops answering.
            terminate(new TransportException(Status.RETRY_EXCEEDED, "the connection to " + remoteAddress() + " broke ("
                    + WcStatus.name(status) + " on a " + what + " of " + this + ")"), culprit, Status.FLUSHED);
            return;
        }
        Status mapped = WcStatus.toStatus(status);
        terminate(new TransportException(mapped, WcStatus.name(status) + " on a " + what + " of " + this), culprit,
                Status.FLUSHED);
    }

    private void violation(String what) {
        terminate(protocolViolation(what), null, Status.BAD_RESPONSE);
    }

    // ================================================================ failure and close

    /**
     * The peer disconnected (CM thread). With operations outstanding the error completion that
     * may have caused it (a READ the peer refused makes it break its end and disconnect) can
     * still be on its way to the completion thread: it gets a short grace to fail the channel
     * with the precise status; then, or at once with nothing outstanding, RETRY_EXCEEDED.
     */
    void onDisconnected(long now) {
        disconnectSeen = true;
        boolean quiet;
        synchronized (this) {
            quiet = state != State.OPEN || outstanding == 0;
        }
        if (quiet) {
            peerGone();
        } else if (disconnectDeadline == 0) {
            long grace = Math.max(TimeUnit.MILLISECONDS.toNanos(200),
                    Math.min(node.options.operationTimeout().toNanos() / 4, TimeUnit.SECONDS.toNanos(1)));
            disconnectDeadline = now + grace;
        }
    }

    private void peerGone() {
        terminate(new TransportException(Status.RETRY_EXCEEDED, "peer " + remoteAddress() + " disconnected"), null,
                Status.RETRY_EXCEEDED);
    }

    /** Called by the CM thread every tick: disconnect grace, handshake deadline and operation timeout. */
    void checkTimeout(long now) {
        State s;
        int out;
        synchronized (this) {
            s = state;
            out = outstanding;
        }
        if (disconnectDeadline != 0 && s != State.CLOSED && now - disconnectDeadline > 0) {
            peerGone();
            return;
        }
        TransportException timeout = timeoutError(now, s, out);
        if (timeout != null) {
            terminate(timeout, null, Status.RETRY_EXCEEDED);
        }
    }

    /**
     * Closes the channel once: moves the QP to the error state (rdma_disconnect, which also tells
     * the peer), fails {@code culprit} with {@code cause} and every other outstanding operation
     * with {@code others}, and tells the handler. A null cause is an orderly local close. The
     * QP and id are destroyed later by the CM thread, once the peer acknowledged the disconnect.
     */
    void terminate(TransportException cause, Op culprit, Status others) {
        revokeWindows();
        List<Op> failing = new ArrayList<>();
        synchronized (this) {
            if (state == State.CLOSED) {
                if (culprit != null && culprit.future != null) {
                    culprit.future.completeExceptionally(cause != null ? cause : closedError());
                }
                return;
            }
            state = State.CLOSED;
            for (int i = 0; i < ops.length; i++) {
                Op op = ops[i];
                if (op != null && op != CONTROL) {
                    failing.add(op);
                }
                ops[i] = null;
            }
            failing.addAll(waiting);
            waiting.clear();
            failing.addAll(bindsWaiting);
            bindsWaiting.clear();
            for (Op op : failing) {
                if (op.slot != null) {
                    orphans.add(op.slot);
                }
            }
            outstanding = 0;
            if (cmId != null && qp != null) {
                try {
                    cmId.disconnect();
                } catch (IOException | RuntimeException e) {
                    LOG.trace("rdma_disconnect of {} failed", this, e);
                }
            }
        }
        node.closing(this);
        settleClosed(cause, others, (culpritError, othersError) -> {
            if (culprit != null && culprit.future != null) {
                culprit.future.completeExceptionally(culpritError);
            }
            for (Op op : failing) {
                op.future.completeExceptionally(othersError);
            }
            return failing.size() + (culprit != null ? 1 : 0);
        });
    }

    /**
     * Deallocates the windows bound on this QP while it is still connected: they serve this QP only,
     * so they are dead with it anyway. Outside this lock (a window is locked before its channel).
     */
    private void revokeWindows() {
        List<VerbsWindow> bound;
        synchronized (this) {
            if (windows.isEmpty()) {
                return;
            }
            bound = new ArrayList<>(windows);
            windows.clear();
        }
        for (VerbsWindow window : bound) {
            window.revoke();
        }
    }

    /**
     * Frees the verbs resources (CM thread, or the closing thread once the node's threads are
     * gone). No post can race: every post checks the state under this lock first.
     */
    void destroy() {
        List<SendPool.Slot> release;
        synchronized (this) {
            if (destroyed) {
                return;
            }
            destroyed = true;
            state = State.CLOSED;
            if (sendCall != null) {
                sendCall.free();
            }
            if (receives != null) {
                for (SVCPostRecv receive : receives) {
                    if (receive != null) {
                        receive.free();
                    }
                }
            }
            try {
                if (qp != null) {
                    cmId.destroyQP();
                }
            } catch (IOException | RuntimeException e) {
                LOG.debug("rdma_destroy_qp of {} failed: {}", this, e.toString());
            }
            try {
                if (cmId != null) {
                    cmId.destroyId();
                }
            } catch (IOException | RuntimeException e) {
                LOG.debug("rdma_destroy_id of {} failed: {}", this, e.toString());
            }
            if (slabMr != null) {
                try {
                    Verbs.deregister(slabMr);
                } catch (IOException | RuntimeException e) {
                    LOG.debug("ibv_dereg_mr of the receive buffers of {} failed: {}", this, e.toString());
                }
            }
            release = new ArrayList<>(orphans);
            orphans.clear();
        }
        for (SendPool.Slot slot : release) {
            sendPool().release(slot);
        }
        VerbsDomain joined = domain;
        if (joined != null) {
            joined.leave(); // after the QP and its buffers: the PD may go now
        }
    }

    /** Whether a peer opened this channel to this node (CM thread). */
    boolean isAccepted() {
        return accepted();
    }

    synchronized boolean hasQp() {
        return qp != null;
    }

    /** Closes at once on the calling thread: outstanding operations end FLUSHED before this returns. */
    @Override
    public void close() {
        terminate(null, null, Status.FLUSHED);
    }

    // ================================================================ accessors

    @Override
    public int outstanding() {
        return outstanding;
    }

    @Override
    public synchronized boolean isOpen() {
        return state == State.OPEN;
    }

    synchronized State state() {
        return state;
    }

    @Override
    public String toString() {
        return "VerbsChannel[" + node.name() + " #" + id + (accepted() ? " <- " : " -> ") + remoteAddress() + "]";
    }
}

package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.AbstractChannel;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.LocalAccess;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One connection. Any thread may post; all socket I/O, parsing and completions happen on the
 * thread of its lane's {@link TcpLoop}. Posted operations wait in {@link #pending} until their completion: an
 * operation completes exactly once, by whoever removes it from there.
 */
final class TcpChannel extends AbstractChannel {
    private static final Logger LOG = LoggerFactory.getLogger(TcpChannel.class);
    private static final int MAX_GATHER = 64;
    private static final int INBOX_BYTES = 16 << 10;

    /** A posted READ or SEND; {@code destination} is where a READ's payload lands. */
    private record Op(long id, CompletableFuture<Void> future, ByteBuffer destination) {
    }

    /** What a frame is, for the bookkeeping done once it is written. */
    private enum Kind { CONTROL, READ_REQUEST, READ_RESPONSE, SEND }

    private static final ByteBuffer NOTHING = ByteBuffer.allocate(0);

    /**
     * Bytes to write; a SEND completes when written, a response releases back-pressure. A READ
     * response's payload is a view of its {@code source} region, pinned during each write.
     */
    private static final class Frame {
        final ByteBuffer[] buffers;
        final Kind kind;
        final long sendId;
        TcpRegion source; // loop thread only once enqueued
        boolean checksummed; // loop thread only: a READ response's CRC32C is in its header

        Frame(ByteBuffer[] buffers, Kind kind, long sendId) {
            this(buffers, kind, sendId, null);
        }

        Frame(ByteBuffer[] buffers, Kind kind, long sendId, TcpRegion source) {
            this.buffers = buffers;
            this.kind = kind;
            this.sendId = sendId;
            this.source = source;
        }

        boolean started() {
            return buffers[0].position() > 0;
        }

        boolean sent() {
            for (ByteBuffer b : buffers) {
                if (b.hasRemaining()) {
                    return false;
                }
            }
            return true;
        }

        /** A response not started whose region was revoked becomes what a READ of a revoked rkey gets. */
        void refuse() {
            long id = buffers[0].getLong(1);
            buffers[0] = errorResponse(id, Status.REMOTE_ACCESS_ERROR);
            buffers[1] = NOTHING;
            source = null;
        }
    }

    private final TcpNode node;
    /** Where the channel's I/O runs; an accepted channel moves once, to its connector's lane. */
    private volatile TcpLoop loop;
    private Lane lane; // loop thread only
    private boolean moving; // loop thread only: set while an accepted channel changes loops
    private final SocketChannel socket;
    private final Map<Long, Op> pending = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong();
    private final AtomicInteger outstanding = new AtomicInteger();
    private final ConcurrentLinkedDeque<Frame> outbound = new ConcurrentLinkedDeque<>();
    private final AtomicBoolean flushScheduled = new AtomicBoolean();
    private final int responseLimit;
    private volatile State state;
    private volatile SelectionKey key;
    // Inbound parser state: loop thread only.
    // Unparsed bytes are inbox[start, end). While a READ of ours is on the wire, the inbox takes
    // one header at a time, so a READ payload never passes through it (see onReadable).
    private final ByteBuffer inbox = ByteBuffer.allocateDirect(INBOX_BYTES);
    private int start;
    private int end;
    private final ByteBuffer[] scatter = new ByteBuffer[2];
    private ByteBuffer payload;
    private Op payloadOp;
    // A READ payload's CRC32C as it arrives (over payloadSeen, a view of what has arrived so far)
    // and the one its responder sent in the header.
    private final CRC32C payloadCrc = new CRC32C();
    private ByteBuffer payloadSeen;
    private int payloadExpectedCrc;
    private int readsOnWire;
    private ByteBuffer messageBuffer;
    private int queuedResponses;
    private boolean readPaused;
    // When the peer last took bytes of ours, or we had none for it: loop thread only.
    private long lastDrained = System.nanoTime();
    /** Keys bound to this channel (guarded by this): unbound when it closes (TcpKey#channelClosed), to be bound again elsewhere. */
    private final java.util.Set<TcpKey> keys = new java.util.HashSet<>();

    TcpChannel(TcpNode node, TcpLoop loop, Lane lane, SocketChannel socket, int queueDepth, ChannelHandler handler,
               CompletableFuture<Channel> connected) {
        super(node.options, queueDepth, handler, connected, null);
        this.node = node;
        this.loop = loop;
        this.lane = lane;
        this.socket = socket;
        // A peer that does not read its responses stops being read from, rather than growing our queue.
        this.responseLimit = 2 * Math.max(64, node.options.acceptQueueDepth());
        this.state = accepted() ? State.HANDSHAKE : State.CONNECTING;
    }

    // ---------------------------------------------------------------- posting (any thread)

    @Override
    public CompletableFuture<Void> read(long remoteAddress, int rkey, int length, MemoryRegion local, int localOffset) {
        checkReadLength(length);
        CompletableFuture<Void> future = new CompletableFuture<>();
        if (!reserveSlot(future)) {
            return future;
        }
        long id = nextId.incrementAndGet();
        String protection = checkLocal(local, localOffset, length);
        if (protection != null) {
            // As on verbs: the work request completes in error and the queue pair breaks.
            pending.put(id, new Op(id, future, null));
            loop.execute(() -> terminate(new TransportException(Status.LOCAL_PROTECTION_ERROR, protection), id, Status.FLUSHED));
            return future;
        }
        Op op = new Op(id, future, ((TcpRegion) local).slice(localOffset, length));
        if (!track(op)) {
            return future;
        }
        ByteBuffer request = ByteBuffer.allocate(Wire.HEADER_BYTES)
                .put(Wire.READ_REQ).putLong(id).putLong(remoteAddress).putInt(rkey).putInt(length).flip();
        enqueue(new Frame(new ByteBuffer[] {request}, Kind.READ_REQUEST, 0));
        return future;
    }

    @Override
    public CompletableFuture<Void> send(ByteBuffer message) {
        int length = message.remaining();
        checkMessageLength(length);
        CompletableFuture<Void> future = new CompletableFuture<>();
        if (!reserveSlot(future)) {
            return future;
        }
        long id = nextId.incrementAndGet();
        // Copied at post time: the caller may reuse its buffer as soon as send returns.
        ByteBuffer frame = ByteBuffer.allocate(Wire.HEADER_BYTES + length)
                .put(Wire.SEND).putLong(0).putLong(0).putInt(0).putInt(length).put(message.duplicate()).flip();
        if (track(new Op(id, future, null))) {
            enqueue(new Frame(new ByteBuffer[] {frame}, Kind.SEND, id));
        }
        return future;
    }

    private boolean reserveSlot(CompletableFuture<Void> future) {
        if (state != State.OPEN) {
            future.completeExceptionally(closedError());
            return false;
        }
        int now;
        do {
            now = outstanding.get();
            if (now >= queueDepth()) {
                future.completeExceptionally(queueFullError());
                return false;
            }
        } while (!outstanding.compareAndSet(now, now + 1));
        if (now == 0) {
            progress(); // the timeout counts from the first outstanding operation
        }
        return true;
    }

    /** Makes the op visible to completion; false (and the op failed) if the channel closed meanwhile. */
    private boolean track(Op op) {
        pending.put(op.id, op);
        if (state != State.OPEN) {
            finish(op.id, closedError());
            return false;
        }
        return true;
    }

    private String checkLocal(MemoryRegion local, int offset, int length) {
        return LocalAccess.problem(local, local instanceof TcpRegion region && region.node() == node, offset, length);
    }

    private void enqueue(Frame frame) {
        outbound.add(frame);
        if (flushScheduled.compareAndSet(false, true)) {
            loop.scheduleFlush(this);
        }
    }

    /** Completes the op with this id (success when {@code error} is null), exactly once. */
    private void finish(long id, TransportException error) {
        Op op = pending.remove(id);
        if (op == null) {
            return;
        }
        outstanding.decrementAndGet();
        if (error == null) {
            op.future.complete(null);
        } else {
            op.future.completeExceptionally(error);
        }
    }

    // ---------------------------------------------------------------- connection set-up (loop thread)

    void startConnect(InetSocketAddress peer) throws IOException {
        remote(peer);
        key = socket.register(loop.selector(), SelectionKey.OP_CONNECT, this);
        if (socket.connect(peer)) {
            onConnectable();
        }
    }

    void startAccepted() throws IOException {
        remote(socket.getRemoteAddress());
        key = socket.register(loop.selector(), SelectionKey.OP_READ, this);
    }

    void onConnectable() {
        try {
            if (!socket.finishConnect()) {
                return;
            }
        } catch (IOException e) {
            Status status = refused(e) ? Status.CONNECTION_REFUSED : Status.RETRY_EXCEEDED;
            terminate(new TransportException(status, "cannot connect to " + remoteAddress() + ": " + e, e), 0, status);
            return;
        }
        state = State.HANDSHAKE;
        interest(SelectionKey.OP_CONNECT, false);
        interest(SelectionKey.OP_READ, true);
        outbound.addFirst(new Frame(new ByteBuffer[] {hello()}, Kind.CONTROL, 0));
        flush();
    }

    /** Whether a failed connect was refused (RST: nothing listens there), as opposed to timed out or unroutable. */
    private static boolean refused(IOException e) {
        // A ConnectException is also thrown for a connect that timed out: the OS's message tells them apart.
        return e instanceof java.net.ConnectException && String.valueOf(e.getMessage()).contains("refused");
    }

    private ByteBuffer hello() {
        return ByteBuffer.allocate(Wire.HEADER_BYTES).put(Wire.HELLO).putLong(Wire.code(lane))
                .putLong(Wire.MAGIC << 32 | Wire.VERSION).putInt(node.options.maxMessageSize()).putInt(queueDepth()).flip();
    }

    private void onHello(long laneCode, long magicVersion, int peerMaxMessage) {
        if (magicVersion != (Wire.MAGIC << 32 | Wire.VERSION)) {
            violation("not an RDMA tcp peer, or another protocol version (hello 0x" + Long.toHexString(magicVersion) + ")");
            return;
        }
        if (peerMaxMessage < 64) {
            violation("peer announced a maximum message size of " + peerMaxMessage);
            return;
        }
        Lane wanted = Wire.lane(laneCode);
        if (wanted == null) {
            violation("HELLO for an unknown lane " + laneCode);
            return;
        }
        if (accepted() && wanted != lane) {
            moveTo(wanted, () -> opened(peerMaxMessage));
            return;
        }
        opened(peerMaxMessage);
    }

    /**
     * Hands the channel to the loop of {@code wanted} (its connector's lane) and continues there:
     * this loop lets go of the socket first, so only one thread ever does its I/O.
     */
    private void moveTo(Lane wanted, Runnable then) {
        moving = true;
        key.cancel();
        loop.removed(this);
        TcpLoop target = node.loop(wanted);
        target.execute(() -> {
            try {
                key = socket.register(target.selector(), SelectionKey.OP_READ, this);
            } catch (IOException | RuntimeException e) { // closed meanwhile, or the node is closing
                terminate(new TransportException(Status.FLUSHED, "cannot move the channel from " + remoteAddress()
                        + " to its lane: " + e, e), 0, Status.FLUSHED);
                return;
            }
            loop = target;
            lane = wanted;
            moving = false;
            target.added(this);
            if (state == State.CLOSED) {
                key.cancel();
                target.removed(this);
                return;
            }
            then.run();
            onReadable(); // bytes that came with the HELLO wait in the inbox
        });
    }

    private void opened(int peerMaxMessage) {
        agreeMaxMessageSize(peerMaxMessage);
        state = State.OPEN;
        if (!accepted()) {
            connectDone();
            return;
        }
        ChannelHandler chosen = askAcceptor(node.acceptor());
        if (chosen == null) {
            terminate(rejectedError(), 0, Status.FLUSHED);
            return;
        }
        handler(chosen);
        // The answer goes ahead of anything the acceptor already sent: the peer's channel opens on it.
        outbound.addFirst(new Frame(new ByteBuffer[] {hello()}, Kind.CONTROL, 0));
        flush();
    }

    // ---------------------------------------------------------------- inbound (loop thread)

    /**
     * Reads what the socket has. With none of our READs on the wire, no READ payload can arrive,
     * so the inbox takes many small frames (requests, messages) per system call. With READs on
     * the wire, it takes exactly one header at a time and a READ payload is read straight into
     * its destination together with the next header (one scattering read per response).
     */
    void onReadable() {
        try {
            int reads = 0;
            long bytesThisTurn = 0;
            while (!readPaused && !moving && state != State.CLOSED && state != State.CONNECTING) {
                if (payload == null && end - start >= Wire.HEADER_BYTES) {
                    int at = start;
                    start += Wire.HEADER_BYTES;
                    onHeader(inbox.get(at), inbox.getLong(at + 1), inbox.getLong(at + 9), inbox.getInt(at + 17),
                            inbox.getInt(at + 21));
                    continue;
                }
                if (reads++ == 64 || bytesThisTurn >= loop.turnBytes()) {
                    break; // fairness to other channels; the selector calls again while bytes wait
                }
                ByteBuffer window = inboxWindow();
                long n;
                if (payload == null) {
                    n = socket.read(window);
                } else {
                    // At most a turn's worth of payload per call, so one bulk READ cannot hog the thread.
                    int limit = payload.limit();
                    payload.limit((int) Math.min(limit, payload.position() + loop.turnBytes()));
                    scatter[0] = payload;
                    scatter[1] = payload.limit() == limit ? window : window.limit(window.position());
                    try {
                        n = socket.read(scatter);
                    } finally {
                        payload.limit(limit);
                    }
                    if (payloadOp != null) {
                        // checksummed while the bytes are still in cache
                        payloadCrc.update(payloadSeen.limit(payload.position()));
                    }
                }
                end = window.position();
                if (n < 0) {
                    terminate(new TransportException(Status.RETRY_EXCEEDED, "peer " + remoteAddress() + " closed the connection"), 0,
                            Status.RETRY_EXCEEDED);
                    return;
                }
                if (n == 0) {
                    break;
                }
                bytesThisTurn += n;
                loop.moved(n);
                heard();
                if (payload != null && !payload.hasRemaining()) {
                    onPayload();
                }
            }
            updateReadInterest();
        } catch (IOException e) {
            terminate(new TransportException(Status.RETRY_EXCEEDED, "connection to " + remoteAddress() + " lost: " + e, e), 0,
                    Status.RETRY_EXCEEDED);
        }
    }

    /** The free part of the inbox the next read may fill. */
    private ByteBuffer inboxWindow() {
        if (start == end) {
            start = end = 0;
        } else if (INBOX_BYTES - end < Wire.HEADER_BYTES) {
            inbox.limit(end).position(start);
            inbox.compact();
            end -= start;
            start = 0;
        }
        int room = readsOnWire > 0 ? Wire.HEADER_BYTES - (end - start) : INBOX_BYTES - end;
        return inbox.limit(end + room).position(end);
    }

    private void onHeader(byte type, long id, long a, int b, int c) {
        if (state == State.HANDSHAKE) {
            if (type == Wire.HELLO) {
                onHello(id, a, b);
            } else {
                violation("frame type " + type + " before the handshake");
            }
            return;
        }
        switch (type) {
            case Wire.READ_REQ -> serveRead(id, a, b, c);
            case Wire.READ_RESP -> onReadResponse(id, (int) a, b, c);
            case Wire.SEND -> {
                if (c < 0 || c > node.options.maxMessageSize()) {
                    violation("message of " + c + " bytes exceeds the maximum of " + node.options.maxMessageSize());
                    return;
                }
                if (messageBuffer == null) {
                    messageBuffer = ByteBuffer.allocate(node.options.maxMessageSize());
                }
                messageBuffer.clear().limit(c);
                int buffered = Math.min(c, end - start);
                messageBuffer.put(inbox.slice(start, buffered));
                start += buffered;
                payload = messageBuffer;
                payloadOp = null;
                if (!messageBuffer.hasRemaining()) {
                    onPayload();
                }
            }
            default -> violation("unknown frame type " + type);
        }
    }

    /** Keeps {@code key} bound here until this channel closes; false (nothing kept) if it is closed already. */
    synchronized boolean bound(TcpKey key) {
        if (state == State.CLOSED) {
            return false;
        }
        keys.add(key);
        return true;
    }

    synchronized void unbind(TcpKey key) {
        keys.remove(key);
    }

    TcpNode node() {
        return node;
    }

    private void serveRead(long id, long address, int rkey, int length) {
        Status status = Status.SUCCESS;
        TcpRegion region = null;
        int offset = -1;
        if (length < 1 || length > MAX_READ_BYTES) {
            status = Status.REMOTE_INVALID_REQUEST;
        } else {
            TcpKey key = node.key(rkey);
            String refusal = key == null ? null : key.refusal(this, address, length);
            region = key != null ? key.region() : node.region(rkey);
            offset = region == null ? -1 : region.offsetOf(address, length);
            if (refusal != null) {
                status = Status.REMOTE_ACCESS_ERROR;
                LOG.debug("{}: refused READ from {} of {} bytes at 0x{} with {}: {}", node.name(), remoteAddress(), length,
                        Long.toHexString(address), key, refusal);
            } else if (!permitsRemoteRead(rkey)) {
                status = Status.REMOTE_ACCESS_ERROR;
                LOG.debug("{}: refused READ from {} of rkey {}: not permitted on this channel", node.name(), remoteAddress(),
                        Integer.toHexString(rkey));
            } else if (offset < 0 || !region.isValid() || !region.access().contains(Access.REMOTE_READ)) {
                status = Status.REMOTE_ACCESS_ERROR;
                LOG.debug("{}: refused READ from {} of {} bytes at 0x{} rkey {}: {}", node.name(), remoteAddress(), length,
                        Long.toHexString(address), Integer.toHexString(rkey), region == null ? "no such rkey" : region);
            }
        }
        queuedResponses++;
        if (status != Status.SUCCESS) {
            enqueue(new Frame(new ByteBuffer[] {errorResponse(id, status)}, Kind.READ_RESPONSE, 0));
        } else {
            // A view of the region, not a copy: flush pins the region for each write and sends none
            // of its bytes once it is revoked.
            ByteBuffer response = ByteBuffer.allocate(Wire.HEADER_BYTES).put(Wire.READ_RESP).putLong(id).putLong(0)
                    .putInt(Wire.code(Status.SUCCESS)).putInt(length).flip();
            enqueue(new Frame(new ByteBuffer[] {response, region.slice(offset, length)}, Kind.READ_RESPONSE, 0, region));
        }
        if (queuedResponses >= responseLimit) {
            readPaused = true;
        }
    }

    /** What the channel's handler says; a handler that throws permits nothing. */
    private boolean permitsRemoteRead(int rkey) {
        try {
            return handler().permitsRemoteRead(this, rkey);
        } catch (RuntimeException e) {
            LOG.error("{}: READ permission check of {} failed; refusing the READ", node.name(), this, e);
            return false;
        }
    }

    private static ByteBuffer errorResponse(long id, Status status) {
        return ByteBuffer.allocate(Wire.HEADER_BYTES).put(Wire.READ_RESP).putLong(id).putLong(0).putInt(Wire.code(status))
                .putInt(0).flip();
    }

    private void onReadResponse(long id, int crc32c, int code, int length) {
        Op op = pending.get(id);
        Status status = Wire.status(code);
        if (op == null || op.destination == null || readsOnWire == 0 || start != end) {
            violation("READ response for unknown request " + id);
            return;
        }
        if (status == null) {
            violation("READ response with unknown status " + code);
            return;
        }
        readsOnWire--;
        if (status != Status.SUCCESS) {
            if (length != 0) {
                violation("error READ response carrying " + length + " bytes");
                return;
            }
            terminate(new TransportException(status, "peer " + remoteAddress() + " refused READ " + id), id, Status.FLUSHED);
        } else if (length != op.destination.capacity()) {
            violation("READ response of " + length + " bytes for a READ of " + op.destination.capacity());
        } else {
            payload = op.destination.duplicate().clear();
            payloadOp = op;
            payloadSeen = op.destination.duplicate().clear().limit(0);
            payloadCrc.reset();
            payloadExpectedCrc = crc32c;
        }
    }

    private void onPayload() {
        ByteBuffer done = payload;
        Op op = payloadOp;
        payload = null;
        payloadOp = null;
        if (op != null) {
            int crc32c = (int) payloadCrc.getValue();
            payloadSeen = null;
            if (crc32c != payloadExpectedCrc) {
                // What RoCE's ICRC is to a verbs READ: the bytes changed on the way (above TCP's own
                // checksum: a relay, a NIC, memory). The READ fails, never delivers; the channel goes,
                // as a queue pair does on a completion error, and the caller re-issues or falls back.
                terminate(new TransportException(Status.BAD_RESPONSE, "READ " + op.id + " from " + remoteAddress()
                        + ": payload CRC32C 0x" + Integer.toHexString(crc32c) + " does not match the 0x"
                        + Integer.toHexString(payloadExpectedCrc) + " its responder sent (corrupted on the way)"), op.id,
                        Status.FLUSHED);
                return;
            }
            finish(op.id, null);
            return;
        }
        done.flip();
        try {
            handler().onMessage(this, done);
        } catch (RuntimeException e) {
            LOG.error("{}: message handler of {} failed", node.name(), this, e);
        } catch (Throwable e) { // an Error: this channel's state is unknown now, so it goes; the node stays
            LOG.error("{}: message handler of {} failed; closing that channel", node.name(), this, e);
            terminate(new TransportException(Status.FLUSHED, "message handler failed: " + e, e), 0, Status.FLUSHED);
        }
    }

    private void violation(String what) {
        terminate(protocolViolation(what), 0, Status.BAD_RESPONSE);
    }

    private void updateReadInterest() {
        if (state != State.CONNECTING && !moving) {
            interest(SelectionKey.OP_READ, !readPaused);
        }
    }

    /**
     * Turns interest in {@code op} on or off. The key may be cancelled at any moment by a close
     * on another thread; then there is nothing left to do.
     */
    private void interest(int op, boolean on) {
        try {
            if (key != null) {
                int ops = key.interestOps();
                int wanted = on ? ops | op : ops & ~op;
                if (wanted != ops) {
                    key.interestOps(wanted);
                }
            }
        } catch (CancelledKeyException e) {
            // closed concurrently: terminate() settles everything
        }
    }

    // ---------------------------------------------------------------- outbound (loop thread)

    void flush() {
        flushScheduled.set(false);
        if (state == State.CLOSED || state == State.CONNECTING || key == null) {
            return;
        }
        List<TcpRegion> pinned = new ArrayList<>();
        try {
            // One write of at most a turn's bytes: a channel with bulk to send takes its turn like the
            // others, so a small control message on another channel never waits behind megabytes.
            List<ByteBuffer> gather = new ArrayList<>();
            long budget = loop.turnBytes();
            ByteBuffer cut = null;
            int cutLimit = 0;
            for (Iterator<Frame> it = outbound.iterator(); it.hasNext() && gather.size() < MAX_GATHER && budget > 0; ) {
                Frame frame = it.next();
                if (frame.source != null && !frame.source.pinForWrite()) {
                    // Revoked: none of its bytes may go out. Not started, the response becomes what a
                    // READ after revocation gets; partly sent, it cannot be taken back: the channel closes.
                    if (frame.started()) {
                        unpin(pinned); // before the close, whose handler may deregister what we pinned
                        closeRevoked(frame);
                        return;
                    }
                    LOG.debug("{}: region {} revoked before a queued READ response from it went out; refusing that READ",
                            this, frame.source);
                    frame.refuse();
                } else if (frame.source != null) {
                    pinned.add(frame.source);
                    if (!frame.checksummed) {
                        // under the pin, before the header goes out: the CRC32C of exactly the bytes sent
                        CRC32C crc = new CRC32C();
                        crc.update(frame.buffers[1].duplicate());
                        frame.buffers[0].putLong(9, crc.getValue());
                        frame.checksummed = true;
                    }
                }
                for (ByteBuffer b : frame.buffers) {
                    if (budget <= 0) {
                        break;
                    }
                    if (b.remaining() > budget) {
                        cut = b; // written in part this turn: the rest goes next turn
                        cutLimit = b.limit();
                        b.limit(b.position() + (int) budget);
                    }
                    budget -= b.remaining();
                    gather.add(b);
                }
            }
            if (!gather.isEmpty()) {
                long written;
                try {
                    written = socket.write(gather.toArray(new ByteBuffer[0]));
                } finally {
                    if (cut != null) {
                        cut.limit(cutLimit);
                    }
                    unpin(pinned);
                }
                if (written > 0) {
                    loop.moved(written);
                    progress();
                    lastDrained = System.nanoTime();
                }
                for (Frame head; (head = outbound.peek()) != null && head.sent(); ) {
                    outbound.poll();
                    written(head);
                }
            }
            interest(SelectionKey.OP_WRITE, !outbound.isEmpty());
        } catch (IOException e) {
            terminate(new TransportException(Status.RETRY_EXCEEDED, "connection to " + remoteAddress() + " lost: " + e, e), 0,
                    Status.RETRY_EXCEEDED);
        } finally {
            unpin(pinned);
        }
    }

    private static void unpin(List<TcpRegion> pinned) {
        pinned.forEach(TcpRegion::unpin);
        pinned.clear();
    }

    private void closeRevoked(Frame frame) {
        String why = "region " + frame.source + " was revoked while a READ response from it was partly sent to "
                + remoteAddress();
        LOG.info("{}: {}; closing the channel", this, why);
        terminate(new TransportException(Status.REMOTE_ACCESS_ERROR, why), 0, Status.FLUSHED);
    }

    private void written(Frame frame) {
        switch (frame.kind) {
            case SEND -> finish(frame.sendId, null);
            case READ_REQUEST -> readsOnWire++;
            case READ_RESPONSE -> {
                if (--queuedResponses < responseLimit / 2 && readPaused) {
                    readPaused = false;
                    onReadable(); // a header may already wait in the inbox
                }
            }
            case CONTROL -> { }
        }
    }

    // ---------------------------------------------------------------- failure and close

    /**
     * Ends the channel when our operations see no progress (see {@link AbstractChannel}), and when
     * the peer took none of the bytes waiting for it (READ responses included) for the operation
     * timeout: a reader that stops draining must not keep responses, and the regions they come
     * from, queued forever.
     */
    void checkTimeout(long now) {
        TransportException timeout = timeoutError(now, state, outstanding.get());
        if (timeout == null && state == State.OPEN) {
            if (outbound.isEmpty()) {
                lastDrained = now;
            } else if (now - lastDrained > node.options.operationTimeout().toNanos()) {
                timeout = new TransportException(Status.RETRY_EXCEEDED, "peer " + remoteAddress() + " took no bytes for "
                        + TimeUnit.NANOSECONDS.toMillis(now - lastDrained) + " ms with " + outbound.size() + " frames ("
                        + queuedResponses + " READ responses) waiting for it (operationTimeout)");
            }
        }
        if (timeout != null) {
            terminate(timeout, 0, Status.RETRY_EXCEEDED);
            return;
        }
        TransportException idle = outbound.isEmpty() ? idleError(now, state, outstanding.get()) : null;
        if (idle != null) {
            terminate(idle, 0, Status.FLUSHED);
        }
    }

    /**
     * Closes the channel once: the op {@code culprit} (0 for none) fails with {@code cause},
     * every other outstanding op with {@code others}, and the handler hears {@code cause}.
     * A null cause is an orderly local close: ops end FLUSHED and the handler hears null.
     */
    void terminate(TransportException cause, long culprit, Status others) {
        List<TcpKey> bound;
        synchronized (this) {
            if (state == State.CLOSED) {
                return;
            }
            state = State.CLOSED;
            bound = List.copyOf(keys);
            keys.clear();
        }
        bound.forEach(k -> k.channelClosed(this));
        if (key != null) {
            key.cancel();
        }
        TcpNode.closeQuietly(socket);
        loop.removed(this);
        settleClosed(cause, others, (culpritError, othersError) -> {
            int failed = pending.size();
            if (culprit != 0) {
                finish(culprit, culpritError);
            }
            for (Long id : List.copyOf(pending.keySet())) {
                finish(id, othersError);
            }
            outbound.clear();
            return failed;
        });
    }

    /** Closes at once on the calling thread: outstanding ops end FLUSHED before this returns. */
    @Override
    public void close() {
        terminate(null, 0, Status.FLUSHED);
    }

    // ---------------------------------------------------------------- accessors

    @Override
    public int outstanding() {
        return outstanding.get();
    }

    @Override
    public boolean isOpen() {
        return state == State.OPEN;
    }

    @Override
    public String toString() {
        return "TcpChannel[" + node.name() + " <-> " + remoteAddress() + "]";
    }
}

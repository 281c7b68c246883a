package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvContext;
import com.ibm.disni.verbs.RdmaCm;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaEventChannel;
import io.rdmaplane.rdma.provider.Admission;
import io.rdmaplane.rdma.provider.ChannelAcceptor;
import io.rdmaplane.rdma.provider.KeyDomain;
import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A verbs node's CM thread, the one owner of its RDMA-CM event channel: DiSNI's event channel
 * keeps its ids in a plain map, so this one thread creates, binds, connects, accepts and
 * destroys every id. Each turn it runs the queued CM tasks (connect, listen, closing), waits
 * for one CM event for at most a tick, and once per tick checks the channels' timeouts and
 * destroys the QPs and ids of closed channels whose peer acknowledged the disconnect (or whose
 * grace ran out). It stops once the node is closed and every channel is settled.
 */
final class CmEventLoop {
    private static final Logger LOG = LoggerFactory.getLogger(CmEventLoop.class);
    /** How long a closed channel waits for the peer's disconnect acknowledgement before its QP goes. */
    private static final long DISCONNECT_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(1000);
    /** Unreadable connect requests are logged at most this often: a foreign or hostile peer would otherwise flood the log. */
    private static final long UNCHECKED_LOG_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(10);
    /** Tests only: called on the loop with each accepted id right after rdma_accept, before anything else. */
    static volatile Consumer<RdmaCmId> acceptedForTest;

    private final VerbsNode node;
    private final RdmaEventChannel events;
    /** How late a queued CM task (connect, listen) may start, and the timeout check period. */
    private final int tickMillis;
    private final Thread thread;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    // CM thread only (or the releasing thread once the CM thread has stopped)
    private final Map<RdmaCmId, VerbsChannel> byId = new IdentityHashMap<>();
    private final List<VerbsChannel> closing = new ArrayList<>();
    private RdmaCmId listenId;
    /** When the last unreadable connect request was logged, and how many were refused since without a line (loop thread only). */
    private long lastUncheckedLog = System.nanoTime() - UNCHECKED_LOG_INTERVAL_NANOS;
    private long uncheckedSinceLog;
    /** Set once the thread has stopped and the node releases its resources: tasks then run on the caller. */
    private volatile boolean released;

    CmEventLoop(VerbsNode node, RdmaEventChannel events, int tickMillis) {
        this.node = node;
        this.events = events;
        this.tickMillis = tickMillis;
        this.thread = new Thread(this::run, node.name() + "-cm");
        thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    Thread thread() {
        return thread;
    }

    // ================================================================ tasks (any thread)

    /** Runs a task on the CM thread (at once if called from it). */
    void execute(Runnable task) {
        if (Thread.currentThread() == thread) {
            task.run();
            return;
        }
        tasks.add(task);
        if (!thread.isAlive() && released) {
            runTasks(); // the thread is gone: settle the task here rather than lose it
        }
    }

    /** Runs a task on the CM thread after the current work, never inline (used under channel locks). */
    void later(Runnable task) {
        tasks.add(task);
        if (!thread.isAlive() && released) {
            runTasks();
        }
    }

    /** Runs {@code work} on the CM thread and waits (at most 30 s) for its result. */
    <T> T call(Callable<T> work) throws Exception {
        CompletableFuture<T> result = new CompletableFuture<>();
        execute(() -> {
            try {
                result.complete(work.call());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        return result.get(30, TimeUnit.SECONDS);
    }

    private void runTasks() {
        for (Runnable task; (task = tasks.poll()) != null; ) {
            try {
                task.run();
            } catch (Throwable e) { // an Error too: one task never stops the CM thread
                LOG.error("{}: CM task failed", node.name(), e);
            }
        }
    }

    // ================================================================ listen and connect (CM thread)

    /**
     * Binds a listening id to {@code bind} (CM thread).
     *
     * @return the address bound, with the port rdma_bind_addr chose for port 0
     */
    InetSocketAddress listen(InetSocketAddress bind) throws IOException {
        RdmaCmId id = events.createId(RdmaCm.RDMA_PS_TCP);
        if (id == null) {
            throw new IOException("rdma_create_id failed");
        }
        try {
            id.bindAddr(bind);
            id.listen(1024);
        } catch (IOException e) {
            id.destroyId();
            throw e;
        }
        listenId = id;
        InetSocketAddress bound = null;
        try {
            bound = (InetSocketAddress) id.getSource();
        } catch (IOException | RuntimeException e) {
            LOG.debug("rdma_get_local_addr failed", e);
        }
        if (bound == null || bound.getPort() == 0) {
            if (bind.getPort() == 0) {
                throw new IOException("cannot learn the port rdma_bind_addr chose");
            }
            bound = bind;
        }
        return bound;
    }

    /** Starts connecting a channel the node created: create an id, bind it, resolve the peer (CM thread). */
    void connect(VerbsChannel channel, InetSocketAddress peer) {
        if (node.isClosed()) {
            channel.terminate(new TransportException(Status.FLUSHED, node.name() + " is closed"), null, Status.FLUSHED);
            return;
        }
        if (channel.state() == VerbsChannel.State.CLOSED) {
            return;
        }
        try {
            RdmaCmId id = events.createId(RdmaCm.RDMA_PS_TCP);
            if (id == null) {
                throw new IOException("rdma_create_id failed");
            }
            channel.attach(id);
            byId.put(id, channel);
            InetAddress bind = node.options.bindAddress().getAddress();
            if (!bind.isAnyLocalAddress()) {
                id.bindAddr(new InetSocketAddress(bind, 0));
            }
            id.resolveAddr(null, peer, timeoutMillis());
        } catch (IOException | RuntimeException e) {
            channel.terminate(new TransportException(Status.RETRY_EXCEEDED, "cannot connect to " + peer + ": " + e, e), null,
                    Status.RETRY_EXCEEDED);
        }
    }

    private int timeoutMillis() {
        return (int) Math.max(100, Math.min(Integer.MAX_VALUE, node.options.operationTimeout().toMillis()));
    }

    // ================================================================ the loop (CM thread)

    private void run() {
        try {
            long nextCheck = 0;
            while (true) {
                runTasks();
                RdmaCmEvent event = null;
                try {
                    event = events.getCmEvent(tickMillis);
                } catch (IOException e) {
                    if (!node.isClosed()) {
                        LOG.warn("{}: rdma_get_cm_event failed: {}", node.name(), e.toString());
                    }
                }
                if (event != null) {
                    onCmEvent(event);
                }
                long now = System.nanoTime();
                if (now - nextCheck >= 0) {
                    nextCheck = now + TimeUnit.MILLISECONDS.toNanos(Math.max(1, tickMillis));
                    if (!node.isClosed()) {
                        for (VerbsChannel channel : node.channels()) {
                            channel.checkTimeout(now);
                        }
                    }
                    reap(now);
                }
                if (node.isClosed() && closing.isEmpty() && tasks.isEmpty() && allChannelsClosed()) {
                    return;
                }
            }
        } catch (Throwable t) {
            LOG.error("{}: CM thread failed; closing the node", node.name(), t);
            node.failed(t);
            node.markClosed();
        }
    }

    private boolean allChannelsClosed() {
        for (VerbsChannel channel : node.channels()) {
            if (channel.state() != VerbsChannel.State.CLOSED) {
                return false;
            }
        }
        return true;
    }

    private void onCmEvent(RdmaCmEvent event) {
        int type = event.getEvent();
        RdmaCmId id = event.getConnIdPriv();
        RdmaCmId listen = event.getListenIdPriv();
        try {
            event.ackEvent();
        } catch (IOException | RuntimeException e) {
            LOG.debug("rdma_ack_cm_event failed", e);
        }
        RdmaCmEvent.EventType[] types = RdmaCmEvent.EventType.values();
        RdmaCmEvent.EventType kind = type >= 0 && type < types.length ? types[type] : null;
        if (kind == RdmaCmEvent.EventType.RDMA_CM_EVENT_CONNECT_REQUEST) {
            onConnectRequest(id);
            return;
        }
        VerbsChannel channel = id == null ? null : byId.get(id);
        if (channel == null) {
            LOG.trace("{}: {} for an id that is gone", node.name(), kind);
            return;
        }
        if (kind == null) {
            LOG.debug("{}: unknown RDMA-CM event {} on {}", node.name(), type, channel);
            return;
        }
        try {
            switch (kind) {
                case RDMA_CM_EVENT_ADDR_RESOLVED -> {
                    if (channel.state() == VerbsChannel.State.CONNECTING) {
                        id.resolveRoute(timeoutMillis());
                    }
                }
                case RDMA_CM_EVENT_ROUTE_RESOLVED -> {
                    if (channel.state() == VerbsChannel.State.CONNECTING) {
                        IbvContext ctx = Verbs.contextOf(id);
                        if (ctx == null) {
                            throw new IOException("the route to " + channel.remoteAddress() + " has no RDMA device");
                        }
                        channel.setUp(ctx);
                        NativeCm.connect(id, VerbsChannel.RETRY_COUNT, VerbsChannel.RNR_RETRY_COUNT,
                                ConnectData.encode(channel.lane, channel.connectRequest.data()),
                                channel.connectRequest.remoteReadable());
                    }
                }
                case RDMA_CM_EVENT_ESTABLISHED -> {
                    if (!channel.isAccepted() && !channel.connectRequest.remoteReadable()) {
                        NativeCm.denyRemoteAccess(id); // before anything is sent: fails the connect if it cannot
                    }
                    channel.onEstablished();
                }
                case RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ROUTE_ERROR, RDMA_CM_EVENT_UNREACHABLE,
                        RDMA_CM_EVENT_CONNECT_ERROR -> channel.terminate(
                        new TransportException(Status.RETRY_EXCEEDED, "cannot connect to " + channel.remoteAddress() + ": "
                                + kind), null, Status.RETRY_EXCEEDED);
                // the peer's CM answered: no listener on that port, or the acceptor turned the request away
                case RDMA_CM_EVENT_REJECTED -> channel.terminate(new TransportException(Status.CONNECTION_REFUSED,
                        "cannot connect to " + channel.remoteAddress() + ": " + kind + ": "
                                + NativeCm.rejectReason(NativeCm.lastEventStatus())), null, Status.CONNECTION_REFUSED);
                case RDMA_CM_EVENT_DISCONNECTED -> channel.onDisconnected(System.nanoTime());
                case RDMA_CM_EVENT_DEVICE_REMOVAL -> channel.terminate(new TransportException(Status.FLUSHED,
                        "the RDMA device was removed"), null, Status.FLUSHED);
                default -> LOG.trace("{}: {} on {}", node.name(), kind, channel);
            }
        } catch (IOException | RuntimeException e) {
            channel.terminate(new TransportException(Status.RETRY_EXCEEDED, "cannot connect to " + channel.remoteAddress()
                    + " (" + kind + "): " + e.getMessage(), e), null, Status.RETRY_EXCEEDED);
        }
    }

    /**
     * A connect request: its lane picks the CQ of the QP (see {@link ConnectData}); the acceptor
     * reads what the connecting caller put in it and decides, before anything exists
     * for it, whether to take it (a refused request's id is destroyed: no QP, the peer sees
     * REJECTED) and whether the QP may serve the peer's READs.
     */
    private void onConnectRequest(RdmaCmId id) {
        if (id == null) {
            return;
        }
        ChannelAcceptor acceptor = node.acceptor();
        if (node.isClosed() || acceptor == null) {
            destroyId(id); // an id destroyed before rdma_accept rejects the request
            return;
        }
        java.net.SocketAddress from = null;
        try {
            from = id.getDestination();
        } catch (IOException | RuntimeException e) {
            LOG.trace("rdma_get_peer_addr failed", e);
        }
        Admission admission;
        Lane lane = Lane.BULK;
        KeyDomain domain = null;
        try {
            ConnectData request = ConnectData.decode(NativeCm.connectData(id));
            lane = request.lane();
            admission = acceptor.admit(from, request.data());
            if (admission != null && admission != Admission.REFUSE) {
                domain = acceptor.keyDomain(from, request.data());
                if (domain != null && !(domain instanceof VerbsDomain mine && mine.node() == node)) {
                    throw new IllegalStateException("the acceptor put the channel in " + domain + ", no key domain of "
                            + node.name());
                }
            }
        } catch (IOException | RuntimeException e) {
            long now = System.nanoTime();
            if (now - lastUncheckedLog >= UNCHECKED_LOG_INTERVAL_NANOS) {
                LOG.warn("{}: refusing a connection from {}: its connect request could not be checked: {} ({} more refused"
                        + " for this since the last such line; logged at most once per {} s)", node.name(), from, e.toString(),
                        uncheckedSinceLog, TimeUnit.NANOSECONDS.toSeconds(UNCHECKED_LOG_INTERVAL_NANOS));
                lastUncheckedLog = now;
                uncheckedSinceLog = 0;
            } else {
                uncheckedSinceLog++;
            }
            admission = Admission.REFUSE;
        }
        if (admission == null || admission == Admission.REFUSE) {
            destroyId(id);
            return;
        }
        VerbsChannel channel = new VerbsChannel(node, VerbsNode.nextChannelId(), node.options.acceptQueueDepth(), lane, null,
                null, null);
        if (!node.reserveCq(channel)) {
            LOG.warn("{}: refusing a connection: the {} completion queue has room for {} more entries, a channel needs {}",
                    node.name(), lane, node.cqFree(lane), channel.cqEntries);
            destroyId(id);
            return;
        }
        if (domain != null && !channel.join((VerbsDomain) domain)) {
            LOG.debug("{}: refusing a connection from {}: its key domain is closed", node.name(), from);
            node.releaseCq(channel);
            destroyId(id);
            return;
        }
        channel.attach(id);
        node.addChannel(channel);
        byId.put(id, channel);
        try {
            channel.setRemote(from);
            IbvContext ctx = Verbs.contextOf(id);
            if (ctx == null) {
                throw new IOException("the connection request came without an RDMA device");
            }
            channel.setUp(ctx);
            // Responder resources unless READs are never to be served; remote access from the QP's first state
            // only when admitted as it is: admitted to be READ later, it serves none until its owner allows it
            // (Channel.allowRemoteReads), not even between the accept and that.
            boolean readable = admission != Admission.ACCEPT_WITHOUT_REMOTE_READ;
            NativeCm.accept(id, VerbsChannel.RETRY_COUNT, VerbsChannel.RNR_RETRY_COUNT, readable, admission == Admission.ACCEPT);
            Consumer<RdmaCmId> seen = acceptedForTest;
            if (seen != null) {
                seen.accept(id);
            }
        } catch (IOException | RuntimeException e) {
            LOG.warn("{}: cannot accept a connection from {}: {}", node.name(), channel.remoteAddress(), e.toString());
            channel.terminate(new TransportException(Status.FLUSHED, "accept failed: " + e, e), null, Status.FLUSHED);
        }
    }

    // ================================================================ closed channels

    /** A channel closed: its QP and id are destroyed once the peer acknowledged, or after a grace period. */
    void closing(VerbsChannel channel) {
        execute(() -> {
            channel.destroyAfter = System.nanoTime() + DISCONNECT_GRACE_NANOS;
            closing.add(channel);
            reap(System.nanoTime());
        });
    }

    private void reap(long now) {
        for (Iterator<VerbsChannel> it = closing.iterator(); it.hasNext(); ) {
            VerbsChannel channel = it.next();
            if (!channel.established || channel.disconnectSeen || !channel.hasQp() || now - channel.destroyAfter > 0) {
                it.remove();
                forget(channel);
                channel.destroy();
            }
        }
    }

    /** Drops the channel's id from this loop and the channel from the node (its CQ entries return). */
    void forget(VerbsChannel channel) {
        RdmaCmId id = channel.cmId();
        if (id != null) {
            byId.remove(id);
        }
        node.forgetChannel(channel);
    }

    // ================================================================ after the thread stopped

    /** The thread has stopped: from now on tasks run on the caller; the ones still queued run now. */
    void released() {
        released = true;
        runTasks();
    }

    /** Destroys the channels that were still waiting for their peer's acknowledgement. */
    void destroyClosing() {
        for (VerbsChannel channel : closing) {
            channel.destroy();
        }
        closing.clear();
    }

    void destroyListenId() {
        if (listenId != null) {
            destroyId(listenId);
        }
    }

    static void destroyId(RdmaCmId id) {
        try {
            id.destroyId();
        } catch (IOException | RuntimeException e) {
            LOG.debug("rdma_destroy_id failed: {}", e.toString());
        }
    }
}

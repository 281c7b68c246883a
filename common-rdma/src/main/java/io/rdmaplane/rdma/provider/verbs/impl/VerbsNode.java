package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvCompChannel;
import com.ibm.disni.verbs.IbvContext;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaCm;
import com.ibm.disni.verbs.RdmaCmEvent;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaEventChannel;
import com.ibm.disni.verbs.SVCPollCq;
import com.ibm.disni.verbs.SVCReqNotify;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelAcceptor;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeArguments;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.verbs.VerbsProvider;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A verbs node: one RDMA device (the one its bind address belongs to), one protection domain,
 * one completion queue shared by all its queue pairs, and two daemon threads.
 * <ul>
 * <li>The <b>CM thread</b> owns the RDMA-CM event channel: it creates, connects, accepts and
 * destroys ids (DiSNI's event channel keeps its ids in a plain map, so one thread does all of
 * it), waits for CM events with a short timeout, and checks operation timeouts on each tick.
 * <li>The <b>completion thread</b> polls the CQ: by default it sleeps on the completion channel
 * (ibv_req_notify_cq + ibv_get_cq_event) and drains the CQ on each event; with
 * {@code -Drdma.verbs.completion=poll} (or the two-argument constructor) it busy-polls, trading
 * a core for latency.
 * </ul>
 * Closing the node closes its channels (each QP to the error state, the peers told), waits
 * briefly for the peers' disconnect acknowledgements, stops both threads, then destroys QPs,
 * ids, CQ, completion channel, memory regions, PD and event channel, in that order.
 */
public final class VerbsNode implements Node {
    private static final Logger LOG = LoggerFactory.getLogger(VerbsNode.class);
    private static final AtomicInteger NODE_IDS = new AtomicInteger();
    private static final AtomicInteger CHANNEL_IDS = new AtomicInteger();
    /** CM thread tick: how late a queued CM task (connect, listen) may start, and the timeout check period. */
    private static final int CM_TICK_MS = Integer.getInteger("rdma.verbs.cmTickMillis", 10);
    private static final int CQ_WAIT_MS = 100;
    private static final int POLL_BATCH = 32;
    private static final int RECEIVE_BUFFERS = Integer.getInteger("rdma.verbs.receiveBuffers", 32);
    private static final int CQ_ENTRIES = Integer.getInteger("rdma.verbs.cqEntries", 16384);
    /** Longest work request of a READ (see VerbsChannel); at least 8 MiB / SQ_SPARE, so a READ always fits. */
    private static final int READ_PIECE = Math.max(io.rdmaplane.rdma.provider.Channel.MAX_READ_BYTES / VerbsChannel.SQ_SPARE,
            Math.min(io.rdmaplane.rdma.provider.Channel.MAX_READ_BYTES, Integer.getInteger("rdma.verbs.readPieceBytes", 256 << 10)));
    /** How long a closed channel waits for the peer's disconnect acknowledgement before its QP goes. */
    private static final long DISCONNECT_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(1000);

    final NodeOptions options;
    private final String name;
    private final boolean busyPoll;
    private final RdmaEventChannel events;
    private final RdmaCmId anchor;
    private final IbvContext context;
    private final IbvPd pd;
    private final IbvCompChannel completionChannel;
    private final IbvCQ cq;
    private final int cqCapacity;
    private final AtomicInteger cqFree;
    private final SendPool sendPool;
    private final Thread cmThread;
    private final Thread cqThread;
    private final ConcurrentLinkedQueue<Runnable> cmTasks = new ConcurrentLinkedQueue<>();
    private final Map<Integer, VerbsChannel> channels = new ConcurrentHashMap<>();
    private final Set<VerbsRegion> regions = ConcurrentHashMap.newKeySet();
    private final AtomicLong registrations = new AtomicLong();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Object registerLock = new Object();
    // CM thread only
    private final Map<RdmaCmId, VerbsChannel> byId = new IdentityHashMap<>();
    private final List<VerbsChannel> closing = new ArrayList<>();
    private RdmaCmId listenId;
    private volatile ChannelAcceptor acceptor;
    private volatile InetSocketAddress localAddress;
    private volatile boolean released;

    public VerbsNode(NodeOptions options) throws TransportException {
        this(options, "poll".equals(System.getProperty("rdma.verbs.completion", "event").toLowerCase(Locale.ROOT)));
    }

    public VerbsNode(NodeOptions options, boolean busyPoll) throws TransportException {
        this.options = Objects.requireNonNull(options, "options");
        this.busyPoll = busyPoll;
        this.name = "rdma-verbs-node-" + NODE_IDS.incrementAndGet();
        if (!(options.bindAddress().getAddress() instanceof Inet4Address)) {
            throw new TransportException(Status.UNAVAILABLE,
                    "the verbs provider binds IPv4 addresses only (DiSNI), not " + options.bindAddress());
        }
        RdmaEventChannel ev = null;
        RdmaCmId anchorId = null;
        IbvPd protection = null;
        IbvCompChannel compChannel = null;
        IbvCQ queue = null;
        try {
            ev = RdmaEventChannel.createEventChannel();
            if (ev == null) {
                throw new IOException("rdma_create_event_channel failed");
            }
            anchorId = bindAnchor(ev, options.bindAddress().getAddress());
            this.context = Verbs.contextOf(anchorId);
            protection = context.allocPd();
            if (protection == null) {
                throw new IOException("ibv_alloc_pd failed");
            }
            compChannel = context.createCompChannel();
            if (compChannel == null) {
                throw new IOException("ibv_create_comp_channel failed");
            }
            int entries = CQ_ENTRIES;
            while (queue == null) {
                try {
                    queue = context.createCQ(compChannel, entries, 0);
                } catch (IOException e) {
                    if (entries <= 1024) {
                        throw e;
                    }
                }
                if (queue == null) {
                    if (entries <= 1024) {
                        throw new IOException("ibv_create_cq failed for " + entries + " entries");
                    }
                    entries /= 2;
                }
            }
            this.cqCapacity = entries;
        } catch (IOException | RuntimeException e) {
            destroyQuietly(queue, compChannel, protection, anchorId, ev);
            throw new TransportException(Status.UNAVAILABLE, "cannot open the RDMA device for "
                    + options.bindAddress() + ": " + e.getMessage(), e);
        }
        this.events = ev;
        this.anchor = anchorId;
        this.pd = protection;
        this.completionChannel = compChannel;
        this.cq = queue;
        // A few entries stay spare for completions of QPs destroyed but not yet drained.
        this.cqFree = new AtomicInteger(cqCapacity - 64);
        this.sendPool = new SendPool(pd, options.maxMessageSize() + Frames.HEADER);
        this.cmThread = new Thread(this::runCm, name + "-cm");
        this.cqThread = new Thread(this::runCompletions, name + "-cq");
        cmThread.setDaemon(true);
        cqThread.setDaemon(true);
        cmThread.start();
        cqThread.start();
        LOG.debug("{} on {} ({} CQ entries, {} completions)", name, options.bindAddress(), cqCapacity,
                busyPoll ? "busy-polled" : "event-driven");
    }

    /** An id bound to the bind address (or, for a wildcard, the first local IPv4 address an RDMA device serves). */
    private static RdmaCmId bindAnchor(RdmaEventChannel ev, InetAddress bind) throws IOException {
        List<InetAddress> candidates = new ArrayList<>();
        if (bind.isAnyLocalAddress()) {
            candidates.addAll(VerbsProbe.allIpv4());
        } else {
            candidates.add(bind);
        }
        List<String> tried = new ArrayList<>();
        for (InetAddress address : candidates) {
            RdmaCmId id = ev.createId(RdmaCm.RDMA_PS_TCP);
            if (id == null) {
                throw new IOException("rdma_create_id failed");
            }
            try {
                id.bindAddr(new InetSocketAddress(address, 0));
                if (Verbs.contextOf(id) != null) {
                    return id;
                }
                tried.add(address.getHostAddress() + ": no RDMA device");
            } catch (IOException e) {
                tried.add(address.getHostAddress() + ": " + e.getMessage());
            }
            id.destroyId();
        }
        throw new IOException("no RDMA device serves " + bind.getHostAddress() + " (" + String.join("; ", tried) + ")");
    }

    // ================================================================ SPI

    @Override
    public String providerName() {
        return VerbsProvider.NAME;
    }

    @Override
    public MemoryRegion register(ByteBuffer buffer, Set<Access> access) throws TransportException {
        NodeArguments.checkRegister(buffer, access);
        ByteBuffer memory = buffer.slice();
        long address = Verbs.address(memory);
        // Read-only memory (a file mapping) is pinned without write access: no LOCAL_WRITE flag.
        int flags = Verbs.accessFlags(access);
        synchronized (registerLock) {
            if (closed.get()) {
                throw new TransportException(Status.FLUSHED, name + " is closed");
            }
            IbvMr mr;
            try {
                mr = Verbs.register(pd, address, memory.capacity(), flags);
            } catch (IOException | RuntimeException e) {
                throw new TransportException(Status.LOCAL_PROTECTION_ERROR, "ibv_reg_mr of " + memory.capacity()
                        + " bytes at 0x" + Long.toHexString(address) + " with " + access + " failed: " + e.getMessage()
                        + registrationHint(memory, e), e);
            }
            VerbsRegion region = new VerbsRegion(this, memory, address, mr, Set.copyOf(access));
            regions.add(region);
            registrations.incrementAndGet();
            return region;
        }
    }

    /** Why a registration may have failed, as far as we can tell. */
    static String registrationHint(ByteBuffer memory, Exception e) {
        String text = String.valueOf(e.getMessage());
        if (memory.isReadOnly() && (text.contains("Bad address") || text.contains("errno 14"))) {
            return " (a read-only shared file mapping: kernels before 6.2 pin every memory region for write"
                    + " (ib_umem_get with FOLL_FORCE), which a shared read-only mapping refuses; this kernel is "
                    + System.getProperty("os.version") + ". Map the file with MapMode.PRIVATE, or copy it into"
                    + " registered memory)";
        }
        if (text.contains("Cannot allocate memory") || text.contains("errno 12") || text.contains("Operation not permitted")) {
            return " (is the locked-memory limit, ulimit -l, high enough?)";
        }
        return "";
    }

    void forget(VerbsRegion region) {
        regions.remove(region);
    }

    @Override
    public long registrationCount() {
        return registrations.get();
    }

    @Override
    public synchronized void listen(ChannelAcceptor acceptor) throws TransportException {
        Objects.requireNonNull(acceptor, "acceptor");
        if (this.acceptor != null) {
            throw new IllegalStateException(name + " is already listening on " + localAddress);
        }
        if (closed.get()) {
            throw new TransportException(Status.FLUSHED, name + " is closed");
        }
        this.acceptor = acceptor;
        try {
            localAddress = onCm(() -> {
                RdmaCmId id = events.createId(RdmaCm.RDMA_PS_TCP);
                if (id == null) {
                    throw new IOException("rdma_create_id failed");
                }
                try {
                    id.bindAddr(options.bindAddress());
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
                    if (options.bindAddress().getPort() == 0) {
                        throw new IOException("cannot learn the port rdma_bind_addr chose");
                    }
                    bound = options.bindAddress();
                }
                return bound;
            });
            LOG.debug("{} listening on {}", name, localAddress);
        } catch (Exception e) {
            this.acceptor = null;
            throw new TransportException(Status.UNAVAILABLE, "cannot listen on " + options.bindAddress() + ": "
                    + (e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e), e);
        }
    }

    @Override
    public InetSocketAddress localAddress() {
        return localAddress;
    }

    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, ChannelHandler handler) {
        NodeArguments.checkConnect(peer, queueDepth, handler);
        CompletableFuture<Channel> connected = new CompletableFuture<>();
        if (closed.get()) {
            connected.completeExceptionally(new TransportException(Status.FLUSHED, name + " is closed"));
            return connected;
        }
        if (peer.isUnresolved() || !(peer.getAddress() instanceof Inet4Address)) {
            connected.completeExceptionally(new TransportException(Status.RETRY_EXCEEDED,
                    "cannot reach " + peer + ": the verbs provider connects to resolved IPv4 addresses only"));
            return connected;
        }
        VerbsChannel channel = new VerbsChannel(this, CHANNEL_IDS.incrementAndGet(), queueDepth, handler, connected, peer);
        if (!reserveCq(channel)) {
            connected.completeExceptionally(new TransportException(Status.QUEUE_FULL, name + "'s completion queue has room for "
                    + cqFree.get() + " more entries; a channel of depth " + queueDepth + " needs " + channel.cqEntries
                    + " (rdma.verbs.cqEntries)"));
            return connected;
        }
        channels.put(channel.id, channel);
        execute(() -> startConnect(channel, peer));
        return connected;
    }

    // ================================================================ CM thread

    private void startConnect(VerbsChannel channel, InetSocketAddress peer) {
        if (closed.get()) {
            channel.terminate(new TransportException(Status.FLUSHED, name + " is closed"), null, Status.FLUSHED);
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
            InetAddress bind = options.bindAddress().getAddress();
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
        return (int) Math.max(100, Math.min(Integer.MAX_VALUE, options.operationTimeout().toMillis()));
    }

    private void runCm() {
        try {
            long nextCheck = 0;
            while (true) {
                runTasks();
                RdmaCmEvent event = null;
                try {
                    event = events.getCmEvent(CM_TICK_MS);
                } catch (IOException e) {
                    if (!closed.get()) {
                        LOG.warn("{}: rdma_get_cm_event failed: {}", name, e.toString());
                    }
                }
                if (event != null) {
                    onCmEvent(event);
                }
                long now = System.nanoTime();
                if (now - nextCheck >= 0) {
                    nextCheck = now + TimeUnit.MILLISECONDS.toNanos(Math.max(1, CM_TICK_MS));
                    if (!closed.get()) {
                        for (VerbsChannel channel : channels.values()) {
                            channel.checkTimeout(now);
                        }
                    }
                    reap(now);
                }
                if (closed.get() && closing.isEmpty() && cmTasks.isEmpty() && allChannelsClosed()) {
                    return;
                }
            }
        } catch (Throwable t) {
            LOG.error("{}: CM thread failed; closing the node", name, t);
            closed.set(true);
        }
    }

    private boolean allChannelsClosed() {
        for (VerbsChannel channel : channels.values()) {
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
            LOG.trace("{}: {} for an id that is gone", name, kind);
            return;
        }
        if (kind == null) {
            LOG.debug("{}: unknown RDMA-CM event {} on {}", name, type, channel);
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
                        id.connect(VerbsChannel.connParam());
                    }
                }
                case RDMA_CM_EVENT_ESTABLISHED -> channel.onEstablished();
                case RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ROUTE_ERROR, RDMA_CM_EVENT_UNREACHABLE,
                        RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_CONNECT_ERROR -> channel.terminate(
                        new TransportException(Status.RETRY_EXCEEDED, "cannot connect to " + channel.remoteAddress() + ": "
                                + kind), null, Status.RETRY_EXCEEDED);
                case RDMA_CM_EVENT_DISCONNECTED -> channel.onDisconnected(System.nanoTime());
                case RDMA_CM_EVENT_DEVICE_REMOVAL -> channel.terminate(new TransportException(Status.FLUSHED,
                        "the RDMA device was removed"), null, Status.FLUSHED);
                default -> LOG.trace("{}: {} on {}", name, kind, channel);
            }
        } catch (IOException | RuntimeException e) {
            channel.terminate(new TransportException(Status.RETRY_EXCEEDED, "cannot connect to " + channel.remoteAddress()
                    + " (" + kind + "): " + e.getMessage(), e), null, Status.RETRY_EXCEEDED);
        }
    }

    private void onConnectRequest(RdmaCmId id) {
        if (id == null) {
            return;
        }
        if (closed.get() || acceptor == null) {
            destroyId(id); // an id destroyed before rdma_accept rejects the request
            return;
        }
        VerbsChannel channel = new VerbsChannel(this, CHANNEL_IDS.incrementAndGet(), options.acceptQueueDepth(), null, null,
                null);
        if (!reserveCq(channel)) {
            LOG.warn("{}: refusing a connection: the completion queue has room for {} more entries, a channel needs {}",
                    name, cqFree.get(), channel.cqEntries);
            destroyId(id);
            return;
        }
        channel.attach(id);
        channels.put(channel.id, channel);
        byId.put(id, channel);
        try {
            try {
                channel.setRemote(id.getDestination());
            } catch (IOException | RuntimeException e) {
                LOG.trace("rdma_get_peer_addr failed", e);
            }
            IbvContext ctx = Verbs.contextOf(id);
            if (ctx == null) {
                throw new IOException("the connection request came without an RDMA device");
            }
            channel.setUp(ctx);
            id.accept(VerbsChannel.connParam());
        } catch (IOException | RuntimeException e) {
            LOG.warn("{}: cannot accept a connection from {}: {}", name, channel.remoteAddress(), e.toString());
            channel.terminate(new TransportException(Status.FLUSHED, "accept failed: " + e, e), null, Status.FLUSHED);
        }
    }

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
                forgetChannel(channel);
                channel.destroy();
            }
        }
    }

    private void forgetChannel(VerbsChannel channel) {
        RdmaCmId id = channel.cmId();
        if (id != null) {
            byId.remove(id);
        }
        if (channels.remove(channel.id, channel)) {
            cqFree.addAndGet(channel.cqEntries);
        }
    }

    private boolean reserveCq(VerbsChannel channel) {
        int need = channel.cqEntries;
        int now;
        do {
            now = cqFree.get();
            if (now < need) {
                return false;
            }
        } while (!cqFree.compareAndSet(now, now - need));
        return true;
    }

    private static void destroyId(RdmaCmId id) {
        try {
            id.destroyId();
        } catch (IOException | RuntimeException e) {
            LOG.debug("rdma_destroy_id failed: {}", e.toString());
        }
    }

    /** Runs a task on the CM thread (at once if called from it). */
    void execute(Runnable task) {
        if (Thread.currentThread() == cmThread) {
            task.run();
            return;
        }
        cmTasks.add(task);
        if (!cmThread.isAlive() && released) {
            runTasks(); // the thread is gone: settle the task here rather than lose it
        }
    }

    /** Runs a task on the CM thread after the current work, never inline (used under channel locks). */
    void later(Runnable task) {
        cmTasks.add(task);
        if (!cmThread.isAlive() && released) {
            runTasks();
        }
    }

    private <T> T onCm(Callable<T> work) throws Exception {
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
        for (Runnable task; (task = cmTasks.poll()) != null; ) {
            try {
                task.run();
            } catch (RuntimeException e) {
                LOG.error("{}: CM task failed", name, e);
            }
        }
    }

    // ================================================================ completion thread

    private void runCompletions() {
        IbvWC[] wcs = new IbvWC[POLL_BATCH];
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new IbvWC();
        }
        SVCPollCq poll = null;
        SVCReqNotify arm = null;
        int unacked = 0;
        try {
            poll = cq.poll(wcs, wcs.length);
            if (busyPoll) {
                while (!closed.get()) {
                    if (drain(poll, wcs) == 0) {
                        Thread.onSpinWait();
                    }
                }
            } else {
                arm = cq.reqNotification(false);
                arm.execute();
                drain(poll, wcs);
                while (!closed.get()) {
                    if (!completionChannel.getCqEvent(cq, CQ_WAIT_MS)) {
                        continue; // timeout: look at the closed flag again
                    }
                    if (++unacked >= 256) {
                        cq.ackEvents(unacked);
                        unacked = 0;
                    }
                    arm.execute(); // re-arm before draining: a completion after the last poll raises a new event
                    drain(poll, wcs);
                }
            }
        } catch (Throwable t) {
            if (!closed.get()) {
                LOG.error("{}: completion thread failed; closing the node", name, t);
                Thread closer = new Thread(this::close, name + "-closer");
                closer.setDaemon(true);
                closer.start();
            }
        } finally {
            try {
                if (unacked > 0) {
                    cq.ackEvents(unacked);
                }
            } catch (IOException | RuntimeException e) {
                LOG.debug("ibv_ack_cq_events failed", e);
            }
            if (poll != null) {
                poll.free();
            }
            if (arm != null) {
                arm.free();
            }
        }
    }

    /** Polls until the CQ is empty; returns the number of completions handled. */
    private int drain(SVCPollCq poll, IbvWC[] wcs) throws IOException {
        int total = 0;
        while (true) {
            int n = poll.execute().getPolls();
            for (int i = 0; i < n; i++) {
                IbvWC wc = wcs[i];
                long wrId = wc.getWr_id();
                VerbsChannel channel = channels.get(VerbsChannel.channelOf(wrId));
                if (channel == null) {
                    continue; // a completion of a QP already destroyed
                }
                try {
                    channel.onCompletion(wrId, wc.getStatus(), wc.getByte_len());
                } catch (RuntimeException e) {
                    LOG.error("{}: completion handling failed on {}; closing that channel", name, channel, e);
                    channel.terminate(new TransportException(Status.FLUSHED, "internal error: " + e, e), null, Status.FLUSHED);
                }
            }
            total += n;
            if (n < wcs.length) {
                return total;
            }
        }
    }

    // ================================================================ close

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        TransportException closing = new TransportException(Status.FLUSHED, name + " closed");
        for (VerbsChannel channel : new ArrayList<>(channels.values())) {
            channel.terminate(closing, null, Status.FLUSHED);
        }
        Thread current = Thread.currentThread();
        if (current == cmThread || current == cqThread) {
            Thread closer = new Thread(this::release, name + "-closer");
            closer.setDaemon(true);
            closer.start();
        } else {
            release();
        }
    }

    /** Waits for both threads, then frees every verbs resource on this thread. */
    private void release() {
        join(cmThread);
        join(cqThread);
        released = true;
        runTasks();
        for (VerbsChannel channel : new ArrayList<>(channels.values())) {
            forgetChannel(channel);
            channel.destroy();
        }
        for (VerbsChannel channel : closing) {
            channel.destroy();
        }
        closing.clear();
        synchronized (registerLock) {
            for (VerbsRegion region : new ArrayList<>(regions)) {
                region.deregister(); // after the QPs are gone: peers see the connection end, not refused READs
            }
        }
        sendPool.close();
        if (listenId != null) {
            destroyId(listenId);
        }
        destroyQuietly(cq, completionChannel, pd, anchor, events);
        LOG.debug("{} closed", name);
    }

    private static void join(Thread thread) {
        try {
            thread.join(TimeUnit.SECONDS.toMillis(10));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (thread.isAlive()) {
            LOG.warn("{} did not stop within 10 s", thread.getName());
        }
    }

    private static void destroyQuietly(IbvCQ cq, IbvCompChannel compChannel, IbvPd pd, RdmaCmId anchor, RdmaEventChannel ev) {
        try {
            if (cq != null) {
                cq.destroyCQ();
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("ibv_destroy_cq failed: {}", e.toString());
        }
        try {
            if (compChannel != null) {
                compChannel.destroyCompChannel();
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("ibv_destroy_comp_channel failed: {}", e.toString());
        }
        try {
            if (pd != null) {
                pd.deallocPd();
            }
        } catch (Exception e) {
            LOG.debug("ibv_dealloc_pd failed: {}", e.toString());
        }
        if (anchor != null) {
            destroyId(anchor);
        }
        try {
            if (ev != null) {
                ev.destroyEventChannel();
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("rdma_destroy_event_channel failed: {}", e.toString());
        }
    }

    // ================================================================ for the channels

    IbvContext context() {
        return context;
    }

    IbvPd pd() {
        return pd;
    }

    IbvCQ cq() {
        return cq;
    }

    SendPool sendPool() {
        return sendPool;
    }

    ChannelAcceptor acceptor() {
        return acceptor;
    }

    String name() {
        return name;
    }

    int readPiece() {
        return READ_PIECE;
    }

    /** Receive buffers a channel posts: its depth, within [8, rdma.verbs.receiveBuffers]. */
    int receiveBuffers(int queueDepth) {
        return Math.max(8, Math.min(Math.max(8, RECEIVE_BUFFERS), queueDepth));
    }

    @Override
    public String toString() {
        return name + (localAddress == null ? "" : "@" + localAddress);
    }
}

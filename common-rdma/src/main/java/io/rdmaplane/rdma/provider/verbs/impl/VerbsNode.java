package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvCompChannel;
import com.ibm.disni.verbs.IbvContext;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import com.ibm.disni.verbs.RdmaCm;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaEventChannel;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelAcceptor;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.ConnectRequest;
import io.rdmaplane.rdma.provider.KeyDomain;
import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.PeerKey;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeArguments;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.VerbsOptions;
import io.rdmaplane.rdma.provider.verbs.RdmaDevices;
import io.rdmaplane.rdma.provider.verbs.VerbsProvider;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A verbs node: one RDMA device (the one its bind address belongs to), one protection domain,
 * two completion queues, one per {@link Lane} (the lane's queue pairs share it), and three daemon
 * threads.
 * <ul>
 * <li>The <b>CM thread</b> ({@link CmEventLoop}) owns the RDMA-CM event channel: it creates,
 * connects, accepts and destroys ids, waits for CM events with a short timeout, and checks
 * operation timeouts on each tick.
 * <li>Two <b>completion threads</b> ({@link CompletionPoller}), one per lane, each polling its
 * lane's CQ: it sleeps on the completion channel and drains the CQ on each event; with
 * {@link VerbsOptions.Completion#HYBRID} (the default) a thread waiting for a READ of that lane polls
 * the CQ itself meanwhile, one thread at a time ({@link CqPolling}); with
 * {@link VerbsOptions.Completion#POLL} the bulk lane's busy-polls, trading a core for latency (the
 * control lane's always sleeps).
 * </ul>
 * Closing the node closes its channels (each QP to the error state, the peers told), waits
 * briefly for the peers' disconnect acknowledgements, stops the threads, then destroys QPs,
 * ids, CQs, completion channels, memory regions, PD and event channel, in that order.
 */
public final class VerbsNode implements Node {
    private static final Logger LOG = LoggerFactory.getLogger(VerbsNode.class);
    private static final AtomicInteger NODE_IDS = new AtomicInteger();
    private static final AtomicInteger CHANNEL_IDS = new AtomicInteger();
    private static final AtomicBoolean KEYS_LOGGED = new AtomicBoolean();
    private static final AtomicBoolean WINDOWS_LOGGED = new AtomicBoolean();

    final NodeOptions options;
    private final String name;
    private final RdmaEventChannel events;
    private final RdmaCmId anchor;
    private final IbvContext context;
    private final IbvPd pd;
    private final LaneCq bulk;
    private final LaneCq control;
    private final SendPool sendPool;
    /** Type 2 memory windows the device holds; 0: it binds none, and keys are per region. */
    private final int type2Windows;
    /** The NUMA node of the device of the bind address, where pools place their memory; -1 if none. */
    private final int numaNode;
    private final CmEventLoop cm;
    private final Map<Integer, VerbsChannel> channels = new ConcurrentHashMap<>();
    private final Set<VerbsRegion> regions = ConcurrentHashMap.newKeySet();
    private final Set<VerbsDomain> domains = ConcurrentHashMap.newKeySet();
    private final AtomicLong registrations = new AtomicLong();
    private final AtomicLong keyRegistrations = new AtomicLong();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final CompletableFuture<Void> terminated = new CompletableFuture<>();
    private final Object registerLock = new Object();
    private volatile ChannelAcceptor acceptor;
    private volatile InetSocketAddress localAddress;

    /** Opens the device of {@code options}' bind address; its {@link NodeOptions#verbs()} tune this node. */
    public VerbsNode(NodeOptions options) throws TransportException {
        this.options = Objects.requireNonNull(options, "options");
        this.name = "rdma-verbs-node-" + NODE_IDS.incrementAndGet();
        if (!(options.bindAddress().getAddress() instanceof Inet4Address)) {
            throw new TransportException(Status.UNAVAILABLE,
                    "the verbs provider binds IPv4 addresses only (DiSNI), not " + options.bindAddress());
        }
        RdmaEventChannel ev = null;
        RdmaCmId anchorId = null;
        IbvPd protection = null;
        LaneCq bulkCq = null;
        LaneCq controlCq = null;
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
            bulkCq = LaneCq.open(context, Lane.BULK, options.verbs().cqEntries());
            controlCq = LaneCq.open(context, Lane.CONTROL, options.verbs().cqEntries());
        } catch (IOException | RuntimeException e) {
            if (controlCq != null) {
                controlCq.destroy();
            }
            if (bulkCq != null) {
                bulkCq.destroy();
            }
            destroyQuietly(protection, anchorId, ev);
            throw new TransportException(Status.UNAVAILABLE, "cannot open the RDMA device for "
                    + options.bindAddress() + ": " + e.getMessage(), e);
        }
        this.events = ev;
        this.anchor = anchorId;
        this.pd = protection;
        this.bulk = bulkCq;
        this.control = controlCq;
        this.sendPool = new SendPool(pd, options.maxMessageSize() + Frames.HEADER);
        this.type2Windows = windowsOf(context);
        // A wildcard bind has no one device to ask (memory goes where the kernel puts it).
        InetAddress bound = options.bindAddress().getAddress();
        this.numaNode = bound.isAnyLocalAddress() ? -1 : RdmaDevices.numaNodeServing(Path.of("/"), bound.getHostAddress());
        this.cm = new CmEventLoop(this, events, Math.toIntExact(options.verbs().cmTick().toMillis()));
        // The control lane's thread sleeps on its completion channel even when bulk busy-polls: two
        // spinning threads per node would starve the very callers they serve on a small host.
        VerbsOptions verbs = options.verbs();
        VerbsOptions.Completion controlMode = verbs.completion() == VerbsOptions.Completion.POLL
                ? VerbsOptions.Completion.EVENT : verbs.completion();
        try {
            bulk.poller = new CompletionPoller(this, bulk.cq, bulk.channel, verbs.completion(), verbs, "-cq");
            control.poller = new CompletionPoller(this, control.cq, control.channel, controlMode, verbs, "-cq-control");
        } catch (IOException | RuntimeException e) {
            if (bulk.poller != null) {
                bulk.poller.free();
            }
            sendPool.close();
            bulk.destroy();
            control.destroy();
            destroyQuietly(pd, anchor, events);
            throw new TransportException(Status.UNAVAILABLE, "cannot poll the completion queues of " + options.bindAddress()
                    + ": " + e.getMessage(), e);
        }
        cm.start();
        bulk.poller.start();
        control.poller.start();
        LOG.debug("{} on {} ({} + {} CQ entries, completions {})", name, options.bindAddress(), bulk.capacity,
                control.capacity, verbs.completion());
    }

    /**
     * One lane's completion queue, its completion channel, the entries its channels have not
     * taken, and the thread that polls it. Each lane has its own, so a control completion is
     * never polled or handled behind a batch of bulk READ completions.
     */
    static final class LaneCq {
        final Lane lane;
        final IbvCompChannel channel;
        final IbvCQ cq;
        final int capacity;
        /** A few entries stay spare for completions of QPs destroyed but not yet drained. */
        final AtomicInteger free;
        CompletionPoller poller;

        private LaneCq(Lane lane, IbvCompChannel channel, IbvCQ cq, int capacity) {
            this.lane = lane;
            this.channel = channel;
            this.cq = cq;
            this.capacity = capacity;
            this.free = new AtomicInteger(capacity - 64);
        }

        /** A CQ of {@code entries}, halved down to 1024 while the device refuses. */
        static LaneCq open(IbvContext context, Lane lane, int entries) throws IOException {
            IbvCompChannel compChannel = context.createCompChannel();
            if (compChannel == null) {
                throw new IOException("ibv_create_comp_channel failed");
            }
            IbvCQ queue = null;
            try {
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
            } catch (IOException | RuntimeException e) {
                destroyQuietly(null, compChannel);
                throw e;
            }
            return new LaneCq(lane, compChannel, queue, entries);
        }

        void destroy() {
            destroyQuietly(cq, channel);
        }
    }

    /** The device's type 2 memory windows (0: none, keys are per region), logged once per process when there are none. */
    private static int windowsOf(IbvContext context) {
        int n;
        String why;
        try {
            n = NativeMw.type2Windows(context);
            why = "the device reports no type 2 memory window (ibv_query_device)";
        } catch (IOException | RuntimeException | LinkageError e) {
            n = 0;
            why = "querying memory windows failed: " + e;
        }
        if (n == 0 && WINDOWS_LOGGED.compareAndSet(false, true)) {
            LOG.warn("verbs: {}; a READ key is the memory region's own rkey, which any authenticated data channel that knows it"
                    + " can READ with (keys are per region, not per peer)", why);
        }
        return n;
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
        return register(buffer, access, Verbs.accessFlags(access), false);
    }

    /**
     * With type 2 memory windows: REMOTE_READ memory registered MW_BIND only, so that the region's own
     * rkey READs nothing and each peer READs through its own window ({@link #peerKey}). Without them:
     * {@link #register(ByteBuffer)}.
     */
    @Override
    public MemoryRegion registerForGrants(ByteBuffer buffer) throws TransportException {
        Set<Access> access = Set.of(Access.REMOTE_READ);
        NodeArguments.checkRegister(buffer, access);
        if (type2Windows == 0 || buffer.isReadOnly()) {
            // MW_BIND pins for write (ib_access_writable), which a read-only file mapping refuses: per region there.
            return register(buffer, access);
        }
        return register(buffer, access, Verbs.windowedAccessFlags(), true);
    }

    /** A type 2 window over exactly the range, bound later to one channel, for a region registered for grants. */
    @Override
    public PeerKey peerKey(MemoryRegion region, long address, int length) throws TransportException {
        NodeArguments.checkKeyRange(region, address, length);
        if (!(region instanceof VerbsRegion verbs) || verbs.node() != this || !verbs.windowed()) {
            return PeerKey.ofRegion(region);
        }
        return verbs.newWindow(address, length);
    }

    /** A protection domain of its own: see {@link VerbsDomain}. */
    @Override
    public KeyDomain openKeyDomain() throws TransportException {
        synchronized (registerLock) {
            if (closed.get()) {
                throw new TransportException(Status.FLUSHED, name + " is closed");
            }
            IbvPd domainPd;
            try {
                domainPd = context.allocPd();
            } catch (IOException | RuntimeException e) {
                throw new TransportException(Status.UNAVAILABLE, "ibv_alloc_pd for a key domain of " + name + " failed: " + e, e);
            }
            if (domainPd == null) {
                throw new TransportException(Status.UNAVAILABLE, "ibv_alloc_pd for a key domain of " + name + " failed");
            }
            VerbsDomain domain = new VerbsDomain(this, domainPd, options.maxMessageSize() + Frames.HEADER);
            domains.add(domain);
            return domain;
        }
    }

    /** A registration of exactly the range in the domain's PD (any region of this node, read-only file mappings too). */
    @Override
    public PeerKey peerKey(MemoryRegion region, long address, int length, KeyDomain domain) throws TransportException {
        if (domain == null) {
            return peerKey(region, address, length);
        }
        NodeArguments.checkKeyRange(region, address, length);
        if (!(domain instanceof VerbsDomain verbsDomain) || verbsDomain.node() != this) {
            throw new IllegalArgumentException(domain + " is no key domain of " + name);
        }
        if (!(region instanceof VerbsRegion verbs) || verbs.node() != this) {
            throw new IllegalArgumentException(region + " is no region of " + name);
        }
        return verbsDomain.key(verbs, address, length);
    }

    void forget(VerbsDomain domain) {
        domains.remove(domain);
    }

    void countKeyRegistration() {
        keyRegistrations.incrementAndGet();
    }

    @Override
    public long keyRegistrationCount() {
        return keyRegistrations.get();
    }

    /** As the policy layer uses it: a key domain per peer; what a key made without one is comes after. */
    @Override
    public String keyBinding() {
        return "per peer (key domains: each peer's data channels in a protection domain of its own, each key a registration"
                + " of exactly the granted byte range there, copied and mapped memory alike; a key made without a domain is "
                + (type2Windows > 0 ? "a type 2 memory window bound to the peer's QP, the device holds " + type2Windows
                + ", or the MR's own rkey for a read-only file mapping, which MW_BIND refuses)"
                : "the MR's own rkey: the device binds no type 2 memory window)");
    }

    private MemoryRegion register(ByteBuffer buffer, Set<Access> access, int flags, boolean windowed) throws TransportException {
        ByteBuffer memory = buffer.slice();
        long address = Verbs.address(memory);
        // Read-only memory (a file mapping) is pinned without write access: no LOCAL_WRITE flag.
        synchronized (registerLock) {
            if (closed.get()) {
                throw new TransportException(Status.FLUSHED, name + " is closed");
            }
            IbvMr mr;
            try {
                avoidHugePagesOfPrivateFileMappings(address, memory.capacity());
                mr = Verbs.register(pd, address, memory.capacity(), flags);
            } catch (IOException | RuntimeException e) {
                throw new TransportException(Status.LOCAL_PROTECTION_ERROR, "ibv_reg_mr of " + memory.capacity()
                        + " bytes at 0x" + Long.toHexString(address) + " with " + access + " failed: " + e.getMessage()
                        + registrationHint(memory, e), e);
            }
            VerbsRegion region = new VerbsRegion(this, memory, address, mr, Set.copyOf(access), windowed);
            regions.add(region);
            registrations.incrementAndGet();
            return region;
        }
    }

    /**
     * A private file mapping (MAP_PRIVATE, e.g. MapMode.PRIVATE) is advised MADV_NOHUGEPAGE before it is
     * registered: on Linux 7.2 (ext4) ibv_reg_mr of a read-only one hung otherwise (issue 12's table).
     * EINVAL means a kernel without transparent huge pages, where there is nothing to avoid.
     */
    static void avoidHugePagesOfPrivateFileMappings(long address, long length) throws IOException {
        if (!PrivateFileMappings.overlaps(address, length)) {
            return;
        }
        int rc = NativeMapping.adviseNoHugePages(address, length);
        if (rc != 0 && rc != -22) {
            throw new IOException("madvise(MADV_NOHUGEPAGE) of a private file mapping failed (errno " + -rc
                    + "); not registered, since ibv_reg_mr of such a mapping can hang without it");
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
    public int numaNode() {
        return numaNode;
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
            localAddress = cm.call(() -> cm.listen(options.bindAddress()));
            LOG.debug("{} listening on {}", name, localAddress);
            if (KEYS_LOGGED.compareAndSet(false, true)) {
                LOG.info("verbs: READ keys granted to peers are bound {}; a connect is admitted or refused"
                        + " before its QP exists", keyBinding());
            }
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
        return connect(peer, queueDepth, Lane.BULK, handler, ConnectRequest.OPEN);
    }

    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, Lane lane, ChannelHandler handler) {
        return connect(peer, queueDepth, lane, handler, ConnectRequest.OPEN);
    }

    /**
     * The request's data goes in the RDMA-CM connect's private data, after the lane
     * ({@link ConnectData}), so the peer puts its end in the same lane before its QP exists;
     * without remote read the peer READs nothing here.
     */
    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, Lane lane, ChannelHandler handler,
                                              ConnectRequest request) {
        NodeArguments.checkConnect(peer, queueDepth, handler);
        Objects.requireNonNull(request, "request");
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
        Objects.requireNonNull(lane, "lane");
        VerbsChannel channel = new VerbsChannel(this, nextChannelId(), queueDepth, lane, handler, connected, peer);
        if (!reserveCq(channel)) {
            connected.completeExceptionally(new TransportException(Status.QUEUE_FULL, name + "'s " + lane
                    + " completion queue has room for " + cqFree(lane) + " more entries; a channel of depth " + queueDepth
                    + " needs " + channel.cqEntries + " (verbs.cqEntries)"));
            return connected;
        }
        channel.connectRequest = request;
        addChannel(channel);
        cm.execute(() -> cm.connect(channel, peer));
        return connected;
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
        if (current == cm.thread() || current == bulk.poller.thread() || current == control.poller.thread()
                || bulk.poller.polling.heldByCurrentThread() || control.poller.polling.heldByCurrentThread()) {
            // a completion thread, or a waiter delivering completions: release waits for that delivery to end
            Thread closer = new Thread(this::release, name + "-closer");
            closer.setDaemon(true);
            closer.start();
        } else {
            release();
        }
    }

    /** Waits for both threads, then frees every verbs resource on this thread. */
    private void release() {
        join(cm.thread());
        join(bulk.poller.thread());
        join(control.poller.thread());
        bulk.poller.free(); // no waiter polls after this
        control.poller.free();
        cm.released();
        for (VerbsChannel channel : new ArrayList<>(channels.values())) {
            cm.forget(channel);
            channel.destroy();
        }
        cm.destroyClosing();
        synchronized (registerLock) {
            for (VerbsRegion region : new ArrayList<>(regions)) {
                region.deregister(); // after the QPs are gone: peers see the connection end, not refused READs
            }
        }
        for (VerbsDomain domain : new ArrayList<>(domains)) {
            domain.close(); // its keys; its QPs are gone already
            domain.release();
        }
        sendPool.close();
        cm.destroyListenId();
        bulk.destroy();
        control.destroy();
        destroyQuietly(pd, anchor, events);
        terminated.complete(null);
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

    private static void destroyQuietly(IbvCQ cq, IbvCompChannel compChannel) {
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
    }

    private static void destroyQuietly(IbvPd pd, RdmaCmId anchor, RdmaEventChannel ev) {
        try {
            if (pd != null) {
                pd.deallocPd();
            }
        } catch (Exception e) {
            LOG.debug("ibv_dealloc_pd failed: {}", e.toString());
        }
        if (anchor != null) {
            CmEventLoop.destroyId(anchor);
        }
        try {
            if (ev != null) {
                ev.destroyEventChannel();
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("rdma_destroy_event_channel failed: {}", e.toString());
        }
    }

    // ================================================================ the channel table and the CQ's room

    static int nextChannelId() {
        return CHANNEL_IDS.incrementAndGet();
    }

    void addChannel(VerbsChannel channel) {
        channels.put(channel.id, channel);
    }

    /** The channel with this id, or null once it is forgotten (its QP destroyed). */
    VerbsChannel channel(int id) {
        return channels.get(id);
    }

    Collection<VerbsChannel> channels() {
        return channels.values();
    }

    /** Drops a channel whose QP is being destroyed; its CQ entries return to its lane's CQ. */
    void forgetChannel(VerbsChannel channel) {
        channel.forgotten = true;
        if (channels.remove(channel.id, channel)) {
            laneCq(channel.lane).free.addAndGet(channel.cqEntries);
        }
    }

    /** Takes the entries a channel needs from its lane's CQ; false when that CQ has no room for them. */
    boolean reserveCq(VerbsChannel channel) {
        AtomicInteger cqFree = laneCq(channel.lane).free;
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

    /** Gives back what {@link #reserveCq} took, for a channel that never came to be. */
    void releaseCq(VerbsChannel channel) {
        laneCq(channel.lane).free.addAndGet(channel.cqEntries);
    }

    int cqFree(Lane lane) {
        return laneCq(lane).free.get();
    }

    private LaneCq laneCq(Lane lane) {
        return lane == Lane.CONTROL ? control : bulk;
    }

    boolean isClosed() {
        return closed.get();
    }

    /** A node thread failed: the node counts as closed, so both threads stop. */
    void markClosed() {
        closed.set(true);
    }

    /** A node thread died of {@code cause}: {@link #terminated()} says so. */
    void failed(Throwable cause) {
        terminated.completeExceptionally(cause);
    }

    @Override
    public CompletableFuture<Void> terminated() {
        return terminated;
    }

    // ================================================================ for the channels

    /** A channel closed: the CM thread destroys its QP and id once the peer acknowledged, or after a grace period. */
    void closing(VerbsChannel channel) {
        cm.closing(channel);
    }

    /** Runs a task on the CM thread after the current work, never inline (used under channel locks). */
    void later(Runnable task) {
        cm.later(task);
    }

    IbvContext context() {
        return context;
    }

    IbvPd pd() {
        return pd;
    }

    /** The poller of a lane's CQ: a READ's waiter polls through it in hybrid mode. */
    CompletionPoller poller(Lane lane) {
        return laneCq(lane).poller;
    }

    /** The completion queue of a lane's channels. */
    IbvCQ cq(Lane lane) {
        return laneCq(lane).cq;
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

    /** Longest work request of a READ (see VerbsChannel); a READ of 8 MiB takes at most SQ_SPARE of them. */
    int readPiece() {
        return options.verbs().readPieceBytes();
    }

    /** Receive buffers a channel posts: its depth, within [8, verbs.receiveBuffers]. */
    int receiveBuffers(int queueDepth) {
        return Math.max(VerbsOptions.MIN_RECEIVE_BUFFERS, Math.min(options.verbs().receiveBuffers(), queueDepth));
    }

    @Override
    public String toString() {
        return name + (localAddress == null ? "" : "@" + localAddress);
    }
}

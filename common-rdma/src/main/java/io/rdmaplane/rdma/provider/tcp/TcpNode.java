package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelAcceptor;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeArguments;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.PeerKey;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A tcp node: a region table and two selector threads ({@link TcpLoop}s), one per {@link Lane},
 * that do all socket I/O. READ requests from peers are served straight from the region table on
 * the thread of their channel's lane (the bulk one, for data channels); no application code runs
 * on the serving side. Callbacks and completions run on that thread too, so a control message
 * never waits for bulk copying.
 * An accepted channel starts on the control thread and moves to its connector's lane with the
 * connector's HELLO.
 */
public final class TcpNode implements Node {
    private static final Logger LOG = LoggerFactory.getLogger(TcpNode.class);
    private static final AtomicInteger NODE_IDS = new AtomicInteger();
    /**
     * Virtual addresses are random pages in [2^44, 2^47) with a gap page around each region, so
     * none are adjacent and one region's address says nothing about another's.
     */
    private static final long LOWEST_PAGE = 1L << 32;
    private static final long PAGES = (1L << 35) - (1L << 32);
    private static final long PAGE = 4096;
    /** rkeys and addresses a peer could otherwise predict from the ones it was handed (issue 11). */
    private static final SecureRandom KEYS = new SecureRandom();

    final NodeOptions options;
    private final String name;
    private final TcpLoop controlLoop;
    private final TcpLoop bulkLoop;
    private final Map<Integer, TcpRegion> regions = new ConcurrentHashMap<>();
    /** Keys of grants ({@link #peerKey}); their rkeys and the regions' are drawn apart (under the regions lock). */
    private final Map<Integer, TcpKey> keys = new ConcurrentHashMap<>();
    private final AtomicLong registrations = new AtomicLong();
    private volatile boolean closed;
    private volatile InetSocketAddress localAddress;
    private volatile ServerSocketChannel server;
    private ChannelAcceptor acceptor;
    private final CompletableFuture<Void> terminated = new CompletableFuture<>();

    TcpNode(NodeOptions options) throws TransportException {
        this.options = options;
        this.name = "rdma-tcp-node-" + NODE_IDS.incrementAndGet();
        long tickMillis = Math.max(5, Math.min(50, options.operationTimeout().toMillis() / 4));
        this.controlLoop = new TcpLoop(this, Lane.CONTROL, tickMillis, null);
        TcpLoop bulk;
        try {
            bulk = new TcpLoop(this, Lane.BULK, tickMillis, controlLoop);
        } catch (TransportException e) {
            closeQuietly(controlLoop.selector());
            throw e;
        }
        this.bulkLoop = bulk;
        controlLoop.start();
        bulkLoop.start();
    }

    /** The loop that serves channels of {@code lane}. */
    TcpLoop loop(Lane lane) {
        return lane == Lane.CONTROL ? controlLoop : bulkLoop;
    }

    @Override
    public CompletableFuture<Void> terminated() {
        return terminated;
    }

    @Override
    public String providerName() {
        return TcpProvider.NAME;
    }

    @Override
    public MemoryRegion register(ByteBuffer buffer, Set<Access> access) throws TransportException {
        NodeArguments.checkRegister(buffer, access);
        if (closed) {
            throw new TransportException(Status.FLUSHED, name + " is closed");
        }
        ByteBuffer memory = buffer.slice();
        TcpRegion region;
        synchronized (regions) { // one registration at a time, so two never pick overlapping addresses
            long address;
            do {
                address = (LOWEST_PAGE + (KEYS.nextLong() >>> 1) % PAGES) * PAGE;
            } while (overlaps(address, memory.capacity()));
            region = new TcpRegion(this, memory, address, freshRkey(), Set.copyOf(access));
            regions.put(region.rkey(), region);
        }
        registrations.incrementAndGet();
        return region;
    }

    /** An rkey neither a region nor a key has, from the CSPRNG; holds the regions lock. */
    private int freshRkey() {
        int rkey;
        do {
            rkey = KEYS.nextInt();
        } while (rkey == 0 || regions.containsKey(rkey) || keys.containsKey(rkey));
        return rkey;
    }

    /**
     * A key of its own for one grant of [address, address + length) of a region of this node
     * ({@link TcpKey}), whether or not it was registered for grants: tcp checks every READ, so every
     * region can be granted by range and channel. The region's own rkey keeps working where the
     * channel's handler permits it ({@link io.rdmaplane.rdma.provider.ChannelHandler#permitsRemoteRead}).
     */
    @Override
    public PeerKey peerKey(MemoryRegion region, long address, int length) throws TransportException {
        NodeArguments.checkKeyRange(region, address, length);
        if (!(region instanceof TcpRegion tcp) || tcp.node() != this) {
            throw new IllegalArgumentException(region + " is no region of " + name);
        }
        TcpKey key;
        synchronized (regions) {
            key = new TcpKey(tcp, freshRkey(), address, length);
            keys.put(key.rkey(), key);
        }
        if (!tcp.keep(key)) {
            key.revoke(); // deregistered meanwhile: the key READs nothing
        }
        return key;
    }

    @Override
    public String keyBinding() {
        return "per grant (a key of its own per peer and byte range, from a CSPRNG, READ only on the channel it was bound"
                + " to; checked by the provider on every READ)";
    }

    /** The live key with this rkey, or null. */
    TcpKey key(int rkey) {
        return keys.get(rkey);
    }

    void forget(TcpKey key) {
        keys.remove(key.rkey(), key);
    }

    /** Keys made so far and not revoked; for tests. */
    int liveKeys() {
        return keys.size();
    }

    /** Whether [address, address + length) comes within a page of a registered region. */
    private boolean overlaps(long address, int length) {
        for (TcpRegion region : regions.values()) {
            if (address < region.address() + region.length() + PAGE && region.address() < address + length + PAGE) {
                return true;
            }
        }
        return false;
    }

    /** The valid region with this rkey, or null. */
    TcpRegion region(int rkey) {
        return regions.get(rkey);
    }

    void forget(TcpRegion region) {
        regions.remove(region.rkey(), region);
    }

    @Override
    public long registrationCount() {
        return registrations.get();
    }

    @Override
    public synchronized void listen(ChannelAcceptor acceptor) throws TransportException {
        Objects.requireNonNull(acceptor, "acceptor");
        if (server != null) {
            throw new IllegalStateException(name + " is already listening on " + localAddress);
        }
        if (closed) {
            throw new TransportException(Status.FLUSHED, name + " is closed");
        }
        try {
            ServerSocketChannel socket = ServerSocketChannel.open();
            socket.bind(options.bindAddress(), 1024);
            socket.configureBlocking(false);
            this.acceptor = acceptor;
            this.server = socket;
            this.localAddress = (InetSocketAddress) socket.getLocalAddress();
            CompletableFuture<Void> registered = new CompletableFuture<>();
            controlLoop.execute(() -> {
                try {
                    socket.register(controlLoop.selector(), SelectionKey.OP_ACCEPT);
                    registered.complete(null);
                } catch (IOException e) {
                    registered.completeExceptionally(e);
                }
            });
            registered.get(10, TimeUnit.SECONDS);
            LOG.debug("{} listening on {}", name, localAddress);
        } catch (Exception e) {
            throw new TransportException(Status.UNAVAILABLE,
                    "cannot listen on " + options.bindAddress() + ": " + e, e);
        }
    }

    @Override
    public InetSocketAddress localAddress() {
        return localAddress;
    }

    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, ChannelHandler handler) {
        return connect(peer, queueDepth, Lane.BULK, handler);
    }

    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, Lane lane, ChannelHandler handler) {
        NodeArguments.checkConnect(peer, queueDepth, handler);
        Objects.requireNonNull(lane, "lane");
        CompletableFuture<Channel> connected = new CompletableFuture<>();
        if (closed) {
            connected.completeExceptionally(new TransportException(Status.FLUSHED, name + " is closed"));
            return connected;
        }
        if (peer.isUnresolved()) {
            connected.completeExceptionally(new TransportException(Status.RETRY_EXCEEDED, "cannot resolve " + peer));
            return connected;
        }
        TcpLoop loop = loop(lane);
        loop.execute(() -> {
            if (closed) {
                connected.completeExceptionally(new TransportException(Status.FLUSHED, name + " is closed"));
                return;
            }
            try {
                SocketChannel socket = SocketChannel.open();
                configure(socket);
                TcpChannel channel = new TcpChannel(this, loop, lane, socket, queueDepth, handler, connected);
                loop.added(channel);
                channel.startConnect(peer);
            } catch (IOException | RuntimeException e) {
                connected.completeExceptionally(new TransportException(Status.RETRY_EXCEEDED,
                        "cannot connect to " + peer + ": " + e, e));
            }
        });
        return connected;
    }

    private static void configure(SocketChannel socket) throws IOException {
        socket.configureBlocking(false);
        socket.setOption(StandardSocketOptions.TCP_NODELAY, true);
    }

    String name() {
        return name;
    }

    /**
     * A loop thread died: the node is closed and says why ({@link #terminated()}), as after a
     * close, so a service watching it does not claim to run.
     */
    void loopFailed(Throwable cause) {
        closed = true;
        terminated.completeExceptionally(cause);
        controlLoop.stop();
        bulkLoop.stop();
        closeServer();
    }

    private synchronized void closeServer() {
        if (server != null) {
            closeQuietly(server);
        }
    }

    /** Accepts what is waiting, on {@code loop} (the control loop): HELLOs move channels to their lanes. */
    void acceptAll(TcpLoop loop) {
        for (int i = 0; i < 64; i++) {
            SocketChannel socket;
            try {
                socket = server.accept();
                if (socket == null) {
                    return;
                }
                configure(socket);
            } catch (IOException e) {
                LOG.warn("{}: accept failed: {}", name, e.toString());
                return;
            }
            try {
                TcpChannel channel = new TcpChannel(this, loop, Lane.CONTROL, socket, options.acceptQueueDepth(), null, null);
                loop.added(channel);
                channel.startAccepted();
            } catch (IOException e) {
                LOG.warn("{}: cannot set up the channel from {}: {}", name, socket, e.toString());
                closeQuietly(socket);
            }
        }
    }

    /** Who chooses the handlers of accepted channels; set before the first one is accepted. */
    ChannelAcceptor acceptor() {
        return acceptor;
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        controlLoop.stop();
        bulkLoop.stop();
        closeServer();
        // After the channels are down, so peers see the connection end rather than refused READs.
        for (TcpRegion region : regions.values()) {
            region.deregister();
        }
        terminated.complete(null);
        LOG.debug("{} closed", name);
    }

    static void closeQuietly(java.io.Closeable closeable) {
        try {
            closeable.close();
        } catch (IOException e) {
            LOG.trace("close failed", e);
        }
    }

    @Override
    public String toString() {
        return name + (localAddress == null ? "" : "@" + localAddress);
    }
}

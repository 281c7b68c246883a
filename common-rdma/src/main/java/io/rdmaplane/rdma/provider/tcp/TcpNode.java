package io.rdmaplane.rdma.provider.tcp;

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
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
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
 * A tcp node: a region table and one selector thread that does all socket I/O. READ requests
 * from peers are served on that thread straight from the region table; no application code
 * runs on the serving side. Callbacks and completions run on that thread too.
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
    private static final int CROWDED_TURN_BYTES = 256 << 10;
    private static final int ALONE_TURN_BYTES = 8 << 20;

    final NodeOptions options;
    private final String name;
    private final Selector selector;
    private final Thread loop;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean wakeupPending = new AtomicBoolean();
    private final Map<Integer, TcpRegion> regions = new ConcurrentHashMap<>();
    private final Set<TcpChannel> channels = ConcurrentHashMap.newKeySet();
    private final java.util.ArrayDeque<TcpChannel> toFlush = new java.util.ArrayDeque<>(); // node thread only
    private final AtomicLong registrations = new AtomicLong();
    private final long tickMillis;
    private boolean crowded; // node thread only
    private volatile boolean closed;
    private volatile InetSocketAddress localAddress;
    private ServerSocketChannel server;
    private ChannelAcceptor acceptor;
    private final CompletableFuture<Void> terminated = new CompletableFuture<>();

    TcpNode(NodeOptions options) throws TransportException {
        this.options = options;
        this.name = "rdma-tcp-node-" + NODE_IDS.incrementAndGet();
        this.tickMillis = Math.max(5, Math.min(50, options.operationTimeout().toMillis() / 4));
        try {
            this.selector = Selector.open();
        } catch (IOException e) {
            throw new TransportException(Status.UNAVAILABLE, "cannot open a selector: " + e, e);
        }
        this.loop = new Thread(this::runLoop, name);
        loop.setDaemon(true);
        loop.start();
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
            do {
                int rkey = KEYS.nextInt();
                region = rkey == 0 ? null : new TcpRegion(this, memory, address, rkey, Set.copyOf(access));
            } while (region == null || regions.putIfAbsent(region.rkey(), region) != null);
        }
        registrations.incrementAndGet();
        return region;
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
            execute(() -> {
                try {
                    socket.register(selector, SelectionKey.OP_ACCEPT);
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
        NodeArguments.checkConnect(peer, queueDepth, handler);
        CompletableFuture<Channel> connected = new CompletableFuture<>();
        if (closed) {
            connected.completeExceptionally(new TransportException(Status.FLUSHED, name + " is closed"));
            return connected;
        }
        if (peer.isUnresolved()) {
            connected.completeExceptionally(new TransportException(Status.RETRY_EXCEEDED, "cannot resolve " + peer));
            return connected;
        }
        execute(() -> {
            if (closed) {
                connected.completeExceptionally(new TransportException(Status.FLUSHED, name + " is closed"));
                return;
            }
            try {
                SocketChannel socket = SocketChannel.open();
                configure(socket);
                TcpChannel channel = new TcpChannel(this, socket, queueDepth, handler, connected);
                channels.add(channel);
                channel.startConnect(selector, peer);
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

    /** Runs a task on the node's thread (at once if called from it). */
    void execute(Runnable task) {
        if (Thread.currentThread() == loop) {
            task.run();
            return;
        }
        tasks.add(task);
        if (wakeupPending.compareAndSet(false, true)) {
            selector.wakeup();
        }
        if (closed && !loop.isAlive()) {
            runTasks(); // the thread is gone: settle the task here rather than lose it
        }
    }

    private void runTasks() {
        for (Runnable task; (task = tasks.poll()) != null; ) {
            try {
                task.run();
            } catch (Throwable e) { // an Error too: one task's failure never stops the node's thread
                LOG.error("{}: task failed", name, e);
            }
        }
    }

    /**
     * Flushes the channel soon: at the end of the current loop turn when called on the node's
     * thread (so the writes of many completions go out in one system call), else via a task.
     */
    void scheduleFlush(TcpChannel channel) {
        if (inLoop()) {
            toFlush.add(channel);
        } else {
            execute(channel::flush);
        }
    }

    /** Bytes one channel may read or write per loop turn before the others get theirs. */
    int turnBytes() {
        return crowded ? CROWDED_TURN_BYTES : ALONE_TURN_BYTES;
    }

    boolean inLoop() {
        return Thread.currentThread() == loop;
    }

    void removed(TcpChannel channel) {
        channels.remove(channel);
    }

    String name() {
        return name;
    }

    private void runLoop() {
        try {
            while (!closed) {
                selector.select(tickMillis);
                wakeupPending.set(false);
                runTasks();
                // Several channels with work this turn: each takes a small share, so a control message
                // never waits behind megabytes of another channel. One alone may move more per call.
                crowded = selector.selectedKeys().size() > 1 || !toFlush.isEmpty() || channels.size() > 1;
                Iterator<SelectionKey> keys = selector.selectedKeys().iterator();
                while (keys.hasNext()) {
                    SelectionKey key = keys.next();
                    keys.remove();
                    handle(key);
                }
                for (TcpChannel channel; (channel = toFlush.poll()) != null; ) {
                    guarded(channel, channel::flush);
                }
                long now = System.nanoTime();
                for (TcpChannel channel : channels) {
                    channel.checkTimeout(now);
                }
            }
        } catch (Throwable t) {
            LOG.error("{}: transport thread failed; closing the node", name, t);
            closed = true;
            terminated.completeExceptionally(t);
        } finally {
            shutdown();
        }
    }

    private void handle(SelectionKey key) {
        if (!key.isValid()) {
            return;
        }
        if (key.attachment() == null) {
            if (key.isAcceptable()) {
                acceptAll();
            }
            return;
        }
        TcpChannel channel = (TcpChannel) key.attachment();
        guarded(channel, () -> {
            if (key.isConnectable()) {
                channel.onConnectable();
                return;
            }
            if (key.isWritable()) {
                channel.flush();
            }
            if (key.isValid() && key.isReadable()) {
                channel.onReadable();
            }
        });
    }

    /**
     * Runs channel work on the node thread: a failure costs that channel, never the node. An Error
     * too (a handler's OutOfMemoryError or StackOverflowError): the thread itself is fine.
     */
    private void guarded(TcpChannel channel, Runnable work) {
        try {
            work.run();
        } catch (CancelledKeyException e) {
            // the channel was closed from another thread meanwhile: nothing left to do
        } catch (Throwable e) {
            LOG.error("{}: unexpected failure on {}; closing that channel", name, channel, e);
            channel.terminate(new TransportException(Status.FLUSHED, "internal error: " + e, e), 0, Status.FLUSHED);
        }
    }

    private void acceptAll() {
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
                TcpChannel channel = new TcpChannel(this, socket, options.acceptQueueDepth(), null, null);
                channels.add(channel);
                channel.startAccepted(selector);
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

    private void shutdown() {
        TransportException closing = new TransportException(Status.FLUSHED, name + " closed");
        for (TcpChannel channel : new ArrayList<>(channels)) {
            channel.terminate(closing, 0, Status.FLUSHED);
        }
        runTasks();
        if (server != null) {
            closeQuietly(server);
        }
        closeQuietly(selector);
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        selector.wakeup();
        if (!inLoop()) {
            try {
                loop.join(TimeUnit.SECONDS.toMillis(10));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            runTasks();
        }
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

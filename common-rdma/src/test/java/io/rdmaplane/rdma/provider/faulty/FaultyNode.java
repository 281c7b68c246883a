package io.rdmaplane.rdma.provider.faulty;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.Admission;
import io.rdmaplane.rdma.provider.ChannelAcceptor;
import io.rdmaplane.rdma.provider.ConnectRequest;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.KeyDomain;
import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.PeerKey;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A node that hands everything to another provider's node and injects the faults a test arms, as
 * this node would see them on a bad link or a dying host. Only through the SPI, so the layers above
 * are tested against faults without a hook in any production class:
 * <ul>
 * <li>{@link #cutConnections()}: every channel of this node breaks at once, as a pulled cable;</li>
 * <li>{@link #stall(boolean)}: this node's peers stop answering it (completions and messages are
 * held back, then delivered in order), as a hung link;</li>
 * <li>{@link #crawl(boolean)}: as a stall, but bytes keep arriving (the peer is heard), as a link
 * so saturated that nothing completes and every answer waits behind bulk data;</li>
 * <li>{@link #corruptReads(int)} and {@link #corruptSends(int)}: one bit flipped in what lands here
 * or leaves here, as corruption on the wire;</li>
 * <li>{@link #refuseReads(int)}: READs go out with a key the peer never granted, and the peer's own
 * provider refuses them (and closes the channel, as it does), as a key revoked at the peer;</li>
 * <li>{@link #grantUnknownKeys(int)}: the keys this node makes for peers go out with an rkey its own
 * provider never made, so it refuses the peers' READs with them, as a key revoked between its grant
 * and the READ;</li>
 * <li>{@link #refuseConnects(Lane, int)}: connects this node makes in a lane end {@link Status#CONNECTION_REFUSED}
 * without reaching the peer, as a verbs peer's CM turning a connect away;</li>
 * <li>{@link #closeAfterRequests(int)}: the node closes itself after answering so many requests, as
 * a host dying mid-job;</li>
 * <li>{@link #dieAfterRequests(int)}: likewise, but as a transport thread dying of an Error:
 * {@link #terminated()} completes exceptionally.</li>
 * </ul>
 */
public final class FaultyNode implements Node {
    private static final Logger LOG = LoggerFactory.getLogger(FaultyNode.class);

    private final Node inner;
    private final Set<FaultyChannel> channels = ConcurrentHashMap.newKeySet();
    /** The lane of each channel this node connected. */
    private final java.util.Map<FaultyChannel, Lane> lanes = new ConcurrentHashMap<>();
    private final AtomicInteger readsToCorrupt = new AtomicInteger();
    private final AtomicInteger sendsToCorrupt = new AtomicInteger();
    private final AtomicInteger readsToRefuse = new AtomicInteger();
    private final AtomicInteger readsRefused = new AtomicInteger();
    private final AtomicInteger keysToSpoil = new AtomicInteger();
    private final java.util.Map<Lane, AtomicInteger> connectsToRefuse = new ConcurrentHashMap<>();
    private final AtomicInteger requests = new AtomicInteger();
    private final AtomicInteger registrationsTried = new AtomicInteger();
    private volatile boolean registrationsFail;
    private volatile int closeAfterRequests;
    private volatile int dieAfterRequests;
    private final CompletableFuture<Void> terminated = new CompletableFuture<>();
    private volatile boolean stalled;
    private volatile boolean crawling;
    private volatile boolean closed;

    public FaultyNode(Node inner) {
        this.inner = Objects.requireNonNull(inner, "inner");
        inner.terminated().whenComplete((done, cause) -> {
            if (cause != null) {
                terminated.completeExceptionally(cause);
            } else {
                terminated.complete(null);
            }
        });
    }

    // ---------------------------------------------------------------- the faults

    /** Breaks every channel of this node now: its handlers and its peers see the connection lost. */
    public void cutConnections() {
        LOG.warn("fault injection: cutting {} channels of {}", channels.size(), this);
        for (FaultyChannel channel : List.copyOf(channels)) {
            channel.cut();
        }
    }

    /** Breaks the channels this node connected in {@code lane} now (e.g. only a client's control channels). */
    public void cutConnections(Lane lane) {
        for (FaultyChannel channel : List.copyOf(channels)) {
            if (lanes.get(channel) == lane) {
                channel.cut();
            }
        }
    }

    /**
     * Stops (or resumes) what this node hears from its peers: completions of its operations and the
     * messages it receives wait until the stall ends. A channel closed here meanwhile settles at once.
     */
    public void stall(boolean stall) {
        stalled = stall;
        if (!stall) {
            for (FaultyChannel channel : List.copyOf(channels)) {
                channel.resume();
            }
        }
    }

    /**
     * Starts (or ends) a crawl: what this node hears from its peers waits as in a {@link #stall}, but its
     * channels keep reporting bytes arriving ({@link io.rdmaplane.rdma.provider.Channel#lastHeardNanos}).
     */
    public void crawl(boolean crawl) {
        crawling = crawl;
        stall(crawl);
    }

    boolean crawling() {
        return crawling && !closed;
    }

    /** The next {@code connects} connects this node makes in {@code lane} end CONNECTION_REFUSED, never reaching the peer. */
    public void refuseConnects(Lane lane, int connects) {
        connectsToRefuse.computeIfAbsent(lane, l -> new AtomicInteger()).set(connects);
    }

    /** While on, every registration fails as on a node whose device went away (LOCAL_PROTECTION_ERROR). */
    public void failRegistrations(boolean fail) {
        registrationsFail = fail;
    }

    /** Registrations asked of this node so far, failed ones included. */
    public int registrationsTried() {
        return registrationsTried.get();
    }

    /** Flips one bit in each of the next {@code reads} READ payloads that land on this node. */
    public void corruptReads(int reads) {
        readsToCorrupt.set(reads);
    }

    /**
     * READs this node posts carry their key with every bit flipped (one the peer never granted, so the peer
     * refuses them as it refuses a revoked or forged key) until the peer has refused {@code reads} of them. A
     * READ with a flipped key that a closing channel flushed before the peer saw it is not counted: re-issued,
     * it goes out flipped again.
     */
    public void refuseReads(int reads) {
        readsToRefuse.set(reads);
    }

    /** READs with a flipped key that the peer refused so far (see {@link #refuseReads}). */
    public int readsRefused() {
        return readsRefused.get();
    }

    /**
     * The next {@code keys} keys this node makes for peers ({@link #peerKey}) hand out their rkey with every
     * bit flipped, one this node's provider never made: it refuses every READ with it. Such a key does not
     * outlive its channel, so a grant after the refusal makes a new one.
     */
    public void grantUnknownKeys(int keys) {
        keysToSpoil.set(keys);
    }

    /** Flips one bit in each of the next {@code messages} messages this node sends. */
    public void corruptSends(int messages) {
        sendsToCorrupt.set(messages);
    }

    /**
     * Closes this node (from another thread, as its own transport thread cannot) once it has answered
     * {@code count} more requests: messages on channels peers opened to it, after each channel's first
     * (the policy layer's HELLO; without a secret the handshake is that one message).
     */
    public void closeAfterRequests(int count) {
        if (count < 1) {
            throw new IllegalArgumentException("closeAfterRequests needs at least 1 request, was " + count);
        }
        requests.set(0);
        closeAfterRequests = count;
    }

    /** After answering {@code count} requests the node dies as if its transport thread failed with an Error. */
    public void dieAfterRequests(int count) {
        if (count < 1) {
            throw new IllegalArgumentException("dieAfterRequests needs at least 1 request, was " + count);
        }
        requests.set(0);
        dieAfterRequests = count;
    }

    /** Requests answered by this node so far (see {@link #closeAfterRequests}). */
    public int requestsAnswered() {
        return requests.get();
    }

    // ---------------------------------------------------------------- what the channels ask

    boolean holds() {
        return stalled && !closed;
    }

    boolean takeReadToCorrupt() {
        return readsToCorrupt.get() > 0 && readsToCorrupt.getAndDecrement() > 0;
    }

    boolean refusesReads() {
        return readsToRefuse.get() > 0;
    }

    /** The peer refused a READ this node sent with a flipped key. */
    void refused() {
        readsToRefuse.decrementAndGet();
        readsRefused.incrementAndGet();
    }

    boolean takeSendToCorrupt() {
        return sendsToCorrupt.get() > 0 && sendsToCorrupt.getAndDecrement() > 0;
    }

    void answered() {
        int done = requests.incrementAndGet();
        if (done == closeAfterRequests) {
            LOG.error("########## TEST FAULT INJECTED: closing the node {} after it answered {} requests ##########", this, done);
            Thread closer = new Thread(this::close, "rdma-fault-close");
            closer.setDaemon(true);
            closer.start();
        }
        if (done == dieAfterRequests) {
            LOG.error("########## TEST FAULT INJECTED: the transport of {} dies after it answered {} requests ##########", this,
                    done);
            terminated.completeExceptionally(new InternalError("fault injection: the transport thread died"));
            Thread closer = new Thread(this::close, "rdma-fault-die");
            closer.setDaemon(true);
            closer.start();
        }
    }

    void opened(FaultyChannel channel) {
        channels.add(channel);
    }

    void forget(FaultyChannel channel) {
        channels.remove(channel);
        lanes.remove(channel);
    }

    // ---------------------------------------------------------------- Node, passed on

    @Override
    public MemoryRegion register(ByteBuffer buffer, Set<Access> access) throws TransportException {
        registrationsTried.incrementAndGet();
        if (registrationsFail) {
            throw new TransportException(Status.LOCAL_PROTECTION_ERROR, "the device is gone (test)");
        }
        return inner.register(buffer, access);
    }

    @Override
    public MemoryRegion registerForGrants(ByteBuffer buffer) throws TransportException {
        registrationsTried.incrementAndGet();
        if (registrationsFail) {
            throw new TransportException(Status.LOCAL_PROTECTION_ERROR, "the device is gone (test)");
        }
        return inner.registerForGrants(buffer);
    }

    @Override
    public PeerKey peerKey(MemoryRegion region, long address, int length) throws TransportException {
        return spoiled(inner.peerKey(region, address, length));
    }

    @Override
    public long keyRegistrationCount() {
        return inner.keyRegistrationCount();
    }

    @Override
    public KeyDomain openKeyDomain() throws TransportException {
        return inner.openKeyDomain();
    }

    @Override
    public PeerKey peerKey(MemoryRegion region, long address, int length, KeyDomain domain) throws TransportException {
        return spoiled(inner.peerKey(region, address, length, domain));
    }

    /** The key, or, while {@link #grantUnknownKeys} asks for it, the key handed out with an rkey never made. */
    private PeerKey spoiled(PeerKey key) {
        if (keysToSpoil.get() <= 0 || keysToSpoil.getAndDecrement() <= 0) {
            return key;
        }
        return new PeerKey() {
            @Override
            public int rkey() {
                return ~key.rkey();
            }

            @Override
            public boolean boundToPeer() {
                return key.boundToPeer();
            }

            @Override
            public CompletableFuture<Void> bindTo(Channel channel) {
                return key.bindTo(channel);
            }

            @Override
            public void revoke() {
                key.revoke();
            }

            @Override
            public String toString() {
                return key + " handed out as rkey " + Integer.toHexString(~key.rkey()) + " (fault injection)";
            }
        };
    }

    @Override
    public String keyBinding() {
        return inner.keyBinding();
    }

    @Override
    public void listen(ChannelAcceptor acceptor) throws TransportException {
        Objects.requireNonNull(acceptor, "acceptor");
        inner.listen(new ChannelAcceptor() {
            @Override
            public ChannelHandler accept(Channel channel) {
                FaultyChannel faulty = new FaultyChannel(FaultyNode.this, channel);
                ChannelHandler handler = acceptor.accept(faulty);
                if (handler == null) {
                    forget(faulty); // rejected: the wrapped node closes it
                    return null;
                }
                return faulty.acceptedWith(handler);
            }

            @Override
            public Admission admit(java.net.SocketAddress from, ByteBuffer connectData) {
                return acceptor.admit(from, connectData);
            }

            @Override
            public KeyDomain keyDomain(java.net.SocketAddress from, ByteBuffer connectData) {
                return acceptor.keyDomain(from, connectData);
            }
        });
    }

    @Override
    public InetSocketAddress localAddress() {
        return inner.localAddress();
    }

    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, ChannelHandler handler) {
        return connect(peer, queueDepth, Lane.BULK, handler);
    }

    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, Lane lane,
                                              ChannelHandler handler) {
        return connect(peer, queueDepth, lane, handler, ConnectRequest.OPEN);
    }

    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, Lane lane, ChannelHandler handler,
                                              ConnectRequest request) {
        Objects.requireNonNull(handler, "handler");
        AtomicInteger refusals = connectsToRefuse.get(lane);
        if (refusals != null && refusals.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            LOG.warn("fault injection: refusing a {} connect to {}", lane, peer);
            return CompletableFuture.failedFuture(new TransportException(Status.CONNECTION_REFUSED,
                    "cannot connect to " + peer + ": refused (fault injection)"));
        }
        FaultyChannel faulty = new FaultyChannel(this, handler);
        lanes.put(faulty, lane);
        return inner.connect(peer, queueDepth, lane, faulty.fromInner(), request).thenApply(faulty::connected);
    }

    @Override
    public long registrationCount() {
        return inner.registrationCount();
    }

    @Override
    public String providerName() {
        return FaultyProvider.NAME;
    }

    @Override
    public CompletableFuture<Void> terminated() {
        return terminated;
    }

    @Override
    public void close() {
        closed = true;
        inner.close();
    }

    @Override
    public String toString() {
        return "faulty " + inner;
    }
}

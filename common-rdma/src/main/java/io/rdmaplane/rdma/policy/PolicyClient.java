package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.Node;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reading side of the policy layer in one process: one {@link PeerConnection} per peer,
 * created on first use and shared; the total READ budget; one daemon timer thread for
 * backoffs, request retries and the detection-window checks.
 */
public final class PolicyClient implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PolicyClient.class);
    private static final AtomicInteger IDS = new AtomicInteger();

    /** What the policy layer does, for tests and tools that watch it; all methods may be called concurrently. */
    public interface Listener {
        default void stateChanged(InetSocketAddress peer, TrafficClass trafficClass, ChannelState from, ChannelState to) {
        }

        /** A reconnect attempt was planned to start {@code delayNanos} from now (backoff plus jitter). */
        default void reconnectScheduled(InetSocketAddress peer, TrafficClass trafficClass, int attempt, long delayNanos) {
        }

        default void reconnectAttempted(InetSocketAddress peer, TrafficClass trafficClass, int attempt) {
        }
    }

    /**
     * Who knows whether a peer is gone for good (in Spark: the driver's registry, told by Spark when it
     * removes an executor). Asked when a connect attempt to the peer fails: true gives the peer up at
     * once, so callers fall back without waiting through the remaining reconnect attempts.
     */
    @FunctionalInterface
    public interface Liveness {
        Liveness UNKNOWN = (peer, refused) -> CompletableFuture.completedFuture(false);
        /**
         * A refused connect is taken as the peer gone (its callers fall back at once; the next use connects
         * anew): for a client with another way to the same data, such as HDFS's TCP reader and other replicas.
         */
        Liveness REFUSED_IS_GONE = (peer, refused) -> CompletableFuture.completedFuture(refused);

        /**
         * Completes with true when nothing serves at {@code peer} any more; must not block. {@code refused}: the
         * failed attempt was turned away (nothing listens there), not timed out.
         */
        CompletableFuture<Boolean> declaredLost(InetSocketAddress peer, boolean refused);
    }

    private final Node node;
    private final Liveness liveness;
    private final PolicyOptions options;
    private final PolicyMetrics metrics;
    private final Listener listener;
    /** The id this process goes by at each peer: a server never learns the id another server knows it by. */
    private final Map<InetSocketAddress, UUID> instances = new ConcurrentHashMap<>();
    private final Map<InetSocketAddress, PeerConnection> peers = new ConcurrentHashMap<>();
    private final Set<PeerConnection> dedicated = ConcurrentHashMap.newKeySet();
    private final AtomicLong bytesInFlight = new AtomicLong();
    private final AtomicBoolean starved = new AtomicBoolean();
    private final AtomicLong requestIds = new AtomicLong();
    private final ScheduledThreadPoolExecutor timer;
    private final long tickNanos;
    private long lastTick; // only the timer thread touches it
    private volatile boolean closed;

    public PolicyClient(Node node, PolicyOptions options, PolicyMetrics metrics) {
        this(node, options, metrics, new Listener() { });
    }

    public PolicyClient(Node node, PolicyOptions options, PolicyMetrics metrics, Listener listener) {
        this(node, options, metrics, listener, Liveness.UNKNOWN);
    }

    public PolicyClient(Node node, PolicyOptions options, PolicyMetrics metrics, Listener listener, Liveness liveness) {
        this.node = node;
        this.liveness = java.util.Objects.requireNonNull(liveness, "liveness");
        this.options = options;
        this.metrics = metrics;
        this.listener = listener;
        String name = "rdma-policy-" + IDS.incrementAndGet();
        this.timer = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        });
        timer.setRemoveOnCancelPolicy(true);
        long tick = Math.max(1, options.shortestDetectionWindow().toMillis() / 4);
        this.tickNanos = TimeUnit.MILLISECONDS.toNanos(tick);
        timer.scheduleWithFixedDelay(this::tick, tick, tick, TimeUnit.MILLISECONDS);
        metrics.gauge("rdma.read.inFlightBytes", bytesInFlight::get);
    }

    /**
     * The connection to {@code peer}, opened on first use. A connection that has failed is kept
     * (and fails fast) for one reconnect cap, so a dead peer is not hammered; then it is rebuilt.
     */
    public PeerConnection peer(InetSocketAddress peer) {
        if (closed) {
            throw new IllegalStateException("the policy client is closed");
        }
        PeerConnection existing = peers.get(peer);
        if (existing != null) {
            return existing;
        }
        PeerConnection created = new PeerConnection(this, peer, ClientCredential.of(options.secret()));
        PeerConnection raced = peers.putIfAbsent(peer, created);
        if (raced != null) {
            return raced;
        }
        created.start();
        return created;
    }

    /**
     * A connection of its own to {@code peer}, not shared and not in the peer table: for tools
     * and tests that need many independent connections to one server. The caller closes it.
     */
    public PeerConnection dedicated(InetSocketAddress peer) {
        return openDedicated(peer, ClientCredential.of(options.secret()));
    }

    /**
     * A connection of its own to {@code peer} that authenticates with {@code credential} (a server with
     * a {@link SessionAuthenticator}, e.g. a DataNode taking a block token), not the configured secret.
     * The caller closes it.
     */
    public PeerConnection dedicated(InetSocketAddress peer, ClientCredential credential) {
        return openDedicated(peer, java.util.Objects.requireNonNull(credential, "credential"));
    }

    /** {@code credential} null: the connection authenticates with nothing. */
    private PeerConnection openDedicated(InetSocketAddress peer, ClientCredential credential) {
        PeerConnection created = new PeerConnection(this, peer, credential);
        dedicated.add(created);
        created.start();
        return created;
    }

    void closed(PeerConnection connection) {
        dedicated.remove(connection);
    }

    void peerFailed(PeerConnection connection) {
        schedule(() -> {
            if (peers.remove(connection.address(), connection)) {
                connection.close();
                LOG.info("forgetting the failed connection to {}; the next use reconnects", connection.address());
            }
        }, connection.options().reconnectCap().toNanos());
    }

    // ---------------------------------------------------------------- shared machinery

    boolean reserve(int bytes) {
        while (true) {
            long now = bytesInFlight.get();
            if (now > 0 && now + bytes > options.maxBytesInFlight()) {
                starved.set(true);
                if (bytesInFlight.get() == now) {
                    return false; // a release after this point sees the flag and wakes us
                }
                continue; // a release slipped in before the flag: look again
            }
            if (bytesInFlight.compareAndSet(now, now + bytes)) {
                return true;
            }
        }
    }

    void release(int bytes) {
        bytesInFlight.addAndGet(-bytes);
        // READs refused by the total budget may wait on any peer: wake them, only when there are some.
        // (A peer's own budget frees up on its own completions, which dispatch that peer anyway.)
        if (starved.getAndSet(false)) {
            peers.values().forEach(PeerConnection::dispatchData);
            dedicated.forEach(PeerConnection::dispatchData);
        }
    }

    long bytesInFlight() {
        return bytesInFlight.get();
    }

    ScheduledFuture<?> schedule(Runnable task, long delayNanos) {
        if (timer.isShutdown()) {
            return null;
        }
        return timer.schedule(() -> {
            try {
                task.run();
            } catch (RuntimeException e) {
                LOG.error("policy timer task failed", e);
            }
        }, delayNanos, TimeUnit.NANOSECONDS);
    }

    /**
     * The detection check of every peer. Time this process did not run (a GC pause, SIGSTOP, a host so
     * busy the timer thread ran late) is not the peer's silence: beyond two tick intervals, the gap
     * since the previous check is passed on as a pause, which the channels do not count.
     */
    private void tick() {
        long now = System.nanoTime();
        long paused = lastTick == 0 ? 0 : Math.max(0, now - lastTick - 2 * tickNanos);
        lastTick = now;
        for (PeerConnection connection : peers.values()) {
            connection.tick(now, paused);
        }
        for (PeerConnection connection : dedicated) {
            connection.tick(now, paused);
        }
    }

    void stateChanged(PeerChannel channel, ChannelState from, ChannelState to) {
        listener.stateChanged(channel.owner().address(), channel.trafficClass(), from, to);
    }

    void reconnectScheduled(PeerChannel channel, int attempt, long delayNanos) {
        listener.reconnectScheduled(channel.owner().address(), channel.trafficClass(), attempt, delayNanos);
    }

    void reconnectAttempted(PeerChannel channel, int attempt) {
        listener.reconnectAttempted(channel.owner().address(), channel.trafficClass(), attempt);
    }

    /** Whether {@code peer} is gone for good, as {@link Liveness} says; false when it cannot tell. */
    CompletableFuture<Boolean> declaredLost(InetSocketAddress peer, boolean refused) {
        try {
            return liveness.declaredLost(peer, refused).exceptionally(e -> false);
        } catch (RuntimeException e) {
            LOG.debug("liveness check of {} failed", peer, e);
            return CompletableFuture.completedFuture(false);
        }
    }

    long nextRequestId() {
        return requestIds.incrementAndGet();
    }

    /**
     * This process, as its HELLOs to {@code peer} name it (stable across reconnects): the server
     * keeps its answers, regions and READ grants per instance. One id per peer, so a peer cannot
     * present the id it was shown to another server and take over what that server granted.
     */
    public UUID instance(InetSocketAddress peer) {
        return instances.computeIfAbsent(peer, p -> UUID.randomUUID());
    }

    Node node() {
        return node;
    }

    PolicyOptions options() {
        return options;
    }

    PolicyMetrics metrics() {
        return metrics;
    }

    @Override
    public void close() {
        closed = true;
        peers.values().forEach(PeerConnection::close);
        peers.clear();
        dedicated.forEach(PeerConnection::close);
        timer.shutdownNow();
    }
}

package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.UnsupportedVersionException;
import io.rdmaplane.rdma.policy.ControlFrame.Type;
import io.rdmaplane.rdma.provider.Admission;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelAcceptor;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.KeyDomain;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The serving side of the policy layer: accepts channels on a node, authenticates them when a
 * secret is configured (or through a {@link SessionAuthenticator}: a credential the client's HELLO
 * names, such as an HDFS block token, whose key it proves; the session is then bound to what the
 * credential grants, {@link PeerIdentity#binding}, and ends when it expires), says READY only once {@link #markReady()} says the regions are
 * registered, and answers control requests exactly once per request id (a re-sent request
 * gets the first answer again; the handler is not run twice). The provider serves READs, but
 * only on a data channel whose peer has completed the handshake, and only of what was granted in
 * that channel's session ({@link PeerIdentity#grant}) or to the peer process here ({@link #grants(UUID)}).
 * A grant of a region's range ({@link PeerIdentity#grant(MemoryRegion, long, int, long)}) hands out a
 * key of its own that READs that range only, on the session's data channel only (tcp checks each READ;
 * verbs binds a memory window over the range to the data QP); a session's grants and keys are revoked
 * when the session ends.
 *
 * <p>Data channels belong to a control session. A control channel's handshake starts one: its READY
 * carries a fresh session id. A data channel names that id (in its HELLO, and on verbs in its
 * {@link ConnectProof}) and runs its challenge-response on the session's key
 * ({@link Auth#sessionKey}); it is taken only while the session lives and only from the session's
 * peer (the same process, from the same host). When the control channel closes, its session ends and
 * its data channels are closed with it: no data channel outlives its session.
 *
 * <p>What it holds for clients is bounded ({@link ServerLimits}): channels not yet authenticated,
 * in total and per peer address (more are refused at once), the time one may take to
 * authenticate, and the answers kept per peer, which go when the peer's last channel closes.
 * A handler that throws anything, an Error too, fails that request only.
 */
public final class PolicyServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PolicyServer.class);
    private static final AtomicInteger IDS = new AtomicInteger();
    private static final AtomicBoolean OPEN_DATA_PLANE_LOGGED = new AtomicBoolean();
    private static final AtomicBoolean NO_KEY_DOMAIN_LOGGED = new AtomicBoolean();
    private static final long REFUSAL_LOG_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(10);
    /** Peers whose READ grants are kept (the least recently used beyond it are dropped). */
    private static final int PEERS_REMEMBERED = 4096;
    /** Connect proofs remembered against replay (each for twice the clock skew); more connects are refused meanwhile. */
    private static final int CONNECT_PROOFS_REMEMBERED = 1 << 16;

    /** Answers control requests; runs on a transport thread, so it must be quick. */
    @FunctionalInterface
    public interface RequestHandler {
        ByteBuffer handle(PeerIdentity peer, ByteBuffer request) throws Exception;
    }

    /**
     * Who sent a request: the peer process (stable across its reconnects), where from, and what
     * it may READ here: grant a region to it before answering with the region's descriptor.
     */
    public record PeerIdentity(UUID instance, SocketAddress address, ReadGrants grants, Object binding) {
        /** A peer with grants of its own that no server consults (for handlers tested alone). */
        public PeerIdentity(UUID instance, SocketAddress address) {
            this(instance, address, new ReadGrants());
        }

        /** A peer whose session is bound to nothing in particular (a shared secret, or none). */
        public PeerIdentity(UUID instance, SocketAddress address, ReadGrants grants) {
            this(instance, address, grants, null);
        }

        /** Lets this peer READ the region {@code rkey} on its data channels. */
        public void grant(int rkey) {
            grants.grant(rkey);
        }

        /** Lets this peer READ the region {@code rkey} until {@code untilEpochMillis} (e.g. its token's expiry). */
        public void grant(int rkey, long untilEpochMillis) {
            grants.grant(rkey, untilEpochMillis);
        }

        /**
         * Lets this peer READ {@code region} until {@code untilEpochMillis} and returns the rkey to hand
         * it (a memory window of its own on verbs, for a region registered for grants); the grant goes
         * with the region's deregistration.
         */
        public int grant(MemoryRegion region, long untilEpochMillis) {
            return grants.grant(region, untilEpochMillis);
        }

        /**
         * Lets this peer READ {@code length} bytes at {@code address} of {@code region}, and nothing else of
         * it by the rkey returned (a key of its own per grant on tcp, a memory window over that range on
         * verbs, for a region registered for grants), until {@code untilEpochMillis}; the grant goes with the
         * region's deregistration.
         */
        public int grant(MemoryRegion region, long address, int length, long untilEpochMillis) {
            return grants.grant(region, address, length, untilEpochMillis);
        }
    }

    private final Node node;
    private final PolicyOptions options;
    private final ServerLimits limits;
    private final PolicyMetrics metrics;
    private final RequestHandler handler;
    /** Who may open a session, or null: the data plane is open. */
    private final SessionAuthenticator authenticator;
    private final CompletableFuture<Void> ready = new CompletableFuture<>();
    /**
     * Answers kept per connected peer process, so a request re-sent (on a rebuilt channel too) is
     * answered, not re-run; a peer's answers go with its last channel.
     */
    private final Map<UUID, Map<Long, CompletableFuture<ControlFrame>>> answers = new ConcurrentHashMap<>();
    /** Channels accepted and not yet authenticated, per peer address (guarded by itself). */
    private final Map<Object, Integer> unauthenticated = new HashMap<>();
    private int unauthenticatedTotal; // guarded by unauthenticated
    private long lastRefusalLog = System.nanoTime() - REFUSAL_LOG_INTERVAL_NANOS; // guarded by unauthenticated
    private final Map<UUID, AtomicInteger> channelsPerPeer = new ConcurrentHashMap<>();
    private final Map<UUID, RegionScope> peerScopes = new ConcurrentHashMap<>();
    /**
     * Grants made here per peer process ({@link #grants(UUID)}: descriptors handed out by other means than a
     * request), across its sessions. What a request's handler grants belongs to the session instead.
     */
    private final Map<UUID, ReadGrants> peerGrants = java.util.Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<UUID, ReadGrants> eldest) {
            if (size() <= PEERS_REMEMBERED) {
                return false;
            }
            eldest.getValue().close(); // its key domain with it: a peer forgotten READs nothing more
            return true;
        }
    });
    private final ScheduledThreadPoolExecutor timer;
    private final ConnectProof.Verifier connectProofs;
    /** Live control sessions by id (hex). */
    private final Map<String, ControlSession> sessions = new ConcurrentHashMap<>();

    /** One authenticated control channel's session: whose it is, and the data channels bound to it. */
    private static final class ControlSession {
        final byte[] id;
        final UUID instance;
        final Object host;
        /** The key its control channel proved (null without authentication): its data channels prove one derived from it. */
        final byte[] key;
        /** What its credential grants ({@link SessionAuthenticator.SessionKey#binding}). */
        final Object binding;
        /** What handlers granted in this session: its data channels READ it, and it goes when the session ends. */
        final ReadGrants grants;
        private volatile boolean live = true;
        private final List<Session> data = new ArrayList<>(); // guarded by this

        ControlSession(byte[] id, UUID instance, Object host, byte[] key, Object binding, ReadGrants grants) {
            this.id = id;
            this.instance = instance;
            this.host = host;
            this.key = key;
            this.binding = binding;
            this.grants = grants;
        }

        /** Binds a data channel, unless the session has ended. */
        synchronized boolean bind(Session channel) {
            if (live) {
                data.add(channel);
            }
            return live;
        }

        synchronized void unbind(Session channel) {
            data.remove(channel);
        }

        /** Ends the session (its grants are revoked): the data channels bound to it, which the caller closes. */
        List<Session> end() {
            List<Session> bound;
            synchronized (this) {
                live = false;
                bound = new ArrayList<>(data);
                data.clear();
            }
            grants.close();
            return bound;
        }
    }

    /** The live session {@code id} of the peer on {@code host} (and {@code instance}, when known), or null. */
    private ControlSession liveSession(byte[] id, UUID instance, Object host) {
        ControlSession session = sessions.get(java.util.HexFormat.of().formatHex(id));
        if (session == null || !session.live || !session.host.equals(host)
                || (instance != null && !session.instance.equals(instance))) {
            return null;
        }
        return session;
    }

    /** A server with the {@linkplain ServerLimits#defaults() default limits}. */
    public PolicyServer(Node node, PolicyOptions options, PolicyMetrics metrics, RequestHandler handler) {
        this(node, options, ServerLimits.defaults(), metrics, handler);
    }

    /** A server that authenticates on the configured secret, if any. */
    public PolicyServer(Node node, PolicyOptions options, ServerLimits limits, PolicyMetrics metrics, RequestHandler handler) {
        this(node, options, limits, metrics, options.secret() == null ? null : SessionAuthenticator.secret(options.secret()),
                handler);
    }

    /**
     * A server whose control sessions authenticate through {@code authenticator} (null: none, the data
     * plane is open). The connect proofs of verbs are checked on the options' secret, if any (control channels), and
     * on the key of the session they name (data channels).
     */
    public PolicyServer(Node node, PolicyOptions options, ServerLimits limits, PolicyMetrics metrics,
                        SessionAuthenticator authenticator, RequestHandler handler) {
        this.node = node;
        this.authenticator = authenticator;
        this.options = options;
        this.limits = limits;
        this.metrics = metrics;
        this.handler = handler;
        String name = "rdma-policy-server-" + IDS.incrementAndGet();
        this.timer = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        });
        timer.setRemoveOnCancelPolicy(true);
        this.connectProofs = new ConnectProof.Verifier(CONNECT_PROOFS_REMEMBERED);
    }

    /** Starts accepting channels. Clients wait (up to their handshake timeout) until {@link #markReady()}. */
    public PolicyServer start() throws TransportException {
        if (authenticator == null && OPEN_DATA_PLANE_LOGGED.compareAndSet(false, true)) {
            LOG.warn("no secret is configured: the RDMA data plane is open; any peer that completes the handshake may ask"
                    + " for regions and READ what it is granted (on verbs: any peer that connects a data channel in a live"
                    + " control session may READ a region whose rkey it knows); set spark.authenticate or the policy secret"
                    + " to require one");
        }
        node.listen(new ChannelAcceptor() {
            @Override
            public ChannelHandler accept(Channel channel) {
                if (timer.isShutdown()) {
                    return null; // closed: a client reconnecting meanwhile is turned away
                }
                return PolicyServer.this.admit(channel) ? new Session(channel) : null; // null: the transport closes it
            }

            @Override
            public Admission admit(SocketAddress from, ByteBuffer connectData) {
                return admitConnect(from, connectData);
            }

            /** A data channel's end goes in its peer's key domain (verbs: its QP in the peer's protection domain). */
            @Override
            public KeyDomain keyDomain(SocketAddress from, ByteBuffer connectData) {
                try {
                    ConnectProof.Parsed proof = ConnectProof.parse(connectData);
                    if (proof.claim.trafficClass() != TrafficClass.DATA) {
                        return null;
                    }
                    ControlSession session = liveSession(proof.claim.session(), null, hostOf(from));
                    return session == null ? null : session.grants.domain();
                } catch (ConnectProof.Refusal refusal) {
                    return null; // admitted just now, so not seen
                }
            }
        });
        return this;
    }

    /**
     * A connect request, where the transport asks before any channel exists (verbs): refused
     * without a valid {@link ConnectProof} (no QP is created), and a control channel's QP serves no READ;
     * a data channel's serves none until its handshake is done and its keys are bound (Session.allowReads).
     */
    private Admission admitConnect(SocketAddress from, ByteBuffer connectData) {
        TrafficClass trafficClass;
        try {
            ConnectProof.Parsed proof = ConnectProof.parse(connectData);
            trafficClass = proof.claim.trafficClass();
            byte[] key = options.secret();
            if (trafficClass == TrafficClass.DATA) {
                ControlSession session = liveSession(proof.claim.session(), null, hostOf(from));
                if (session == null) {
                    throw new ConnectProof.Refusal("a data channel's connect names no live control session of its peer");
                }
                key = session.key == null ? null : Auth.sessionKey(session.key, session.id);
            }
            connectProofs.verify(proof, key, System.currentTimeMillis());
        } catch (ConnectProof.Refusal refusal) {
            if (refusal.getMessage().startsWith("authentication")) {
                metrics.authFailure();
            }
            metrics.connectionRefused();
            synchronized (unauthenticated) {
                long now = System.nanoTime();
                if (now - lastRefusalLog >= REFUSAL_LOG_INTERVAL_NANOS) { // an attack would otherwise flood the log
                    lastRefusalLog = now;
                    LOG.warn("refusing a connect request from {}: {} (no channel is created; this is logged once per {} s)",
                            from, refusal.getMessage(), TimeUnit.NANOSECONDS.toSeconds(REFUSAL_LOG_INTERVAL_NANOS));
                }
            }
            return Admission.REFUSE;
        }
        return trafficClass == TrafficClass.DATA ? Admission.ACCEPT_REMOTE_READ_LATER : Admission.ACCEPT_WITHOUT_REMOTE_READ;
    }

    /** Whether one more unauthenticated channel from this peer fits the limits; if so it is counted. */
    private boolean admit(Channel channel) {
        Object from = addressOf(channel);
        synchronized (unauthenticated) {
            int fromThere = unauthenticated.getOrDefault(from, 0);
            if (unauthenticatedTotal < limits.maxUnauthenticated() && fromThere < limits.maxUnauthenticatedPerAddress()) {
                unauthenticated.put(from, fromThere + 1);
                unauthenticatedTotal++;
                return true;
            }
            metrics.connectionRefused();
            long now = System.nanoTime();
            if (now - lastRefusalLog >= REFUSAL_LOG_INTERVAL_NANOS) { // an attack would otherwise flood the log
                lastRefusalLog = now;
                LOG.warn("refusing channels from {}: {} unauthenticated from there, {} in total (limits {} per address, {} in"
                                + " total: server.maxUnauthenticatedPerAddress, server.maxUnauthenticated); this is logged once"
                                + " per {} s", channel.remoteAddress(), fromThere, unauthenticatedTotal,
                        limits.maxUnauthenticatedPerAddress(), limits.maxUnauthenticated(),
                        TimeUnit.NANOSECONDS.toSeconds(REFUSAL_LOG_INTERVAL_NANOS));
            }
            return false;
        }
    }

    /** An admitted channel authenticated or closed: it no longer counts as unauthenticated. */
    private void admitted(Channel channel) {
        Object from = addressOf(channel);
        synchronized (unauthenticated) {
            unauthenticated.computeIfPresent(from, (a, n) -> n == 1 ? null : n - 1);
            unauthenticatedTotal--;
        }
    }

    /** The peer's host: channels from one host count together whatever their ports. */
    private static Object addressOf(Channel channel) {
        return hostOf(channel.remoteAddress());
    }

    private static Object hostOf(SocketAddress remote) {
        return remote instanceof InetSocketAddress inet && inet.getAddress() != null ? inet.getAddress() : remote;
    }

    /** Channels not yet authenticated; for tests. */
    int unauthenticatedChannels() {
        synchronized (unauthenticated) {
            return unauthenticatedTotal;
        }
    }

    /** Control sessions live now; for tests. */
    int liveSessions() {
        return sessions.size();
    }

    /** Lets the next server without a secret say again that the data plane is open; for tests of that line. */
    static void forgetOpenDataPlaneWarning() {
        OPEN_DATA_PLANE_LOGGED.set(false);
    }

    /** Answers kept for re-sent requests, over all peers; for tests. */
    int cachedAnswers() {
        int total = 0;
        for (Map<Long, CompletableFuture<ControlFrame>> mine : answers.values()) {
            synchronized (mine) {
                total += mine.size();
            }
        }
        return total;
    }

    /** The regions peers will READ are registered: READY goes to every authenticated channel. */
    public void markReady() {
        ready.complete(null);
    }

    /**
     * Regions that live as long as a peer has a channel here: closed (rkeys revoked) when its
     * last channel closes. Only for a peer that is connected.
     */
    public RegionScope peerScope(UUID peer) {
        return peerScopes.computeIfAbsent(peer, p -> new RegionScope("peer " + p));
    }

    /**
     * What the peer process may READ here beyond what handlers grant it in each session: for a server that
     * hands descriptors out by other means than a request. Kept across the peer's sessions (the least
     * recently used of {@value #PEERS_REMEMBERED} peers beyond that are forgotten); its data channels READ it.
     */
    public ReadGrants grants(UUID peer) {
        return peerGrants.computeIfAbsent(peer, p -> new ReadGrants(node, openKeyDomain(p), true));
    }

    /**
     * A key domain of the peer process's own (verbs: a protection domain its data channels are accepted into, every
     * key granted to it a registration there), or null where the provider binds keys per channel (tcp) or the
     * device refuses one (then keys are the node's, as the log says once).
     */
    private KeyDomain openKeyDomain(UUID peer) {
        try {
            return node.openKeyDomain();
        } catch (TransportException e) {
            if (NO_KEY_DOMAIN_LOGGED.compareAndSet(false, true)) {
                LOG.warn("no key domain for peer {}: {}; its keys are the node's ({}); logged once", peer, e.getMessage(),
                        node.keyBinding());
            }
            return null;
        }
    }

    /**
     * What requests granted the peer process in its live control session (the latest, if it has several
     * meanwhile), or null without one: gone with the session.
     */
    public ReadGrants grantsInSession(UUID peer) {
        ReadGrants found = null;
        for (ControlSession session : sessions.values()) {
            if (session.live && session.instance.equals(peer)) {
                found = session.grants;
            }
        }
        return found;
    }

    /**
     * One accepted channel: its handshake state and its requests. Only a data channel that has
     * completed the handshake (authenticated, when a secret is configured) is READ from, and only
     * for the regions granted to its peer.
     */
    private final class Session implements ChannelHandler {
        private final Channel channel;
        private volatile TrafficClass trafficClass;
        private UUID instance;
        private byte[] clientNonce;
        private byte[] serverNonce;
        private volatile boolean authenticated;
        /** What the session's handlers granted (the control session's own, for a data channel its session's). */
        private volatile ReadGrants grants;
        /** What {@link #grants(UUID)} granted the peer process. */
        private volatile ReadGrants handGrants;
        private volatile boolean readySent;
        /** The key of its challenge-response: the credential's (control), its session's key (data). */
        private byte[] key;
        /** What a control channel's credential grants (see {@link SessionAuthenticator.SessionKey}). */
        private Object binding;
        private long expiresAtMillis = Long.MAX_VALUE;
        /** Ends a control session when its credential expires. */
        private java.util.concurrent.ScheduledFuture<?> expiry;
        /** A control channel's session, once authenticated. */
        private ControlSession started;
        /** The session a data channel belongs to, from its HELLO on. */
        private volatile ControlSession boundTo;
        /** Counted among the unauthenticated channels (see admit); guarded by this. */
        private boolean pending = true;

        Session(Channel channel) {
            this.channel = channel;
            timer.schedule(() -> {
                if (!authenticated) {
                    LOG.warn("closing the channel from {}: not authenticated within {} ms (server.authTimeout)",
                            channel.remoteAddress(), limits.authTimeout().toMillis());
                    channel.close();
                }
            }, limits.authTimeout().toNanos(), TimeUnit.NANOSECONDS);
        }

        private synchronized void noLongerPending() {
            if (pending) {
                pending = false;
                admitted(channel);
            }
        }

        @Override
        public synchronized void onMessage(Channel ch, ByteBuffer message) {
            ControlFrame frame;
            try {
                frame = ControlFrame.decode(message);
            } catch (UnsupportedVersionException e) {
                reject(e.getMessage()); // intact, from another build: a retry cannot help, so say why and close
                return;
            } catch (MalformedMessageException e) {
                metrics.controlDropped();
                LOG.warn("dropped a corrupt control message from {}: {}", ch.remoteAddress(), e.getMessage());
                return;
            }
            switch (frame.type()) {
                case HELLO -> onHello(frame.payload());
                case PROOF -> onProof(frame.payload());
                case REQUEST -> onRequest(frame);
                case PING -> {
                    if (authenticated) {
                        ch.send(ControlFrame.of(Type.PONG, frame.requestId()).encode());
                    }
                }
                default -> reject("unexpected " + frame.type() + " from a client");
            }
        }

        private void onHello(ByteBuffer payload) {
            if (instance != null) {
                reject("repeated HELLO");
                return;
            }
            Handshake.Hello hello;
            try {
                hello = Handshake.Hello.decode(payload); // its traffic class is checked; both are handled alike here
            } catch (MalformedMessageException e) {
                reject("malformed HELLO: " + e.getMessage());
                return;
            }
            instance = hello.instance();
            trafficClass = hello.trafficClass();
            clientNonce = hello.nonce();
            boolean wantsAuth = hello.wantsAuth();
            if (authenticator != null && !wantsAuth) {
                reject("authentication is required (a secret is configured here, not on the client)");
            } else if (authenticator == null && wantsAuth) {
                reject("the client wants authentication but no secret is configured here");
            } else if (trafficClass == TrafficClass.DATA && !bind(hello.session())) {
                unbound();
            } else if (authenticator == null) {
                authenticated();
            } else {
                if (trafficClass == TrafficClass.DATA) {
                    key = Auth.sessionKey(boundTo.key, hello.session());
                } else {
                    SessionAuthenticator.SessionKey granted;
                    try {
                        granted = authenticator.authenticate(hello.credential());
                    } catch (GeneralSecurityException | RuntimeException e) {
                        reject("authentication failed: the credential is refused (" + e.getMessage() + ")");
                        return;
                    }
                    if (granted.expiresAtMillis() <= System.currentTimeMillis()) {
                        reject("authentication failed: the credential has expired");
                        return;
                    }
                    key = granted.key();
                    binding = granted.binding();
                    expiresAtMillis = granted.expiresAtMillis();
                }
                serverNonce = Auth.nonce();
                ByteBuffer challenge = new Handshake.Challenge(serverNonce, Auth.serverProof(key, clientNonce, serverNonce))
                        .encode();
                channel.send(new ControlFrame(Type.CHALLENGE, 0, challenge).encode());
            }
        }

        /** Binds this data channel to its peer's live session {@code id}; false if there is none. */
        private boolean bind(byte[] id) {
            ControlSession session = liveSession(id, instance, addressOf(channel));
            if (session == null || !session.bind(this)) {
                return false;
            }
            boundTo = session;
            return true;
        }

        /** A data channel of no live session of its peer: the client may try again once it has one. */
        private void unbound() {
            String reason = "the data channel names no live control session of its peer (ended, another's, or none)";
            LOG.warn("refusing the data channel from {}: {}", channel.remoteAddress(), reason);
            if (!denyReads()) {
                return;
            }
            channel.send(ControlFrame.withReason(Type.UNBOUND, 0, reason).encode()).whenComplete((ok, e) -> channel.close());
        }

        private void onProof(ByteBuffer payload) {
            Handshake.Proof proof;
            try {
                proof = Handshake.Proof.decode(payload);
            } catch (MalformedMessageException e) {
                reject("authentication failed: a malformed PROOF (" + e.getMessage() + ")");
                return;
            }
            if (serverNonce == null || authenticated
                    || !Auth.matches(Auth.clientProof(key, clientNonce, serverNonce), proof.mac())) {
                reject("authentication failed");
                return;
            }
            authenticated();
        }

        private void authenticated() {
            handGrants = grants(instance);
            if (trafficClass == TrafficClass.DATA) {
                grants = boundTo.grants; // before READs are asked about (tcp asks from now on)
            }
            authenticated = true;
            noLongerPending();
            channelsPerPeer.computeIfAbsent(instance, i -> new AtomicInteger()).incrementAndGet();
            ByteBuffer readyPayload = null;
            if (trafficClass == TrafficClass.CONTROL) {
                ControlSession session = new ControlSession(Auth.nonce(), instance, addressOf(channel), key, binding,
                        new ReadGrants(node, handGrants.domain(), false)); // the process's domain: its data channels are there
                started = session;
                grants = session.grants;
                sessions.put(java.util.HexFormat.of().formatHex(session.id), session);
                readyPayload = new Handshake.Ready(session.id).encode();
                if (expiresAtMillis != Long.MAX_VALUE) { // the session ends with its credential, its data channels with it
                    expiry = timer.schedule(() -> {
                        LOG.debug("closing the control channel from {}: its credential expired", channel.remoteAddress());
                        channel.close();
                    }, Math.max(0, expiresAtMillis - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
                }
            }
            ByteBuffer payload = readyPayload;
            // A data channel gets the peer's keys bound to it (tcp; on verbs it is in the peer's key domain) before READY.
            CompletableFuture<Void> bound = trafficClass == TrafficClass.DATA
                    ? CompletableFuture.allOf(grants.attach(channel), handGrants.attach(channel)).exceptionally(e -> {
                        LOG.warn("binding {}'s keys to the data channel from {} failed", instance, channel.remoteAddress(), e);
                        return null;
                    })
                    : CompletableFuture.completedFuture(null);
            // READY only once the regions are registered: no READ may race their registration. A data
            // channel serves READs from then on, not before (a verbs QP was admitted with no remote access).
            ready.thenCompose(v -> bound).thenRun(() -> {
                if (channel.isOpen() && (trafficClass != TrafficClass.DATA || allowReads())) {
                    readySent = true;
                    channel.send(new ControlFrame(Type.READY, 0, payload == null ? null : payload.duplicate()).encode());
                }
            });
        }

        private void onRequest(ControlFrame frame) {
            if (!readySent) {
                reject("request before READY");
                return;
            }
            Map<Long, CompletableFuture<ControlFrame>> mine = answers.computeIfAbsent(instance,
                    i -> boundedAnswers(limits.answersKeptPerPeer()));
            CompletableFuture<ControlFrame> answer;
            boolean first;
            synchronized (mine) {
                answer = mine.get(frame.requestId());
                first = answer == null;
                if (first) {
                    answer = new CompletableFuture<>();
                    mine.put(frame.requestId(), answer);
                }
            }
            if (first) {
                ControlFrame response = run(frame);
                CompletableFuture<ControlFrame> settling = answer;
                // Keys the handler handed out are sent once they READ (their windows bound).
                ReadGrants.takeUnsettled().whenComplete((v, e) -> settling.complete(e == null ? response
                        : ControlFrame.withReason(Type.ERROR, frame.requestId(), "binding a READ key failed: " + e)));
            }
            answer.thenAccept(response -> channel.send(response.encode()));
        }

        private ControlFrame run(ControlFrame request) {
            try {
                ControlSession session = started;
                Object bound = session != null ? session.binding : boundTo != null ? boundTo.binding : null;
                ByteBuffer response = handler.handle(new PeerIdentity(instance, channel.remoteAddress(), grants, bound),
                        request.payload());
                return new ControlFrame(Type.RESPONSE, request.requestId(), response);
            } catch (Exception e) {
                LOG.warn("request {} from {} failed", request.requestId(), channel.remoteAddress(), e);
                return ControlFrame.withReason(Type.ERROR, request.requestId(), String.valueOf(e.getMessage()));
            } catch (Throwable e) { // an Error of one request (e.g. a decoder's OutOfMemoryError) fails that request only
                LOG.error("request {} from {} failed", request.requestId(), channel.remoteAddress(), e);
                return ControlFrame.withReason(Type.ERROR, request.requestId(), "internal error: " + e.getClass().getName());
            }
        }

        /** The data channel may be READ from now on; false, and the channel closed, if its QP cannot be given access. */
        private boolean allowReads() {
            try {
                channel.transport().allowRemoteReads();
                return true;
            } catch (IOException | RuntimeException e) {
                LOG.warn("closing the data channel from {}: cannot give it remote read access: {}", channel.remoteAddress(),
                        e.toString());
                channel.close();
                return false;
            }
        }

        /**
         * A refused channel READs nothing while its refusal is on the way (a data channel refused after
         * its READY had remote access) (a verbs QP would serve a READ
         * in the NIC until closed); false, and the channel closed without an answer, if that fails.
         */
        private boolean denyReads() {
            try {
                channel.transport().denyRemoteReads();
                return true;
            } catch (IOException | RuntimeException e) {
                LOG.warn("closing the channel from {} without an answer: cannot take its remote access away: {}",
                        channel.remoteAddress(), e.toString());
                channel.close();
                return false;
            }
        }

        private void reject(String reason) {
            if (reason.startsWith("authentication")) {
                metrics.authFailure();
            }
            LOG.warn("rejecting the channel from {}: {}", channel.remoteAddress(), reason);
            if (!denyReads()) {
                return;
            }
            // Nothing but the reason goes out: no address or rkey reaches an unauthenticated peer.
            channel.send(ControlFrame.withReason(Type.REJECT, 0, reason).encode())
                    .whenComplete((ok, e) -> channel.close());
        }

        /**
         * Control channels carry no READs; a data channel only once its peer is authenticated, while its
         * session lives, of what it was granted.
         */
        @Override
        public boolean permitsRemoteRead(Channel ch, int rkey) {
            ControlSession session = boundTo;
            return authenticated && trafficClass == TrafficClass.DATA && session != null && session.live
                    && (grants.allows(rkey) || handGrants.allows(rkey));
        }

        @Override
        public void onClosed(Channel ch, TransportException cause) {
            noLongerPending();
            java.util.concurrent.ScheduledFuture<?> ends = expiry;
            if (ends != null) {
                ends.cancel(false);
            }
            if (authenticated && trafficClass == TrafficClass.DATA) {
                grants.detach(channel); // the keys bound to this channel (its QP) go with it
                handGrants.detach(channel);
            }
            ControlSession bound = boundTo;
            if (bound != null) {
                bound.unbind(this);
            }
            ControlSession session;
            synchronized (this) {
                session = started;
                started = null;
            }
            if (session != null) { // the control channel's session ends, and its data channels with it
                sessions.remove(java.util.HexFormat.of().formatHex(session.id), session);
                for (Session data : session.end()) {
                    LOG.debug("closing the data channel from {}: its control session ended", data.channel.remoteAddress());
                    data.channel.close();
                }
            }
            if (authenticated) {
                AtomicInteger left = channelsPerPeer.get(instance);
                if (left != null && left.decrementAndGet() == 0) {
                    channelsPerPeer.remove(instance, left);
                    answers.remove(instance); // the peer's session ended: what it may re-send goes with it
                    RegionScope scope = peerScopes.remove(instance);
                    if (scope != null) {
                        scope.close(); // the peer is gone: revoke what was exposed for it
                    }
                }
            }
        }
    }

    private static Map<Long, CompletableFuture<ControlFrame>> boundedAnswers(int kept) {
        return new LinkedHashMap<>(16, 0.75f, false) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, CompletableFuture<ControlFrame>> eldest) {
                return size() > kept;
            }
        };
    }

    @Override
    public void close() {
        sessions.values().forEach(session -> session.grants.close());
        List<ReadGrants> remembered;
        synchronized (peerGrants) {
            remembered = new ArrayList<>(peerGrants.values());
            peerGrants.clear();
        }
        remembered.forEach(ReadGrants::close); // and their key domains
        List<RegionScope> scopes = new ArrayList<>(peerScopes.values());
        peerScopes.clear();
        scopes.forEach(RegionScope::close);
        timer.shutdownNow();
    }
}

package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.policy.ControlFrame.Type;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.ConnectRequest;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One managed channel of one traffic class to one peer: the connection state machine.
 * <pre>
 * CONNECTING → READY ⇄ SUSPECT → RECONNECTING → READY
 *          ↘                         ↘ FAILED (attempts exhausted, or the handshake refused)
 * </pre>
 * Work waits in a queue until the channel is READY (the server has said its regions are
 * registered), then goes out within a window that restarts small after a reconnect and grows
 * by one per completion. Work flushed by a broken channel is re-issued on the next one; READs
 * are idempotent and requests carry ids the server de-duplicates.
 */
final class PeerChannel {
    private static final Logger LOG = LoggerFactory.getLogger(PeerChannel.class);

    /** Something to post on the channel: a READ piece or a message. */
    abstract static class Work {
        final int bytes;
        int attempts;
        /** The connection ({@link #connections}) it was first posted on, and last; 0: not yet (guarded by the channel). */
        int firstPostedOn;
        int postedOn;

        Work(int bytes) {
            this.bytes = bytes;
        }

        abstract CompletableFuture<Void> post(Channel channel);

        abstract void succeeded();

        /** Final failure: the caller falls back. */
        abstract void failed(Throwable cause);
    }

    private final PeerConnection owner;
    private final TrafficClass trafficClass;
    private final int depth;
    private final PolicyOptions options;
    private final PolicyMetrics metrics;
    // Guarded by this. Every connect attempt gets a new generation; callbacks of older ones are ignored.
    private ChannelState state = ChannelState.CONNECTING;
    private Channel channel;
    private int generation;
    private int failedAttempts;
    private boolean everReady;
    private final ArrayDeque<Work> waiting = new ArrayDeque<>();
    private int inFlight;
    private int window;
    private long lastProgress;
    private long suspectSince;
    /** The probe sent when this channel went SUSPECT went unanswered (timed out or failed). */
    private boolean probeUnanswered;
    private byte[] clientNonce;
    /** The control session this attempt's data channel belongs to (a control channel's: none). */
    private byte[] session;
    private ScheduledFuture<?> handshakeTimer;
    /** READY connections so far: the number of the current one. */
    private int connections;
    /**
     * Work first posted on a connection before this one is not re-issued: a READ re-issued on a newer connection
     * was refused, so the keys of the older ones are gone (their session ended, or windows went with their QP).
     */
    private int staleBefore;

    PeerChannel(PeerConnection owner, TrafficClass trafficClass, int depth) {
        this.owner = owner;
        this.trafficClass = trafficClass;
        this.depth = depth;
        this.options = owner.options();
        this.metrics = owner.client().metrics();
        this.window = depth;
    }

    synchronized ChannelState state() {
        return state;
    }

    void start() {
        int gen;
        synchronized (this) {
            gen = ++generation;
        }
        connect(gen);
    }

    // ---------------------------------------------------------------- work

    void submit(Work work) {
        synchronized (this) {
            if (state != ChannelState.FAILED && state != ChannelState.CLOSED) {
                waiting.add(work);
                work = null;
            }
        }
        if (work != null) {
            work.failed(unavailable("the " + describe() + " has " + (state() == ChannelState.CLOSED ? "been closed" : "failed"), null));
            return;
        }
        dispatch();
    }

    synchronized boolean hasWaitingWork() {
        return !waiting.isEmpty();
    }

    /** Posts waiting work while the channel is READY and the window and byte budgets allow. */
    void dispatch() {
        List<Work> posting = new ArrayList<>();
        List<Work> stale = new ArrayList<>();
        Channel target;
        int gen;
        synchronized (this) {
            target = channel;
            gen = generation;
            if (state != ChannelState.READY && state != ChannelState.SUSPECT) {
                return;
            }
            while (!waiting.isEmpty() && inFlight < window) {
                Work next = waiting.peek();
                if (isStale(next)) {
                    stale.add(waiting.poll());
                    continue;
                }
                if (next.bytes > 0 && !owner.reserve(next.bytes)) {
                    break; // the byte budget frees up as READs complete; they dispatch again
                }
                waiting.poll();
                if (next.firstPostedOn == 0) {
                    next.firstPostedOn = connections;
                }
                next.postedOn = connections;
                if (inFlight++ == 0) {
                    lastProgress = System.nanoTime();
                }
                posting.add(next);
            }
        }
        stale.forEach(work -> work.failed(staleKey()));
        for (Work work : posting) {
            CompletableFuture<Void> posted;
            try {
                posted = work.post(target);
            } catch (RuntimeException e) {
                posted = CompletableFuture.failedFuture(e);
            }
            posted.whenComplete((ok, error) -> completed(work, gen, error));
        }
    }

    private void completed(Work work, int gen, Throwable error) {
        if (work.bytes > 0) {
            owner.release(work.bytes);
        }
        Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        Status status = cause == null ? Status.SUCCESS
                : cause instanceof TransportException t ? t.status() : null;
        boolean finalFailure = false;
        if (status != null && status != Status.SUCCESS) {
            metrics.completionError(status);
        }
        synchronized (this) {
            inFlight--;
            if (cause == null) {
                lastProgress = System.nanoTime();
                window = Math.min(depth, window + 1);
                if (state == ChannelState.SUSPECT && gen == generation) {
                    transition(ChannelState.READY, "progress resumed");
                }
            } else if (state == ChannelState.FAILED || state == ChannelState.CLOSED) {
                finalFailure = true; // nothing will post it again: its caller must hear now
                cause = unavailable("the " + describe() + " has " + state.name().toLowerCase(java.util.Locale.ROOT), cause);
            } else if (status == Status.QUEUE_FULL) {
                waiting.addFirst(work);
            } else if (status == Status.REMOTE_ACCESS_ERROR) {
                finalFailure = true;
                if (work.firstPostedOn < work.postedOn) {
                    // A re-issued READ was refused: its key went with the connection or session it was granted on, and
                    // so did the keys of all work from before this connection. They fail now, for new grants,
                    // rather than break this connection (as a refused READ does) one by one.
                    staleBefore = Math.max(staleBefore, work.postedOn);
                }
            } else if (isStale(work)) {
                finalFailure = true;
                cause = staleKey();
            } else if (status == null || isPermanent(status) || ++work.attempts > options.reconnectMaxAttempts()) {
                finalFailure = true;
            } else {
                waiting.addFirst(work); // flushed by a broken channel: goes out again on the next one
                metrics.reissued();
            }
        }
        if (cause == null) {
            work.succeeded();
        } else {
            if (finalFailure) {
                work.failed(cause);
            }
            if (status != null && status != Status.QUEUE_FULL && status != Status.REMOTE_ACCESS_ERROR) {
                // Any completion error leaves a verbs channel in the error state: rebuild it. Not a refused READ: that
                // is no link fault (the READ's key or range is wrong); the provider closes its channel, as an RC QP
                // breaks, and its close (Handler.onClosed) is what rebuilds it.
                reconnect(gen, cause.getMessage());
            }
        }
        dispatch();
    }

    /** Work from before a connection whose re-issued READ was refused (guarded by this). */
    private boolean isStale(Work work) {
        return work.bytes > 0 && work.firstPostedOn != 0 && work.firstPostedOn < staleBefore;
    }

    /** A READ failed as refused without posting it: its key is one of those a refused re-issued READ showed are gone. */
    private KeyRefusedException staleKey() {
        String why = "not re-issued on the " + describe() + ": a READ re-issued there after a reconnect was refused, so"
                + " the keys granted before that reconnect are gone; a new grant is needed";
        return new KeyRefusedException(why, new TransportException(Status.REMOTE_ACCESS_ERROR, why));
    }

    /** Errors that another attempt cannot fix: the block or buffer is wrong, not the link. */
    private static boolean isPermanent(Status status) {
        return status == Status.REMOTE_ACCESS_ERROR || status == Status.REMOTE_INVALID_REQUEST
                || status == Status.LOCAL_PROTECTION_ERROR;
    }

    // ---------------------------------------------------------------- connecting and the handshake

    /**
     * One connect attempt. A data channel belongs to the control channel's session: it waits for one
     * (the control channel's READY), and gives up with the control channel.
     */
    private void connect(int gen) {
        if (trafficClass == TrafficClass.CONTROL) {
            connect(gen, Handshake.NO_SESSION);
            return;
        }
        owner.session().whenComplete((id, error) -> {
            if (error != null) {
                fail(gen, "the control channel gave up: " + rootMessage(error));
            } else if (current(gen)) {
                connect(gen, id);
            }
        });
    }

    private synchronized boolean current(int gen) {
        return gen == generation && state != ChannelState.CLOSED && state != ChannelState.FAILED;
    }

    private void connect(int gen, byte[] sessionId) {
        // The server READs nothing of ours; where the transport checks before a channel exists (verbs),
        // the connect says the traffic class and a data channel's session, and proves the secret (control)
        // or the session's key (data), see ConnectProof.
        ClientCredential credential = owner.credential();
        byte[] proofKey = trafficClass == TrafficClass.CONTROL ? options.secret()
                : credential == null ? null : Auth.sessionKey(credential.key(), sessionId);
        ConnectRequest request = new ConnectRequest(ConnectProof.create(proofKey, trafficClass, sessionId), false);
        owner.client().node().connect(owner.address(), depth, trafficClass.lane(), new Handler(gen), request).whenComplete((opened, error) -> {
            if (error != null) {
                // Only a refused control connect says the peer is gone: its control channel is the first contact. A
                // data connect is turned away also by a live peer (on verbs, one naming a session the peer has just
                // dropped is REJECTED like one to a closed port); its next attempt names the current session.
                attemptFailed(gen, "cannot connect: " + rootMessage(error), trafficClass == TrafficClass.CONTROL && refused(error));
                return;
            }
            byte[] nonce = Auth.nonce();
            synchronized (this) {
                if (gen != generation || state == ChannelState.CLOSED || state == ChannelState.FAILED) {
                    opened.close();
                    return;
                }
                channel = opened;
                clientNonce = nonce;
                session = sessionId;
                handshakeTimer = owner.client().schedule(() -> attemptFailed(gen, "no READY from the server within "
                        + options.handshakeTimeout().toMillis() + " ms (handshakeTimeout)"), options.handshakeTimeout().toNanos());
            }
            UUID instance = owner.client().instance(owner.address());
            byte[] named = credential != null && trafficClass == TrafficClass.CONTROL ? credential.credential() : new byte[0];
            ByteBuffer hello = new Handshake.Hello(trafficClass, instance, nonce, sessionId, credential != null, named).encode();
            opened.send(new ControlFrame(Type.HELLO, 0, hello).encode());
        });
    }

    /** The provider channel's callbacks, tied to the generation they were opened for. */
    private final class Handler implements ChannelHandler {
        private final int gen;

        Handler(int gen) {
            this.gen = gen;
        }

        @Override
        public void onMessage(Channel ch, ByteBuffer message) {
            ControlFrame frame;
            try {
                frame = ControlFrame.decode(message);
            } catch (MalformedMessageException e) {
                metrics.controlDropped();
                LOG.warn("dropped a corrupt control message from {}: {}", owner.address(), e.getMessage());
                return;
            }
            onFrame(gen, ch, frame);
        }

        /** The server READs nothing of ours: the regions of this node are for the peers it serves. */
        @Override
        public boolean permitsRemoteRead(Channel ch, int rkey) {
            return false;
        }

        @Override
        public void onClosed(Channel ch, TransportException cause) {
            reconnect(gen, cause == null ? "closed" : cause.getMessage());
        }
    }

    private void onFrame(int gen, Channel ch, ControlFrame frame) {
        switch (frame.type()) {
            case CHALLENGE -> onChallenge(gen, ch, frame.payload());
            case READY -> onReady(gen, frame.payload());
            case UNBOUND -> attemptFailed(gen, "the server knows no live session of this data channel (the control"
                    + " channel's was ended); connecting again in the control channel's next session");
            case REJECT -> {
                String reason;
                try {
                    reason = frame.reason();
                } catch (MalformedMessageException e) {
                    reason = "(a malformed reason: " + e.getMessage() + ")";
                }
                metrics.authFailure();
                owner.authenticationRefused();
                fail(gen, "the server refused the handshake: " + reason);
            }
            default -> owner.onFrame(frame);
        }
    }

    private void onChallenge(int gen, Channel ch, ByteBuffer payload) {
        ClientCredential credential = owner.credential();
        byte[] secret = credential == null ? null : credential.key();
        byte[] nonce;
        byte[] sessionId;
        synchronized (this) {
            nonce = clientNonce;
            sessionId = session;
        }
        if (secret == null) {
            metrics.authFailure();
            owner.authenticationRefused();
            fail(gen, "the server asked for authentication but no secret is configured");
            return;
        }
        Handshake.Challenge challenge;
        try {
            challenge = Handshake.Challenge.decode(payload);
        } catch (MalformedMessageException e) {
            metrics.authFailure();
            owner.authenticationRefused();
            fail(gen, "the server asked for authentication with a malformed challenge: " + e.getMessage());
            return;
        }
        byte[] key = trafficClass == TrafficClass.DATA ? Auth.sessionKey(secret, sessionId) : secret;
        if (!Auth.matches(Auth.serverProof(key, nonce, challenge.nonce()), challenge.mac())) {
            metrics.authFailure();
            owner.authenticationRefused();
            fail(gen, "the server failed to prove it knows the shared secret (or the credential's key)");
            return;
        }
        ch.send(new ControlFrame(Type.PROOF, 0, new Handshake.Proof(Auth.clientProof(key, nonce, challenge.nonce())).encode())
                .encode());
    }

    private void onReady(int gen, ByteBuffer payload) {
        byte[] started = null;
        if (trafficClass == TrafficClass.CONTROL) {
            try {
                started = Handshake.Ready.decode(payload).session();
            } catch (MalformedMessageException e) {
                attemptFailed(gen, "a malformed READY: " + e.getMessage());
                return;
            }
        }
        synchronized (this) {
            if (gen != generation || (state != ChannelState.CONNECTING && state != ChannelState.RECONNECTING)) {
                return;
            }
            cancelHandshakeTimer();
            // Right after a reconnect the peer may still be recovering: start small and grow.
            window = everReady ? Math.min(depth, options.rampInitialWindow()) : depth;
            everReady = true;
            failedAttempts = 0;
            connections++;
            transition(ChannelState.READY, "the server is ready");
        }
        if (started != null) {
            owner.sessionStarted(started);
        }
        dispatch();
    }

    // ---------------------------------------------------------------- failure, suspicion, reconnecting

    /**
     * Periodic check. Suspicion means no progress, not a slow operation: work outstanding, no
     * completion and not one byte heard from the peer on this channel for the detection window make
     * the channel SUSPECT, and the peer is probed on the control channel. It is READY again as soon as
     * bytes or completions move or the probe is answered; rebuilt only when neither happens within
     * one more window. {@code pausedNanos} of the time since the last check this process did not run:
     * not counted against the peer.
     */
    void tick(long now, long pausedNanos) {
        int gen;
        boolean suspect = false;
        boolean rebuild = false;
        synchronized (this) {
            gen = generation;
            lastProgress = earliest(lastProgress + pausedNanos, now);
            suspectSince = earliest(suspectSince + pausedNanos, now);
            long detection = options.detectionWindow().toNanos();
            long heard = heardNanos();
            if (state == ChannelState.READY && inFlight > 0 && now - heard > detection) {
                transition(ChannelState.SUSPECT, "no completion and no byte from the peer for "
                        + TimeUnit.NANOSECONDS.toMillis(now - heard) + " ms");
                suspectSince = now;
                probeUnanswered = false;
                suspect = true;
            } else if (state == ChannelState.SUSPECT && heard - suspectSince > 0) {
                lastProgress = heard;
                transition(ChannelState.READY, "bytes from the peer are moving");
            } else if (state == ChannelState.SUSPECT && probeUnanswered && now - suspectSince > detection) {
                rebuild = true;
            }
        }
        if (suspect) {
            // The probe rides the control channel, which bulk READs never hold up.
            owner.probe().whenComplete((ok, error) -> probeAnswered(gen, error == null));
        } else if (rebuild) {
            reconnect(gen, "no progress and no answer to a probe within the detection window ("
                    + options.detectionWindow().toMillis() + " ms)");
        }
    }

    /** The earlier of two {@link System#nanoTime()} values. */
    private static long earliest(long a, long b) {
        return b - a < 0 ? b : a;
    }

    /** The later of two {@link System#nanoTime()} values. */
    private static long latest(long a, long b) {
        return b - a > 0 ? b : a;
    }

    /** When the peer was last heard from on this channel: a completion, or bytes arriving. */
    synchronized long heardNanos() {
        return channel == null ? lastProgress : latest(lastProgress, channel.lastHeardNanos());
    }

    private void probeAnswered(int gen, boolean answered) {
        synchronized (this) {
            if (!answered && gen == generation && state == ChannelState.SUSPECT) {
                probeUnanswered = true; // the next tick rebuilds unless bytes moved meanwhile
            }
            if (answered && gen == generation && state == ChannelState.SUSPECT) {
                lastProgress = System.nanoTime(); // the peer is alive, only slow: give it another window
                transition(ChannelState.READY, "the peer answered a probe");
            }
        }
    }

    /** The channel of generation {@code gen} broke: close it and build a new one after a backoff. */
    private void reconnect(int gen, String why) {
        Channel old;
        synchronized (this) {
            if (gen != generation) {
                return;
            }
            switch (state) {
                case READY, SUSPECT -> {
                    metrics.reconnect();
                    transition(ChannelState.RECONNECTING, why);
                    old = takeChannel();
                }
                case CONNECTING, RECONNECTING -> {
                    if (channel == null) {
                        return; // no connection of this attempt yet: its connect or backoff is pending
                    }
                    old = null; // broke during the handshake: the attempt failed
                }
                default -> {
                    return;
                }
            }
        }
        if (old == null) {
            attemptFailed(gen, why);
        } else {
            if (trafficClass == TrafficClass.CONTROL) {
                owner.sessionEnded(null); // the server ends the session's data channels; they wait for the next one
            }
            old.close();
            scheduleAttempt();
        }
    }

    private void attemptFailed(int gen, String why) {
        attemptFailed(gen, why, false);
    }

    /** One connect attempt failed ({@code refused}: turned away, nothing listens there): try again after a backoff, or give up. */
    private void attemptFailed(int gen, String why, boolean refused) {
        Channel old;
        boolean giveUp;
        synchronized (this) {
            if (gen != generation || (state != ChannelState.CONNECTING && state != ChannelState.RECONNECTING)) {
                return;
            }
            old = takeChannel();
            giveUp = ++failedAttempts >= options.reconnectMaxAttempts();
            if (!giveUp) {
                LOG.info("{}: attempt {} of {} failed: {}", describe(), failedAttempts, options.reconnectMaxAttempts(), why);
                if (state == ChannelState.CONNECTING) {
                    transition(ChannelState.RECONNECTING, why);
                }
            }
        }
        if (old != null) {
            old.close();
        }
        if (giveUp) {
            fail(gen, "gave up after " + options.reconnectMaxAttempts() + " attempts; last: " + why);
        } else {
            scheduleAttempt();
            owner.connectAttemptFailed(refused);
        }
    }

    /** Gives up now, whatever attempt is pending (the peer is known gone): waiting work fails so callers fall back. */
    void abandon(String why) {
        int gen;
        synchronized (this) {
            gen = generation;
        }
        fail(gen, why);
    }

    private void scheduleAttempt() {
        int gen;
        int attempt;
        synchronized (this) {
            gen = ++generation;
            attempt = failedAttempts + 1;
        }
        long delay = options.backoffNanos(attempt, ThreadLocalRandom.current().nextDouble());
        owner.client().reconnectScheduled(this, attempt, delay);
        owner.client().schedule(() -> {
            synchronized (this) {
                if (gen != generation || state != ChannelState.RECONNECTING) {
                    return;
                }
            }
            owner.client().reconnectAttempted(this, attempt);
            connect(gen);
        }, delay);
    }

    /** Gives up: waiting work fails so callers fall back. */
    private void fail(int gen, String why) {
        List<Work> dropped;
        Channel old;
        synchronized (this) {
            if (gen != generation || state == ChannelState.FAILED || state == ChannelState.CLOSED) {
                return;
            }
            generation++;
            transition(ChannelState.FAILED, why);
            old = takeChannel();
            dropped = List.copyOf(waiting);
            waiting.clear();
        }
        if (old != null) {
            old.close();
        }
        owner.channelFailed(this); // first, so whoever hears of a dropped work sees the peer as failed
        if (trafficClass == TrafficClass.CONTROL) {
            owner.sessionEnded(unavailable("the " + describe() + " failed: " + why, null));
        }
        PeerUnavailableException cause = unavailable("the " + describe() + " failed: " + why, null);
        for (Work work : dropped) {
            work.failed(cause);
        }
    }

    void close() {
        List<Work> dropped;
        Channel old;
        synchronized (this) {
            if (state == ChannelState.CLOSED || state == ChannelState.FAILED) {
                return; // a failed channel holds nothing and stays FAILED for whoever still asks
            }
            generation++;
            transition(ChannelState.CLOSED, "closed by its owner");
            old = takeChannel();
            dropped = List.copyOf(waiting);
            waiting.clear();
        }
        if (old != null) {
            old.close();
        }
        PeerUnavailableException cause = unavailable("the " + describe() + " was closed", null);
        if (trafficClass == TrafficClass.CONTROL) {
            owner.sessionEnded(cause);
        }
        dropped.forEach(work -> work.failed(cause));
    }

    private Channel takeChannel() {
        cancelHandshakeTimer();
        Channel old = channel;
        channel = null;
        return old;
    }

    private void cancelHandshakeTimer() {
        if (handshakeTimer != null) {
            handshakeTimer.cancel(false);
            handshakeTimer = null;
        }
    }

    private void transition(ChannelState to, String why) {
        ChannelState from = state;
        state = to;
        metrics.transition(trafficClass, from, to);
        String line = "{}: {} -> {} ({})";
        switch (to) {
            case FAILED -> LOG.warn(line, describe(), from, to, why);
            case RECONNECTING, SUSPECT -> LOG.info(line, describe(), from, to, why);
            default -> LOG.debug(line, describe(), from, to, why);
        }
        owner.client().stateChanged(this, from, to);
    }

    synchronized int window() {
        return window;
    }

    TrafficClass trafficClass() {
        return trafficClass;
    }

    PeerConnection owner() {
        return owner;
    }

    String describe() {
        return trafficClass.name().toLowerCase(java.util.Locale.ROOT) + " channel to " + owner.address();
    }

    private PeerUnavailableException unavailable(String message, Throwable cause) {
        return new PeerUnavailableException(message, cause);
    }

    private static boolean refused(Throwable error) {
        Throwable t = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        return t instanceof TransportException e && e.status() == Status.CONNECTION_REFUSED;
    }

    private static String rootMessage(Throwable error) {
        Throwable t = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        return t.getMessage();
    }

    @Override
    public String toString() {
        return describe() + " [" + state() + "]";
    }
}

package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.policy.ControlFrame.Type;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * Everything this process has with one peer: a control channel for requests and probes, a data
 * channel for READs, the peer's byte budget and its outstanding requests. Shared by all users.
 */
public final class PeerConnection implements AutoCloseable {
    private final PolicyClient client;
    private final InetSocketAddress address;
    /** The client's options as they apply to this peer (its detection window and reconnect settings). */
    private final PolicyOptions options;
    private final PeerChannel control;
    private final PeerChannel data;
    private final AtomicLong bytesInFlight = new AtomicLong();
    private final Map<Long, PendingRequest> requests = new ConcurrentHashMap<>();
    private final AtomicBoolean firstBlockClaimed = new AtomicBoolean();
    private final AtomicBoolean askingLiveness = new AtomicBoolean();
    private volatile boolean failed;
    private volatile boolean authenticationRefused;
    /** The control channel's session (the id its READY carried): a new one while it reconnects, failed once it gives up. */
    private CompletableFuture<byte[]> session = new CompletableFuture<>(); // guarded by this

    /** What the control channel authenticates with; null: nothing (the server must not ask). */
    private final ClientCredential credential;

    PeerConnection(PolicyClient client, InetSocketAddress address, ClientCredential credential) {
        this.client = client;
        this.address = address;
        this.credential = credential;
        this.options = client.options().forPeer(address);
        this.control = new PeerChannel(this, TrafficClass.CONTROL, options.controlQueueDepth());
        this.data = new PeerChannel(this, TrafficClass.DATA, options.dataQueueDepth());
    }

    void start() {
        control.start();
        data.start();
    }

    public InetSocketAddress address() {
        return address;
    }

    ClientCredential credential() {
        return credential;
    }

    /** The handshake failed on authentication (the server refused it, or it failed to prove the key). */
    void authenticationRefused() {
        authenticationRefused = true;
    }

    /**
     * True once a handshake with the peer failed on authentication (a refused credential or secret):
     * the peer is there, it does not take this connection's credential.
     */
    public boolean isAuthenticationRefused() {
        return authenticationRefused;
    }

    public ChannelState state(TrafficClass trafficClass) {
        return channel(trafficClass).state();
    }

    /** True once either channel has given up (it stays so): callers should take their other path. */
    public boolean isFailed() {
        return failed;
    }

    // ---------------------------------------------------------------- control requests

    /**
     * Sends a request over the control channel and completes with the peer's response. An
     * unanswered request is sent again with the same id (the server answers it once); it fails
     * with {@link PeerUnavailableException} when the peer is given up or the attempts run out.
     */
    public CompletableFuture<ByteBuffer> request(ByteBuffer payload) {
        PendingRequest pending = new PendingRequest(client.nextRequestId(), copy(payload));
        requests.put(pending.id, pending);
        pending.future.whenComplete((r, e) -> requests.remove(pending.id));
        pending.send();
        return pending.future;
    }

    /** Sends a PING on the control channel; completes when the PONG comes back. */
    CompletableFuture<Void> probe() {
        PendingRequest ping = new PendingRequest(client.nextRequestId(), null);
        requests.put(ping.id, ping);
        ping.future.whenComplete((r, e) -> requests.remove(ping.id));
        control.submit(new MessageWork(new ControlFrame(Type.PING, ping.id, null), ping));
        client.schedule(() -> ping.future.completeExceptionally(new TimeoutException("no PONG")),
                options.detectionWindow().toNanos());
        return ping.future.thenApply(r -> null);
    }

    /** A frame on the control channel that is not part of the handshake. */
    void onFrame(ControlFrame frame) {
        PendingRequest pending = requests.get(frame.requestId());
        if (pending == null) {
            return; // the answer to a request already answered (a retry's duplicate) or given up
        }
        switch (frame.type()) {
            case RESPONSE, PONG -> {
                client.metrics().controlRoundTrip(System.nanoTime() - pending.lastSent);
                pending.future.complete(frame.payload());
            }
            case ERROR -> {
                String reason;
                try {
                    reason = frame.reason();
                } catch (MalformedMessageException e) {
                    reason = "(a malformed reason: " + e.getMessage() + ")";
                }
                pending.future.completeExceptionally(new PeerUnavailableException("the peer failed the request: " + reason, null));
            }
            default -> { }
        }
    }

    private final class PendingRequest {
        final long id;
        final ByteBuffer payload;
        final CompletableFuture<ByteBuffer> future = new CompletableFuture<>();
        final AtomicInteger sends = new AtomicInteger();
        volatile long lastSent = System.nanoTime();
        volatile boolean posted;

        PendingRequest(long id, ByteBuffer payload) {
            this.id = id;
            this.payload = payload;
        }

        void send() {
            if (future.isDone()) {
                return;
            }
            if (sends.getAndIncrement() > 0) {
                client.metrics().requestRetry();
            }
            posted = false;
            control.submit(new MessageWork(new ControlFrame(Type.REQUEST, id, payload), this));
            client.schedule(this::timedOut, client.options().requestTimeout().toNanos());
        }

        private void timedOut() {
            if (future.isDone()) {
                return;
            }
            if (!posted) {
                // Still waiting for a channel: the channel's own attempts bound the wait.
                client.schedule(this::timedOut, client.options().requestTimeout().toNanos());
            } else if (sends.get() >= client.options().requestMaxAttempts()) {
                future.completeExceptionally(new PeerUnavailableException("no answer from " + address + " to request "
                        + id + " after " + sends.get() + " sends (requestTimeout, requestMaxAttempts)", null));
            } else {
                send();
            }
        }
    }

    /** A control message as channel work; a failed post fails the request it belongs to. */
    private static final class MessageWork extends PeerChannel.Work {
        private final ControlFrame frame;
        private final PendingRequest request;

        MessageWork(ControlFrame frame, PendingRequest request) {
            super(0);
            this.frame = frame;
            this.request = request;
        }

        @Override
        CompletableFuture<Void> post(Channel channel) {
            request.lastSent = System.nanoTime();
            return channel.send(frame.encode());
        }

        @Override
        void succeeded() {
            request.posted = true;
        }

        @Override
        void failed(Throwable cause) {
            request.future.completeExceptionally(cause);
        }
    }

    // ---------------------------------------------------------------- READs

    /**
     * READs {@code block} into {@code destination} at {@code offset}, in pieces of at most 8 MiB,
     * within the byte budgets. Its CRC32C is verified on a sample of blocks, on the first block
     * from this peer and on every retry; a mismatch is READ once more and then reported as a
     * {@link BlockFetchException}, never handed up.
     */
    public CompletableFuture<Void> read(RemoteBlock block, MemoryRegion destination, int offset) {
        if (offset < 0 || offset > destination.length() - block.length()) {
            throw new IllegalArgumentException("block of " + block.length() + " bytes does not fit at offset " + offset
                    + " of a " + destination.length() + "-byte region");
        }
        CompletableFuture<Void> done = new CompletableFuture<>();
        boolean verify = firstBlockClaimed.compareAndSet(false, true)
                || ThreadLocalRandom.current().nextDouble() < client.options().checksumSampleRate();
        new BlockRead(block, destination, offset, done).start(verify, false);
        return done;
    }

    private final class BlockRead {
        private final RemoteBlock block;
        private final MemoryRegion destination;
        private final int offset;
        private final CompletableFuture<Void> done;
        private final long started = System.nanoTime();
        private final AtomicBoolean failedOnce = new AtomicBoolean();

        BlockRead(RemoteBlock block, MemoryRegion destination, int offset, CompletableFuture<Void> done) {
            this.block = block;
            this.destination = destination;
            this.offset = offset;
            this.done = done;
        }

        void start(boolean verify, boolean retry) {
            int pieces = (block.length() + Channel.MAX_READ_BYTES - 1) / Channel.MAX_READ_BYTES;
            AtomicInteger remaining = new AtomicInteger(pieces);
            for (int i = 0; i < pieces; i++) {
                int from = i * Channel.MAX_READ_BYTES;
                int length = Math.min(Channel.MAX_READ_BYTES, block.length() - from);
                data.submit(new PeerChannel.Work(length) {
                    @Override
                    CompletableFuture<Void> post(Channel channel) {
                        return channel.read(block.address() + from, block.rkey(), length, destination, offset + from);
                    }

                    @Override
                    void succeeded() {
                        if (remaining.decrementAndGet() == 0) {
                            finished(verify, retry);
                        }
                    }

                    @Override
                    void failed(Throwable cause) {
                        if (cause instanceof PeerUnavailableException || cause instanceof KeyRefusedException) {
                            fallBack(cause);
                        } else if (cause instanceof TransportException t && t.status() == Status.REMOTE_ACCESS_ERROR) {
                            fallBack(new KeyRefusedException("READ of " + block + " from " + address + " refused (its key or"
                                    + " range is not granted on this connection): " + cause.getMessage(), cause));
                        } else {
                            fallBack(new BlockFetchException("READ of " + block + " from " + address + " failed: "
                                    + cause.getMessage(), false, cause));
                        }
                    }
                });
            }
        }

        /** Fails the block once, counted before the caller can see it (one of its pieces may fail too). */
        private void fallBack(Throwable cause) {
            if (failedOnce.compareAndSet(false, true)) {
                client.metrics().fallback();
                done.completeExceptionally(cause);
            }
        }

        private void finished(boolean verify, boolean retry) {
            if (verify || retry) {
                CRC32C crc = new CRC32C();
                crc.update(destination.buffer().slice(offset, block.length()));
                boolean intact = (int) crc.getValue() == block.crc32c();
                client.metrics().checksumCheck(intact);
                if (!intact) {
                    if (retry) {
                        fallBack(new BlockFetchException("block " + block + " from " + address
                                + " failed its CRC32C twice", true, null));
                    } else {
                        start(true, true); // READ it once more, verified
                    }
                    return;
                }
            }
            client.metrics().blockRead(address, block.length(), System.nanoTime() - started);
            done.complete(null);
        }
    }

    // ---------------------------------------------------------------- budgets and life cycle

    /** Takes {@code bytes} of the peer's and the process's READ budget; one READ may always go alone. */
    boolean reserve(int bytes) {
        long mine = bytesInFlight.get();
        if (mine > 0 && mine + bytes > client.options().maxBytesInFlightPerPeer()) {
            return false;
        }
        if (!client.reserve(bytes)) {
            return false;
        }
        bytesInFlight.addAndGet(bytes);
        return true;
    }

    void release(int bytes) {
        bytesInFlight.addAndGet(-bytes);
        client.release(bytes);
    }

    long bytesInFlight() {
        return bytesInFlight.get();
    }

    void dispatchData() {
        if (data.hasWaitingWork()) {
            data.dispatch();
        }
    }

    /**
     * A connect attempt of one of the channels failed: if the peer is known gone for good
     * ({@link PolicyClient.Liveness}), both channels give up now and callers fall back.
     */
    void connectAttemptFailed(boolean refused) {
        if (!askingLiveness.compareAndSet(false, true)) {
            return; // one question at a time: the other channel asked already
        }
        client.declaredLost(address, refused).whenComplete((lost, error) -> {
            askingLiveness.set(false);
            if (Boolean.TRUE.equals(lost)) {
                String why = "the peer was declared lost (it no longer serves at " + address
                        + (refused ? ": the connection was refused" : "") + "); not trying again";
                control.abandon(why);
                data.abandon(why);
            }
        });
    }

    /** The control session the data channel's next attempt belongs to, once there is one. */
    synchronized CompletableFuture<byte[]> session() {
        return session;
    }

    /** The control channel is READY in session {@code id}. */
    void sessionStarted(byte[] id) {
        CompletableFuture<byte[]> current;
        synchronized (this) {
            if (session.isDone()) {
                session = new CompletableFuture<>();
            }
            current = session;
        }
        current.complete(id);
    }

    /** The control channel's session ended: it reconnects ({@code cause} null), or it gave up or was closed. */
    void sessionEnded(Throwable cause) {
        CompletableFuture<byte[]> current;
        synchronized (this) {
            if (session.isDone() && !session.isCompletedExceptionally()) {
                session = new CompletableFuture<>();
            }
            current = session;
        }
        if (cause != null) {
            current.completeExceptionally(cause);
        }
    }

    void channelFailed(PeerChannel channel) {
        failed = true;
        client.peerFailed(this);
    }

    PolicyClient client() {
        return client;
    }

    PolicyOptions options() {
        return options;
    }

    PeerChannel channel(TrafficClass trafficClass) {
        return trafficClass == TrafficClass.CONTROL ? control : data;
    }

    void tick(long now, long pausedNanos) {
        control.tick(now, pausedNanos);
        data.tick(now, pausedNanos);
    }

    @Override
    public void close() {
        client.closed(this);
        data.close(); // first: it would otherwise hear its control channel's session end and fail
        control.close();
        PeerUnavailableException closed = new PeerUnavailableException("connection to " + address + " closed", null);
        requests.values().forEach(r -> r.future.completeExceptionally(closed));
    }

    private static ByteBuffer copy(ByteBuffer payload) {
        ByteBuffer copy = ByteBuffer.allocate(payload.remaining());
        copy.put(payload.duplicate()).flip();
        return copy;
    }

    @Override
    public String toString() {
        return "PeerConnection[" + address + ", control " + control.state() + ", data " + data.state() + "]";
    }
}

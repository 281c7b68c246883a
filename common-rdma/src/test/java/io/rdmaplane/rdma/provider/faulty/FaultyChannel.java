package io.rdmaplane.rdma.provider.faulty;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One channel of a {@link FaultyNode}: passes operations to the wrapped channel and hands what comes
 * back (completions, messages, the close) to the application through one ordered queue, which a
 * stall holds back.
 */
final class FaultyChannel implements Channel {
    private static final Logger LOG = LoggerFactory.getLogger(FaultyChannel.class);

    private final FaultyNode node;
    /** Accepted from a peer (its messages after the first are requests), or opened by this node. */
    private final boolean accepted;
    private final AtomicBoolean firstMessageSeen = new AtomicBoolean();
    private final AtomicInteger outstanding = new AtomicInteger();
    private final ArrayDeque<Runnable> events = new ArrayDeque<>();
    private final ChannelHandler fromInner = new FromInner();
    private boolean draining; // guarded by events
    private volatile Channel inner;
    private volatile ChannelHandler handler;
    private volatile boolean cut;
    private volatile boolean closedHere;
    /** What a stall froze: the wrapped channel's progress is not seen while the node holds. */
    private volatile long progressSeen = System.nanoTime();

    /** A channel a peer opened; its handler comes from the acceptor. */
    FaultyChannel(FaultyNode node, Channel inner) {
        this.node = node;
        this.accepted = true;
        this.inner = inner;
        node.opened(this);
    }

    /** A channel this node opens; the wrapped one comes with the connection. */
    FaultyChannel(FaultyNode node, ChannelHandler handler) {
        this.node = node;
        this.accepted = false;
        this.handler = handler;
    }

    ChannelHandler acceptedWith(ChannelHandler acceptorsHandler) {
        this.handler = acceptorsHandler;
        return fromInner;
    }

    ChannelHandler fromInner() {
        return fromInner;
    }

    Channel connected(Channel channel) {
        attach(channel);
        node.opened(this);
        return this;
    }

    /** A connecting channel may hear from its peer before the connection completes. */
    private void attach(Channel channel) {
        if (inner == null) {
            inner = channel;
        }
    }

    // ---------------------------------------------------------------- faults

    void cut() {
        cut = true;
        inner.close();
        resume();
    }

    /** Delivers what a stall held back (unless another thread is at it already). */
    void resume() {
        synchronized (events) {
            if (draining) {
                return;
            }
            draining = true;
        }
        drain();
    }

    private boolean holds() {
        return node.holds() && !cut && !closedHere;
    }

    private void deliver(Runnable event) {
        synchronized (events) {
            events.add(event);
            if (draining) {
                return; // the thread draining runs it, in order
            }
            draining = true;
        }
        drain();
    }

    private void drain() {
        while (true) {
            Runnable next;
            synchronized (events) {
                if (events.isEmpty() || holds()) {
                    draining = false;
                    return;
                }
                next = events.poll();
            }
            try {
                next.run();
            } catch (RuntimeException e) {
                LOG.error("a callback of {} failed", this, e);
            }
        }
    }

    /** Completes {@code done} as the wrapped operation ended, as this channel's faults make it look. */
    private void settle(CompletableFuture<Void> done, Throwable error) {
        outstanding.decrementAndGet();
        Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
        if (cut) {
            done.completeExceptionally(cutError());
        } else if (cause != null) {
            done.completeExceptionally(cause);
        } else if (closedHere) {
            done.completeExceptionally(new TransportException(Status.FLUSHED, "channel closed"));
        } else {
            done.complete(null);
        }
    }

    private static TransportException cutError() {
        return new TransportException(Status.RETRY_EXCEEDED, "connection cut (fault injection)");
    }

    // ---------------------------------------------------------------- Channel

    @Override
    public CompletableFuture<Void> read(long remoteAddress, int rkey, int length, MemoryRegion local, int localOffset) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        outstanding.incrementAndGet();
        CompletableFuture<Void> posted;
        boolean flipped = node.refusesReads();
        try {
            posted = inner.read(remoteAddress, flipped ? ~rkey : rkey, length, local, localOffset);
        } catch (RuntimeException e) {
            outstanding.decrementAndGet();
            throw e;
        }
        if (posted.isCompletedExceptionally()) {
            posted.whenComplete((ok, error) -> settle(done, error)); // refused here (e.g. QUEUE_FULL): no peer to wait for
            return done;
        }
        posted.whenComplete((ok, error) -> {
            Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
            if (flipped && cause instanceof TransportException t && t.status() == Status.REMOTE_ACCESS_ERROR) {
                node.refused();
            }
            if (error == null && node.takeReadToCorrupt()) {
                int at = localOffset + length / 2;
                local.buffer().put(at, (byte) (local.buffer().get(at) ^ 0x10));
            }
            deliver(() -> settle(done, error));
        });
        return done;
    }

    @Override
    public CompletableFuture<Void> send(ByteBuffer message) {
        ByteBuffer out = message;
        if (node.takeSendToCorrupt()) {
            out = copy(message);
            int at = out.remaining() / 2;
            out.put(at, (byte) (out.get(at) ^ 0x01));
        }
        CompletableFuture<Void> done = new CompletableFuture<>();
        outstanding.incrementAndGet();
        CompletableFuture<Void> posted;
        try {
            posted = inner.send(out);
        } catch (RuntimeException e) {
            outstanding.decrementAndGet();
            throw e;
        }
        posted.whenComplete((ok, error) -> deliver(() -> settle(done, error)));
        return done;
    }

    @Override
    public int queueDepth() {
        return inner.queueDepth();
    }

    @Override
    public int maxMessageSize() {
        return inner.maxMessageSize();
    }

    @Override
    public int outstanding() {
        return outstanding.get();
    }

    /** The wrapped channel's progress, except during a stall or after a cut: then none is seen; during a crawl, now. */
    @Override
    public long lastHeardNanos() {
        if (node.crawling() && !cut && !closedHere) {
            progressSeen = System.nanoTime();
            return progressSeen;
        }
        if (holds() || cut) {
            return progressSeen;
        }
        Channel wrapped = inner;
        long now = wrapped == null ? progressSeen : wrapped.lastHeardNanos();
        if (now - progressSeen > 0) {
            progressSeen = now;
        }
        return progressSeen;
    }

    @Override
    public Channel transport() {
        Channel under = inner;
        return under == null ? this : under.transport();
    }

    @Override
    public boolean isOpen() {
        return !cut && inner.isOpen();
    }

    @Override
    public SocketAddress remoteAddress() {
        return inner.remoteAddress();
    }

    /** A local close is not the peer's stall: what was held back settles now (FLUSHED). */
    @Override
    public void close() {
        closedHere = true;
        inner.close();
        resume();
    }

    @Override
    public String toString() {
        return "faulty " + inner;
    }

    private static ByteBuffer copy(ByteBuffer message) {
        ByteBuffer copy = ByteBuffer.allocate(message.remaining());
        copy.put(message.duplicate()).flip();
        return copy;
    }

    /** What the wrapped channel reports, queued for the application. */
    private final class FromInner implements ChannelHandler {
        @Override
        public void onMessage(Channel channel, ByteBuffer message) {
            attach(channel);
            ByteBuffer kept = copy(message); // valid only during this call, and it may be held
            boolean request = accepted && !firstMessageSeen.compareAndSet(false, true);
            deliver(() -> {
                if (closedHere || cut) {
                    return;
                }
                handler.onMessage(FaultyChannel.this, kept);
                if (request) {
                    node.answered();
                }
            });
        }

        @Override
        public boolean permitsRemoteRead(Channel channel, int rkey) {
            ChannelHandler chosen = handler;
            return chosen != null && chosen.permitsRemoteRead(FaultyChannel.this, rkey); // asked at once: a READ waits for nobody
        }

        @Override
        public void onClosed(Channel channel, TransportException cause) {
            attach(channel);
            node.forget(FaultyChannel.this);
            deliver(() -> handler.onClosed(FaultyChannel.this, cut ? cutError() : cause));
        }
    }
}

package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.IOException;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One selector thread of a {@link TcpNode}, serving the channels of one {@link Lane}: all their
 * socket I/O, parsing, READ serving and completions. A node has one loop per lane, so control
 * messages are read and answered on a thread that never copies bulk data; and the bulk loop
 * gives up the CPU every {@value #CROWDED_TURN_BYTES} bytes it moves, so that a woken control
 * loop is not left waiting for a core (see {@link #giveWay}).
 */
final class TcpLoop {
    private static final Logger LOG = LoggerFactory.getLogger(TcpLoop.class);
    private static final int CROWDED_TURN_BYTES = 256 << 10;
    private static final int ALONE_TURN_BYTES = 8 << 20;
    /** How long after its last socket event a control loop counts as busy. */
    private static final long CONTROL_BUSY_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

    private final TcpNode node;
    private final String name;
    private final Selector selector;
    private final Thread thread;
    private final long tickMillis;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean wakeupPending = new AtomicBoolean();
    private final Set<TcpChannel> channels = ConcurrentHashMap.newKeySet();
    private final ArrayDeque<TcpChannel> toFlush = new ArrayDeque<>(); // loop thread only
    private boolean crowded; // loop thread only
    private boolean givingWay; // loop thread only
    private long movedSinceYield; // loop thread only; bulk loops only
    /** The control loop a bulk loop gives way to; null on a control loop. */
    private final TcpLoop control;
    /** When this loop last had socket events (written by its thread, read by the bulk loop). */
    private volatile long eventsAt = System.nanoTime() - 2 * CONTROL_BUSY_NANOS;
    private volatile boolean stopped;

    /** A loop for {@code lane}; a bulk loop gives way to {@code control} (null for the control loop itself). */
    TcpLoop(TcpNode node, Lane lane, long tickMillis, TcpLoop control) throws TransportException {
        this.node = node;
        this.control = control;
        this.name = node.name() + "-" + lane.name().toLowerCase(java.util.Locale.ROOT);
        this.tickMillis = tickMillis;
        try {
            this.selector = Selector.open();
        } catch (IOException e) {
            throw new TransportException(Status.UNAVAILABLE, "cannot open a selector: " + e, e);
        }
        this.thread = new Thread(this::run, name);
        thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    Selector selector() {
        return selector;
    }

    /** Runs a task on the loop's thread (at once if called from it). */
    void execute(Runnable task) {
        if (Thread.currentThread() == thread) {
            task.run();
            return;
        }
        tasks.add(task);
        if (wakeupPending.compareAndSet(false, true)) {
            selector.wakeup();
        }
        if (stopped && !thread.isAlive()) {
            runTasks(); // the thread is gone: settle the task here rather than lose it
        }
    }

    private void runTasks() {
        for (Runnable task; (task = tasks.poll()) != null; ) {
            try {
                task.run();
            } catch (Throwable e) { // an Error too: one task's failure never stops the loop's thread
                LOG.error("{}: task failed", name, e);
            }
        }
    }

    /**
     * Flushes the channel soon: at the end of the current loop turn when called on the loop's
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
        return crowded || givingWay ? CROWDED_TURN_BYTES : ALONE_TURN_BYTES;
    }

    /** Bytes a channel of this loop read or wrote: a bulk loop counts them toward its next yield. */
    void moved(long bytes) {
        if (control != null) {
            movedSinceYield += bytes;
        }
    }

    boolean inLoop() {
        return Thread.currentThread() == thread;
    }

    void added(TcpChannel channel) {
        channels.add(channel);
    }

    void removed(TcpChannel channel) {
        channels.remove(channel);
    }

    Set<TcpChannel> channels() {
        return channels;
    }

    Thread thread() {
        return thread;
    }

    private void run() {
        Throwable failure = null;
        try {
            while (!stopped) {
                selector.select(tickMillis);
                wakeupPending.set(false);
                runTasks();
                // Several channels with work this turn: each takes a small share, so one channel's
                // megabytes never hold up another's. One alone may move more per call.
                crowded = selector.selectedKeys().size() > 1 || !toFlush.isEmpty() || channels.size() > 1;
                long now = System.nanoTime();
                if (control == null && !selector.selectedKeys().isEmpty()) {
                    eventsAt = now;
                }
                givingWay = control != null && now - control.eventsAt < CONTROL_BUSY_NANOS;
                Iterator<SelectionKey> keys = selector.selectedKeys().iterator();
                while (keys.hasNext()) {
                    SelectionKey key = keys.next();
                    keys.remove();
                    handle(key);
                }
                for (TcpChannel channel; (channel = toFlush.poll()) != null; ) {
                    guarded(channel, channel::flush);
                }
                now = System.nanoTime();
                for (TcpChannel channel : channels) {
                    channel.checkTimeout(now);
                }
                giveWay();
            }
        } catch (Throwable t) {
            LOG.error("{}: transport thread failed; closing the node", name, t);
            failure = t;
        } finally {
            stopped = true;
            TransportException closing = new TransportException(Status.FLUSHED, node.name() + " closed");
            for (TcpChannel channel : new ArrayList<>(channels)) {
                channel.terminate(closing, 0, Status.FLUSHED);
            }
            runTasks();
            TcpNode.closeQuietly(selector);
            if (failure != null) {
                node.loopFailed(failure);
            }
        }
    }

    /**
     * With few cores, the scheduler lets a running thread finish its slice (milliseconds) before
     * a thread it has just woken, and under bulk load the running threads are the bulk loops. So a
     * bulk loop yields the CPU after every {@value #CROWDED_TURN_BYTES} bytes it moves, and while
     * its control loop is busy it moves no more than that per turn: a woken control loop waits for
     * one short turn, not a slice. On 2 cores, the control p99 under saturating bulk READs was at
     * most 0.46 ms in 9 of 17 runs of the Load shape and Policy benchmarks, against 2 of 22 runs
     * under 1 ms before. The yields cost no bulk throughput there; the short turns do, and only
     * while control messages flow (control at full rate left bulk a quarter to half of its rate).
     */
    private void giveWay() {
        if (movedSinceYield >= CROWDED_TURN_BYTES) { // only a bulk loop counts (moved)
            movedSinceYield = 0;
            Thread.yield();
        }
    }

    private void handle(SelectionKey key) {
        if (!key.isValid()) {
            return;
        }
        if (key.attachment() == null) {
            if (key.isAcceptable()) {
                node.acceptAll(this);
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
     * Runs channel work on the loop thread: a failure costs that channel, never the node. An Error
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

    /** Stops the loop: its channels end FLUSHED; waits for the thread unless called on it. */
    void stop() {
        stopped = true;
        selector.wakeup();
        if (!inLoop()) {
            try {
                thread.join(TimeUnit.SECONDS.toMillis(10));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            runTasks();
        }
    }

    @Override
    public String toString() {
        return name;
    }
}

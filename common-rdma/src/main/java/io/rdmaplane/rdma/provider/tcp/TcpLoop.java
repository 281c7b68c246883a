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
 * messages are read and answered on a thread that never copies bulk data.
 */
final class TcpLoop {
    private static final Logger LOG = LoggerFactory.getLogger(TcpLoop.class);
    private static final int CROWDED_TURN_BYTES = 256 << 10;
    private static final int ALONE_TURN_BYTES = 8 << 20;

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
    private volatile boolean stopped;

    TcpLoop(TcpNode node, Lane lane, long tickMillis) throws TransportException {
        this.node = node;
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
        return crowded ? CROWDED_TURN_BYTES : ALONE_TURN_BYTES;
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

package io.rdmaplane.rdma.provider.verbs.impl;

import java.io.IOException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * Who polls one completion queue, for {@code verbs.completion=hybrid}: the lane's completion thread
 * or a thread waiting for one of its READs, exactly one at a time. Every poll and every arm of the
 * completion channel happens under one lock (the token), so a completion is taken and delivered once,
 * by one thread, in CQ order.
 *
 * <p><b>Hand-over.</b> A waiter ({@link #await}) takes the token when it is free, drains the CQ,
 * and repeats until its future is done or {@code spin} has passed. Its polls keep the CQ <i>hot</i>:
 * polled, not armed, so a READ posted right after the last one completes without a completion event
 * and without waking the completion thread. The completion thread sleeps on the completion channel
 * and, at each event or at most {@link #HOT_WAKE_MS} later while hot, takes the token, drains, and
 * arms the channel (then drains once more, for a completion that came before the arm) once no
 * waiter is left and none polled for {@code spin}. A waiter whose spin ran out before its
 * completion came arms the CQ itself if it was the last one, so that completion wakes the
 * completion thread at once. A delivery that waits on this CQ from inside a delivery does not poll
 * (the lock's holder is busy delivering): it only blocks, as a callback on the completion thread would.
 */
final class CqPolling {
    /** Longest sleep of the completion thread while the CQ is hot (not armed): the latest a completion nobody waits for is delivered then. */
    static final int HOT_WAKE_MS = 1;
    /** Longest sleep of the completion thread while the CQ is armed, before it looks at the closed flag again. */
    static final int ARMED_WAKE_MS = 100;

    /** What the holder of the token does with the CQ. */
    interface Cq {
        /** Polls until the CQ is empty, in batches, delivering every completion; returns how many. */
        int drain() throws IOException;

        /** Asks for a completion event on the next completion (ibv_req_notify_cq). */
        void arm() throws IOException;
    }

    private final Cq cq;
    private final long spinNanos;
    private final LongSupplier clock;
    private final ReentrantLock token = new ReentrantLock();
    private final AtomicInteger waiters = new AtomicInteger();
    // ---- guarded by token
    /** An arm whose event the completion thread has not taken yet (the CQ may already have fired it). */
    private boolean armed;
    private boolean closed;
    /** When a waiter last polled; the CQ stays hot for spin after it. */
    private volatile long lastWaiterPoll;

    CqPolling(Cq cq, long spinNanos, LongSupplier clock) {
        this.cq = cq;
        this.spinNanos = spinNanos;
        this.clock = clock;
        this.lastWaiterPoll = clock.getAsLong() - spinNanos;
    }

    /**
     * Polls for {@code done} for up to the spin, as long as the token is free when asked for; returns
     * whether it is done. False at once on the thread that holds the token (a delivery waiting).
     * Throws what a poll or an arm threw: the CQ is broken then.
     */
    boolean await(Future<?> done) throws IOException {
        if (done.isDone()) {
            return true;
        }
        if (token.isHeldByCurrentThread()) {
            return false;
        }
        waiters.incrementAndGet();
        boolean counted = true;
        try {
            long start = clock.getAsLong();
            while (true) {
                if (token.tryLock()) {
                    try {
                        if (closed) {
                            return done.isDone();
                        }
                        lastWaiterPoll = clock.getAsLong();
                        cq.drain();
                    } finally {
                        token.unlock();
                    }
                }
                if (done.isDone()) {
                    return true;
                }
                if (clock.getAsLong() - start >= spinNanos) {
                    counted = false;
                    giveUp();
                    return done.isDone();
                }
                Thread.onSpinWait();
            }
        } finally {
            if (counted) {
                waiters.decrementAndGet();
            }
        }
    }

    /** The spin ran out: the CQ cools down, and the last waiter to leave arms it so the completion thread hears the rest. */
    private void giveUp() throws IOException {
        token.lock();
        try {
            lastWaiterPoll = clock.getAsLong() - spinNanos;
            if (waiters.decrementAndGet() == 0 && !armed && !closed) {
                armAndDrain();
            }
        } finally {
            token.unlock();
        }
    }

    /**
     * One turn of the completion thread after its sleep on the completion channel ({@code event}: it
     * took an event, so the CQ is no longer armed). Drains the CQ (unless a waiter holds the token
     * and the wake was no event: that waiter is polling) and arms it once it cooled down. Returns how
     * long the completion thread may sleep next, in milliseconds.
     */
    int completionTurn(boolean event) throws IOException {
        if (event) {
            token.lock();
        } else if (!token.tryLock()) {
            return HOT_WAKE_MS;
        }
        try {
            if (closed) {
                return ARMED_WAKE_MS;
            }
            if (event) {
                armed = false;
            }
            if (!armed) {
                cq.drain();
                if (waiters.get() == 0 && clock.getAsLong() - lastWaiterPoll >= spinNanos) {
                    armAndDrain();
                }
            }
            return armed ? ARMED_WAKE_MS : HOT_WAKE_MS;
        } finally {
            token.unlock();
        }
    }

    /** Arms the CQ, then drains what came before the arm (it fires no event). Holds the token. */
    private void armAndDrain() throws IOException {
        cq.arm();
        armed = true;
        cq.drain();
    }

    /** No poll after this returns (the CQ is about to be destroyed); waits for the holder to finish its delivery. */
    void shutdown() {
        token.lock();
        try {
            closed = true;
        } finally {
            token.unlock();
        }
    }

    /** Whether the calling thread holds the token: it is delivering completions of this CQ. */
    boolean heldByCurrentThread() {
        return token.isHeldByCurrentThread();
    }

    /** The CQ is armed (its next completion fires an event), for tests. */
    boolean armed() {
        token.lock();
        try {
            return armed;
        } finally {
            token.unlock();
        }
    }

    long spinNanos() {
        return spinNanos;
    }

    static long micros(int micros) {
        return TimeUnit.MICROSECONDS.toNanos(micros);
    }
}

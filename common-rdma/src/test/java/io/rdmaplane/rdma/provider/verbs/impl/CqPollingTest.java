package io.rdmaplane.rdma.provider.verbs.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.Polling;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntConsumer;
import org.junit.jupiter.api.Test;

/**
 * The hand-over of a completion queue between its completion thread and the threads waiting for
 * READs (hybrid completion), over a simulated CQ that fires an event, as a device does, for the
 * first completion after an arm. No RDMA device needed.
 */
class CqPollingTest {
    /** A CQ: completions (ids) queued by a "device", an arm that one completion turns into an event. */
    static final class FakeCq implements CqPolling.Cq {
        final ConcurrentLinkedQueue<Integer> entries = new ConcurrentLinkedQueue<>();
        final java.util.concurrent.Semaphore events = new java.util.concurrent.Semaphore(0);
        final AtomicInteger inside = new AtomicInteger();
        final AtomicInteger mostInside = new AtomicInteger();
        final AtomicInteger drains = new AtomicInteger();
        private boolean armedOnDevice;
        volatile IntConsumer deliver = id -> { };

        /** The device completes a work request: the entry is visible to polls, then an armed CQ fires its event. */
        void complete(int id) {
            entries.add(id);
            synchronized (this) {
                if (armedOnDevice) {
                    armedOnDevice = false;
                    events.release();
                }
            }
        }

        synchronized boolean armedOnDevice() {
            return armedOnDevice;
        }

        private void enter() {
            int n = inside.incrementAndGet();
            mostInside.accumulateAndGet(n, Math::max);
        }

        @Override
        public int drain() {
            enter();
            try {
                drains.incrementAndGet();
                int n = 0;
                for (Integer id; (id = entries.poll()) != null; n++) {
                    deliver.accept(id);
                }
                return n;
            } finally {
                inside.decrementAndGet();
            }
        }

        @Override
        public void arm() {
            enter();
            try {
                synchronized (this) {
                    armedOnDevice = true;
                }
            } finally {
                inside.decrementAndGet();
            }
        }
    }

    /** A clock that moves 1 µs each time it is read: a spin ends after a bounded number of polls, whatever the host's load. */
    private static final class SteppingClock {
        final AtomicLong now = new AtomicLong(1_000_000_000L);

        long read() {
            return now.addAndGet(1_000);
        }
    }

    private static final long SPIN = TimeUnit.MICROSECONDS.toNanos(50);

    @Test
    void everyCompletionIsDeliveredOnceByOneThreadAtATime() throws Exception {
        FakeCq cq = new FakeCq();
        int waiters = 4;
        int perWaiter = 400;
        int async = 400;
        int total = waiters * perWaiter + async;
        AtomicInteger[] delivered = new AtomicInteger[total];
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        for (int i = 0; i < total; i++) {
            delivered[i] = new AtomicInteger();
            futures.add(new CompletableFuture<>());
        }
        cq.deliver = id -> {
            delivered[id].incrementAndGet();
            futures.get(id).complete(null);
        };
        CqPolling polling = new CqPolling(cq, SPIN, System::nanoTime);
        ConcurrentLinkedQueue<Integer> posted = new ConcurrentLinkedQueue<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicInteger stop = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        // The completion thread: sleeps on events, as CompletionPoller does in hybrid mode.
        threads.add(new Thread(() -> run(failure, () -> {
            int wait = polling.completionTurn(false);
            while (stop.get() == 0) {
                boolean event = cq.events.tryAcquire(wait, TimeUnit.MILLISECONDS);
                wait = polling.completionTurn(event);
            }
        }), "cq-thread"));
        // The device: completes what was posted, now at once, now after a pause longer than the spin.
        threads.add(new Thread(() -> run(failure, () -> {
            while (stop.get() == 0) {
                Integer id = posted.poll();
                if (id == null) {
                    Thread.onSpinWait();
                    continue;
                }
                int shape = ThreadLocalRandom.current().nextInt(8);
                if (shape == 0) {
                    LockSupport.parkNanos(SPIN * 3);
                } else if (shape == 1) {
                    Thread.yield();
                }
                cq.complete(id);
            }
        }), "device"));
        List<Thread> waiting = new ArrayList<>();
        for (int w = 0; w < waiters; w++) {
            int first = w * perWaiter;
            waiting.add(new Thread(() -> run(failure, () -> {
                for (int id = first; id < first + perWaiter; id++) {
                    posted.add(id);
                    if (!polling.await(futures.get(id))) {
                        futures.get(id).get(30, TimeUnit.SECONDS); // the completion thread delivers it
                    }
                }
            }), "waiter-" + w));
        }
        threads.addAll(waiting);
        threads.forEach(Thread::start);
        // Completions nobody waits for (callbacks), in between.
        for (int id = waiters * perWaiter; id < total; id++) {
            posted.add(id);
            if (id % 50 == 0) {
                Thread.yield();
            }
        }
        for (Thread t : waiting) {
            t.join(TimeUnit.SECONDS.toMillis(60));
            assertFalse(t.isAlive(), t.getName() + " still waiting");
        }
        Polling.waitUntil(() -> futures.stream().allMatch(CompletableFuture::isDone), Duration.ofSeconds(30),
                () -> "undelivered: " + futures.stream().filter(f -> !f.isDone()).count());
        stop.set(1);
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(10));
        }
        if (failure.get() != null) {
            throw new AssertionError("a thread failed", failure.get());
        }
        for (int id = 0; id < total; id++) {
            assertEquals(1, delivered[id].get(), "deliveries of completion " + id);
        }
        assertEquals(1, cq.mostInside.get(), "threads polling or arming the CQ at once");
    }

    @Test
    void aWaiterPollsTheCompletionWithoutAnEventAndTheQueueStaysHotUntilTheSpinHasPassed() throws Exception {
        FakeCq cq = new FakeCq();
        SteppingClock clock = new SteppingClock();
        CompletableFuture<Void> read = new CompletableFuture<>();
        cq.deliver = id -> read.complete(null);
        CqPolling polling = new CqPolling(cq, SPIN, clock::read);
        assertEquals(CqPolling.ARMED_WAKE_MS, polling.completionTurn(false), "idle: the completion thread arms and sleeps");
        assertTrue(cq.armedOnDevice());
        cq.complete(1); // the READ's completion: the armed CQ fires its event
        assertTrue(polling.await(read), "the waiter polled its own completion");
        assertTrue(cq.events.tryAcquire());
        // the completion thread takes that event: a waiter polled just now, so the CQ stays polled, not armed
        assertEquals(CqPolling.HOT_WAKE_MS, polling.completionTurn(true));
        assertFalse(cq.armedOnDevice(), "hot: the next READ completes without an event");
        clock.now.addAndGet(SPIN);
        assertEquals(CqPolling.ARMED_WAKE_MS, polling.completionTurn(false), "cooled down: armed again");
        assertTrue(cq.armedOnDevice());
    }

    @Test
    void aWaiterWhoseSpinRunsOutArmsTheQueueSoItsCompletionWakesTheCompletionThread() throws Exception {
        FakeCq cq = new FakeCq();
        SteppingClock clock = new SteppingClock();
        CompletableFuture<Void> first = new CompletableFuture<>();
        CompletableFuture<Void> slow = new CompletableFuture<>();
        cq.deliver = id -> (id == 1 ? first : slow).complete(null);
        CqPolling polling = new CqPolling(cq, SPIN, clock::read);
        polling.completionTurn(false);
        cq.complete(1);
        assertTrue(polling.await(first));
        assertTrue(cq.events.tryAcquire());
        polling.completionTurn(true); // hot: not armed
        assertFalse(cq.armedOnDevice());
        assertFalse(polling.await(slow), "nothing came within the spin");
        assertTrue(cq.armedOnDevice(), "the last waiter to give up armed the CQ");
        cq.complete(2);
        assertTrue(cq.events.tryAcquire(), "so the slow READ's completion fired an event");
        polling.completionTurn(true);
        assertTrue(slow.isDone(), "which the completion thread drained");
        assertTrue(cq.armedOnDevice(), "and, nobody polling, armed again");
    }

    @Test
    void aDeliveryThatWaitsDoesNotPollFromInsideThePoll() throws Exception {
        FakeCq cq = new FakeCq();
        CompletableFuture<Void> outer = new CompletableFuture<>();
        CompletableFuture<Void> inner = new CompletableFuture<>();
        CqPolling polling = new CqPolling(cq, SPIN, new SteppingClock()::read);
        AtomicReference<Boolean> nested = new AtomicReference<>();
        cq.deliver = id -> {
            try {
                nested.set(polling.await(inner)); // a callback waiting for another READ
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
            outer.complete(null);
        };
        cq.complete(1);
        cq.complete(2);
        assertTrue(polling.await(outer));
        assertEquals(Boolean.FALSE, nested.get(), "the nested wait returned at once");
        assertEquals(1, cq.mostInside.get(), "no poll inside a poll");
    }

    @Test
    void afterShutdownNoWaiterPolls() throws Exception {
        FakeCq cq = new FakeCq();
        CompletableFuture<Void> read = new CompletableFuture<>();
        cq.deliver = id -> read.complete(null);
        CqPolling polling = new CqPolling(cq, SPIN, new SteppingClock()::read);
        polling.shutdown();
        cq.complete(1);
        assertFalse(polling.await(read));
        assertEquals(0, cq.drains.get(), "polls of a CQ about to be destroyed");
        assertEquals(CqPolling.ARMED_WAKE_MS, polling.completionTurn(true));
        assertEquals(0, cq.drains.get());
    }

    private interface Body {
        void run() throws Exception;
    }

    private static void run(AtomicReference<Throwable> failure, Body body) {
        try {
            body.run();
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
        }
    }
}

package io.rdmaplane.rdma.provider.verbs.impl;

import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A READ's future in hybrid mode: a thread that waits for it ({@link #get()}, {@link #join()})
 * first polls the READ's completion queue itself, for up to the spin ({@link CqPolling#await}), then
 * blocks as any future's waiter does. Callbacks and dependent futures behave as on any
 * CompletableFuture.
 */
final class PolledFuture extends CompletableFuture<Void> {
    private final CompletionPoller poller;

    PolledFuture(CompletionPoller poller) {
        this.poller = poller;
    }

    private void poll() {
        try {
            poller.polling.await(this);
        } catch (IOException | RuntimeException e) {
            poller.failed(e); // the node closes, and this READ fails FLUSHED with it
        }
    }

    @Override
    public Void get() throws InterruptedException, ExecutionException {
        poll();
        return super.get();
    }

    @Override
    public Void get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        poll(); // the spin is far below any sane timeout
        return super.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    }

    @Override
    public Void join() {
        poll();
        return super.join();
    }
}

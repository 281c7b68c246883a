package io.rdmaplane.rdma.testing;

import java.time.Duration;
import java.util.function.Supplier;

/**
 * Waiting in tests for something that happens on another thread: poll a real condition until a
 * deadline, never sleep a fixed time and hope. A condition not met by the deadline fails the test
 * with what was awaited. Polls at once, then spins briefly (conditions that settle within
 * microseconds, such as a send queue with room again), then sleeps with pauses growing to
 * {@value #MAX_PAUSE_MILLIS} ms. A condition may throw: a checked exception fails the wait at
 * once as an {@link AssertionError} with it as the cause, unchecked ones pass through as they are,
 * so callers declare nothing.
 */
public final class Polling {
    private static final int SPINS = 200;
    private static final long MAX_PAUSE_MILLIS = 20;

    /** A condition that may throw; an exception ends the wait at once. */
    @FunctionalInterface
    public interface Condition {
        boolean met() throws Exception;
    }

    /** A probe that answers null until what it looks for is there. */
    @FunctionalInterface
    public interface Probe<T> {
        T find() throws Exception;
    }

    private Polling() {
    }

    /** Waits until {@code condition} holds; fails with {@code description} if it does not within {@code deadline}. */
    public static void waitUntil(Condition condition, Duration deadline, String description) {
        waitUntil(condition, deadline, () -> description);
    }

    /** As {@link #waitUntil(Condition, Duration, String)}, with a description made when the wait fails (the state then). */
    public static void waitUntil(Condition condition, Duration deadline, Supplier<String> description) {
        waitFor(() -> condition.met() ? Boolean.TRUE : null, deadline, description);
    }

    /** Polls {@code probe} until it answers non-null and returns that; fails as {@link #waitUntil} does. */
    public static <T> T waitFor(Probe<T> probe, Duration deadline, String description) {
        return waitFor(probe, deadline, () -> description);
    }

    /** As {@link #waitFor(Probe, Duration, String)}, with a description made when the wait fails. */
    public static <T> T waitFor(Probe<T> probe, Duration deadline, Supplier<String> description) {
        long end = System.nanoTime() + deadline.toNanos();
        long pauseMillis = 1;
        for (int polls = 0; ; polls++) {
            T found;
            try {
                found = probe.find();
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new AssertionError("checking for " + description.get() + " failed: " + e, e);
            }
            if (found != null) {
                return found;
            }
            if (System.nanoTime() - end > 0) {
                throw new AssertionError("waited " + deadline.toMillis() + " ms, in vain, for: " + description.get());
            }
            if (polls < SPINS) {
                Thread.onSpinWait();
            } else {
                try {
                    Thread.sleep(pauseMillis); // a pause between polls of the condition, not a wait for it
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError("interrupted while waiting for: " + description.get(), e);
                }
                pauseMillis = Math.min(MAX_PAUSE_MILLIS, pauseMillis * 2);
            }
        }
    }
}

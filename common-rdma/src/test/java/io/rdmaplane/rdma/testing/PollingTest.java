package io.rdmaplane.rdma.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class PollingTest {

    @Test
    void waitUntilReturnsOnceAnotherThreadMakesTheConditionTrue() throws Exception {
        AtomicInteger value = new AtomicInteger();
        CountDownLatch polled = new CountDownLatch(3);
        Thread setter = new Thread(() -> {
            try {
                polled.await();
            } catch (InterruptedException e) {
                return;
            }
            value.set(42);
        });
        setter.start();
        Polling.waitUntil(() -> {
            polled.countDown();
            return value.get() == 42;
        }, Duration.ofSeconds(30), "the value set");
        assertEquals(42, value.get());
        setter.join();
    }

    @Test
    void aConditionNeverMetFailsWithWhatWasAwaited() {
        AtomicInteger polls = new AtomicInteger();
        AssertionError e = assertThrows(AssertionError.class,
                () -> Polling.waitUntil(() -> polls.incrementAndGet() < 0, Duration.ofMillis(50), () -> "polls above zero, " + polls));
        assertTrue(e.getMessage().startsWith("waited 50 ms, in vain, for: polls above zero, "), e.getMessage());
        assertTrue(polls.get() > 1, "polled more than once");
    }

    @Test
    void waitForReturnsTheFirstNonNullAnswer() throws Exception {
        AtomicInteger polls = new AtomicInteger();
        Object found = new Object();
        assertSame(found, Polling.waitFor(() -> polls.incrementAndGet() < 5 ? null : found, Duration.ofSeconds(30), "found"));
        assertEquals(5, polls.get(), "no poll after the answer");
    }

    @Test
    void anExceptionInTheConditionEndsTheWaitAtOnce() {
        IOException checked = new IOException("broken probe");
        AssertionError e = assertThrows(AssertionError.class, () -> Polling.waitUntil(() -> {
            throw checked;
        }, Duration.ofSeconds(30), "the probe"));
        assertSame(checked, e.getCause());
        assertEquals("checking for the probe failed: java.io.IOException: broken probe", e.getMessage());
        IllegalStateException unchecked = new IllegalStateException("bug");
        assertSame(unchecked, assertThrows(IllegalStateException.class, () -> Polling.waitFor(() -> {
            throw unchecked;
        }, Duration.ofSeconds(30), "never")));
    }
}

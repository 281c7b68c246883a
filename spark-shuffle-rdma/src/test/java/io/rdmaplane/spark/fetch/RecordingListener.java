package io.rdmaplane.spark.fetch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.rdmaplane.rdma.testing.Polling;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.BlockFetchingListener;

/** Behaves like Spark's fetcher listener: retains a delivered buffer, reads it, and releases it (now, or when told). */
final class RecordingListener implements BlockFetchingListener {
    final Map<String, byte[]> received = new ConcurrentHashMap<>();
    final Map<String, Throwable> failed = new ConcurrentHashMap<>();
    final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
    private final boolean hold;
    private final List<ManagedBuffer> held = new ArrayList<>();

    RecordingListener(boolean hold) {
        this.hold = hold;
    }

    @Override
    public void onBlockFetchSuccess(String blockId, ManagedBuffer buffer) {
        calls.computeIfAbsent(blockId, b -> new AtomicInteger()).incrementAndGet();
        buffer.retain();
        try (InputStream in = buffer.createInputStream()) {
            byte[] bytes = in.readAllBytes();
            assertEquals(buffer.size(), bytes.length, "size() is the payload's length");
            received.put(blockId, bytes);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (hold) {
            synchronized (held) {
                held.add(buffer);
            }
        } else {
            buffer.release();
        }
    }

    @Override
    public void onBlockFetchFailure(String blockId, Throwable e) {
        calls.computeIfAbsent(blockId, b -> new AtomicInteger()).incrementAndGet();
        failed.put(blockId, e);
    }

    void releaseHeld() {
        synchronized (held) {
            held.forEach(ManagedBuffer::release);
            held.clear();
        }
    }

    /** Waits until {@code n} blocks were settled (each exactly once so far). */
    void awaitSettled(int n) {
        Polling.waitUntil(() -> received.size() + failed.size() >= n, Duration.ofSeconds(30), () -> n + " blocks settled; "
                + (received.size() + failed.size()) + " are: " + received.keySet() + " failed " + failed);
        calls.forEach((id, count) -> assertEquals(1, count.get(), "the listener heard of " + id + " exactly once"));
    }
}

package io.rdmaplane.rdma.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.testing.Polling;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import org.apache.arrow.memory.util.MemoryUtil;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class RegisteredMemoryPoolTest {
    private static final int KiB = 1 << 10;
    private static final int MiB = 1 << 20;

    private final RegistrationOnlyNode node = new RegistrationOnlyNode();
    private final List<ExecutorService> executors = new ArrayList<>();

    @AfterEach
    void stopThreads() {
        executors.forEach(ExecutorService::shutdownNow);
    }

    private RegisteredMemoryPool pool(long capacityBytes, Duration acquireTimeout) {
        return new RegisteredMemoryPool(node, new PoolOptions(capacityBytes, acquireTimeout));
    }

    private ExecutorService threads(int count) {
        ExecutorService executor = Executors.newFixedThreadPool(count);
        executors.add(executor);
        return executor;
    }

    /** Starts {@code pool.acquire(bytes)} on another thread; returns once it waits in there for a release (or ended). */
    private Future<RegisteredBuffer> acquireThatWaits(RegisteredMemoryPool pool, int bytes) {
        AtomicReference<Thread> thread = new AtomicReference<>();
        Future<RegisteredBuffer> acquire = threads(1).submit(() -> {
            thread.set(Thread.currentThread());
            return pool.acquire(bytes);
        });
        Polling.waitUntil(() -> acquire.isDone() || (thread.get() != null && thread.get().getState() == Thread.State.TIMED_WAITING),
                Duration.ofSeconds(10), "the acquire waiting for a slice to be released");
        return acquire;
    }

    @Test
    void optionsRejectACapBelowOneChunkAndANegativeTimeout() {
        IllegalArgumentException small = assertThrows(IllegalArgumentException.class,
                () -> new PoolOptions(8 * MiB - 1, Duration.ZERO));
        assertTrue(small.getMessage().contains("pool.capacity"), small.getMessage());
        assertTrue(small.getMessage().contains("8388607"), small.getMessage());
        IllegalArgumentException negative = assertThrows(IllegalArgumentException.class,
                () -> new PoolOptions(8 * MiB, Duration.ofMillis(-1)));
        assertTrue(negative.getMessage().contains("pool.acquireTimeout"), negative.getMessage());
        assertEquals(8 * MiB, new PoolOptions(8 * MiB, Duration.ZERO).capacityBytes());
    }

    @Test
    void requestsRoundUpToPowerOfTwoClassesFrom4KiBTo8MiB() throws TransportException {
        assertEquals(4 * KiB, RegisteredMemoryPool.sliceSizeFor(1));
        assertEquals(4 * KiB, RegisteredMemoryPool.sliceSizeFor(4 * KiB));
        assertEquals(8 * KiB, RegisteredMemoryPool.sliceSizeFor(4 * KiB + 1));
        assertEquals(64 * KiB, RegisteredMemoryPool.sliceSizeFor(40_000));
        assertEquals(8 * MiB, RegisteredMemoryPool.sliceSizeFor(4 * MiB + 1));
        assertEquals(8 * MiB, RegisteredMemoryPool.sliceSizeFor(8 * MiB));
        try (RegisteredMemoryPool pool = pool(16 * MiB, Duration.ZERO);
             RegisteredBuffer buffer = pool.acquire(5000)) {
            assertEquals(8 * KiB, buffer.capacity());
            assertEquals(8 * KiB, buffer.buffer().capacity());
            assertEquals(8 * KiB, buffer.buffer().remaining());
        }
    }

    @Test
    void requestsOutsideOneByteTo8MiBAreRejectedWithTheReason() {
        try (RegisteredMemoryPool pool = pool(16 * MiB, Duration.ZERO)) {
            for (int size : new int[] {0, -1, 8 * MiB + 1, Integer.MAX_VALUE}) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> pool.acquire(size));
                assertTrue(e.getMessage().contains(Integer.toString(size)), e.getMessage());
                assertTrue(e.getMessage().contains("8388608") && e.getMessage().contains("split"), e.getMessage());
            }
            assertEquals(0, pool.registrations());
        }
    }

    @Test
    void sliceKnowsItsRegionOffsetAndAddresses() throws TransportException {
        try (RegisteredMemoryPool pool = pool(16 * MiB, Duration.ZERO);
             RegisteredBuffer first = pool.acquire(100);
             RegisteredBuffer second = pool.acquire(100)) {
            assertSame(first.region(), second.region());
            assertNotEquals(first.offset(), second.offset());
            for (RegisteredBuffer b : List.of(first, second)) {
                assertEquals(Set.of(Access.LOCAL_WRITE, Access.REMOTE_READ), b.region().access());
                assertEquals(0, b.offset() % b.capacity());
                assertTrue(b.offset() + b.capacity() <= b.region().length());
                assertEquals(b.region().address() + b.offset(), b.remoteAddress());
                assertEquals(MemoryUtil.getByteBufferAddress(b.buffer()), b.memoryAddress());
                assertEquals(0, b.memoryAddress() % 4096, "slices are page-aligned");
                assertNotEquals(b.region().address() + b.offset(), b.memoryAddress(), "remote address is opaque, not native");
            }
            first.buffer().putLong(8, 0x1122334455667788L);
            assertEquals(0x1122334455667788L, first.region().buffer().getLong(first.offset() + 8));
            assertEquals(0, second.region().buffer().getLong(second.offset() + 8));
        }
    }

    @Test
    void afterWarmUpAcquireAndReleaseRegisterNothing() throws TransportException {
        int[] sizes = {1, 5000, 10_000, 20 * KiB, 64 * KiB, 100 * KiB, 256 * KiB, 300 * KiB, MiB, 2 * MiB, 3 * MiB, 8 * MiB};
        // Twelve classes, twelve 8 MiB chunks: each class keeps its own chunk.
        try (RegisteredMemoryPool pool = pool(12L * 8 * MiB, Duration.ZERO)) {
            for (int size : sizes) {
                pool.acquire(size).close();
            }
            long warm = pool.registrations();
            assertEquals(12, warm);
            assertEquals(warm, node.registrationCount());
            for (int i = 0; i < 20_000; i++) {
                try (RegisteredBuffer a = pool.acquire(sizes[i % sizes.length]);
                     RegisteredBuffer b = pool.acquire(sizes[(i * 7) % sizes.length])) {
                    a.buffer().put(0, (byte) i);
                    b.buffer().put(0, (byte) i);
                }
            }
            assertEquals(warm, pool.registrations());
            assertEquals(warm, node.registrationCount());
            assertEquals(12L * 8 * MiB, pool.registeredBytes());
        }
    }

    @Test
    void atTheCapAZeroTimeoutFailsAtOnceNamingTheCap() throws TransportException {
        long cap = 16 * MiB + 4 * KiB; // the remainder below a chunk stays unused
        try (RegisteredMemoryPool pool = pool(cap, Duration.ZERO);
             RegisteredBuffer a = pool.acquire(8 * MiB);
             RegisteredBuffer b = pool.acquire(8 * MiB)) {
            PoolExhaustedException e = assertTimeoutPreemptively(Duration.ofSeconds(5),
                    () -> assertThrows(PoolExhaustedException.class, () -> pool.acquire(1)));
            assertTrue(e.getMessage().contains("pool.capacity = " + cap + " bytes"), e.getMessage());
            assertTrue(e.getMessage().contains("4096-byte slice for 1 bytes"), e.getMessage());
            assertEquals(16 * MiB, pool.registeredBytes());
            assertEquals(2, pool.registrations());
            assertEquals(2, node.registrationCount());
        }
    }

    @Test
    void atTheCapAWaiterGetsTheSliceAnotherThreadReleases() throws Exception {
        try (RegisteredMemoryPool pool = pool(8 * MiB, Duration.ofSeconds(30))) {
            RegisteredBuffer held = pool.acquire(8 * MiB);
            Future<RegisteredBuffer> waiter = acquireThatWaits(pool, 6 * MiB);
            assertFalse(waiter.isDone(), "the waiter must wait while the only slice is out");
            long address = held.memoryAddress();
            held.close();
            try (RegisteredBuffer got = waiter.get(10, TimeUnit.SECONDS)) {
                assertEquals(address, got.memoryAddress());
            }
            assertEquals(1, pool.registrations());
        }
    }

    @Test
    void atTheCapTheWaitEndsAfterTheTimeoutWithPoolExhausted() throws TransportException {
        try (RegisteredMemoryPool pool = pool(8 * MiB, Duration.ofMillis(300));
             RegisteredBuffer small = pool.acquire(4 * KiB)) {
            long start = System.nanoTime();
            // The only chunk holds 4 KiB slices and one is out: it cannot be re-registered for 8 MiB.
            PoolExhaustedException e = assertThrows(PoolExhaustedException.class, () -> pool.acquire(8 * MiB));
            long waitedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(waitedMillis >= 300, "waited only " + waitedMillis + " ms");
            assertTrue(e.getMessage().contains("within 300 ms"), e.getMessage());
            assertTrue(e.getMessage().contains("pool.capacity = 8388608 bytes"), e.getMessage());
            assertEquals(1, pool.registrations());
        }
    }

    @Test
    void atTheCapAnIdleChunkIsCarvedForAnotherSizeWithoutRegistering() throws TransportException {
        try (RegisteredMemoryPool pool = pool(8 * MiB, Duration.ZERO)) {
            pool.acquire(4 * KiB).close();
            try (RegisteredBuffer big = pool.acquire(MiB)) {
                assertEquals(MiB, big.capacity());
                assertEquals(1, pool.registrations());
                assertEquals(1, node.registrationCount());
                assertTrue(big.region().isValid());
                // The 4 KiB slices are gone with the old carving: a 4 KiB request now needs the busy chunk.
                assertThrows(PoolExhaustedException.class, () -> pool.acquire(4 * KiB));
            }
        }
    }

    @Test
    void aShiftingMixOfSizesBelowOneChunkPerClassRegistersNothingAfterWarmUp() throws TransportException {
        // Two chunks for twelve classes: chunks are carved again and again, never registered again.
        try (RegisteredMemoryPool pool = pool(16 * MiB, Duration.ZERO)) {
            for (int round = 0; round < 200; round++) {
                for (int shift = 12; shift <= 23; shift++) {
                    try (RegisteredBuffer a = pool.acquire(1 << shift); RegisteredBuffer b = pool.acquire(1 << (35 - shift))) {
                        assertEquals(1 << shift, a.capacity());
                        assertEquals(1 << (35 - shift), b.capacity());
                    }
                }
            }
            assertEquals(2, pool.registrations());
            assertEquals(2, node.registrationCount());
        }
    }

    @Test
    void releasingTwiceFailsAndNeverFreesTheSliceTwice() throws TransportException {
        try (RegisteredMemoryPool pool = pool(8 * MiB, Duration.ZERO)) {
            RegisteredBuffer buffer = pool.acquire(4 * KiB);
            buffer.close();
            IllegalStateException twice = assertThrows(IllegalStateException.class, buffer::close);
            assertTrue(twice.getMessage().contains("released twice"), twice.getMessage());
            assertThrows(IllegalStateException.class, buffer::buffer);
            try (RegisteredBuffer a = pool.acquire(4 * KiB); RegisteredBuffer b = pool.acquire(4 * KiB)) {
                assertNotEquals(a.memoryAddress(), b.memoryAddress());
            }
        }
    }

    @Test
    void closeReportsLeakedSlicesAndDeregistersEveryChunk() throws Exception {
        RegisteredMemoryPool pool = pool(32 * MiB, Duration.ZERO);
        RegisteredBuffer leakedHere = pool.acquire(4 * KiB);
        Thread worker = new Thread(() -> {
            try {
                pool.acquire(MiB);
            } catch (TransportException e) {
                throw new AssertionError(e);
            }
        }, "leaky-worker");
        worker.start();
        worker.join();
        pool.acquire(64 * KiB).close();

        pool.close();

        Map<Integer, String> leaks = pool.leakedOnClose().stream()
                .collect(Collectors.toMap(RegisteredBuffer::capacity, RegisteredBuffer::acquiredBy));
        assertEquals(Map.of(4 * KiB, Thread.currentThread().getName(), MiB, "leaky-worker"), leaks);
        assertEquals(3, node.registrationCount());
        assertEquals(0, node.validRegions());
        assertEquals(0, pool.registeredBytes());
        IllegalStateException closed = assertThrows(IllegalStateException.class, () -> pool.acquire(1));
        assertTrue(closed.getMessage().contains("closed"), closed.getMessage());
        leakedHere.close(); // a late release is harmless
        pool.close();
        assertEquals(2, pool.leakedOnClose().size());
    }

    @Test
    void closeWakesWaitersWhoThenFail() throws Exception {
        RegisteredMemoryPool pool = pool(8 * MiB, Duration.ofSeconds(30));
        pool.acquire(8 * MiB);
        Future<RegisteredBuffer> waiter = acquireThatWaits(pool, 8 * MiB);
        pool.close();
        Exception e = assertThrows(Exception.class, () -> waiter.get(10, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof IllegalStateException, String.valueOf(e.getCause()));
    }

    @Test
    void locateMapsANativeAddressBackToTheSliceHoldingIt() throws TransportException {
        try (RegisteredMemoryPool pool = pool(8 * MiB, Duration.ZERO)) {
            RegisteredBuffer buffer = pool.acquire(10_000);
            long start = buffer.memoryAddress();
            assertSame(buffer, pool.locate(start).orElseThrow());
            assertSame(buffer, pool.locate(start + buffer.capacity() - 1).orElseThrow());
            assertTrue(pool.locate(start + buffer.capacity()).isEmpty(), "the next slice is free");
            assertTrue(pool.locate(0).isEmpty());
            assertEquals(buffer.remoteAddress() + 10, buffer.remoteAddressOf(start + 10));
            assertThrows(IllegalArgumentException.class, () -> buffer.remoteAddressOf(start + buffer.capacity()));
            buffer.close();
            assertTrue(pool.locate(start).isEmpty());
        }
    }

    @Test
    void concurrentAcquireAndReleaseNeverShareASlice() throws Exception {
        int[] sizes = {1, 4 * KiB, 5000, 64 * KiB, MiB, 3 * MiB};
        Set<Long> out = ConcurrentHashMap.newKeySet();
        // Four chunks for six classes: threads also wait for and re-register idle chunks.
        try (RegisteredMemoryPool pool = pool(32 * MiB, Duration.ofSeconds(30))) {
            ExecutorService executor = threads(4);
            List<Future<?>> workers = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int thread = t;
                workers.add(executor.submit(() -> {
                    for (int i = 0; i < 1500; i++) {
                        int stamp = thread << 24 | i;
                        try (RegisteredBuffer b = pool.acquire(sizes[ThreadLocalRandom.current().nextInt(sizes.length)])) {
                            assertTrue(out.add(b.memoryAddress()), "slice handed out twice: " + b);
                            ByteBuffer bytes = b.buffer();
                            for (int at = 0; at < b.capacity(); at += 1024) {
                                bytes.putInt(at, stamp);
                            }
                            Thread.yield();
                            for (int at = 0; at < b.capacity(); at += 1024) {
                                assertEquals(stamp, bytes.getInt(at), "another holder wrote into " + b);
                            }
                            assertTrue(out.remove(b.memoryAddress()));
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> worker : workers) {
                worker.get(120, TimeUnit.SECONDS);
            }
            assertTrue(pool.registeredBytes() <= 32 * MiB);
            assertEquals(pool.registrations(), node.registrationCount());
            pool.close();
            assertEquals(List.of(), pool.leakedOnClose());
        }
    }
}

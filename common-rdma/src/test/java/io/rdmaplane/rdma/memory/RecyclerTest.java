package io.rdmaplane.rdma.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class RecyclerTest {
    /** The recycler's clock: tests move it instead of waiting. */
    private final AtomicLong now = new AtomicLong(1_000_000_000L);
    private final AtomicLong limit = new AtomicLong(1L << 30);
    private final Recycler recycler = new Recycler(limit::get, now::get);

    @Test
    void memoryGivenBackIsTakenAgainClearedAndNothingElseIsMade() {
        assertNull(recycler.take(4096), "nothing idle: the caller allocates");
        ByteBuffer memory = ByteBuffer.allocateDirect(4096).position(100).limit(200);
        recycler.give(memory, Duration.ZERO);
        assertEquals(4096, recycler.idleBytes());
        ByteBuffer again = recycler.take(4096);
        assertSame(memory, again);
        assertEquals(0, again.position());
        assertEquals(4096, again.limit(), "cleared: the whole capacity");
        assertEquals(0, recycler.idleBytes());
        assertNull(recycler.take(4096), "taken once only");
    }

    @Test
    void aBufferIsReusedOnlyAfterItsQuarantine() {
        ByteBuffer memory = ByteBuffer.allocateDirect(8192);
        recycler.give(memory, Duration.ofSeconds(5));
        assertNull(recycler.take(8192), "quarantined");
        now.addAndGet(Duration.ofSeconds(5).toNanos() - 1);
        assertNull(recycler.take(8192), "one nanosecond short");
        assertEquals(8192, recycler.idleBytes(), "quarantined memory counts as idle");
        now.incrementAndGet();
        assertSame(memory, recycler.take(8192));
    }

    @Test
    void aReusableBufferIsFoundBehindAQuarantinedOneOfTheSameSize() {
        ByteBuffer quarantined = ByteBuffer.allocateDirect(1000);
        ByteBuffer reusable = ByteBuffer.allocateDirect(1000);
        recycler.give(quarantined, Duration.ofSeconds(1));
        recycler.give(reusable, Duration.ZERO);
        assertSame(reusable, recycler.take(1000));
        assertNull(recycler.take(1000));
    }

    @Test
    void sizesWithinOneSixteenthAboveTheRequestFitOthersDoNot() {
        ByteBuffer tooSmall = ByteBuffer.allocateDirect(999);
        ByteBuffer justFits = ByteBuffer.allocateDirect(1000 + 1000 / 16);
        ByteBuffer tooLarge = ByteBuffer.allocateDirect(1000 + 1000 / 16 + 1);
        recycler.give(tooSmall, Duration.ZERO);
        recycler.give(tooLarge, Duration.ZERO);
        assertNull(recycler.take(1000), "smaller than asked, or more than 1/16 larger");
        recycler.give(justFits, Duration.ZERO);
        assertSame(justFits, recycler.take(1000));
        assertSame(tooSmall, recycler.take(999));
    }

    @Test
    void equalSizesAreReusedOldestFirst() {
        ByteBuffer first = ByteBuffer.allocateDirect(2048);
        ByteBuffer second = ByteBuffer.allocateDirect(2048);
        recycler.give(first, Duration.ZERO);
        recycler.give(second, Duration.ZERO);
        assertSame(first, recycler.take(2048));
        assertSame(second, recycler.take(2048));
    }

    @Test
    void idleMemoryStaysWithinTheLimitLargestDroppedFirst() {
        limit.set(10_000);
        recycler.give(ByteBuffer.allocateDirect(3000), Duration.ZERO);
        recycler.give(ByteBuffer.allocateDirect(6000), Duration.ZERO);
        assertEquals(9000, recycler.idleBytes());
        recycler.give(ByteBuffer.allocateDirect(4000), Duration.ZERO);
        assertEquals(7000, recycler.idleBytes(), "13000 over the limit: the 6000-byte buffer went");
        assertNull(recycler.take(6000));
        assertNotNull(recycler.take(4000));
        assertNotNull(recycler.take(3000));
    }

    @Test
    void trimMakesRoomForFreshMemoryAndFollowsTheLimitAsItChanges() {
        limit.set(10_000);
        recycler.give(ByteBuffer.allocateDirect(3000), Duration.ZERO);
        recycler.give(ByteBuffer.allocateDirect(4000), Duration.ZERO);
        recycler.trim(5000);
        assertEquals(3000, recycler.idleBytes(), "idle plus the 5000 fresh bytes fit the limit");
        recycler.trim(0);
        assertEquals(3000, recycler.idleBytes(), "nothing more to drop");
        limit.set(2000); // e.g. more of a cap is registered now
        recycler.trim(0);
        assertEquals(0, recycler.idleBytes());
    }

    @Test
    void afterCloseNothingIsKept() {
        recycler.give(ByteBuffer.allocateDirect(4096), Duration.ZERO);
        recycler.close();
        assertEquals(0, recycler.idleBytes());
        recycler.give(ByteBuffer.allocateDirect(4096), Duration.ZERO);
        assertEquals(0, recycler.idleBytes(), "given after close: dropped");
        assertNull(recycler.take(4096));
    }

    @Test
    void badArgumentsAreRefused() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> recycler.give(ByteBuffer.allocateDirect(16), Duration.ofSeconds(-1)));
        assertEquals("the quarantine must not be negative, was PT-1S", e.getMessage());
        assertEquals(0, recycler.idleBytes());
        assertThrows(IllegalArgumentException.class, () -> recycler.take(-1));
    }
}

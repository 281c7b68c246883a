package io.rdmaplane.hdfs.datanode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.datanode.RegionCache.Key;
import io.rdmaplane.hdfs.datanode.RegionCache.Region;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.tcp.TcpNode;
import io.rdmaplane.rdma.testing.TestNodes;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The DataNode's registered block files, over the tcp provider's real registrations. */
class RegionCacheTest {
    private static final int BLOCK = 16 << 10;
    /** A lease no test outlives: every region handed out stays leased. */
    private static final long FOREVER = TimeUnit.HOURS.toNanos(1);

    @TempDir
    Path dir;
    private TcpNode node;

    @BeforeEach
    void startNode() throws Exception {
        node = TestNodes.tcp();
    }

    @AfterEach
    void stopNode() {
        node.close();
    }

    private Path blockFile(long blockId, int length) throws IOException {
        return Files.write(dir.resolve("blk_" + blockId), FakeDataNode.bytes(length, blockId));
    }

    private static Key key(long blockId) {
        return new Key(FakeDataNode.POOL, blockId, 1001);
    }

    @Test
    void aReplicaIsMappedAndRegisteredOnceReadOnlyAndReusedWhileValid() throws Exception {
        try (RegionCache cache = new RegionCache(node, 1 << 20, FOREVER)) {
            Path file = blockFile(1, BLOCK);
            long registrations = node.registrationCount();
            Region region = cache.acquire(key(1), BLOCK, file);
            assertEquals(registrations + 1, node.registrationCount());
            assertEquals(Set.of(Access.REMOTE_READ), region.memory.access(), "exposed REMOTE_READ only");
            assertTrue(region.mapping.isReadOnly(), "a read-only mapping of the block file, not a copy");
            byte[] mapped = new byte[BLOCK];
            region.mapping.duplicate().get(mapped);
            assertArrayEquals(Files.readAllBytes(file), mapped);
            assertEquals(BLOCK, cache.registeredBytes());

            assertSame(region, cache.acquire(key(1), BLOCK, file), "the same replica: the same region");
            assertEquals(registrations + 1, node.registrationCount(), "no registration per request");
            assertEquals(1, cache.size());
        }
    }

    @Test
    void anotherGenerationStampOrLengthIsAnotherRegion() throws Exception {
        try (RegionCache cache = new RegionCache(node, 1 << 20, FOREVER)) {
            Path file = blockFile(1, BLOCK);
            Region first = cache.acquire(key(1), BLOCK, file);
            Region appended = cache.acquire(new Key(FakeDataNode.POOL, 1, 1002), BLOCK, file);
            assertNotSame(first, appended, "a new generation stamp is a new replica");
            assertEquals(2, cache.size());

            Region shorter = cache.acquire(key(1), BLOCK / 2, file);
            assertNotSame(first, shorter);
            assertFalse(first.memory.isValid(), "the region of the old length is released, its rkey revoked");
            assertEquals(BLOCK / 2 + BLOCK, cache.registeredBytes());
            assertEquals(1, cache.released());
        }
    }

    @Test
    void atTheCapTheLeastRecentlyUsedRegionOutOfItsLeaseMakesRoom() throws Exception {
        try (RegionCache cache = new RegionCache(node, 3L * BLOCK, 0)) { // lease 0: every region may go
            Path first = blockFile(1, BLOCK);
            Region a = cache.acquire(key(1), BLOCK, first);
            Region b = cache.acquire(key(2), BLOCK, blockFile(2, BLOCK));
            Region c = cache.acquire(key(3), BLOCK, blockFile(3, BLOCK));
            assertSame(a, cache.acquire(key(1), BLOCK, first), "a used again: b is now the oldest");
            Region d = cache.acquire(key(4), BLOCK, blockFile(4, BLOCK));
            assertTrue(d.memory.isValid());
            assertFalse(b.memory.isValid(), "the least recently used region was released");
            assertTrue(a.memory.isValid() && c.memory.isValid());
            assertEquals(3L * BLOCK, cache.registeredBytes(), "never above the cap");
            assertEquals(3, cache.size());
            assertEquals(1, cache.released());
        }
    }

    @Test
    void whenEveryRegionIsLeasedTheCallerIsToldToFallBack() throws Exception {
        try (RegionCache cache = new RegionCache(node, 2L * BLOCK, FOREVER)) {
            Region a = cache.acquire(key(1), BLOCK, blockFile(1, BLOCK));
            Region b = cache.acquire(key(2), BLOCK, blockFile(2, BLOCK));
            long registrations = node.registrationCount();
            assertNull(cache.acquire(key(3), BLOCK, blockFile(3, BLOCK)), "no room: the reader falls back");
            assertEquals(registrations, node.registrationCount(), "nothing registered beyond the cap");
            assertTrue(a.memory.isValid() && b.memory.isValid(), "leased regions (READs may be in flight) stay");
            assertEquals(2L * BLOCK, cache.registeredBytes());
            assertNull(cache.acquire(key(4), 3 * BLOCK, blockFile(4, 3 * BLOCK)), "a replica larger than the cap never fits");
        }
    }

    @Test
    void aBlockFileShorterThanTheReplicaIsAnErrorAndReservesNothing() throws Exception {
        try (RegionCache cache = new RegionCache(node, 1 << 20, FOREVER)) {
            Path file = blockFile(1, BLOCK - 1);
            IOException e = assertThrows(IOException.class, () -> cache.acquire(key(1), BLOCK, file));
            assertTrue(e.getMessage().contains("holds " + (BLOCK - 1) + " bytes, the replica " + BLOCK), e.getMessage());
            assertEquals(0, cache.registeredBytes(), "the reservation is given back");
            assertEquals(0, cache.size());
            IOException huge = assertThrows(IOException.class, () -> cache.acquire(key(2), 1L << 31, file));
            assertTrue(huge.getMessage().contains("too large to map as one region"), huge.getMessage());
        }
    }

    @Test
    void sweepReleasesIdleRegionsAndThoseWhoseReplicaChanged() throws Exception {
        try (RegionCache cache = new RegionCache(node, 1 << 20, FOREVER)) {
            Region a = cache.acquire(key(1), BLOCK, blockFile(1, BLOCK));
            Region b = cache.acquire(key(2), BLOCK, blockFile(2, BLOCK));
            assertEquals(0, cache.sweep(FOREVER, k -> true), "nothing idle for an hour, every replica servable");
            assertEquals(1, cache.sweep(FOREVER, k -> k.blockId() != 2), "block 2's replica changed");
            assertFalse(b.memory.isValid(), "its rkey is revoked: a late READ fails and its reader falls back");
            assertTrue(a.memory.isValid());
            assertEquals(1, cache.sweep(0, k -> true), "idle for at least 0 ns: released");
            assertFalse(a.memory.isValid());
            assertEquals(0, cache.size());
            assertEquals(0, cache.registeredBytes());
            assertEquals(2, cache.released());
        }
    }

    @Test
    void invalidateReleasesOneReplicasRegion() throws Exception {
        try (RegionCache cache = new RegionCache(node, 1 << 20, FOREVER)) {
            Region a = cache.acquire(key(1), BLOCK, blockFile(1, BLOCK));
            cache.invalidate(key(2)); // not held: nothing happens
            assertTrue(a.memory.isValid());
            cache.invalidate(key(1));
            assertFalse(a.memory.isValid());
            assertEquals(0, cache.size());
            assertEquals(0, cache.registeredBytes());
        }
    }

    @Test
    void closeReleasesEverythingAndRefusesLaterRequests() throws Exception {
        RegionCache cache = new RegionCache(node, 1 << 20, FOREVER);
        Path file = blockFile(1, BLOCK);
        Region a = cache.acquire(key(1), BLOCK, file);
        cache.close();
        assertFalse(a.memory.isValid());
        assertEquals(0, cache.registeredBytes());
        IOException e = assertThrows(IOException.class, () -> cache.acquire(key(1), BLOCK, file));
        assertTrue(e.getMessage().contains("stopping"), e.getMessage());
    }

    @Test
    void concurrentRequestsForOneReplicaShareOneRegion() throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(4);
        try (RegionCache cache = new RegionCache(node, 1 << 20, FOREVER)) {
            Path file = blockFile(1, BLOCK);
            List<Future<Region>> acquired = new ArrayList<>();
            Callable<Region> acquire = () -> cache.acquire(key(1), BLOCK, file);
            for (int i = 0; i < 16; i++) {
                acquired.add(threads.submit(acquire));
            }
            Region first = acquired.get(0).get(30, TimeUnit.SECONDS);
            for (Future<Region> f : acquired) {
                assertSame(first, f.get(30, TimeUnit.SECONDS), "one region per replica, whoever raced");
            }
            assertTrue(first.memory.isValid());
            assertEquals(1, cache.size());
            assertEquals(BLOCK, cache.registeredBytes(), "a raced registration is given back");
        } finally {
            threads.shutdownNow();
        }
    }
}

package io.rdmaplane.spark.serve;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.spark.ShuffleFixture;
import io.rdmaplane.spark.ShuffleFixture.Executor;
import io.rdmaplane.spark.ShuffleMetrics;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MapOutputStoreTest {
    private static final long[] LENGTHS = {1000, 0, 9L << 20, 0, 1, 70_000, 4096, 0};

    @TempDir
    Path dir;
    private Executor executor;
    private Node readerNode;
    private PolicyClient reader;

    @BeforeEach
    void setUp() throws Exception {
        executor = new Executor("exec-1", 256L << 20, false);
        readerNode = ShuffleFixture.node();
        reader = new PolicyClient(readerNode, ShuffleFixture.fastOptions(), new PolicyMetrics());
    }

    @AfterEach
    void tearDown() {
        reader.close();
        readerNode.close();
        executor.close();
    }

    @Test
    void testEveryNonEmptyPartitionIsAnArrowStreamOfTheFileRange() throws Exception {
        File file = ShuffleFixture.dataFile(dir, 3, 11, LENGTHS);
        assertTrue(executor.store.publish(3, 11, file, LENGTHS));
        long framed = 0;
        try (BufferAllocator allocator = new RootAllocator()) {
            for (int r = 0; r < LENGTHS.length; r++) {
                RemoteBlock block = single(executor.store.locate(3, 11, r));
                if (LENGTHS[r] == 0) {
                    assertNull(block, "an empty partition has no segment");
                    continue;
                }
                assertNotNull(block, "partition " + r);
                framed += block.length();
                byte[] segment = readRemote(block);
                assertEquals(block.crc32c(), crc(segment), "the LOCATE checksum covers the whole framed segment");
                try (ArrowStreamReader arrow = new ArrowStreamReader(new ByteArrayInputStream(segment), allocator)) {
                    VectorSchemaRoot root = arrow.getVectorSchemaRoot();
                    Map<String, String> metadata = root.getSchema().getCustomMetadata();
                    assertEquals("3", metadata.get(MapOutputStore.SHUFFLE_ID_KEY));
                    assertEquals("11", metadata.get(MapOutputStore.MAP_ID_KEY));
                    assertEquals(Integer.toString(r), metadata.get(MapOutputStore.PARTITION_ID_KEY));
                    ByteArrayOutputStream payload = new ByteArrayOutputStream();
                    while (arrow.loadNextBatch()) {
                        VarBinaryVector rows = (VarBinaryVector) root.getVector(0);
                        for (int i = 0; i < rows.getValueCount(); i++) {
                            payload.write(rows.get(i));
                        }
                    }
                    assertArrayEquals(ShuffleFixture.blockBytes(3, 11, r, LENGTHS[r]), payload.toByteArray(),
                            "partition " + r + " payload equals its range of the data file");
                }
            }
        }
        assertNull(single(executor.store.locate(3, 11, LENGTHS.length)), "no partition beyond the map output's");
        assertNull(single(executor.store.locate(3, 12, 0)), "no such map output");
        assertEquals(framed, executor.store.usedBytes(), "usedBytes is exactly the registered segments");
        assertEquals(1, executor.metrics.publishedMaps().getCount());
        assertTrue(executor.metrics.publishMicros().getCount() > 0, "the publish's time is counted (it read and registered a file)");
        assertEquals(framed, executor.metrics.publishedBytes().getCount());
        assertEquals(1, executor.metrics.publishedCopied().getCount(), "mapFiles off: a copy");
        assertEquals(0, executor.metrics.publishedMapped().getCount());
        long payload = java.util.Arrays.stream(LENGTHS).sum();
        assertTrue(framed - payload < 2048 * 5, "framing costs a few hundred bytes per segment, was " + (framed - payload));
    }

    @Test
    void testSegmentsAreRegisteredRemoteReadOnly() throws Exception {
        long before = executor.node.registrationCount();
        assertTrue(executor.store.publish(1, 1, ShuffleFixture.dataFile(dir, 1, 1, LENGTHS), LENGTHS));
        assertEquals(before + 1, executor.node.registrationCount(), "one registration for the whole map output");
        List<MemoryRegion> regions = executor.store.regions(1, 1);
        assertEquals(1, regions.size());
        assertEquals(Set.of(Access.REMOTE_READ), regions.get(0).access(), "exposed memory is REMOTE_READ only");
        assertEquals(executor.store.usedBytes(), regions.get(0).length(), "the region holds exactly the segments");
        for (int r = 0; r < LENGTHS.length; r++) {
            RemoteBlock block = single(executor.store.locate(1, 1, r));
            if (block != null) {
                assertEquals(regions.get(0).rkey(), block.rkey());
                assertTrue(block.address() >= regions.get(0).address()
                        && block.address() + block.length() <= regions.get(0).address() + regions.get(0).length());
            }
        }
    }

    @Test
    void testCapIsRespectedExactly() throws Exception {
        File file = ShuffleFixture.dataFile(dir, 5, 1, LENGTHS);
        assertTrue(executor.store.publish(5, 1, file, LENGTHS));
        long exact = executor.store.usedBytes();

        try (Executor atCap = new Executor("at-cap", exact, false); Executor belowCap = new Executor("below-cap", exact - 1, false)) {
            assertTrue(atCap.store.publish(5, 1, file, LENGTHS), "exactly the cap fits");
            assertEquals(exact, atCap.store.usedBytes());
            assertFalse(atCap.store.publish(5, 2, file, LENGTHS), "nothing more fits");
            assertEquals(exact, atCap.store.usedBytes(), "a refused map output keeps nothing");
            assertNull(single(atCap.store.locate(5, 2, 0)));
            assertEquals(1, atCap.metrics.notPublishedOverCap().getCount());

            long registrations = belowCap.node.registrationCount();
            assertFalse(belowCap.store.publish(5, 1, file, LENGTHS), "one byte short of the cap");
            assertEquals(0, belowCap.store.usedBytes());
            assertEquals(registrations, belowCap.node.registrationCount(), "nothing half-registered");
            assertNull(single(belowCap.store.locate(5, 1, 0)));
            assertEquals(1, belowCap.metrics.notPublishedOverCap().getCount());
            assertEquals(0, belowCap.metrics.publishedMaps().getCount());

            long[] small = {10};
            assertTrue(atCap.store.publish(6, 1, ShuffleFixture.dataFile(dir, 6, 1, small), small) == false);
            atCap.store.removeShuffle(5);
            assertEquals(0, atCap.store.usedBytes(), "removing the shuffle gives its bytes back");
            assertTrue(atCap.store.publish(6, 1, ShuffleFixture.dataFile(dir, 6, 1, small), small));
        }
    }

    @Test
    void testMissingOrShortDataFileIsRefused() throws Exception {
        File missing = dir.resolve("nope.data").toFile();
        assertFalse(executor.store.publish(1, 1, missing, LENGTHS));
        File file = ShuffleFixture.dataFile(dir, 1, 2, LENGTHS);
        try (RandomAccessFile truncate = new RandomAccessFile(file, "rw")) {
            truncate.setLength(file.length() - 1);
        }
        assertFalse(executor.store.publish(1, 2, file, LENGTHS));
        assertEquals(0, executor.store.usedBytes());
        assertEquals(2, executor.metrics.notPublishedFailed().getCount());
        assertEquals(0, executor.metrics.publishedMaps().getCount());
        assertNull(single(executor.store.locate(1, 2, 0)));
    }

    @Test
    void testAllEmptyMapOutputIsPublishedWithNothingToLocate() throws Exception {
        long[] empty = {0, 0, 0};
        assertTrue(executor.store.publish(2, 9, ShuffleFixture.dataFile(dir, 2, 9, empty), empty));
        assertNull(single(executor.store.locate(2, 9, 1)));
        assertEquals(0, executor.store.usedBytes());
    }

    @Test
    void testReadAfterRemoveShuffleFailsWithRemoteAccessError() throws Exception {
        long[] lengths = {5000, 6000};
        assertTrue(executor.store.publish(4, 1, ShuffleFixture.dataFile(dir, 4, 1, lengths), lengths));
        assertTrue(executor.store.publish(8, 1, ShuffleFixture.dataFile(dir, 8, 1, lengths), lengths));
        RemoteBlock old = single(executor.store.locate(4, 1, 1));
        readRemote(old); // READable while published
        executor.store.removeShuffle(4);
        assertNull(single(executor.store.locate(4, 1, 1)));
        ExecutionException e = assertThrows(ExecutionException.class, () -> readRemote(old));
        assertEquals(Status.REMOTE_ACCESS_ERROR, statusOf(e), "the old rkey is revoked: " + e);
        assertFalse(executor.store.publish(4, 2, ShuffleFixture.dataFile(dir, 4, 2, lengths), lengths),
                "a late map output of a removed shuffle is not kept");
        assertNull(single(executor.store.locate(4, 2, 0)));
        assertNotNull(single(executor.store.locate(8, 1, 1)), "other shuffles stay");
        readRemote(single(executor.store.locate(8, 1, 1)));
    }

    @Test
    void testMemoryOfARemovedShuffleIsReusedOnlyAfterItsQuarantine() throws Exception {
        long[] lengths = {200_000, 0, 300_000};
        File file = ShuffleFixture.dataFile(dir, 1, 1, lengths);
        assertTrue(executor.store.publish(1, 1, file, lengths));
        RemoteBlock old = single(executor.store.locate(1, 1, 2));
        executor.store.removeShuffle(1);
        long idle = executor.store.idleBytes();
        assertTrue(idle >= executor.store.usedBytes() && idle > 0, "the deregistered memory is kept for reuse");

        // Within the quarantine (default 5 s) a publish of the same size takes fresh memory.
        File again = ShuffleFixture.dataFile(dir, 2, 1, lengths);
        assertTrue(executor.store.publish(2, 1, again, lengths));
        assertEquals(idle, executor.store.idleBytes(), "quarantined memory is not reused");

        executor.store.setRecycleQuarantine(java.time.Duration.ZERO);
        executor.store.removeShuffle(2); // its memory is reusable at once now
        assertEquals(2 * idle, executor.store.idleBytes());
        assertTrue(executor.store.publish(3, 1, ShuffleFixture.dataFile(dir, 3, 1, lengths), lengths));
        assertEquals(idle, executor.store.idleBytes(), "one idle buffer was reused");
        // Reused memory: the new segments are intact, and the old rkey still fails.
        for (int r : new int[] {0, 2}) {
            assertArrayEquals(ShuffleFixture.blockBytes(3, 1, r, lengths[r]), payloadOf(readRemote(single(executor.store.locate(3, 1, r)))));
        }
        ExecutionException e = assertThrows(ExecutionException.class, () -> readRemote(old));
        assertEquals(Status.REMOTE_ACCESS_ERROR, statusOf(e));
    }

    @Test
    void testIdleMemoryStaysWithinWhatTheCapLeaves() throws Exception {
        long[] lengths = {1 << 20, 1 << 20};
        File file = ShuffleFixture.dataFile(dir, 1, 1, lengths);
        try (Executor small = new Executor("small", 5L << 20, false)) {
            small.store.setRecycleQuarantine(java.time.Duration.ZERO);
            assertTrue(small.store.publish(1, 1, file, lengths));
            assertTrue(small.store.publish(1, 2, file, lengths));
            small.store.removeShuffle(1);
            assertTrue(small.store.idleBytes() <= 5L << 20, "idle memory within the cap: " + small.store.idleBytes());
            assertTrue(small.store.publish(2, 1, file, lengths));
            assertTrue(small.store.publish(2, 2, file, lengths));
            assertTrue(small.store.idleBytes() + small.store.usedBytes() <= 5L << 20,
                    "idle + registered within the cap: " + small.store.idleBytes() + " + " + small.store.usedBytes());
        }
    }

    @Test
    void testConcurrentPublishLocateAndRemove() throws Exception {
        int maps = 24;
        long[] lengths = {3000, 0, 12_000, 800};
        List<File> files = new ArrayList<>();
        for (int m = 0; m < maps; m++) {
            files.add(ShuffleFixture.dataFile(dir, m % 3, m, lengths));
        }
        ExecutorService threads = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> work = new ArrayList<>();
            for (int m = 0; m < maps; m++) {
                int map = m;
                work.add(threads.submit(() -> executor.store.publish(map % 3, map, files.get(map), lengths)));
                work.add(threads.submit(() -> single(executor.store.locate(map % 3, map, 2))));
                if (m == maps / 2) {
                    work.add(threads.submit(() -> executor.store.removeShuffle(0)));
                }
            }
            for (Future<?> f : work) {
                f.get(30, TimeUnit.SECONDS);
            }
        } finally {
            threads.shutdown();
        }
        for (int m = 0; m < maps; m++) {
            if (m % 3 == 0) {
                assertNull(single(executor.store.locate(0, m, 0)), "removed shuffle 0 keeps nothing, even map outputs published late");
            } else {
                assertArrayEquals(ShuffleFixture.blockBytes(m % 3, m, 2, lengths[2]), payloadOf(readRemote(
                        single(executor.store.locate(m % 3, m, 2)))));
            }
        }
        executor.store.removeShuffle(1);
        executor.store.removeShuffle(2);
        assertEquals(0, executor.store.usedBytes(), "every reserved byte was given back");
    }

    private byte[] payloadOf(byte[] segment) throws Exception {
        return ShuffleFixture.bytes(io.rdmaplane.rdma.format.ArrowBlock.read(ByteBuffer.wrap(segment), true).payload());
    }

    @Test
    void testMappedOutputServesThePayloadFromTheDataFileWithoutACopy() throws Exception {
        try (Executor mapped = new Executor("mapped", 256L << 20, true)) {
            File file = ShuffleFixture.dataFile(dir, 3, 11, LENGTHS);
            long before = mapped.node.registrationCount();
            assertTrue(mapped.store.publish(3, 11, file, LENGTHS));
            assertEquals(before + 1, mapped.node.registrationCount(), "the file mapping alone: the framing is not registered");
            assertEquals(1, mapped.metrics.publishedMapped().getCount(), "counted as mapped");
            assertEquals(0, mapped.metrics.publishedCopied().getCount());
            List<MemoryRegion> regions = mapped.store.regions(3, 11);
            assertEquals(1, regions.size());
            long payload = java.util.Arrays.stream(LENGTHS).sum();
            assertEquals(payload, regions.get(0).length(), "the whole data file is registered as it is");
            assertTrue(regions.get(0).buffer().isReadOnly(), "a read-only mapping, not a copy");
            regions.forEach(r -> assertEquals(Set.of(Access.REMOTE_READ), r.access()));
            assertEquals(payload, mapped.store.usedBytes(), "the cap counts the registered payload");
            try (BufferAllocator allocator = new RootAllocator()) {
                for (int r = 0; r < LENGTHS.length; r++) {
                    RemoteBlock[] pieces = mapped.store.locate(3, 11, r);
                    if (LENGTHS[r] == 0) {
                        assertNull(pieces, "an empty partition has no segment");
                        continue;
                    }
                    assertEquals(1, pieces.length, "the payload alone is registered");
                    assertEquals(regions.get(0).rkey(), pieces[0].rkey(), "the payload is READ from the file mapping");
                    assertEquals(LENGTHS[r], pieces[0].length());
                    MapOutputPublisher.Block block = mapped.store.block(3, 11, r);
                    assertTrue(block.header().remaining() > 0 && block.header().remaining() < 4096, "framing of a few hundred bytes");
                    assertEquals(pieces[0], block.remote(), "LOCATE serves the same payload piece");
                    ByteArrayOutputStream gathered = new ByteArrayOutputStream();
                    gathered.write(ShuffleFixture.bytes(List.of(block.header())));
                    byte[] bytes = readRemote(mapped, pieces[0]);
                    assertEquals(pieces[0].crc32c(), crc(bytes), "the piece's checksum covers it");
                    gathered.write(bytes);
                    gathered.write(ShuffleFixture.bytes(List.of(block.trailer())));
                    try (ArrowStreamReader arrow = new ArrowStreamReader(new ByteArrayInputStream(gathered.toByteArray()),
                            allocator)) {
                        VectorSchemaRoot root = arrow.getVectorSchemaRoot();
                        assertEquals(Integer.toString(r), root.getSchema().getCustomMetadata().get(MapOutputStore.PARTITION_ID_KEY));
                        ByteArrayOutputStream rows = new ByteArrayOutputStream();
                        while (arrow.loadNextBatch()) {
                            VarBinaryVector column = (VarBinaryVector) root.getVector(0);
                            for (int i = 0; i < column.getValueCount(); i++) {
                                rows.write(column.get(i));
                            }
                        }
                        assertArrayEquals(ShuffleFixture.blockBytes(3, 11, r, LENGTHS[r]), rows.toByteArray(),
                                "framing, READ payload, framing: an Arrow stream of the partition's file range");
                    }
                }
            }
            RemoteBlock payloadPiece = mapped.store.locate(3, 11, 2)[0];
            mapped.store.removeShuffle(3);
            assertEquals(0, mapped.store.usedBytes());
            ExecutionException e = assertThrows(ExecutionException.class, () -> readRemote(mapped, payloadPiece));
            assertEquals(Status.REMOTE_ACCESS_ERROR, statusOf(e), "the mapping's rkey is revoked: " + e);
        }
    }

    @Test
    void testAProviderThatCannotRegisterFileMappingsGetsCopies() throws Exception {
        ShuffleMetrics metrics = new ShuffleMetrics();
        try (Node tcp = ShuffleFixture.node(); MapOutputStore store = new MapOutputStore(new NoReadOnlyMappings(tcp),
                256L << 20, metrics, true)) {
            long[] lengths = {3000, 0, 5000};
            assertTrue(store.publish(1, 1, ShuffleFixture.dataFile(dir, 1, 1, lengths), lengths));
            assertEquals(1, store.locate(1, 1, 2).length, "copied: one piece");
            assertTrue(store.publish(1, 2, ShuffleFixture.dataFile(dir, 1, 2, lengths), lengths));
            assertEquals(1, store.locate(1, 2, 0).length, "and from then on");
            assertEquals(2, metrics.publishedCopied().getCount(), "the report tells the copies");
            assertEquals(0, metrics.publishedMapped().getCount(), "mapFiles on, but no mapping was registered");
        }
    }

    /** A node like verbs on kernels before 6.2: read-only (file) mappings cannot be registered. */
    private static final class NoReadOnlyMappings implements Node {
        private final Node delegate;

        NoReadOnlyMappings(Node delegate) {
            this.delegate = delegate;
        }

        @Override
        public MemoryRegion register(ByteBuffer buffer, Set<Access> access) throws TransportException {
            if (buffer.isReadOnly()) {
                throw new TransportException(Status.LOCAL_PROTECTION_ERROR, "cannot pin a read-only shared file mapping");
            }
            return delegate.register(buffer, access);
        }

        @Override
        public void listen(io.rdmaplane.rdma.provider.ChannelAcceptor acceptor) throws TransportException {
            delegate.listen(acceptor);
        }

        @Override
        public java.net.InetSocketAddress localAddress() {
            return delegate.localAddress();
        }

        @Override
        public java.util.concurrent.CompletableFuture<io.rdmaplane.rdma.provider.Channel> connect(
                java.net.InetSocketAddress peer, int queueDepth, io.rdmaplane.rdma.provider.ChannelHandler handler) {
            return delegate.connect(peer, queueDepth, handler);
        }

        @Override
        public long registrationCount() {
            return delegate.registrationCount();
        }

        @Override
        public String providerName() {
            return "no-file-mappings";
        }

        @Override
        public java.util.concurrent.CompletableFuture<Void> terminated() {
            return delegate.terminated();
        }

        @Override
        public void close() {
            delegate.close();
        }
    }

    private byte[] readRemote(Executor from, RemoteBlock block) throws Exception {
        try (MemoryRegion landing = readerNode.register(ByteBuffer.allocateDirect(block.length()), Set.of(Access.LOCAL_WRITE))) {
            from.server.grants(reader.instance(from.server.address())).grant(block.rkey()); // located here, not by LOCATE: granted by hand
            reader.peer(from.server.address()).read(block, landing, 0).get(30, TimeUnit.SECONDS);
            byte[] bytes = new byte[block.length()];
            landing.buffer().get(bytes);
            return bytes;
        }
    }

    /** The one piece of a copied segment (null when not held). */
    private static RemoteBlock single(RemoteBlock[] pieces) {
        if (pieces == null) {
            return null;
        }
        assertEquals(1, pieces.length, "a copied segment is one piece");
        return pieces[0];
    }

    private byte[] readRemote(RemoteBlock block) throws Exception {
        try (MemoryRegion landing = readerNode.register(ByteBuffer.allocateDirect(block.length()), Set.of(Access.LOCAL_WRITE))) {
            executor.server.grants(reader.instance(executor.server.address())).grant(block.rkey()); // located here, not by LOCATE: granted by hand
            reader.peer(executor.server.address()).read(block, landing, 0).get(30, TimeUnit.SECONDS);
            byte[] bytes = new byte[block.length()];
            landing.buffer().get(bytes);
            return bytes;
        }
    }

    private static Status statusOf(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof TransportException t) {
                return t.status();
            }
        }
        return null;
    }

    private static int crc(byte[] bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes);
        return (int) crc.getValue();
    }

    @Test
    void testMetricsShareThePolicyRegistry() {
        ShuffleMetrics metrics = new ShuffleMetrics(new PolicyMetrics());
        metrics.fallbackFetch().inc(3);
        Map<String, Long> snapshot = metrics.snapshot();
        assertEquals(3L, snapshot.get(ShuffleMetrics.FALLBACK_FETCH));
        assertEquals(0L, snapshot.get("rdma.read.count"), "the policy layer's counters are in the same registry");
        for (String name : List.of(ShuffleMetrics.PUBLISHED_MAPS, ShuffleMetrics.PUBLISHED_MAPPED, ShuffleMetrics.PUBLISHED_COPIED,
                ShuffleMetrics.PUBLISHED_BYTES,
                ShuffleMetrics.NOT_PUBLISHED_OVER_CAP, ShuffleMetrics.FETCH_RDMA_BLOCKS, ShuffleMetrics.FETCH_RDMA_BYTES,
                ShuffleMetrics.FALLBACK_SHUFFLE, ShuffleMetrics.FALLBACK_APP, ShuffleMetrics.LOCATE_REQUESTS)) {
            assertEquals(0L, snapshot.get(name), name);
        }
    }
}

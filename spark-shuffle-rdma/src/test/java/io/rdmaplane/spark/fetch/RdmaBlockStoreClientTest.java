package io.rdmaplane.spark.fetch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.rdmaplane.rdma.format.ArrowBlock;
import io.rdmaplane.rdma.memory.PoolOptions;
import io.rdmaplane.rdma.memory.RegisteredBuffer;
import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import io.rdmaplane.rdma.policy.PeerUnavailableException;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.PolicyServer;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.provider.faulty.FaultyNode;
import io.rdmaplane.rdma.testing.HostileSchema;
import io.rdmaplane.rdma.testing.Polling;
import io.rdmaplane.spark.LogCapture;
import io.rdmaplane.spark.ShuffleFixture;
import io.rdmaplane.spark.ShuffleFixture.Executor;
import io.rdmaplane.spark.ShuffleMetrics;
import io.rdmaplane.spark.registry.ExecutorRegistry;
import io.rdmaplane.spark.registry.RegistryClient;
import io.rdmaplane.spark.serve.LocateProtocol;
import io.rdmaplane.spark.serve.MapOutputStore;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.DownloadFile;
import org.apache.spark.network.shuffle.DownloadFileManager;
import org.apache.spark.network.util.TransportConf;
import org.apache.spark.storage.ShuffleBlockId;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two serving executors and one reducer over tcp on loopback: blocks come over RDMA READ with
 * their exact bytes, one LOCATE per executor, and every kind of per-block failure sends exactly
 * the failed blocks to Spark's client (a recording fake that answers with the expected bytes).
 */
class RdmaBlockStoreClientTest {
    private static final int SHUFFLE = 1;
    private static final int PARTITIONS = 4;
    private static final long BIG_MAP = 11;
    private static final int BIG_REDUCE = 2;

    @TempDir
    Path dir;
    private Executor a;
    private Executor b;
    private FaultyNode readerNode;
    private PolicyClient policy;
    private RegisteredMemoryPool pool;
    private final ShuffleMetrics metrics = new ShuffleMetrics();
    /** Expected bytes of every non-empty block, by block id. */
    private final Map<String, byte[]> expected = new HashMap<>();
    /** The task's blocks (reduce partitions 1 and 2 of every map output), by executor. */
    private final Map<String, List<ShuffleBlockId>> blocksByExecutor = new LinkedHashMap<>();
    private FakeFallback fallback;

    @BeforeEach
    void setUp() throws Exception {
        a = new Executor("exec-a", 256L << 20);
        b = new Executor("exec-b", 256L << 20);
        publish(a, 10, 11, 12);
        publish(b, 20, 21);
        readerNode = ShuffleFixture.faultyNode();
        policy = new PolicyClient(readerNode, ShuffleFixture.fastOptions(), metrics.policy());
        pool = new RegisteredMemoryPool(readerNode, new PoolOptions(64L << 20, Duration.ofSeconds(1)));
        fallback = new FakeFallback(expected::get);
    }

    @AfterEach
    void tearDown() {
        pool.close();
        policy.close();
        readerNode.close();
        a.close();
        b.close();
    }

    private void publish(Executor executor, long... maps) throws Exception {
        Random random = new Random(executor.id.hashCode());
        for (long map : maps) {
            long[] lengths = new long[PARTITIONS];
            for (int r = 0; r < PARTITIONS; r++) {
                lengths[r] = random.nextInt(4) == 0 ? 0 : 1 + random.nextInt(150_000);
            }
            lengths[1] = Math.max(lengths[1], 1 + random.nextInt(1000)); // the task always has blocks here
            if (map == BIG_MAP) {
                lengths[BIG_REDUCE] = (9L << 20) + 123; // over the pool's largest slice: a dedicated buffer
            }
            assertTrue(executor.store.publish(SHUFFLE, map, ShuffleFixture.dataFile(dir, SHUFFLE, map, lengths), lengths));
            for (int r = 1; r <= 2; r++) {
                if (lengths[r] > 0) {
                    ShuffleBlockId id = new ShuffleBlockId(SHUFFLE, map, r);
                    expected.put(id.name(), ShuffleFixture.blockBytes(SHUFFLE, map, r, lengths[r]));
                    blocksByExecutor.computeIfAbsent(executor.id, e -> new ArrayList<>()).add(id);
                }
            }
        }
    }

    private RdmaBlockStoreClient client(Function<String, InetSocketAddress> addresses) {
        return client(addresses, pool);
    }

    private RdmaBlockStoreClient client(Function<String, InetSocketAddress> addresses, RegisteredMemoryPool landingPool) {
        return new RdmaBlockStoreClient(policy, landingPool, readerNode, fallback, addresses, SHUFFLE, blocksByExecutor, metrics);
    }

    private Function<String, InetSocketAddress> both() {
        Map<String, InetSocketAddress> known = Map.of(a.id, a.server.address(), b.id, b.server.address());
        return known::get;
    }

    private List<String> ids(Executor executor) {
        return blocksByExecutor.get(executor.id).stream().map(ShuffleBlockId::name).toList();
    }

    private static void fetch(RdmaBlockStoreClient client, Executor executor, List<String> ids, BlockFetchingListener listener) {
        client.fetchBlocks("host-" + executor.id, 7337, executor.id, ids.toArray(String[]::new), listener, null);
    }

    private void assertReceivedExactly(RecordingListener listener, List<String> ids) {
        assertTrue(listener.failed.isEmpty(), "no failures: " + listener.failed);
        assertEquals(ids.size(), listener.received.size());
        for (String id : ids) {
            assertArrayEquals(expected.get(id), listener.received.get(id), "bytes of " + id);
        }
    }

    private void awaitPoolIdle() {
        awaitIdle(pool);
    }

    /** The fetcher releases its own reference right after the listener returns: wait for that. */
    private static void awaitIdle(RegisteredMemoryPool pool) {
        Polling.waitUntil(() -> pool.inUseBytes() == 0, Duration.ofSeconds(10),
                () -> "every registered buffer back in the pool; " + pool.inUseBytes() + " bytes are out");
        assertEquals(0, pool.inUseBytes(), "every registered buffer went back to the pool");
    }

    @Test
    void testBlocksOfSeveralCallsArriveOverRdmaWithOneLocatePerExecutor() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        List<String> fromA = ids(a);
        List<String> fromB = ids(b);
        assertTrue(fromA.contains(new ShuffleBlockId(SHUFFLE, BIG_MAP, BIG_REDUCE).name()));
        try (RdmaBlockStoreClient client = client(both())) {
            // As Spark's fetcher does: several requests per executor, interleaved.
            fetch(client, a, fromA.subList(0, 2), listener);
            fetch(client, b, fromB.subList(0, 1), listener);
            fetch(client, a, fromA.subList(2, fromA.size()), listener);
            fetch(client, b, fromB.subList(1, fromB.size()), listener);
            listener.awaitSettled(fromA.size() + fromB.size());
        }
        List<String> all = new ArrayList<>(fromA);
        all.addAll(fromB);
        assertReceivedExactly(listener, all);
        assertTrue(fallback.calls.isEmpty(), "nothing fell back: " + fallback.calls);
        assertEquals(2, metrics.locateRequests().getCount(), "one LOCATE per executor for the whole task");
        assertEquals(1, a.locatesAnswered.get());
        assertEquals(1, b.locatesAnswered.get());
        assertEquals(all.size(), metrics.fetchRdmaBlocks().getCount());
        assertEquals(all.stream().mapToLong(id -> expected.get(id).length).sum(), metrics.fetchRdmaBytes().getCount());
        assertEquals(0, metrics.fallbackFetch().getCount());
        assertEquals(1, metrics.fetchRegistrations().getCount(), "one registration: the landing of the block over 8 MiB");
        awaitPoolIdle();
        assertEquals(0, metrics.fetchUnreadBlocks().getCount(), "the listener opened every block");
        assertFalse(fallback.closed, "closing the task's client leaves Spark's client open");
    }

    @Test
    void testBlocksGivenBackUnopenedAreCountedUnread() throws Exception {
        // As a task that stops reading early: its fetcher releases results it never opened
        RecordingListener opened = new RecordingListener(false);
        List<String> fromB = ids(b);
        BlockFetchingListener unopened = new BlockFetchingListener() {
            @Override
            public void onBlockFetchSuccess(String blockId, ManagedBuffer buffer) {
                opened.calls.computeIfAbsent(blockId, k -> new AtomicInteger()).incrementAndGet();
            }

            @Override
            public void onBlockFetchFailure(String blockId, Throwable e) {
                opened.onBlockFetchFailure(blockId, e);
            }
        };
        try (RdmaBlockStoreClient client = client(both())) {
            fetch(client, b, fromB.subList(0, 1), opened);
            fetch(client, b, fromB.subList(1, fromB.size()), unopened);
            Polling.waitUntil(() -> opened.calls.size() == fromB.size(), Duration.ofSeconds(10), () -> "settled: " + opened.calls);
        }
        assertTrue(opened.failed.isEmpty(), "nothing failed: " + opened.failed);
        awaitPoolIdle();
        assertEquals(fromB.size(), metrics.fetchRdmaBlocks().getCount());
        assertEquals(fromB.size() - 1, metrics.fetchUnreadBlocks().getCount(), "all but the one the listener opened");
    }

    @Test
    void testTheFirstFetchLocatesEveryRemoteExecutorOfTheTaskAtOnce() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        try (RdmaBlockStoreClient client = client(both())) {
            fetch(client, a, ids(a).subList(0, 1), listener);
            // Only exec-a was asked for a block, yet exec-b has its LOCATE too, before any of its blocks is asked for.
            Polling.waitUntil(() -> b.locatesAnswered.get() == 1, Duration.ofSeconds(30),
                    () -> "exec-b answered " + b.locatesAnswered.get() + " LOCATEs");
            listener.awaitSettled(1);
            fetch(client, b, ids(b), listener);
            fetch(client, a, ids(a).subList(1, ids(a).size()), listener);
            listener.awaitSettled(ids(a).size() + ids(b).size());
        }
        List<String> all = new ArrayList<>(ids(a));
        all.addAll(ids(b));
        assertReceivedExactly(listener, all);
        assertEquals(2, metrics.locateRequests().getCount(), "one LOCATE per executor, none repeated");
        assertEquals(1, a.locatesAnswered.get());
        assertEquals(1, b.locatesAnswered.get());
        awaitPoolIdle();
    }

    @Test
    void testAnInlineBlockThatFailsItsChecksumFallsBack() throws Exception {
        try (Node node = ShuffleFixture.node()) {
            LocateProtocol.Inline good = (LocateProtocol.Inline) servedWhole(node, ShuffleFixture.blockBytes(SHUFFLE, 99, 1, 500),
                    99, 1, true);
            ByteBuffer flipped = ByteBuffer.allocate(good.block().remaining()).put(good.block().duplicate()).flip();
            int inPayload = flipped.limit() - 20; // the trailer (padding, end of stream) is 12 bytes here
            flipped.put(inPayload, (byte) (flipped.get(inPayload) ^ 1));
            PolicyServer liar = new PolicyServer(node, ShuffleFixture.fastOptions(), metrics.policy(), (peer, request) ->
                    LocateProtocol.encodeResponse(List.of(new LocateProtocol.Inline(flipped)))).start();
            liar.markReady();
            String one = new ShuffleBlockId(SHUFFLE, 99, 1).name();
            expected.put(one, ShuffleFixture.blockBytes(SHUFFLE, 99, 1, 500));
            blocksByExecutor.clear();
            blocksByExecutor.put("liar", List.of(new ShuffleBlockId(SHUFFLE, 99, 1)));
            RecordingListener listener = new RecordingListener(false);
            try (RdmaBlockStoreClient client = client(e -> node.localAddress())) {
                client.fetchBlocks("h", 1, "liar", new String[] {one}, listener, null);
                listener.awaitSettled(1);
            }
            liar.close();
            assertReceivedExactly(listener, List.of(one));
            assertEquals(List.of(one), fallback.blocks(), "the block that fails its CRC32C came through Spark's transfer");
            assertEquals(0, metrics.fetchRdmaBlocks().getCount());
        }
    }

    @Test
    void testManyBlocksInManyCallsAllArriveWithOneLocate() throws Exception {
        try (Executor c = new Executor("exec-c", 256L << 20)) {
            Random random = new Random(5);
            List<ShuffleBlockId> blocks = new ArrayList<>();
            for (long map = 100; map < 160; map++) {
                long[] lengths = new long[6];
                for (int r = 0; r < lengths.length; r++) {
                    lengths[r] = random.nextInt(5) == 0 ? 0 : 1 + random.nextInt(40_000);
                }
                assertTrue(c.store.publish(SHUFFLE, map, ShuffleFixture.dataFile(dir, SHUFFLE, map, lengths), lengths));
                for (int r = 0; r < lengths.length; r++) {
                    if (lengths[r] > 0) {
                        ShuffleBlockId id = new ShuffleBlockId(SHUFFLE, map, r);
                        expected.put(id.name(), ShuffleFixture.blockBytes(SHUFFLE, map, r, lengths[r]));
                        blocks.add(id);
                    }
                }
            }
            blocksByExecutor.put(c.id, blocks);
            List<String> ids = blocks.stream().map(ShuffleBlockId::name).toList();
            RecordingListener listener = new RecordingListener(false);
            try (RdmaBlockStoreClient client = client(e -> c.server.address())) {
                for (int from = 0; from < ids.size(); from += 25) {
                    fetch(client, c, ids.subList(from, Math.min(ids.size(), from + 25)), listener);
                }
                listener.awaitSettled(ids.size());
            }
            assertTrue(ids.size() > 200, "many blocks: " + ids.size());
            assertReceivedExactly(listener, ids);
            assertTrue(fallback.calls.isEmpty(), "nothing fell back: " + fallback.calls);
            int parts = (ids.size() + LocateProtocol.BLOCKS_PER_REQUEST - 1) / LocateProtocol.BLOCKS_PER_REQUEST;
            assertEquals(parts + 2, metrics.locateRequests().getCount(), "one LOCATE per " + LocateProtocol.BLOCKS_PER_REQUEST
                    + " blocks, sent once, and one each to the task's other executors (exec-a, exec-b), at once");
            assertEquals(parts + 2, c.locatesAnswered.get(), "every executor's address is exec-c's here");
            assertEquals(ids.size(), metrics.fetchRdmaBlocks().getCount());
            assertTrue(metrics.fetchInlineBlocks().getCount() > 0, "the small ones came inline");
            awaitPoolIdle();
        }
    }

    @Test
    void testMoreBlocksThanOneLocateCarriesAreLocatedInSeveralMessagesAtOnce() throws Exception {
        try (Executor c = new Executor("exec-c", 256L << 20)) {
            List<ShuffleBlockId> blocks = new ArrayList<>();
            long[] lengths = {100, 200, 300, 400};
            for (long map = 1000; map < 1300; map++) {
                assertTrue(c.store.publish(SHUFFLE, map, ShuffleFixture.dataFile(dir, SHUFFLE, map, lengths), lengths));
                for (int r = 0; r < lengths.length; r++) {
                    ShuffleBlockId id = new ShuffleBlockId(SHUFFLE, map, r);
                    expected.put(id.name(), ShuffleFixture.blockBytes(SHUFFLE, map, r, lengths[r]));
                    blocks.add(id);
                }
            }
            blocksByExecutor.put(c.id, blocks);
            List<String> ids = blocks.stream().map(ShuffleBlockId::name).toList();
            RecordingListener listener = new RecordingListener(false);
            try (RdmaBlockStoreClient client = client(e -> c.server.address())) {
                for (int from = 0; from < ids.size(); from += 400) {
                    fetch(client, c, ids.subList(from, Math.min(ids.size(), from + 400)), listener);
                }
                listener.awaitSettled(ids.size());
            }
            assertReceivedExactly(listener, ids);
            assertTrue(fallback.calls.isEmpty(), "nothing fell back: " + fallback.calls);
            int parts = (ids.size() + LocateProtocol.BLOCKS_PER_REQUEST - 1) / LocateProtocol.BLOCKS_PER_REQUEST;
            assertEquals(parts + 2, metrics.locateRequests().getCount(), "1200 blocks: LOCATE messages sent together, once;"
                    + " and one each to the task's other executors (exec-a, exec-b)");
            assertEquals(parts + 2, c.locatesAnswered.get(), "every executor's address is exec-c's here");
            assertEquals(ids.size(), metrics.fetchInlineBlocks().getCount(), "blocks of 100-400 bytes all came inline");
            awaitPoolIdle();
        }
    }

    @Test
    void testBuffersStayInTheRegisteredMemoryUntilSparkReleasesThem() throws Exception {
        RecordingListener listener = new RecordingListener(true);
        try (RdmaBlockStoreClient client = client(both())) {
            fetch(client, b, ids(b), listener);
            listener.awaitSettled(ids(b).size());
        }
        assertReceivedExactly(listener, ids(b));
        assertTrue(pool.inUseBytes() > 0, "retained buffers still hold their slices");
        listener.releaseHeld();
        assertEquals(0, pool.inUseBytes(), "the last release gives every slice back");
    }

    @Test
    void testUnknownExecutorAndNotServedBlocksFallBack() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        // exec-a's blocks are there, but the task also asks for one it did not list; exec-b has no address.
        String unlisted = new ShuffleBlockId(SHUFFLE, 10, 3).name();
        expected.putIfAbsent(unlisted, new byte[] {1, 2, 3});
        List<String> fromA = new ArrayList<>(ids(a));
        try (RdmaBlockStoreClient client = client(e -> e.equals(a.id) ? a.server.address() : null)) {
            fetch(client, b, ids(b), listener);
            List<String> secondCall = new ArrayList<>(fromA.subList(1, fromA.size()));
            fetch(client, a, fromA.subList(0, 1), listener);
            listener.awaitSettled(ids(b).size() + 1);
            secondCall.add(unlisted);
            fetch(client, a, secondCall, listener);
            listener.awaitSettled(ids(b).size() + fromA.size() + 1);
        }
        List<String> all = new ArrayList<>(ids(b));
        all.addAll(fromA);
        all.add(unlisted);
        assertReceivedExactly(listener, all);
        assertEquals(b.id, fallback.calls.get(0).get(0));
        assertEquals(ids(b), fallback.calls.get(0).subList(1, fallback.calls.get(0).size()), "b's blocks in one fallback call");
        List<String> fellBack = new ArrayList<>(ids(b));
        fellBack.add(unlisted);
        assertEquals(fellBack, fallback.blocks(), "exactly exec-b's blocks and the unlisted one fell back");
        assertEquals(fellBack.size(), metrics.fallbackFetch().getCount());
        assertEquals(fromA.size(), metrics.fetchRdmaBlocks().getCount());
        assertEquals(1, metrics.locateRequests().getCount());
        awaitPoolIdle();
    }

    @Test
    void testExecutorClosedMidwayFallsBackForTheRest() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        List<String> fromA = ids(a);
        try (RdmaBlockStoreClient client = client(both())) {
            fetch(client, a, fromA.subList(0, 2), listener);
            listener.awaitSettled(2);
            a.node.close(); // the executor's data node dies: READs of its blocks cannot succeed
            fetch(client, a, fromA.subList(2, fromA.size()), listener);
            listener.awaitSettled(fromA.size());
        }
        assertReceivedExactly(listener, fromA);
        assertEquals(fromA.subList(2, fromA.size()), fallback.blocks(), "exactly the blocks asked after the close fell back");
        assertEquals(1, fallback.calls.size(), "in one fallback call");
        assertEquals(fromA.size() - 2, metrics.fallbackFetch().getCount());
        assertEquals(2, metrics.fetchRdmaBlocks().getCount());
        awaitPoolIdle();
    }

    @Test
    void testFailedLocateFallsBackAndIsNotRepeated() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        List<String> fromB = ids(b);
        b.node.close(); // known address, nobody there: the LOCATE fails after the policy's attempts
        try (RdmaBlockStoreClient client = client(both())) {
            fetch(client, b, fromB.subList(0, 1), listener);
            listener.awaitSettled(1);
            fetch(client, b, fromB.subList(1, fromB.size()), listener);
            listener.awaitSettled(fromB.size());
            fetch(client, a, ids(a), listener);
            listener.awaitSettled(fromB.size() + ids(a).size());
        }
        List<String> all = new ArrayList<>(fromB);
        all.addAll(ids(a));
        assertReceivedExactly(listener, all);
        assertEquals(fromB, fallback.blocks(), "every exec-b block fell back, no exec-a block");
        assertEquals(2, fallback.calls.size(), "one fallback call per fetchBlocks call");
        assertEquals(2, metrics.locateRequests().getCount(), "the failed LOCATE is cached, not sent again; exec-a's went");
        assertEquals(ids(a).size(), metrics.fetchRdmaBlocks().getCount());
        awaitPoolIdle();
    }

    @Test
    void testCorruptedReadsAreRetriedThenFallBack() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        List<String> fromB = ids(b);
        try (RdmaBlockStoreClient client = client(both())) {
            readerNode.corruptReads(1); // one flipped bit: the policy's verified re-READ fixes it
            fetch(client, b, fromB.subList(0, 1), listener);
            listener.awaitSettled(1);
            // The next block's READ and its re-READ (one READ per block): it must not be delivered.
            readerNode.corruptReads(2);
            fetch(client, b, fromB.subList(1, 2), listener);
            listener.awaitSettled(2);
            fetch(client, b, fromB.subList(2, fromB.size()), listener);
            listener.awaitSettled(fromB.size());
        }
        assertReceivedExactly(listener, fromB);
        assertEquals(List.of(fromB.get(1)), fallback.blocks(), "only the twice-corrupted block fell back");
        assertEquals(1, metrics.fallbackFetch().getCount());
        assertTrue(metrics.count("rdma.checksum.failures") >= 3, "the corruptions were caught by CRC32C");
        awaitPoolIdle();
    }

    @Test
    void testReadsWithTheKeysOfAnEndedSessionLocateAgainAndArriveOverRdma() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        List<String> fromB = ids(b);
        try (RdmaBlockStoreClient client = client(both())) {
            fetch(client, b, fromB.subList(0, 1), listener); // LOCATEs every block of the task on b: their keys, in this session
            listener.awaitSettled(1);
            long locates = metrics.locateRequests().getCount();
            // The control channel breaks: its session ends on b, and with it every key b granted in it.
            readerNode.cutConnections(io.rdmaplane.rdma.provider.Lane.CONTROL);
            io.rdmaplane.rdma.policy.PeerConnection peer = policy.peer(b.server.address());
            Polling.waitUntil(() -> peer.state(io.rdmaplane.rdma.policy.TrafficClass.CONTROL)
                    == io.rdmaplane.rdma.policy.ChannelState.READY && peer.state(io.rdmaplane.rdma.policy.TrafficClass.DATA)
                    == io.rdmaplane.rdma.policy.ChannelState.READY && metrics.count("rdma.reconnects") >= 2,
                    Duration.ofSeconds(30), "both channels to b rebuilt in a new session");
            fetch(client, b, fromB.subList(1, fromB.size()), listener); // the cached descriptors' keys are refused
            listener.awaitSettled(fromB.size());
            assertTrue(metrics.locateRequests().getCount() > locates, "the refused blocks were LOCATEd again");
        }
        assertReceivedExactly(listener, fromB);
        assertEquals(List.of(), fallback.blocks(), "nothing fell back: new grants READ every block");
        assertEquals(fromB.size(), metrics.fetchRdmaBlocks().getCount());
        awaitPoolIdle();
    }

    @Test
    void testAKeyRefusedAgainAfterEveryNewLocateFallsBackAfterMaxRegrants() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        List<String> fromB = ids(b);
        try (LogCapture log = new LogCapture(RdmaBlockStoreClient.class);
             RdmaBlockStoreClient client = client(both())) {
            fetch(client, b, fromB.subList(0, 1), listener); // LOCATEs every block of the task on b
            listener.awaitSettled(1);
            long locates = b.locatesAnswered.get();
            readerNode.refuseReads(Integer.MAX_VALUE); // b refuses every key from now on, also freshly granted ones
            fetch(client, b, fromB.subList(1, 2), listener);
            listener.awaitSettled(2);
            readerNode.refuseReads(0);
            assertEquals(RdmaBlockStoreClient.MAX_REGRANTS, b.locatesAnswered.get() - locates,
                    "each refused READ but the last LOCATEd its block again, and no more often");
            // b refused the first READ; a later one may end refused before it reaches b (posted on a connection it
            // outlived, with the keys of an earlier one: PeerChannel fails such work at once), which counts the same.
            int refused = readerNode.readsRefused();
            assertTrue(refused >= 1 && refused <= RdmaBlockStoreClient.MAX_REGRANTS + 1, "READs b refused: " + refused);
            assertEquals(List.of(fromB.get(1)), fallback.blocks(), "the block whose key b kept refusing fell back");
            assertTrue(log.lines("WARN").stream().anyMatch(l -> l.contains(fromB.get(1)) && l.contains("its key was refused,"
                    + " also after " + RdmaBlockStoreClient.MAX_REGRANTS + " new LOCATEs")), "the fallback says why: " + log.lines("WARN"));
            fetch(client, b, fromB.subList(2, fromB.size()), listener); // the peer still serves the rest over RDMA
            listener.awaitSettled(fromB.size());
        }
        assertReceivedExactly(listener, fromB);
        assertEquals(fromB.size() - 1, metrics.fetchRdmaBlocks().getCount());
        awaitPoolIdle();
    }

    @Test
    void testAKeyRefusedOnceIsGrantedAnewAndArrivesOverRdma() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        List<String> fromB = ids(b);
        try (RdmaBlockStoreClient client = client(both())) {
            fetch(client, b, fromB.subList(0, 1), listener);
            listener.awaitSettled(1);
            long locates = b.locatesAnswered.get();
            readerNode.refuseReads(1); // b refuses the next block's READ, and no other
            fetch(client, b, fromB.subList(1, 2), listener);
            listener.awaitSettled(2);
            assertEquals(1, readerNode.readsRefused());
            long again = b.locatesAnswered.get() - locates;
            assertTrue(again >= 1 && again <= RdmaBlockStoreClient.MAX_REGRANTS, "new LOCATEs of the refused block: " + again);
        }
        assertReceivedExactly(listener, fromB.subList(0, 2));
        assertEquals(List.of(), fallback.blocks(), "a new grant READ the block");
        assertEquals(2, metrics.fetchRdmaBlocks().getCount());
        awaitPoolIdle();
    }

    @Test
    void testExhaustedPoolFallsBack() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        List<String> fromB = ids(b);
        try (RegisteredMemoryPool tiny = new RegisteredMemoryPool(readerNode, new PoolOptions(8L << 20, Duration.ZERO));
             RdmaBlockStoreClient client = client(both(), tiny)) {
            RegisteredBuffer hog = tiny.acquire(8 << 20); // the only chunk: nothing else can be handed out
            fetch(client, b, fromB.subList(0, 2), listener);
            listener.awaitSettled(2);
            hog.close();
            // One block at a time: a one-chunk pool holds slices of one size class at a time.
            for (int i = 2; i < fromB.size(); i++) {
                fetch(client, b, fromB.subList(i, i + 1), listener);
                listener.awaitSettled(i + 1);
                awaitIdle(tiny);
            }
            assertEquals(fromB.subList(0, 2), fallback.blocks(), "the blocks that found no buffer fell back, together");
            assertEquals(1, fallback.calls.size());
            assertEquals(fromB.size() - 2, metrics.fetchRdmaBlocks().getCount());
        }
        assertReceivedExactly(listener, fromB);
    }

    @Test
    void testBlocksSparkWantsOnDiskOrThatAreNotOfThisShuffleFallBack() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        String rdd = "rdd_3_4";
        String otherShuffle = new ShuffleBlockId(SHUFFLE + 1, 10, 1).name();
        expected.put(rdd, new byte[] {9});
        expected.put(otherShuffle, new byte[] {8, 8});
        List<String> fromA = ids(a);
        DownloadFileManager toDisk = new DownloadFileManager() {
            @Override
            public DownloadFile createTempFile(TransportConf conf) {
                throw new UnsupportedOperationException();
            }

            @Override
            public boolean registerTempFileToClean(DownloadFile file) {
                return false;
            }
        };
        try (RdmaBlockStoreClient client = client(both())) {
            client.fetchBlocks("h", 1, a.id, fromA.subList(0, 2).toArray(String[]::new), listener, toDisk);
            List<String> mixed = List.of(fromA.get(2), rdd, otherShuffle);
            fetch(client, a, mixed, listener);
            listener.awaitSettled(4);
        }
        assertReceivedExactly(listener, List.of(fromA.get(0), fromA.get(1), fromA.get(2), rdd, otherShuffle));
        assertEquals(2, fallback.calls.size());
        assertEquals(fromA.subList(0, 2), fallback.calls.get(0).subList(1, 3), "a download to disk goes to Spark whole");
        assertEquals(List.of(rdd, otherShuffle), fallback.calls.get(1).subList(1, 3), "only the foreign blocks fell back");
        assertEquals(1, metrics.fetchRdmaBlocks().getCount());
    }

    @Test
    void testSegmentOfAnotherBlockIsNotDelivered() throws Exception {
        segmentOfAnotherBlockIsNotDelivered(false);
    }

    @Test
    void testInlineBlockOfAnotherBlockIsNotDelivered() throws Exception {
        segmentOfAnotherBlockIsNotDelivered(true);
    }

    /**
     * The Arrow block of {@code payload} as block (SHUFFLE, map, reduce): inline, or registered on
     * {@code node} and served as one READ with no framing in the answer (all of it READ).
     */
    private static LocateProtocol.Location servedWhole(Node node, byte[] payload, long map, int reduce, boolean inline)
            throws Exception {
        Map<String, String> identity = Map.of(MapOutputStore.SHUFFLE_ID_KEY, Integer.toString(SHUFFLE), MapOutputStore.MAP_ID_KEY,
                Long.toString(map), MapOutputStore.PARTITION_ID_KEY, Integer.toString(reduce));
        java.io.ByteArrayOutputStream written = new java.io.ByteArrayOutputStream();
        try (org.apache.arrow.memory.BufferAllocator allocator = new org.apache.arrow.memory.RootAllocator()) {
            ArrowBlock.write(identity, ByteBuffer.wrap(payload), java.nio.channels.Channels.newChannel(written), allocator);
        }
        return servedWhole(node, written.toByteArray(), inline);
    }

    private static LocateProtocol.Location servedWhole(Node node, byte[] block, boolean inline) throws Exception {
        if (inline) {
            return new LocateProtocol.Inline(ByteBuffer.wrap(block));
        }
        MemoryRegion region = node.register(ByteBuffer.allocateDirect(block.length).put(block).flip(), Set.of(Access.REMOTE_READ));
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(block);
        return new LocateProtocol.Read(ByteBuffer.allocate(0), new RemoteBlock(region.address(), region.rkey(), block.length,
                (int) crc.getValue()), ByteBuffer.allocate(0));
    }

    private void segmentOfAnotherBlockIsNotDelivered(boolean inline) throws Exception {
        // A LOCATE server that answers with the segment of partition 1 for every block asked.
        try (Node node = ShuffleFixture.node(); MapOutputStore store = new MapOutputStore(node, 64L << 20, new ShuffleMetrics())) {
            long[] lengths = {0, 500, 700, 900};
            assertTrue(store.publish(SHUFFLE, 99, ShuffleFixture.dataFile(dir, SHUFFLE, 99, lengths), lengths));
            LocateProtocol.Location partitionOne = servedWhole(node, ShuffleFixture.blockBytes(SHUFFLE, 99, 1, 500), 99, 1, inline);
            PolicyServer liar = new PolicyServer(node, ShuffleFixture.fastOptions(), metrics.policy(), (peer, request) -> {
                LocateProtocol.Request asked = LocateProtocol.decodeRequest(request);
                if (partitionOne instanceof LocateProtocol.Read read) {
                    peer.grant(read.payload().rkey()); // the liar grants what it hands out, as a real server does
                }
                return LocateProtocol.encodeResponse(java.util.Collections.nCopies(asked.blocks().size(), partitionOne));
            }).start();
            liar.markReady();
            String one = new ShuffleBlockId(SHUFFLE, 99, 1).name();
            String two = new ShuffleBlockId(SHUFFLE, 99, 2).name();
            String three = new ShuffleBlockId(SHUFFLE, 99, 3).name();
            expected.put(one, ShuffleFixture.blockBytes(SHUFFLE, 99, 1, 500));
            expected.put(two, ShuffleFixture.blockBytes(SHUFFLE, 99, 2, 700));
            expected.put(three, ShuffleFixture.blockBytes(SHUFFLE, 99, 3, 900));
            blocksByExecutor.put("liar", List.of(new ShuffleBlockId(SHUFFLE, 99, 1), new ShuffleBlockId(SHUFFLE, 99, 2),
                    new ShuffleBlockId(SHUFFLE, 99, 3)));
            RecordingListener listener = new RecordingListener(false);
            try (RdmaBlockStoreClient client = client(e -> node.localAddress())) {
                client.fetchBlocks("h", 1, "liar", new String[] {one, two, three}, listener, null);
                listener.awaitSettled(3);
            }
            liar.close();
            assertReceivedExactly(listener, List.of(one, two, three));
            assertEquals(List.of(two, three), fallback.blocks(), "segments whose metadata names another block fell back");
            assertEquals(1, metrics.fetchRdmaBlocks().getCount());
            awaitPoolIdle();
        }
    }

    /**
     * Without a secret anyone may REGISTER first: here an attacker registered exec-b's id at its own
     * data server. The reducer uses a LOOKUP answer only on the host Spark knows the executor by
     * (its BlockManagerId), so exec-b's blocks come via Spark's transfer and the attacker is never asked.
     */
    @Test
    void testALookupAnswerThatDisagreesWithSparksHostIsNotUsedAndThatExecutorFallsBack() throws Exception {
        PolicyOptions options = ShuffleFixture.fastOptions();
        try (Executor attacker = new Executor("attacker", 8L << 20);
             ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), options, new PolicyMetrics());
             RegistryClient registrant = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), options, new PolicyMetrics(),
                     registry.address());
             RegistryClient reducer = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), options, new PolicyMetrics(),
                     registry.address())) {
            registrant.register(a.id, a.server.address());
            registrant.register(b.id, attacker.server.address()); // the attacker came first
            // Spark's view: exec-a on this host, exec-b on another one.
            Map<String, InetSocketAddress> addresses = reducer.lookup(Map.of(a.id, "127.0.0.1", b.id, "192.0.2.7"));
            RecordingListener listener = new RecordingListener(false);
            try (RdmaBlockStoreClient client = client(addresses::get)) {
                fetch(client, a, ids(a), listener);
                fetch(client, b, ids(b), listener);
                listener.awaitSettled(ids(a).size() + ids(b).size());
            }
            List<String> all = new ArrayList<>(ids(a));
            all.addAll(ids(b));
            assertReceivedExactly(listener, all);
            assertEquals(0, attacker.locatesAnswered.get(), "the attacker's server was never asked");
            assertEquals(ids(b), fallback.blocks(), "exactly exec-b's blocks came via Spark's transfer");
            assertEquals(ids(a).size(), metrics.fetchRdmaBlocks().getCount(), "exec-a's came over RDMA");
            awaitPoolIdle();
        }
    }

    /**
     * A hostile peer serves a block whose Arrow schema nests itself: it was a StackOverflowError in the
     * decoder that nobody caught, and the task waited forever. It is a corrupt block now: it falls back.
     */
    @Test
    void testASelfNestingSchemaFromAHostilePeerFallsBack() throws Exception {
        selfNestingSchemaFallsBack(false);
    }

    @Test
    void testASelfNestingSchemaInlineFromAHostilePeerFallsBack() throws Exception {
        selfNestingSchemaFallsBack(true);
    }

    private void selfNestingSchemaFallsBack(boolean inline) throws Exception {
        String hostile = new ShuffleBlockId(SHUFFLE, 99, 1).name();
        byte[] payload = ShuffleFixture.blockBytes(SHUFFLE, 99, 1, 3000);
        expected.put(hostile, payload);
        Map<String, String> identity = Map.of(MapOutputStore.SHUFFLE_ID_KEY, Integer.toString(SHUFFLE), MapOutputStore.MAP_ID_KEY,
                "99", MapOutputStore.PARTITION_ID_KEY, "1");
        java.io.ByteArrayOutputStream written = new java.io.ByteArrayOutputStream();
        try (org.apache.arrow.memory.BufferAllocator allocator = new org.apache.arrow.memory.RootAllocator()) {
            ArrowBlock.write(identity, ByteBuffer.wrap(payload), java.nio.channels.Channels.newChannel(written), allocator);
        }
        byte[] block = HostileSchema.replaceSchema(written.toByteArray(), new HostileSchema().selfNesting().message(identity, payload));
        try (Node node = ShuffleFixture.node()) {
            LocateProtocol.Location served = servedWhole(node, block, inline);
            PolicyServer attacker = new PolicyServer(node, ShuffleFixture.fastOptions(), metrics.policy(), (peer, request) -> {
                LocateProtocol.Request asked = LocateProtocol.decodeRequest(request);
                if (served instanceof LocateProtocol.Read read) {
                    peer.grant(read.payload().rkey()); // READ for real, so the decoder meets the hostile schema
                }
                return LocateProtocol.encodeResponse(java.util.Collections.nCopies(asked.blocks().size(), served));
            }).start();
            attacker.markReady();
            blocksByExecutor.put("attacker", List.of(new ShuffleBlockId(SHUFFLE, 99, 1)));
            RecordingListener listener = new RecordingListener(false);
            try (RdmaBlockStoreClient client = client(e -> node.localAddress())) {
                client.fetchBlocks("h", 1, "attacker", new String[] {hostile}, listener, null);
                listener.awaitSettled(1);
            }
            attacker.close();
            assertReceivedExactly(listener, List.of(hostile));
            assertEquals(List.of(hostile), fallback.blocks(), "the hostile block came through Spark's transfer");
            assertEquals(0, metrics.fetchRdmaBlocks().getCount());
            awaitPoolIdle();
        }
    }

    /**
     * A decode that throws an Error still settles its block, as a fallback: a StackOverflowError and
     * a LinkageError fall back; so does an OutOfMemoryError, which is rethrown after its block settled.
     */
    @Test
    void testABlockWhoseDecodeThrowsAnErrorFallsBackAndTheFetchCompletes() throws Exception {
        Map<Long, Throwable> failures = Map.of(20L, new StackOverflowError("nested too deep"), 21L,
                new OutOfMemoryError("decoding"), 10L, new NoClassDefFoundError("org/apache/arrow/flatbuf/Message"));
        RdmaBlockStoreClient.BlockDecoder failing = segment -> {
            ArrowBlock.Block block = ArrowBlock.read(segment, false);
            long map = Long.parseLong(block.metadata().get(MapOutputStore.MAP_ID_KEY));
            Throwable failure = "1".equals(block.metadata().get(MapOutputStore.PARTITION_ID_KEY)) ? failures.get(map) : null;
            if (failure instanceof Error error) {
                throw error;
            }
            return block;
        };
        List<String> all = new ArrayList<>(ids(a));
        all.addAll(ids(b));
        List<String> broken = List.of(new ShuffleBlockId(SHUFFLE, 10, 1).name(), new ShuffleBlockId(SHUFFLE, 20, 1).name(),
                new ShuffleBlockId(SHUFFLE, 21, 1).name());
        RecordingListener listener = new RecordingListener(false);
        try (RdmaBlockStoreClient client = new RdmaBlockStoreClient(policy, pool, readerNode, fallback, both(), SHUFFLE,
                blocksByExecutor, metrics, failing)) {
            fetch(client, a, ids(a), listener);
            fetch(client, b, ids(b), listener);
            listener.awaitSettled(all.size());
        }
        assertReceivedExactly(listener, all);
        assertEquals(new java.util.TreeSet<>(broken), new java.util.TreeSet<>(fallback.blocks()),
                "exactly the blocks whose decode threw fell back");
        assertEquals(all.size() - broken.size(), metrics.fetchRdmaBlocks().getCount());
        awaitPoolIdle();
    }

    @Test
    void testMalformedLocateIsAnsweredWithAnErrorAndTheServerGoesOn() throws Exception {
        ExecutionException e = assertThrows(ExecutionException.class, () -> policy.peer(a.server.address())
                .request(ByteBuffer.wrap(new byte[] {LocateProtocol.VERSION, (byte) LocateProtocol.Type.LOCATE.wireId(), 0, 0}))
                .get(10, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof PeerUnavailableException, e.toString());
        assertTrue(e.getCause().getMessage().contains("shuffleId"), "the error names the field: " + e.getCause().getMessage());
        RecordingListener listener = new RecordingListener(false);
        try (RdmaBlockStoreClient client = client(both())) {
            fetch(client, a, ids(a), listener);
            listener.awaitSettled(ids(a).size());
        }
        assertReceivedExactly(listener, ids(a));
        assertTrue(fallback.calls.isEmpty());
    }

    @Test
    void testAfterCloseEveryBlockGoesToSparkAndSparkClientStaysOpen() throws Exception {
        RecordingListener listener = new RecordingListener(false);
        RdmaBlockStoreClient client = client(both());
        client.close();
        fetch(client, a, ids(a), listener);
        listener.awaitSettled(ids(a).size());
        assertReceivedExactly(listener, ids(a));
        assertEquals(ids(a), fallback.blocks());
        assertFalse(fallback.closed);
        if (metrics.locateRequests().getCount() != 0) {
            fail("a closed client sends no LOCATE");
        }
    }
}

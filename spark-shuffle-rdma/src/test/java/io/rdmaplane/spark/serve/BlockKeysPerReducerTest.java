package io.rdmaplane.spark.serve;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.policy.ServerLimits;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.verbs.VerbsProvider;
import io.rdmaplane.rdma.testing.RdmaVmOnly;
import io.rdmaplane.rdma.testing.TestNodes;
import io.rdmaplane.spark.ShuffleFixture;
import io.rdmaplane.spark.ShuffleMetrics;
import io.rdmaplane.spark.serve.LocateProtocol.BlockRef;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A reducer's READ key for a map output, copied or mapped, works for that reducer only, and for the block
 * it was located for only: another reducer's authenticated data channel READs nothing with it, nor with the
 * region's own rkey, and the key READs no other byte of the map output. On tcp the key is one of its own
 * per grant, which the provider checks (channel, range) on every READ; on verbs (in the Soft-RoCE VM,
 * skipped loudly elsewhere) the LOCATE answer hands out a registration of the block's bytes in the asking
 * reducer's key domain, the protection domain its data QPs are in: the device checks both.
 */
class BlockKeysPerReducerTest {
    private static final int SHUFFLE = 5;
    private static final long OWNERS_MAP = 21;
    private static final long OTHER_MAP = 22;
    private static final long[] LENGTHS = {300, 40_000, 7000};
    private static final int WAIT = 60;

    enum Transport {
        TCP {
            @Override
            Node node(boolean server) throws TransportException {
                return TestNodes.tcp();
            }

            @Override
            PolicyOptions policy() {
                return ShuffleFixture.fastOptions();
            }
        },
        VERBS {
            @Override
            Node node(boolean server) throws TransportException {
                RdmaVmOnly.assumeInVm();
                String address = System.getenv(server ? "RDMA_VM_ADDR_A" : "RDMA_VM_ADDR_B");
                // The VM's guest is ~25x slower than the host: generous timeouts.
                return VerbsProvider.INSTANCE.createNode(
                        new NodeOptions(new InetSocketAddress(address, 0), 64 << 10, Duration.ofSeconds(10), 256));
            }

            @Override
            PolicyOptions policy() {
                return ShuffleFixture.fastOptions().withTimeouts(Duration.ofSeconds(2), Duration.ofSeconds(20), Duration.ofSeconds(10));
            }
        };

        abstract Node node(boolean server) throws TransportException;

        abstract PolicyOptions policy();
    }

    private static final byte[] SECRET = "block-keys-per-reducer-secret".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    @TempDir
    Path dir;
    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    private <T extends AutoCloseable> T keep(T closeable) {
        open.add(closeable);
        return closeable;
    }

    /** One reducer: its own node and policy client, so its own control session and data channel. */
    private final class Reducer {
        final Node node;
        final PolicyClient client;

        /** How often its data channel became READY (a refused READ breaks it; it comes back on a new channel). */
        final java.util.concurrent.atomic.AtomicInteger dataReady = new java.util.concurrent.atomic.AtomicInteger();

        Reducer(Transport on) throws TransportException {
            node = keep(on.node(false));
            client = keep(new PolicyClient(node, on.policy().withSecret(SECRET), new ShuffleMetrics().policy(),
                    new PolicyClient.Listener() {
                        @Override
                        public void stateChanged(InetSocketAddress peer, io.rdmaplane.rdma.policy.TrafficClass trafficClass,
                                                 io.rdmaplane.rdma.policy.ChannelState from, io.rdmaplane.rdma.policy.ChannelState to) {
                            if (trafficClass == io.rdmaplane.rdma.policy.TrafficClass.DATA
                                    && to == io.rdmaplane.rdma.policy.ChannelState.READY) {
                                dataReady.incrementAndGet();
                            }
                        }
                    }));
        }

        /** Waits until the data channel a refused READ broke (READY {@code before} times until then) is READY again. */
        void awaitDataChannelAfter(int before) {
            io.rdmaplane.rdma.testing.Polling.waitUntil(() -> dataReady.get() > before, Duration.ofSeconds(WAIT),
                    "the reducer's next data channel READY");
        }

        LocateProtocol.Read locate(ShuffleBlockServer server, long mapId, int reduceId) throws Exception {
            List<BlockRef> refs = List.of(new BlockRef(mapId, reduceId));
            ByteBuffer answer = client.peer(server.address())
                    .request(LocateProtocol.encodeRequest(new LocateProtocol.Request(SHUFFLE, refs))).get(WAIT, TimeUnit.SECONDS);
            return assertInstanceOf(LocateProtocol.Read.class, LocateProtocol.decodeResponse(answer, 1).get(0));
        }

        /** READs {@code block} over this reducer's data channel: its bytes, or the failure (no byte of it landed). */
        byte[] read(ShuffleBlockServer server, RemoteBlock block) throws Exception {
            Landing landing = attempt(server, block);
            if (landing.failure != null) {
                assertArrayEquals(new byte[landing.bytes.length], landing.bytes, "no byte of the block reached the refused reducer");
                throw landing.failure;
            }
            return landing.bytes;
        }

        private Landing attempt(ShuffleBlockServer server, RemoteBlock block) throws Exception {
            try (MemoryRegion landing = node.register(ByteBuffer.allocateDirect(block.length()), Set.of(Access.LOCAL_WRITE))) {
                try {
                    client.peer(server.address()).read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
                    return new Landing(bytes(landing.buffer()), null);
                } catch (ExecutionException e) {
                    return new Landing(bytes(landing.buffer()), e);
                }
            }
        }
    }

    /** What a READ left in its landing buffer, and its failure (null when it was served). */
    private record Landing(byte[] bytes, ExecutionException failure) {
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void aReducersKeyReadsNothingOnAnotherReducersChannel(Transport on) throws Exception {
        for (boolean mapFiles : new boolean[] {false, true}) {
            aReducersKeyReadsNothingOnAnotherReducersChannel(on, mapFiles);
        }
    }

    private void aReducersKeyReadsNothingOnAnotherReducersChannel(Transport on, boolean mapFiles) throws Exception {
        Node serverNode = keep(on.node(true));
        MapOutputStore store = keep(new MapOutputStore(serverNode, 16L << 20, new ShuffleMetrics(), mapFiles));
        ShuffleBlockServer server = keep(new ShuffleBlockServer(serverNode, on.policy().withSecret(SECRET), ServerLimits.defaults(),
                new ShuffleMetrics().policy(), store, 0, LocateProtocol.MAX_RESPONSE_BYTES).start());
        assertTrue(store.publish(SHUFFLE, OWNERS_MAP, ShuffleFixture.dataFile(dir, SHUFFLE, OWNERS_MAP, LENGTHS), LENGTHS));
        assertTrue(store.publish(SHUFFLE, OTHER_MAP, ShuffleFixture.dataFile(dir, SHUFFLE, OTHER_MAP, LENGTHS), LENGTHS));
        if (on == Transport.VERBS && !serverNode.keyBinding().startsWith("per peer")) {
            System.err.println("SKIPPED (loudly): keys are " + serverNode.keyBinding() + " on this device, not bound per peer");
            Assumptions.abort("keys are " + serverNode.keyBinding());
        }
        System.err.println("block keys: " + store.keyBinding());

        Reducer owner = new Reducer(on);
        Reducer other = new Reducer(on);
        Reducer third = new Reducer(on);
        LocateProtocol.Read owners = owner.locate(server, OWNERS_MAP, 1);
        // The others are reducers of the same shuffle, authenticated, with data channels and grants of their own.
        LocateProtocol.Read others = other.locate(server, OTHER_MAP, 1);
        third.locate(server, OTHER_MAP, 2);
        assertEquals(others.payload().crc32c(), crc(other.read(server, others.payload())), "a reducer READs what it was granted");
        assertEquals(owners.payload().crc32c(), crc(owner.read(server, owners.payload())), "the owner READs its block with its key");

        MemoryRegion region = store.block(SHUFFLE, OWNERS_MAP, 1).region();
        if (on == Transport.VERBS) {
            assertNotEquals(region.rkey(), owners.payload().rkey(), "on verbs the key handed out is the grant's, not the MR's");
        }
        assertThrows(ExecutionException.class, () -> other.read(server, owners.payload()),
                "another reducer's channel READs nothing with the owner's key");
        RemoteBlock byRegionKey = new RemoteBlock(owners.payload().address(), region.rkey(), owners.payload().length(),
                owners.payload().crc32c());
        assertThrows(ExecutionException.class, () -> third.read(server, byRegionKey),
                "another reducer's channel READs nothing with the region's own rkey");
    }

    /** A server with OWNERS_MAP published as a copy (memory registered for grants). */
    private ShuffleBlockServer serverWithCopiedOutput(Transport on) throws Exception {
        Node serverNode = keep(on.node(true));
        MapOutputStore store = keep(new MapOutputStore(serverNode, 16L << 20, new ShuffleMetrics(), false)); // copies
        ShuffleBlockServer server = keep(new ShuffleBlockServer(serverNode, on.policy().withSecret(SECRET), ServerLimits.defaults(),
                new ShuffleMetrics().policy(), store, 0, LocateProtocol.MAX_RESPONSE_BYTES).start());
        assertTrue(store.publish(SHUFFLE, OWNERS_MAP, ShuffleFixture.dataFile(dir, SHUFFLE, OWNERS_MAP, LENGTHS), LENGTHS));
        this.store = store;
        if (on == Transport.VERBS && !serverNode.keyBinding().startsWith("per peer")) {
            System.err.println("SKIPPED (loudly): keys are " + serverNode.keyBinding() + " on this device, not bound per peer");
            Assumptions.abort("keys are " + serverNode.keyBinding());
        }
        return server;
    }

    private MapOutputStore store;

    @ParameterizedTest
    @EnumSource(Transport.class)
    void aReducersKeyReadsTheBlockItWasLocatedForAndNoOtherByteOfTheMapOutput(Transport on) throws Exception {
        ShuffleBlockServer server = serverWithCopiedOutput(on);
        Reducer owner = new Reducer(on);
        RemoteBlock granted = owner.locate(server, OWNERS_MAP, 1).payload();
        assertEquals(granted.crc32c(), crc(owner.read(server, granted)), "the reducer READs the block it was located for");

        RemoteBlock before = store.block(SHUFFLE, OWNERS_MAP, 0).remote();
        RemoteBlock after = store.block(SHUFFLE, OWNERS_MAP, 2).remote();
        assertEquals(before.rkey(), after.rkey(), "the three partitions are one region (one copied map output)");
        // Each refused READ breaks the reducer's data channel, and the keys bound to it go: a fresh LOCATE
        // (a fresh key on the next data channel) before each, so each READ is refused for its range alone.
        List<RemoteBlock> outside = List.of(
                new RemoteBlock(before.address(), 0, before.length(), before.crc32c()), // the partition before
                new RemoteBlock(after.address(), 0, after.length(), after.crc32c()), // the partition after
                new RemoteBlock(granted.address(), 0, granted.length() + 1, 0), // one byte past the block
                new RemoteBlock(granted.address() - 1, 0, 16, 0), // one byte before it
                new RemoteBlock(before.address(), 0, before.length() + granted.length() + after.length(), 0)); // all of it
        for (RemoteBlock asked : outside) {
            RemoteBlock key = owner.locate(server, OWNERS_MAP, 1).payload();
            RemoteBlock withKey = new RemoteBlock(asked.address(), key.rkey(), asked.length(), asked.crc32c());
            int ready = owner.dataReady.get();
            // verbs: the key is a registration of exactly the block's bytes, which the device checks (not a window,
            // which Soft-RoCE checked against its MR only)
            assertThrows(ExecutionException.class, () -> owner.read(server, withKey),
                    "the key of partition 1 READs nothing outside it: " + withKey);
            owner.awaitDataChannelAfter(ready); // the next LOCATE's key is bound to the next data channel
        }
        RemoteBlock again = owner.locate(server, OWNERS_MAP, 1).payload();
        assertEquals(again.crc32c(), crc(owner.read(server, again)), "and its own block still READs with a fresh key");
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void everyGrantOfABlockHasAKeyOfItsOwnNeverTheRegionsRkey(Transport on) throws Exception {
        ShuffleBlockServer server = serverWithCopiedOutput(on);
        Reducer owner = new Reducer(on);
        Reducer other = new Reducer(on);
        RemoteBlock owners = owner.locate(server, OWNERS_MAP, 1).payload();
        RemoteBlock others = other.locate(server, OWNERS_MAP, 1).payload(); // the same block, granted to another reducer
        RemoteBlock ownersNext = owner.locate(server, OWNERS_MAP, 2).payload(); // another block, to the same reducer
        int regionKey = store.block(SHUFFLE, OWNERS_MAP, 1).region().rkey();
        assertNotEquals(regionKey, owners.rkey(), "the key handed out is the grant's, not the region's");
        assertNotEquals(owners.rkey(), others.rkey(), "two reducers of one block get two keys");
        assertNotEquals(owners.rkey(), ownersNext.rkey(), "two blocks of one map output get two keys");
        assertEquals(owners.crc32c(), crc(owner.read(server, owners)));
        assertEquals(others.crc32c(), crc(other.read(server, others)));
        assertEquals(ownersNext.crc32c(), crc(owner.read(server, ownersNext)));
        assertThrows(ExecutionException.class, () -> other.read(server, owners),
                "a key READs on the channel of the reducer it was granted to only");
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.duplicate().get(out);
        return out;
    }

    private static int crc(byte[] bytes) {
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(bytes);
        return (int) crc.getValue();
    }
}

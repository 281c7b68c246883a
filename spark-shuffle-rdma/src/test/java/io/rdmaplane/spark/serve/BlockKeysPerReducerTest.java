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
 * A reducer's READ key for a copied map output works for that reducer only: another reducer's
 * authenticated data channel READs nothing with it, nor with the region's own rkey. On tcp the
 * server checks each READ against the channel's session grants; on verbs (in the Soft-RoCE VM,
 * skipped loudly elsewhere) the LOCATE answer hands out a memory window bound to the asking
 * reducer's data QP. Mapped outputs (read-only file mappings) keep per-region keys on verbs, and the
 * store says so ({@link MapOutputStore#keyBinding}).
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

        Reducer(Transport on) throws TransportException {
            node = keep(on.node(false));
            client = keep(new PolicyClient(node, on.policy().withSecret(SECRET), new ShuffleMetrics().policy()));
        }

        LocateProtocol.Read locate(ShuffleBlockServer server, long mapId, int reduceId) throws Exception {
            List<BlockRef> refs = List.of(new BlockRef(mapId, reduceId));
            ByteBuffer answer = client.peer(server.address())
                    .request(LocateProtocol.encodeRequest(new LocateProtocol.Request(SHUFFLE, refs))).get(WAIT, TimeUnit.SECONDS);
            return assertInstanceOf(LocateProtocol.Read.class, LocateProtocol.decodeResponse(answer, 1).get(0));
        }

        /** READs {@code block} over this reducer's data channel: its bytes, or the failure. */
        byte[] read(ShuffleBlockServer server, RemoteBlock block) throws Exception {
            try (MemoryRegion landing = node.register(ByteBuffer.allocateDirect(block.length()), Set.of(Access.LOCAL_WRITE))) {
                try {
                    client.peer(server.address()).read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    byte[] seen = bytes(landing.buffer());
                    assertArrayEquals(new byte[seen.length], seen, "no byte of the block reached the refused reducer");
                    throw e;
                }
                return bytes(landing.buffer());
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void aReducersKeyReadsNothingOnAnotherReducersChannel(Transport on) throws Exception {
        Node serverNode = keep(on.node(true));
        MapOutputStore store = keep(new MapOutputStore(serverNode, 16L << 20, new ShuffleMetrics(), false)); // copies
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
            assertNotEquals(region.rkey(), owners.payload().rkey(), "on verbs the key handed out is a window's, not the MR's");
        }
        assertThrows(ExecutionException.class, () -> other.read(server, owners.payload()),
                "another reducer's channel READs nothing with the owner's key");
        RemoteBlock byRegionKey = new RemoteBlock(owners.payload().address(), region.rkey(), owners.payload().length(),
                owners.payload().crc32c());
        assertThrows(ExecutionException.class, () -> third.read(server, byRegionKey),
                "another reducer's channel READs nothing with the region's own rkey");
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

package io.rdmaplane.spark.serve;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.format.ArrowBlock;
import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.ServerLimits;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.spark.ShuffleFixture;
import io.rdmaplane.spark.ShuffleMetrics;
import io.rdmaplane.spark.serve.LocateProtocol.BlockRef;
import io.rdmaplane.spark.serve.LocateProtocol.Location;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a LOCATE answer holds, over tcp on loopback: each block as its framing plus ONE READ of its
 * payload, which together are byte for byte the Arrow block {@link ArrowBlock#write} makes (from a
 * file mapping and from a copy alike); blocks below the inline threshold whole in the answer; and
 * an answer never over its budget (the rest DEFERRED, located by the next LOCATE).
 */
class ShuffleBlockServerTest {
    private static final int SHUFFLE = 3;
    private static final long MAP = 11;
    private static final long[] LENGTHS = {100, 1500, 0, 70_000, 5000, 1};

    @TempDir
    Path dir;
    private Node readerNode;
    private PolicyClient reader;

    @BeforeEach
    void setUp() throws Exception {
        readerNode = ShuffleFixture.node();
        reader = new PolicyClient(readerNode, ShuffleFixture.fastOptions(), new ShuffleMetrics().policy());
    }

    @AfterEach
    void tearDown() {
        reader.close();
        readerNode.close();
    }

    /** A serving node, store and server with the given inline threshold and answer budget. */
    private final class Served implements AutoCloseable {
        final Node node;
        final MapOutputStore store;
        final ShuffleBlockServer server;

        Served(boolean mapFiles, int inlineThreshold, int budget, long[] lengths) throws Exception {
            node = ShuffleFixture.node();
            store = new MapOutputStore(node, 64L << 20, new ShuffleMetrics(), mapFiles);
            server = new ShuffleBlockServer(node, ShuffleFixture.fastOptions(), ServerLimits.defaults(),
                    new ShuffleMetrics().policy(), store, inlineThreshold, budget).start();
            assertTrue(store.publish(SHUFFLE, MAP, ShuffleFixture.dataFile(dir, SHUFFLE, MAP, lengths), lengths));
        }

        List<Location> locate(List<BlockRef> blocks) throws Exception {
            ByteBuffer answer = reader.peer(server.address())
                    .request(LocateProtocol.encodeRequest(new LocateProtocol.Request(SHUFFLE, blocks))).get(30, TimeUnit.SECONDS);
            return LocateProtocol.decodeResponse(answer, blocks.size());
        }

        /** The block as a reader puts it together: header, the one READ of its payload, trailer. */
        byte[] gather(LocateProtocol.Read read) throws Exception {
            PeerConnection peer = reader.peer(server.address());
            try (MemoryRegion landing = readerNode.register(ByteBuffer.allocateDirect(read.payload().length()),
                    Set.of(Access.LOCAL_WRITE))) {
                peer.read(read.payload(), landing, 0).get(30, TimeUnit.SECONDS); // granted by the LOCATE
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                out.write(bytes(read.header()));
                out.write(bytes(landing.buffer()));
                out.write(bytes(read.trailer()));
                return out.toByteArray();
            }
        }

        @Override
        public void close() {
            server.close();
            store.close();
            node.close();
        }
    }

    private static List<BlockRef> all(long[] lengths) {
        List<BlockRef> refs = new ArrayList<>();
        for (int r = 0; r < lengths.length; r++) {
            refs.add(new BlockRef(MAP, r));
        }
        return refs;
    }

    /** The Arrow block ArrowBlock.write makes of partition r: what every answer must add up to. */
    private static byte[] written(int r, long length) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (BufferAllocator allocator = new RootAllocator()) {
            ArrowBlock.write(MapOutputStore.metadata(SHUFFLE, MAP, r),
                    ByteBuffer.wrap(ShuffleFixture.blockBytes(SHUFFLE, MAP, r, length)), Channels.newChannel(out), allocator);
        }
        return out.toByteArray();
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] bytes = new byte[buffer.remaining()];
        buffer.duplicate().get(bytes);
        return bytes;
    }

    @Test
    void testEveryBlockIsItsFramingAndOneReadThatMakeTheArrowBlock() throws Exception {
        for (boolean mapFiles : new boolean[] {true, false}) {
            try (Served served = new Served(mapFiles, 0, LocateProtocol.MAX_RESPONSE_BYTES, LENGTHS)) {
                List<Location> answer = served.locate(all(LENGTHS));
                for (int r = 0; r < LENGTHS.length; r++) {
                    String where = (mapFiles ? "mapped" : "copied") + " partition " + r;
                    if (LENGTHS[r] == 0) {
                        assertEquals(LocateProtocol.NOT_SERVED, answer.get(r), where);
                        continue;
                    }
                    LocateProtocol.Read read = assertInstanceOf(LocateProtocol.Read.class, answer.get(r), where);
                    if (mapFiles) {
                        assertEquals(LENGTHS[r], read.payload().length(), where + ": the READ is the payload alone");
                        assertTrue(read.header().remaining() > 0 && read.trailer().remaining() > 0, where + ": framing in the answer");
                    }
                    assertArrayEquals(written(r, LENGTHS[r]), served.gather(read), where + ": exactly ArrowBlock.write's bytes");
                    assertEquals(read.blockLength(), written(r, LENGTHS[r]).length, where);
                }
            }
        }
    }

    @Test
    void testAPeersGrantsGoWithTheShufflesRegionsNotOnlyWithThePeer() throws Exception {
        for (boolean mapFiles : new boolean[] {true, false}) {
            try (Served served = new Served(mapFiles, 0, LocateProtocol.MAX_RESPONSE_BYTES, LENGTHS)) {
                List<Location> answer = served.locate(all(LENGTHS));
                var grants = served.server.grantsInSession(reader.instance(served.server.address())); // LOCATE grants per session
                assertTrue(grants.size() > 0, "the LOCATE granted its regions to the reader");
                assertInstanceOf(LocateProtocol.Read.class, answer.get(3));
                served.store.removeShuffle(SHUFFLE); // its regions are deregistered; the reader stays connected
                String kind = mapFiles ? "mapped" : "copied";
                io.rdmaplane.rdma.testing.Polling.waitUntil(() -> grants.size() == 0, java.time.Duration.ofSeconds(30),
                        () -> kind + ": the grants of the deregistered regions dropped, " + grants.size() + " left");
            }
        }
    }

    @Test
    void testBlocksBelowTheThresholdComeWholeInTheAnswer() throws Exception {
        int threshold = written(4, LENGTHS[4]).length + 1; // partition 4 and smaller ones inline, 70 000 bytes not
        for (boolean mapFiles : new boolean[] {true, false}) {
            try (Served served = new Served(mapFiles, threshold, LocateProtocol.MAX_RESPONSE_BYTES, LENGTHS)) {
                List<Location> answer = served.locate(all(LENGTHS));
                for (int r : new int[] {0, 1, 4, 5}) {
                    LocateProtocol.Inline inline = assertInstanceOf(LocateProtocol.Inline.class, answer.get(r), "partition " + r);
                    assertArrayEquals(written(r, LENGTHS[r]), bytes(inline.block()), "partition " + r + " inline is the Arrow block");
                }
                assertArrayEquals(written(3, LENGTHS[3]), served.gather(assertInstanceOf(LocateProtocol.Read.class, answer.get(3))));
                assertEquals(LocateProtocol.NOT_SERVED, answer.get(2));
            }
        }
    }

    @Test
    void testAnAnswerStaysWithinItsBudgetAndDefersTheRest() throws Exception {
        long[] lengths = new long[40];
        java.util.Arrays.fill(lengths, 300);
        int budget = 8 << 10;
        try (Served served = new Served(true, 4096, budget, lengths)) {
            List<BlockRef> asked = all(lengths);
            ByteBuffer raw = reader.peer(served.server.address())
                    .request(LocateProtocol.encodeRequest(new LocateProtocol.Request(SHUFFLE, asked))).get(30, TimeUnit.SECONDS);
            assertTrue(raw.remaining() <= budget, raw.remaining() + " bytes is over the budget of " + budget);
            List<Location> answer = LocateProtocol.decodeResponse(raw, asked.size());
            int deferred = 0;
            for (int r = 0; r < answer.size(); r++) {
                if (answer.get(r) instanceof LocateProtocol.Deferred) {
                    deferred++;
                } else {
                    assertEquals(0, deferred, "only the last blocks are deferred (block " + r + ")");
                    byte[] block = answer.get(r) instanceof LocateProtocol.Inline inline ? bytes(inline.block())
                            : served.gather((LocateProtocol.Read) answer.get(r));
                    assertArrayEquals(written(r, 300), block, "block " + r);
                }
            }
            assertTrue(deferred > 0 && deferred < asked.size(), deferred + " of " + asked.size() + " deferred");
            List<Location> rest = served.locate(asked.subList(asked.size() - deferred, asked.size()));
            assertTrue(rest.stream().anyMatch(l -> !(l instanceof LocateProtocol.Deferred)), "the next LOCATE locates more");
        }
    }
}

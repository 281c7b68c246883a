package io.rdmaplane.hdfs.datanode;

import static io.rdmaplane.hdfs.datanode.FakeDataNode.POOL;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.BlockProtocol;
import io.rdmaplane.hdfs.BlockProtocol.Request;
import io.rdmaplane.hdfs.BlockProtocol.Response;
import io.rdmaplane.hdfs.BlockProtocol.Status;
import io.rdmaplane.hdfs.datanode.FakeDataNode.FakeReplica;
import io.rdmaplane.rdma.policy.PolicyServer.PeerIdentity;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.tcp.TcpNode;
import io.rdmaplane.rdma.testing.Polling;
import io.rdmaplane.rdma.testing.TestNodes;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockPoolTokenSecretManager;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenSecretManager;
import org.apache.hadoop.hdfs.server.common.HdfsServerConstants.ReplicaState;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.io.WritableUtils;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.util.DataChecksum;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The DataNode's block service on a fake DataNode (replicas as real block and meta files) and the
 * tcp provider: each answer's range, checksums and rkey are checked by READing them from another
 * node, as a client would.
 */
class BlockServiceTest {
    private static final long GS = 1001;
    private static final int LENGTH = 10_000;
    private static final int BPC = 512;
    private static final long LEASE = TimeUnit.HOURS.toNanos(1);
    private static final PeerIdentity PEER = new PeerIdentity(UUID.randomUUID(), new InetSocketAddress("127.0.0.1", 4242));

    @TempDir
    Path dir;
    private FakeDataNode dataNode;
    private TcpNode server;
    private TcpNode client;
    private Channel channel;
    private BlockService service;

    @BeforeEach
    void setUp() throws Exception {
        dataNode = new FakeDataNode(dir);
        server = TestNodes.tcp();
        server.listen(accepted -> new ChannelHandler() { });
        client = TestNodes.tcp();
        channel = client.connect(server.localAddress(), 16, new ChannelHandler() { }).get(30, TimeUnit.SECONDS);
        service = new BlockService(dataNode, server, 64L << 20, LEASE);
    }

    @AfterEach
    void tearDown() {
        service.close();
        client.close();
        server.close();
    }

    private static Request request(long blockId, long generationStamp, long offset, int length, int capacity,
                                   boolean checksums, byte[] token) {
        return new Request(checksums ? BlockProtocol.FLAG_CHECKSUMS : 0, POOL, blockId, generationStamp, offset, length,
                capacity, token);
    }

    private static Request request(long blockId, long offset, int length, boolean checksums) {
        return request(blockId, GS, offset, length, 1 << 20, checksums, new byte[0]);
    }

    /** The issuer of block tokens once {@link #enableTokens} has turned them on. */
    private BlockTokenSecretManager issuer;

    /**
     * Asks as {@code PEER}; with tokens on, from a session opened with a READ token of the asked block (as
     * {@link BlockTokenAuthenticator} binds it), so that only the request's own token is in question.
     */
    private Response ask(Request request) {
        PeerIdentity peer;
        try {
            peer = issuer == null ? PEER : boundTo(PEER, issuer, request.blockId());
        } catch (Exception e) {
            throw new AssertionError("cannot make the session's token", e);
        }
        return Response.decode(service.handle(peer, request.encode()));
    }

    /** {@code peer} in a session opened with a READ token of {@code blockId}. */
    private static PeerIdentity boundTo(PeerIdentity peer, BlockTokenSecretManager issuer, long blockId) throws Exception {
        byte[] token = token(issuer, blockId, BlockTokenIdentifier.AccessMode.READ);
        return bound(peer, io.rdmaplane.hdfs.BlockTokens.identifier(io.rdmaplane.hdfs.BlockTokens.decode(token).getIdentifier()));
    }

    /** {@code peer} in a session bound to {@code session} (what {@link BlockTokenAuthenticator} would have proved). */
    private static PeerIdentity bound(PeerIdentity peer, BlockTokenIdentifier session) {
        if (session.getExpiryDate() == 0) {
            session.setExpiryDate(System.currentTimeMillis() + TimeUnit.MINUTES.toMillis(10));
        }
        return new PeerIdentity(peer.instance(), peer.address(), peer.grants(), session);
    }

    /** The served range's bytes, READ from the service's node with the answer's address and rkey. */
    private byte[] read(Response response) throws Exception {
        try (MemoryRegion landing = client.register(ByteBuffer.allocateDirect(response.rangeLength()), EnumSet.of(Access.LOCAL_WRITE))) {
            channel.read(response.address(), response.rkey(), response.rangeLength(), landing, 0).get(30, TimeUnit.SECONDS);
            byte[] bytes = new byte[response.rangeLength()];
            landing.buffer().get(bytes);
            return bytes;
        }
    }

    private static int crc32c(byte[] bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes);
        return (int) crc.getValue();
    }

    @Test
    void aFinalizedReplicaIsServedAsChunkAlignedRangeWithItsStoredChecksums() throws Exception {
        byte[] block = FakeDataNode.bytes(LENGTH, 1);
        dataNode.add(1, GS, block);
        Response response = ask(request(1, 1000, 3000, true));
        assertEquals(Status.OK, response.status(), response.message());
        assertEquals(512, response.rangeOffset(), "starts at the chunk holding the asked offset");
        assertEquals(4096 - 512, response.rangeLength(), "ends at the chunk boundary after the asked bytes");
        byte[] range = Arrays.copyOfRange(block, 512, 4096);
        assertArrayEquals(range, read(response), "the rkey reads the replica's bytes");
        assertEquals(crc32c(range), response.crc32c(), "the range's CRC32C, derived from the stored chunk sums");
        assertEquals(DataChecksum.Type.CRC32C.id, response.checksumType());
        assertEquals(BPC, response.bytesPerChecksum());
        assertArrayEquals(dataNode.storedSums(1, 1, 8, 4), response.checksums(), "the stored sums of chunks 1 to 7");
        assertEquals(1, service.requests.get());
        assertEquals(1, service.served.get());
        assertEquals(0, service.refused.get());
    }

    @Test
    void theReplicasEndBoundsTheRangeAndChecksumsComeOnlyWhenAsked() throws Exception {
        byte[] block = FakeDataNode.bytes(LENGTH, 2);
        dataNode.add(2, GS, block);
        Response response = ask(request(2, 9000, 5000, false));
        assertEquals(Status.OK, response.status(), response.message());
        assertEquals(8704, response.rangeOffset());
        assertEquals(LENGTH - 8704, response.rangeLength(), "up to the replica's end, a partial last chunk");
        byte[] range = Arrays.copyOfRange(block, 8704, LENGTH);
        assertArrayEquals(range, read(response));
        assertEquals(crc32c(range), response.crc32c(), "stored sums concatenated, the partial last chunk included");
        assertEquals(0, response.checksums().length, "no chunk sums unless the flag asks for them");
    }

    @Test
    void anotherChecksumTypeHasItsRangeCrcComputedFromTheMappedBytes() throws Exception {
        byte[] block = FakeDataNode.bytes(LENGTH, 3);
        dataNode.add(3, GS, block, DataChecksum.Type.CRC32, 1024);
        Response response = ask(request(3, 2000, 100, true));
        assertEquals(Status.OK, response.status(), response.message());
        assertEquals(1024, response.rangeOffset());
        assertEquals(2048, response.rangeLength(), "chunks 1 and 2 hold bytes 2000 to 2099");
        byte[] range = Arrays.copyOfRange(block, 1024, 3072);
        assertArrayEquals(range, read(response));
        assertEquals(crc32c(range), response.crc32c(), "always a CRC32C, whatever the stored type");
        assertEquals(DataChecksum.Type.CRC32.id, response.checksumType());
        assertEquals(1024, response.bytesPerChecksum());
        assertArrayEquals(dataNode.storedSums(3, 1, 3, 4), response.checksums(), "the stored CRC32s of chunks 1 and 2");
    }

    @Test
    void theCapacityLimitsTheRangeToWholeChunksAndLessThanOneChunkIsRefused() throws Exception {
        byte[] block = FakeDataNode.bytes(LENGTH, 4);
        dataNode.add(4, GS, block);
        Response limited = ask(request(4, GS, 0, LENGTH, 2000, false, new byte[0]));
        assertEquals(Status.OK, limited.status(), limited.message());
        assertEquals(0, limited.rangeOffset());
        assertEquals(1536, limited.rangeLength(), "three whole chunks fit 2000 bytes");
        assertArrayEquals(Arrays.copyOfRange(block, 0, 1536), read(limited));

        Response tooSmall = ask(request(4, GS, 0, LENGTH, 100, false, new byte[0]));
        assertEquals(Status.OUT_OF_RANGE, tooSmall.status());
        assertTrue(tooSmall.message().contains("holds no whole 512-byte chunk"), tooSmall.message());
    }

    @Test
    void theChecksumBudgetLimitsARangeWithChecksums() throws Exception {
        int length = 6 << 20;
        byte[] block = FakeDataNode.bytes(length, 5);
        dataNode.add(5, GS, block);
        int budget = BlockService.MAX_CHECKSUM_BYTES / 4 * BPC; // 5 MiB of 512-byte chunks
        Response withSums = ask(request(5, GS, 0, length, 8 << 20, true, new byte[0]));
        assertEquals(Status.OK, withSums.status(), withSums.message());
        assertEquals(budget, withSums.rangeLength());
        assertEquals(BlockService.MAX_CHECKSUM_BYTES, withSums.checksums().length);
        assertEquals(crc32c(Arrays.copyOf(block, budget)), withSums.crc32c());

        Response withoutSums = ask(request(5, GS, 0, length, 8 << 20, false, new byte[0]));
        assertEquals(length, withoutSums.rangeLength(), "without sums only the capacity limits the range");
        assertEquals(crc32c(block), withoutSums.crc32c());
        assertArrayEquals(block, read(withoutSums));
    }

    @Test
    void replicasThatCannotBeServedAreRefusedWithTheirReasonAndNothingIsRegistered() throws Exception {
        dataNode.add(6, GS, FakeDataNode.bytes(LENGTH, 6));
        FakeReplica beingWritten = dataNode.add(7, GS, FakeDataNode.bytes(LENGTH, 7));
        beingWritten.state = ReplicaState.RBW;
        long registrations = server.registrationCount();

        Response missing = ask(request(99, 0, 100, true));
        assertEquals(Status.NOT_FOUND, missing.status());
        assertTrue(missing.message().contains("no replica of block 99"), missing.message());
        Response unfinished = ask(request(7, 0, 100, true));
        assertEquals(Status.NOT_FINALIZED, unfinished.status());
        assertTrue(unfinished.message().contains("RBW"), unfinished.message());
        Response stale = ask(request(6, GS - 1, 0, 100, 1 << 20, true, new byte[0]));
        assertEquals(Status.STALE_GENERATION, stale.status());
        assertTrue(stale.message().contains("generation stamp is " + GS), stale.message());
        Response pastTheEnd = ask(request(6, LENGTH, 1, true));
        assertEquals(Status.OUT_OF_RANGE, pastTheEnd.status());
        assertTrue(pastTheEnd.message().contains("past the replica's " + LENGTH + " bytes"), pastTheEnd.message());

        assertEquals(registrations, server.registrationCount(), "no region for a refused request");
        assertEquals(0, service.regions().size());
        assertEquals(4, service.requests.get());
        assertEquals(4, service.refused.get());
        assertEquals(0, service.served.get());
    }

    @Test
    void whenTheCapIsTakenByLeasedRegionsTheClientIsToldBusy() throws Exception {
        service.close();
        service = new BlockService(dataNode, server, LENGTH, LEASE);
        dataNode.add(8, GS, FakeDataNode.bytes(LENGTH, 8));
        dataNode.add(9, GS, FakeDataNode.bytes(LENGTH, 9));
        assertEquals(Status.OK, ask(request(8, 0, 100, false)).status());
        Response busy = ask(request(9, 0, 100, false));
        assertEquals(Status.BUSY, busy.status());
        assertTrue(busy.message().contains("cap"), busy.message());
        assertEquals(LENGTH, service.regions().registeredBytes());
    }

    @Test
    void aMalformedRequestIsAnErrorOfThatRequestAndRegistersNothing() {
        long registrations = server.registrationCount();
        ByteBuffer whole = request(1, 0, 100, false).encode();
        ByteBuffer truncated = whole.limit(whole.limit() - 3);
        assertThrows(IllegalArgumentException.class, () -> service.handle(PEER, truncated), "truncated");
        ByteBuffer otherVersion = request(1, 0, 100, false).encode();
        otherVersion.put(0, (byte) 99);
        assertThrows(IllegalArgumentException.class, () -> service.handle(PEER, otherVersion), "unknown version");
        assertEquals(registrations, server.registrationCount());
        assertEquals(0, service.served.get());
    }

    @Test
    void aMissingBlockFileIsAnErrorAnswerThatNamesTheCause() throws Exception {
        dataNode.add(10, GS, FakeDataNode.bytes(LENGTH, 10));
        Files.delete(dataNode.blockFile(10));
        Response error = ask(request(10, 0, 100, false));
        assertEquals(Status.ERROR, error.status());
        assertTrue(error.message().startsWith("could not serve the block: "), error.message());
        assertTrue(error.message().contains("blk_10"), error.message());
        assertEquals(0, service.regions().registeredBytes(), "nothing stays reserved");
        assertEquals(1, service.refused.get());
    }

    @Test
    void aReplicaThatChangesWhileBeingServedIsRefusedAndItsRegionReleased() throws Exception {
        dataNode.add(11, GS, FakeDataNode.bytes(LENGTH, 11));
        AtomicInteger lookups = new AtomicInteger();
        dataNode.afterLookup = () -> {
            if (lookups.incrementAndGet() == 1) {
                dataNode.appended(11); // right after the service found the replica: it checks it again before answering
            }
        };
        Response changed = ask(request(11, 0, 100, false));
        assertEquals(Status.STALE_GENERATION, changed.status());
        assertEquals("replica changed while being served", changed.message());
        assertEquals(0, service.regions().size(), "the region of the old generation is released");
        assertEquals(1, service.regions().released());
    }

    @Test
    void aSecondRequestReusesTheRegionAndItsRkeyIsRevokedOnClose() throws Exception {
        byte[] block = FakeDataNode.bytes(LENGTH, 12);
        dataNode.add(12, GS, block);
        Response first = ask(request(12, 0, 100, false));
        long registrations = server.registrationCount();
        Response second = ask(request(12, 5000, 100, true));
        assertEquals(Status.OK, second.status(), second.message());
        assertEquals(registrations, server.registrationCount(), "no registration per request");
        assertEquals(first.rkey(), second.rkey());
        assertEquals(first.address() + 5000 - 5000 % BPC, second.address(), "the same mapping, further in");
        assertArrayEquals(Arrays.copyOfRange(block, 4608, 5120), read(second));

        service.close();
        ExecutionException e = assertThrows(ExecutionException.class, () -> read(second));
        assertEquals(io.rdmaplane.rdma.provider.Status.REMOTE_ACCESS_ERROR,
                assertInstanceOf(TransportException.class, e.getCause()).status(), "the rkey is revoked: " + e);
    }

    @Test
    void servableFollowsTheReplicasStateAndGenerationStamp() throws Exception {
        FakeReplica replica = dataNode.add(13, GS, FakeDataNode.bytes(LENGTH, 13));
        RegionCache.Key key = new RegionCache.Key(POOL, 13, GS);
        assertTrue(service.servable(key));
        replica.generationStamp = GS + 1;
        assertFalse(service.servable(key), "a newer generation stamp");
        replica.generationStamp = GS;
        replica.state = ReplicaState.RUR;
        assertFalse(service.servable(key), "under recovery");
        dataNode.remove(13);
        assertFalse(service.servable(key), "deleted");
    }

    // ------------------------------------------------------------------ block access tokens

    /** Block access tokens as a NameNode issues them for {@code POOL}, checked by the DataNode's manager. */
    private BlockTokenSecretManager enableTokens() {
        return enableTokens(TimeUnit.MINUTES.toMillis(10));
    }

    private BlockTokenSecretManager enableTokens(long tokenLifetimeMillis) {
        BlockTokenSecretManager nameNode = new BlockTokenSecretManager(TimeUnit.MINUTES.toMillis(10),
                tokenLifetimeMillis, 0, 1, POOL, null, false);
        BlockPoolTokenSecretManager checks = new BlockPoolTokenSecretManager();
        checks.addBlockPool(POOL, nameNode);
        dataNode.tokens = checks;
        issuer = nameNode;
        return nameNode;
    }

    private static byte[] token(BlockTokenSecretManager issuer, long blockId, BlockTokenIdentifier.AccessMode mode)
            throws Exception {
        Token<BlockTokenIdentifier> token = issuer.generateToken("reader", new ExtendedBlock(POOL, blockId, LENGTH, GS),
                EnumSet.of(mode), new StorageType[] {StorageType.DEFAULT}, new String[] {"DS-fake"});
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        token.write(new DataOutputStream(bytes));
        return bytes.toByteArray();
    }

    @Test
    void withTokensEnabledAValidReadTokenIsServed() throws Exception {
        BlockTokenSecretManager issuer = enableTokens();
        byte[] block = FakeDataNode.bytes(LENGTH, 14);
        dataNode.add(14, GS, block);
        Response response = ask(request(14, GS, 0, 100, 1 << 20, false, token(issuer, 14, BlockTokenIdentifier.AccessMode.READ)));
        assertEquals(Status.OK, response.status(), response.message());
        assertArrayEquals(Arrays.copyOf(block, 512), read(response));
        assertEquals(0, service.tokenRefused.get());
    }

    /** Attack 3 of issue 11: a descriptor handed out for a token kept serving after the token expired. */
    @Test
    void aDescriptorGrantedForATokenReadsNothingOnceTheTokenHasExpired() throws Exception {
        BlockTokenSecretManager issuer = enableTokens(TimeUnit.SECONDS.toMillis(2));
        dataNode.add(17, GS, FakeDataNode.bytes(LENGTH, 17));
        PeerIdentity peer = boundTo(new PeerIdentity(UUID.randomUUID(), new InetSocketAddress("127.0.0.1", 4243)), issuer, 17);
        Response response = Response.decode(service.handle(peer,
                request(17, GS, 0, 100, 1 << 20, false, token(issuer, 17, BlockTokenIdentifier.AccessMode.READ)).encode()));
        assertEquals(Status.OK, response.status(), response.message());
        assertTrue(peer.grants().allows(response.rkey()), "granted while its token is valid");
        Polling.waitUntil(() -> !peer.grants().allows(response.rkey()), Duration.ofSeconds(30),
                "the grant to end with its token's expiry");
        assertEquals(0, peer.grants().size(), "the expired grant is dropped");
    }

    @Test
    void withTokensEnabledEveryOtherTokenIsRefusedBeforeTheReplicaIsLookedAt() throws Exception {
        BlockTokenSecretManager issuer = enableTokens();
        dataNode.add(15, GS, FakeDataNode.bytes(LENGTH, 15));
        AtomicInteger lookups = new AtomicInteger();
        dataNode.afterLookup = lookups::incrementAndGet;
        long registrations = server.registrationCount();
        byte[][] refusedTokens = {
            token(issuer, 16, BlockTokenIdentifier.AccessMode.READ), // another block's
            token(issuer, 15, BlockTokenIdentifier.AccessMode.WRITE), // not for reading
            {1, 2, 3, 4}, // not a token
            new byte[0], // none
        };
        for (byte[] token : refusedTokens) {
            Response refused = ask(request(15, GS, 0, 100, 1 << 20, false, token));
            assertEquals(Status.TOKEN_REFUSED, refused.status());
            assertEquals("block access token refused", refused.message(), "nothing about the replica");
        }
        Response unknownBlock = ask(request(99, GS, 0, 100, 1 << 20, false, token(issuer, 16, BlockTokenIdentifier.AccessMode.READ)));
        assertEquals(Status.TOKEN_REFUSED, unknownBlock.status(), "not NOT_FOUND: no answer tells what the DataNode holds");
        assertEquals(0, lookups.get(), "the dataset is not consulted for a refused token");
        assertEquals(registrations, server.registrationCount());
        assertEquals(5, service.tokenRefused.get());
        assertEquals(5, service.refused.get());
    }

    /**
     * The DataNode's session proof: a session opened with a token of one block is served another block of the same pool
     * and user when the request carries that block's own valid token (one session per client, not per block), and
     * nothing with another block's token; a session of another user's or another pool's token, or of no token, is served
     * nothing.
     */
    @Test
    void withTokensEnabledASessionOfTheSameUserAndPoolIsServedEachBlockWithItsOwnToken() throws Exception {
        BlockTokenSecretManager issuer = enableTokens();
        dataNode.add(15, GS, FakeDataNode.bytes(LENGTH, 15));
        dataNode.add(16, GS, FakeDataNode.bytes(LENGTH, 16));
        byte[] valid = token(issuer, 15, BlockTokenIdentifier.AccessMode.READ);
        PeerIdentity blockSixteens = boundTo(PEER, issuer, 16);
        Response served = Response.decode(service.handle(blockSixteens, request(15, GS, 0, 100, 1 << 20, false, valid).encode()));
        assertEquals(Status.OK, served.status(), "block 15 with its own token, in the session of block 16's token");
        assertArrayEquals(Arrays.copyOf(FakeDataNode.bytes(LENGTH, 15), 512), read(served));
        Response otherToken = Response.decode(service.handle(blockSixteens,
                request(15, GS, 0, 100, 1 << 20, false, token(issuer, 16, BlockTokenIdentifier.AccessMode.READ)).encode()));
        assertEquals(Status.TOKEN_REFUSED, otherToken.status(), "block 15 with block 16's token");
        assertEquals(1, service.tokenRefused.get());

        PeerIdentity[] sessions = {
            bound(stranger(), new BlockTokenIdentifier("mallory", POOL, 16, EnumSet.of(BlockTokenIdentifier.AccessMode.READ),
                    new StorageType[] {StorageType.DEFAULT}, new String[] {"DS-fake"}, false)), // another user's token
            bound(stranger(), new BlockTokenIdentifier("reader", "BP-other", 16, EnumSet.of(BlockTokenIdentifier.AccessMode.READ),
                    new StorageType[] {StorageType.DEFAULT}, new String[] {"DS-fake"}, false)), // another pool's
            stranger(), // a session bound to no token
        };
        for (PeerIdentity session : sessions) {
            Response refused = Response.decode(service.handle(session, request(15, GS, 0, 100, 1 << 20, false, valid).encode()));
            assertEquals(Status.TOKEN_REFUSED, refused.status());
            assertEquals(0, session.grants().size(), "nothing granted");
        }
        assertEquals(4, service.tokenRefused.get());
    }

    /** A client of its own, with no grants yet. */
    private static PeerIdentity stranger() {
        return new PeerIdentity(UUID.randomUUID(), new InetSocketAddress("127.0.0.1", 4244));
    }

    /** A token whose identifier (legacy layout) is {@code prefix}: what Hadoop's readers would allocate for. */
    private static byte[] tokenWithIdentifier(DataOutputStreamWriter prefix) throws Exception {
        ByteArrayOutputStream id = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(id);
        WritableUtils.writeVLong(out, System.currentTimeMillis() + 60_000); // expiry: its first byte is negative
        WritableUtils.writeVInt(out, 1); // key id
        prefix.write(out);
        Token<BlockTokenIdentifier> token = new Token<>(id.toByteArray(), new byte[20], new Text("HDFS_BLOCK_TOKEN"), new Text(""));
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        token.write(new DataOutputStream(bytes));
        return bytes.toByteArray();
    }

    @FunctionalInterface
    private interface DataOutputStreamWriter {
        void write(DataOutputStream out) throws Exception;
    }

    @Test
    void tokensAnnouncingMoreBytesThanTheyCarryAreRefusedWithoutAllocatingThem() throws Exception {
        enableTokens();
        dataNode.add(17, GS, FakeDataNode.bytes(LENGTH, 17));
        byte[][] hostile = {
            {(byte) 0x8c, 0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff}, // five bytes: "an identifier of 2^31-1 bytes"
            tokenWithIdentifier(out -> out.writeInt(Integer.MAX_VALUE)), // a 2 GiB user id
            tokenWithIdentifier(out -> { // a valid prefix, then 2^31-1 storage types
                WritableUtils.writeString(out, "reader");
                WritableUtils.writeString(out, POOL);
                WritableUtils.writeVLong(out, 17);
                WritableUtils.writeVInt(out, 1);
                WritableUtils.writeEnum(out, BlockTokenIdentifier.AccessMode.READ);
                WritableUtils.writeVInt(out, Integer.MAX_VALUE);
            }),
            tokenWithIdentifier(out -> { // and a 2 GiB handshake secret
                WritableUtils.writeString(out, "reader");
                WritableUtils.writeString(out, POOL);
                WritableUtils.writeVLong(out, 17);
                WritableUtils.writeVInt(out, 0);
                WritableUtils.writeVInt(out, 0);
                WritableUtils.writeVInt(out, 0);
                WritableUtils.writeVInt(out, Integer.MAX_VALUE);
            }),
        };
        for (byte[] token : hostile) {
            Response refused = ask(request(17, GS, 0, 100, 1 << 20, false, token));
            assertEquals(Status.TOKEN_REFUSED, refused.status());
        }
        assertEquals(hostile.length, service.tokenRefused.get());
    }

    @Test
    void theRangeReadIsThatOfTheRequestedBlockOnly() throws Exception {
        byte[] one = FakeDataNode.bytes(LENGTH, 17);
        byte[] other = FakeDataNode.bytes(LENGTH, 18);
        dataNode.add(17, GS, one);
        dataNode.add(18, GS, other);
        Response a = ask(request(17, 0, LENGTH, false));
        Response b = ask(request(18, 0, LENGTH, false));
        assertTrue(a.rkey() != b.rkey(), "one region, one rkey, per replica");
        assertArrayEquals(one, read(a));
        assertArrayEquals(other, read(b));
    }
}

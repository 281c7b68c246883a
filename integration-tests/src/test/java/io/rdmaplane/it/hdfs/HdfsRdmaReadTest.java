package io.rdmaplane.it.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.codahale.metrics.MetricRegistry;
import io.rdmaplane.hdfs.BlockProtocol;
import io.rdmaplane.rdma.policy.ClientCredential;
import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder;
import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import io.rdmaplane.rdma.config.ConfigException;
import io.rdmaplane.rdma.provider.faulty.FaultyProvider;
import io.rdmaplane.rdma.testing.Polling;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.ReplicaAccessor;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.security.token.Token;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * MiniDFSCluster with two DataNodes running the RDMA block service and one without, block
 * tokens on: the RDMA client reads the same bytes as the stock client, through RDMA where the
 * plug-in runs and through TCP where it does not or refuses.
 */
class HdfsRdmaReadTest {
    static final int WAIT_SECONDS = 30;
    static final int[] SIZES = {1, 511, 512, 513, HdfsCluster.BLOCK - 1, HdfsCluster.BLOCK, HdfsCluster.BLOCK + 1,
            3 * HdfsCluster.BLOCK + HdfsCluster.BLOCK / 2};
    static HdfsCluster hdfs;
    static DataNode withoutPlugin;

    @BeforeAll
    static void start() throws IOException {
        hdfs = new HdfsCluster(2, 1, true);
        withoutPlugin = hdfs.cluster.getDataNodes().get(2);
        assertEquals(2, RdmaDataNodePlugin.running().size(), "both plug-in DataNodes run the service");
        for (int size : SIZES) {
            hdfs.write("/f" + size, HdfsCluster.bytes(size, size), 2, hdfs.cluster.getDataNodes().get(0),
                    hdfs.cluster.getDataNodes().get(1));
        }
        hdfs.write("/empty", new byte[0], 2);
    }

    @AfterAll
    static void stop() throws IOException {
        if (hdfs != null) {
            hdfs.close();
        }
    }

    static MetricRegistry client() {
        return RdmaReplicaAccessorBuilder.metrics();
    }

    static long counter(String name) {
        return client().counter(name).getCount();
    }

    static long served() {
        return RdmaDataNodePlugin.running().stream().mapToLong(RdmaDataNodePlugin::getServed).sum();
    }

    @Test
    void sequentialReadsAreIdenticalAndGoThroughRdma() throws IOException {
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        long fallbacks = counter("hdfs.client.fallbacks");
        long servedBefore = served();
        long tokenRefusals = tokenRefusals();
        long checksumFailures = counter("rdma.checksum.failures");
        long sessionsOpened = counter("hdfs.client.tokenSessions.opened");
        long total = 0;
        int blocks = 0;
        for (int size : SIZES) {
            byte[] expected = HdfsCluster.bytes(size, size);
            for (int buffer : new int[] {1 << 20, 8191}) {
                try (FSDataInputStream in = hdfs.rdma.open(new Path("/f" + size))) {
                    assertArrayEquals(expected, HdfsCluster.readAll(in, buffer), "file of " + size + " B, buffer " + buffer);
                    assertEquals(-1, in.read());
                }
                total += size;
                blocks += (size + HdfsCluster.BLOCK - 1) / HdfsCluster.BLOCK;
            }
            try (FSDataInputStream in = hdfs.stock.open(new Path("/f" + size))) {
                assertArrayEquals(expected, HdfsCluster.readAll(in, 65536), "stock client, file of " + size + " B");
            }
        }
        assertEquals(fallbacks, counter("hdfs.client.fallbacks"), "no read fell back");
        assertEquals(total, counter("hdfs.client.rdma.bytes") - rdmaBytes, "every byte came through RDMA READ");
        assertEquals(checksumFailures, counter("rdma.checksum.failures"));
        assertTrue(served() > servedBefore, "the DataNodes served the windows (good block tokens accepted)");
        assertEquals(tokenRefusals, tokenRefusals());
        // every open brings new block tokens; the client's session with a DataNode serves them all (one per DataNode,
        // a second when one idled out meanwhile), not one session per block
        long opened = counter("hdfs.client.tokenSessions.opened") - sessionsOpened;
        assertTrue(opened <= 4, opened + " token sessions opened for " + blocks + " blocks read from 2 DataNodes");
    }

    static long tokenRefusals() {
        return RdmaDataNodePlugin.running().stream().mapToLong(RdmaDataNodePlugin::getTokenRefused).sum();
    }

    @Test
    void byteBufferReadsAreIdentical() throws IOException {
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        for (int size : SIZES) {
            byte[] expected = HdfsCluster.bytes(size, size);
            for (boolean direct : new boolean[] {true, false}) {
                java.nio.ByteBuffer buffer = direct ? java.nio.ByteBuffer.allocateDirect(70_000) : java.nio.ByteBuffer.allocate(70_000);
                ByteArrayOutputStream got = new ByteArrayOutputStream();
                try (FSDataInputStream in = hdfs.rdma.open(new Path("/f" + size))) {
                    while (true) {
                        buffer.clear();
                        int n = in.read(buffer);
                        if (n < 0) {
                            break;
                        }
                        buffer.flip();
                        byte[] chunk = new byte[buffer.remaining()];
                        buffer.get(chunk);
                        got.write(chunk);
                    }
                }
                assertArrayEquals(expected, got.toByteArray(), size + " B, direct " + direct);
            }
        }
        assertTrue(counter("hdfs.client.rdma.bytes") > rdmaBytes);
    }

    @Test
    void emptyFile() throws IOException {
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/empty"))) {
            assertEquals(-1, in.read());
            assertEquals(0, HdfsCluster.readAll(in, 100).length);
            assertEquals(-1, in.read(0, new byte[10], 0, 10));
        }
    }

    @Test
    void positionedReadsAndSeeksAreIdentical() throws IOException {
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        long fallbacks = counter("hdfs.client.fallbacks");
        Random random = new Random(7);
        for (int size : SIZES) {
            byte[] expected = HdfsCluster.bytes(size, size);
            try (FSDataInputStream in = hdfs.rdma.open(new Path("/f" + size));
                 FSDataInputStream ref = hdfs.stock.open(new Path("/f" + size))) {
                for (int i = 0; i < 12; i++) {
                    int pos = random.nextInt(size);
                    int len = 1 + random.nextInt(Math.min(size - pos, 2 * HdfsCluster.BLOCK));
                    byte[] got = new byte[len];
                    in.readFully(pos, got);
                    byte[] stock = new byte[len];
                    ref.readFully(pos, stock);
                    assertArrayEquals(java.util.Arrays.copyOfRange(expected, pos, pos + len), got, size + " B @" + pos + "+" + len);
                    assertArrayEquals(stock, got);
                    // seek, then stream from there
                    in.seek(pos);
                    assertEquals(pos, in.getPos());
                    int b = in.read();
                    assertEquals(expected[pos] & 0xff, b);
                    assertTrue(in.available() >= 0);
                }
                // a positioned read past the end, and one across it
                assertEquals(-1, in.read(size, new byte[4], 0, 4));
                org.junit.jupiter.api.Assertions.assertThrows(EOFException.class, () -> in.readFully(size - 1, new byte[2]));
                // seek to the last byte and read to EOF
                in.seek(size - 1);
                assertEquals(expected[size - 1] & 0xff, in.read());
                assertEquals(-1, in.read());
            }
        }
        assertEquals(fallbacks, counter("hdfs.client.fallbacks"), "no read fell back");
        assertTrue(counter("hdfs.client.rdma.bytes") > rdmaBytes);
    }

    @Test
    void concurrentReaders() throws Exception {
        int size = 3 * HdfsCluster.BLOCK + HdfsCluster.BLOCK / 2;
        byte[] expected = HdfsCluster.bytes(size, size);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try (FSDataInputStream shared = hdfs.rdma.open(new Path("/f" + size))) {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int seed = t;
                done.add(pool.submit(() -> {
                    Random random = new Random(seed);
                    for (int i = 0; i < 10; i++) {
                        int pos = random.nextInt(size);
                        int len = 1 + random.nextInt(Math.min(size - pos, 300_000));
                        byte[] got = new byte[len];
                        shared.readFully(pos, got); // positioned reads on one stream from many threads
                        assertArrayEquals(java.util.Arrays.copyOfRange(expected, pos, pos + len), got);
                    }
                    try (FSDataInputStream own = hdfs.rdma.open(new Path("/f" + size))) {
                        assertArrayEquals(expected, HdfsCluster.readAll(own, 100_000));
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void dataNodeWithoutThePluginServesOverTcp() throws IOException {
        int size = 2 * HdfsCluster.BLOCK + 17;
        byte[] expected = HdfsCluster.bytes(size, 99);
        hdfs.write("/tcp-only", expected, 1, withoutPlugin);
        List<LocatedBlock> blocks = ((DistributedFileSystem) hdfs.stock).getClient()
                .getLocatedBlocks("/tcp-only", 0, size).getLocatedBlocks();
        for (LocatedBlock b : blocks) {
            assertEquals(withoutPlugin.getXferPort(), b.getLocations()[0].getXferPort(), "replica on the plain DataNode");
        }
        long declined = counter("hdfs.client.declined");
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/tcp-only"))) {
            assertArrayEquals(expected, HdfsCluster.readAll(in, 65536));
        }
        assertTrue(counter("hdfs.client.declined") > declined, "the accessor declined: HDFS read over TCP");
        assertEquals(rdmaBytes, counter("hdfs.client.rdma.bytes"));
    }

    @Test
    void tamperedTokenIsRefusedAndTheReadStillSucceeds() throws Exception {
        int size = HdfsCluster.BLOCK + 1;
        byte[] expected = HdfsCluster.bytes(size, size);
        LocatedBlock first = ((DistributedFileSystem) hdfs.stock).getClient().getLocatedBlocks("/f" + size, 0, size)
                .getLocatedBlocks().get(0);
        Token<BlockTokenIdentifier> token = first.getBlockToken();
        assertTrue(token.getPassword().length > 0, "block tokens are on");

        // the good token, through the builder as HDFS calls it: served over RDMA
        long servedBefore = served();
        byte[] got = readBlockThroughBuilder(first, serialize(token), 1000);
        assertArrayEquals(java.util.Arrays.copyOfRange(expected, 0, 1000), got);
        assertTrue(served() > servedBefore, "served over RDMA");
        servedBefore = served();

        // a tampered password: refused by the DataNode, and the read still returns the bytes (TCP)
        byte[] password = token.getPassword().clone();
        password[0] ^= 0x5a;
        Token<BlockTokenIdentifier> tampered = new Token<>(token.getIdentifier(), password, token.getKind(), token.getService());
        long fallbacks = counter("hdfs.client.fallback.TOKEN_REFUSED");
        got = readBlockThroughBuilder(first, serialize(tampered), 1000);
        assertArrayEquals(java.util.Arrays.copyOfRange(expected, 0, 1000), got);
        // refused by the DataNode's check of the request's token (in the session the good token opened), or at the
        // handshake of a session the tampered token opens: nothing is served either way
        assertEquals(servedBefore, served(), "nothing served for the tampered token");
        assertEquals(fallbacks + 1, counter("hdfs.client.fallback.TOKEN_REFUSED"));
    }

    @Test
    void aDescriptorHandedToOneClientReadsNothingForAnotherNorWithoutAHandshake() throws Exception {
        int size = HdfsCluster.BLOCK;
        LocatedBlock first = ((DistributedFileSystem) hdfs.stock).getClient().getLocatedBlocks("/f" + size, 0, size)
                .getLocatedBlocks().get(0);
        InetSocketAddress service = new InetSocketAddress("127.0.0.1", RdmaDataNodePlugin.running().get(0).getPort());
        try (Node node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyClient owner = new PolicyClient(node, PolicyOptions.defaults(), new PolicyMetrics());
             PolicyClient other = new PolicyClient(node, PolicyOptions.defaults(), new PolicyMetrics())) {
            // The owner opens its session with the block's token and asks with it, as the accessor does, and READs
            // what it is handed.
            PeerConnection session = owner.dedicated(service, credential(first.getBlockToken()));
            BlockProtocol.Response answer = ask(session, first, first.getBlockToken());
            assertEquals(BlockProtocol.Status.OK, answer.status(), answer.message());
            RemoteBlock block = new RemoteBlock(answer.address(), answer.rkey(), answer.rangeLength(), answer.crc32c());
            MemoryRegion landing = node.register(ByteBuffer.allocateDirect(block.length()), EnumSet.of(Access.LOCAL_WRITE));
            session.read(block, landing, 0).get(WAIT_SECONDS, TimeUnit.SECONDS);

            // Another client with the same (valid) address and rkey, in a session of its own (opened with the same
            // block's token, even): refused, the key was granted to the owner.
            MemoryRegion stolen = node.register(ByteBuffer.allocateDirect(block.length()), EnumSet.of(Access.LOCAL_WRITE));
            PeerConnection otherSession = other.dedicated(service, credential(first.getBlockToken()));
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> otherSession.read(block, stolen, 0).get(WAIT_SECONDS, TimeUnit.SECONDS));
            assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, e.getCause().getCause()).status());
            // And a bare transport connection, no handshake at all: refused.
            Channel bare = node.connect(service, 4, new ChannelHandler() { }).get(WAIT_SECONDS, TimeUnit.SECONDS);
            e = assertThrows(ExecutionException.class, () -> bare.read(block.address(), block.rkey(), block.length(), stolen, 0)
                    .get(WAIT_SECONDS, TimeUnit.SECONDS));
            assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, e.getCause()).status());
            byte[] leaked = new byte[block.length()];
            stolen.buffer().get(leaked);
            assertArrayEquals(new byte[block.length()], leaked, "no byte of the block reached the other clients");
        }
    }

    /**
     * Issue 11, the DataNode's session proof: a client opens a session only with a valid READ token, proving the
     * token's password. No token, a tampered or forged password, an expired token: no session, no READ. A session
     * opened with another block's valid token: served this block only with this block's own token in the request.
     */
    @Test
    void onlyAValidTokenOfTheBlockOpensASessionThatReadsIt() throws Exception {
        int size = 3 * HdfsCluster.BLOCK + HdfsCluster.BLOCK / 2;
        List<LocatedBlock> blocks = ((DistributedFileSystem) hdfs.stock).getClient().getLocatedBlocks("/f" + size, 0, size)
                .getLocatedBlocks();
        LocatedBlock first = blocks.get(0);
        Token<BlockTokenIdentifier> good = first.getBlockToken();
        Token<BlockTokenIdentifier> otherBlocks = blocks.get(1).getBlockToken();
        byte[] password = good.getPassword().clone();
        password[0] ^= 0x5a;
        Token<BlockTokenIdentifier> tampered = new Token<>(good.getIdentifier(), password, good.getKind(), good.getService());
        byte[] guessed = new byte[good.getPassword().length];
        new Random(11).nextBytes(guessed);
        Token<BlockTokenIdentifier> forged = new Token<>(good.getIdentifier(), guessed, good.getKind(), good.getService());
        Token<BlockTokenIdentifier> expired = expiredToken(first);
        RdmaDataNodePlugin plugin = RdmaDataNodePlugin.running().get(0);
        InetSocketAddress service = new InetSocketAddress("127.0.0.1", plugin.getPort());
        try (Node node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyClient reader = new PolicyClient(node, PolicyOptions.defaults(), new PolicyMetrics())) {
            // first of all: a client that proves nothing, asking with the block's valid token, is not served
            try (PolicyClient anonymous = new PolicyClient(node, PolicyOptions.defaults(), new PolicyMetrics())) {
                assertThrows(ExecutionException.class, () -> ask(anonymous.peer(service), first, good),
                        "a client that proves no token opens no session");
            }
            PeerConnection owner = reader.dedicated(service, credential(good));
            BlockProtocol.Response answer = ask(owner, first, good);
            assertEquals(BlockProtocol.Status.OK, answer.status(), answer.message());
            RemoteBlock block = new RemoteBlock(answer.address(), answer.rkey(), answer.rangeLength(), answer.crc32c());
            MemoryRegion landing = node.register(ByteBuffer.allocateDirect(block.length()), EnumSet.of(Access.LOCAL_WRITE));
            owner.read(block, landing, 0).get(WAIT_SECONDS, TimeUnit.SECONDS);
            byte[] read = new byte[block.length()];
            landing.buffer().get(0, read);
            assertArrayEquals(java.util.Arrays.copyOfRange(HdfsCluster.bytes(size, size), 0, block.length()), read,
                    "the block's own token reads it");

            long refusedBefore = tokenRefusals();
            String[] names = {"no token", "a tampered password", "a forged password", "an expired token"};
            Token<?>[] refused = {null, tampered, forged, expired};
            for (int i = 0; i < names.length; i++) {
                try (PolicyClient attacker = new PolicyClient(node, PolicyOptions.defaults(), new PolicyMetrics())) {
                    PeerConnection peer = refused[i] == null ? attacker.peer(service)
                            : attacker.dedicated(service, credential(refused[i]));
                    ExecutionException e = assertThrows(ExecutionException.class,
                            () -> ask(peer, first, good), names[i] + " opens no session");
                    assertInstanceOf(io.rdmaplane.rdma.policy.PeerUnavailableException.class, e.getCause(), names[i]);
                    MemoryRegion stolen = node.register(ByteBuffer.allocateDirect(block.length()), EnumSet.of(Access.LOCAL_WRITE));
                    assertThrows(ExecutionException.class, () -> peer.read(block, stolen, 0).get(WAIT_SECONDS, TimeUnit.SECONDS),
                            names[i] + " READs nothing");
                    assertArrayEquals(new byte[block.length()], bytesOf(stolen), names[i] + ": no byte of the block arrived");
                }
            }
            assertEquals(refusedBefore + 1, tokenRefusals(), "the expired token is refused by the DataNode itself");

            // a session of another block's valid token: asking for this block with the other block's token is refused,
            // with this block's own token it is served (to that session only: the owner's key still READs nothing there)
            try (PolicyClient attacker = new PolicyClient(node, PolicyOptions.defaults(), new PolicyMetrics())) {
                PeerConnection peer = attacker.dedicated(service, credential(otherBlocks));
                BlockProtocol.Response refusedAnswer = ask(peer, first, otherBlocks);
                assertEquals(BlockProtocol.Status.TOKEN_REFUSED, refusedAnswer.status(), refusedAnswer.message());
                MemoryRegion stolen = node.register(ByteBuffer.allocateDirect(block.length()), EnumSet.of(Access.LOCAL_WRITE));
                ExecutionException e = assertThrows(ExecutionException.class,
                        () -> peer.read(block, stolen, 0).get(WAIT_SECONDS, TimeUnit.SECONDS));
                assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, e.getCause().getCause()).status());
                assertArrayEquals(new byte[block.length()], bytesOf(stolen), "another block's session READ nothing of this one");
                assertEquals(refusedBefore + 2, tokenRefusals());
                BlockProtocol.Response servedAnswer = ask(peer, first, good);
                assertEquals(BlockProtocol.Status.OK, servedAnswer.status(), servedAnswer.message());
                RemoteBlock granted = new RemoteBlock(servedAnswer.address(), servedAnswer.rkey(), servedAnswer.rangeLength(),
                        servedAnswer.crc32c());
                peer.read(granted, stolen, 0).get(WAIT_SECONDS, TimeUnit.SECONDS);
                assertArrayEquals(read, java.util.Arrays.copyOf(bytesOf(stolen), read.length), "its own grant READs the block");
            }
        }
    }

    /** A READ token of {@code block} that has expired, made by a DataNode's own token manager (the NameNode's keys). */
    private static Token<BlockTokenIdentifier> expiredToken(LocatedBlock block) throws Exception {
        org.apache.hadoop.hdfs.security.token.block.BlockTokenSecretManager manager = RdmaDataNodePlugin.running().get(0)
                .dataNode().getBlockPoolTokenSecretManager().get(block.getBlock().getBlockPoolId());
        Token<BlockTokenIdentifier> token;
        synchronized (manager) {
            manager.setTokenLifetime(1);
            try {
                token = manager.generateToken(block.getBlock(), EnumSet.of(BlockTokenIdentifier.AccessMode.READ),
                        new org.apache.hadoop.fs.StorageType[] {org.apache.hadoop.fs.StorageType.DEFAULT}, new String[] {"DS-x"});
            } finally {
                manager.setTokenLifetime(TimeUnit.MINUTES.toMillis(
                        hdfs.rdmaConf.getLong("dfs.block.access.token.lifetime", 600)));
            }
        }
        long until = io.rdmaplane.hdfs.BlockTokens.identifier(token.getIdentifier()).getExpiryDate();
        Polling.waitUntil(() -> System.currentTimeMillis() > until, Duration.ofSeconds(10), "the token to expire");
        return token;
    }

    private static ClientCredential credential(Token<?> token) {
        return new ClientCredential(token.getIdentifier(), token.getPassword());
    }

    /** Asks {@code peer} for the first 1000 bytes of {@code block} with {@code token}, as the accessor does. */
    private static BlockProtocol.Response ask(PeerConnection peer, LocatedBlock block, Token<BlockTokenIdentifier> token)
            throws Exception {
        BlockProtocol.Request ask = new BlockProtocol.Request(0, block.getBlock().getBlockPoolId(), block.getBlock().getBlockId(),
                block.getBlock().getGenerationStamp(), 0, 1000, 1 << 20, serialize(token));
        return BlockProtocol.Response.decode(peer.request(ask.encode()).get(WAIT_SECONDS, TimeUnit.SECONDS));
    }

    private static byte[] bytesOf(MemoryRegion region) {
        byte[] out = new byte[region.buffer().capacity()];
        region.buffer().get(0, out);
        return out;
    }

    @Test
    void aFiveByteTokenIsRefusedAndTheServiceKeepsServingOthers() throws Exception {
        int size = HdfsCluster.BLOCK + 1;
        LocatedBlock first = ((DistributedFileSystem) hdfs.stock).getClient().getLocatedBlocks("/f" + size, 0, size)
                .getLocatedBlocks().get(0);
        // vint 0x8c then 0x7fffffff: "the identifier is 2^31-1 bytes long", which Token.readFields would allocate
        byte[] hostile = {(byte) 0x8c, 0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff};
        long refusedBefore = tokenRefusals();
        InetSocketAddress service = new InetSocketAddress("127.0.0.1", RdmaDataNodePlugin.running().get(0).getPort());
        try (Node node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyClient attacker = new PolicyClient(node, PolicyOptions.defaults(), new PolicyMetrics())) {
            // as the credential of a session: refused
            PeerConnection hostileSession = attacker.dedicated(service, new ClientCredential(hostile, new byte[20]));
            ExecutionException e = assertThrows(ExecutionException.class, () -> ask(hostileSession, first, first.getBlockToken()));
            assertInstanceOf(io.rdmaplane.rdma.policy.PeerUnavailableException.class, e.getCause());
            assertEquals(refusedBefore + 1, tokenRefusals(), "refused as a bad token, not a crash");
            // as the token of a request in a valid session: refused
            PeerConnection session = attacker.dedicated(service, credential(first.getBlockToken()));
            BlockProtocol.Request ask = new BlockProtocol.Request(0, first.getBlock().getBlockPoolId(),
                    first.getBlock().getBlockId(), first.getBlock().getGenerationStamp(), 0, 1000, 1 << 20, hostile);
            BlockProtocol.Response answer = BlockProtocol.Response.decode(session.request(ask.encode())
                    .get(WAIT_SECONDS, TimeUnit.SECONDS));
            assertEquals(BlockProtocol.Status.TOKEN_REFUSED, answer.status());
            assertEquals(refusedBefore + 2, tokenRefusals(), "refused as a bad token, not a crash");
        }
        // and through the builder, as HDFS would hand it: no RDMA reader (HDFS reads over TCP), nothing sent
        assertNull(new RdmaReplicaAccessorBuilder().setFileName("/f" + size)
                .setBlock(first.getBlock().getBlockId(), first.getBlock().getBlockPoolId())
                .setGenerationStamp(first.getBlock().getGenerationStamp()).setBlockAccessToken(hostile)
                .setVerifyChecksum(true).setVisibleLength(first.getBlockSize()).setConfiguration(hdfs.rdmaConf)
                .setClientName("test").setAllowShortCircuitReads(false).build());
        assertEquals(refusedBefore + 2, tokenRefusals());

        javax.management.MBeanServer jmx = java.lang.management.ManagementFactory.getPlatformMBeanServer();
        for (RdmaDataNodePlugin plugin : RdmaDataNodePlugin.running()) {
            javax.management.ObjectName bean = new javax.management.ObjectName(
                    RdmaDataNodePlugin.beanName(plugin.dataNode().getXferPort()));
            assertEquals("RUNNING", jmx.getAttribute(bean, "State"));
            assertTrue((Integer) jmx.getAttribute(bean, "Port") > 0);
        }
        // another client still reads every byte over RDMA (another file: this JVM's client remembers the refused block)
        int other = 3 * HdfsCluster.BLOCK + HdfsCluster.BLOCK / 2;
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        long fallbacks = counter("hdfs.client.fallbacks");
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/f" + other))) {
            assertArrayEquals(HdfsCluster.bytes(other, other), HdfsCluster.readAll(in, 1 << 20));
        }
        assertEquals(fallbacks, counter("hdfs.client.fallbacks"), "no read fell back");
        assertEquals(other, counter("hdfs.client.rdma.bytes") - rdmaBytes, "every byte came through RDMA READ");
    }

    private static byte[] serialize(Token<BlockTokenIdentifier> token) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        token.write(new DataOutputStream(bytes));
        return bytes.toByteArray();
    }

    private static byte[] readBlockThroughBuilder(LocatedBlock block, byte[] token, int length) throws IOException {
        ReplicaAccessor accessor = new RdmaReplicaAccessorBuilder().setFileName("/f" + (HdfsCluster.BLOCK + 1))
                .setBlock(block.getBlock().getBlockId(), block.getBlock().getBlockPoolId())
                .setGenerationStamp(block.getBlock().getGenerationStamp()).setBlockAccessToken(token)
                .setVerifyChecksum(true).setVisibleLength(block.getBlockSize()).setConfiguration(hdfs.rdmaConf)
                .setClientName("test").setAllowShortCircuitReads(false).build();
        assertNotNull(accessor, "a block on plug-in DataNodes gets an RDMA accessor");
        try {
            byte[] out = new byte[length];
            int done = 0;
            while (done < length) {
                int n = accessor.read(done, out, done, length - done);
                assertTrue(n > 0);
                done += n;
            }
            return out;
        } finally {
            accessor.close();
        }
    }

    @Test
    void corruptReplicaIsDetectedReportedAndReadFromAnother() throws Exception {
        int size = HdfsCluster.BLOCK / 2;
        byte[] expected = HdfsCluster.bytes(size, 4242);
        hdfs.write("/corrupt", expected, 3, hdfs.cluster.getDataNodes().get(0), hdfs.cluster.getDataNodes().get(1),
                withoutPlugin);
        LocatedBlock block = locations("/corrupt", size, 3);
        java.util.Set<Integer> served = new java.util.HashSet<>();
        RdmaDataNodePlugin.running().forEach(p -> served.add(p.dataNode().getXferPort()));
        int corrupted = 0;
        int intact = 0;
        for (int dn = 0; dn < hdfs.cluster.getDataNodes().size(); dn++) {
            java.io.File replica = hdfs.cluster.getBlockFile(dn, block.getBlock());
            if (replica == null) {
                continue;
            }
            if (!served.contains(hdfs.cluster.getDataNodes().get(dn).getXferPort())) {
                intact++; // the replica HDFS's own reader will find good
                continue;
            }
            try (java.io.RandomAccessFile file = new java.io.RandomAccessFile(replica, "rw")) { // flip a byte in place
                file.seek(1000);
                int b = file.read();
                file.seek(1000);
                file.write(b ^ 0xff);
            }
            corrupted++;
        }
        assertTrue(corrupted > 0 && intact > 0, corrupted + " replicas corrupted on plug-in DataNodes, " + intact + " intact");
        long mismatches = counter("hdfs.client.checksum.mismatches");
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/corrupt"))) {
            assertArrayEquals(expected, HdfsCluster.readAll(in, 65536), "the bytes of the good replica");
        }
        // caught by the chunk sums, or first by the sampled range CRC32C (derived from the same stored sums)
        assertTrue(counter("hdfs.client.checksum.mismatches") > mismatches, "the RDMA reader caught the flipped byte");
        assertTrue(counter("hdfs.client.fallback.CHECKSUM") > 0);
    }

    /** The block list of {@code path} once its first block has {@code replicas} locations (block reports are asynchronous). */
    private static LocatedBlock locations(String path, long size, int replicas) throws Exception {
        LocatedBlock[] last = new LocatedBlock[1];
        Polling.waitUntil(() -> {
            last[0] = ((DistributedFileSystem) hdfs.stock).getClient().getLocatedBlocks(path, 0, size).getLocatedBlocks().get(0);
            return last[0].getLocations().length >= replicas;
        }, Duration.ofSeconds(20), () -> path + " having " + replicas + " replicas; it has "
                + (last[0] == null ? "no block list" : last[0].getLocations().length));
        assertEquals(replicas, last[0].getLocations().length, path + " replicas");
        return last[0];
    }

    @Test
    void aServiceThatCannotStartLeavesTheDataNodeServingOverTcpAndSaysSo() throws Exception {
        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getByName("127.0.0.1"))) {
            org.apache.hadoop.conf.Configuration bad = new org.apache.hadoop.conf.Configuration(hdfs.cluster.getConfiguration(0));
            bad.setInt("dfs.datanode.rdma.port", taken.getLocalPort());
            hdfs.cluster.startDataNodes(bad, 1, true, null, null);
            hdfs.cluster.waitActive();
            DataNode failed = hdfs.cluster.getDataNodes().get(hdfs.cluster.getDataNodes().size() - 1);
            javax.management.ObjectName bean = new javax.management.ObjectName(RdmaDataNodePlugin.beanName(failed.getXferPort()));
            javax.management.MBeanServer jmx = java.lang.management.ManagementFactory.getPlatformMBeanServer();
            assertEquals("FAILED", jmx.getAttribute(bean, "State"));
            assertTrue(((String) jmx.getAttribute(bean, "Error")).length() > 0);
            assertEquals(0, jmx.getAttribute(bean, "Port"));
            byte[] expected = HdfsCluster.bytes(5000, 5000);
            hdfs.write("/on-failed", expected, 1, failed);
            long rdmaBytes = counter("hdfs.client.rdma.bytes");
            try (FSDataInputStream in = hdfs.rdma.open(new Path("/on-failed"))) {
                assertArrayEquals(expected, HdfsCluster.readAll(in, 4096));
            }
            assertEquals(rdmaBytes, counter("hdfs.client.rdma.bytes"), "read over TCP");
        }
    }

    @Test
    void aServiceWhoseTransportDiesSaysFailedAndWhyAndReadsGoOverTcp() throws Exception {
        org.apache.hadoop.conf.Configuration faulty = new org.apache.hadoop.conf.Configuration(hdfs.cluster.getConfiguration(0));
        faulty.set("dfs.datanode.rdma.provider", FaultyProvider.NAME);
        String die = FaultyProvider.PREFIX + FaultyProvider.DIE_AFTER_REQUESTS;
        System.setProperty(die, "1"); // read when the node is made: only this DataNode's node is armed
        try {
            hdfs.cluster.startDataNodes(faulty, 1, true, null, null);
            hdfs.cluster.waitActive();
        } finally {
            System.clearProperty(die);
        }
        DataNode dying = hdfs.cluster.getDataNodes().get(hdfs.cluster.getDataNodes().size() - 1);
        javax.management.ObjectName bean = new javax.management.ObjectName(RdmaDataNodePlugin.beanName(dying.getXferPort()));
        javax.management.MBeanServer jmx = java.lang.management.ManagementFactory.getPlatformMBeanServer();
        assertEquals("RUNNING", jmx.getAttribute(bean, "State"));
        byte[] expected = HdfsCluster.bytes(7000, 7000);
        hdfs.write("/on-dying", expected, 1, dying);
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/on-dying"))) {
            assertArrayEquals(expected, HdfsCluster.readAll(in, 4096), "the first read is served, or falls back");
        }
        Polling.waitUntil(() -> "FAILED".equals(jmx.getAttribute(bean, "State")), Duration.ofSeconds(30),
                () -> "the bean of a service whose transport died says FAILED");
        assertTrue(((String) jmx.getAttribute(bean, "Error")).contains("transport"), "and says why");
        assertEquals(0, jmx.getAttribute(bean, "Port"));
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/on-dying"))) {
            assertArrayEquals(expected, HdfsCluster.readAll(in, 4096));
        }
        assertEquals(rdmaBytes, counter("hdfs.client.rdma.bytes"), "read over TCP");
    }

    /**
     * A READ key the DataNode's provider refuses is asked for again with the block token, at most twice (README,
     * "Who may READ"), then the block is read over TCP. The DataNode's node hands out every peer key with an rkey it
     * never made, so the READ and the READs after both new grants are refused. (That a refused key granted anew is
     * READ is RdmaBlockStoreClientTest's, where the READs' keys are spoiled on the reader: here a new grant may hand
     * out the same spoiled key again while the server has yet to see its channel close.) The DataNode is stopped
     * after, so no later test writes to it.
     */
    @Test
    void aRefusedKeyIsGrantedAgainAtMostTwiceThenTheBlockIsReadOverTcp() throws Exception {
        int maxRegrants = 2;
        org.apache.hadoop.conf.Configuration faulty = new org.apache.hadoop.conf.Configuration(hdfs.cluster.getConfiguration(0));
        faulty.set("dfs.datanode.rdma.provider", FaultyProvider.NAME);
        String spoil = FaultyProvider.PREFIX + FaultyProvider.GRANT_UNKNOWN_KEYS;
        System.setProperty(spoil, String.valueOf(Integer.MAX_VALUE)); // read when the node is made: this DataNode's only
        try {
            hdfs.cluster.startDataNodes(faulty, 1, true, null, null);
            hdfs.cluster.waitActive();
        } finally {
            System.clearProperty(spoil);
        }
        int index = hdfs.cluster.getDataNodes().size() - 1;
        DataNode refusing = hdfs.cluster.getDataNodes().get(index);
        try {
            byte[] expected = HdfsCluster.bytes(7000, 7100);
            hdfs.write("/keys-refused", expected, 1, refusing);
            long regrants = counter("hdfs.client.regrants");
            long refused = counter("hdfs.client.fallback.KEY_REFUSED");
            long rdmaBytes = counter("hdfs.client.rdma.bytes");
            try (FSDataInputStream in = hdfs.rdma.open(new Path("/keys-refused"))) {
                assertArrayEquals(expected, HdfsCluster.readAll(in, 4096));
            }
            assertEquals(maxRegrants, counter("hdfs.client.regrants") - regrants, "two new grants, no more");
            assertEquals(1, counter("hdfs.client.fallback.KEY_REFUSED") - refused, "then the block went over TCP");
            assertEquals(rdmaBytes, counter("hdfs.client.rdma.bytes"), "no byte of it over RDMA");
        } finally {
            hdfs.cluster.stopDataNode(index);
        }
    }

    @Test
    void idleRegionsAreReleased() throws Exception {
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/f" + HdfsCluster.BLOCK))) {
            HdfsCluster.readAll(in, 65536);
        }
        assertTrue(RdmaDataNodePlugin.running().stream().mapToLong(RdmaDataNodePlugin::getRegisteredBytes).sum() > 0);
        Polling.waitUntil(() -> RdmaDataNodePlugin.running().stream().mapToInt(RdmaDataNodePlugin::getRegions).sum() == 0,
                Duration.ofSeconds(20), "every region idle for dfs.datanode.rdma.idleRelease released");
        assertEquals(0, RdmaDataNodePlugin.running().stream().mapToInt(RdmaDataNodePlugin::getRegions).sum(),
                "regions idle for dfs.datanode.rdma.idleRelease are deregistered");
        assertEquals(0, RdmaDataNodePlugin.running().stream().mapToLong(RdmaDataNodePlugin::getRegisteredBytes).sum());
    }

    @Test
    void appendedFileIsReadWithItsNewBytesNeverStaleOnes() throws Exception {
        byte[] first = HdfsCluster.bytes(HdfsCluster.BLOCK + 1000, 31);
        byte[] more = HdfsCluster.bytes(5000, 32);
        byte[] all = new byte[first.length + more.length];
        System.arraycopy(first, 0, all, 0, first.length);
        System.arraycopy(more, 0, all, first.length, more.length);
        hdfs.write("/append", first, 2, hdfs.cluster.getDataNodes().get(0), hdfs.cluster.getDataNodes().get(1));
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/append"))) {
            assertArrayEquals(first, HdfsCluster.readAll(in, 65536));
        }
        try (org.apache.hadoop.fs.FSDataOutputStream out = hdfs.stock.append(new Path("/append"))) {
            out.write(more);
            out.hflush();
            // the last block is being written: HDFS's own reader serves it, with the flushed bytes
            try (FSDataInputStream in = hdfs.rdma.open(new Path("/append"))) {
                assertArrayEquals(all, HdfsCluster.readAll(in, 65536));
            }
        }
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/append"))) {
            assertArrayEquals(all, HdfsCluster.readAll(in, 65536), "the appended block, new generation stamp");
        }
        assertEquals(all.length, counter("hdfs.client.rdma.bytes") - rdmaBytes, "once closed, all of it through RDMA");
    }

    @Test
    void encryptedTransferInTheClientsConfigurationIsReadOverTcpUnlessTheOperatorOptsIn() throws IOException {
        int size = HdfsCluster.BLOCK + 1;
        Configuration encrypted = new Configuration(hdfs.rdmaConf);
        encrypted.setBoolean("dfs.encrypt.data.transfer", true);
        long declined = counter("hdfs.client.declined");
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        try (FileSystem fs = FileSystem.newInstance(hdfs.cluster.getURI(), encrypted);
             FSDataInputStream in = fs.open(new Path("/f" + size))) {
            assertArrayEquals(HdfsCluster.bytes(size, size), HdfsCluster.readAll(in, 65536));
        }
        assertTrue(counter("hdfs.client.declined") > declined, "the accessor declined: HDFS read over TCP");
        assertEquals(rdmaBytes, counter("hdfs.client.rdma.bytes"), "no byte through RDMA");

        encrypted.setBoolean("dfs.rdma.encryption.allowPlaintext", true);
        try (FileSystem fs = FileSystem.newInstance(hdfs.cluster.getURI(), encrypted);
             FSDataInputStream in = fs.open(new Path("/f" + size))) {
            assertArrayEquals(HdfsCluster.bytes(size, size), HdfsCluster.readAll(in, 65536));
        }
        assertEquals(size, counter("hdfs.client.rdma.bytes") - rdmaBytes, "opted in: every byte through RDMA");
    }

    @Test
    void unknownBlockIsDeclined() {
        assertNull(new RdmaReplicaAccessorBuilder().setFileName("/f1").setBlock(123456789L, "BP-none")
                .setGenerationStamp(1).setVisibleLength(10).setConfiguration(hdfs.rdmaConf).build());
    }

    @Test
    void aMisconfiguredClientFailsItsReadsNamingTheKeyInsteadOfReadingOverTcp() throws IOException {
        int size = HdfsCluster.BLOCK + 1;
        long configErrors = counter("hdfs.client.configErrors");
        String[][] cases = {
            {"dfs.rdma.readahaed", "4m", "unknown key dfs.rdma.readahaed (did you mean dfs.rdma.readahead?)"},
            {"dfs.rdma.readahead", "16m", "dfs.rdma.readahead = '16m': expected a byte size like 64k, 8m, 1g between 64k and 8m"}};
        for (String[] bad : cases) {
            Configuration conf = new Configuration(hdfs.rdmaConf);
            conf.set(bad[0], bad[1]);
            String expected = bad[2] + " (HDFS client settings are listed in conf/configuration.md)";
            try (FileSystem fs = FileSystem.newInstance(hdfs.cluster.getURI(), conf);
                 FSDataInputStream in = fs.open(new Path("/f" + size))) {
                ConfigException sequential = assertThrows(ConfigException.class, () -> in.read(new byte[100]));
                assertEquals(expected, sequential.getMessage());
                ConfigException positioned = assertThrows(ConfigException.class, () -> in.readFully(size - 10, new byte[10]));
                assertEquals(expected, positioned.getMessage());
                ConfigException buffer = assertThrows(ConfigException.class, () -> in.read(java.nio.ByteBuffer.allocate(10)));
                assertEquals(expected, buffer.getMessage());
            }
        }
        // counted once per block reader HDFS asked for: at least the sequential and the positioned one of each case
        assertTrue(counter("hdfs.client.configErrors") >= configErrors + 2L * cases.length);
        // fixed, the same reads work (the bad settings changed nothing for this JVM's other clients)
        try (FSDataInputStream in = hdfs.rdma.open(new Path("/f" + size))) {
            assertArrayEquals(HdfsCluster.bytes(size, size), HdfsCluster.readAll(in, 65536));
        }
    }
}

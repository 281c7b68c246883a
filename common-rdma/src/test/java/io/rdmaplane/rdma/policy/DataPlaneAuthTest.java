package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.rdmaplane.rdma.policy.ControlFrame.Type;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.Polling;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.EnumSet;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The data plane is authenticated and keys are bound to their peer: an outsider speaking the
 * transport and the policy protocol by hand READs nothing it is not entitled to, on either
 * channel kind, whatever valid rkey it holds.
 */
class DataPlaneAuthTest {
    private static final int WAIT = 30;
    private static final int SIZE = 16 << 10;
    private static final byte[] SECRET = "app-secret".getBytes(StandardCharsets.US_ASCII);

    private Node attackerNode;
    private MemoryRegion attackerLanding;

    @BeforeEach
    void attacker() throws TransportException {
        attackerNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
        attackerLanding = attackerNode.register(ByteBuffer.allocateDirect(SIZE), EnumSet.of(Access.LOCAL_WRITE));
    }

    @AfterEach
    void closeAttacker() {
        attackerNode.close();
    }

    @Test
    void aChannelThatOnlyCompletedTheTransportHelloReadsNothingFromAServerWithASecret() throws Exception {
        try (PolicyFixture f = fixture(SECRET)) {
            RemoteBlock block = f.exposeBlock(SIZE, 1);
            Outsider outsider = connect(f);
            assertRefused(outsider.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
        }
    }

    @Test
    void aDataChannelInItsHandshakeWindowReadsNothing() throws Exception {
        try (PolicyFixture f = fixture(SECRET)) {
            RemoteBlock block = f.exposeBlock(SIZE, 2);
            Outsider outsider = connect(f);
            byte[] nonce = Auth.nonce();
            outsider.send(hello(TrafficClass.DATA, nonce, true));
            assertEquals(Type.CHALLENGE, outsider.next().type(), "the server challenges the outsider");
            // The handshake is open (up to handshakeTimeout): the outsider cannot prove, but tries to READ now.
            assertRefused(outsider.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
        }
    }

    @Test
    void aPeerWithoutTheSecretReadsNothingEvenRightAfterItsHello() throws Exception {
        try (PolicyFixture f = fixture(SECRET)) {
            RemoteBlock block = f.exposeBlock(SIZE, 3);
            Outsider outsider = connect(f);
            // Pipelined: the READ request is on the wire right behind the HELLO the server rejects.
            outsider.send(hello(TrafficClass.DATA, Auth.nonce(), false));
            CompletableFuture<Void> read = outsider.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0);
            assertThrows(ExecutionException.class, () -> read.get(WAIT, TimeUnit.SECONDS));
            assertAllZero(attackerLanding);
        }
    }

    @Test
    void anAuthenticatedControlChannelReadsNothingWhileAnAuthenticatedDataChannelReads() throws Exception {
        try (PolicyFixture f = fixture(SECRET)) {
            RemoteBlock block = f.exposeBlock(SIZE, 4);
            UUID instance = UUID.randomUUID();
            f.server.grants(instance).grant(block.rkey()); // refused on control for being control, not for want of a grant
            Outsider control = connect(f);
            handshake(control, TrafficClass.CONTROL, instance, SECRET);
            assertRefused(control.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));

            Outsider data = connect(f);
            handshake(data, TrafficClass.DATA, instance, SECRET);
            data.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(attackerLanding.buffer()), "the peer with the secret READs the block");
        }
    }

    @Test
    void withoutASecretTheDataPlaneIsOpenButOnlyAfterTheHandshake() throws Exception {
        try (PolicyFixture f = fixture(null)) {
            RemoteBlock block = f.exposeBlock(SIZE, 5);
            Outsider early = connect(f);
            assertRefused(early.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));

            UUID instance = UUID.randomUUID();
            f.server.grants(instance).grant(block.rkey());
            Outsider peer = connect(f);
            handshake(peer, TrafficClass.DATA, instance, null);
            peer.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(attackerLanding.buffer()));
        }
    }

    @Test
    void aReadWithAnotherPeersValidRkeyIsRefusedWithOrWithoutASecret() throws Exception {
        for (byte[] secret : new byte[][] {SECRET, null}) {
            try (PolicyFixture f = fixture(secret)) {
                RemoteBlock block = f.exposeBlock(SIZE, 6); // granted to the fixture's own client
                UUID owner = UUID.randomUUID();
                f.server.grants(owner).grant(block.rkey());
                Outsider other = connect(f);
                handshake(other, TrafficClass.DATA, UUID.randomUUID(), secret);
                assertRefused(other.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));

                Outsider granted = connect(f);
                handshake(granted, TrafficClass.DATA, owner, secret);
                granted.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
                assertEquals(block.crc32c(), PolicyFixture.crc(attackerLanding.buffer()), "the peer it was granted to READs it");
                attackerLanding.buffer().put(new byte[SIZE]);
            }
        }
    }

    @Test
    void aServerReadsNothingOfAClientThatConnectedToIt() throws Exception {
        // The outsider plays a server (e.g. an address it slipped into a registry) and READs back
        // over the channel the victim's policy client opened to it.
        try (PolicyFixture f = fixture(null)) {
            MemoryRegion victimRegion = f.clientNode.register(ByteBuffer.allocateDirect(SIZE).put(0, (byte) 7));
            AtomicReference<Channel> opened = new AtomicReference<>();
            attackerNode.listen(channel -> {
                opened.set(channel);
                return new ChannelHandler() { };
            });
            f.client.peer(attackerNode.localAddress());
            Channel back = Polling.waitFor(opened::get, Duration.ofSeconds(WAIT), "the victim's channel to the outsider");
            Polling.waitUntil(back::isOpen, Duration.ofSeconds(WAIT), "the channel open");
            assertRefused(back.read(victimRegion.address(), victimRegion.rkey(), SIZE, attackerLanding, 0));
        }
    }

    @Test
    void aClientGoesByAnotherIdAtEachServerSoNoServerCanClaimItsGrantsElsewhere() throws Exception {
        AtomicReference<UUID> atServer = new AtomicReference<>();
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), (peer, request) -> {
            atServer.set(peer.instance());
            return request;
        })) {
            f.server.markReady();
            f.peer().request(ByteBuffer.allocate(1)).get(WAIT, TimeUnit.SECONDS);
            AtomicReference<UUID> atOutsider = new AtomicReference<>();
            attackerNode.listen(channel -> new ChannelHandler() {
                @Override
                public void onMessage(Channel ch, ByteBuffer message) {
                    try {
                        atOutsider.compareAndSet(null, Handshake.Hello.decode(ControlFrame.decode(message).payload()).instance());
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }
            });
            f.client.peer(attackerNode.localAddress());
            UUID shown = Polling.waitFor(atOutsider::get, Duration.ofSeconds(WAIT), "the client's HELLO at the outsider");
            assertNotEquals(atServer.get(), shown, "the outsider must not learn the id the server knows the client by");
        }
    }

    // ---------------------------------------------------------------- the outsider's tools

    private static PolicyFixture fixture(byte[] secret) throws TransportException {
        PolicyOptions options = PolicyFixture.fast().withSecret(secret);
        PolicyFixture f = new PolicyFixture(options, options, PolicyFixture.echo());
        f.server.markReady();
        return f;
    }

    /** A channel from the outsider's node to the server with transport HELLO done, and what arrives on it. */
    private record Outsider(Channel channel, BlockingQueue<ControlFrame> frames) {
        void send(ByteBuffer message) throws Exception {
            channel.send(message).get(WAIT, TimeUnit.SECONDS);
        }

        ControlFrame next() throws InterruptedException {
            ControlFrame frame = frames.poll(WAIT, TimeUnit.SECONDS);
            assertNotNull(frame, "no control frame from the server within " + WAIT + " s");
            return frame;
        }
    }

    private Outsider connect(PolicyFixture f) throws Exception {
        BlockingQueue<ControlFrame> frames = new LinkedBlockingQueue<>();
        Channel channel = attackerNode.connect(f.serverNode.localAddress(), 16, new ChannelHandler() {
            @Override
            public void onMessage(Channel ch, ByteBuffer message) {
                try {
                    frames.add(ControlFrame.decode(message));
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }
        }).get(WAIT, TimeUnit.SECONDS);
        return new Outsider(channel, frames);
    }

    private static ByteBuffer hello(TrafficClass trafficClass, byte[] nonce, boolean wantsAuth) {
        return hello(trafficClass, UUID.randomUUID(), nonce, wantsAuth);
    }

    private static ByteBuffer hello(TrafficClass trafficClass, UUID instance, byte[] nonce, boolean wantsAuth) {
        return new ControlFrame(Type.HELLO, 0, new Handshake.Hello(trafficClass, instance, nonce, wantsAuth).encode()).encode();
    }

    /** The whole handshake by hand (with the secret, if not null) up to READY. */
    private static void handshake(Outsider outsider, TrafficClass trafficClass, UUID instance, byte[] secret) throws Exception {
        byte[] nonce = Auth.nonce();
        outsider.send(hello(trafficClass, instance, nonce, secret != null));
        if (secret == null) {
            assertEquals(Type.READY, outsider.next().type());
            return;
        }
        ControlFrame challenge = outsider.next();
        assertEquals(Type.CHALLENGE, challenge.type());
        byte[] serverNonce = Handshake.Challenge.decode(challenge.payload()).nonce();
        outsider.send(new ControlFrame(Type.PROOF, 0, new Handshake.Proof(Auth.clientProof(secret, nonce, serverNonce)).encode())
                .encode());
        assertEquals(Type.READY, outsider.next().type());
    }

    private void assertRefused(CompletableFuture<Void> read) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> read.get(WAIT, TimeUnit.SECONDS));
        assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, e.getCause()).status(),
                () -> "expected the READ refused, was " + e.getCause());
        assertAllZero(attackerLanding);
    }

    private static void assertAllZero(MemoryRegion region) {
        assertArrayEquals(new byte[region.length()], bytes(region), "no byte of the region reached the outsider");
    }

    private static byte[] bytes(MemoryRegion region) {
        byte[] out = new byte[region.length()];
        region.buffer().duplicate().get(out);
        return out;
    }
}

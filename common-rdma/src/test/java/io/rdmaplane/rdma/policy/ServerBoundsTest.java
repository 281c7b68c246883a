package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.policy.ControlFrame.Type;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.Polling;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * What a policy server holds for clients is bounded: an outsider's 1000 connections that never
 * authenticate, or authenticate and then sit idle, are not all kept (and not for long), and the
 * answers kept for re-sent requests are bounded per peer and go when the peer does. Each time a
 * legitimate client is still served afterwards. Attackers here are raw channels on loopback that
 * speak the handshake by hand and never reconnect.
 */
class ServerBoundsTest {
    private static final int ATTACKERS = 1000;
    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final byte[] SECRET = "server-bounds-test-secret".getBytes(StandardCharsets.UTF_8);

    @Test
    void aThousandConnectionsThatNeverAuthenticateAreNotAllKeptAndAllGoWithinTheAuthTimeout() throws Exception {
        PolicyOptions options = PolicyFixture.fast().withSecret(SECRET);
        ServerLimits limits = ServerLimits.defaults().withAuthTimeout(Duration.ofSeconds(10)); // longer than the attack takes
        NodeOptions nodeOptions = NodeOptions.loopback().withOperationTimeout(Duration.ofSeconds(5));
        try (Node serverNode = TcpProvider.INSTANCE.createNode(nodeOptions);
             Node attackerNode = TcpProvider.INSTANCE.createNode(nodeOptions);
             PolicyServer server = new PolicyServer(serverNode, options, limits, new PolicyMetrics(), (peer, r) -> r).start()) {
            server.markReady();
            List<Channel> opened = attack(attackerNode, serverNode.localAddress(), true);
            // All from 127.0.0.1: at most the per-address limit were taken in; the rest were refused at once.
            assertTrue(opened.size() <= limits.maxUnauthenticatedPerAddress(),
                    opened.size() + " of " + ATTACKERS + " unauthenticated channels were kept");
            assertTrue(server.unauthenticatedChannels() <= limits.maxUnauthenticatedPerAddress());
            Polling.waitUntil(() -> opened.stream().noneMatch(Channel::isOpen) && server.unauthenticatedChannels() == 0, WAIT,
                    () -> "every unauthenticated channel closed after server.authTimeout; "
                            + opened.stream().filter(Channel::isOpen).count() + " open, "
                            + server.unauthenticatedChannels() + " counted");
            assertServesALegitimateClient(serverNode, options);
        }
    }

    @Test
    void aThousandAuthenticatedButIdleConnectionsAreClosedAfterTheIdleTimeout() throws Exception {
        PolicyOptions options = PolicyFixture.fast();
        NodeOptions nodeOptions = NodeOptions.loopback().withOperationTimeout(Duration.ofSeconds(5));
        try (Node serverNode = TcpProvider.INSTANCE.createNode(nodeOptions.withIdleTimeout(Duration.ofSeconds(1)));
             Node attackerNode = TcpProvider.INSTANCE.createNode(nodeOptions);
             PolicyServer server = new PolicyServer(serverNode, options, new PolicyMetrics(), (peer, r) -> r).start()) {
            server.markReady();
            List<Channel> opened = attack(attackerNode, serverNode.localAddress(), false);
            assertTrue(opened.size() > 0, "no secret: the HELLO alone authenticates, so channels open");
            Polling.waitUntil(() -> opened.stream().noneMatch(Channel::isOpen), WAIT,
                    () -> "every idle channel closed after idleTimeout; " + opened.stream().filter(Channel::isOpen).count()
                            + " of " + opened.size() + " still open");
            assertEquals(0, server.unauthenticatedChannels());
            assertServesALegitimateClient(serverNode, options);
        }
    }

    @Test
    void answersKeptForReSentRequestsAreBoundedPerPeerAndGoWithThePeer() throws Exception {
        int kept = 8;
        PolicyOptions options = PolicyFixture.fast();
        ServerLimits limits = ServerLimits.defaults().withAnswersKeptPerPeer(kept);
        try (Node serverNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             Node clientNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyServer server = new PolicyServer(serverNode, options, limits, new PolicyMetrics(),
                     (peer, request) -> ByteBuffer.allocate(8 << 10)).start()) { // answers of 8 KiB each
            server.markReady();
            for (int client = 0; client < 16; client++) {
                try (PolicyClient c = new PolicyClient(clientNode, options, new PolicyMetrics())) { // a new instance id each
                    PeerConnection peer = c.peer(serverNode.localAddress());
                    for (int i = 0; i < 3 * kept; i++) {
                        peer.request(ByteBuffer.wrap(new byte[] {(byte) i})).get(WAIT.toSeconds(), TimeUnit.SECONDS);
                        assertTrue(server.cachedAnswers() <= kept, server.cachedAnswers() + " answers kept for one peer");
                    }
                }
                Polling.waitUntil(() -> server.cachedAnswers() == 0, WAIT,
                        () -> "the answers of a peer that left are dropped; " + server.cachedAnswers() + " kept");
            }
        }
    }

    /**
     * Opens {@link #ATTACKERS} raw channels to the server and sends each a policy HELLO (asking for
     * authentication or not) and nothing after; returns the channels the server took in.
     */
    private static List<Channel> attack(Node attacker, InetSocketAddress server, boolean wantsAuth) throws Exception {
        List<CompletableFuture<Channel>> connecting = new ArrayList<>();
        for (int i = 0; i < ATTACKERS; i++) {
            connecting.add(attacker.connect(server, 4, new ChannelHandler() {
            }));
        }
        List<Channel> opened = new ArrayList<>();
        for (CompletableFuture<Channel> c : connecting) {
            try {
                opened.add(c.get(WAIT.toSeconds(), TimeUnit.SECONDS));
            } catch (java.util.concurrent.ExecutionException refused) {
                // the server closed it before the transport handshake ended: not kept
            }
        }
        for (Channel channel : opened) {
            ByteBuffer hello = new Handshake.Hello(TrafficClass.CONTROL, UUID.randomUUID(), Auth.nonce(), wantsAuth).encode();
            channel.send(new ControlFrame(Type.HELLO, 0, hello).encode());
        }
        return opened;
    }

    private static void assertServesALegitimateClient(Node serverNode, PolicyOptions options) throws Exception {
        try (Node clientNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyClient client = new PolicyClient(clientNode, options, new PolicyMetrics())) {
            ByteBuffer answer = client.peer(serverNode.localAddress()).request(ByteBuffer.wrap(new byte[] {42}))
                    .get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(42, answer.get(0));
        }
    }
}

package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A peer whose port turns connections away (a killed DataNode): with {@link PolicyClient.Liveness#REFUSED_IS_GONE}
 * its callers fall back after the first refused attempt; with {@link PolicyClient.Liveness#UNKNOWN} the channel goes
 * through its reconnect attempts (a peer that may come back at the same address). Only the control channel's refusal
 * counts: a live peer turns a data connect away too (verbs: one naming a session the peer has just dropped).
 */
class RefusedConnectTest {
    private static final int MAX_ATTEMPTS = 6;

    /** A loopback port where nothing listens: connects to it are refused. */
    private static InetSocketAddress deadAddress() throws Exception {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return new InetSocketAddress("127.0.0.1", socket.getLocalPort());
        }
    }

    /** Asks {@code dead} for something; returns the failure and the liveness questions asked, as "refused" flags. */
    private static List<Boolean> requestFails(PolicyClient.Liveness liveness, Duration backoff, InetSocketAddress dead) throws Exception {
        List<Boolean> asked = new CopyOnWriteArrayList<>();
        PolicyOptions options = PolicyOptions.defaults().withTimeouts(Duration.ofMillis(200), Duration.ofSeconds(5), Duration.ofMillis(500))
                .withReconnect(backoff, Duration.ZERO, backoff, MAX_ATTEMPTS);
        try (Node node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyClient client = new PolicyClient(node, options, new PolicyMetrics(), new PolicyClient.Listener() { }, (peer, refused) -> {
                 asked.add(refused);
                 return liveness.declaredLost(peer, refused);
             })) {
            ExecutionException failed = assertThrows(ExecutionException.class,
                    () -> client.peer(dead).request(ByteBuffer.wrap(new byte[] {1})).get(60, TimeUnit.SECONDS));
            assertInstanceOf(PeerUnavailableException.class, failed.getCause(), "callers fall back");
            assertTrue(client.peer(dead).isFailed(), "the peer is given up");
        }
        return asked;
    }

    @Test
    void aRefusedConnectGivesThePeerUpAtOnceWhenRefusedMeansGone() throws Exception {
        // A backoff of 2 s: going through the attempts would take 10 s; the first refusal ends it.
        long t0 = System.nanoTime();
        List<Boolean> asked = requestFails(PolicyClient.Liveness.REFUSED_IS_GONE, Duration.ofSeconds(2), deadAddress());
        long millis = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("refused connect, REFUSED_IS_GONE: failed after %d ms, %d liveness question(s)%n", millis, asked.size());
        assertEquals(List.of(true), asked, "one question, after the first attempt, which was refused");
    }

    @Test
    void aRefusedDataConnectToAPeerWhoseControlChannelIsUpIsTriedAgainNotTakenForThePeerGone() throws Exception {
        List<Boolean> asked = new CopyOnWriteArrayList<>();
        try (PolicyFixture fixture = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), PolicyFixture.echo());
             PolicyClient client = new PolicyClient(fixture.clientNode, PolicyFixture.fast(), new PolicyMetrics(),
                     new PolicyClient.Listener() { }, (peer, refused) -> {
                         asked.add(refused);
                         return PolicyClient.Liveness.REFUSED_IS_GONE.declaredLost(peer, refused);
                     })) {
            fixture.server.markReady();
            InetSocketAddress server = fixture.serverNode.localAddress();
            RemoteBlock block = fixture.exposeBlock(4096, 3, client);
            fixture.clientNode.refuseConnects(Lane.BULK, 1); // the data channel's first connect: refused

            MemoryRegion landing = fixture.landing(4096);
            client.peer(server).read(block, landing, 0).get(30, TimeUnit.SECONDS);

            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()), "the READ landed the block's bytes");
            assertFalse(client.peer(server).isFailed(), "the peer is not given up");
            assertEquals(List.of(false), asked, "the refused data connect was asked about as not refused");
        }
    }

    @Test
    void aRefusedConnectKeepsItsAttemptsWhenNobodySaysThePeerIsGone() throws Exception {
        List<Boolean> asked = requestFails(PolicyClient.Liveness.UNKNOWN, Duration.ofMillis(5), deadAddress());
        assertTrue(asked.size() >= MAX_ATTEMPTS - 1, "every attempt failed and was asked about: " + asked);
        assertTrue(asked.stream().allMatch(Boolean::booleanValue), "each attempt was seen refused: " + asked);
    }
}

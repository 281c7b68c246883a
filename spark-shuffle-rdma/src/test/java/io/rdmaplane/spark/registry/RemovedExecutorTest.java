package io.rdmaplane.spark.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.policy.PeerUnavailableException;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.TrafficClass;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * An executor Spark removed (killed, lost): its connection is refused, and the reader used to go
 * through every reconnect attempt (8, ~16 s with the defaults) before falling back. The driver's
 * registry now answers REMOVED for it, and the reader's policy client, asking after the first
 * refused attempt, gives the peer up at once.
 */
class RemovedExecutorTest {
    private static final int MAX_ATTEMPTS = 8;

    private static PolicyOptions options(Duration backoff) {
        return PolicyOptions.defaults().withTimeouts(Duration.ofMillis(200), Duration.ofSeconds(5), Duration.ofMillis(500))
                .withReconnect(backoff, Duration.ZERO, backoff.multipliedBy(2), MAX_ATTEMPTS);
    }

    /** A loopback address where nothing listens: connections to it are refused, as to a killed executor. */
    private static InetSocketAddress deadAddress() throws Exception {
        try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return new InetSocketAddress("127.0.0.1", socket.getLocalPort());
        }
    }

    @Test
    void aRefusedConnectionToARemovedExecutorFallsBackAfterOneAttempt() throws Exception {
        PolicyOptions quick = options(Duration.ofMillis(10));
        // A long backoff: had the reader not heard that the executor is gone, it would wait through 7 of them.
        PolicyOptions slow = options(Duration.ofMillis(500));
        InetSocketAddress dead = deadAddress();
        AtomicInteger attempts = new AtomicInteger();
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), quick, new PolicyMetrics());
             RegistryClient executor = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick, new PolicyMetrics(),
                     registry.address());
             RegistryClient reducer = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick, new PolicyMetrics(),
                     registry.address());
             Node readerNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyClient reader = new PolicyClient(readerNode, slow, new PolicyMetrics(), new PolicyClient.Listener() {
                 @Override
                 public void reconnectAttempted(InetSocketAddress peer, TrafficClass trafficClass, int attempt) {
                     if (trafficClass == TrafficClass.CONTROL) {
                         attempts.incrementAndGet();
                     }
                 }
             }, (peer, refused) -> reducer.declaredLost(peer))) {
            executor.register("7", dead);
            assertEquals(Map.of("7", dead), reducer.lookup(List.of("7")), "the reducer found and cached the executor");
            registry.forget("7"); // what the driver's listener does when Spark removes the executor

            ExecutionException failed = assertThrows(ExecutionException.class,
                    () -> reader.peer(dead).request(ByteBuffer.wrap(new byte[] {1})).get(60, TimeUnit.SECONDS));
            assertInstanceOf(PeerUnavailableException.class, failed.getCause());
            assertTrue(reader.peer(dead).isFailed(), "the peer is given up (callers fall back)");
            assertTrue(attempts.get() < 2, "the reader gave up after the first refused connect, not after " + attempts.get()
                    + " more of its " + MAX_ATTEMPTS + " attempts");
            assertNull(reducer.cached("7"), "the reducer dropped the removed executor's cached address");
            assertTrue(RegistryProtocol.decodeLookupAnswer(registry.handle(null, RegistryProtocol.lookup("7"))).removed());
        }
    }

    /** An executor Spark did not remove (e.g. restarting its data node) keeps its reconnect attempts. */
    @Test
    void aRefusedConnectionToALiveExecutorKeepsItsAttempts() throws Exception {
        PolicyOptions quick = options(Duration.ofMillis(5));
        InetSocketAddress dead = deadAddress();
        java.util.Map<TrafficClass, AtomicInteger> attempts = new java.util.concurrent.ConcurrentHashMap<>();
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), quick, new PolicyMetrics());
             RegistryClient reducer = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick, new PolicyMetrics(),
                     registry.address());
             Node readerNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyClient reader = new PolicyClient(readerNode, quick, new PolicyMetrics(), new PolicyClient.Listener() {
                 @Override
                 public void reconnectAttempted(InetSocketAddress peer, TrafficClass trafficClass, int attempt) {
                     attempts.computeIfAbsent(trafficClass, c -> new AtomicInteger()).incrementAndGet();
                 }
             }, (peer, refused) -> reducer.declaredLost(peer))) {
            reducer.register("8", dead);
            assertEquals(Map.of("8", dead), reducer.lookup(List.of("8")));
            ExecutionException failed = assertThrows(ExecutionException.class,
                    () -> reader.peer(dead).request(ByteBuffer.wrap(new byte[] {1})).get(60, TimeUnit.SECONDS));
            assertTrue(!failed.getCause().getMessage().contains("declared lost"), failed.getCause().getMessage());
            // The first channel to give up fails the peer; the other may be closed with it before its last attempt.
            int most = attempts.values().stream().mapToInt(AtomicInteger::get).max().orElse(0);
            assertEquals(MAX_ATTEMPTS - 1, most, "every reconnect attempt was made: " + attempts);
            assertNotNull(reducer.cached("8"), "a live executor's address stays cached");
        }
    }

    /** A REGISTER of a removed id (a stale executor coming back) is refused: Spark never reuses an id. */
    @Test
    void aRemovedIdCannotRegisterAgain() throws Exception {
        PolicyOptions quick = options(Duration.ofMillis(10));
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), quick, new PolicyMetrics());
             RegistryClient executor = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick, new PolicyMetrics(),
                     registry.address())) {
            executor.register("9", new InetSocketAddress("127.0.0.1", 5009));
            registry.forget("9");
            assertEquals(Map.of(), registry.executors());
            RegistrationRefusedException refused = assertThrows(RegistrationRefusedException.class,
                    () -> executor.register("9", new InetSocketAddress("127.0.0.1", 5009)));
            assertTrue(refused.getMessage().contains("removed"), refused.getMessage());
            assertEquals(Map.of(), executor.lookup(List.of("9")), "a removed executor is not found");
        }
    }
}

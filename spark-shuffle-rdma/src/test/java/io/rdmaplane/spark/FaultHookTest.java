package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.config.Conf;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.faulty.FaultyProvider;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.Polling;
import io.rdmaplane.spark.registry.ExecutorRegistry;
import io.rdmaplane.spark.serve.LocateProtocol;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The fault the fallback tests inject into an executor, on a real executor runtime: the executor whose
 * data node comes from the test-only {@code faulty} provider, armed to close after 2 requests, registers,
 * answers 2 LOCATEs, then its data node is closed (connections refused); any other executor is left alone.
 */
class FaultHookTest {
    @Test
    void theNamedExecutorClosesItsDataNodeAfterNLocates() throws Exception {
        Conf conf = SparkRdmaConfig.REGISTRY.bind(Map.of(
                "spark.shuffle.rdma.pool.capacity", "8m",
                "spark.shuffle.rdma.mapOutput.capacity", "8m")::get);
        PolicyOptions policy = PolicyKeysForTest.options(conf);
        FaultyProvider breaksAfterTwo = new FaultyProvider("tcp", node -> node.closeAfterRequests(2));
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), policy, new PolicyMetrics());
             ExecutorRuntime healthy = ExecutorRuntime.start("6", "127.0.0.1", registry.address(), TcpProvider.INSTANCE, conf,
                     null, new PolicyMetrics(), new ShuffleMetrics(), new PolicyClient.Listener() { });
             ExecutorRuntime victim = ExecutorRuntime.start("7", "127.0.0.1", registry.address(), breaksAfterTwo, conf,
                     null, new PolicyMetrics(), new ShuffleMetrics(), new PolicyClient.Listener() { });
             Node clientNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             PolicyClient client = new PolicyClient(clientNode, policy, new PolicyMetrics())) {
            Map<String, InetSocketAddress> known = healthy.lookup(Map.of("6", "127.0.0.1", "7", "127.0.0.1"));
            assertEquals(2, known.size(), "both registered: " + known);
            InetSocketAddress victimAddress = known.get("7");
            InetSocketAddress healthyAddress = known.get("6");

            for (int i = 0; i < 2; i++) {
                // Nothing is published: the answer says "not served", but it is a LOCATE answered all the same.
                // The second answer may lose the race with the closing node; the first always arrives.
                try {
                    assertNotNull(client.peer(victimAddress).request(locate()).get(30, TimeUnit.SECONDS));
                } catch (Exception e) {
                    assertEquals(1, i, "only the last LOCATE may race the fault: " + e);
                }
            }
            awaitRefused(victimAddress);
            assertTrue(accepts(healthyAddress), "the other executor's data node is untouched");
            assertNotNull(client.peer(healthyAddress).request(locate()).get(30, TimeUnit.SECONDS));
        }
    }

    private static java.nio.ByteBuffer locate() {
        return LocateProtocol.encodeRequest(new LocateProtocol.Request(0, List.of(new LocateProtocol.BlockRef(1, 0))));
    }

    private static void awaitRefused(InetSocketAddress address) {
        Polling.waitUntil(() -> !accepts(address), Duration.ofSeconds(30), "the data node at " + address + " refusing connections");
    }

    private static boolean accepts(InetSocketAddress address) {
        try (Socket s = new Socket()) {
            s.connect(address, 2000);
            return true;
        } catch (IOException refused) {
            return false;
        }
    }

    /** The policy options the runtime itself uses. */
    private static final class PolicyKeysForTest {
        static PolicyOptions options(Conf conf) {
            return io.rdmaplane.rdma.config.PolicyKeys.policyOptions(conf, null);
        }
    }
}

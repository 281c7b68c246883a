package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.spark.registry.ExecutorRegistry;
import io.rdmaplane.spark.registry.RegistrationRefusedException;
import io.rdmaplane.spark.registry.RegistryClient;
import java.net.InetSocketAddress;
import java.util.Map;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.junit.jupiter.api.Test;

/** The driver's listener passes Spark's executor removals to the registry, which forgets them. */
class ExecutorRemovalsTest {
    @Test
    void anExecutorSparkRemovedIsForgotten() throws Exception {
        PolicyOptions policy = PolicyOptions.defaults();
        InetSocketAddress at = new InetSocketAddress("127.0.0.1", 5003);
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), policy, new PolicyMetrics());
             RegistryClient executor = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), policy, new PolicyMetrics(),
                     registry.address());
             RegistryClient reducer = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), policy, new PolicyMetrics(),
                     registry.address())) {
            executor.register("3", at);
            new RdmaShuffleManager.ExecutorRemovals(registry)
                    .onExecutorRemoved(new SparkListenerExecutorRemoved(System.currentTimeMillis(), "3", "killed by the test"));
            assertEquals(Map.of(), registry.executors());
            assertEquals(Map.of(), reducer.lookup(Map.of("3", "127.0.0.1")), "a removed executor is not found");
            assertThrows(RegistrationRefusedException.class, () -> executor.register("3", at));
        }
    }
}

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
import io.rdmaplane.rdma.testing.Polling;
import io.rdmaplane.rdma.testing.Skip;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
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

    /**
     * The listener is there from the application's start ({@code spark.extraListeners}), not from its first shuffle:
     * an executor killed (real executor JVMs, {@code local-cluster}) before any shuffle ran is forgotten too.
     */
    @Test
    void anExecutorRemovedBeforeTheFirstShuffleIsForgotten() throws Exception {
        Skip.unless(SparkLine.CURRENT.managerCreatedAfterEnv(), "on this Spark line (3.5) an executor registers with the"
                + " driver's registry at its first shuffle task, so one removed before any shuffle was never registered: nothing to forget");
        Path home = Files.createDirectories(Path.of(System.getProperty("spark.test.home", "target")));
        System.setProperty("spark.test.home", home.toAbsolutePath().toString());
        SparkConf conf = new SparkConf().setMaster("local-cluster[2,1,1024]").setAppName("rdma-removals")
                .set("spark.testing", "1")
                .set("spark.ui.enabled", "false")
                .set("spark.shuffle.manager", SparkJobs.MANAGER)
                .set("spark.executor.extraJavaOptions", System.getProperty("rdma.jvm.module.flags", "") + " -XX:TieredStopAtLevel=1")
                .set("spark.shuffle.rdma.pool.capacity", "16m")
                .set("spark.shuffle.rdma.mapOutput.capacity", "16m");
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            SparkJobs.awaitExecutors(sc, 2, Duration.ofMinutes(2));
            ExecutorRegistry registry = ((RdmaShuffleManager) SparkEnv.get().shuffleManager()).registry;
            // each executor's manager registers itself at its start (Spark 4)
            Polling.waitUntil(() -> registry.executors().keySet().equals(Set.of("0", "1")), Duration.ofMinutes(1),
                    () -> "both executors registered with the driver's registry: " + registry.executors().keySet());
            assertEquals(true, sc.sc().killExecutor("0"));
            Polling.waitUntil(() -> !registry.executors().containsKey("0"), Duration.ofMinutes(1),
                    () -> "the registry forgets executor 0, killed before any shuffle: " + registry.executors().keySet());
        }
    }
}

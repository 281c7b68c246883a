package io.rdmaplane.spark;

import io.rdmaplane.rdma.config.Conf;
import io.rdmaplane.rdma.config.PolicyKeys;
import io.rdmaplane.rdma.config.TransportKeys;
import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.VerbsOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.spark.registry.RegistryClient;
import io.rdmaplane.spark.serve.LocateProtocol;
import io.rdmaplane.spark.serve.MapOutputStore;
import io.rdmaplane.spark.serve.ShuffleBlockServer;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What one executor JVM runs for RDMA shuffle: the data node (provider per configuration) with a
 * {@link ShuffleBlockServer} answering LOCATE for the {@link MapOutputStore}, a registered pool for
 * reduce buffers, the {@link PolicyClient} that READs from other executors, and a client of the
 * driver's registry (on a node of its own, {@code registry.provider}), with which this executor
 * registered its data address, and which tells the policy client when a peer it cannot reach was
 * removed by Spark. Started once: with the executor on Spark 4 (on a thread of its own, see
 * RdmaShuffleManager), on its first RDMA shuffle task on Spark 3.5; a map task needs it only when it
 * commits its output, a reduce task when it starts. Its start also warms up the Arrow framing, which
 * the first map output would otherwise pay for.
 */
final class ExecutorRuntime implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ExecutorRuntime.class);

    private final String executorId;
    private final List<AutoCloseable> opened = new ArrayList<>();
    private Node node;
    private MapOutputStore store;
    private ShuffleBlockServer server;
    private RegisteredMemoryPool pool;
    private PolicyClient policy;
    private RegistryClient registry;
    private final AtomicBoolean closed = new AtomicBoolean();

    private ExecutorRuntime(String executorId) {
        this.executorId = executorId;
    }

    /**
     * Starts everything, registers with the registry at {@code registryAddress}; on any failure
     * closes what it opened and throws.
     */
    static ExecutorRuntime start(String executorId, String bindHost, InetSocketAddress registryAddress,
                                 TransportProvider provider, Conf conf, byte[] secret, PolicyMetrics policyMetrics,
                                 ShuffleMetrics metrics, PolicyClient.Listener listener) throws Exception {
        ExecutorRuntime rt = new ExecutorRuntime(executorId);
        try {
            rt.open(bindHost, registryAddress, provider, conf, secret, policyMetrics, metrics, listener);
            return rt;
        } catch (Exception | Error e) {
            rt.close();
            throw e;
        }
    }

    private void open(String bindHost, InetSocketAddress registryAddress, TransportProvider provider, Conf conf, byte[] secret,
                      PolicyMetrics policyMetrics, ShuffleMetrics metrics, PolicyClient.Listener listener) throws Exception {
        PolicyOptions options = PolicyKeys.policyOptions(conf, secret);
        NodeOptions nodeOptions = TransportKeys.nodeOptions(conf, bindHost);
        node = track(provider.createNode(nodeOptions));
        store = track(new MapOutputStore(node, conf.get(SparkRdmaConfig.MAP_OUTPUT_CAPACITY), metrics,
                conf.get(SparkRdmaConfig.MAP_OUTPUT_MAP_FILES), conf.get(SparkRdmaConfig.MAP_OUTPUT_MAX_PUBLISH_FAILURES)));
        pool = track(new RegisteredMemoryPool(node, TransportKeys.poolOptions(conf)));
        policyMetrics.watchPool("reduce", pool);
        metrics.watchRegistrations(node, pool);
        NodeOptions registryNode = new NodeOptions(new InetSocketAddress(bindHost, 0), nodeOptions.maxMessageSize(),
                nodeOptions.operationTimeout(), nodeOptions.acceptQueueDepth(), nodeOptions.idleTimeout(), VerbsOptions.defaults());
        registry = track(new RegistryClient(Providers.select(conf.get(SparkRdmaConfig.REGISTRY_PROVIDER)), registryNode, options,
                policyMetrics, registryAddress));
        // A refused connection to an executor Spark removed is final: the registry knows, the reader falls back at once.
        policy = track(new PolicyClient(node, options, policyMetrics, listener, (peer, refused) -> registry.declaredLost(peer)));
        server = track(new ShuffleBlockServer(node, options, PolicyKeys.serverLimits(conf), policyMetrics, store,
                conf.get(SparkRdmaConfig.LOCATE_INLINE_THRESHOLD).intValue(),
                Math.min(LocateProtocol.MAX_RESPONSE_BYTES, nodeOptions.maxMessageSize() - 64)));
        server.start();
        registry.register(executorId, server.address());
        store.warmUp(); // off the task path (Spark 4 starts this runtime with the executor): not in its first map task
        LOG.info("RDMA shuffle: executor {} serves shuffle blocks at {} over the {} provider (registry {})", executorId,
                server.address(), node.providerName(), registryAddress);
    }

    private <T extends AutoCloseable> T track(T resource) {
        opened.add(resource);
        return resource;
    }

    String executorId() {
        return executorId;
    }

    String providerName() {
        return node.providerName();
    }

    Node node() {
        return node;
    }

    MapOutputStore store() {
        return store;
    }

    RegisteredMemoryPool pool() {
        return pool;
    }

    PolicyClient policy() {
        return policy;
    }

    /**
     * The RDMA addresses of other executors (id to its BlockManagerId host) that the registry knows
     * on the host Spark knows them by; others are absent.
     */
    Map<String, InetSocketAddress> lookup(Map<String, String> sparkHosts) {
        return registry.lookup(sparkHosts);
    }

    /** Closes in reverse order of opening: server, client, registry client, pool, store, then the node. */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        for (int i = opened.size() - 1; i >= 0; i--) {
            try {
                opened.get(i).close();
            } catch (Exception e) {
                LOG.warn("RDMA shuffle: closing {} failed", opened.get(i), e);
            }
        }
        opened.clear();
    }
}

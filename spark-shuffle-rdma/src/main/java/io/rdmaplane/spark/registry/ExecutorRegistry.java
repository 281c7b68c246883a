package io.rdmaplane.spark.registry;

import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.PolicyServer;
import io.rdmaplane.rdma.policy.ServerLimits;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's registry of executors' RDMA addresses: a {@link PolicyServer} on a node of its own
 * ({@code registry.provider}, tcp by default: control requests only, whatever provider the executors
 * use for data) answering REGISTER and LOOKUP. An executor id is never reused by Spark, so an entry is never replaced by another
 * executor; a re-REGISTER of the same id (a restarted data node) updates it.
 */
public final class ExecutorRegistry implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ExecutorRegistry.class);

    private final Map<String, InetSocketAddress> executors = new ConcurrentHashMap<>();
    private final Node node;
    private final PolicyServer server;

    /** With the {@linkplain ServerLimits#defaults() default server limits}. */
    public ExecutorRegistry(TransportProvider provider, NodeOptions options, PolicyOptions policy, PolicyMetrics metrics)
            throws TransportException {
        this(provider, options, policy, ServerLimits.defaults(), metrics);
    }

    /** Starts listening on {@code options.bindAddress()}; closes what it opened if that fails. */
    public ExecutorRegistry(TransportProvider provider, NodeOptions options, PolicyOptions policy, ServerLimits limits,
                            PolicyMetrics metrics) throws TransportException {
        node = provider.createNode(options);
        try {
            server = new PolicyServer(node, policy, limits, metrics, (peer, request) -> handle(request)).start();
            server.markReady();
        } catch (TransportException | RuntimeException e) {
            node.close();
            throw e;
        }
    }

    ByteBuffer handle(ByteBuffer message) {
        RegistryProtocol.Request request = RegistryProtocol.decodeRequest(message);
        if (request.type() == RegistryProtocol.Type.REGISTER) {
            InetSocketAddress previous = executors.put(request.executorId(), request.address());
            if (previous == null || !previous.equals(request.address())) {
                LOG.info("RDMA shuffle registry: executor {} serves shuffle blocks at {}:{}", request.executorId(),
                        request.host(), request.port());
            }
            return RegistryProtocol.registered();
        }
        InetSocketAddress known = executors.get(request.executorId());
        return known == null ? RegistryProtocol.lookupAnswer(null, 0)
                : RegistryProtocol.lookupAnswer(known.getHostString(), known.getPort());
    }

    /** Where executors reach the registry. */
    public InetSocketAddress address() {
        return node.localAddress();
    }

    /** Executors registered so far (id to address), for tests and tools. */
    public Map<String, InetSocketAddress> executors() {
        return Map.copyOf(executors);
    }

    @Override
    public void close() {
        server.close();
        node.close();
    }
}

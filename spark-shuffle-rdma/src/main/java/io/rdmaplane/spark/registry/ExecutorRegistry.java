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
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's registry of executors' RDMA addresses: a {@link PolicyServer} on a node of its own
 * ({@code registry.provider}, tcp by default: control requests only, whatever provider the executors
 * use for data) answering REGISTER and LOOKUP. With a secret, only authenticated peers get a request
 * answered at all (the policy server's handshake comes first).
 *
 * <p>An executor id is bound to the host its first REGISTER came from: Spark never reuses an id, so
 * a REGISTER of the same id from another host is someone else's, and is refused (REFUSED, with the
 * reason) and logged; one from the same host (a restarted data node) updates the address. Readers
 * also check a LOOKUP answer against Spark's own view of the executor ({@link RegistryClient}).
 *
 * <p>An executor Spark removed ({@link #forget}, told by the driver's listener) is answered REMOVED
 * from then on, and a later REGISTER of its id is refused: a reducer whose connection to it is
 * refused asks, and falls back to Netty at once instead of going through its reconnect attempts.
 * Removed ids are kept (a few bytes each) up to {@value #MAX_REMOVED_KEPT}, the oldest dropped first.
 */
public final class ExecutorRegistry implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ExecutorRegistry.class);

    /** Removed executor ids remembered at most; an id older than that is answered as unknown (Netty too). */
    static final int MAX_REMOVED_KEPT = 100_000;

    private final Map<String, Entry> executors = new ConcurrentHashMap<>();
    /** Ids Spark removed, oldest first; guarded by itself. */
    private final java.util.LinkedHashSet<String> removed = new java.util.LinkedHashSet<>();
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
            server = new PolicyServer(node, policy, limits, metrics, this::handle).start();
            server.markReady();
        } catch (TransportException | RuntimeException e) {
            node.close();
            throw e;
        }
    }

    /** Where an executor serves, and the host its REGISTER came from: the only one that may change it. */
    private record Entry(String registrant, InetSocketAddress address) {
    }

    ByteBuffer handle(PolicyServer.PeerIdentity peer, ByteBuffer message) {
        RegistryProtocol.Request request = RegistryProtocol.decodeRequest(message);
        if (request.type() == RegistryProtocol.Type.REGISTER) {
            return register(request, host(peer.address()));
        }
        if (isRemoved(request.executorId())) { // first: a REGISTER racing the removal may have left an entry
            return RegistryProtocol.removed();
        }
        Entry known = executors.get(request.executorId());
        return known == null ? RegistryProtocol.lookupAnswer(null, 0)
                : RegistryProtocol.lookupAnswer(known.address().getHostString(), known.address().getPort());
    }

    private ByteBuffer register(RegistryProtocol.Request request, String from) {
        String id = request.executorId();
        if (isRemoved(id)) {
            LOG.warn("RDMA shuffle registry: refused a REGISTER of executor {} at {}:{} from {}: Spark removed that executor",
                    id, request.host(), request.port(), from);
            return RegistryProtocol.refused("executor " + id + " was removed by Spark; its id is not registered again");
        }
        Entry offered = new Entry(from, request.address());
        Entry previous = executors.get(id); // for the log line only
        Entry kept = executors.compute(id, (key, old) -> old == null || old.registrant().equals(from) ? offered : old);
        if (kept != offered) {
            LOG.warn("RDMA shuffle registry: refused a REGISTER of executor {} at {}:{} from {}: that executor registered"
                    + " from {} first (at {}:{}), and an executor id is bound to its first registrant's host", id, request.host(),
                    request.port(), from, kept.registrant(), kept.address().getHostString(), kept.address().getPort());
            return RegistryProtocol.refused("executor " + id + " is registered from another host (" + kept.registrant()
                    + "); a REGISTER of it from " + from + " is refused");
        }
        if (previous == null || !previous.address().equals(offered.address())) {
            LOG.info("RDMA shuffle registry: executor {} serves shuffle blocks at {}:{}", id, request.host(), request.port());
        }
        return RegistryProtocol.registered();
    }

    /**
     * Spark removed executor {@code executorId} (it died, was killed or decommissioned): LOOKUPs of it
     * are answered REMOVED from now on. Idempotent.
     */
    public void forget(String executorId) {
        synchronized (removed) {
            if (!removed.add(executorId)) {
                return;
            }
            if (removed.size() > MAX_REMOVED_KEPT) {
                java.util.Iterator<String> oldest = removed.iterator();
                oldest.next();
                oldest.remove();
            }
        }
        Entry gone = executors.remove(executorId);
        LOG.info("RDMA shuffle registry: executor {} was removed by Spark{}; reducers asking for it fall back to Netty",
                executorId, gone == null ? "" : " (it served at " + gone.address().getHostString() + ":" + gone.address().getPort() + ")");
    }

    private boolean isRemoved(String executorId) {
        synchronized (removed) {
            return removed.contains(executorId);
        }
    }

    /** The host a request came from (its IP address when known). */
    private static String host(SocketAddress address) {
        if (address instanceof InetSocketAddress inet && inet.getAddress() != null) {
            return inet.getAddress().getHostAddress();
        }
        return String.valueOf(address);
    }

    /** Where executors reach the registry. */
    public InetSocketAddress address() {
        return node.localAddress();
    }

    /** Executors registered so far (id to address, unresolved), for tests and tools. */
    public Map<String, InetSocketAddress> executors() {
        Map<String, InetSocketAddress> out = new java.util.HashMap<>();
        executors.forEach((id, entry) -> out.put(id, entry.address()));
        return Map.copyOf(out);
    }

    @Override
    public void close() {
        server.close();
        node.close();
    }
}

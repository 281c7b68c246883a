package io.rdmaplane.spark.registry;

import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An executor's side of the registry: REGISTERs its own RDMA address and LOOKs UP other
 * executors', with a cache. A found address is kept for the life of the JVM (executor ids are
 * never reused); a miss is remembered only for {@link #MISS_TTL_NANOS}, so an executor that
 * registers late is found soon after. A found address is used only when it is on the host Spark
 * itself knows the executor by (its {@code BlockManagerId}): the registry answers whoever
 * registered first, while Spark's view comes from its own scheduler (the map output tracker).
 */
public final class RegistryClient implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RegistryClient.class);
    static final long MISS_TTL_NANOS = TimeUnit.SECONDS.toNanos(2);

    private final Node node;
    private final PolicyClient client;
    private final InetSocketAddress registry;
    private final Duration wait;
    private final Map<String, InetSocketAddress> found = new ConcurrentHashMap<>();
    private final Map<String, Long> missedAt = new ConcurrentHashMap<>();
    /** Whether a found address is on the host Spark names, per (executor, Spark's host): decided once, logged once. */
    private final Map<Claim, Boolean> agrees = new ConcurrentHashMap<>();

    private record Claim(String executorId, String sparkHost) {
    }

    /**
     * @param provider    the registry's provider ({@code registry.provider})
     * @param nodeOptions options of the client's own node (it does not listen)
     */
    public RegistryClient(TransportProvider provider, NodeOptions nodeOptions, PolicyOptions policy, PolicyMetrics metrics,
                          InetSocketAddress registry) throws TransportException {
        this.node = provider.createNode(nodeOptions);
        this.client = new PolicyClient(node, policy, metrics);
        this.registry = registry;
        // What the policy layer itself allows a request (connect, retries), plus a margin.
        this.wait = policy.handshakeTimeout().plus(policy.requestTimeout().multipliedBy(policy.requestMaxAttempts()))
                .plusSeconds(1);
    }

    /**
     * Registers {@code executorId} at {@code address}; waits for the answer.
     *
     * @throws RegistrationRefusedException when the id is bound to another host's registration
     */
    public void register(String executorId, InetSocketAddress address) throws Exception {
        String host = address.getAddress() != null ? address.getAddress().getHostAddress() : address.getHostString();
        RegistryProtocol.decodeRegistered(client.peer(registry).request(RegistryProtocol.register(executorId, host,
                address.getPort())).get(wait.toNanos(), TimeUnit.NANOSECONDS));
    }

    /**
     * The addresses of the executors in {@code sparkHosts} (executor id to the host of its
     * {@code BlockManagerId}) that the registry knows and that are on that host; the others are
     * absent, so their blocks go over Netty. An answer on another host is logged once.
     */
    public Map<String, InetSocketAddress> lookup(Map<String, String> sparkHosts) {
        Map<String, InetSocketAddress> out = new HashMap<>();
        lookup(sparkHosts.keySet()).forEach((id, address) -> {
            String sparkHost = sparkHosts.get(id);
            if (agrees.computeIfAbsent(new Claim(id, sparkHost), claim -> onHost(claim, address))) {
                out.put(id, address);
            }
        });
        return out;
    }

    private static boolean onHost(Claim claim, InetSocketAddress address) {
        if (claim.sparkHost() != null) {
            if (claim.sparkHost().equalsIgnoreCase(address.getHostString())) {
                return true;
            }
            try {
                for (InetAddress spark : InetAddress.getAllByName(claim.sparkHost())) {
                    if (spark.equals(address.getAddress())) { // the registered address, resolved when it was found
                        return true;
                    }
                }
            } catch (UnknownHostException e) {
                // no agreement can be shown: not used
            }
        }
        LOG.warn("RDMA shuffle: the registry says executor {} serves at {}, but Spark knows that executor on host {}: the"
                + " address is not used, its blocks go over Netty", claim.executorId(), address, claim.sparkHost());
        return false;
    }

    /**
     * The registered addresses of {@code executorIds} (those unknown are absent), unchecked: cached
     * ones at once, the others asked for in parallel, waiting at most for one request's worth of retries.
     */
    Map<String, InetSocketAddress> lookup(Collection<String> executorIds) {
        Map<String, InetSocketAddress> out = new HashMap<>();
        Map<String, CompletableFuture<ByteBuffer>> asked = new HashMap<>();
        long now = System.nanoTime();
        for (String id : executorIds) {
            InetSocketAddress known = found.get(id);
            if (known != null) {
                out.put(id, known);
                continue;
            }
            Long missed = missedAt.get(id);
            if (missed != null && now - missed < MISS_TTL_NANOS) {
                continue;
            }
            try {
                asked.put(id, client.peer(registry).request(RegistryProtocol.lookup(id)));
            } catch (RuntimeException e) {
                LOG.warn("RDMA shuffle: cannot ask the registry at {} for executor {}: {}", registry, id, e.toString());
                missedAt.put(id, now);
            }
        }
        long deadline = System.nanoTime() + wait.toNanos();
        for (Map.Entry<String, CompletableFuture<ByteBuffer>> e : asked.entrySet()) {
            String id = e.getKey();
            try {
                RegistryProtocol.Lookup lookup = RegistryProtocol.decodeLookupAnswer(
                        e.getValue().get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
                InetSocketAddress answer = lookup.address();
                if (answer == null) {
                    missedAt.put(id, System.nanoTime());
                } else {
                    InetSocketAddress resolved = new InetSocketAddress(answer.getHostString(), answer.getPort());
                    found.put(id, resolved);
                    missedAt.remove(id);
                    out.put(id, resolved);
                }
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                break;
            } catch (Exception ex) {
                missedAt.put(id, System.nanoTime());
                LOG.warn("RDMA shuffle: the registry at {} did not answer for executor {} ({}); its blocks go over Netty",
                        registry, id, ex.toString());
            }
        }
        return out;
    }

    /**
     * Whether Spark removed every executor this client found at {@code peer} (true: nothing serves
     * there any more, so a refused connection is final). Asks the registry about each; one it
     * says REMOVED is dropped from the cache. False for an address no found executor has, or when
     * the registry does not answer. Never blocks.
     */
    public CompletableFuture<Boolean> declaredLost(InetSocketAddress peer) {
        List<String> ids = new ArrayList<>();
        found.forEach((id, address) -> {
            if (address.equals(peer)) {
                ids.add(id);
            }
        });
        if (ids.isEmpty()) {
            return CompletableFuture.completedFuture(false);
        }
        List<CompletableFuture<Boolean>> answers = new ArrayList<>();
        for (String id : ids) {
            CompletableFuture<ByteBuffer> asked;
            try {
                asked = client.peer(registry).request(RegistryProtocol.lookup(id));
            } catch (RuntimeException e) {
                return CompletableFuture.completedFuture(false);
            }
            answers.add(asked.thenApply(answer -> {
                if (!RegistryProtocol.decodeLookupAnswer(answer).removed()) {
                    return false;
                }
                if (found.remove(id, peer)) {
                    LOG.info("RDMA shuffle: executor {} at {} was removed by Spark; its blocks go over Netty", id, peer);
                }
                return true;
            }).exceptionally(error -> false));
        }
        return CompletableFuture.allOf(answers.toArray(CompletableFuture[]::new))
                .thenApply(v -> answers.stream().allMatch(CompletableFuture::join));
    }

    /** The cached address of {@code executorId}, or null. */
    public InetSocketAddress cached(String executorId) {
        return found.get(executorId);
    }

    @Override
    public void close() {
        client.close();
        node.close();
    }
}

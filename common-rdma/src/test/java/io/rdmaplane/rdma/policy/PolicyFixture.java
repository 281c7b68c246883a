package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.faulty.FaultyNode;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;

/**
 * A server node with a policy server and a client node with a policy client, over tcp on loopback;
 * both nodes are {@link FaultyNode}s, so a test can cut, stall or corrupt what either sees.
 */
final class PolicyFixture implements AutoCloseable {
    final FaultyNode serverNode;
    final FaultyNode clientNode;
    final PolicyMetrics serverMetrics = new PolicyMetrics();
    final PolicyMetrics clientMetrics = new PolicyMetrics();
    final PolicyServer server;
    final PolicyClient client;
    final AtomicInteger handled = new AtomicInteger();
    final List<String> transitions = new CopyOnWriteArrayList<>();
    /** The regions {@link #exposeBlock} made, by address. */
    private final java.util.Map<Long, MemoryRegion> exposed = new java.util.concurrent.ConcurrentHashMap<>();

    PolicyFixture(PolicyOptions serverOptions, PolicyOptions clientOptions, PolicyServer.RequestHandler handler)
            throws TransportException {
        this(TestTransport.TCP, serverOptions, clientOptions, handler);
    }

    /** The fixture on {@code transport}'s nodes (verbs: in the Soft-RoCE VM only, else the test is skipped). */
    PolicyFixture(TestTransport transport, PolicyOptions serverOptions, PolicyOptions clientOptions,
                  PolicyServer.RequestHandler handler) throws TransportException {
        this(transport, serverOptions, clientOptions,
                serverOptions.secret() == null ? null : SessionAuthenticator.secret(serverOptions.secret()), handler);
    }

    /** The fixture with a server whose sessions authenticate through {@code authenticator} (null: none). */
    PolicyFixture(TestTransport transport, PolicyOptions serverOptions, PolicyOptions clientOptions,
                  SessionAuthenticator authenticator, PolicyServer.RequestHandler handler) throws TransportException {
        serverNode = new FaultyNode(transport.node(true));
        clientNode = new FaultyNode(transport.node(false));
        server = new PolicyServer(serverNode, serverOptions, ServerLimits.defaults(), serverMetrics, authenticator,
                (peer, request) -> {
                    handled.incrementAndGet();
                    return handler.handle(peer, request);
                }).start();
        client = new PolicyClient(clientNode, clientOptions, clientMetrics, new PolicyClient.Listener() {
            @Override
            public void stateChanged(java.net.InetSocketAddress peer, TrafficClass trafficClass, ChannelState from,
                                     ChannelState to) {
                transitions.add(trafficClass + ":" + from + "->" + to);
            }
        });
    }

    /** Options for tests: quick timers, the documented jitter. */
    static PolicyOptions fast() {
        return PolicyOptions.defaults()
                .withReconnect(Duration.ofMillis(50), Duration.ofMillis(50), Duration.ofMillis(800), 8)
                .withTimeouts(Duration.ofMillis(200), Duration.ofSeconds(3), Duration.ofMillis(300));
    }

    static PolicyServer.RequestHandler echo() {
        return (peer, request) -> request;
    }

    PeerConnection peer() {
        return client.peer(serverNode.localAddress());
    }

    /** A remotely readable region of seeded bytes on the server, granted to the client, and its block descriptor. */
    RemoteBlock exposeBlock(int size, long seed) throws TransportException {
        return exposeBlock(size, seed, client);
    }

    /** As {@link #exposeBlock(int, long)}, granted to {@code grantee} (a client of the test's own besides the fixture's). */
    RemoteBlock exposeBlock(int size, long seed, PolicyClient grantee) throws TransportException {
        ByteBuffer memory = ByteBuffer.allocateDirect(size);
        byte[] bytes = new byte[size];
        new Random(seed).nextBytes(bytes);
        memory.put(bytes).flip();
        MemoryRegion region = serverNode.register(memory);
        RemoteBlock block = new RemoteBlock(region.address(), region.rkey(), size, crc(region.buffer()));
        exposed.put(block.address(), region);
        return grant(grantee.instance(serverNode.localAddress()), block);
    }

    /**
     * Lets {@code instance} READ the block (a region {@link #exposeBlock} made) on its data channels: the block as
     * that peer READs it. Where its keys are made in a key domain (verbs) the descriptor carries a key of the
     * grant's own; elsewhere (tcp) the region's rkey, which the server checks against the peer's grants per READ.
     */
    RemoteBlock grant(UUID instance, RemoteBlock block) {
        int key = grant(instance, exposed.get(block.address()));
        return new RemoteBlock(block.address(), key, block.length(), block.crc32c());
    }

    /** As {@link #grant(UUID, RemoteBlock)} for a region: the key to READ all of it with. */
    int grant(UUID instance, MemoryRegion region) {
        ReadGrants grants = server.grants(instance);
        if (grants.domain() != null) {
            return grants.grant(region, Long.MAX_VALUE);
        }
        grants.grant(region.rkey());
        return region.rkey();
    }

    MemoryRegion landing(int size) throws TransportException {
        return clientNode.register(ByteBuffer.allocateDirect(size), EnumSet.of(Access.LOCAL_WRITE));
    }

    static int crc(ByteBuffer bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes.duplicate());
        return (int) crc.getValue();
    }

    long count(String counter) {
        return clientMetrics.registry().counter(counter).getCount();
    }

    @Override
    public void close() {
        client.close();
        server.close();
        clientNode.close();
        serverNode.close();
    }
}

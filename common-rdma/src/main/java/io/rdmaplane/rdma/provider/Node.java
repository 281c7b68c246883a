package io.rdmaplane.rdma.provider;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * A transport endpoint bound to one local address: registers memory, accepts channels from
 * peers and opens channels to them. Both ends of a channel may READ the other's regions.
 * Closing the node closes its channels, deregisters its regions and stops its threads.
 */
public interface Node extends AutoCloseable {
    /**
     * Registers a direct buffer's memory from its position to its limit. A read-only buffer
     * (e.g. a read-only file mapping) cannot have {@link Access#LOCAL_WRITE}.
     *
     * @throws IllegalArgumentException for a heap buffer, an empty one, or write access on a read-only one
     */
    MemoryRegion register(ByteBuffer buffer, Set<Access> access) throws TransportException;

    /** Registers with remote read access only, the default for exposed memory. */
    default MemoryRegion register(ByteBuffer buffer) throws TransportException {
        return register(buffer, Set.of(Access.REMOTE_READ));
    }

    /**
     * Registers memory that peers READ only through keys granted to each of them ({@link #peerKey}):
     * where the device binds memory windows the region's own rkey READs nothing remotely; elsewhere
     * this is {@link #register(ByteBuffer)}.
     */
    default MemoryRegion registerForGrants(ByteBuffer buffer) throws TransportException {
        return register(buffer);
    }

    /**
     * A new key for one peer to READ {@code length} bytes at {@code address} of {@code region} (a grant),
     * bound to that peer's channel by {@link PeerKey#bindTo}; a READ with it of any byte outside that
     * range, on any other channel, or after {@link PeerKey#revoke} ends {@link Status#REMOTE_ACCESS_ERROR}
     * and reads nothing. On verbs it is a memory window over exactly that range, for a region
     * {@linkplain #registerForGrants registered for grants} where the device has windows, and the region's
     * own rkey elsewhere ({@link PeerKey#ofRegion}: the whole region, on any channel that may READ it).
     *
     * @throws IllegalArgumentException if the range is not 1 or more bytes inside the region
     */
    default PeerKey peerKey(MemoryRegion region, long address, int length) throws TransportException {
        NodeArguments.checkKeyRange(region, address, length);
        return PeerKey.ofRegion(region);
    }

    /**
     * A new domain for one peer's keys and channels ({@link KeyDomain}), or null where the provider binds each
     * key to a channel by itself (tcp), which {@link #peerKey(MemoryRegion, long, int)} then does.
     */
    default KeyDomain openKeyDomain() throws TransportException {
        return null;
    }

    /**
     * A new key for the peer of {@code domain} to READ {@code length} bytes at {@code address} of {@code region}
     * through the domain's channels only ({@link PeerKey#bindTo} one of them); null {@code domain}: as
     * {@link #peerKey(MemoryRegion, long, int)}. Revoked by {@link PeerKey#revoke}, by closing the domain or by
     * deregistering the region.
     *
     * @throws IllegalArgumentException if the range is not 1 or more bytes inside the region, or the domain is
     *                                  another node's
     * @throws TransportException       when the domain is closed or the device refuses the key
     */
    default PeerKey peerKey(MemoryRegion region, long address, int length, KeyDomain domain) throws TransportException {
        return peerKey(region, address, length);
    }

    /** How keys handed to peers are bound: "per peer (...)" or "per region (...)", for the doctor and logs. */
    default String keyBinding() {
        return "per region (the region's own rkey; READs checked per channel by the provider)";
    }

    /** Starts accepting channels on {@link NodeOptions#bindAddress()}. Call at most once. */
    void listen(ChannelAcceptor acceptor) throws TransportException;

    /** The address peers connect to; valid after {@link #listen}. */
    InetSocketAddress localAddress();

    /** Opens a {@link Lane#BULK} channel to a listening peer with the given queue depth ({@link ConnectRequest#OPEN}). */
    CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, ChannelHandler handler);

    /**
     * Opens a channel in {@code lane}: a {@link Lane#CONTROL} channel's messages and completions
     * are handled on a path of their own at both ends, never behind bulk work. A provider without
     * separate paths treats every lane alike.
     */
    default CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, Lane lane, ChannelHandler handler) {
        return connect(peer, queueDepth, handler);
    }

    /**
     * Opens a channel in {@code lane} whose connect carries {@code request}: the data the peer's
     * {@link ChannelAcceptor#admit} reads, and whether the peer may READ this end. A provider
     * without a connect request (tcp) opens the channel as {@link #connect(InetSocketAddress, int, Lane, ChannelHandler)}
     * does; its READs are checked one by one instead.
     */
    default CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, Lane lane, ChannelHandler handler,
                                               ConnectRequest request) {
        return connect(peer, queueDepth, lane, handler);
    }

    /** Registrations made so far: pools use it to prove there is none per IO. */
    long registrationCount();

    /** Keys made as registrations of their own in a {@link KeyDomain} so far (one per grant on verbs); 0 where none are. */
    default long keyRegistrationCount() {
        return 0;
    }

    /**
     * The NUMA node of this node's RDMA device (sysfs {@code device/numa_node}), where registered memory
     * should live; -1 when there is none or it is unknown (tcp, Soft-RoCE, a one-node machine).
     */
    default int numaNode() {
        return -1;
    }

    String providerName();

    /**
     * Completes when the node is closed: normally after {@link #close}, exceptionally with the cause
     * when a transport thread of the node died (the node is closed then). A service watches it so
     * that it reports a dead node instead of claiming to run.
     */
    CompletableFuture<Void> terminated();

    @Override
    void close();
}

package io.rdmaplane.rdma.memory;

import io.rdmaplane.rdma.provider.AbstractMemoryRegion;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelAcceptor;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * A test-only {@link Node} that registers memory and nothing else: it counts registrations and
 * gives each region an rkey and an opaque address far from any native address, so code that
 * mistakes {@link MemoryRegion#address()} for a pointer fails. It has no channels.
 */
final class RegistrationOnlyNode implements Node {
    /** Region addresses are this plus a multiple of 2^32: plausible, unique, and never native memory. */
    private static final long OPAQUE_BASE = 0x5a00_0000_0000_0000L;

    private final List<Region> regions = new ArrayList<>();

    @Override
    public synchronized MemoryRegion register(ByteBuffer buffer, Set<Access> access) {
        if (!buffer.isDirect() || !buffer.hasRemaining()) {
            throw new IllegalArgumentException("needs a non-empty direct buffer");
        }
        if (buffer.isReadOnly() && access.contains(Access.LOCAL_WRITE)) {
            throw new IllegalArgumentException("LOCAL_WRITE on a read-only buffer");
        }
        int n = regions.size() + 1;
        Region region = new Region(OPAQUE_BASE + ((long) n << 32), n, Set.copyOf(access), buffer.slice());
        regions.add(region);
        return region;
    }

    synchronized long validRegions() {
        return regions.stream().filter(Region::isValid).count();
    }

    @Override
    public synchronized long registrationCount() {
        return regions.size();
    }

    @Override
    public void listen(ChannelAcceptor acceptor) {
        throw new UnsupportedOperationException("test node has no channels");
    }

    @Override
    public InetSocketAddress localAddress() {
        throw new UnsupportedOperationException("test node has no channels");
    }

    @Override
    public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, ChannelHandler handler) {
        throw new UnsupportedOperationException("test node has no channels");
    }

    @Override
    public String providerName() {
        return "registration-only";
    }

    private final CompletableFuture<Void> terminated = new CompletableFuture<>();

    @Override
    public CompletableFuture<Void> terminated() {
        return terminated;
    }

    @Override
    public synchronized void close() {
        regions.forEach(Region::deregister);
        terminated.complete(null);
    }

    /** A region that only remembers it was deregistered. */
    private static final class Region extends AbstractMemoryRegion {
        Region(long address, int rkey, Set<Access> access, ByteBuffer buffer) {
            super(buffer, address, rkey, access);
        }

        @Override
        protected void revoke() {
            // nothing is registered anywhere: the flag is all there is
        }
    }
}

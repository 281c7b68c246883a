package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.PeerKey;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.util.concurrent.CompletableFuture;

/**
 * A key of its own for one grant ({@link TcpNode#peerKey}): READs [address, address + length) of its
 * region, on the one channel it is bound to at the time, until it is revoked or the region is deregistered.
 * When that channel closes it READs nothing until it is bound again, with the same rkey, to another channel
 * ({@link #rebindable}): the policy server binds a session's keys to the session's next data channel, so a
 * READ re-issued after a data-channel reconnect still READs. Its rkey comes from the node's CSPRNG and shares
 * the node's rkey table with regions, so it is never a region's rkey. Checked by {@link TcpChannel} on every READ, like a verbs memory window
 * is by the NIC.
 */
final class TcpKey implements PeerKey {
    private final TcpRegion region;
    private final int rkey;
    private final long address;
    private final int length;
    private volatile TcpChannel boundTo; // guarded by this for writes; null while unbound
    private volatile boolean revoked;

    TcpKey(TcpRegion region, int rkey, long address, int length) {
        this.region = region;
        this.rkey = rkey;
        this.address = address;
        this.length = length;
    }

    @Override
    public int rkey() {
        return rkey;
    }

    @Override
    public boolean boundToPeer() {
        return true;
    }

    TcpRegion region() {
        return region;
    }

    @Override
    public boolean rebindable() {
        return true;
    }

    /** Binds to {@code channel} (a channel of the region's node), moving it off the channel it was bound to, if any. */
    @Override
    public CompletableFuture<Void> bindTo(Channel channel) {
        TcpChannel previous;
        synchronized (this) {
            if (revoked) {
                return CompletableFuture.failedFuture(new TransportException(Status.LOCAL_PROTECTION_ERROR, this + " is revoked"));
            }
            if (!(channel.transport() instanceof TcpChannel tcp) || tcp.node() != region.node()) {
                return CompletableFuture.failedFuture(new IllegalArgumentException(channel + " is no channel of " + region.node()));
            }
            if (boundTo == tcp) {
                return CompletableFuture.completedFuture(null);
            }
            if (!tcp.bound(this)) {
                return CompletableFuture.failedFuture(new TransportException(Status.FLUSHED, channel + " is closed"));
            }
            previous = boundTo;
            boundTo = tcp;
        }
        if (previous != null) {
            previous.unbind(this);
        }
        return CompletableFuture.completedFuture(null);
    }

    /** {@code channel} closed: if this key is bound to it, it READs nothing until it is bound again. */
    synchronized void channelClosed(TcpChannel channel) {
        if (boundTo == channel) {
            boundTo = null;
        }
    }

    /**
     * Why a READ of [remoteAddress, remoteAddress + readLength) on {@code channel} with this key is
     * refused, or null if it is served.
     */
    String refusal(TcpChannel channel, long remoteAddress, int readLength) {
        if (revoked || !region.isValid()) {
            return "the key is revoked";
        }
        if (boundTo != channel) {
            return boundTo == null ? "the key is bound to no channel yet" : "the key is bound to another channel";
        }
        if (remoteAddress < address || remoteAddress - address > length - (long) readLength) {
            return "outside the key's range [0x" + Long.toHexString(address) + ", +" + length + ")";
        }
        return null;
    }

    @Override
    public void revoke() {
        revoked = true;
        region.node().forget(this);
        region.forget(this);
        TcpChannel channel = boundTo;
        if (channel != null) {
            channel.unbind(this);
        }
    }

    @Override
    public String toString() {
        return "tcp key " + Integer.toUnsignedString(rkey, 16) + " for [0x" + Long.toHexString(address) + ", +" + length
                + ") of " + region;
    }
}

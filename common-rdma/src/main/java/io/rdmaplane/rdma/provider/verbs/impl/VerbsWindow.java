package io.rdmaplane.rdma.provider.verbs.impl;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.PeerKey;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.security.SecureRandom;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A type 2 memory window over one byte range of a {@link VerbsRegion} (a grant's): bound by a BIND_MW
 * work request on one channel's QP, it is READ through that QP only and only within that range (the
 * NIC refuses a READ of any byte outside it: REMOTE_ACCESS_ERROR); deallocating it (ibv_dealloc_mw) revokes it. Its
 * rkey is the window's index (the device's) with a key byte drawn here from a CSPRNG.
 */
final class VerbsWindow implements PeerKey {
    private static final Logger LOG = LoggerFactory.getLogger(VerbsWindow.class);
    private static final SecureRandom KEYS = new SecureRandom();

    private final VerbsRegion region;
    private final long handle;
    private final int rkey;
    private final long address;
    private final int length;
    // guarded by this
    private boolean bound;
    private boolean revoked;

    VerbsWindow(VerbsRegion region, long handle, long address, int length) {
        this.region = region;
        this.handle = handle;
        this.address = address;
        this.length = length;
        int current = NativeMw.rkey(handle);
        int key;
        do {
            key = KEYS.nextInt(256);
        } while (key == (current & 0xff)); // a bind must change the key byte
        this.rkey = (current & ~0xff) | key;
    }

    @Override
    public int rkey() {
        return rkey;
    }

    @Override
    public boolean boundToPeer() {
        return true;
    }

    VerbsRegion region() {
        return region;
    }

    long handle() {
        return handle;
    }

    /** The first byte the window READs (an address of the region, not zero-based). */
    long address() {
        return address;
    }

    int length() {
        return length;
    }

    /** Binds on {@code channel}'s QP (a channel of the region's node); completes with the BIND_MW completion. */
    @Override
    public CompletableFuture<Void> bindTo(Channel channel) {
        synchronized (this) {
            if (revoked || bound) {
                return CompletableFuture.failedFuture(new TransportException(Status.LOCAL_PROTECTION_ERROR,
                        this + (revoked ? " is revoked" : " is bound already")));
            }
            if (!(channel.transport() instanceof VerbsChannel verbs) || verbs.node() != region.node()) {
                return CompletableFuture.failedFuture(new IllegalArgumentException(channel + " is no channel of " + region.node()));
            }
            bound = true;
            return verbs.bindWindow(this);
        }
    }

    /** ibv_dealloc_mw, once: its rkey READs nothing when this returns. */
    @Override
    public void revoke() {
        synchronized (this) {
            if (revoked) {
                return;
            }
            revoked = true;
            int rc = NativeMw.dealloc(handle);
            if (rc != 0) {
                LOG.warn("ibv_dealloc_mw of {} failed (errno {})", this, -rc);
            }
        }
        region.forget(this);
    }

    synchronized boolean isRevoked() {
        return revoked;
    }

    @Override
    public String toString() {
        return "memory window " + Integer.toUnsignedString(rkey, 16) + " over [0x" + Long.toHexString(address) + ", +" + length
                + ") of " + region;
    }
}

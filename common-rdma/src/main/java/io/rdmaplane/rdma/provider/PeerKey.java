package io.rdmaplane.rdma.provider;

import java.util.concurrent.CompletableFuture;

/**
 * A key one peer READs a region with ({@link Node#peerKey}). Where the device binds memory windows
 * (verbs, type 2) it is a window bound to one channel's queue pair: READs with it through any other
 * channel are refused, and it READs nothing once revoked or once that channel is gone. Elsewhere it
 * is the region's own rkey ({@link #ofRegion}), and the provider checks READs one by one (tcp) or
 * not at all.
 */
public interface PeerKey {
    /** The rkey to hand to the peer. */
    int rkey();

    /** True when the key works on one channel only (a memory window), false for the region's own rkey. */
    boolean boundToPeer();

    /**
     * Lets the peer of {@code channel} READ with this key through that channel; completes when such
     * READs work. A key bound to a peer is bound once; the region's own rkey needs no binding.
     */
    CompletableFuture<Void> bindTo(Channel channel);

    /** The key READs nothing from now on (a window is deallocated). Idempotent. */
    void revoke();

    /** The region's own rkey: nothing to bind, nothing to revoke (deregistering the region does). */
    static PeerKey ofRegion(MemoryRegion region) {
        int rkey = region.rkey();
        return new PeerKey() {
            @Override
            public int rkey() {
                return rkey;
            }

            @Override
            public boolean boundToPeer() {
                return false;
            }

            @Override
            public CompletableFuture<Void> bindTo(Channel channel) {
                return CompletableFuture.completedFuture(null);
            }

            @Override
            public void revoke() {
            }

            @Override
            public String toString() {
                return "region key " + Integer.toUnsignedString(rkey, 16);
            }
        };
    }
}

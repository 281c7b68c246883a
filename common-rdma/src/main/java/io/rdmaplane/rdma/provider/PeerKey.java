package io.rdmaplane.rdma.provider;

import java.util.concurrent.CompletableFuture;

/**
 * A key one peer READs a range of a region with ({@link Node#peerKey}). On tcp it is a key of its own
 * (from a CSPRNG), checked by the provider on every READ; on verbs, made for a {@link KeyDomain}, it is a
 * registration of the range in the domain's protection domain, READ through the domain's channels; made
 * without one where the device binds memory windows (type 2), a window over the range. Either way it is bound
 * to one peer: READs with it through any other channel, or of any byte outside its range, are refused, and it
 * READs nothing once revoked or while that channel is gone (until bound again, where {@link #rebindable}).
 * Elsewhere (verbs without a domain: no windows, or a read-only file mapping) it is the region's own rkey
 * ({@link #ofRegion}), which covers the whole region on every channel allowed to READ it.
 */
public interface PeerKey {
    /** The rkey to hand to the peer. */
    int rkey();

    /** True when the key works on one channel and its range only, false for the region's own rkey. */
    boolean boundToPeer();

    /**
     * Lets the peer of {@code channel} READ with this key through that channel; completes when such
     * READs work. A key bound to a peer is bound once; the region's own rkey needs no binding.
     */
    CompletableFuture<Void> bindTo(Channel channel);

    /**
     * True when the key outlives the channel it is bound to: unbound when that channel closes, it may be
     * bound again (same rkey) to another channel, so a session's keys survive a data-channel reconnect
     * (tcp). False where it goes with its channel (a type 2 window with its QP): a new grant makes a new key.
     */
    default boolean rebindable() {
        return false;
    }

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

package io.rdmaplane.rdma.policy;

import java.util.concurrent.ConcurrentHashMap;

/**
 * The regions one peer may READ from a {@link PolicyServer}'s node, by rkey. A server grants a
 * region to the peer it hands the region's descriptor to (before it sends it); a READ on another
 * peer's channel with the same rkey is refused. A revoked region's rkey READs nothing whoever
 * holds a grant for it. On tcp the provider asks per READ; on verbs the same grant would bind a memory window
 * to the peer's QP (not built yet).
 */
public final class ReadGrants {
    /** rkey to the wall-clock time (epoch millis) after which its grant READs nothing. */
    private final ConcurrentHashMap<Integer, Long> rkeys = new ConcurrentHashMap<>();

    /** Lets the peer READ the region {@code rkey}, for as long as the region lives. */
    public void grant(int rkey) {
        grant(rkey, Long.MAX_VALUE);
    }

    /**
     * Lets the peer READ the region {@code rkey} until {@code untilEpochMillis} (wall clock, as an
     * HDFS block token's expiry date is); a grant already held for longer is kept.
     */
    public void grant(int rkey, long untilEpochMillis) {
        rkeys.merge(rkey, untilEpochMillis, Math::max);
    }

    /** True while the peer holds an unexpired grant of {@code rkey}; an expired one is dropped. */
    public boolean allows(int rkey) {
        Long until = rkeys.get(rkey);
        if (until == null) {
            return false;
        }
        if (System.currentTimeMillis() < until) {
            return true;
        }
        rkeys.remove(rkey, until);
        return false;
    }

    /** How many regions are granted (for tests and metrics). */
    public int size() {
        return rkeys.size();
    }
}

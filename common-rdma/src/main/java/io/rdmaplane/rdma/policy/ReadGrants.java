package io.rdmaplane.rdma.policy;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The regions one peer may READ from a {@link PolicyServer}'s node, by rkey. A server grants a
 * region to the peer it hands the region's descriptor to (before it sends it); a READ on another
 * peer's channel with the same rkey is refused. A revoked region's rkey READs nothing whoever
 * holds a grant for it. On tcp the provider asks per READ; on verbs the same grant would bind a memory window
 * to the peer's QP (not built yet).
 */
public final class ReadGrants {
    private final Set<Integer> rkeys = ConcurrentHashMap.newKeySet();

    /** Lets the peer READ the region {@code rkey}. */
    public void grant(int rkey) {
        rkeys.add(rkey);
    }

    public boolean allows(int rkey) {
        return rkeys.contains(rkey);
    }

    /** How many regions are granted (for tests and metrics). */
    public int size() {
        return rkeys.size();
    }
}

package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.MemoryRegion;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * The regions one peer may READ from a {@link PolicyServer}'s node, by rkey. A server grants a
 * region to the peer it hands the region's descriptor to (before it sends it); a READ on another
 * peer's channel with the same rkey is refused. A revoked region's rkey READs nothing whoever
 * holds a grant for it; a grant made with the region itself ({@link #grant(MemoryRegion, long)})
 * is dropped when the region is deregistered, so grants never outgrow the live regions. On tcp the
 * provider asks per READ; on verbs the same grant would bind a memory window to the peer's QP
 * (not built yet).
 */
public final class ReadGrants {
    /** Until when (epoch millis) a grant READs, and the region it was made with (null: by rkey only). */
    private record Grant(long until, MemoryRegion region) {
    }

    private final ConcurrentHashMap<Integer, Grant> rkeys = new ConcurrentHashMap<>();
    /** One listener per peer, so a region granted to it many times tells it once. */
    private final Consumer<MemoryRegion> onDeregistered = region -> rkeys.computeIfPresent(region.rkey(),
            (rkey, grant) -> grant.region() == region ? null : grant);

    /** Lets the peer READ the region {@code rkey}, for as long as the region lives. */
    public void grant(int rkey) {
        grant(rkey, Long.MAX_VALUE);
    }

    /**
     * Lets the peer READ the region {@code rkey} until {@code untilEpochMillis} (wall clock, as an
     * HDFS block token's expiry date is); a grant already held for longer is kept.
     */
    public void grant(int rkey, long untilEpochMillis) {
        rkeys.merge(rkey, new Grant(untilEpochMillis, null), (held, asked) ->
                new Grant(Math.max(held.until(), asked.until()), held.region()));
    }

    /** Lets the peer READ {@code region} until {@code untilEpochMillis}; the grant goes when the region is deregistered. */
    public void grant(MemoryRegion region, long untilEpochMillis) {
        rkeys.merge(region.rkey(), new Grant(untilEpochMillis, region), (held, asked) ->
                new Grant(held.region() == region ? Math.max(held.until(), asked.until()) : asked.until(), region));
        region.whenDeregistered(onDeregistered); // after the grant: a region deregistered meanwhile drops it now
    }

    /** True while the peer holds an unexpired grant of {@code rkey}; an expired one is dropped. */
    public boolean allows(int rkey) {
        Grant grant = rkeys.get(rkey);
        if (grant == null) {
            return false;
        }
        if (System.currentTimeMillis() < grant.until()) {
            return true;
        }
        rkeys.remove(rkey, grant);
        return false;
    }

    /** How many regions are granted (for tests and metrics). */
    public int size() {
        return rkeys.size();
    }
}

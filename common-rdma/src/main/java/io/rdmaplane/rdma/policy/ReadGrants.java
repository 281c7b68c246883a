package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.PeerKey;
import io.rdmaplane.rdma.provider.TransportException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The regions one peer may READ from a {@link PolicyServer}'s node, by rkey. A server grants a
 * region to the peer it hands the region's descriptor to (before it sends it); a READ on another
 * peer's channel with the same rkey is refused. A revoked region's rkey READs nothing whoever
 * holds a grant for it; a grant made with the region itself ({@link #grant(MemoryRegion, long)})
 * is dropped when the region is deregistered, so grants never outgrow the live regions. On tcp the
 * provider asks per READ. On verbs a region {@linkplain Node#registerForGrants registered for grants}
 * is granted as a memory window of its own per peer ({@link Node#peerKey}), bound to the peer's data
 * channel: the key handed out is the window's, it READs through that channel only, and it is
 * revoked when that channel closes (the peer's session ends), the grant expires or the region goes.
 */
public final class ReadGrants {
    /** Until when (epoch millis) a grant READs, and the region it was made with (null: by rkey only). */
    private record Grant(long until, MemoryRegion region) {
    }

    /** Bind work a grant started on the current thread, which the answer to the peer waits for (see {@link #takeUnsettled}). */
    private static final ThreadLocal<List<CompletableFuture<Void>>> UNSETTLED = ThreadLocal.withInitial(ArrayList::new);

    /** A region's key for this peer, and the channel it is bound to (null: not yet). */
    private static final class Key {
        final PeerKey key;
        Channel boundTo;

        Key(PeerKey key) {
            this.key = key;
        }
    }

    private final Node node;
    private final ConcurrentHashMap<Integer, Grant> rkeys = new ConcurrentHashMap<>();
    /** Keys by region (guarded by this); and the peer's current data channel, which new keys bind to. */
    private final Map<MemoryRegion, Key> keys = new HashMap<>();
    private Channel data; // guarded by this
    /** One listener per peer, so a region granted to it many times tells it once. */
    private final Consumer<MemoryRegion> onDeregistered = this::drop;

    /** Grants whose keys are the regions' own rkeys (no provider to ask for keys per peer). */
    public ReadGrants() {
        this(null);
    }

    /** Grants whose keys {@code node} makes per peer ({@link Node#peerKey}); null: the regions' own rkeys. */
    public ReadGrants(Node node) {
        this.node = node;
    }

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

    /**
     * Lets the peer READ {@code region} until {@code untilEpochMillis}, and returns the rkey to hand
     * it: the region's own, or a memory window's bound to the peer's data channel (bound when that
     * channel is authenticated, before it is READY; a bind started for a channel already there is
     * waited for by the answer, {@link #takeUnsettled}). The grant goes when the region is deregistered.
     *
     * @throws IllegalStateException when the provider cannot make a key (no window left)
     */
    public int grant(MemoryRegion region, long untilEpochMillis) {
        PeerKey key = keyOf(region);
        rkeys.merge(key.rkey(), new Grant(untilEpochMillis, region), (held, asked) ->
                new Grant(held.region() == region ? Math.max(held.until(), asked.until()) : asked.until(), region));
        region.whenDeregistered(onDeregistered); // after the grant: a region deregistered meanwhile drops it now
        if (key.boundToPeer() && untilEpochMillis != Long.MAX_VALUE) {
            long delay = Math.max(0, untilEpochMillis - System.currentTimeMillis());
            CompletableFuture.delayedExecutor(delay, TimeUnit.MILLISECONDS).execute(() -> expire(region, key));
        }
        return key.rkey();
    }

    private PeerKey keyOf(MemoryRegion region) {
        synchronized (this) {
            Key held = keys.get(region);
            if (held != null) {
                return held.key;
            }
            PeerKey key;
            try {
                key = node == null ? PeerKey.ofRegion(region) : node.peerKey(region);
            } catch (TransportException e) {
                throw new IllegalStateException("no key for " + region + ": " + e.getMessage(), e);
            }
            Key made = new Key(key);
            keys.put(region, made);
            if (data != null && key.boundToPeer()) {
                made.boundTo = data;
                UNSETTLED.get().add(key.bindTo(data));
            }
            return key;
        }
    }

    /** The grant of a region with a key of its own ended (its time): the key is revoked. */
    private void expire(MemoryRegion region, PeerKey key) {
        Grant grant = rkeys.get(key.rkey());
        if (grant != null && System.currentTimeMillis() < grant.until()) {
            long delay = grant.until() - System.currentTimeMillis(); // extended meanwhile
            CompletableFuture.delayedExecutor(delay, TimeUnit.MILLISECONDS).execute(() -> expire(region, key));
            return;
        }
        synchronized (this) {
            Key held = keys.get(region);
            if (held != null && held.key == key) {
                keys.remove(region);
            }
        }
        key.revoke();
        rkeys.remove(key.rkey());
    }

    /** Drops the region's grant and revokes its key (the region was deregistered). */
    private void drop(MemoryRegion region) {
        Key held;
        synchronized (this) {
            held = keys.remove(region);
        }
        if (held != null) {
            held.key.revoke();
            rkeys.computeIfPresent(held.key.rkey(), (rkey, grant) -> grant.region() == region ? null : grant);
        }
        rkeys.computeIfPresent(region.rkey(), (rkey, grant) -> grant.region() == region ? null : grant);
    }

    /**
     * The peer's data channel is authenticated: keys not bound yet are bound to it, and so are keys
     * granted from now on (a window serves the QP it was bound on only; keys bound to an earlier data
     * channel go with that channel, {@link #detach}). Completes when the binds did: only then may the
     * channel say READY.
     */
    public CompletableFuture<Void> attach(Channel channel) {
        List<CompletableFuture<Void>> binds = new ArrayList<>();
        synchronized (this) {
            data = channel;
            for (Key key : keys.values()) {
                if (key.key.boundToPeer() && key.boundTo == null) {
                    key.boundTo = channel;
                    binds.add(key.key.bindTo(channel));
                }
            }
        }
        return CompletableFuture.allOf(binds.toArray(CompletableFuture[]::new));
    }

    /** The peer's data channel closed: the keys bound to it are revoked, their grants dropped. */
    public void detach(Channel channel) {
        List<Key> gone = new ArrayList<>();
        synchronized (this) {
            if (data == channel) {
                data = null;
            }
            for (var it = keys.entrySet().iterator(); it.hasNext(); ) {
                Key key = it.next().getValue();
                if (key.boundTo == channel) {
                    it.remove();
                    gone.add(key);
                }
            }
        }
        gone.forEach(this::revoke);
    }

    private void revoke(Key key) {
        key.key.revoke();
        rkeys.remove(key.key.rkey());
    }

    /**
     * The binds grants started on this thread since the last call, as one future: an answer that
     * hands out their keys is sent when it completes.
     */
    public static CompletableFuture<Void> takeUnsettled() {
        List<CompletableFuture<Void>> started = UNSETTLED.get();
        if (started.isEmpty()) {
            return CompletableFuture.completedFuture(null);
        }
        CompletableFuture<Void> all = CompletableFuture.allOf(started.toArray(CompletableFuture[]::new));
        started.clear();
        return all;
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

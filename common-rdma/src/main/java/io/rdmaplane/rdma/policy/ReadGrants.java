package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.KeyDomain;
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
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The regions one peer may READ from a {@link PolicyServer}'s node, by rkey. A server grants a
 * region to the peer it hands the region's descriptor to (before it sends it); a READ on another
 * peer's channel with the same rkey is refused. A revoked region's rkey READs nothing whoever
 * holds a grant for it; a grant made with the region itself ({@link #grant(MemoryRegion, long)})
 * is dropped when the region is deregistered, so grants never outgrow the live regions.
 *
 * <p>A grant of a region's byte range ({@link #grant(MemoryRegion, long, int, long)}) gets a key of its
 * own ({@link Node#peerKey}) bound to the peer's data channel: it READs that range only, through that
 * channel only, and is revoked when the session ends, the grant expires or the region goes. When that data
 * channel closes, a tcp key waits for (and is bound to) the session's next data channel, so READs re-issued
 * after a data-channel reconnect still READ; a verbs window goes with its QP (the peer must be granted anew). On tcp every region is granted so (the provider checks key, channel and range on each
 * READ); on verbs a region {@linkplain Node#registerForGrants registered for grants} is, as a memory
 * window over exactly the range; elsewhere the key is the region's own rkey (the whole region), which
 * only the peer's data channels READ (tcp asks {@link #allows} per READ). With a {@link KeyDomain} (verbs: the
 * peer's own protection domain, which its data channels are accepted into) every key is the domain's: a
 * registration of exactly the range there, whatever the memory (read-only file mappings too), READ through
 * the peer's data channels only and kept across its data-channel reconnects; a region's own rkey then READs
 * nothing through them, so a grant by rkey is refused.
 */
public final class ReadGrants {
    /** Until when (epoch millis) a grant READs, and the region it was made with (null: by rkey only). */
    private record Grant(long until, MemoryRegion region) {
    }

    /** Expires grants with keys of their own (a daemon thread, as CompletableFuture's delayed executor has). */
    private static final ScheduledThreadPoolExecutor EXPIRY = expiryTimer();

    private static ScheduledThreadPoolExecutor expiryTimer() {
        ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "rdma-grant-expiry");
            t.setDaemon(true);
            return t;
        });
        timer.setRemoveOnCancelPolicy(true); // a cancelled expiry lets go of its key and region at once
        return timer;
    }

    /** Bind work a grant started on the current thread, which the answer to the peer waits for (see {@link #takeUnsettled}). */
    private static final ThreadLocal<List<CompletableFuture<Void>>> UNSETTLED = ThreadLocal.withInitial(ArrayList::new);

    /** What one key covers: {@code length} bytes at {@code address} of {@code region}. */
    private record Range(MemoryRegion region, long address, int length) {
    }

    /** A range's key for this peer, and the channel it is bound to (null: not yet). */
    private static final class Key {
        final PeerKey key;
        Channel boundTo;
        /** Revokes the key when its grant expires; cancelled when it goes otherwise, so nothing holds the region. */
        volatile ScheduledFuture<?> expiry;

        Key(PeerKey key) {
            this.key = key;
        }
    }

    private final Node node;
    /** Where this peer's keys are made (null: per channel, by the provider); closed with these grants if owned. */
    private final KeyDomain domain;
    private final boolean ownsDomain;
    private final ConcurrentHashMap<Integer, Grant> rkeys = new ConcurrentHashMap<>();
    /** Keys by range (guarded by this); and the peer's current data channel, which new keys bind to. */
    private final Map<Range, Key> keys = new HashMap<>();
    private Channel data; // guarded by this
    private boolean closed; // guarded by this
    /** One listener per peer, so a region granted to it many times tells it once. */
    private final Consumer<MemoryRegion> onDeregistered = this::drop;

    /** Grants whose keys are the regions' own rkeys (no provider to ask for keys per peer). */
    public ReadGrants() {
        this(null);
    }

    /** Grants whose keys {@code node} makes per peer ({@link Node#peerKey}); null: the regions' own rkeys. */
    public ReadGrants(Node node) {
        this(node, null, false);
    }

    /**
     * Grants whose keys {@code node} makes in {@code domain} ({@link Node#peerKey(MemoryRegion, long, int, KeyDomain)});
     * null: as {@link #ReadGrants(Node)}. With {@code ownsDomain}, {@link #close} closes the domain too.
     */
    public ReadGrants(Node node, KeyDomain domain, boolean ownsDomain) {
        this.node = node;
        this.domain = domain;
        this.ownsDomain = ownsDomain;
    }

    /** The domain this peer's keys are made in, or null. */
    public KeyDomain domain() {
        return domain;
    }

    /** Lets the peer READ the region {@code rkey}, for as long as the region lives. */
    public void grant(int rkey) {
        grant(rkey, Long.MAX_VALUE);
    }

    /**
     * Lets the peer READ the region {@code rkey} until {@code untilEpochMillis} (wall clock, as an
     * HDFS block token's expiry date is); a grant already held for longer is kept.
     *
     * @throws IllegalStateException with a key domain, where the region's own rkey READs nothing
     */
    public void grant(int rkey, long untilEpochMillis) {
        if (domain != null) {
            throw new IllegalStateException("keys are made per peer here (a key domain: " + domain + "), and a region's own rkey"
                    + " READs nothing through the peer's channels: grant the region (or a range of it), not rkey "
                    + Integer.toUnsignedString(rkey, 16));
        }
        rkeys.merge(rkey, new Grant(untilEpochMillis, null), (held, asked) ->
                new Grant(Math.max(held.until(), asked.until()), held.region()));
    }

    /**
     * Lets the peer READ the whole of {@code region} until {@code untilEpochMillis}, and returns the key to
     * hand it ({@link #grant(MemoryRegion, long, int, long)}).
     *
     * @throws IllegalStateException when the provider cannot make a key (no window left)
     */
    public int grant(MemoryRegion region, long untilEpochMillis) {
        return grant(region, region.address(), region.length(), untilEpochMillis);
    }

    /**
     * Lets the peer READ {@code length} bytes at {@code address} of {@code region} until
     * {@code untilEpochMillis}, and returns the rkey to hand it: a key of that range's own bound to the
     * peer's data channel (tcp; a memory window over the range on verbs), or the region's own rkey where
     * the provider has no key per peer. A key is bound when that channel is authenticated, before it is
     * READY; a bind started for a channel already there is waited for by the answer, {@link #takeUnsettled}.
     * The grant goes when the region is deregistered.
     *
     * @throws IllegalStateException when the provider cannot make a key (no window left)
     * @throws IllegalArgumentException when the range is not inside the region
     */
    public int grant(MemoryRegion region, long address, int length, long untilEpochMillis) {
        Range range = new Range(region, address, length);
        Key held = keyOf(range);
        PeerKey key = held.key;
        rkeys.merge(key.rkey(), new Grant(untilEpochMillis, region), (was, asked) ->
                new Grant(was.region() == region ? Math.max(was.until(), asked.until()) : asked.until(), region));
        region.whenDeregistered(onDeregistered); // after the grant: a region deregistered meanwhile drops it now
        if (key.boundToPeer() && untilEpochMillis != Long.MAX_VALUE) {
            synchronized (held) {
                if (held.expiry == null) { // a later grant that extends it is seen when this one fires
                    held.expiry = EXPIRY.schedule(() -> expire(range, held),
                            Math.max(0, untilEpochMillis - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
                }
            }
        }
        return key.rkey();
    }

    private Key keyOf(Range range) {
        synchronized (this) {
            if (closed) {
                throw new IllegalStateException("the peer's session has ended: nothing more is granted to it");
            }
            Key held = keys.get(range);
            if (held != null && (held.boundTo == null || held.boundTo == data)) {
                return held;
            }
            if (held != null && held.key.rebindable() && data != null) { // moves to the peer's newer data channel
                held.boundTo = data;
                UNSETTLED.get().add(bindForAnswer(held.key, data));
                return held;
            }
            if (held != null) { // bound to an earlier data channel of the peer, which a newer one replaced: it goes
                keys.remove(range);
                revoke(held);
            }
            PeerKey key;
            try {
                key = node == null ? PeerKey.ofRegion(range.region()) : node.peerKey(range.region(), range.address(), range.length(), domain);
            } catch (TransportException e) {
                throw new IllegalStateException("no key for " + range + ": " + e.getMessage(), e);
            }
            Key made = new Key(key);
            keys.put(range, made);
            if (data != null && key.boundToPeer()) {
                made.boundTo = data;
                UNSETTLED.get().add(bindForAnswer(key, data));
            }
            return made;
        }
    }

    /** The grant of a range with a key of its own ended (its time): the key is revoked. */
    private void expire(Range range, Key held) {
        PeerKey key = held.key;
        Grant grant = rkeys.get(key.rkey());
        if (grant != null && System.currentTimeMillis() < grant.until()) {
            long delay = grant.until() - System.currentTimeMillis(); // extended meanwhile
            synchronized (held) {
                held.expiry = EXPIRY.schedule(() -> expire(range, held), delay, TimeUnit.MILLISECONDS);
            }
            return;
        }
        synchronized (this) {
            keys.remove(range, held);
        }
        revoke(held);
    }

    /** Drops the region's grants and revokes their keys (the region was deregistered). */
    private void drop(MemoryRegion region) {
        List<Key> gone = new ArrayList<>();
        synchronized (this) {
            for (var it = keys.entrySet().iterator(); it.hasNext(); ) {
                var entry = it.next();
                if (entry.getKey().region() == region) {
                    it.remove();
                    gone.add(entry.getValue());
                }
            }
        }
        for (Key held : gone) {
            cancelExpiry(held);
            held.key.revoke();
            rkeys.computeIfPresent(held.key.rkey(), (rkey, grant) -> grant.region() == region ? null : grant);
        }
        rkeys.computeIfPresent(region.rkey(), (rkey, grant) -> grant.region() == region ? null : grant);
    }

    /**
     * Binds {@code key} to the peer's data channel for the answer that hands it out. A channel that closed
     * meanwhile (its {@link #detach} yet to run) fails no grant: detach hands a key that outlives its channel
     * on to the next one and revokes one that does not, whose READs are then refused for the peer to ask
     * anew. Failing the answer instead failed the whole request (a LOCATE, an HDFS block request) over a
     * data-channel reconnect: CI at eb48304 saw it after a refused READ had closed the data channel.
     */
    private static CompletableFuture<Void> bindForAnswer(PeerKey key, Channel channel) {
        return key.bindTo(channel).exceptionallyCompose(e -> channel.isOpen() ? CompletableFuture.failedFuture(e)
                : CompletableFuture.completedFuture(null));
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
                if (key.key.boundToPeer() && (key.boundTo == null || (key.key.rebindable() && key.boundTo != channel))) {
                    key.boundTo = channel;
                    binds.add(key.key.bindTo(channel));
                }
            }
        }
        return CompletableFuture.allOf(binds.toArray(CompletableFuture[]::new));
    }

    /**
     * The peer's data channel closed. Keys that outlive their channel ({@link PeerKey#rebindable}, tcp) stay
     * with their grants and are bound to the session's next data channel (or its newer one, now): a READ
     * re-issued after a data-channel reconnect READs with the key it was given. Keys that go with their
     * channel (a type 2 window with its QP) are revoked, their grants dropped: the peer asks for new ones.
     */
    public void detach(Channel channel) {
        List<Key> gone = new ArrayList<>();
        synchronized (this) {
            if (data == channel) {
                data = null;
            }
            for (var it = keys.entrySet().iterator(); it.hasNext(); ) {
                Key key = it.next().getValue();
                if (key.boundTo != channel) {
                    continue;
                }
                if (key.key.rebindable()) {
                    key.boundTo = data;
                    if (data != null) {
                        key.key.bindTo(data);
                    }
                } else {
                    it.remove();
                    gone.add(key);
                }
            }
        }
        gone.forEach(this::revoke);
    }

    /**
     * The session these grants belong to ended: every key is revoked (bound or not), every grant dropped,
     * and a grant of a range made afterwards is refused. Idempotent.
     */
    public void close() {
        List<Key> gone;
        synchronized (this) {
            closed = true;
            data = null;
            gone = new ArrayList<>(keys.values());
            keys.clear();
        }
        gone.forEach(this::revoke);
        rkeys.clear();
        if (ownsDomain && domain != null) {
            domain.close();
        }
    }

    private static void cancelExpiry(Key key) {
        ScheduledFuture<?> expiry;
        synchronized (key) {
            expiry = key.expiry;
            key.expiry = null;
        }
        if (expiry != null) {
            expiry.cancel(false);
        }
    }

    private void revoke(Key key) {
        cancelExpiry(key);
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

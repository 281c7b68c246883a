package io.rdmaplane.hdfs.client;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * The client's sessions of their own per key (DataNode service, block pool, token user), kept for reuse: a pread
 * opens a reader per call, and all of a user's blocks on a DataNode are read through one session. Bounded twice: at
 * most {@code kept} (the least recently used beyond are closed, held or not), and a session no reader holds and none
 * used for {@code idleNanos} is closed by {@link #closeIdle} (so the sockets of a DataNode no longer read from, or of
 * a user gone, are not kept on both ends). A reader holds its session from {@link #acquire} to {@link #release}: a
 * reader that pauses longer than the idle bound between two reads (a query decoding what it read, a slow connect)
 * keeps its session instead of falling back to TCP.
 * Thread-safe.
 */
final class TokenSessions<C> {
    private final int kept;
    private final long idleNanos;
    private final Consumer<C> close;
    private final Map<String, C> sessions;
    /** When each kept session was last handed out, read through or released ({@link System#nanoTime()}). */
    private final Map<C, Long> used = new IdentityHashMap<>();
    /** How many readers hold each kept session (absent: none). */
    private final Map<C, Integer> holders = new IdentityHashMap<>();

    TokenSessions(int kept, long idleNanos, Consumer<C> close) {
        this.kept = kept;
        this.idleNanos = idleNanos;
        this.close = close;
        this.sessions = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, C> eldest) {
                if (size() > TokenSessions.this.kept) {
                    used.remove(eldest.getValue());
                    holders.remove(eldest.getValue());
                    TokenSessions.this.close.accept(eldest.getValue());
                    return true;
                }
                return false;
            }
        };
    }

    /**
     * The session of {@code key}, held by the caller until it calls {@link #release}: the kept one while
     * {@code usable}, else a new one from {@code create} (the old one closed).
     */
    synchronized C acquire(String key, Predicate<C> usable, Supplier<C> create, long now) {
        C existing = sessions.get(key);
        if (existing != null && usable.test(existing)) {
            used.put(existing, now);
            holders.merge(existing, 1, Integer::sum);
            return existing;
        }
        if (existing != null) {
            used.remove(existing);
            holders.remove(existing);
            close.accept(existing);
        }
        C created = create.get();
        sessions.put(key, created);
        used.put(created, now);
        holders.put(created, 1);
        return created;
    }

    /** A reader is done with {@code session}; its idle time starts now. (Nothing when it is not one of ours, or no longer kept.) */
    synchronized void release(C session, long now) {
        if (used.computeIfPresent(session, (s, t) -> now) != null) {
            holders.computeIfPresent(session, (s, n) -> n > 1 ? n - 1 : null);
        }
    }

    /** A reader read through {@code session}: it is not idle. (Nothing when it is not one of ours, or no longer kept.) */
    synchronized void used(C session, long now) {
        used.computeIfPresent(session, (s, t) -> now);
    }

    /** Closes the sessions no reader holds and none used for the idle bound; returns how many. */
    int closeIdle(long now) {
        List<C> idle = new ArrayList<>();
        synchronized (this) {
            for (Iterator<Map.Entry<String, C>> it = sessions.entrySet().iterator(); it.hasNext(); ) {
                C session = it.next().getValue();
                if (holders.containsKey(session)) {
                    continue;
                }
                Long last = used.get(session);
                if (last == null || now - last >= idleNanos) {
                    it.remove();
                    used.remove(session);
                    idle.add(session);
                }
            }
        }
        idle.forEach(close); // outside the lock: closing fails the session's waiting work, whose callers may come back here
        return idle.size();
    }

    synchronized int size() {
        return sessions.size();
    }
}

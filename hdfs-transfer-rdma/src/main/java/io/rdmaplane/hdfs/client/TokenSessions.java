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
 * keeps its session instead of falling back to TCP, and reads through a held session need no bookkeeping.
 * Thread-safe.
 */
final class TokenSessions<C> {
    private final int kept;
    private final long idleNanos;
    private final Consumer<C> close;
    private final Map<String, C> sessions;
    /** Each kept session's readers, and when the last one let go. */
    private final Map<C, Hold> holds = new IdentityHashMap<>();

    private static final class Hold {
        int readers = 1;
        long releasedNanos;
    }

    TokenSessions(int kept, long idleNanos, Consumer<C> close) {
        this.kept = kept;
        this.idleNanos = idleNanos;
        this.close = close;
        this.sessions = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, C> eldest) {
                if (size() > TokenSessions.this.kept) {
                    holds.remove(eldest.getValue());
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
    synchronized C acquire(String key, Predicate<C> usable, Supplier<C> create) {
        C existing = sessions.get(key);
        if (existing != null && usable.test(existing)) {
            holds.get(existing).readers++;
            return existing;
        }
        if (existing != null) {
            holds.remove(existing);
            close.accept(existing);
        }
        C created = create.get();
        sessions.put(key, created);
        holds.put(created, new Hold());
        return created;
    }

    /** A reader is done with {@code session}; once none holds it, its idle time starts. (Nothing when it is no longer kept.) */
    synchronized void release(C session, long now) {
        Hold hold = holds.get(session);
        if (hold != null && hold.readers > 0) {
            hold.readers--;
            hold.releasedNanos = now;
        }
    }

    /** Closes the sessions no reader holds and none used for the idle bound; returns how many. */
    int closeIdle(long now) {
        List<C> idle = new ArrayList<>();
        synchronized (this) {
            for (Iterator<Map.Entry<String, C>> it = sessions.entrySet().iterator(); it.hasNext(); ) {
                C session = it.next().getValue();
                Hold hold = holds.get(session);
                if (hold.readers == 0 && now - hold.releasedNanos >= idleNanos) {
                    it.remove();
                    holds.remove(session);
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

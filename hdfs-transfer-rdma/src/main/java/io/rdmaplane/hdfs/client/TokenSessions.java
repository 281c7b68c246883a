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
 * most {@code kept} (the least recently used beyond are closed), and a session unused for {@code idleNanos} is closed
 * by {@link #closeIdle} (so the sockets of a DataNode no longer read from, or of a user gone, are not kept on both
 * ends). A reader still using a closed session falls back to TCP.
 * Thread-safe.
 */
final class TokenSessions<C> {
    private final int kept;
    private final long idleNanos;
    private final Consumer<C> close;
    private final Map<String, C> sessions;
    /** When each kept session was last handed out or read through ({@link System#nanoTime()}). */
    private final Map<C, Long> used = new IdentityHashMap<>();

    TokenSessions(int kept, long idleNanos, Consumer<C> close) {
        this.kept = kept;
        this.idleNanos = idleNanos;
        this.close = close;
        this.sessions = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, C> eldest) {
                if (size() > TokenSessions.this.kept) {
                    used.remove(eldest.getValue());
                    TokenSessions.this.close.accept(eldest.getValue());
                    return true;
                }
                return false;
            }
        };
    }

    /** The session of {@code key}: the kept one while {@code usable}, else a new one from {@code create} (the old one closed). */
    synchronized C get(String key, Predicate<C> usable, Supplier<C> create, long now) {
        C existing = sessions.get(key);
        if (existing != null && usable.test(existing)) {
            used.put(existing, now);
            return existing;
        }
        if (existing != null) {
            used.remove(existing);
            close.accept(existing);
        }
        C created = create.get();
        sessions.put(key, created);
        used.put(created, now);
        return created;
    }

    /** A reader read through {@code session}: it is not idle. (Nothing when it is not one of ours, or no longer kept.) */
    synchronized void used(C session, long now) {
        used.computeIfPresent(session, (s, t) -> now);
    }

    /** Closes the sessions unused for the idle bound; returns how many. */
    int closeIdle(long now) {
        List<C> idle = new ArrayList<>();
        synchronized (this) {
            for (Iterator<Map.Entry<String, C>> it = sessions.entrySet().iterator(); it.hasNext(); ) {
                C session = it.next().getValue();
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

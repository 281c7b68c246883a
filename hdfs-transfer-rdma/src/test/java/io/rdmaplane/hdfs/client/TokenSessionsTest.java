package io.rdmaplane.hdfs.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The HDFS client's token sessions: reused while in use, closed once idle, bounded in number. */
class TokenSessionsTest {
    private static final long SECOND = 1_000_000_000L;

    /** A session as the test sees it: its name, and whether it was closed. */
    private static final class Session {
        final String name;
        boolean closed;

        Session(String name) {
            this.name = name;
        }
    }

    private final AtomicInteger created = new AtomicInteger();

    private Session create() {
        return new Session("s" + created.incrementAndGet());
    }

    @Test
    void aSessionIsReusedAndClosedOnceUnusedForTheIdleBound() {
        TokenSessions<Session> sessions = new TokenSessions<>(256, 30 * SECOND, s -> s.closed = true);
        Session a = sessions.get("dn1/token-a", s -> !s.closed, this::create, 0);
        assertSame(a, sessions.get("dn1/token-a", s -> !s.closed, this::create, 10 * SECOND), "reused");
        Session b = sessions.get("dn1/token-b", s -> !s.closed, this::create, 10 * SECOND);
        sessions.used(b, 35 * SECOND); // a reader read through it
        assertEquals(0, sessions.closeIdle(39 * SECOND), "a was handed out at 10 s, b read through at 35 s");
        assertEquals(1, sessions.closeIdle(40 * SECOND));
        assertTrue(a.closed);
        assertFalse(b.closed);
        assertEquals(1, sessions.size());
        assertEquals(1, sessions.closeIdle(65 * SECOND));
        assertTrue(b.closed);
        assertEquals(0, sessions.size(), "a query's sessions are all gone once idle: their sockets do not pile up");
        Session again = sessions.get("dn1/token-a", s -> !s.closed, this::create, 70 * SECOND);
        assertFalse(again.closed, "a read after the close opens a new session");
        sessions.used(a, 71 * SECOND); // a closed session's late reader changes nothing
        assertEquals(1, sessions.size());
    }

    @Test
    void aFailedSessionIsReplacedAndTheLeastRecentlyUsedBeyondTheBoundClosed() {
        TokenSessions<Session> sessions = new TokenSessions<>(2, 30 * SECOND, s -> s.closed = true);
        Session a = sessions.get("a", s -> true, this::create, 0);
        Session replaced = sessions.get("a", s -> false, this::create, 1);
        assertTrue(a.closed, "the unusable session is closed");
        Session b = sessions.get("b", s -> true, this::create, 2);
        sessions.get("c", s -> true, this::create, 3);
        assertTrue(replaced.closed, "the least recently used beyond 2");
        assertFalse(b.closed);
        assertEquals(2, sessions.size());
    }
}

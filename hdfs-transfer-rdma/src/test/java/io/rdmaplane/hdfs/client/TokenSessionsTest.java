package io.rdmaplane.hdfs.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The HDFS client's token sessions: reused, held by their readers, closed once idle, bounded in number. */
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
    void aSessionIsReusedAndClosedOnceNoReaderHoldsItForTheIdleBound() {
        TokenSessions<Session> sessions = new TokenSessions<>(256, 30 * SECOND, s -> s.closed = true);
        Session a = sessions.acquire("dn1/token-a", s -> !s.closed, this::create);
        assertSame(a, sessions.acquire("dn1/token-a", s -> !s.closed, this::create), "reused");
        sessions.release(a, 10 * SECOND);
        sessions.release(a, 10 * SECOND);
        Session b = sessions.acquire("dn1/token-b", s -> !s.closed, this::create);
        sessions.release(b, 35 * SECOND);
        assertEquals(0, sessions.closeIdle(39 * SECOND), "a was released at 10 s, b at 35 s");
        assertEquals(1, sessions.closeIdle(40 * SECOND));
        assertTrue(a.closed);
        assertFalse(b.closed);
        assertEquals(1, sessions.size());
        assertEquals(1, sessions.closeIdle(65 * SECOND));
        assertTrue(b.closed);
        assertEquals(0, sessions.size(), "a query's sessions are all gone once idle: their sockets do not pile up");
        Session again = sessions.acquire("dn1/token-a", s -> !s.closed, this::create);
        assertFalse(again.closed, "a read after the close opens a new session");
        sessions.release(a, 71 * SECOND); // a closed session's late reader changes nothing
        assertEquals(1, sessions.size());
    }

    /**
     * CI's TPC-DS over verbs once fell back to TCP because the sweep closed a session whose reader had it in hand: its
     * connect took longer than the 5 s idle bound under the VM's emulated CPUs. A held session stays open however long
     * its reader pauses; its idle time starts when the last holder lets go.
     */
    @Test
    void aSessionAReaderHoldsIsNeverClosedAsIdle() {
        TokenSessions<Session> sessions = new TokenSessions<>(256, 5 * SECOND, s -> s.closed = true);
        Session a = sessions.acquire("dn1/token-a", s -> !s.closed, this::create);
        assertSame(a, sessions.acquire("dn1/token-a", s -> !s.closed, this::create), "a second reader");
        assertEquals(0, sessions.closeIdle(60 * SECOND), "two readers hold it");
        sessions.release(a, 60 * SECOND);
        assertEquals(0, sessions.closeIdle(120 * SECOND), "one reader still holds it");
        assertFalse(a.closed);
        sessions.release(a, 120 * SECOND);
        assertEquals(0, sessions.closeIdle(124 * SECOND), "idle for 4 s since its last reader let go");
        assertEquals(1, sessions.closeIdle(125 * SECOND));
        assertTrue(a.closed);
        Session again = sessions.acquire("dn1/token-a", s -> !s.closed, this::create);
        sessions.release(a, 131 * SECOND); // a reader of the closed session closed late, or twice: it frees nothing else
        assertEquals(0, sessions.closeIdle(140 * SECOND), "the new session's reader still holds it");
        sessions.release(again, 140 * SECOND);
        assertEquals(1, sessions.closeIdle(145 * SECOND));
    }

    @Test
    void aFailedSessionIsReplacedAndTheLeastRecentlyUsedBeyondTheBoundClosed() {
        TokenSessions<Session> sessions = new TokenSessions<>(2, 30 * SECOND, s -> s.closed = true);
        Session a = sessions.acquire("a", s -> true, this::create);
        Session replaced = sessions.acquire("a", s -> false, this::create);
        assertTrue(a.closed, "the unusable session is closed");
        Session b = sessions.acquire("b", s -> true, this::create);
        sessions.acquire("c", s -> true, this::create);
        assertTrue(replaced.closed, "the least recently used beyond 2");
        assertFalse(b.closed);
        assertEquals(2, sessions.size());
    }
}

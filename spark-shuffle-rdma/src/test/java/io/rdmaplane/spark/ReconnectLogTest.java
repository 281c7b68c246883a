package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.policy.TrafficClass;
import java.net.InetSocketAddress;
import org.junit.jupiter.api.Test;

class ReconnectLogTest {
    private static final InetSocketAddress PEER = new InetSocketAddress("10.0.0.7", 7300);

    @Test
    void anAttemptCarriesItsStartTimeAndThePlannedDelay() {
        ReconnectLog log = new ReconnectLog();
        assertEquals("", log.text());
        long before = System.currentTimeMillis() * 1000;
        log.reconnectScheduled(PEER, TrafficClass.DATA, 1, 123_456_000L);
        log.reconnectAttempted(PEER, TrafficClass.DATA, 1);
        long after = (System.currentTimeMillis() + 1) * 1000;
        String[] f = log.text().split(":");
        assertEquals(5, f.length, log.text());
        long micros = Long.parseLong(f[0]);
        assertTrue(micros >= before - 1000 && micros <= after, log.text() + " within [" + before + ", " + after + "]");
        assertEquals("1", f[1]);
        assertEquals("123456", f[2], "the planned delay in microseconds");
        assertEquals("10.0.0.7/7300", f[3]);
        assertEquals("data", f[4]);
    }

    @Test
    void anAttemptWithoutAPlanSaysSoAndTheLogKeepsOnlyTheLatest() {
        ReconnectLog log = new ReconnectLog();
        log.reconnectAttempted(PEER, TrafficClass.CONTROL, 3);
        assertTrue(log.text().contains(":3:-1:10.0.0.7/7300:control"), log.text());
        for (int i = 0; i < ReconnectLog.KEPT + 10; i++) {
            log.reconnectScheduled(PEER, TrafficClass.DATA, i + 1, 1_000L * i);
            log.reconnectAttempted(PEER, TrafficClass.DATA, i + 1);
        }
        String[] entries = log.text().split(" ");
        assertEquals(ReconnectLog.KEPT, entries.length);
        assertTrue(entries[entries.length - 1].contains(":" + (ReconnectLog.KEPT + 10) + ":"), entries[entries.length - 1]);
    }
}

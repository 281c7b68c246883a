package io.rdmaplane.rdma.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.policy.PeerOverride;
import io.rdmaplane.rdma.policy.PolicyOptions;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Detection window, backoff and attempts per peer, through {@code peer.overrides}. */
class PeerOverridesTest {
    private static final ConfigRegistry REGISTRY = new ConfigRegistry("test", "spark.shuffle.rdma.", PolicyKeys.SHARED);
    private static final String KEY = "spark.shuffle.rdma.peer.overrides";

    private static PolicyOptions options(String overrides) {
        return PolicyKeys.policyOptions(REGISTRY.validate(List.of(KEY), Map.of(KEY, overrides)::get), null);
    }

    @Test
    void aPeersSettingsApplyToItOnlyAndHostAndPortWins() {
        PolicyOptions o = options("10.0.0.7 detectionWindow=1s reconnect.maxAttempts=3; 10.0.0.7:7000 reconnect.base=50ms;"
                + " [fe80::1]:9 reconnect.cap=2s reconnect.jitter=0");
        assertEquals(List.of(new PeerOverride("10.0.0.7", -1, Duration.ofSeconds(1), null, null, null, 3),
                new PeerOverride("10.0.0.7", 7000, null, Duration.ofMillis(50), null, null, null),
                new PeerOverride("fe80::1", 9, null, null, Duration.ZERO, Duration.ofSeconds(2), null)), o.peerOverrides());

        PolicyOptions any = o.forPeer(new InetSocketAddress("10.0.0.7", 1234));
        assertEquals(Duration.ofSeconds(1), any.detectionWindow());
        assertEquals(3, any.reconnectMaxAttempts());
        assertEquals(o.reconnectBase(), any.reconnectBase());

        PolicyOptions port = o.forPeer(new InetSocketAddress("10.0.0.7", 7000));
        assertEquals(Duration.ofSeconds(1), port.detectionWindow(), "the host entry applies too");
        assertEquals(Duration.ofMillis(50), port.reconnectBase(), "and the host:port entry on top");

        PolicyOptions other = o.forPeer(new InetSocketAddress("10.0.0.8", 7000));
        assertEquals(PolicyOptions.defaults().detectionWindow(), other.detectionWindow());
        assertEquals(PolicyOptions.defaults().reconnectMaxAttempts(), other.reconnectMaxAttempts());
        assertEquals(Duration.ofSeconds(2), o.forPeer(new InetSocketAddress("fe80::1", 9)).reconnectCap());
        assertEquals(List.of(), options("").peerOverrides());
    }

    @Test
    void badEntriesNameTheKeyTheEntryAndTheFault() {
        assertFault("10.0.0.7 detectionWindow=5ms", "10.0.0.7 detectionWindow=5ms", "detectionWindow = '5ms'");
        assertFault("10.0.0.7 queueDepth=4", "10.0.0.7 queueDepth=4", "'queueDepth' is not a per-peer setting");
        assertFault("10.0.0.7:99999 reconnect.base=1s", "10.0.0.7:99999", "port '99999'");
        assertFault("10.0.0.7 reconnect.base=1s reconnect.base=2s", "10.0.0.7", "set twice");
        assertFault("detectionWindow=1s", "detectionWindow=1s", "expected a host");
    }

    private static void assertFault(String value, String entry, String fault) {
        ConfigException e = assertThrows(ConfigException.class, () -> options(value));
        assertTrue(e.getMessage().contains(KEY) && e.getMessage().contains(entry) && e.getMessage().contains(fault), e.getMessage());
    }
}

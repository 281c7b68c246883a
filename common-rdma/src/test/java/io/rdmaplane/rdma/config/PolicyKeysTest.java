package io.rdmaplane.rdma.config;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.rdmaplane.rdma.policy.PolicyOptions;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PolicyKeysTest {
    private static final ConfigRegistry REGISTRY = new ConfigRegistry("test", "spark.shuffle.rdma.", PolicyKeys.SHARED);

    @Test
    void defaultsAreTheDocumentedPolicyDefaults() {
        assertEquals(PolicyOptions.defaults(), PolicyKeys.policyOptions(REGISTRY.bind(k -> null), null));
    }

    @Test
    void settingsReachThePolicyOptions() {
        Map<String, String> settings = Map.of(
                "spark.shuffle.rdma.detectionWindow", "50ms",
                "spark.shuffle.rdma.reconnect.jitter", "0",
                "spark.shuffle.rdma.checksum.sampleRate", "1.0",
                "spark.shuffle.rdma.maxBytesInFlightPerPeer", "8m");
        PolicyOptions o = PolicyKeys.policyOptions(REGISTRY.bind(settings::get), new byte[] {1, 2});
        assertEquals(Duration.ofMillis(50), o.detectionWindow());
        assertEquals(Duration.ZERO, o.reconnectJitter());
        assertEquals(1.0, o.checksumSampleRate());
        assertEquals(8L << 20, o.maxBytesInFlightPerPeer());
        assertArrayEquals(new byte[] {1, 2}, o.secret());
    }

    @Test
    void aSampleRateOutsideZeroToOneNamesTheKey() {
        ConfigException e = assertThrows(ConfigException.class, () -> PolicyKeys.policyOptions(
                REGISTRY.bind(Map.of("spark.shuffle.rdma.checksum.sampleRate", "1.5")::get), null));
        assertEquals(true, e.getMessage().startsWith("spark.shuffle.rdma.checksum.sampleRate = '1.5'"), e.getMessage());
    }
}

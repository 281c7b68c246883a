package io.rdmaplane.rdma.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.rdmaplane.rdma.memory.PoolOptions;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

class TransportKeysTest {
    private static final ConfigRegistry SPARK_LIKE = new ConfigRegistry("Spark shuffle", "spark.shuffle.rdma.", TransportKeys.ALL);

    private static Conf conf(Map<String, String> settings) {
        return SPARK_LIKE.bind(settings::get);
    }

    @Test
    void theSharedKeysInReferenceOrder() {
        assertEquals(List.of("provider", "port", "maxMessageSize", "operationTimeout", "queueDepth", "pool.capacity",
                        "pool.acquireTimeout"),
                TransportKeys.ALL.stream().map(ConfigKey::suffix).collect(Collectors.toList()));
    }

    @Test
    void defaults() {
        Conf conf = conf(Map.of());
        assertEquals("auto", conf.get(TransportKeys.PROVIDER));
        assertEquals(0, conf.get(TransportKeys.PORT));
        assertEquals(64L << 10, conf.get(TransportKeys.MAX_MESSAGE_SIZE));
        assertEquals(Duration.ofSeconds(2), conf.get(TransportKeys.OPERATION_TIMEOUT));
        assertEquals(256, conf.get(TransportKeys.QUEUE_DEPTH));
        assertEquals(256L << 20, conf.get(TransportKeys.POOL_CAPACITY));
        assertEquals(Duration.ofSeconds(5), conf.get(TransportKeys.POOL_ACQUIRE_TIMEOUT));
    }

    @Test
    void providerChoicesAreTheProviderNames() {
        assertEquals(String.join(", ", Providers.names()), TransportKeys.PROVIDER.allowed());
        assertEquals("tcp", conf(Map.of("spark.shuffle.rdma.provider", "TCP")).get(TransportKeys.PROVIDER));
        ConfigException e = assertThrows(ConfigException.class,
                () -> conf(Map.of("spark.shuffle.rdma.provider", "ucx")).get(TransportKeys.PROVIDER));
        assertEquals("spark.shuffle.rdma.provider = 'ucx': expected one of " + String.join(", ", Providers.names()),
                e.getMessage());
    }

    @Test
    void aTestOnlyProviderIsAcceptedButNotListed() {
        assertEquals("auto, verbs, tcp", TransportKeys.PROVIDER.allowed(), "what the reference shows users");
        assertEquals("faulty", conf(Map.of("spark.shuffle.rdma.provider", "Faulty")).get(TransportKeys.PROVIDER));
    }

    @Test
    void poolCapacityMessageNamesKeyValueAndRange() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> conf(Map.of("spark.shuffle.rdma.pool.capacity", "12q")).get(TransportKeys.POOL_CAPACITY));
        assertEquals("spark.shuffle.rdma.pool.capacity = '12q': expected a byte size like 64k, 8m, 1g between 8m and 1t",
                e.getMessage());
    }

    @Test
    void acquireTimeoutMayBeZeroToFailAtOnce() {
        assertEquals(Duration.ZERO, conf(Map.of("spark.shuffle.rdma.pool.acquireTimeout", "0")).get(TransportKeys.POOL_ACQUIRE_TIMEOUT));
    }

    @Test
    void nodeOptionsFromDefaults() {
        NodeOptions options = TransportKeys.nodeOptions(conf(Map.of()), "127.0.0.1");
        assertEquals(new InetSocketAddress("127.0.0.1", 0), options.bindAddress());
        assertEquals(65536, options.maxMessageSize());
        assertEquals(Duration.ofSeconds(2), options.operationTimeout());
        assertEquals(256, options.acceptQueueDepth());
    }

    @Test
    void nodeOptionsFromSettings() {
        NodeOptions options = TransportKeys.nodeOptions(conf(Map.of(
                "spark.shuffle.rdma.port", "7447",
                "spark.shuffle.rdma.maxMessageSize", "16m",
                "spark.shuffle.rdma.operationTimeout", "500ms",
                "spark.shuffle.rdma.queueDepth", "16")), "127.0.0.1");
        assertEquals(new InetSocketAddress("127.0.0.1", 7447), options.bindAddress());
        assertEquals(16 << 20, options.maxMessageSize());
        assertEquals(Duration.ofMillis(500), options.operationTimeout());
        assertEquals(16, options.acceptQueueDepth());
    }

    @Test
    void nodeOptionsFailsOnABadSetting() {
        ConfigException e = assertThrows(ConfigException.class, () -> TransportKeys.nodeOptions(
                conf(Map.of("spark.shuffle.rdma.operationTimeout", "1d")), "127.0.0.1"));
        assertEquals("spark.shuffle.rdma.operationTimeout = '1d': expected a duration like 200ms, 2s, 1m between 10ms and 10m",
                e.getMessage());
    }

    @Test
    void poolOptionsFromSettings() {
        assertEquals(new PoolOptions(256L << 20, Duration.ofSeconds(5)), TransportKeys.poolOptions(conf(Map.of())));
        assertEquals(new PoolOptions(2L << 30, Duration.ZERO), TransportKeys.poolOptions(conf(Map.of(
                "spark.shuffle.rdma.pool.capacity", "2g",
                "spark.shuffle.rdma.pool.acquireTimeout", "0"))));
    }
}

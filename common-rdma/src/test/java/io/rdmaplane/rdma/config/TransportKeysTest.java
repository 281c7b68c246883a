package io.rdmaplane.rdma.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.memory.MemoryKind;
import io.rdmaplane.rdma.memory.PoolOptions;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.VerbsOptions;
import java.net.InetSocketAddress;
import java.nio.file.Path;
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
        assertEquals(List.of("provider", "port", "maxMessageSize", "operationTimeout", "queueDepth", "idleTimeout", "pool.capacity",
                        "pool.acquireTimeout", "pool.memory", "verbs.completion", "verbs.completion.spinMicros", "verbs.completion.hybridSpinMicros", "verbs.native.tmpdir", "verbs.cmTick", "verbs.receiveBuffers",
                        "verbs.cqEntries", "verbs.readPieceSize"),
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
    void poolMemoryIsOneOfTheKindsAndABadOneIsNamed() {
        assertEquals(new PoolOptions(256L << 20, Duration.ofSeconds(5), MemoryKind.AUTO), TransportKeys.poolOptions(conf(Map.of())));
        assertEquals(MemoryKind.HUGETLB, TransportKeys.poolOptions(conf(Map.of("spark.shuffle.rdma.pool.memory", "HugeTLB"))).memory());
        assertEquals(MemoryKind.THP, TransportKeys.poolOptions(conf(Map.of("spark.shuffle.rdma.pool.memory", "thp"))).memory());
        assertEquals(MemoryKind.DIRECT, TransportKeys.poolOptions(conf(Map.of("spark.shuffle.rdma.pool.memory", "direct"))).memory());
        ConfigException e = assertThrows(ConfigException.class,
                () -> TransportKeys.poolOptions(conf(Map.of("spark.shuffle.rdma.pool.memory", "huge"))));
        assertEquals("spark.shuffle.rdma.pool.memory = 'huge': expected one of auto, hugetlb, thp, direct", e.getMessage());
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
    void verbsDefaultsAreVerbsOptionsDefaults() {
        assertEquals(VerbsOptions.defaults(), TransportKeys.verbsOptions(conf(Map.of())));
        assertEquals(VerbsOptions.defaults(), TransportKeys.nodeOptions(conf(Map.of()), "127.0.0.1").verbs());
    }

    @Test
    void verbsSettingsReachTheNodeOptions() {
        VerbsOptions verbs = TransportKeys.nodeOptions(conf(Map.of(
                "spark.shuffle.rdma.verbs.completion", "POLL",
                "spark.shuffle.rdma.verbs.native.tmpdir", "/var/lib/rdma",
                "spark.shuffle.rdma.verbs.cmTick", "2ms",
                "spark.shuffle.rdma.verbs.receiveBuffers", "64",
                "spark.shuffle.rdma.verbs.cqEntries", "4096",
                "spark.shuffle.rdma.verbs.readPieceSize", "1m")), "127.0.0.1").verbs();
        assertEquals(new VerbsOptions(Duration.ofMillis(2), 64, 4096, 1 << 20, true, Path.of("/var/lib/rdma")), verbs);
    }

    @Test
    void verbsKeysAllowExactlyWhatVerbsOptionsAllows() {
        // the bounds of each key, as values: they make valid VerbsOptions
        VerbsOptions low = TransportKeys.verbsOptions(conf(Map.of(
                "spark.shuffle.rdma.verbs.cmTick", "1ms",
                "spark.shuffle.rdma.verbs.receiveBuffers", Integer.toString(VerbsOptions.MIN_RECEIVE_BUFFERS),
                "spark.shuffle.rdma.verbs.cqEntries", Integer.toString(VerbsOptions.MIN_CQ_ENTRIES),
                "spark.shuffle.rdma.verbs.readPieceSize", "128k")));
        assertEquals(VerbsOptions.MIN_CM_TICK, low.cmTick());
        assertEquals(VerbsOptions.MIN_READ_PIECE_BYTES, low.readPieceBytes());
        VerbsOptions high = TransportKeys.verbsOptions(conf(Map.of(
                "spark.shuffle.rdma.verbs.cmTick", "1s",
                "spark.shuffle.rdma.verbs.receiveBuffers", Integer.toString(VerbsOptions.MAX_RECEIVE_BUFFERS),
                "spark.shuffle.rdma.verbs.cqEntries", Integer.toString(VerbsOptions.MAX_CQ_ENTRIES),
                "spark.shuffle.rdma.verbs.readPieceSize", "8m")));
        assertEquals(VerbsOptions.MAX_CM_TICK, high.cmTick());
        assertEquals(VerbsOptions.MAX_READ_PIECE_BYTES, high.readPieceBytes());
        // one step outside is an error naming the key, never a silent clamp
        Map<String, String> outside = Map.of(
                "spark.shuffle.rdma.verbs.cmTick", "0ms",
                "spark.shuffle.rdma.verbs.receiveBuffers", "7",
                "spark.shuffle.rdma.verbs.cqEntries", "1023",
                "spark.shuffle.rdma.verbs.readPieceSize", "127k");
        outside.forEach((key, value) -> {
            ConfigException e = assertThrows(ConfigException.class, () -> TransportKeys.verbsOptions(conf(Map.of(key, value))));
            assertTrue(e.getMessage().startsWith(key + " = '" + value + "': expected "), e.getMessage());
        });
        assertThrows(IllegalArgumentException.class,
                () -> new VerbsOptions(Duration.ZERO, 32, 16384, 256 << 10, false, null));
        assertThrows(IllegalArgumentException.class, () -> new VerbsOptions(Duration.ofMillis(10), 7, 16384, 256 << 10, false, null));
        assertThrows(IllegalArgumentException.class, () -> new VerbsOptions(Duration.ofMillis(10), 32, 1023, 256 << 10, false, null));
        assertThrows(IllegalArgumentException.class, () -> new VerbsOptions(Duration.ofMillis(10), 32, 16384, 127 << 10, false, null));
    }

    @Test
    void hybridCompletionIsTheDefaultAndItsSpinReachesTheNodeOptionsWithinItsBounds() {
        VerbsOptions defaults = TransportKeys.verbsOptions(conf(Map.of()));
        assertEquals(VerbsOptions.Completion.HYBRID, defaults.completion());
        assertEquals(VerbsOptions.DEFAULT_HYBRID_SPIN_MICROS, defaults.hybridSpinMicros());
        assertEquals(VerbsOptions.Completion.EVENT, TransportKeys.verbsOptions(conf(Map.of(
                "spark.shuffle.rdma.verbs.completion", "event"))).completion());
        VerbsOptions hybrid = TransportKeys.verbsOptions(conf(Map.of("spark.shuffle.rdma.verbs.completion", "hybrid",
                "spark.shuffle.rdma.verbs.completion.hybridSpinMicros", "1")));
        assertEquals(VerbsOptions.Completion.HYBRID, hybrid.completion());
        assertEquals(VerbsOptions.MIN_HYBRID_SPIN_MICROS, hybrid.hybridSpinMicros());
        assertEquals(VerbsOptions.MAX_COMPLETION_SPIN_MICROS, TransportKeys.verbsOptions(conf(Map.of(
                "spark.shuffle.rdma.verbs.completion.hybridSpinMicros", Integer.toString(VerbsOptions.MAX_COMPLETION_SPIN_MICROS))))
                .hybridSpinMicros());
        for (String value : List.of("0", Integer.toString(VerbsOptions.MAX_COMPLETION_SPIN_MICROS + 1))) {
            ConfigException e = assertThrows(ConfigException.class, () -> TransportKeys.verbsOptions(conf(Map.of(
                    "spark.shuffle.rdma.verbs.completion.hybridSpinMicros", value))));
            assertTrue(e.getMessage().startsWith("spark.shuffle.rdma.verbs.completion.hybridSpinMicros = '" + value
                    + "': expected "), e.getMessage());
        }
        ConfigException e = assertThrows(ConfigException.class, () -> TransportKeys.verbsOptions(conf(Map.of(
                "spark.shuffle.rdma.verbs.completion", "spin"))));
        assertTrue(e.getMessage().startsWith("spark.shuffle.rdma.verbs.completion = 'spin'"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> VerbsOptions.defaults().withHybridSpinMicros(0));
    }

    @Test
    void theCompletionSpinReachesTheNodeOptionsWithinItsBounds() {
        assertEquals(0, TransportKeys.verbsOptions(conf(Map.of("spark.shuffle.rdma.verbs.completion.spinMicros", "0")))
                .completionSpinMicros());
        assertEquals(VerbsOptions.MAX_COMPLETION_SPIN_MICROS, TransportKeys.verbsOptions(conf(Map.of(
                "spark.shuffle.rdma.verbs.completion.spinMicros", Integer.toString(VerbsOptions.MAX_COMPLETION_SPIN_MICROS))))
                .completionSpinMicros());
        for (String value : List.of("-1", Integer.toString(VerbsOptions.MAX_COMPLETION_SPIN_MICROS + 1))) {
            ConfigException e = assertThrows(ConfigException.class, () -> TransportKeys.verbsOptions(conf(Map.of(
                    "spark.shuffle.rdma.verbs.completion.spinMicros", value))));
            assertTrue(e.getMessage().startsWith("spark.shuffle.rdma.verbs.completion.spinMicros = '" + value + "': expected "),
                    e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> VerbsOptions.defaults().withCompletionSpinMicros(-1));
    }

    @Test
    void theNativeTmpdirMustBeAnAbsolutePath() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> TransportKeys.verbsOptions(conf(Map.of("spark.shuffle.rdma.verbs.native.tmpdir", "tmp/rdma"))));
        assertEquals("spark.shuffle.rdma.verbs.native.tmpdir = 'tmp/rdma': expected an absolute folder path", e.getMessage());
        assertThrows(ConfigException.class,
                () -> TransportKeys.verbsOptions(conf(Map.of("spark.shuffle.rdma.verbs.completion", "spin"))));
    }

    @Test
    void poolOptionsFromSettings() {
        assertEquals(new PoolOptions(256L << 20, Duration.ofSeconds(5)), TransportKeys.poolOptions(conf(Map.of())));
        assertEquals(new PoolOptions(2L << 30, Duration.ZERO), TransportKeys.poolOptions(conf(Map.of(
                "spark.shuffle.rdma.pool.capacity", "2g",
                "spark.shuffle.rdma.pool.acquireTimeout", "0"))));
    }
}

package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.config.ConfigException;
import io.rdmaplane.rdma.provider.verbs.VerbsProvider;
import io.rdmaplane.rdma.testing.Skip;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;

/**
 * The application and shuffle fallback levels: each gives the sort shuffle's results, says why
 * once, and counts it. A bad setting is an error naming the key instead.
 */
class FallbackTest {
    @Test
    void disabledBehavesAsSortShuffleAndSaysWhyOnce() {
        SparkConf conf = SparkJobs.rdma(SparkJobs.localConf("disabled")).set("spark.shuffle.rdma.enabled", "false");
        RdmaShuffleManager manager = runAndCompare(conf, "enabled=false");
        assertNull(manager.providerName(), "no runtime starts");
        assertEquals(0, manager.metrics().count(ShuffleMetrics.PUBLISHED_MAPS));
    }

    @Test
    void unusableProviderBehavesAsSortShuffleAndSaysWhyOnce() {
        // This build host has no RDMA device, so the verbs provider is unavailable.
        Skip.unless(!VerbsProvider.INSTANCE.isAvailable(), "an RDMA device is usable here, so verbs cannot be shown unusable");
        SparkConf conf = SparkJobs.rdma(SparkJobs.localConf("verbs")).set("spark.shuffle.rdma.provider", "verbs");
        RdmaShuffleManager manager = runAndCompare(conf, "provider=verbs");
        assertTrue(manager.offReason().contains("provider=auto"), "names the setting to change: " + manager.offReason());
        assertEquals("off: " + manager.offReason(), lastReport.get("provider"));
    }

    @Test
    void wireEncryptionOverPlaintextShuffleBytesBehavesAsSortShuffleAndSaysWhyOnce() {
        // The RDMA data plane does not encrypt: it steps aside where encrypted traffic was asked for.
        SparkConf conf = SparkJobs.rdma(SparkJobs.localConf("crypto")).set("spark.authenticate", "true")
                .set("spark.network.crypto.enabled", "true");
        RdmaShuffleManager manager = runAndCompare(conf, "spark.network.crypto.enabled=true");
        assertTrue(manager.offReason().contains("spark.io.encryption.enabled=false"), manager.offReason());
        assertNull(manager.providerName(), "no runtime starts");
        assertEquals("off: " + manager.offReason(), lastReport.get("provider"));
    }

    @Test
    void wireEncryptionOverEncryptedShuffleBytesKeepsRdmaOnAndSaysSo() {
        // the secret in the conf too: Spark 3.5's driver manager exists before its SecurityManager and takes it from there
        SparkConf conf = SparkJobs.rdma(SparkJobs.localConf("cryptoIo")).set("spark.authenticate", "true")
                .set("spark.authenticate.secret", "crypto-io-secret")
                .set("spark.network.crypto.enabled", "true").set("spark.io.encryption.enabled", "true");
        Map<String, List<String>> expected = SparkJobs.baseline(); // its own context: before ours opens
        try (LogCapture log = new LogCapture(RdmaShuffleManager.class);
             JavaSparkContext sc = new JavaSparkContext(conf)) {
            RdmaShuffleManager manager = assertInstanceOf(RdmaShuffleManager.class, SparkEnv.get().shuffleManager());
            assertEquals(expected, SparkJobs.run(sc));
            assertNull(manager.offReason(), "RDMA stays on: " + manager.offReason());
            assertEquals(List.of(), log.lines("WARN"));
            assertEquals(1, log.lines("INFO").stream().filter(l -> l.contains("already encrypted")).count(),
                    log.lines("INFO").toString());
        } finally {
            RdmaShuffleManagerLocalTest.assertNoThreadOfOursLeft();
        }
    }

    @Test
    void shuffleOverMaxBlocksUsesTheStandardPathAndIsLoggedOncePerShuffle() {
        SparkConf conf = SparkJobs.rdma(SparkJobs.localConf("maxBlocks")).set("spark.shuffle.rdma.maxBlocksPerShuffle", "1");
        try (LogCapture log = new LogCapture(RdmaShuffleManager.class);
             JavaSparkContext sc = new JavaSparkContext(conf)) {
            RdmaShuffleManager manager = assertInstanceOf(RdmaShuffleManager.class, SparkEnv.get().shuffleManager());
            assertEquals(SparkJobs.baseline(), SparkJobs.run(sc));
            int shuffles = sc.sc().newShuffleId();
            assertEquals(shuffles, manager.metrics().count(ShuffleMetrics.FALLBACK_SHUFFLE));
            assertEquals(shuffles, log.lines("INFO").stream().filter(l -> l.contains("maxBlocksPerShuffle=1")).count(),
                    log.lines("INFO").toString());
            assertNull(manager.offReason(), "the application stays on");
            assertNull(manager.providerName(), "no shuffle used RDMA, so the runtime never started");
            assertEquals(0, manager.metrics().count(ShuffleMetrics.PUBLISHED_MAPS));
        }
    }

    @Test
    void anExecutorWithoutTheRegistryAddressSaysWhichSettingToChange() {
        // What an executor sees when the driver runs another shuffle manager (or its registry failed).
        SparkConf executorConf = new SparkConf(false).set("spark.shuffle.manager", SparkJobs.MANAGER);
        try (LogCapture log = new LogCapture(RdmaShuffleManager.class)) {
            RdmaShuffleManager manager = new RdmaShuffleManager(executorConf, false);
            try {
                assertTrue(manager.offReason().contains("spark.shuffle.rdma.registry.address is missing"), manager.offReason());
                assertTrue(manager.offReason().contains("spark.shuffle.manager=" + SparkJobs.MANAGER), manager.offReason());
                assertEquals(1, manager.metrics().count(ShuffleMetrics.FALLBACK_APP));
                assertEquals(List.of("WARN RDMA shuffle is OFF in this executor JVM, which uses Spark's sort shuffle: "
                        + manager.offReason()), log.lines("WARN"));
            } finally {
                manager.stop();
            }
        }
    }

    @Test
    void aBadValueIsAnErrorNamingTheKey() {
        SparkConf conf = SparkJobs.rdma(SparkJobs.localConf("bad")).set("spark.shuffle.rdma.mapOutput.capacity", "lots");
        Throwable e = assertThrows(Throwable.class, () -> new JavaSparkContext(conf).close());
        assertTrue(causes(e).contains("spark.shuffle.rdma.mapOutput.capacity = 'lots'"), causes(e));

        SparkConf typo = SparkJobs.rdma(SparkJobs.localConf("typo")).set("spark.shuffle.rdma.maxBlocksPerShufle", "5");
        Throwable t = assertThrows(Throwable.class, () -> new JavaSparkContext(typo).close());
        assertTrue(causes(t).contains("did you mean spark.shuffle.rdma.maxBlocksPerShuffle"), causes(t));
    }

    @Test
    void anExecutorChecksItsSettingsThroughTheSamePath() {
        // What an executor's manager is given: the driver's conf, with the registry address the driver set.
        SparkConf executorConf = new SparkConf(false).set("spark.shuffle.manager", SparkJobs.MANAGER)
                .set("spark.shuffle.rdma.registry.address", "127.0.0.1:1").set("spark.shuffle.rdma.queueDepht", "8");
        ConfigException typo = assertThrows(ConfigException.class, () -> new RdmaShuffleManager(executorConf, false));
        assertEquals("unknown key spark.shuffle.rdma.queueDepht (did you mean spark.shuffle.rdma.queueDepth?)"
                + " (Spark shuffle settings are listed in conf/configuration.md)", typo.getMessage());

        executorConf.remove("spark.shuffle.rdma.queueDepht").set("spark.shuffle.rdma.pool.capacity", "1k");
        ConfigException range = assertThrows(ConfigException.class, () -> new RdmaShuffleManager(executorConf, false));
        assertEquals("spark.shuffle.rdma.pool.capacity = '1k': expected a byte size like 64k, 8m, 1g between 8m and 1t"
                + " (Spark shuffle settings are listed in conf/configuration.md)", range.getMessage());
    }

    private Map<String, String> lastReport;

    /** Runs the jobs under {@code conf}; checks results, the one WARN line and the counter; returns the manager. */
    private RdmaShuffleManager runAndCompare(SparkConf conf, String reason) {
        Map<String, List<String>> expected = SparkJobs.baseline();
        try (LogCapture log = new LogCapture(RdmaShuffleManager.class);
             JavaSparkContext sc = new JavaSparkContext(conf)) {
            RdmaShuffleManager manager = assertInstanceOf(RdmaShuffleManager.class, SparkEnv.get().shuffleManager());
            assertEquals(expected, SparkJobs.run(sc));
            List<String> warnings = log.lines("WARN");
            assertEquals(1, warnings.size(), "one WARN line: " + warnings);
            assertTrue(warnings.get(0).contains(reason), warnings.get(0));
            assertTrue(manager.offReason().contains(reason), manager.offReason());
            assertEquals(1, manager.metrics().count(ShuffleMetrics.FALLBACK_APP));
            assertEquals(0, manager.metrics().count(ShuffleMetrics.FALLBACK_SHUFFLE));
            lastReport = RdmaShuffleManager.executorReport();
            assertEquals("1", lastReport.get(ShuffleMetrics.FALLBACK_APP));
            return manager;
        } finally {
            RdmaShuffleManagerLocalTest.assertNoThreadOfOursLeft();
        }
    }

    private static String causes(Throwable e) {
        StringBuilder all = new StringBuilder();
        for (Throwable c = e; c != null; c = c.getCause()) {
            all.append(c).append(" / ");
        }
        return all.toString();
    }
}

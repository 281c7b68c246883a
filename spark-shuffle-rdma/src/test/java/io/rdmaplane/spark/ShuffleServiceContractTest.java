package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

/**
 * The external shuffle service contract: with spark.shuffle.service.enabled=true the service is the
 * read path (as Spark's ExternalShuffleServiceSuite expects: a fetch after the service dropped the
 * application fails), so RDMA steps aside for the whole application and says why once; reducers
 * never READ around the service from executors that are still alive.
 */
class ShuffleServiceContractTest {
    @Test
    void withTheShuffleServiceRdmaIsOffAndSaysWhy() {
        SparkConf conf = new SparkConf(false).set("spark.shuffle.service.enabled", "true");
        try (LogCapture log = new LogCapture(RdmaShuffleManager.class)) {
            for (boolean driver : new boolean[] {true, false}) {
                RdmaShuffleManager manager = new RdmaShuffleManager(conf, driver);
                try {
                    assertTrue(manager.offReason() != null && manager.offReason().contains("spark.shuffle.service.enabled=true")
                            && manager.offReason().contains("read path"), String.valueOf(manager.offReason()));
                    assertNull(manager.providerName(), "no runtime starts");
                    assertEquals(1, manager.metrics().count(ShuffleMetrics.FALLBACK_APP));
                } finally {
                    manager.stop();
                }
            }
            assertEquals(2, log.lines("WARN").stream().filter(l -> l.contains("spark.shuffle.service.enabled=true")).count(),
                    "one line per JVM: " + log.lines("WARN"));
        }
    }

    @Test
    void withoutItRdmaStaysOnOnTheDriver() {
        RdmaShuffleManager manager = new RdmaShuffleManager(new SparkConf(false).set("spark.driver.host", "127.0.0.1")
                .set("spark.shuffle.service.enabled", "false"), true);
        try {
            assertNull(manager.offReason(), String.valueOf(manager.offReason()));
        } finally {
            manager.stop();
        }
    }
}

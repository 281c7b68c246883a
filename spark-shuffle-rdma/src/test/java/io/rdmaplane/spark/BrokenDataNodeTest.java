package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.faulty.FaultyNode;
import io.rdmaplane.spark.serve.MapOutputStore;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A broken data node (every registration fails) used to be tried for each later map output, each
 * counted as notPublished.failed. After {@code mapOutput.maxPublishFailures} consecutive failures the
 * store stops publishing, says so once, and counts what it no longer offers as notPublished.stopped.
 */
class BrokenDataNodeTest {
    private static final long[] LENGTHS = {3000, 0, 5000};

    @TempDir
    Path dir;

    @Test
    void afterConsecutiveFailuresTheExecutorStopsPublishingAndSaysSoOnce() throws Exception {
        ShuffleMetrics metrics = new ShuffleMetrics();
        try (FaultyNode node = new FaultyNode(ShuffleFixture.node());
             MapOutputStore store = new MapOutputStore(node, 256L << 20, metrics, false, 3);
             LogCapture log = new LogCapture(MapOutputStore.class)) {
            assertTrue(store.publish(1, 0, ShuffleFixture.dataFile(dir, 1, 0, LENGTHS), LENGTHS), "a working node publishes");
            node.failRegistrations(true);
            for (int map = 1; map <= 2; map++) {
                assertFalse(store.publish(1, map, ShuffleFixture.dataFile(dir, 1, map, LENGTHS), LENGTHS));
            }
            node.failRegistrations(false);
            assertTrue(store.publish(1, 3, ShuffleFixture.dataFile(dir, 1, 3, LENGTHS), LENGTHS),
                    "two failures are under the bound of 3, and a success starts the count again");
            node.failRegistrations(true);
            for (int map = 4; map <= 9; map++) {
                assertFalse(store.publish(1, map, ShuffleFixture.dataFile(dir, 1, map, LENGTHS), LENGTHS));
            }
            assertTrue(store.publishingStopped());
            assertEquals(5, metrics.count(ShuffleMetrics.NOT_PUBLISHED_FAILED), "2 + 3 failures were tried");
            assertEquals(3, metrics.count(ShuffleMetrics.NOT_PUBLISHED_STOPPED), "maps 7..9 were not offered to the broken node");
            int registrationsTried = node.registrationsTried();
            node.failRegistrations(false);
            assertFalse(store.publish(1, 10, ShuffleFixture.dataFile(dir, 1, 10, LENGTHS), LENGTHS), "stopped for good");
            assertEquals(registrationsTried, node.registrationsTried(), "a stopped store does not touch the node");
            assertEquals(1, log.lines("WARN").stream().filter(l -> l.contains("stops publishing")).count(),
                    "said once: " + log.lines("WARN"));
            assertEquals(2, metrics.count(ShuffleMetrics.PUBLISHED_MAPS));
        }
    }

    @Test
    void zeroNeverStops() throws Exception {
        ShuffleMetrics metrics = new ShuffleMetrics();
        try (FaultyNode node = new FaultyNode(ShuffleFixture.node());
             MapOutputStore store = new MapOutputStore(node, 256L << 20, metrics, false, 0)) {
            node.failRegistrations(true);
            for (int map = 0; map < 5; map++) {
                assertFalse(store.publish(1, map, ShuffleFixture.dataFile(dir, 1, map, LENGTHS), LENGTHS));
            }
            assertFalse(store.publishingStopped());
            assertEquals(5, metrics.count(ShuffleMetrics.NOT_PUBLISHED_FAILED));
            node.failRegistrations(false);
            assertTrue(store.publish(1, 5, ShuffleFixture.dataFile(dir, 1, 5, LENGTHS), LENGTHS));
        }
    }
}

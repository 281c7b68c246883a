package io.rdmaplane.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.spark.ShuffleMetrics;
import java.util.Map;

/** What a deployment on the ring must show, on the default line (HostRingTest) and on every other (LineDeploymentTest). */
final class DeploymentChecks {
    private DeploymentChecks() {
    }

    /**
     * The RDMA application's shuffle equals the sort-shuffle application's and the locally computed result (count
     * and hash); every one of {@code workers} executors published map outputs and READ blocks over the tcp provider,
     * with no fallback on any level.
     */
    static void assertShuffleEqualsSortOverRdma(int workers, RingDriver.Result sort, RingDriver.Result rdma, RingDriver.Reports reports) {
        System.out.println("ring deployment: sort " + sort + "\nring deployment: rdma " + rdma);
        assertTrue(sort.equalsExpected(), sort.toString());
        assertTrue(rdma.equalsExpected(), rdma.toString());
        assertEquals(sort.count(), rdma.count());
        assertEquals(sort.hash(), rdma.hash());
        assertEquals(workers, reports.executors().size(), reports.toString());
        for (Map.Entry<String, Map<String, String>> e : reports.executors().entrySet()) {
            Map<String, String> r = e.getValue();
            String where = "executor " + e.getKey() + ": " + r;
            assertEquals("tcp", r.get("provider"), where);
            assertTrue(RingDriver.number(r, ShuffleMetrics.PUBLISHED_MAPS) > 0, where);
            assertTrue(RingDriver.number(r, ShuffleMetrics.FETCH_RDMA_BLOCKS) > 0, where);
            assertTrue(RingDriver.number(r, ShuffleMetrics.FETCH_RDMA_BYTES) > 0, where);
            assertEquals(0, RingDriver.number(r, ShuffleMetrics.FALLBACK_FETCH), where);
            assertEquals(0, RingDriver.number(r, ShuffleMetrics.FALLBACK_APP), where);
        }
        assertEquals(0, RingDriver.number(reports.driver(), ShuffleMetrics.FALLBACK_SHUFFLE), reports.driver().toString());
    }
}

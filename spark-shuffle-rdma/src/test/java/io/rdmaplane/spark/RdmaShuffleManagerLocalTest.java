package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.Polling;
import io.rdmaplane.spark.registry.RegistryClient;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Local mode ({@code local[2]}: the driver is the executor): the jobs give the sort shuffle's
 * results under our manager, with the RDMA runtime up and map outputs published; unregistering a
 * shuffle frees its registered map outputs; stopping leaves no thread of ours behind.
 */
class RdmaShuffleManagerLocalTest {
    @Test
    void jobsMatchSortShuffleAndMapOutputsArePublishedThenRevoked() {
        Map<String, List<String>> expected = SparkJobs.baseline();
        List<Long> usedAfterJobs = new ArrayList<>();
        RdmaShuffleManager manager;
        try (JavaSparkContext sc = new JavaSparkContext(SparkJobs.rdma(SparkJobs.localConf("rdma-local")))) {
            manager = assertInstanceOf(RdmaShuffleManager.class, SparkEnv.get().shuffleManager());
            // ShuffledRDD calls the trait's final 5-argument getReader, a Scala default method: it works from Java.
            Map<String, List<String>> actual = SparkJobs.run(sc, c -> usedAfterJobs.add(manager.mapOutputBytes()));
            assertEquals(expected, actual);

            assertNull(manager.offReason());
            assertEquals("tcp", manager.providerName(), "auto picks tcp on a host without an RDMA device");
            assertInstanceOf(IndexShuffleBlockResolver.class, manager.shuffleBlockResolver());
            ShuffleMetrics metrics = manager.metrics();
            assertTrue(metrics.count(ShuffleMetrics.PUBLISHED_MAPS) > 0, "map outputs were published: " + metrics.snapshot());
            assertEquals(0, metrics.count(ShuffleMetrics.FALLBACK_APP));
            assertEquals(0, metrics.count(ShuffleMetrics.FALLBACK_SHUFFLE));
            assertTrue(usedAfterJobs.get(0) > 0, "the first job's map outputs sit in registered memory: " + usedAfterJobs);

            var sources = SparkEnv.get().metricsSystem().getSourcesByName("rdmaShuffle");
            assertEquals(1, sources.size(), "the plug-in's metrics are a Spark metrics source");
            assertTrue(sources.head().metricRegistry().getCounters().containsKey(ShuffleMetrics.PUBLISHED_MAPS));

            Map<String, String> report = RdmaShuffleManager.executorReport();
            assertEquals("driver", report.get("executorId"));
            assertEquals("tcp", report.get("provider"));
            assertTrue(Long.parseLong(report.get(ShuffleMetrics.PUBLISHED_MAPS)) > 0, report.toString());

            // Every shuffle of the run (ids are given out from 0 per context) is unregistered: nothing stays registered.
            int shuffles = sc.sc().newShuffleId();
            for (int id = 0; id < shuffles; id++) {
                assertTrue(manager.unregisterShuffle(id));
            }
            assertEquals(0, manager.mapOutputBytes(), "unregisterShuffle revokes every registered map output");
        }
        assertEquals(0, manager.mapOutputBytes());
        assertNoThreadOfOursLeft();
    }

    @Test
    void withSparkAuthenticateTheRuntimeRegistersOverAnAuthenticatedChannel() {
        // The registry and the data server require the application's secret; the local executor's REGISTER
        // (and so the runtime's start) only succeeds when both sides hold the same one.
        try (JavaSparkContext sc = new JavaSparkContext(SparkJobs.rdma(SparkJobs.localConf("rdma-auth"))
                .set("spark.authenticate", "true").set("spark.authenticate.secret", "not-so-secret"))) {
            RdmaShuffleManager manager = assertInstanceOf(RdmaShuffleManager.class, SparkEnv.get().shuffleManager());
            List<String> sums = new ArrayList<>();
            sc.parallelize(List.of(1, 2, 3, 4, 5, 6), 3).mapToPair(i -> new Tuple2<>(i % 2, i))
                    .reduceByKey(Integer::sum, 2).collect().forEach(t -> sums.add(t._1() + "=" + t._2()));
            sums.sort(null);
            assertEquals(List.of("0=12", "1=9"), sums);
            assertNull(manager.offReason());
            assertEquals("tcp", manager.providerName());
            assertEquals(0, manager.metrics().count("rdma.auth.failures"));

            // A client without the secret is refused by the registry.
            String registry = sc.getConf().get("spark.shuffle.rdma.registry.address");
            PolicyOptions noSecret = PolicyOptions.defaults()
                    .withTimeouts(Duration.ofMillis(200), Duration.ofSeconds(2), Duration.ofMillis(300))
                    .withReconnect(Duration.ofMillis(10), Duration.ZERO, Duration.ofMillis(20), 1);
            try (RegistryClient stranger = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), noSecret, new PolicyMetrics(),
                    SparkRdmaConfig.parseAddress(registry))) {
                assertThrows(Exception.class, () -> stranger.register("intruder", new InetSocketAddress("127.0.0.1", 1)));
            } catch (TransportException e) {
                throw new AssertionError(e);
            }
        }
        assertNoThreadOfOursLeft();
    }

    /** After stop no thread of the plug-in (all are named rdma-*) may keep the JVM alive, and they end. */
    static void assertNoThreadOfOursLeft() {
        // Closing stops our threads; they may take a moment to notice. Bounded wait, no timing assertion.
        Polling.waitUntil(() -> threadsOfOurs().isEmpty(), Duration.ofSeconds(10),
                () -> "no thread of ours running after stop; still running: " + threadsOfOurs());
    }

    /** Our live threads (all are named rdma-*), each asserted to be a daemon. */
    private static List<String> threadsOfOurs() {
        List<String> ours = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.isAlive() && t.getName().startsWith("rdma-")) {
                ours.add(t.getName() + (t.isDaemon() ? "" : " (NOT daemon)"));
                assertTrue(t.isDaemon(), "non-daemon thread of ours: " + t.getName());
            }
        }
        return ours;
    }
}

package io.rdmaplane.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.Skip;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A line deployed as users deploy it, on the host ring (integration-tests' README), from that line's own jars: for
 * a Spark line a standalone Master and two Workers, the job submitted through SparkSubmit with the line's plug-in jar
 * where that line wants it ({@link RingLines.PluginOn}); for a Hadoop line a NameNode and two DataNodes as daemons with
 * the plug-in, read with FsShell through the client plug-in. integration-tests/lines/ci.sh runs the method for each
 * line's kind ({@code -Dtest=LineDeploymentTest#sparkLine...} or {@code #hadoopLine...}) in that line's build; the
 * default line's deployment is HostRingTest's. Only the processes each needs, one small job, so a run takes about a
 * minute. Skips, saying why, without root or network namespaces (lines/ci.sh counts a skip as a failure).
 */
@Tag("spark-line")
class LineDeploymentTest {
    /** Small, but enough map and reduce tasks that both executors write map outputs and READ each other's. */
    private static final RingDriver.Workload WORKLOAD = new RingDriver.Workload(40_000, 8, 8, 100);
    private static final Duration DEADLINE = Duration.ofMinutes(5); // a bound against hanging, not a time to meet (a loaded machine is slow)
    private static final Duration LIMIT = Duration.ofMinutes(15);
    /**
     * No locality wait: reduce tasks prefer the executor holding most map output, and short ones would all wait for it
     * (one executor then READs nothing). The same for both applications.
     */
    private static final Map<String, String> SPREAD = Map.of("spark.locality.wait", "0");

    @Test
    void sparkLineRunsOnStandaloneThroughSparkSubmitOverRdma() {
        RingLines lines = lines().sparkOnly();
        String version = property("rdma.spark.version");
        assertEquals(version, lines.sparkVersion(), "the spark-core jar on the class path is not this line's Spark (" + lines.sparkJars() + ")");
        long began = System.nanoTime();
        try (HostRing ring = HostRing.create(3); RingCluster cluster = RingCluster.start(ring, lines, dir(), LIMIT)) {
            long up = System.nanoTime();
            RingDriver.Result sort;
            try (RingDriver driver = cluster.submit("sort", false, SPREAD)) {
                assertRuns(version, driver);
                sort = driver.shuffle("line", WORKLOAD, null, DEADLINE);
            }
            long sorted = System.nanoTime();
            RingDriver.Result rdma;
            RingDriver.Reports reports;
            try (RingDriver driver = cluster.submit("rdma", true, SPREAD)) {
                assertRuns(version, driver);
                driver.giveUpWhen = cluster::executorDeath;
                try {
                    driver.report(cluster.workers, DEADLINE); // both executors up before the shuffle, so each gets map and reduce tasks
                    rdma = driver.shuffle("line", WORKLOAD, null, DEADLINE);
                    reports = driver.report(cluster.workers, DEADLINE);
                } catch (IllegalStateException e) {
                    throw new AssertionError(whyNoExecutors(cluster, lines) + "\n" + e.getMessage(), e);
                }
                assertTrue(!rdma.failed(), whyNoExecutors(cluster, lines) + "\n" + rdma.failure());
            }
            for (Map.Entry<String, Map<String, String>> e : reports.executors().entrySet()) {
                assertEquals(version, e.getValue().get("sparkVersion"), "the Spark executor " + e.getKey() + " runs");
            }
            DeploymentChecks.assertShuffleEqualsSortOverRdma(cluster.workers, sort, rdma, reports);
            long end = System.nanoTime();
            System.out.printf("line deployment: Spark %s (Scala %s, plug-in jar on %s): cluster up %d s, sort application %d s,"
                    + " RDMA application %d s, total %d s%n", version, lines.scalaVersion(), lines.sparkPluginOn(), seconds(up - began),
                    seconds(sorted - up), seconds(end - sorted), seconds(end - began));
        }
    }

    @Test
    void hadoopLineRunsAsDaemonsAndFsShellReadsOverRdma() {
        RingLines lines = lines().hdfsOnly();
        String version = property("rdma.hadoop.version");
        assertTrue(lines.hadoopJars().stream().anyMatch(p -> p.getFileName().toString().equals("hadoop-client-api-" + version + ".jar")),
                "no hadoop-client-api-" + version + ".jar among the Hadoop line's jars " + lines.hadoopJars());
        long began = System.nanoTime();
        try (HostRing ring = HostRing.create(3); RingCluster cluster = RingCluster.start(ring, lines, dir(), LIMIT)) {
            long up = System.nanoTime();
            String info = cluster.curl(0, cluster.nameNodeJmx("Hadoop:service=NameNode,name=NameNodeInfo"));
            assertEquals(version, RingCluster.jsonString(info, "SoftwareVersion"), "the NameNode's version: " + info);
            // LiveNodes is JSON inside a JSON string: each DataNode's "version" with escaped quotes
            List<String> dataNodeVersions = java.util.regex.Pattern.compile("version\\\\\":\\\\\"([^\\\\\"]+)").matcher(info).results()
                    .map(m -> m.group(1)).toList();
            assertEquals(java.util.Collections.nCopies(cluster.workers, version), dataNodeVersions, "the DataNodes' versions: " + info);
            cluster.hdfsCatAndGet();
            long end = System.nanoTime();
            System.out.printf("line deployment: Hadoop %s: cluster up %d s, put/cat/get %d s, total %d s%n", version, seconds(up - began),
                    seconds(end - up), seconds(end - began));
        }
    }

    private static RingLines lines() {
        String cause = HostRing.unavailableCause();
        Skip.unless(cause == null, "no host ring here: " + cause);
        return RingLines.fromTestClassPath();
    }

    /** The application's driver runs this line's Spark. */
    private static void assertRuns(String version, RingDriver driver) {
        assertTrue(driver.ready.contains(" sparkVersion=" + version), "the driver runs another Spark than " + version + ": " + driver.ready);
    }

    /** What the executors died of, if they did (the first error of their logs), and where the line wants the jar. */
    private static String whyNoExecutors(RingCluster cluster, RingLines lines) {
        return "the RDMA application on Spark " + lines.sparkVersion() + " with the plug-in jar on " + lines.sparkPluginOn()
                + " did not run its job; " + Objects.requireNonNullElse(cluster.executorDeath(), "no executor died at its start")
                + (lines.sparkVersion().startsWith("3.") && lines.sparkPluginOn() == RingLines.PluginOn.JARS
                        ? "\n(Spark 3.5 creates the shuffle manager with SparkEnv, before --jars arrive: the plug-in jar must be on"
                                + " spark.executor.extraClassPath and spark.driver.extraClassPath)" : "");
    }

    private static Path dir() {
        return Path.of(System.getProperty("rdma.build.directory", "target"), "ring-line");
    }

    private static String property(String name) {
        String v = System.getProperty(name, "").trim();
        assertTrue(!v.isEmpty(), name + " is not set (integration-tests' surefire configuration sets it)");
        return v;
    }

    private static long seconds(long nanos) {
        return Math.round(nanos / 1e9);
    }
}

package io.rdmaplane.it.spark;

import io.rdmaplane.rdma.testing.Polling;
import io.rdmaplane.spark.RdmaShuffleManager;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * Starts Spark for the shuffle tests: {@code local-cluster[2,1,1024]} (a Master, two Workers and two
 * executor JVMs started from Maven's test class path) for the shuffle manager under test, and
 * {@code local[2]} with Spark's sort shuffle for the baselines.
 *
 * <p>local-cluster needs, besides {@code SPARK_TESTING=1} and {@code SPARK_SCALA_VERSION} in the
 * environment (surefire sets both for this module): the <em>system properties</em> {@code spark.testing}
 * (only then does the scheduler give executors the driver's {@code java.class.path}) and
 * {@code spark.test.home} (the Worker's Spark home: any existing folder). Only one SparkContext can run
 * in a JVM at a time, so a test class computes its baselines first, stops that context, then starts its
 * cluster once and runs every job in it.
 */
final class SparkClusterHarness {
    /** Spark's own sort shuffle, the baseline. */
    static final String SORT = "sort";

    /** The project's manager. */
    static final String RDMA = RdmaShuffleManager.class.getName();

    /**
     * The manager the catalogue and TPC-DS tests run in local-cluster: ours, or another class (e.g. {@code sort},
     * to check the harness itself) with {@code -Drdma.it.shuffle.manager=...}.
     */
    static String managerUnderTest() {
        return System.getProperty("rdma.it.shuffle.manager", RDMA);
    }

    static final String WORKERS = "local-cluster[2,1,1024]";

    private SparkClusterHarness() {
    }

    /** The settings every context of these tests has, whatever its master. */
    private static SparkConf common(String app) {
        return new SparkConf(false)
                .setAppName(app)
                .set("spark.ui.enabled", "false")
                .set("spark.driver.host", "127.0.0.1")
                .set("spark.driver.bindAddress", "127.0.0.1")
                .set("spark.sql.shuffle.partitions", "8")
                .set("spark.sql.adaptive.enabled", "true")
                // every SQL join goes through a shuffle (no broadcast), also after AQE's re-planning
                .set("spark.sql.autoBroadcastJoinThreshold", "-1")
                .set("spark.sql.ansi.enabled", "false");
    }

    /** Spark's sort shuffle in the test JVM: the baseline of a job. */
    static SparkConf baseline(String app) {
        return common(app + "-baseline").setMaster("local[2]").set("spark.shuffle.manager", SORT);
    }

    /** Two executor JVMs with the given shuffle manager (a class name or Spark's short name). */
    static SparkConf cluster(String app, String manager) {
        prepareLocalCluster();
        String executorOpts = System.getProperty("rdma.jvm.module.flags", "") + " -XX:TieredStopAtLevel=1";
        return common(app).setMaster(WORKERS)
                .set("spark.shuffle.manager", manager)
                .set("spark.testing", "1")
                .set("spark.test.home", System.getProperty("spark.test.home"))
                .set("spark.executor.memory", "640m")
                .set("spark.executor.extraJavaOptions", executorOpts.trim())
                .set("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1");
    }

    /** The system properties and folder local-cluster needs (see the class comment). */
    static synchronized void prepareLocalCluster() {
        String home = System.getProperty("rdma.spark.test.home");
        try {
            Path dir = home != null ? Path.of(home) : Files.createTempDirectory("spark-test-home");
            Files.createDirectories(dir);
            System.setProperty("spark.test.home", dir.toAbsolutePath().toString());
        } catch (java.io.IOException e) {
            throw new IllegalStateException("cannot create spark.test.home", e);
        }
        System.setProperty("spark.testing", "1");
        if (!"1".equals(System.getenv("SPARK_TESTING")) || System.getenv("SPARK_SCALA_VERSION") == null) {
            // surefire sets both for integration-tests; an IDE run must set them itself
            throw new IllegalStateException("local-cluster needs SPARK_TESTING=1 and SPARK_SCALA_VERSION=2.13 in the"
                    + " environment of the test JVM (the integration-tests pom sets them for surefire)");
        }
    }

    /** Starts a session on the conf and, for a cluster, waits until its executors have registered. */
    static SparkSession start(SparkConf conf, int executors) {
        SparkSession spark = SparkSession.builder().config(conf).getOrCreate();
        awaitExecutors(spark.sparkContext(), executors);
        return spark;
    }

    /** Waits until at least {@code executors} executors have registered. */
    static void awaitExecutors(SparkContext sc, int executors) {
        awaitExecutors(sc, executors, false);
    }

    /** Waits until exactly {@code executors} executors are registered (after a kill, say). */
    static void awaitExecutorCount(SparkContext sc, int executors) {
        awaitExecutors(sc, executors, true);
    }

    private static void awaitExecutors(SparkContext sc, int executors, boolean exactly) {
        Polling.waitUntil(() -> exactly ? sc.statusTracker().getExecutorInfos().length == executors + 1
                : sc.statusTracker().getExecutorInfos().length >= executors + 1, Duration.ofSeconds(180), // + the driver
                () -> (exactly ? "exactly " : "") + executors + " executors registered; have "
                        + (sc.statusTracker().getExecutorInfos().length - 1));
    }

    static void stop(SparkSession spark) {
        if (spark != null) {
            spark.stop();
        }
        SparkSession.clearActiveSession();
        SparkSession.clearDefaultSession();
    }

    /** For messages: the settings of a conf that differ between the test contexts. */
    static String describe(SparkConf conf) {
        StringBuilder b = new StringBuilder(conf.get("spark.master"));
        for (String key : new String[] {"spark.shuffle.manager", "spark.serializer", "spark.shuffle.compress"}) {
            b.append(' ').append(key).append('=').append(conf.get(key, "(default)"));
        }
        return b.toString();
    }
}

package io.rdmaplane.it.shuffle;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;

/**
 * A {@code local-cluster[n,cores,MiB]} Spark application started from a plain JVM (no Spark
 * distribution): a master and n workers inside this JVM, each worker launching one executor JVM
 * with this JVM's class path. That is Spark's own test mode, so it needs the system property
 * {@code spark.testing}, the environment variables {@code SPARK_TESTING=1} and
 * {@code SPARK_SCALA_VERSION=2.13} (the run profile of integration-tests sets them), and
 * {@code spark.test.home} pointing at a folder (it stays empty: in test mode each worker keeps
 * its executors' files in a temporary folder that it deletes when it stops). Records are
 * serialized with Kryo unless {@code spark.serializer} is given.
 */
public final class SparkLocalCluster {
    /** The shuffle manager under test. */
    public static final String RDMA_MANAGER = "io.rdmaplane.spark.RdmaShuffleManager";
    /** Spark's sort shuffle, served and fetched by Netty. */
    public static final String SORT_MANAGER = "sort";
    /** The system property through which the run profile passes the JVM module flags on (see the root pom). */
    public static final String MODULE_FLAGS_PROPERTY = "rdma.jvm.module.flags";

    private static Path home;

    private SparkLocalCluster() {
    }

    /**
     * Checks the environment and sets the system properties local-cluster mode needs, once per JVM.
     *
     * @return the folder {@code spark.test.home} names
     * @throws IllegalStateException naming what is missing
     */
    public static synchronized Path prepare() {
        List<String> missing = new ArrayList<>();
        if (!"1".equals(System.getenv("SPARK_TESTING"))) {
            missing.add("environment variable SPARK_TESTING=1");
        }
        if (System.getenv("SPARK_SCALA_VERSION") == null) {
            missing.add("environment variable SPARK_SCALA_VERSION=2.13");
        }
        if (System.getProperty(MODULE_FLAGS_PROPERTY) == null) {
            missing.add("system property " + MODULE_FLAGS_PROPERTY + " (the JVM flags for the executors)");
        }
        if (!missing.isEmpty()) {
            throw new IllegalStateException("local-cluster mode needs " + String.join(", ", missing)
                    + "; run this through Maven: mvn -B -q -Prun -DskipTests verify -Drun.main=...");
        }
        if (home == null) {
            // The driver's console keeps to warnings (slf4j-simple reads these when a logger is first made);
            // the executors log at INFO into their worker folders. Two warnings of every local-cluster start
            // say nothing about the job: the master sees the application before its workers, and Hadoop's
            // native library is not installed.
            quiet("defaultLogLevel", "warn");
            quiet("log.org.apache.spark.deploy.master.Master", "error");
            quiet("log.org.apache.hadoop.util.NativeCodeLoader", "error");
            try {
                home = Files.createTempDirectory("rdma-spark-local-cluster");
                home.toFile().deleteOnExit();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            System.setProperty("spark.testing", "1");
            System.setProperty("spark.test.home", home.toString());
        }
        return home;
    }

    private static void quiet(String simpleLoggerKey, String level) {
        String key = "org.slf4j.simpleLogger." + simpleLoggerKey;
        if (System.getProperty(key) == null) {
            System.setProperty(key, level);
        }
    }

    /**
     * The configuration of one application.
     *
     * @param workers       executors (one per worker)
     * @param workerMiB     each worker's memory, the most an executor may take
     * @param executorMemory {@code spark.executor.memory}, e.g. "1g"
     * @param manager       {@link #RDMA_MANAGER} or {@link #SORT_MANAGER}
     * @param extra         further settings (e.g. {@code spark.shuffle.rdma.*})
     * @param executorJvm   options for the executor JVMs beyond the module flags (may be empty)
     */
    public static SparkConf conf(String appName, int workers, int workerMiB, String executorMemory, String manager,
                                 Map<String, String> extra, String executorJvm) {
        prepare();
        SparkConf conf = new SparkConf(false)
                .setMaster("local-cluster[" + workers + ",1," + workerMiB + "]")
                .setAppName(appName)
                .set("spark.testing", "1")
                .set("spark.ui.enabled", "false")
                .set("spark.driver.host", "127.0.0.1")
                .set("spark.executor.memory", executorMemory)
                .set("spark.executor.extraJavaOptions", (System.getProperty(MODULE_FLAGS_PROPERTY) + " " + executorJvm).trim())
                .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
                .set("spark.shuffle.manager", manager);
        extra.forEach(conf::set);
        return conf;
    }
}

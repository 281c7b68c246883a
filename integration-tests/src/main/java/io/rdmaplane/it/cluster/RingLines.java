package io.rdmaplane.it.cluster;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * What the ring runs: a Spark line (its jars, its Scala version, the plug-in jar built for it and where that jar
 * goes) and a Hadoop line (the jars of its daemons and client, the HDFS plug-in jar). A class path is the input,
 * so the same ring runs any line whose jars a build resolved; {@link #fromTestClassPath} takes this module's own.
 * A null plug-in jar leaves that side out ({@link #sparkOnly()}, {@link #hdfsOnly()}): the ring starts only what
 * a line's deployment test needs. {@code appJars}: what the ring's Spark application brings beside Spark's jars (the
 * TPC-DS generator its driver writes the tables with), on its driver's class path only.
 */
public record RingLines(List<Path> sparkJars, String scalaVersion, Path sparkPlugin, PluginOn sparkPluginOn, List<Path> hadoopJars,
        Path hdfsPlugin, List<Path> appJars) {
    /**
     * Where the Spark plug-in jar goes, as users deploy it (README, the lines table): {@code --jars} on Spark 4, whose
     * executors create the shuffle manager after fetching the application's jars; on Spark 3.5, which creates it with
     * SparkEnv before {@code --jars} arrive, {@code spark.driver.extraClassPath} and {@code spark.executor.extraClassPath}.
     */
    public enum PluginOn {
        JARS, EXTRA_CLASS_PATH;

        /** The way for Spark {@code version}, unless {@code rdma.ring.spark.plugin.on} ({@code jars}, {@code extraClassPath}) names one. */
        static PluginOn forSpark(String version) {
            String set = System.getProperty("rdma.ring.spark.plugin.on", "").trim();
            return switch (set) {
                case "" -> version.startsWith("3.") ? EXTRA_CLASS_PATH : JARS;
                case "jars" -> JARS;
                case "extraClassPath" -> EXTRA_CLASS_PATH;
                default -> throw new IllegalArgumentException("rdma.ring.spark.plugin.on=" + set + ": expected jars or extraClassPath");
            };
        }
    }

    /** What is on this module's test class path but not in a Spark distribution's jars/ folder. */
    static final List<String> NOT_SPARK = List.of("/io/rdmaplane/", "/target/classes", "/target/test-classes", "/com/ibm/disni/",
            "/arrow-memory-unsafe/", "/org/junit/", "/org/opentest4j/", "/org/apiguardian/", "/hadoop-client-minicluster/",
            "/org/slf4j/slf4j-simple/", "/surefire", "/io/trino/", "/com/tngtech/");
    /**
     * This project's own jars (a reactor build resolves sibling modules to their target/ jars): never in the Spark
     * home, or the daemons would load our classes from there and the plug-in jar's deployment would prove nothing.
     */
    static final List<String> OURS = List.of("common-rdma-", "spark-shuffle-rdma-", "hdfs-transfer-rdma-", "integration-tests-");
    /** A Hadoop line's daemons and client: Hadoop's shaded jars and the logging they expect beside them. */
    static final List<String> HADOOP = List.of("/org/apache/hadoop/hadoop-client-", "/org/slf4j/slf4j-api/", "/org/slf4j/slf4j-simple/", "/org/slf4j/jcl-over-slf4j/",
            "/commons-logging/", "/org/apache/logging/log4j/log4j-api/", "/org/apache/logging/log4j/log4j-1.2-api/",
            "/org/apache/logging/log4j/log4j-core/", "/com/google/code/findbugs/jsr305/", "/org/xerial/snappy/");
    /** The jars of the application's own dependencies (not Spark's, not Hadoop's): the TPC-DS generator. */
    static final List<String> APP = List.of("/io/trino/tpcds/");
    /** The logging provider every ring JVM gets (Spark's log4j binding is not on this module's class path). */
    static final String SLF4J_SIMPLE = "/org/slf4j/slf4j-simple/";
    private static final String SPARK_CORE = "spark-core_";

    public RingLines {
        List<Path> files = new ArrayList<>();
        if (sparkPlugin != null) {
            files.addAll(sparkJars);
            files.add(sparkPlugin);
        }
        if (hdfsPlugin != null) {
            files.addAll(hadoopJars);
            files.add(hdfsPlugin);
        }
        files.addAll(appJars);
        for (Path p : files) {
            if (!Files.isRegularFile(p)) {
                throw new IllegalArgumentException("ring: no file " + p + " (a Spark or Hadoop line's jar, or a plug-in jar; the"
                        + " plug-in jars are built in their modules' package phase: mvn -B -DskipTests package)");
            }
        }
        if (sparkPlugin != null && sparkJars.stream().noneMatch(p -> p.getFileName().toString().startsWith(SPARK_CORE))) {
            throw new IllegalArgumentException("ring: no spark-core jar among the Spark line's jars " + sparkJars);
        }
    }

    /** The Spark side only (a Spark line's deployment test: no HDFS daemons). */
    public RingLines sparkOnly() {
        return new RingLines(sparkJars, scalaVersion, sparkPlugin, sparkPluginOn, List.of(), null, appJars);
    }

    /** The HDFS side only (a Hadoop line's deployment test: no Spark daemons). */
    public RingLines hdfsOnly() {
        return new RingLines(List.of(), scalaVersion, null, sparkPluginOn, hadoopJars, hdfsPlugin, appJars);
    }

    /** The Spark version of the line's spark-core jar (its file name: spark-core_SCALA-VERSION.jar). */
    public String sparkVersion() {
        return sparkVersion(sparkJars);
    }

    private static String sparkVersion(List<Path> jars) {
        return jars.stream().map(p -> p.getFileName().toString()).filter(n -> n.startsWith(SPARK_CORE) && n.endsWith(".jar")).findFirst()
                .map(n -> n.substring(n.indexOf('-', SPARK_CORE.length()) + 1, n.length() - ".jar".length())).orElse("?");
    }

    /**
     * The lines of a class path file (this module's {@code target/test-classpath.txt}, written at test-compile),
     * with the plug-in jars named by the system properties {@code rdma.spark.plugin.jar} and
     * {@code rdma.hdfs.plugin.jar} (surefire sets both), else the default line's jars next to this module. The Spark
     * plug-in jar goes where users put it on that line ({@link PluginOn#forSpark}).
     */
    public static RingLines fromClassPath(List<Path> classPath, Path sparkPlugin, Path hdfsPlugin) {
        List<Path> spark = new ArrayList<>();
        List<Path> hadoop = new ArrayList<>();
        List<Path> app = new ArrayList<>();
        for (Path p : classPath) {
            String s = p.toString().replace('\\', '/');
            if (!s.endsWith(".jar")) {
                continue;
            }
            String name = p.getFileName().toString();
            if (OURS.stream().anyMatch(name::startsWith)) {
                continue;
            }
            if (NOT_SPARK.stream().noneMatch(s::contains) || s.contains(SLF4J_SIMPLE)) {
                spark.add(p);
            }
            if (HADOOP.stream().anyMatch(s::contains)) {
                hadoop.add(p);
            }
            if (APP.stream().anyMatch(s::contains)) {
                app.add(p);
            }
        }
        String scala = spark.stream().map(p -> p.getFileName().toString()).filter(n -> n.startsWith(SPARK_CORE)).findFirst()
                .map(n -> n.substring(SPARK_CORE.length(), n.indexOf('-', SPARK_CORE.length()))).orElse("?");
        return new RingLines(spark, scala, sparkPlugin, PluginOn.forSpark(sparkVersion(spark)), hadoop, hdfsPlugin, app);
    }

    /** This module's test class path and plug-in jars, as Maven built them. */
    public static RingLines fromTestClassPath() {
        Path module = moduleDir();
        Path file = Path.of(System.getProperty("rdma.ring.classpath.file", module.resolve("target/test-classpath.txt").toString()));
        List<Path> cp;
        try {
            cp = Arrays.stream(Files.readString(file).trim().split(Pattern.quote(File.pathSeparator))).map(Path::of).toList();
        } catch (IOException e) {
            throw new UncheckedIOException("ring: cannot read the class path file " + file + " (rdma.ring.classpath.file; written by"
                    + " integration-tests' test-compile phase)", e);
        }
        return fromClassPath(cp, plugin("rdma.spark.plugin.jar", module.resolveSibling("spark-shuffle-rdma/target"), "spark-shuffle-rdma-"),
                plugin("rdma.hdfs.plugin.jar", module.resolveSibling("hdfs-transfer-rdma/target"), "hdfs-transfer-rdma-"));
    }

    /** integration-tests' folder: the working directory under Maven, else found from here. */
    static Path moduleDir() {
        Path here = Path.of("").toAbsolutePath();
        return Files.isDirectory(here.resolve("integration-tests")) ? here.resolve("integration-tests") : here;
    }

    private static Path plugin(String property, Path dir, String prefix) {
        String set = System.getProperty(property);
        if (set != null && !set.isBlank()) {
            return Path.of(set);
        }
        // the default line's jar, <module>-<line>-<version>-plugin.jar: the only one in target/ (other lines build in target/lines/)
        try (Stream<Path> files = Files.list(dir)) {
            List<Path> found = files.filter(p -> p.getFileName().toString().matches(Pattern.quote(prefix) + ".*-plugin\\.jar")).toList();
            if (found.size() == 1) {
                return found.get(0);
            }
            throw new IllegalArgumentException("ring: " + found.size() + " plug-in jars " + prefix + "<line>-<version>-plugin.jar in " + dir
                    + "; name one with -D" + property + "=...");
        } catch (IOException e) {
            throw new IllegalArgumentException("ring: no " + dir + " (build it: mvn -B -DskipTests package), or set -D" + property, e);
        }
    }
}

package io.rdmaplane.it.packaging;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.Skip;
import java.io.File;
import java.io.IOException;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Spark drop-in jar ({@code spark-shuffle-rdma-<version>-plugin.jar}, built by the shade plugin
 * in spark-shuffle-rdma's package phase) is complete and carries nothing Spark already has: it
 * holds only our classes and DiSNI's plus the native library; with only Spark's own class path
 * beside it, a local Spark application runs a shuffle through {@code RdmaShuffleManager} loaded
 * from the jar; and jdeps finds no class reference that the jar and Spark's class path do not
 * satisfy. Surefire passes the jar's path; under {@code mvn test} (no package phase yet) the jar
 * may not exist and the test is skipped.
 */
class SparkPluginJarTest {
    static final String JAR_PROPERTY = "rdma.spark.plugin.jar";
    /** The only class packages the jar may contain: ours and DiSNI's (no Spark distribution has it). */
    static final List<String> OWN_PACKAGES = List.of("io/rdmaplane/", "com/ibm/disni/");
    /**
     * What is on this test's class path but not on Spark's: our own modules and what only they bring
     * (DiSNI, Arrow's unsafe allocation manager; Spark has the Netty one), this module's test-only
     * dependencies (JUnit, the HDFS minicluster) and its SLF4J provider (Spark ships log4j's).
     * ("/target/": every module's classes, also a line's target/lines/<line>/). Everything else here is the
     * dependency tree of the build's spark-sql (4.0.4 by default, or a line's: integration-tests/lines/ci.sh).
     */
    static final List<String> NOT_SPARK = List.of("/io/rdmaplane/", "/target/",
            "/com/ibm/disni/", "/arrow-memory-unsafe/", "/org/junit/", "/org/opentest4j/", "/org/apiguardian/",
            "/hadoop-client-minicluster/", "/org/slf4j/slf4j-simple/", "/surefire", "/io/trino/");

    /** The Spark line the jar was built for (spark-shuffle-rdma's LineName reads it). */
    static final String LINE_NAME = "io/rdmaplane/spark/spark-line.properties";

    private static Path jar;
    private static List<Path> spark;

    @BeforeAll
    static void locate() {
        String path = System.getProperty(JAR_PROPERTY);
        Skip.unless(path != null && Files.isRegularFile(Path.of(path)),
                "no Spark plug-in jar at " + path + ": it is built in spark-shuffle-rdma's package phase (mvn verify)");
        jar = Path.of(path).toAbsolutePath().normalize();
        spark = Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(entry -> NOT_SPARK.stream().noneMatch(p -> entry.replace('\\', '/').contains(p)))
                .filter(entry -> entry.endsWith(".jar"))
                .map(Path::of)
                .collect(Collectors.toList());
        String scala = System.getProperty("rdma.scala.binary.version", "2.13");
        for (String needed : List.of("spark-core_" + scala, "spark-sql_" + scala, "scala-library", "arrow-vector", "arrow-memory-netty",
                "metrics-core", "slf4j-api")) {
            assertTrue(spark.stream().anyMatch(p -> p.getFileName().toString().startsWith(needed)), needed + " on Spark's class path");
        }
        writeSparkClassPath();
    }

    /**
     * The class path this test proves the jar needs nothing beyond, one entry a line, where surefire says
     * (rdma.spark.classpath.out): a line's deployment scripts start that line's Spark from it.
     */
    private static void writeSparkClassPath() {
        String out = System.getProperty("rdma.spark.classpath.out");
        if (out == null) {
            return;
        }
        try {
            Files.write(Path.of(out), spark.stream().map(Path::toString).collect(Collectors.toList()));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("writing " + out, e);
        }
    }

    @Test
    void containsOnlyOurClassesDisniAndTheNativeLibrary() throws IOException {
        List<String> names = PluginJarChecks.entriesOfAPluginJar(jar);
        assertEquals(List.of(), names.stream()
                        .filter(n -> n.endsWith(".class") && OWN_PACKAGES.stream().noneMatch(n::startsWith))
                        .collect(Collectors.toList()),
                "classes outside " + OWN_PACKAGES);
        assertEquals(List.of(), names.stream()
                        .filter(n -> !n.endsWith("/") && !n.endsWith(".class") && !n.startsWith("META-INF/") && !n.equals(PluginJarChecks.NATIVE_LIBRARY)
                                && !n.equals(LINE_NAME))
                        .collect(Collectors.toList()),
                "nothing but classes, META-INF, the native library and the Spark line's name");
        for (String needed : List.of("io/rdmaplane/spark/RdmaShuffleManager.class",
                "io/rdmaplane/spark/SparkRdmaConfig.class",
                "io/rdmaplane/rdma/format/ArrowBlock.class",
                "io/rdmaplane/rdma/provider/tcp/TcpProvider.class",
                "io/rdmaplane/rdma/provider/verbs/DisniRuntime.class",
                "com/ibm/disni/verbs/impl/NativeDispatcher.class", LINE_NAME)) {
            assertTrue(names.contains(needed), needed + " in " + jar);
        }
        PluginJarChecks.assertProvidersListed(jar, names);
    }

    @Test
    void sparkRunsAShuffleThroughTheManagerFromTheJarAlone() throws Exception {
        ClassLoader previous = Thread.currentThread().getContextClassLoader();
        try (URLClassLoader isolated = PluginJarChecks.isolatedLoader("spark-plugin", jar, spark)) {
            Class<?> manager = Class.forName("io.rdmaplane.spark.RdmaShuffleManager", true, isolated);
            assertEquals(isolated, manager.getClassLoader());
            assertTrue(Class.forName("org.apache.spark.shuffle.ShuffleManager", false, isolated).isAssignableFrom(manager));

            // Spark resolves spark.shuffle.manager and the tasks' classes through the context class loader
            PluginJarChecks.ProbeLoader probeLoader = new PluginJarChecks.ProbeLoader("spark-plugin-probe", isolated, SparkPluginJarProbe.class);
            Thread.currentThread().setContextClassLoader(probeLoader);
            @SuppressWarnings("unchecked")
            Map<String, String> facts = (Map<String, String>) probeLoader.loadClass(SparkPluginJarProbe.class.getName())
                    .getMethod("run").invoke(null);
            System.out.println("Spark plug-in jar probe: " + facts);
            assertEquals("io.rdmaplane.spark.RdmaShuffleManager", facts.get("shuffleManager"), facts.toString());
            assertEquals("spark-plugin", facts.get("managerLoader"), facts.toString());
            assertEquals("spark-plugin", facts.get("sparkLoader"), facts.toString());
            assertEquals("10", facts.get("keys"), facts.toString());
            assertEquals("10000", facts.get("records"), facts.toString());
            assertEquals("[auto, verbs, tcp]", facts.get("providers"), "found through the jar's service file: " + facts);
            assertEquals("tcp", facts.get("report.provider"), facts.toString());
            assertEquals(System.getProperty("rdma.spark.line", "spark4.0_2.13"), facts.get("report.sparkLine"),
                    "the jar of the line this build is for: " + facts);
            assertEquals("0", facts.get("report.rdma.shuffle.fallback.app"), facts.toString());
            assertTrue(Long.parseLong(facts.get("report.rdma.shuffle.published.maps")) >= 4, facts.toString());
            // DisniRuntime found the bundled library in the jar; loading it may still fail where libibverbs is missing
            assertFalse(facts.get("disniCause").contains("no bundled native library"), facts.toString());
        } finally {
            Thread.currentThread().setContextClassLoader(previous);
        }
    }

    @Test
    void jdepsFindsNothingMissingBesideSpark() {
        PluginJarChecks.assertJdepsFindsNothingMissing(jar, spark, List.of(), "Spark");
    }
}

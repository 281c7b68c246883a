package io.rdmaplane.it.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.HdfsRdmaConfig;
import io.rdmaplane.rdma.config.ConfigKey;
import io.rdmaplane.rdma.config.ConfigReference;
import io.rdmaplane.rdma.config.ConfigRegistry;
import io.rdmaplane.rdma.config.PolicyKeys;
import io.rdmaplane.spark.SparkRdmaConfig;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Keeps the committed conf/configuration.md and conf/spark-defaults.conf equal to what the
 * registries say; {@code -Drdma.config.write=true} rewrites both.
 */
class ConfigReferenceTest {
    static final String REGENERATE = "mvn -B -q -pl integration-tests -am test -Dtest=ConfigReferenceTest"
            + " -Dsurefire.failIfNoSpecifiedTests=false -Drdma.config.write=true";

    /** Keys the template leaves out: set by the driver itself. */
    static final List<String> NOT_IN_TEMPLATE = List.of("registry.address");

    @Test
    void committedReferenceMatchesTheRegistries() throws IOException {
        String rendered = ConfigReference.render(
                List.of(SparkRdmaConfig.REGISTRY, HdfsRdmaConfig.CLIENT, HdfsRdmaConfig.DATANODE), REGENERATE);
        checkCommitted("configuration.md", rendered);
    }

    @Test
    void committedSparkDefaultsTemplateMatchesTheRegistry() throws IOException {
        // the jar's file name as the build makes it (surefire passes the path; the file need not exist)
        String jar = Path.of(System.getProperty("rdma.spark.plugin.jar", "spark-shuffle-rdma-<version>-plugin.jar")).getFileName().toString();
        checkCommitted("spark-defaults.conf", sparkDefaults(SparkRdmaConfig.REGISTRY, jar));
    }

    private static void checkCommitted(String name, String rendered) throws IOException {
        // Surefire runs tests with the module directory as basedir; conf/ sits beside the modules.
        Path file = Path.of(System.getProperty("basedir", ".")).resolve("../conf/" + name).normalize();
        // Surefire forwards -D properties from the mvn command line to its forked JVM.
        if (Boolean.getBoolean("rdma.config.write")) {
            Files.writeString(file, rendered, StandardCharsets.UTF_8);
        }
        assertTrue(Files.exists(file), file + " is missing; generate it with: " + REGENERATE);
        assertEquals(rendered, Files.readString(file, StandardCharsets.UTF_8),
                file + " is stale; regenerate it with: " + REGENERATE);
    }

    /**
     * conf/spark-defaults.conf: the manager and the jar set, every other user setting of the
     * registry commented out at its default, under its one-line doc.
     */
    static String sparkDefaults(ConfigRegistry registry, String jarName) {
        StringBuilder out = new StringBuilder();
        out.append("# spark-defaults.conf template for the RDMA shuffle plug-in (Spark 4.0, Scala 2.13).\n")
                .append("# Generated from SparkRdmaConfig.REGISTRY by integration-tests' ConfigReferenceTest, which fails when\n")
                .append("# it is stale; regenerate it from the repository root with:\n#   ").append(REGENERATE).append('\n')
                .append("# Copy what you need into $SPARK_HOME/conf/spark-defaults.conf, or pass lines as --conf key=value.\n")
                .append("# Every setting, with bounds: conf/configuration.md.\n\n")
                .append("# The one setting: Spark's sort shuffle, and remote blocks pulled with RDMA READ. Set it for the whole\n")
                .append("# application (driver and executors). Any failure falls back to Spark's Netty shuffle; the job goes on.\n")
                .append(line("spark.shuffle.manager", "io.rdmaplane.spark.RdmaShuffleManager", false))
                .append("\n# The jar, either shipped with the application (Spark 4 creates an executor's shuffle manager after it\n")
                .append("# has fetched the application's jars; same as --jars) ...\n")
                .append(line("spark.jars", "/path/to/" + jarName, false))
                .append("# ... or already installed at the same path on every node:\n")
                .append(line("spark.driver.extraClassPath", "/opt/rdma/" + jarName, true))
                .append(line("spark.executor.extraClassPath", "/opt/rdma/" + jarName, true))
                .append("\n# The plug-in's settings, at their defaults (uncomment to change). With the verbs provider the executors'\n")
                .append("# memlock limit must cover mapOutput.capacity + pool.capacity; the doctor checks it.\n");
        // the Spark plug-in's own keys first, then the transport and connection-policy keys it shares with HDFS
        for (boolean shared : new boolean[] {false, true}) {
            if (shared) {
                out.append("\n# ---- Transport, registered memory and connection policy (the same keys as HDFS's dfs.rdma.*)\n");
            }
            for (ConfigKey<?> key : registry.keys()) {
                boolean isShared = PolicyKeys.SHARED.stream().anyMatch(k -> k == key);
                if (isShared != shared || NOT_IN_TEMPLATE.contains(key.suffix())) {
                    continue;
                }
                out.append("\n# ").append(key.doc()).append(" Allowed: ").append(key.allowed()).append(".\n")
                        .append(line(registry.fullName(key), key.defaultText(), true));
            }
        }
        return out.toString();
    }

    private static String line(String key, String value, boolean commented) {
        return String.format("%-45s %s%n", (commented ? "#" : "") + key, value).replace(System.lineSeparator(), "\n").stripTrailing() + "\n";
    }
}

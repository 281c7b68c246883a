package io.rdmaplane.it.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.HdfsRdmaConfig;
import io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder;
import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import io.rdmaplane.rdma.config.ConfigKey;
import io.rdmaplane.rdma.config.ConfigReference;
import io.rdmaplane.rdma.config.ConfigRegistry;
import io.rdmaplane.rdma.config.PolicyKeys;
import io.rdmaplane.spark.SparkRdmaConfig;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.ReplicaAccessorBuilder;
import org.apache.hadoop.util.ServicePlugin;
import org.junit.jupiter.api.Test;

/**
 * Keeps the committed conf/configuration.md, conf/spark-defaults.conf and
 * conf/hdfs-site.xml.snippet equal to what the registries say; {@code -Drdma.config.write=true}
 * rewrites all three.
 */
class ConfigReferenceTest {
    static final String REGENERATE = "mvn -B -q -pl integration-tests -am test -Dtest=ConfigReferenceTest"
            + " -Dsurefire.failIfNoSpecifiedTests=false -Drdma.config.write=true";


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

    @Test
    void committedHdfsSiteSnippetMatchesTheRegistries() throws IOException {
        checkCommitted("hdfs-site.xml.snippet", hdfsSiteSnippet(hdfsJarName()));
    }

    /** The HDFS plug-in jar's file name as the build makes it (surefire passes the path; the file need not exist). */
    static String hdfsJarName() {
        return Path.of(System.getProperty("rdma.hdfs.plugin.jar", "hdfs-transfer-rdma-<version>-plugin.jar")).getFileName().toString();
    }

    @Test
    void hdfsSiteSnippetIsAHadoopConfigurationNamingThePluginsWhoseKeysAllValidate() {
        String snippet = hdfsSiteSnippet(hdfsJarName());
        // what an operator gets after pasting it into <configuration>, as Hadoop parses it
        Configuration pasted = hadoopConf(snippet);
        Class<?> plugin = pasted.getClass(DATANODE_PLUGINS, null);
        assertEquals(RdmaDataNodePlugin.class, plugin);
        assertTrue(ServicePlugin.class.isAssignableFrom(plugin));
        Class<?> builder = pasted.getClass(ACCESSOR_BUILDERS, null);
        assertEquals(RdmaReplicaAccessorBuilder.class, builder);
        assertTrue(ReplicaAccessorBuilder.class.isAssignableFrom(builder));
        assertTrue(snippet.contains(" hdfs-transfer-rdma-") && snippet.contains("-plugin.jar, one jar for both sides"), snippet);
        assertEquals(2, pasted.size(), "only the two plug-in classes are set; the rest is commented out");

        // every commented-out setting, uncommented, is a user key of its registry at its default
        // (Hadoop reads an empty <value> as unset, which is what an empty default means)
        Configuration uncommented = hadoopConf(snippet.replace("<!-- <property>", "<property>").replace("</property> -->", "</property>"));
        for (ConfigRegistry registry : List.of(HdfsRdmaConfig.DATANODE, HdfsRdmaConfig.CLIENT)) {
            for (ConfigKey<?> key : registry.keys()) {
                String name = registry.fullName(key);
                String expected = key.visibility() == ConfigKey.Visibility.USER && !key.defaultText().isEmpty() ? key.defaultText() : null;
                assertEquals(expected, uncommented.get(name), name);
            }
        }
        HdfsRdmaConfig.dataNode(uncommented);
        HdfsRdmaConfig.client(uncommented);
    }

    private static Configuration hadoopConf(String snippet) {
        Configuration conf = new Configuration(false);
        String xml = "<?xml version=\"1.0\"?>\n<configuration>\n" + snippet + "</configuration>\n";
        conf.addResource(new ByteArrayInputStream(xml.getBytes(StandardCharsets.UTF_8)), "hdfs-site.xml.snippet");
        conf.size(); // parses now: a malformed snippet fails here
        return conf;
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
                if (isShared != shared || key.visibility() != ConfigKey.Visibility.USER) {
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

    static final String DATANODE_PLUGINS = "dfs.datanode.plugins";
    static final String ACCESSOR_BUILDERS = "dfs.client.replica.accessor.builder.classes";

    /**
     * conf/hdfs-site.xml.snippet: the two plug-in classes set, every other user setting of the
     * DataNode and client registries commented out at its default, under its one-line doc.
     */
    static String hdfsSiteSnippet(String jarName) {
        StringBuilder out = new StringBuilder();
        out.append(comment("""
                  hdfs-site.xml snippet for the HDFS RDMA read plug-ins (Hadoop 3.4).
                  Generated from HdfsRdmaConfig's registries by integration-tests' ConfigReferenceTest, which fails
                  when it is stale; regenerate it from the repository root with:
                    %s
                  Paste the DataNode part into the DataNodes' hdfs-site.xml and the client part into the clients'
                  (hdfs-site.xml or core-site.xml; Spark: spark.hadoop.<key>), inside <configuration>.
                  The jar: %s, one jar for both sides. DataNode: copy it into
                  $HADOOP_HOME/share/hadoop/hdfs/lib/ (or add it to HADOOP_CLASSPATH in hadoop-env.sh). Client: put it
                  on the client's class path (HADOOP_CLASSPATH, the application's, or Spark's jars).
                  JVM flags (Java 17), DataNode and client: java.base/java.nio and java.base/sun.nio.ch opened to
                  ALL-UNNAMED (add-opens, see the README's "JVM flags"), e.g. in HDFS_DATANODE_OPTS, HADOOP_CLIENT_OPTS.
                  Every setting, with bounds: conf/configuration.md. A bad or unknown dfs.datanode.rdma.* key stops
                  the DataNode's start-up, a bad or unknown dfs.rdma.* key fails the client's reads, each with an
                  error naming the key; runtime failures (no RDMA device, peer lost) fall back to TCP.
                """.formatted(REGENERATE, jarName)));
        hdfsSection(out, "DataNode", DATANODE_PLUGINS, RdmaDataNodePlugin.class, HdfsRdmaConfig.DATANODE,
                "the client's dfs.rdma.* and Spark's spark.shuffle.rdma.*");
        hdfsSection(out, "Client", ACCESSOR_BUILDERS, RdmaReplicaAccessorBuilder.class, HdfsRdmaConfig.CLIENT,
                "the DataNode's dfs.datanode.rdma.* and Spark's spark.shuffle.rdma.*");
        return out.toString();
    }

    private static void hdfsSection(StringBuilder out, String title, String pluginKey, Class<?> plugin, ConfigRegistry registry,
                                    String sameKeysAs) {
        out.append("\n<!-- ============================== ").append(title).append(" ============================== -->\n")
                .append(comment(" Comma-separated, with any other class already listed there."))
                .append("<property>\n  <name>").append(pluginKey).append("</name>\n  <value>").append(plugin.getName())
                .append("</value>\n</property>\n")
                .append("\n").append(comment(" The plug-in's settings, at their defaults (uncomment to change)."));
        // the product's own keys first, then the transport and connection-policy keys it shares
        for (boolean shared : new boolean[] {false, true}) {
            if (shared) {
                out.append("\n").append(comment(" ==== Transport, registered memory and connection policy (the same keys as "
                        + sameKeysAs + ")"));
            }
            for (ConfigKey<?> key : registry.keys()) {
                boolean isShared = PolicyKeys.SHARED.stream().anyMatch(k -> k == key);
                if (isShared != shared || key.visibility() != ConfigKey.Visibility.USER) {
                    continue;
                }
                out.append("\n").append(comment(" " + key.doc() + " Allowed: " + key.allowed() + "."))
                        .append("<!-- <property><name>").append(registry.fullName(key)).append("</name><value>")
                        .append(key.defaultText()).append("</value></property> -->\n");
            }
        }
    }

    /** An XML comment; "--" may not occur inside one, so a doc with it fails here rather than in a user's hdfs-site.xml. */
    private static String comment(String text) {
        if (text.contains("--")) {
            throw new IllegalArgumentException("'--' is not allowed in an XML comment: " + text);
        }
        return (text.contains("\n") ? "<!--\n" + text + "-->" : "<!--" + text + " -->") + "\n";
    }
}

package io.rdmaplane.it.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.HdfsRdmaConfig;
import io.rdmaplane.rdma.config.ConfigReference;
import io.rdmaplane.spark.SparkRdmaConfig;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Keeps the committed conf/configuration.md equal to what the registries say. */
class ConfigReferenceTest {
    static final String REGENERATE = "mvn -B -q -pl integration-tests -am test -Dtest=ConfigReferenceTest"
            + " -Dsurefire.failIfNoSpecifiedTests=false -Drdma.config.write=true";

    @Test
    void committedReferenceMatchesTheRegistries() throws IOException {
        String rendered = ConfigReference.render(
                List.of(SparkRdmaConfig.REGISTRY, HdfsRdmaConfig.CLIENT, HdfsRdmaConfig.DATANODE), REGENERATE);
        // Surefire runs tests with the module directory as basedir; the reference sits beside the modules.
        Path file = Path.of(System.getProperty("basedir", ".")).resolve("../conf/configuration.md").normalize();
        // Surefire forwards -D properties from the mvn command line to its forked JVM.
        if (Boolean.getBoolean("rdma.config.write")) {
            Files.writeString(file, rendered, StandardCharsets.UTF_8);
        }
        assertTrue(Files.exists(file), file + " is missing; generate it with: " + REGENERATE);
        assertEquals(rendered, Files.readString(file, StandardCharsets.UTF_8),
                file + " is stale; regenerate it with: " + REGENERATE);
    }
}

package io.rdmaplane.spark;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.util.List;
import org.apache.spark.launcher.JavaModuleOptions;
import org.junit.jupiter.api.Test;

/**
 * The build's JVM flags (the parent pom's rdma.jvm.module.flags, used by every test JVM and the
 * run profile) must include Spark's own list, or Spark fails on Java 17 in ways that look
 * like our bugs. This catches the list drifting when Spark is upgraded.
 */
class JvmModuleFlagsTest {
    @Test
    void testJvmCarriesEverySparkModuleFlag() {
        List<String> running = ManagementFactory.getRuntimeMXBean().getInputArguments();
        // defaultModuleOptions(), not 4.0's defaultModuleOptionArray(): Spark 3.5 has only the former
        for (String flag : JavaModuleOptions.defaultModuleOptions().split("\\s+")) {
            assertTrue(running.contains(flag), "rdma.jvm.module.flags in pom.xml lacks Spark's " + flag);
        }
        assertTrue(running.contains("--add-opens=java.base/java.nio=ALL-UNNAMED"), "Arrow needs java.nio opened");
        assertTrue(running.contains("--add-opens=java.base/sun.nio.ch=ALL-UNNAMED"), "DiSNI needs sun.nio.ch");
    }
}

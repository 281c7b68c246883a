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
 * The HDFS drop-in jar ({@code hdfs-transfer-rdma-<version>-plugin.jar}, built by the shade plugin
 * in hdfs-transfer-rdma's package phase) is complete: with only Hadoop's own jars and slf4j-api
 * beside it, both plug-in classes load and instantiate, a client's memory pool (relocated Arrow)
 * and metrics (relocated Dropwizard) work, the native library is inside, and jdeps finds no class
 * reference outside the jar and Hadoop. common-rdma is relocated inside it ({@code io.rdmaplane.shaded.rdma}), so
 * it shares a class path with the Spark plug-in jar (BothPluginsOneClassPathTest). Surefire passes the jar's path; under {@code mvn test}
 * (no package phase yet) the jar may not exist and the test is skipped.
 */
class ShadedPluginJarTest {
    static final String JAR_PROPERTY = "rdma.hdfs.plugin.jar";
    /** What a DataNode or HDFS client JVM already has: Hadoop (client-api/runtime, the minicluster's server side) and its slf4j-api. */
    static final List<String> PROVIDED = List.of("/org/apache/hadoop/", "/org/slf4j/slf4j-api/", "/commons-logging/",
            "/com/google/code/findbugs/jsr305/", "/org/xerial/snappy/");
    /** Annotation-only references jdeps reports (annotations missing at run time are ignored by the JVM). */
    static final List<String> ANNOTATION_ONLY = List.of("org.immutables.value.", "org.checkerframework.");

    private static Path jar;
    private static List<Path> provided;

    @BeforeAll
    static void locate() {
        String path = System.getProperty(JAR_PROPERTY);
        Skip.unless(path != null && Files.isRegularFile(Path.of(path)),
                "no shaded plug-in jar at " + path + ": it is built in hdfs-transfer-rdma's package phase (mvn verify)");
        jar = Path.of(path).toAbsolutePath().normalize();
        provided = Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(entry -> PROVIDED.stream().anyMatch(p -> entry.replace('\\', '/').contains(p)))
                .map(Path::of)
                .collect(Collectors.toList());
        assertTrue(provided.stream().anyMatch(p -> p.toString().contains("hadoop-client-api")), "hadoop-client-api on the test class path: " + provided);
    }

    @Test
    void containsTheNativeLibraryAndOnlyRelocatedThirdPartyClasses() throws IOException {
        List<String> names = PluginJarChecks.entriesOfAPluginJar(jar);
        // io/rdmaplane/rdma/: common-rdma is relocated too, so it never meets the Spark plug-in jar's copy under one name
        for (String forbidden : List.of("com/codahale/", "org/apache/arrow/", "org/apache/hadoop/", "org/slf4j/", "io/rdmaplane/rdma/")) {
            assertEquals(List.of(), names.stream().filter(n -> n.startsWith(forbidden)).collect(Collectors.toList()),
                    "nothing under " + forbidden);
        }
        for (String needed : List.of("io/rdmaplane/hdfs/client/RdmaReplicaAccessorBuilder.class",
                "io/rdmaplane/hdfs/datanode/RdmaDataNodePlugin.class",
                "io/rdmaplane/shaded/rdma/provider/verbs/DisniRuntime.class",
                "io/rdmaplane/shaded/rdma/provider/verbs/impl/NativeCm.class",
                "com/ibm/disni/verbs/impl/NativeDispatcher.class",
                "io/rdmaplane/shaded/metrics/MetricRegistry.class",
                "io/rdmaplane/shaded/arrow/memory/RootAllocator.class")) {
            assertTrue(names.contains(needed), needed + " in " + jar);
        }
        // Arrow's unsafe allocation manager moved packages (memory/ in Arrow 12, Spark 3.5's; memory/unsafe/ later)
        assertTrue(names.contains("io/rdmaplane/shaded/arrow/memory/unsafe/UnsafeAllocationManager.class")
                || names.contains("io/rdmaplane/shaded/arrow/memory/UnsafeAllocationManager.class"), "Arrow's UnsafeAllocationManager in " + jar);
        PluginJarChecks.assertProvidersListed(jar, names, ShadedJarProbe.RELOCATED);
    }

    @Test
    void pluginsLoadWithOnlyHadoopBesideTheJar() throws Exception {
        try (URLClassLoader isolated = PluginJarChecks.isolatedLoader("shaded-plugin", jar, provided)) {

            Class<?> builder = Class.forName("io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder", true, isolated);
            assertEquals(isolated, builder.getClassLoader());
            assertEquals("org.apache.hadoop.hdfs.ReplicaAccessorBuilder", builder.getSuperclass().getName());
            builder.getConstructor().newInstance();
            Object registry = builder.getMethod("metrics").invoke(null);
            assertEquals("io.rdmaplane.shaded.metrics.MetricRegistry", registry.getClass().getName());

            Class<?> plugin = Class.forName("io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin", true, isolated);
            assertEquals(isolated, plugin.getClassLoader());
            Object instance = plugin.getConstructor().newInstance();
            assertTrue(Class.forName("org.apache.hadoop.util.ServicePlugin", false, isolated).isInstance(instance));
            plugin.getMethod("getState").invoke(instance);

            @SuppressWarnings("unchecked")
            Map<String, String> facts = (Map<String, String>) new PluginJarChecks.ProbeLoader("shaded-plugin-probe", isolated, ShadedJarProbe.class).loadClass(ShadedJarProbe.class.getName())
                    .getMethod("run").invoke(null);
            assertEquals("[auto, verbs, tcp]", facts.get("providers"), "found through the jar's service file: " + facts);
            assertEquals("io.rdmaplane.shaded.metrics.MetricRegistry", facts.get("metricRegistry"), facts.toString());
            assertTrue(facts.get("arrowAllocator").startsWith("io.rdmaplane.shaded.arrow.memory."), facts.toString());
            assertTrue(facts.get("arrowBuf").startsWith("io.rdmaplane.shaded.arrow.memory."), facts.toString());
            System.out.println("shaded plug-in jar probe: " + facts);
            // DisniRuntime found the bundled library in the jar; loading it may still fail where libibverbs is missing
            assertFalse(facts.get("disniCause").contains("no bundled native library"), facts.toString());
        }
    }

    /**
     * JNI binds a native method by its class's name, and this jar renames common-rdma's classes: the native library
     * (the same file as the Spark jar's) must export every native method of the relocated classes under the new name.
     */
    @Test
    void nativeLibraryExportsTheRelocatedNativeMethods() throws Exception {
        byte[] library;
        try (java.util.zip.ZipFile zip = new java.util.zip.ZipFile(jar.toFile())) {
            library = zip.getInputStream(zip.getEntry(PluginJarChecks.NATIVE_LIBRARY)).readAllBytes();
        }
        String symbols = new String(library, java.nio.charset.StandardCharsets.ISO_8859_1);
        List<String> missing = new java.util.ArrayList<>();
        int natives = 0;
        try (URLClassLoader isolated = PluginJarChecks.isolatedLoader("shaded-natives", jar, provided)) {
            for (String name : List.of("provider.verbs.impl.NativeCm", "provider.verbs.impl.NativeMw",
                    "provider.verbs.impl.NativeMemory", "provider.verbs.impl.NativeMapping", "provider.verbs.impl.NativePost")) {
                Class<?> type = Class.forName(ShadedJarProbe.RELOCATED + name, false, isolated);
                for (java.lang.reflect.Method m : type.getDeclaredMethods()) {
                    if (java.lang.reflect.Modifier.isNative(m.getModifiers())) {
                        natives++;
                        // JNI's short name; none of these names has a character JNI escapes
                        String symbol = "Java_" + type.getName().replace('.', '_') + "_" + m.getName();
                        if (!symbols.contains(symbol + '\0')) {
                            missing.add(symbol);
                        }
                    }
                }
            }
        }
        assertTrue(natives >= 9, "native methods found: " + natives);
        assertEquals(List.of(), missing, "JNI functions the bundled library does not export");
    }

    @Test
    void jdepsFindsNothingMissingBesideHadoop() {
        PluginJarChecks.assertJdepsFindsNothingMissing(jar, provided, ANNOTATION_ONLY, "Hadoop");
    }
}

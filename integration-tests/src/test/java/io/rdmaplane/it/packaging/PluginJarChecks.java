package io.rdmaplane.it.packaging;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.Skip;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.spi.ToolProvider;
import java.util.stream.Collectors;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/** What the plug-in jar tests share: jdeps over a jar, and a loader that links a probe against an isolated class path. */
final class PluginJarChecks {
    static final String NATIVE_LIBRARY = "native/linux-x86_64/libdisni.so";

    private PluginJarChecks() {
    }

    /** The jar's entry names, once it is known to carry a non-empty native library and no signature files. */
    static List<String> entriesOfAPluginJar(Path jar) throws IOException {
        List<String> names;
        try (ZipFile zip = new ZipFile(jar.toFile())) {
            names = zip.stream().map(ZipEntry::getName).collect(Collectors.toList());
            ZipEntry lib = zip.getEntry(NATIVE_LIBRARY);
            assertNotNull(lib, NATIVE_LIBRARY + " in " + jar);
            assertTrue(lib.getSize() > 10_000, "the native library is not empty: " + lib.getSize());
        }
        assertEquals(List.of(), names.stream().filter(n -> n.matches("META-INF/[^/]*\\.(SF|DSA|RSA|EC)")).collect(Collectors.toList()),
                "no signature files");
        return names;
    }

    /**
     * The jar's service file lists the build's providers (verbs and tcp, not the test-only one), one per line as
     * the shade's ServicesResourceTransformer merges them, and carries their classes: without it Providers finds none.
     */
    static void assertProvidersListed(Path jar, List<String> entries) throws IOException {
        assertProvidersListed(jar, entries, "io.rdmaplane.rdma.");
    }

    /** As above, for a jar that puts common-rdma's {@code io.rdmaplane.rdma.} under {@code common} (the HDFS jar relocates it). */
    static void assertProvidersListed(Path jar, List<String> entries, String common) throws IOException {
        String service = "META-INF/services/" + common + "provider.TransportProvider";
        List<String> listed;
        try (ZipFile zip = new ZipFile(jar.toFile())) {
            ZipEntry entry = zip.getEntry(service);
            assertNotNull(entry, service + " in " + jar);
            try (InputStream in = zip.getInputStream(entry)) {
                listed = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).lines().map(String::trim)
                        .filter(line -> !line.isEmpty() && !line.startsWith("#")).sorted().collect(Collectors.toList());
            }
        }
        assertEquals(List.of(common + "provider.tcp.TcpProvider", common + "provider.verbs.VerbsProvider"),
                listed, service + " in " + jar);
        for (String provider : listed) {
            assertTrue(entries.contains(provider.replace('.', '/') + ".class"), provider + " in " + jar);
        }
    }

    /** A loader of the jar and {@code beside} only (no test class path), which finds the native library in the jar. */
    static URLClassLoader isolatedLoader(String name, Path jar, List<Path> beside) throws IOException {
        List<URL> urls = new ArrayList<>();
        urls.add(jar.toUri().toURL());
        for (Path p : beside) {
            urls.add(p.toUri().toURL());
        }
        URLClassLoader isolated = new URLClassLoader(name, urls.toArray(URL[]::new), ClassLoader.getPlatformClassLoader());
        URL lib = isolated.getResource(NATIVE_LIBRARY);
        assertNotNull(lib, "native library visible to the isolated loader");
        assertTrue(lib.toString().startsWith("jar:" + urls.get(0) + "!/"), "native library from the plug-in jar: " + lib);
        return isolated;
    }

    /**
     * Runs jdeps on {@code jar} with {@code classPath} beside it and fails listing every class reference neither
     * satisfies (lines containing one of {@code ignored} aside).
     */
    static void assertJdepsFindsNothingMissing(Path jar, List<Path> classPath, List<String> ignored, String beside) {
        ToolProvider jdeps = ToolProvider.findFirst("jdeps").orElse(null);
        Skip.unless(jdeps != null, "jdeps (a JDK tool) is not in this JVM");
        StringWriter out = new StringWriter();
        String cp = classPath.stream().map(Path::toString).collect(Collectors.joining(File.pathSeparator));
        int rc = jdeps.run(new PrintWriter(out, true), new PrintWriter(out, true),
                "--multi-release", "17", "--missing-deps", "-cp", cp, jar.toString());
        List<String> missing = out.toString().lines()
                .filter(line -> line.contains("not found") && line.contains("->") && !line.trim().endsWith("-> not found"))
                .filter(line -> ignored.stream().noneMatch(line::contains))
                .collect(Collectors.toList());
        assertEquals(0, rc, out.toString());
        assertEquals(List.of(), missing, "class references the jar and " + beside + " do not satisfy:\n" + out);
    }

    /** Defines one probe class from its class file, so that it links against the (isolated) parent loader's classes. */
    static final class ProbeLoader extends ClassLoader {
        private final Class<?> probe;

        ProbeLoader(String name, ClassLoader parent, Class<?> probe) {
            super(name, parent);
            this.probe = probe;
        }

        @Override
        protected Class<?> findClass(String name) throws ClassNotFoundException {
            if (!name.equals(probe.getName())) {
                throw new ClassNotFoundException(name);
            }
            try (InputStream in = probe.getResourceAsStream(probe.getSimpleName() + ".class")) {
                byte[] bytes = in.readAllBytes();
                return defineClass(name, bytes, 0, bytes.length);
            } catch (IOException e) {
                throw new ClassNotFoundException(name, e);
            }
        }
    }
}

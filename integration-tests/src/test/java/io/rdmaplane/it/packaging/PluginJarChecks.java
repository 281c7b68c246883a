package io.rdmaplane.it.packaging;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.spi.ToolProvider;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assumptions;

/** What the plug-in jar tests share: jdeps over a jar, and a loader that links a probe against an isolated class path. */
final class PluginJarChecks {
    private PluginJarChecks() {
    }

    /**
     * Runs jdeps on {@code jar} with {@code classPath} beside it and fails listing every class reference neither
     * satisfies (lines containing one of {@code ignored} aside).
     */
    static void assertJdepsFindsNothingMissing(Path jar, List<Path> classPath, List<String> ignored, String beside) {
        ToolProvider jdeps = ToolProvider.findFirst("jdeps").orElse(null);
        Assumptions.assumeTrue(jdeps != null, "jdeps (a JDK tool) is not in this JVM");
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

package io.rdmaplane.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ring's class-data sharing flags on this JDK: a JVM started with the recording flags writes its archive and says
 * so, one started with the using flags maps it, and one whose jar changed runs without it and prints what
 * {@code vm/tpcds-verbs.sh} looks for. Real JVMs, a class of a jar.
 */
class RingCdsTest {
    @TempDir
    Path tmp;

    /** The main class of the JVMs this test starts. */
    public static final class Hello {
        public static void main(String[] args) throws IOException {
            System.out.println("hello");
            if (args.length > 0) { // "wait": until its input closes, as an executor runs until its application ends
                System.out.flush();
                System.in.read();
            }
        }
    }

    @Test
    void settingsAreRecordOrUseAFolderElseTheErrorNamesTheProperty() {
        assertNull(RingCds.of(" "));
        assertEquals(new RingCds(true, Path.of("/a/b")), RingCds.of("record:/a/b"));
        assertEquals(new RingCds(false, Path.of("/a/b")), RingCds.of("use:/a/b"));
        for (String bad : List.of("/a/b", "keep:/a", "use:")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RingCds.of(bad));
            assertTrue(e.getMessage().startsWith("rdma.ring.cds=" + bad + ": expected record:DIR or use:DIR"), e.getMessage());
        }
    }

    @Test
    void anArchiveIsUsedOnlyWhereThereIsOneUnlessNamedBlind() {
        RingCds use = new RingCds(false, tmp);
        assertEquals(List.of(), use.jvmFlags("master", true));
        assertEquals(List.of("-XX:SharedArchiveFile=" + tmp.resolve("executor-{{EXECUTOR_ID}}.jsa")), use.jvmFlags(RingCds.EXECUTOR, false));
    }

    @Test
    void aRecordedArchiveIsMappedByTheNextJvmAndIgnoredWithAWarningOnceItsJarChanged() throws Exception {
        Path jar = helloJar();
        Path archives = tmp.resolve("cds");
        Files.createDirectories(archives);

        String recorded = run(new RingCds(true, archives), jar);
        assertTrue(recorded.contains("hello"), recorded);
        assertTrue(Files.size(archives.resolve("p.jsa")) > 0);
        String log = Files.readString(archives.resolve("p.jsa.log"));
        assertTrue(log.contains("Written dynamic archive"), "the line tpcds-verbs.sh takes for a whole archive:\n" + log);

        String used = run(new RingCds(false, archives), jar, "-Xlog:class+load=info");
        assertTrue(used.contains(Hello.class.getName() + " source: shared objects file (top)"), used);

        Files.setLastModifiedTime(jar, FileTime.fromMillis(Files.getLastModifiedTime(jar).toMillis() - 60_000));
        String stale = run(new RingCds(false, archives), jar, "-Xlog:class+load=info");
        assertTrue(stale.contains("hello"), stale);
        assertTrue(stale.contains("Unable to use shared archive"), "the line tpcds-verbs.sh reports:\n" + stale);
        assertFalse(stale.contains(Hello.class.getName() + " source: shared objects file"), stale);
    }

    @Test
    void aRunningExecutorDumpsItsArchiveWhenAskedAndTheNextOneWithItsIdMapsIt() throws Exception {
        Path jar = helloJar();
        Path archives = tmp.resolve("cds");
        Files.createDirectories(archives);
        RingCds record = new RingCds(true, archives);
        List<String> cmd = new ArrayList<>(List.of(java(), "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"));
        // as Spark starts executor 7 with spark.executor.extraJavaOptions
        record.jvmFlags(RingCds.EXECUTOR, false).forEach(f -> cmd.add(f.replace("{{EXECUTOR_ID}}", "7")));
        cmd.addAll(List.of("-cp", jar.toString(), Hello.class.getName(), "wait"));
        Process executor = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        try {
            assertEquals('h', executor.getInputStream().read(), "the JVM started: " + cmd);
            String dumped = record.dumpExecutor(executor.pid(), "7");
            assertTrue(dumped.contains(" exited 0"), dumped);
        } finally {
            executor.getOutputStream().close();
            assertTrue(executor.waitFor(60, TimeUnit.SECONDS));
        }
        assertTrue(Files.readString(archives.resolve("executor-7.jsa.log")).contains("Written dynamic archive"));

        List<String> use = new ArrayList<>(List.of(java(), "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"));
        new RingCds(false, archives).jvmFlags(RingCds.EXECUTOR, false).forEach(f -> use.add(f.replace("{{EXECUTOR_ID}}", "7")));
        use.addAll(List.of("-Xlog:class+load=info", "-cp", jar.toString(), Hello.class.getName()));
        Process p = new ProcessBuilder(use).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertTrue(out.contains(Hello.class.getName() + " source: shared objects file (top)"), out);
    }

    /** A jar of Hello alone. */
    private Path helloJar() throws IOException {
        Path jar = tmp.resolve("hello.jar");
        String entry = Hello.class.getName().replace('.', '/') + ".class";
        try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar));
             var in = Hello.class.getClassLoader().getResourceAsStream(entry)) {
            out.putNextEntry(new JarEntry(entry));
            out.write(in.readAllBytes());
            out.closeEntry();
        }
        return jar;
    }

    private static String java() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    /** Runs Hello from {@code jar} as the ring's process "p" with {@code cds}'s flags; its output (it must exit 0). */
    private static String run(RingCds cds, Path jar, String... more) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(java(), "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"));
        cmd.addAll(cds.jvmFlags("p", true));
        cmd.addAll(List.of(more));
        cmd.addAll(List.of("-cp", jar.toString(), Hello.class.getName()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the JVM did not end: " + cmd);
        assertEquals(0, p.exitValue(), cmd + "\n" + out);
        return out;
    }
}

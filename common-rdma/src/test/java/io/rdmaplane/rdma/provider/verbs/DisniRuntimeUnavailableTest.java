package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.Skip;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * When the native library cannot be had, DisniRuntime says why (naming what to install)
 * instead of crashing or throwing from a static initialiser.
 */
class DisniRuntimeUnavailableTest {

    static final String PLATFORM = DisniRuntime.platform(System.getProperty("os.name"), System.getProperty("os.arch"));

    @Test
    void aClassPathWithoutTheLibraryGivesAClearCause() {
        DisniRuntime.State state = DisniRuntime.probe(DisniTestSupport.withoutNativeResources());
        assertNull(state.loader);
        assertInstanceOf(UnsatisfiedLinkError.class, state.cause);
        String message = state.cause.getMessage();
        assertTrue(message.contains("no bundled native library native/" + PLATFORM + "/libdisni.so"), message);
        assertTrue(message.contains("libibverbs-dev") && message.contains("librdmacm-dev"), message);
    }

    @Test
    void withoutTheLibraryNoMemoryIsMappedAndTheCauseSaysWhy() {
        DisniRuntime.State state = DisniRuntime.probe(DisniTestSupport.withoutNativeResources());
        IOException e = assertThrows(IOException.class, () -> VerbsProvider.hostMemory(state.loader, state.cause));
        assertTrue(e.getMessage().startsWith("the bundled native library is unavailable: no bundled native library native/"
                + PLATFORM + "/libdisni.so"), e.getMessage());
    }

    @Test
    void aLibraryThatCannotBeLoadedGivesAClearCause(@TempDir Path dir) throws Exception {
        Path garbage = foreignLibrary(dir);
        DisniRuntime.State state = DisniRuntime.probe(DisniTestSupport.withNativeResource(PLATFORM, garbage));
        assertNull(state.loader);
        assertInstanceOf(UnsatisfiedLinkError.class, state.cause);
        assertTrue(state.cause.getMessage().startsWith(
                "cannot load the bundled native library native/" + PLATFORM + "/libdisni.so"), state.cause.getMessage());
        assertTrue(Files.notExists(state.extracted), "the extracted copy is deleted");
        System.out.println("[disni] an unloadable library is reported as: " + state.cause.getMessage());
    }

    @Test
    void theLibraryIsExtractedUnderTheFolderAskedFor(@TempDir Path dir) throws Exception {
        Path garbage = foreignLibrary(dir);
        Path tmpdir = Files.createDirectories(dir.resolve("configured"));
        DisniRuntime.State state = DisniRuntime.probe(DisniTestSupport.withNativeResource(PLATFORM, garbage), tmpdir);
        assertNotNull(state.cause);
        assertEquals(tmpdir, state.extracted.getParent().getParent(), "extracted under the configured folder");
        assertTrue(Files.notExists(state.extracted.getParent()), "and its private folder is deleted again");
    }

    @Test
    void aFolderThatCannotTakeTheLibraryIsNamed(@TempDir Path dir) throws Exception {
        Path missing = dir.resolve("no-such-folder");
        DisniRuntime.State state = DisniRuntime.probe(DisniRuntimeUnavailableTest.class.getClassLoader(), missing);
        assertNull(state.loader);
        assertInstanceOf(IOException.class, state.cause);
        assertTrue(state.cause.getMessage().startsWith("cannot extract DiSNI's native library under " + missing + ": "),
                state.cause.getMessage());
    }

    /**
     * The real library marked as built for another machine (e_machine = EM_AARCH64, or
     * EM_X86_64 on aarch64). Not a truncated file: glibc's loader dies of SIGBUS on those.
     */
    private static Path foreignLibrary(Path dir) throws IOException {
        byte[] real;
        try (InputStream in = DisniRuntimeUnavailableTest.class.getClassLoader()
                .getResourceAsStream("native/" + PLATFORM + "/libdisni.so")) {
            assertNotNull(in, "the bundled library");
            real = in.readAllBytes();
        }
        Path garbage = dir.resolve("libdisni.so");
        int machine = PLATFORM.endsWith("x86_64") ? 183 : 62;
        real[18] = (byte) machine;
        real[19] = 0;
        Files.write(garbage, real);
        return garbage;
    }

    /** A library whose dependency is missing, as libdisni.so is without rdma-core installed. */
    @Test
    void aMissingDependencyIsNamed(@TempDir Path dir) throws Exception {
        Path dependencySource = dir.resolve("dep.c");
        Path librarySource = dir.resolve("lib.c");
        Files.writeString(dependencySource, "int rdmaplane_missing_dependency(void) { return 1; }\n");
        Files.writeString(librarySource,
                "int rdmaplane_missing_dependency(void);\nint use(void) { return rdmaplane_missing_dependency(); }\n");
        Path dependency = dir.resolve("librdmaplane-missing.so");
        Path library = dir.resolve("libdisni.so");
        Skip.unless(run(dir, "gcc", "-shared", "-fPIC", "-o", dependency.toString(), dependencySource.toString()),
                "gcc is needed to build the test library");
        assertTrue(run(dir, "gcc", "-shared", "-fPIC", "-o", library.toString(), librarySource.toString(),
                "-L" + dir, "-lrdmaplane-missing"));
        Files.delete(dependency);

        DisniRuntime.State state = DisniRuntime.probe(DisniTestSupport.withNativeResource(PLATFORM, library));
        assertNull(state.loader);
        String message = state.cause.getMessage();
        assertTrue(message.contains("librdmaplane-missing.so: cannot open shared object file"), message);
        assertNotNull(state.cause.getCause(), "the linker's own error is kept as the cause");
        System.out.println("[disni] a missing dependency is reported as: " + message);
    }

    @Test
    void linkerMessagesAreTranslatedIntoPackagesToInstall() {
        String resource = "native/linux-x86_64/libdisni.so";
        assertEquals("libibverbs.so.1 not found: install Debian package ibverbs-providers / libibverbs1 (rdma-core)",
                explain("/tmp/x/libdisni.so: libibverbs.so.1: cannot open shared object file: No such file or directory",
                        resource));
        assertEquals("librdmacm.so.1 not found: install Debian package librdmacm1 (rdma-core)",
                explain("/tmp/x/libdisni.so: librdmacm.so.1: cannot open shared object file: No such file or directory",
                        resource));
        assertTrue(explain("/lib/x86_64-linux-gnu/libibverbs.so.1: version `IBVERBS_1.14' not found"
                + " (required by /tmp/x/libdisni.so)", resource).contains("upgrade the Debian packages libibverbs1"));
        assertTrue(explain("/tmp/x/libdisni.so: libnl-route-3.so.200: cannot open shared object file", resource)
                .contains("libnl-route-3-200"));
    }

    @Test
    void theCauseKeepsTheOriginalError() {
        UnsatisfiedLinkError original = new UnsatisfiedLinkError("libibverbs.so.1: cannot open shared object file");
        Throwable explained = DisniRuntime.explainLoadFailure(original, "native/linux-x86_64/libdisni.so");
        assertSame(original, explained.getCause());
    }

    private static String explain(String linkerMessage, String resource) {
        return DisniRuntime.explainLoadFailure(new UnsatisfiedLinkError(linkerMessage), resource).getMessage();
    }

    private static boolean run(Path dir, String... command) throws IOException, InterruptedException {
        Process process;
        try {
            process = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
        } catch (IOException e) {
            return false;
        }
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            return false;
        }
        if (process.exitValue() != 0) {
            System.out.println(String.join(" ", command) + ":\n" + output);
        }
        return process.exitValue() == 0;
    }
}

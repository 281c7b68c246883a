package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * DisniRuntime on a host with rdma-core's libraries but without RDMA devices (also passes
 * inside the Soft-RoCE VM, where devices exist): the bundled library loads through the
 * runtime's loader, passes DiSNI's version and layout checks, implements every native method
 * without crashing on bad input, and asking for devices fails cleanly.
 */
class DisniRuntimeTest {

    static final String CHECKS = "io.rdmaplane.rdma.provider.verbs.impl.DisniHostChecks";
    static final String REGISTRATION = "io.rdmaplane.rdma.provider.verbs.impl.RegistrationChecks";

    @Test
    void availableWithTheBundledLibrary() {
        assertNull(DisniRuntime.unavailabilityCause(), () -> "unavailable: " + DisniRuntime.unavailabilityCause());
        assertTrue(DisniRuntime.isAvailable());
        assertSame(DisniRuntime.loader(), DisniRuntime.loader(), "probed once");
    }

    @Test
    void loaderDefinesDisniAndTheImplPackageChildFirst() throws Exception {
        ClassLoader loader = DisniRuntime.loader();
        assertSame(DisniRuntime.class.getClassLoader(), loader.getParent());
        assertSame(loader, loader.loadClass("com.ibm.disni.verbs.impl.NativeDispatcher").getClassLoader());
        assertSame(loader, loader.loadClass(CHECKS).getClassLoader());
        // Everything else, including the SPI the impl implements, is the parent's.
        assertSame(io.rdmaplane.rdma.provider.Channel.class,
                loader.loadClass("io.rdmaplane.rdma.provider.Channel"));
        assertSame(DisniRuntime.class, loader.loadClass(DisniRuntime.class.getName()));
        DisniTestSupport.call(CHECKS, "definedByTheRuntimeLoader", loader);
    }

    @Test
    void nativeDispatcherInitialisesWithVersion32() throws Exception {
        DisniTestSupport.call(CHECKS, "nativeDispatcherInitialises");
    }

    @Test
    void layoutProbesReturnRdmaCoreLayouts() throws Exception {
        DisniTestSupport.call(CHECKS, "layoutProbesReportRealLayouts");
    }

    @Test
    void everyNativeMethodIsLinkedAndRejectsZeroHandles() throws Exception {
        Object called = DisniTestSupport.call(CHECKS, "everyNativeMethodRejectsZeroHandles");
        // 48 natives minus the 9 without parameters (version, 7 layout probes, createEventChannel)
        assertEquals(39, called);
    }

    @Test
    void postSendHandsRealIbvSendWrListsToTheLibrary() throws Exception {
        DisniTestSupport.call(CHECKS, "postSendSerialisesRealWorkRequests");
    }

    /**
     * The advice VerbsNode gives a private file mapping before registering it (ibv_reg_mr of one hung on
     * 7.2/ext4 without MADV_NOHUGEPAGE): the mapping carries the kernel's "nh" flag afterwards; a shared
     * mapping is left as it is.
     */
    @Test
    void privateFileMappingsAreAdvisedOffHugePagesBeforeRegistering(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("data"), new byte[1 << 20]);
        java.nio.ByteBuffer privateMapping;
        java.nio.ByteBuffer sharedMapping;
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(file,
                java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE)) {
            privateMapping = ch.map(java.nio.channels.FileChannel.MapMode.PRIVATE, 0, ch.size()).asReadOnlyBuffer();
            sharedMapping = ch.map(java.nio.channels.FileChannel.MapMode.READ_ONLY, 0, ch.size());
        }
        String before = (String) DisniTestSupport.call(REGISTRATION, "vmFlags", privateMapping);
        String advised = (String) DisniTestSupport.call(REGISTRATION, "adviseAsBeforeRegistering", privateMapping);
        String shared = (String) DisniTestSupport.call(REGISTRATION, "adviseAsBeforeRegistering", sharedMapping);
        System.out.println("[disni] VmFlags of a private file mapping before: " + before + "; advised: " + advised
                + "; a shared one after the same call: " + shared);
        assertTrue(java.util.List.of(advised.split(" ")).contains("nh"), advised);
        assertTrue(!java.util.List.of(shared.split(" ")).contains("nh"), shared);
    }

    @Test
    void nativeAffinityGetsAndSetsTheThreadMask() throws Exception {
        DisniTestSupport.call(CHECKS, "nativeAffinityWorks");
    }

    @Test
    void askingForDevicesFailsCleanlyWithoutThem() throws Exception {
        boolean devices = rdmaDevicesPresent();
        Object outcome = DisniTestSupport.call(CHECKS, "eventChannelWithoutDevices", devices);
        System.out.println("[disni] RDMA devices " + (devices ? "present" : "absent") + ": " + outcome);
    }

    @Test
    void extractedLibraryIsDeletedOnceLoaded() {
        DisniRuntime.loader();
        Path extracted = DisniRuntime.state().extracted;
        assertNotNull(extracted);
        assertTrue(Files.notExists(extracted), extracted + " is left behind");
        assertTrue(Files.notExists(extracted.getParent()), extracted.getParent() + " is left behind");
    }

    @Test
    void platformNames() {
        assertEquals("linux-x86_64", DisniRuntime.platform("Linux", "amd64"));
        assertEquals("linux-x86_64", DisniRuntime.platform("Linux", "x86_64"));
        assertEquals("linux-aarch64", DisniRuntime.platform("Linux", "aarch64"));
        assertThrows(UnsupportedOperationException.class, () -> DisniRuntime.platform("Mac OS X", "aarch64"));
        assertThrows(UnsupportedOperationException.class, () -> DisniRuntime.platform("Linux", "ppc64le"));
    }

    static boolean rdmaDevicesPresent() {
        String[] devices = new File("/sys/class/infiniband").list();
        return devices != null && devices.length > 0;
    }
}

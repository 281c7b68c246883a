package io.rdmaplane.rdma.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.rdmaplane.rdma.doctor.Report.Verdict;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The doctor's verdicts, fixes and exit codes on fake sysfs/procfs trees. */
class DoctorChecksTest {
    static final String ACTIVE = "4: ACTIVE";
    static final String LINK_UP = "5: LinkUp";
    static final String DOWN = "1: DOWN";
    static final String DISABLED = "3: Disabled";
    static final String GID_A = "0000:0000:0000:0000:0000:ffff:c0a8:4d01";
    /** Every printed line: verdict (or FIX/RESULT), check, detail, aligned in columns. */
    static final Pattern LINE = Pattern.compile("(OK    |INFO  |WARN  |FAIL  |FIX   |RESULT) (\\S.{9}|\\S{10,}) \\S.*");

    @TempDir
    Path root;
    FakeHost host;

    @BeforeEach
    void host() {
        host = new FakeHost(root);
    }

    /** Runs the command line on the fake host; returns the exit code and the printed text. */
    record Run(int code, String out, String err) {
        List<String> lines() {
            return out.lines().toList();
        }

        String line(String prefix) {
            return lines().stream().filter(l -> l.startsWith(prefix)).findFirst()
                    .orElseThrow(() -> new AssertionError("no line starting with '" + prefix + "' in:\n" + out));
        }

        boolean has(String prefix) {
            return lines().stream().anyMatch(l -> l.startsWith(prefix));
        }
    }

    static Run run(Doctor.Environment env, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = Doctor.run(args, env, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        Run run = new Run(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        System.out.println("---- doctor " + String.join(" ", args) + " (exit " + code + ")\n" + run.out());
        return run;
    }

    /** Every line is in the format, every WARN/FAIL is followed by its FIX, the last line is the RESULT. */
    static void wellFormed(Run run) {
        List<String> lines = run.lines();
        for (int i = 0; i < lines.size(); i++) {
            String l = lines.get(i);
            if (!LINE.matcher(l).matches()) {
                fail("line " + i + " is not 'VERDICT CHECK DETAIL': '" + l + "'");
            }
            if (l.startsWith("WARN") || l.startsWith("FAIL")) {
                String check = l.substring(7, 17).trim();
                assertTrue(i + 1 < lines.size() && lines.get(i + 1).startsWith("FIX    " + check),
                        "a FIX line for '" + check + "' follows: " + l);
            }
        }
        String last = lines.get(lines.size() - 1);
        assertTrue(last.startsWith("RESULT exit " + run.code() + " "), "last line is the RESULT with the exit code: " + last);
    }

    @Test
    void healthySoftRoceDeviceWithAUsableVerbsProviderIsReady() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A);
        host.providers.add(FakeHost.verbs(null));
        host.providers.add(TcpProvider.INSTANCE);
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_OK, run.code());
        assertTrue(run.line("INFO   device     rxe0:").contains("software device on veth0"), run.out());
        String port = run.line("OK     port       rxe0/1 ACTIVE (LinkUp)");
        assertTrue(port.contains("link_layer Ethernet, netdev veth0 mtu 1500 up, RoCE active_mtu 1024 (from netdev mtu 1500)"), port);
        assertTrue(run.has("INFO   gid        rxe0/1 gid 0 RoCE v2 fe80:0000:0000:0000:808e:1dff:feec:70a6 veth0"), run.out());
        assertTrue(run.has("INFO   gid        rxe0/1 gid 1 RoCE v2 ::ffff:192.168.77.1 veth0"), run.out());
        assertFalse(run.has("INFO   gid        rxe0/1 gid 2"), "unused GID entries are not listed");
        assertTrue(run.has("OK     roce       rxe0/1: RoCE v2 GIDs at index 0,1, IPv4 192.168.77.1 (gid 1)"), run.out());
        assertTrue(run.line("INFO   numa       rxe0:").contains("no NUMA node (rxe has none)"), run.out());
        assertTrue(run.has("OK     memlock    Max locked memory soft unlimited, hard unlimited >= pool capacity 256 MiB"), run.out());
        assertTrue(run.has("INFO   hugepages  HugePages_Total 16, HugePages_Free 12, Hugepagesize 2048 kB"), run.out());
        assertTrue(run.line("INFO   hugepages").contains("needs 128 free 2 MiB pages to be all on reserved huge pages: reserve"
                + " them with `sysctl vm.nr_hugepages=132`"), run.out());
        assertTrue(run.has("OK     drivers    2 user-space verbs drivers"), run.out());
        assertTrue(run.has("OK     library"), run.out());
        assertTrue(run.has("OK     provider   verbs: available"), run.out());
        assertTrue(run.has("OK     auto       auto picks verbs"), run.out());
        assertFalse(run.has("FIX"), "nothing to fix:\n" + run.out());
        assertEquals("RESULT exit 0     RDMA is usable", run.line("RESULT"));
    }

    @Test
    void pciNicShowsItsNumaNodeDriverAndRoceVersions() {
        host.pciRoce("mlx5_0", "ens1f0", 1, List.of(
                new String[] {"fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4d", "IB/RoCE v1"},
                new String[] {"fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4d", "RoCE v2"},
                new String[] {"0000:0000:0000:0000:0000:ffff:0a00:0005", "IB/RoCE v1"},
                new String[] {"0000:0000:0000:0000:0000:ffff:0a00:0005", "RoCE v2"}));
        host.providers.add(FakeHost.verbs(null));
        host.providers.add(TcpProvider.INSTANCE);
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_OK, run.code());
        assertTrue(run.line("INFO   device     mlx5_0:").contains("driver mlx5_core, fw 22.36.1010"), run.out());
        assertTrue(run.line("OK     port       mlx5_0/1 ACTIVE").contains("RoCE active_mtu 4096 (from netdev mtu 9000)"), run.out());
        assertTrue(run.has("INFO   gid        mlx5_0/1 gid 2 IB/RoCE v1 ::ffff:10.0.0.5 ens1f0"), run.out());
        assertTrue(run.has("OK     roce       mlx5_0/1: RoCE v2 GIDs at index 1,3, IPv4 10.0.0.5 (gid 3)"), run.out());
        assertTrue(run.line("INFO   numa       mlx5_0: NUMA node 1").contains("numactl --cpunodebind=1 --membind=1"), run.out());
    }

    @Test
    void aDownPortIsUnusableWithTheFixToBringTheLinkUp() {
        host.rxe("rxe0", "veth0", DOWN, DISABLED, "down", null);
        host.providers.add(FakeHost.verbs(new IllegalStateException("no RDMA port is ACTIVE (rxe0/1 DOWN)")));
        host.providers.add(TcpProvider.INSTANCE);
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_UNUSABLE, run.code());
        String port = run.line("FAIL   port       rxe0/1 DOWN (Disabled)");
        assertTrue(port.contains("netdev veth0 mtu 1500 down") && port.endsWith("no RDMA port is ACTIVE"), port);
        assertEquals("FIX    port       bring the link up: `ip link set veth0 up`, then check the cable and the switch port"
                + " (phys_state Disabled)", run.line("FIX    port"));
        assertTrue(run.has("WARN   roce       rxe0/1: RoCE v2 GIDs at index 0 but none with an IPv4 address"), run.out());
        assertTrue(run.line("FIX    roce").contains("ip addr add ADDR/PREFIX dev veth0"), run.out());
        assertTrue(run.has("INFO   provider   verbs: unavailable: no RDMA port is ACTIVE"), run.out());
        assertTrue(run.has("INFO   auto       auto picks tcp (verbs: no RDMA port is ACTIVE (rxe0/1 DOWN))"), run.out());
        assertTrue(run.line("RESULT").startsWith("RESULT exit 2     RDMA device present but unusable: port: rxe0/1 DOWN"),
                run.out());
    }

    @Test
    void oneDownPortBesideAnActiveOneIsAWarning() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A);
        host.rxe("rxe1", "veth1", DOWN, DISABLED, "down", null);
        host.providers.add(FakeHost.verbs(null));
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_OK, run.code());
        assertTrue(run.line("WARN   port       rxe1/1 DOWN").endsWith("another port is ACTIVE"), run.out());
        assertTrue(run.line("FIX    port").contains("ip link set veth1 up"), run.out());
    }

    @Test
    void noDeviceMeansTcpWithExitCodeOneAndAFix() {
        host.limits("8388608", "8388608");
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_NO_DEVICE, run.code());
        assertTrue(run.line("FAIL   device     ").contains("no RDMA device: tcp provider will be used"), run.out());
        assertTrue(run.line("FIX    device").contains("rdma link add rxe0 type rxe netdev"), run.out());
        // Without a device, what only RDMA needs is a warning and does not change the code.
        assertTrue(run.line("WARN   memlock    Max locked memory soft 8 MiB, hard 8 MiB < pool capacity 256 MiB")
                .contains("matters once an RDMA device is used"), run.out());
        assertTrue(run.line("INFO   auto").contains("auto picks tcp"), run.out());
        assertEquals("RESULT exit 1     no RDMA device: tcp provider will be used", run.line("RESULT"));
    }

    @Test
    void lowMemlockWithADeviceFailsWithTheFix() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A).limits("65536", "65536");
        host.providers.add(FakeHost.verbs(null));
        Run run = run(host.env(), "--pool-capacity", "1g");
        wellFormed(run);
        assertEquals(Doctor.EXIT_UNUSABLE, run.code());
        assertTrue(run.line("INFO   doctor").contains("pool capacity 1 GiB"), run.out());
        assertTrue(run.line("FAIL   memlock    Max locked memory soft 64 KiB, hard 64 KiB < pool capacity 1 GiB")
                .contains("registering the pool would fail"), run.out());
        String fix = run.line("FIX    memlock");
        assertTrue(fix.contains("raise memlock: `ulimit -l unlimited`") && fix.contains("LimitMEMLOCK=infinity")
                && fix.contains("/etc/security/limits.conf"), fix);
        assertTrue(run.line("RESULT").startsWith("RESULT exit 2     RDMA device present but unusable: memlock:"), run.out());
    }

    @Test
    void lowMemlockIsAWarningForAProcessWithCapIpcLock() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A).limits("8388608", "unlimited")
                .capEff(1L << ProcFacts.CAP_IPC_LOCK);
        host.providers.add(FakeHost.verbs(null));
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_OK, run.code());
        assertTrue(run.line("WARN   memlock    Max locked memory soft 8 MiB, hard unlimited < pool capacity 256 MiB")
                .contains("CAP_IPC_LOCK"), run.out());
    }

    @Test
    void memlockAtTheCapacityIsEnough() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A).limits(Long.toString(256L << 20), Long.toString(256L << 20));
        host.providers.add(FakeHost.verbs(null));
        Run run = run(host.env());
        assertEquals(Doctor.EXIT_OK, run.code());
        assertTrue(run.has("OK     memlock    Max locked memory soft 256 MiB, hard 256 MiB >= pool capacity 256 MiB"), run.out());
    }

    @Test
    void aLibraryThatDoesNotLoadNamesThePackages() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A);
        host.library = new UnsatisfiedLinkError(
                "libibverbs.so.1 not found: install Debian package ibverbs-providers / libibverbs1 (rdma-core)");
        host.providers.add(FakeHost.verbs(new IllegalStateException("the native library for DiSNI cannot be loaded")));
        host.providers.add(TcpProvider.INSTANCE);
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_UNUSABLE, run.code());
        assertTrue(run.line("FAIL   library    the native library does not load: libibverbs.so.1 not found").length() > 0);
        assertEquals("FIX    library    `apt-get install libibverbs1 ibverbs-providers` (rdma-core)", run.line("FIX    library"));
        assertTrue(run.line("FAIL   auto       auto picks tcp although an RDMA port is ACTIVE (verbs: the native library")
                .length() > 0, run.out());
        assertTrue(run.line("FIX    auto").contains("make verbs available"), run.out());
    }

    @Test
    void anActiveDeviceWithoutTheVerbsProviderInTheBuildIsUnusable() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A);
        host.verbsInBuild = false; // providers: tcp only, as in a build before the verbs provider
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_UNUSABLE, run.code());
        assertTrue(run.has("INFO   provider   verbs provider not in this build"), run.out());
        assertTrue(run.has("FAIL   auto       auto picks tcp although an RDMA port is ACTIVE (verbs provider not in this build)"),
                run.out());
        assertTrue(run.line("FIX    auto").contains("includes the verbs provider (io.rdmaplane.rdma.provider.verbs.VerbsProvider)"));
    }

    @Test
    void missingUserSpaceDriversAreUnusable() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A);
        host.write("etc/libibverbs.d/mlx5.driver", "driver mlx5");
        try {
            java.nio.file.Files.delete(root.resolve("etc/libibverbs.d/rxe.driver"));
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        host.providers.add(FakeHost.verbs(null));
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_UNUSABLE, run.code());
        assertTrue(run.line("FAIL   drivers").endsWith("rxe0 needs rxe"), run.out());
        assertTrue(run.line("FIX    drivers").contains("apt-get install ibverbs-providers"), run.out());
    }

    @Test
    void roceV1OnlyIsAWarning() {
        host.pciRoce("mlx5_0", "ens1f0", 0, List.<String[]>of(
                new String[] {"0000:0000:0000:0000:0000:ffff:0a00:0005", "IB/RoCE v1"}));
        host.providers.add(FakeHost.verbs(null));
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_OK, run.code());
        assertTrue(run.has("WARN   roce       mlx5_0/1: only RoCE v1 GIDs (1)"), run.out());
        assertTrue(run.line("FIX    roce").contains("cma_roce_mode -d mlx5_0 -p 1 -m 2"), run.out());
    }

    @Test
    void unreadableProcIsAWarningNotACrash() {
        host.rxe("rxe0", "veth0", ACTIVE, LINK_UP, "up", GID_A);
        host.write("proc/self/limits", "garbage");
        host.write("proc/meminfo", "MemTotal: 1 kB");
        host.providers.add(FakeHost.verbs(null));
        Run run = run(host.env());
        wellFormed(run);
        assertEquals(Doctor.EXIT_OK, run.code());
        assertTrue(run.has("WARN   memlock    cannot read \"Max locked memory\""), run.out());
        assertTrue(run.has("INFO   hugepages  no huge page figures"), run.out());
    }

    @Test
    void eachFailCarriesItsCodeAndTheHighestWins() {
        Report r = new Report().fail("device", "a", "fix a", 1).fail("memlock", "b", "fix b", 2).warn("roce", "c", "fix c");
        assertEquals(2, r.exitCode());
        assertEquals("memlock", r.deciding().get(0).check());
        assertEquals(0, new Report().ok("x", "y").warn("z", "w", "f").exitCode());
    }

    @Test
    void aProblemWithoutAFixIsRejected() {
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> new Report().warn("x", "y", " "));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> new Report.Line(Verdict.FAIL, "x", "y", "fix", 0));
    }

    @Test
    void libraryFixesNameWhatToInstall() {
        assertTrue(Doctor.libraryFix(new UnsatisfiedLinkError("librdmacm.so.1 not found")).contains("librdmacm1"));
        assertTrue(Doctor.libraryFix(new UnsatisfiedLinkError("libnl-3 not found")).contains("libnl-3-200"));
        assertTrue(Doctor.libraryFix(new UnsatisfiedLinkError("no bundled native library native/linux-ppc64le/libdisni.so"))
                .contains("built with its native library"));
        assertTrue(Doctor.libraryFix(new java.io.IOException("cannot extract DiSNI's native library: x"))
                .contains("verbs.native.tmpdir"));
        assertTrue(Doctor.libraryFix(new IllegalStateException("odd")).contains("apt-get install"));
    }
}

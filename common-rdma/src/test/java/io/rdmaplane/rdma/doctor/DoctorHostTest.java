package io.rdmaplane.rdma.doctor;

import static io.rdmaplane.rdma.doctor.DoctorChecksTest.run;
import static io.rdmaplane.rdma.doctor.DoctorChecksTest.wellFormed;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.doctor.DoctorChecksTest.Run;
import io.rdmaplane.rdma.provider.verbs.RdmaDevices;
import io.rdmaplane.rdma.testing.Skip;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The doctor on this machine as it is, and its command line. */
class DoctorHostTest {

    @Test
    void onAHostWithoutRdmaDeviceTheTcpProviderWillBeUsed() {
        Skip.unless(RdmaDevices.devices(Path.of("/")).isEmpty(), "this machine has RDMA devices (the VM run checks those)");
        Run run = run(Doctor.Environment.system());
        wellFormed(run);
        assertEquals(Doctor.EXIT_NO_DEVICE, run.code());
        assertTrue(run.line("FAIL   device     no RDMA device: tcp provider will be used").length() > 0, run.out());
        assertTrue(run.line("FIX    device").contains("rdma link add"), run.out());
        assertTrue(run.line("OK     provider   tcp: available").length() > 0, run.out());
        assertTrue(run.line("INFO   auto       auto picks tcp").length() > 0, run.out());
        assertTrue(run.has("OK     memlock") || run.has("WARN   memlock"), run.out());
        assertTrue(run.has("INFO   hugepages  HugePages_Total "), run.out());
        assertTrue(run.has("OK     library") || run.has("WARN   library"), run.out());
        assertEquals("RESULT exit 1     no RDMA device: tcp provider will be used", run.line("RESULT"));
    }

    @Test
    void theRealProviderListDecidesWhatIsSaidAboutVerbs() {
        Doctor.Environment env = Doctor.Environment.system();
        boolean listed = env.providers().stream().anyMatch(p -> p.name().equals("verbs"));
        Run run = run(env);
        if (!listed) {
            assertTrue(run.has("INFO   provider   verbs provider " + (env.verbsInBuild() ? "in this build but not in Providers.all()"
                    : "not in this build")), run.out());
        } else {
            assertTrue(run.has("OK     provider   verbs: available") || run.has("INFO   provider   verbs: unavailable: "), run.out());
        }
    }

    @Test
    void helpPrintsTheExitCodes() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int code = Doctor.run(new String[] {"--help"}, Doctor.Environment.system(), new PrintStream(out, true, StandardCharsets.UTF_8),
                System.err);
        assertEquals(0, code);
        String text = out.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("1  no RDMA device") && text.contains("3  the peer check failed"), text);
    }

    @Test
    void aBadOptionIsAUsageErrorThatNamesIt() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
        assertEquals(Doctor.EXIT_USAGE, Doctor.run(new String[] {"--pool-capacity", "lots"}, Doctor.Environment.system(),
                System.out, e));
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("--pool-capacity"), err.toString(StandardCharsets.UTF_8));
        assertEquals(Doctor.EXIT_USAGE, Doctor.run(new String[] {"--pool-capacity", "1m"}, Doctor.Environment.system(),
                System.out, e), "below pool.capacity's minimum of 8m");
        assertEquals(Doctor.EXIT_USAGE, Doctor.run(new String[] {"--frobnicate", "1"}, Doctor.Environment.system(), System.out, e));
        assertEquals(Doctor.EXIT_USAGE, Doctor.run(new String[] {"--peer"}, Doctor.Environment.system(), System.out, e));
        assertEquals(Doctor.EXIT_USAGE, Doctor.run(new String[] {"--serve", "--peer", "a:1"}, Doctor.Environment.system(),
                System.out, e));
    }

    @Test
    void optionsParse() {
        Doctor.Options o = Doctor.parse(new String[] {"--peer", "10.0.0.5:9000", "--pool-capacity=2g", "--timeout", "3s"});
        assertEquals("10.0.0.5", o.peer().getHostString());
        assertEquals(9000, o.peer().getPort());
        assertEquals(2L << 30, o.poolCapacity());
        assertEquals(3000, o.timeout().toMillis());
        assertEquals(256L << 20, Doctor.parse(new String[0]).poolCapacity(), "the default is pool.capacity's");
        assertEquals(7471, Doctor.hostPort("localhost").getPort());
        assertTrue(Doctor.hostPort("[::1]:8000").getAddress().isLoopbackAddress());
        assertEquals(8000, Doctor.hostPort("[::1]:8000").getPort());
        assertThrows(IllegalArgumentException.class, () -> Doctor.hostPort("host:0"));
        assertThrows(IllegalArgumentException.class, () -> Doctor.hostPort("host:x"));
    }
}

package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.testing.Skip;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Host-side checks of the verbs provider: they run everywhere, RDMA device or not. */
class VerbsProviderTest {

    @Test
    void isNamedVerbs() {
        assertEquals("verbs", VerbsProvider.INSTANCE.name());
    }

    @Test
    void withoutAnRdmaDeviceItIsUnavailableAndSaysHowToGetOne() {
        Skip.unless(RdmaDevices.ports().isEmpty(), "this machine has RDMA devices: " + RdmaDevices.ports());
        assertFalse(VerbsProvider.INSTANCE.isAvailable());
        Throwable cause = VerbsProvider.INSTANCE.unavailabilityCause();
        assertNotNull(cause);
        String message = cause.getMessage();
        assertTrue(message.startsWith("verbs provider unavailable: "), message);
        assertTrue(message.contains("rdma link add"), "names Soft-RoCE's way to get a device: " + message);
        assertTrue(message.contains("RDMA driver of the NIC"), "names the NIC driver: " + message);
        assertTrue(message.contains("no RDMA device"), message);
    }

    @Test
    void theProbeRunsOnceAndCreatingANodeWhileUnavailableNamesTheCause() {
        Skip.unless(!VerbsProvider.INSTANCE.isAvailable(), "verbs is available here");
        assertSame(VerbsProvider.INSTANCE.unavailabilityCause(), VerbsProvider.INSTANCE.unavailabilityCause());
        TransportException e = assertThrows(TransportException.class,
                () -> VerbsProvider.INSTANCE.createNode(NodeOptions.loopback()));
        assertEquals(Status.UNAVAILABLE, e.status());
        assertTrue(e.getMessage().contains(VerbsProvider.INSTANCE.unavailabilityCause().getMessage()), e.getMessage());
        assertSame(VerbsProvider.INSTANCE.unavailabilityCause(), e.getCause());
    }

    @Test
    void devicesAndTheirPortsAreReadFromSysfs(@TempDir Path sys) throws IOException {
        port(sys, "rxe0", 1, "4: ACTIVE", "Ethernet", "eth1");
        port(sys, "rxe1", 1, "1: DOWN", "Ethernet", null);
        port(sys, "mlx5_0", 1, "4: ACTIVE", "InfiniBand", null);
        List<RdmaDevices.Port> ports = RdmaDevices.ports(sys);
        assertEquals(3, ports.size());
        assertEquals("mlx5_0", ports.get(0).device());
        assertNull(ports.get(0).netdev());
        RdmaDevices.Port rxe0 = ports.get(1);
        assertEquals("rxe0", rxe0.device());
        assertEquals(1, rxe0.port());
        assertTrue(rxe0.active());
        assertEquals("eth1", rxe0.netdev());
        assertFalse(ports.get(2).active());
        assertTrue(RdmaDevices.ports(sys.resolve("missing")).isEmpty());
    }

    private static void port(Path sys, String device, int n, String state, String linkLayer, String netdev) throws IOException {
        Path port = Files.createDirectories(sys.resolve(device).resolve("ports").resolve(Integer.toString(n)));
        Files.writeString(port.resolve("state"), state + "\n");
        Files.writeString(port.resolve("link_layer"), linkLayer + "\n");
        if (netdev != null) {
            Path ndevs = Files.createDirectories(port.resolve("gid_attrs").resolve("ndevs"));
            Files.writeString(ndevs.resolve("0"), netdev + "\n");
        }
    }
}

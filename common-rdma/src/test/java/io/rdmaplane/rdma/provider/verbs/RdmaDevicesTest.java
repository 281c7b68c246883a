package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The sysfs reader against fake trees laid out as the kernel does: a port's {@code state} is
 * {@code "<number>: <name>"} (drivers/infiniband/core/sysfs.c, state_show), enum ib_port_state
 * 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.
 */
class RdmaDevicesTest {

    @Test
    void devicesAndTheirPortsAreReadFromSysfs(@TempDir Path root) throws IOException {
        port(root, "rxe0", 1, "4: ACTIVE", "Ethernet", "eth1");
        port(root, "rxe1", 1, "1: DOWN", "Ethernet", null);
        port(root, "mlx5_0", 1, "4: ACTIVE", "InfiniBand", null);
        List<RdmaDevices.Port> ports = RdmaDevices.ports(root);
        assertEquals(3, ports.size());
        assertEquals("mlx5_0", ports.get(0).device());
        assertNull(ports.get(0).netdev());
        RdmaDevices.Port rxe0 = ports.get(1);
        assertEquals("rxe0", rxe0.device());
        assertEquals(1, rxe0.number());
        assertTrue(rxe0.active());
        assertEquals("eth1", rxe0.netdev());
        assertFalse(ports.get(2).active());
        assertTrue(RdmaDevices.ports(root.resolve("missing")).isEmpty());
    }

    @Test
    void onlyStateFourIsActive(@TempDir Path root) throws IOException {
        port(root, "dev1", 1, "1: DOWN", "InfiniBand", null);
        port(root, "dev2", 1, "2: INIT", "InfiniBand", null);
        port(root, "dev3", 1, "3: ARMED", "InfiniBand", null);
        port(root, "dev4", 1, "4: ACTIVE", "InfiniBand", null);
        port(root, "dev5", 1, "5: ACTIVE_DEFER", "InfiniBand", null);
        List<RdmaDevices.Port> ports = RdmaDevices.ports(root);
        assertEquals(List.of("DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"),
                ports.stream().map(RdmaDevices.Port::state).toList());
        assertEquals(List.of(1, 2, 3, 4, 5), ports.stream().map(RdmaDevices.Port::stateCode).toList());
        assertEquals(List.of(false, false, false, true, false), ports.stream().map(RdmaDevices.Port::active).toList());
    }

    @Test
    void oddlyWrittenStatesAreReadByTheirNumberOrElseTheirName(@TempDir Path root) throws IOException {
        port(root, "a-no-space", 1, "4:ACTIVE", "Ethernet", null);
        port(root, "b-padded", 1, "  4 :  ACTIVE  ", "Ethernet", null);
        port(root, "c-name-only", 1, "ACTIVE", "Ethernet", null);
        port(root, "d-lower-case", 1, "active", "Ethernet", null);
        port(root, "e-number-only", 1, "4", "Ethernet", null);
        port(root, "f-number-decides", 1, "1: ACTIVE", "Ethernet", null);
        port(root, "g-unknown", 1, "7: UNKNOWN", "Ethernet", null);
        port(root, "h-garbage", 1, "up and running", "Ethernet", null);
        port(root, "i-empty", 1, "", "Ethernet", null);
        List<RdmaDevices.Port> ports = RdmaDevices.ports(root);
        assertEquals(List.of(true, true, true, true, true, false, false, false, false),
                ports.stream().map(RdmaDevices.Port::active).toList(), ports::toString);
        assertEquals("ACTIVE", ports.get(1).state());
        assertEquals("ACTIVE", ports.get(3).state());
        assertEquals(-1, ports.get(2).stateCode());
        assertNull(ports.get(8).state());
    }

    @Test
    void aPortWithoutAStateFileIsNotActive(@TempDir Path root) throws IOException {
        Path port = Files.createDirectories(root.resolve(RdmaDevices.CLASS_DIR).resolve("rxe0/ports/1"));
        Files.writeString(port.resolve("link_layer"), "Ethernet\n");
        RdmaDevices.Port only = RdmaDevices.ports(root).get(0);
        assertNull(only.state());
        assertEquals(-1, only.stateCode());
        assertFalse(only.active());
        assertEquals("rxe0/1 (state unknown, Ethernet)", only.toString());
    }

    @Test
    void aSoftwareDevicesNetdevIsItsParentWhenNoGidNamesOne(@TempDir Path root) throws IOException {
        port(root, "rxe0", 1, "4: ACTIVE", "Ethernet", null);
        Files.writeString(root.resolve(RdmaDevices.CLASS_DIR).resolve("rxe0/parent"), "veth0\n");
        RdmaDevices.Device rxe0 = RdmaDevices.devices(root).get(0);
        assertTrue(rxe0.software());
        assertEquals("veth0", rxe0.ports().get(0).netdev());
        assertEquals("rxe0/1 (ACTIVE, Ethernet, netdev veth0)", rxe0.ports().get(0).toString());
    }

    @Test
    void roceMtuFollowsTheKernelsRule() {
        assertEquals(1024, RdmaDevices.roceMtu(1500));
        assertEquals(4096, RdmaDevices.roceMtu(9000));
        assertEquals(4096, RdmaDevices.roceMtu(4200));
        assertEquals(2048, RdmaDevices.roceMtu(4000));
        assertEquals(256, RdmaDevices.roceMtu(400));
        assertEquals(-1, RdmaDevices.roceMtu(300));
    }

    @Test
    void theNumaNodeOfTheDeviceServingAnAddress(@TempDir Path root) throws IOException {
        port(root, "mlx5_0", 1, "4: ACTIVE", "Ethernet", "eth2");
        port(root, "rxe0", 1, "4: ACTIVE", "Ethernet", "eth1");
        Path mlx = root.resolve(RdmaDevices.CLASS_DIR).resolve("mlx5_0");
        Files.createDirectories(mlx.resolve("device"));
        Files.writeString(mlx.resolve("device/numa_node"), "1\n");
        Files.writeString(mlx.resolve("ports/1/gids/1"), "0000:0000:0000:0000:0000:ffff:0a00:0005\n");
        Files.writeString(root.resolve(RdmaDevices.CLASS_DIR).resolve("rxe0/ports/1/gids/1"),
                "0000:0000:0000:0000:0000:ffff:c0a8:4d01\n");
        assertEquals(1, RdmaDevices.numaNodeServing(root, "10.0.0.5"));
        assertEquals(-1, RdmaDevices.numaNodeServing(root, "192.168.77.1"), "a software device has no node");
        assertEquals(-1, RdmaDevices.numaNodeServing(root, "10.9.9.9"), "no device serves it");
        Files.writeString(mlx.resolve("device/numa_node"), "-1\n");
        assertEquals(-1, RdmaDevices.numaNodeServing(root, "10.0.0.5"), "the firmware does not say");
    }

    /** A port as the kernel lays it out; a netdev goes to GID 0 (a link-local GID, as every RoCE port has). */
    private static void port(Path root, String device, int n, String state, String linkLayer, String netdev) throws IOException {
        Path port = Files.createDirectories(root.resolve(RdmaDevices.CLASS_DIR).resolve(device).resolve("ports")
                .resolve(Integer.toString(n)));
        Files.writeString(port.resolve("state"), state + "\n");
        Files.writeString(port.resolve("link_layer"), linkLayer + "\n");
        if (netdev != null) {
            Files.createDirectories(port.resolve("gids"));
            Files.writeString(port.resolve("gids/0"), "fe80:0000:0000:0000:808e:1dff:feec:70a6\n");
            Path ndevs = Files.createDirectories(port.resolve("gid_attrs").resolve("ndevs"));
            Files.writeString(ndevs.resolve("0"), netdev + "\n");
        }
    }
}

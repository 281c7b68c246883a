package io.rdmaplane.rdma.provider.verbs;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The RDMA devices the kernel exposes, read from sysfs as libibverbs itself finds them
 * ({@code /sys/class/infiniband/<device>/ports/<n>/state}). Pure Java: it works without the
 * native library, so the provider can say "no device" even where libdisni cannot load.
 */
public final class RdmaDevices {
    static final Path DEFAULT_ROOT = Paths.get("/sys/class/infiniband");

    /** One port of a device; {@code netdev} is the Ethernet device under a RoCE port, or null. */
    public record Port(String device, int port, String state, String linkLayer, String netdev) {
        public boolean active() {
            return state.toUpperCase(Locale.ROOT).contains("ACTIVE");
        }

        @Override
        public String toString() {
            return device + "/" + port + " (" + state + (linkLayer.isEmpty() ? "" : ", " + linkLayer)
                    + (netdev == null ? "" : ", netdev " + netdev) + ")";
        }
    }

    private RdmaDevices() {
    }

    /** Every port of every RDMA device, or an empty list where there are none (or no sysfs). */
    public static List<Port> ports() {
        return ports(DEFAULT_ROOT);
    }

    static List<Port> ports(Path root) {
        List<Port> ports = new ArrayList<>();
        if (!Files.isDirectory(root)) {
            return ports;
        }
        try (DirectoryStream<Path> devices = Files.newDirectoryStream(root)) {
            for (Path device : devices) {
                Path portsDir = device.resolve("ports");
                if (!Files.isDirectory(portsDir)) {
                    continue;
                }
                try (DirectoryStream<Path> portDirs = Files.newDirectoryStream(portsDir)) {
                    for (Path port : portDirs) {
                        int number;
                        try {
                            number = Integer.parseInt(port.getFileName().toString());
                        } catch (NumberFormatException e) {
                            continue;
                        }
                        ports.add(new Port(device.getFileName().toString(), number, read(port.resolve("state")),
                                read(port.resolve("link_layer")), netdev(port)));
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            // unreadable sysfs: treat as no device; the caller's message says where it looked
        }
        ports.sort((a, b) -> a.device().equals(b.device()) ? Integer.compare(a.port(), b.port())
                : a.device().compareTo(b.device()));
        return ports;
    }

    /** The netdev of GID 0 of a RoCE port (kernel 5.x+: ports/N/gid_attrs/ndevs/0). */
    private static String netdev(Path port) {
        String name = read(port.resolve("gid_attrs").resolve("ndevs").resolve("0"));
        return name.isEmpty() ? null : name;
    }

    private static String read(Path file) {
        try {
            return new String(Files.readAllBytes(file), StandardCharsets.UTF_8).trim();
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }

    /** What to do on a machine without a usable device: the two usual ways to get one. */
    public static String howToGetOne() {
        return "for Soft-RoCE run `rdma link add rxe0 type rxe netdev <ethernet device>` (module rdma_rxe), "
                + "or load the RDMA driver of the NIC (e.g. mlx5_ib) and bring its port up";
    }
}

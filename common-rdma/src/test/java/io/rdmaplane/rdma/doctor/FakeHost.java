package io.rdmaplane.rdma.doctor;

import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.provider.verbs.RdmaDevices;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A fake machine for the doctor: a {@code sys/} and {@code proc/} tree in a temporary folder
 * (laid out as the kernel does, e.g. rxe's as read in the Soft-RoCE VM) and the providers,
 * native-library answer and build contents the doctor is told about.
 */
final class FakeHost {
    static final String EMPTY_GID = RdmaDevices.EMPTY_GID;
    final Path root;
    final List<TransportProvider> providers = new ArrayList<>();
    Throwable library;
    boolean verbsInBuild;

    FakeHost(Path root) {
        this.root = root;
        write("proc/sys/kernel/hostname", "fakehost");
        limits("unlimited", "unlimited");
        capEff(0);
        write("proc/meminfo", """
                MemTotal:       24000000 kB
                HugePages_Total:      16
                HugePages_Free:       12
                HugePages_Rsvd:        0
                Hugepagesize:       2048 kB
                """);
        write("etc/libibverbs.d/mlx5.driver", "driver mlx5");
        write("etc/libibverbs.d/rxe.driver", "driver rxe");
    }

    FakeHost limits(String soft, String hard) {
        write("proc/self/limits", String.format("""
                Limit                     Soft Limit           Hard Limit           Units    \s
                Max cpu time              unlimited            unlimited            seconds  \s
                Max locked memory         %-20s %-20s bytes    \s
                Max address space         unlimited            unlimited            bytes    \s
                """, soft, hard));
        return this;
    }

    FakeHost capEff(long caps) {
        write("proc/self/status", String.format("Name:\tjava\nCapInh:\t0000000000000000\nCapEff:\t%016x\n", caps));
        return this;
    }

    /** A Soft-RoCE device as Debian's 6.1 kernel shows it: no device link, parent = its netdev, RoCE v2 GIDs only. */
    FakeHost rxe(String name, String netdev, String state, String physState, String operstate, String ipv4Gid) {
        Path d = Path.of("sys/class/infiniband", name);
        write(d.resolve("node_type"), "1: CA");
        write(d.resolve("node_desc"), "rxe");
        write(d.resolve("fw_ver"), "");
        write(d.resolve("parent"), netdev);
        Path p = d.resolve("ports/1");
        write(p.resolve("state"), state);
        write(p.resolve("phys_state"), physState);
        write(p.resolve("link_layer"), "Ethernet");
        write(p.resolve("rate"), "10 Gb/sec (1X FDR10)");
        gid(p, 0, "fe80:0000:0000:0000:808e:1dff:feec:70a6", "RoCE v2", netdev);
        if (ipv4Gid != null) {
            gid(p, 1, ipv4Gid, "RoCE v2", netdev);
        }
        for (int i = ipv4Gid != null ? 2 : 1; i < 8; i++) {
            write(p.resolve("gids/" + i), EMPTY_GID); // types/ndevs of unused entries do not read (EINVAL)
        }
        write(Path.of("sys/class/net", netdev, "mtu"), "1500");
        write(Path.of("sys/class/net", netdev, "operstate"), operstate);
        return this;
    }

    /** A PCI RoCE NIC: device link with numa_node and a driver. */
    FakeHost pciRoce(String name, String netdev, int numaNode, List<String[]> gids) {
        Path d = Path.of("sys/class/infiniband", name);
        write(d.resolve("node_type"), "1: CA");
        write(d.resolve("fw_ver"), "22.36.1010");
        write(d.resolve("device/numa_node"), Integer.toString(numaNode));
        try {
            Path driver = root.resolve("sys/bus/pci/drivers/mlx5_core");
            Files.createDirectories(driver);
            Files.createSymbolicLink(root.resolve(d).resolve("device/driver"), driver);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Path p = d.resolve("ports/1");
        write(p.resolve("state"), "4: ACTIVE");
        write(p.resolve("phys_state"), "5: LinkUp");
        write(p.resolve("link_layer"), "Ethernet");
        int i = 0;
        for (String[] g : gids) {
            gid(p, i++, g[0], g[1], netdev);
        }
        write(Path.of("sys/class/net", netdev, "mtu"), "9000");
        write(Path.of("sys/class/net", netdev, "operstate"), "up");
        return this;
    }

    private void gid(Path port, int index, String gid, String type, String ndev) {
        write(port.resolve("gids/" + index), gid);
        write(port.resolve("gid_attrs/types/" + index), type);
        write(port.resolve("gid_attrs/ndevs/" + index), ndev);
    }

    FakeHost write(String relative, String text) {
        return write(Path.of(relative), text);
    }

    FakeHost write(Path relative, String text) {
        try {
            Path f = root.resolve(relative);
            Files.createDirectories(f.getParent());
            Files.writeString(f, text + "\n", StandardCharsets.UTF_8);
            return this;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    Doctor.Environment env() {
        List<TransportProvider> list = List.copyOf(providers.isEmpty() ? List.of(TcpProvider.INSTANCE) : providers);
        return new Doctor.Environment(root, list, name -> select(list, name), () -> library, verbsInBuild);
    }

    /** Providers.select's rule over another list: auto = the first available one. */
    static TransportProvider select(List<TransportProvider> list, String name) throws TransportException {
        for (TransportProvider p : list) {
            if ((name.equals("auto") && p.isAvailable()) || p.name().equals(name)) {
                if (!p.isAvailable()) {
                    throw new TransportException(Status.UNAVAILABLE, "provider '" + name + "' is unavailable");
                }
                return p;
            }
        }
        throw new TransportException(Status.UNAVAILABLE, "no provider '" + name + "'");
    }

    /** A stand-in for the verbs provider: available or not, as told; it moves bytes like tcp. */
    static TransportProvider verbs(Throwable cause) {
        return new TransportProvider() {
            @Override
            public String name() {
                return "verbs";
            }

            @Override
            public boolean isAvailable() {
                return cause == null;
            }

            @Override
            public Throwable unavailabilityCause() {
                return cause;
            }

            @Override
            public Node createNode(NodeOptions options) throws TransportException {
                return TcpProvider.INSTANCE.createNode(options);
            }
        };
    }
}

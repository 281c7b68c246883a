package io.rdmaplane.rdma.doctor;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * The RDMA devices the kernel shows under {@code <root>/sys/class/infiniband}: ports with
 * their state, link layer and GID table (type and network device of every GID in use), the
 * network device behind each port, and the NUMA node of each device. Read-only, never
 * throws: what cannot be read is null.
 */
final class RdmaSysfs {
    /** An all-zero GID: an unused entry of the table (its type and ndev cannot even be read). */
    static final String EMPTY_GID = "0000:0000:0000:0000:0000:0000:0000:0000";
    /** The GID type of RoCE v2 in {@code gid_attrs/types/<i>}. */
    static final String ROCE_V2 = "RoCE v2";
    /**
     * Bytes of the IB headers a RoCE packet adds inside the Ethernet MTU (GRH, UDP, BTH, XRC
     * ext, AtomicETH, ICRC): the kernel's {@code iboe_get_mtu} and rxe subtract the same.
     */
    static final int ROCE_HEADER_BYTES = 40 + 8 + 12 + 4 + 28 + 4;

    private RdmaSysfs() {
    }

    record Gid(int index, String raw, String type, String ndev) {
        boolean roceV2() {
            return ROCE_V2.equals(type);
        }

        /** The IPv4 address of an IPv4-mapped GID ({@code ::ffff:a.b.c.d}), else null. */
        String ipv4() {
            String[] g = raw.split(":");
            if (g.length != 8) {
                return null;
            }
            for (int i = 0; i < 5; i++) {
                if (!g[i].equals("0000")) {
                    return null;
                }
            }
            if (!g[5].equalsIgnoreCase("ffff")) {
                return null;
            }
            try {
                int hi = Integer.parseInt(g[6], 16);
                int lo = Integer.parseInt(g[7], 16);
                return (hi >> 8) + "." + (hi & 0xff) + "." + (lo >> 8) + "." + (lo & 0xff);
            } catch (NumberFormatException e) {
                return null;
            }
        }

        /** {@code ::ffff:a.b.c.d} for IPv4-mapped GIDs, else the kernel's text. */
        String display() {
            String v4 = ipv4();
            return v4 != null ? "::ffff:" + v4 : raw;
        }
    }

    /**
     * One port.
     *
     * @param state      e.g. {@code ACTIVE} (the text after "4: ")
     * @param physState  e.g. {@code LinkUp}
     * @param netdev     the network device behind the port (from the GIDs' ndevs, or the
     *                   device's {@code parent} for rxe/siw), or null
     * @param netdevMtu  its MTU, or -1
     * @param netdevOper its {@code operstate}, or null
     */
    record Port(String device, int number, String state, String physState, String linkLayer, String rate, List<Gid> gids,
                String netdev, int netdevMtu, String netdevOper) {
        boolean active() {
            return "ACTIVE".equals(state);
        }

        boolean ethernet() {
            return "Ethernet".equalsIgnoreCase(linkLayer);
        }

        String id() {
            return device + "/" + number;
        }

        /** The active MTU RoCE gets from the netdev MTU (the kernel's rule), or -1 when unknown. */
        int roceMtu() {
            return RdmaSysfs.roceMtu(netdevMtu);
        }
    }

    /**
     * One device.
     *
     * @param hasBackingDevice false for software devices (rxe, siw), which have no {@code device} link
     * @param numaNode         the text of {@code device/numa_node}, or null
     * @param parent           the {@code parent} attribute (rxe/siw: the netdev), or null
     */
    record Device(String name, String nodeType, String fwVer, String nodeDesc, String parent, String driver,
                  boolean hasBackingDevice, String numaNode, List<Port> ports) {
        boolean software() {
            return !hasBackingDevice;
        }
    }

    static Path classDir(Path root) {
        return root.resolve("sys/class/infiniband");
    }

    /** The devices, sorted by name; empty when there is none (or no infiniband class at all). */
    static List<Device> devices(Path root) {
        Path dir = classDir(root);
        List<Device> result = new ArrayList<>();
        for (Path dev : list(dir)) {
            result.add(device(root, dev));
        }
        return result;
    }

    private static Device device(Path root, Path dev) {
        String name = dev.getFileName().toString();
        Path backing = dev.resolve("device");
        boolean hasBacking = Files.isDirectory(backing);
        String driver = null;
        if (hasBacking) {
            try {
                Path link = backing.resolve("driver");
                if (Files.exists(link)) {
                    driver = link.toRealPath().getFileName().toString();
                }
            } catch (IOException | RuntimeException e) {
                driver = null;
            }
        }
        String parent = read(dev.resolve("parent"));
        List<Port> ports = new ArrayList<>();
        for (Path port : list(dev.resolve("ports"))) {
            int number;
            try {
                number = Integer.parseInt(port.getFileName().toString());
            } catch (NumberFormatException e) {
                continue;
            }
            ports.add(port(root, name, number, port, parent));
        }
        ports.sort(Comparator.comparingInt(Port::number));
        return new Device(name, read(dev.resolve("node_type")), read(dev.resolve("fw_ver")), read(dev.resolve("node_desc")),
                parent, driver, hasBacking, hasBacking ? read(backing.resolve("numa_node")) : null, List.copyOf(ports));
    }

    private static Port port(Path root, String device, int number, Path port, String parent) {
        List<Gid> gids = new ArrayList<>();
        Path gidDir = port.resolve("gids");
        List<Path> entries = new ArrayList<>(list(gidDir));
        entries.sort(Comparator.comparingInt(RdmaSysfs::indexOf));
        for (Path entry : entries) {
            int index = indexOf(entry);
            String raw = read(entry);
            if (index < 0 || raw == null || raw.equals(EMPTY_GID)) {
                continue;
            }
            String i = Integer.toString(index);
            gids.add(new Gid(index, raw, read(port.resolve("gid_attrs/types").resolve(i)),
                    read(port.resolve("gid_attrs/ndevs").resolve(i))));
        }
        String netdev = gids.stream().map(Gid::ndev).filter(n -> n != null && !n.isEmpty()).findFirst().orElse(parent);
        int mtu = -1;
        String oper = null;
        if (netdev != null && !netdev.isEmpty()) {
            Path net = root.resolve("sys/class/net").resolve(netdev);
            String m = read(net.resolve("mtu"));
            try {
                mtu = m == null ? -1 : Integer.parseInt(m);
            } catch (NumberFormatException e) {
                mtu = -1;
            }
            oper = read(net.resolve("operstate"));
        }
        return new Port(device, number, after(read(port.resolve("state"))), after(read(port.resolve("phys_state"))),
                read(port.resolve("link_layer")), read(port.resolve("rate")), List.copyOf(gids), netdev, mtu, oper);
    }

    /** The active MTU RoCE uses over a netdev of this MTU: 4096, 2048, 1024, 512, 256, or -1. */
    static int roceMtu(int netdevMtu) {
        if (netdevMtu <= 0) {
            return -1;
        }
        int payload = netdevMtu - ROCE_HEADER_BYTES;
        for (int mtu = 4096; mtu >= 256; mtu /= 2) {
            if (payload >= mtu) {
                return mtu;
            }
        }
        return -1;
    }

    /** "4: ACTIVE" to "ACTIVE"; null stays null. */
    static String after(String text) {
        if (text == null) {
            return null;
        }
        int colon = text.indexOf(':');
        return colon >= 0 ? text.substring(colon + 1).trim() : text.trim();
    }

    private static int indexOf(Path entry) {
        try {
            return Integer.parseInt(entry.getFileName().toString());
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** The file's text, trimmed; null if it does not exist or cannot be read (sysfs answers EINVAL for unused GIDs). */
    static String read(Path file) {
        try {
            return new String(Files.readAllBytes(file), StandardCharsets.UTF_8).trim();
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** The entries of a folder sorted by name; empty if it does not exist. */
    static List<Path> list(Path dir) {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.sorted(Comparator.comparing(p -> p.getFileName().toString().toLowerCase(Locale.ROOT))).toList();
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
    }
}

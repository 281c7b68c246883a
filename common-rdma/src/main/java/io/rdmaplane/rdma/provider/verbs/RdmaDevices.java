package io.rdmaplane.rdma.provider.verbs;

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
 * The RDMA devices the kernel shows under {@code <root>/sys/class/infiniband}, where
 * libibverbs itself finds them: each device's ports with their state, link layer and GID table
 * (type and network device of every GID in use), the network device behind each port, and the
 * NUMA node of each device. Pure Java and read-only: it works without the native library (so
 * the provider can say "no device" even where libdisni cannot load) and never throws; what
 * cannot be read is null. The verbs provider's probe and the doctor both read devices here.
 */
public final class RdmaDevices {
    /** Where the kernel lists the devices, under the filesystem root. */
    public static final Path CLASS_DIR = Path.of("sys/class/infiniband");
    /** An all-zero GID: an unused entry of the table (its type and ndev cannot even be read). */
    public static final String EMPTY_GID = "0000:0000:0000:0000:0000:0000:0000:0000";
    /** The GID type of RoCE v2 in {@code gid_attrs/types/<i>}. */
    public static final String ROCE_V2 = "RoCE v2";
    /**
     * Bytes of the IB headers a RoCE packet adds inside the Ethernet MTU (GRH, UDP, BTH, XRC
     * ext, AtomicETH, ICRC): the kernel's {@code iboe_get_mtu} and rxe subtract the same.
     */
    static final int ROCE_HEADER_BYTES = 40 + 8 + 12 + 4 + 28 + 4;
    /** IB_PORT_ACTIVE of the kernel's enum ib_port_state (rdma-core's IBV_PORT_ACTIVE). */
    static final int PORT_ACTIVE = 4;

    private RdmaDevices() {
    }

    /** One entry of a port's GID table. */
    public record Gid(int index, String raw, String type, String ndev) {
        public boolean roceV2() {
            return ROCE_V2.equals(type);
        }

        /** The IPv4 address of an IPv4-mapped GID ({@code ::ffff:a.b.c.d}), else null. */
        public String ipv4() {
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
        public String display() {
            String v4 = ipv4();
            return v4 != null ? "::ffff:" + v4 : raw;
        }
    }

    /**
     * One port.
     *
     * @param state      the state's name, e.g. {@code ACTIVE} (the kernel writes {@code 4: ACTIVE}), or null
     * @param stateCode  the state's number (enum ib_port_state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE,
     *                   5 ACTIVE_DEFER), or -1 when the file has none
     * @param physState  e.g. {@code LinkUp}, or null
     * @param netdev     the network device behind the port (from the GIDs' ndevs, or the
     *                   device's {@code parent} for rxe/siw), or null
     * @param netdevMtu  its MTU, or -1
     * @param netdevOper its {@code operstate}, or null
     */
    public record Port(String device, int number, String state, int stateCode, String physState, String linkLayer,
                       String rate, List<Gid> gids, String netdev, int netdevMtu, String netdevOper) {
        /**
         * Whether the port can carry traffic: state 4, ACTIVE. The kernel's number decides
         * ({@code 5: ACTIVE_DEFER}, a port on its way down, is not active); a state without a
         * number counts when its name is ACTIVE.
         */
        public boolean active() {
            return stateCode >= 0 ? stateCode == PORT_ACTIVE : "ACTIVE".equals(state);
        }

        public boolean ethernet() {
            return "Ethernet".equalsIgnoreCase(linkLayer);
        }

        public String id() {
            return device + "/" + number;
        }

        /** The active MTU RoCE gets from the netdev MTU (the kernel's rule), or -1 when unknown. */
        public int roceMtu() {
            return RdmaDevices.roceMtu(netdevMtu);
        }

        @Override
        public String toString() {
            return id() + " (" + (state != null ? state : "state unknown") + (linkLayer == null ? "" : ", " + linkLayer)
                    + (netdev == null ? "" : ", netdev " + netdev) + ")";
        }
    }

    /**
     * One device.
     *
     * @param nodeType         e.g. {@code CA} (the kernel writes {@code 1: CA}), or null
     * @param hasBackingDevice false for software devices (rxe, siw), which have no {@code device} link
     * @param numaNode         the text of {@code device/numa_node}, or null
     * @param parent           the {@code parent} attribute (rxe/siw: the netdev), or null
     */
    public record Device(String name, String nodeType, String fwVer, String nodeDesc, String parent, String driver,
                         boolean hasBackingDevice, String numaNode, List<Port> ports) {
        public boolean software() {
            return !hasBackingDevice;
        }
    }

    /**
     * The NUMA node of the device one of whose GIDs holds {@code ipv4} (sysfs {@code device/numa_node}), where
     * the memory it registers should live; -1 when no device has it or the device reports no node (software
     * devices, one-node machines).
     */
    public static int numaNodeServing(Path root, String ipv4) {
        for (Device d : devices(root)) {
            boolean serves = d.ports().stream().flatMap(p -> p.gids().stream()).anyMatch(g -> ipv4.equals(g.ipv4()));
            if (serves) {
                try {
                    return d.numaNode() == null ? -1 : Math.max(-1, Integer.parseInt(d.numaNode().trim()));
                } catch (NumberFormatException e) {
                    return -1;
                }
            }
        }
        return -1;
    }

    /** The devices of this machine. */
    public static List<Device> devices() {
        return devices(Path.of("/"));
    }

    /** The devices under {@code root} (a filesystem root), sorted by name; empty when there is none. */
    public static List<Device> devices(Path root) {
        List<Device> result = new ArrayList<>();
        for (Path dev : list(classDir(root))) {
            result.add(device(root, dev));
        }
        return result;
    }

    /** Every port of every device of this machine, in device order. */
    public static List<Port> ports() {
        return ports(Path.of("/"));
    }

    static List<Port> ports(Path root) {
        return devices(root).stream().flatMap(d -> d.ports().stream()).toList();
    }

    public static Path classDir(Path root) {
        return root.resolve(CLASS_DIR);
    }

    /** What to do on a machine without a usable device: the two usual ways to get one. */
    public static String howToGetOne() {
        return "for Soft-RoCE run `rdma link add rxe0 type rxe netdev <ethernet device>` (module rdma_rxe), "
                + "or load the RDMA driver of the NIC (e.g. mlx5_ib) and bring its port up";
    }

    /** The active MTU RoCE uses over a netdev of this MTU: 4096, 2048, 1024, 512, 256, or -1. */
    public static int roceMtu(int netdevMtu) {
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
        return new Device(name, after(read(dev.resolve("node_type"))), read(dev.resolve("fw_ver")),
                read(dev.resolve("node_desc")), parent, driver, hasBacking, hasBacking ? read(backing.resolve("numa_node")) : null,
                List.copyOf(ports));
    }

    private static Port port(Path root, String device, int number, Path port, String parent) {
        List<Gid> gids = new ArrayList<>();
        List<Path> entries = new ArrayList<>(list(port.resolve("gids")));
        entries.sort(Comparator.comparingInt(RdmaDevices::indexOf));
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
        if (netdev != null && netdev.isEmpty()) {
            netdev = null;
        }
        int mtu = -1;
        String oper = null;
        if (netdev != null) {
            Path net = root.resolve("sys/class/net").resolve(netdev);
            String m = read(net.resolve("mtu"));
            try {
                mtu = m == null ? -1 : Integer.parseInt(m);
            } catch (NumberFormatException e) {
                mtu = -1;
            }
            oper = read(net.resolve("operstate"));
        }
        String stateText = read(port.resolve("state"));
        return new Port(device, number, stateName(stateText), stateCode(stateText), after(read(port.resolve("phys_state"))),
                read(port.resolve("link_layer")), read(port.resolve("rate")), List.copyOf(gids), netdev, mtu, oper);
    }

    /** The number of a {@code "<number>: <name>"} attribute, or -1 when there is none. */
    static int stateCode(String text) {
        if (text == null) {
            return -1;
        }
        int colon = text.indexOf(':');
        String number = (colon >= 0 ? text.substring(0, colon) : text).trim();
        try {
            return Integer.parseInt(number);
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** The name of a {@code "<number>: <name>"} state in upper case ("ACTIVE"); a bare number stays as it is. */
    static String stateName(String text) {
        String name = after(text);
        return name == null || name.isEmpty() ? (text == null || text.isBlank() ? null : text.trim())
                : name.toUpperCase(Locale.ROOT);
    }

    /** "4: ACTIVE" to "ACTIVE", text without a colon trimmed; null stays null. */
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

    /**
     * The file's text, trimmed; null if it does not exist or cannot be read (sysfs answers EINVAL for
     * unused GIDs). The doctor reads the host's {@code proc/} and {@code etc/} files with it too.
     */
    public static String read(Path file) {
        try {
            return new String(Files.readAllBytes(file), StandardCharsets.UTF_8).trim();
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** The entries of a folder sorted by name (case-insensitive); empty if it does not exist or cannot be read. */
    public static List<Path> list(Path dir) {
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

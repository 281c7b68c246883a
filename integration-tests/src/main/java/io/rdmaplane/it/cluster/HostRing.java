package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The hosts of the ring: one network namespace per host ({@code ring-h0}, {@code ring-h1}, ...), each with
 * one address of {@value #SUBNET}0/24 on a veth pair whose other end is a port of the bridge {@code ring-br}
 * in the root namespace (the switch). The addresses exist only inside the namespaces, so rings with other name
 * prefixes run side by side. A link fault is the bridge port going down ({@code ip link set ring-vN down}), as a
 * switch port would. Whatever an earlier run of the same prefix left (killed with -9) is removed first;
 * {@link #close()} (also from a shutdown hook) kills every process left in the namespaces and removes them and the
 * bridge. {@link #adopt} takes hosts someone else built (the
 * Soft-RoCE VM's cluster, each host with its own rxe device): closing it kills what runs in them, nothing more.
 */
public final class HostRing implements AutoCloseable {
    /**
     * The names' default prefix: {@code rdma.ring.prefix} (default {@code ring-}), so that rings run side by side on one
     * machine do not remove each other's. Two rings' prefixes must not start one another ({@link #removeLeftovers}).
     */
    static final String PREFIX = System.getProperty("rdma.ring.prefix", "ring-");
    static final String SUBNET = "10.214.0.";

    private final int hosts;
    /** The prefix of the names this ring built and removes at close; null when adopted (it built nothing). */
    private final String prefix;
    private final List<String> namespaces;
    private final List<String> addresses;
    private final List<String> ports;
    private final Thread hook = new Thread(this::close, "ring-teardown");
    private boolean closed;

    private HostRing(String prefix, List<String> namespaces, List<String> addresses, List<String> ports) {
        this.prefix = prefix;
        this.hosts = namespaces.size();
        this.namespaces = List.copyOf(namespaces);
        this.addresses = List.copyOf(addresses);
        this.ports = List.copyOf(ports);
    }

    /** Why the ring cannot be built here (not Linux, not root, no {@code ip netns}), or null when it can. */
    public static String unavailableCause() {
        if (!System.getProperty("os.name", "").startsWith("Linux")) {
            return "not Linux";
        }
        try {
            String uid = Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("Uid:"))
                    .findFirst().orElse("Uid: ?");
            if (!"0".equals(uid.split("\\s+")[1])) {
                return "not root (" + uid + "): network namespaces need root";
            }
            // a name of this JVM's own: no ring's prefix, not another JVM's probe (CI runs rings in two at once)
            String probe = "rdma-probe-" + ProcessHandle.current().pid();
            sh("ip", "netns", "add", probe);
            sh("ip", "netns", "del", probe);
            return null;
        } catch (IOException | RuntimeException e) {
            return "cannot create a network namespace with ip netns: " + e.getMessage();
        }
    }

    /** {@link #create(String, int)} with the default prefix {@link #PREFIX}. */
    public static HostRing create(int hosts) {
        return create(PREFIX, hosts);
    }

    /**
     * Removes what an earlier run left under {@code prefix}, then builds {@code hosts} hosts on the bridge, every name
     * starting with {@code prefix} (at most 8 characters: a link's name has at most 15).
     */
    public static HostRing create(String prefix, int hosts) {
        if (hosts < 1 || hosts > 16) {
            throw new IllegalArgumentException("hosts=" + hosts + ": expected 1..16");
        }
        if (prefix.isEmpty() || prefix.length() > 8) {
            throw new IllegalArgumentException("ring prefix '" + prefix + "': expected 1..8 characters");
        }
        removeLeftovers(prefix);
        List<String> ns = new ArrayList<>(), addrs = new ArrayList<>(), ports = new ArrayList<>();
        for (int i = 0; i < hosts; i++) {
            ns.add(prefix + "h" + i);
            addrs.add(SUBNET + (i + 1));
            ports.add(prefix + "v" + i);
        }
        HostRing ring = new HostRing(prefix, ns, addrs, ports);
        Runtime.getRuntime().addShutdownHook(ring.hook);
        try {
            ring.build();
        } catch (RuntimeException e) {
            ring.close();
            throw e;
        }
        return ring;
    }

    /**
     * Hosts that exist already: {@code namespaces.get(i)} has {@code addresses.get(i)}, and its link's bridge port
     * (in this namespace) is {@code ports.get(i)}. Closing the ring kills the processes left in them and keeps them.
     */
    public static HostRing adopt(List<String> namespaces, List<String> addresses, List<String> ports) {
        if (namespaces.isEmpty() || namespaces.size() != addresses.size() || namespaces.size() != ports.size()) {
            throw new IllegalArgumentException("ring: " + namespaces.size() + " namespaces, " + addresses.size() + " addresses and "
                    + ports.size() + " bridge ports: expected one of each per host, at least one host");
        }
        HostRing ring = new HostRing(null, namespaces, addresses, ports);
        for (String ns : namespaces) {
            sh("ip", "netns", "exec", ns, "true"); // fails naming the namespace when it does not exist
        }
        Runtime.getRuntime().addShutdownHook(ring.hook);
        return ring;
    }

    private void build() {
        String bridge = prefix + "br";
        sh("ip", "link", "add", bridge, "type", "bridge");
        sh("ip", "link", "set", bridge, "up");
        for (int i = 0; i < hosts; i++) {
            String ns = namespace(i);
            sh("ip", "netns", "add", ns);
            sh("ip", "link", "add", port(i), "type", "veth", "peer", "name", prefix + "e" + i, "netns", ns);
            sh("ip", "link", "set", port(i), "master", bridge);
            sh("ip", "link", "set", port(i), "up");
            sh("ip", "-n", ns, "addr", "add", address(i) + "/24", "dev", prefix + "e" + i);
            sh("ip", "-n", ns, "link", "set", prefix + "e" + i, "up");
            sh("ip", "-n", ns, "link", "set", "lo", "up");
        }
    }

    public int hosts() {
        return hosts;
    }

    public String namespace(int host) {
        return namespaces.get(host);
    }

    /** Its namespaces and addresses, for a report: {@code [host1=192.168.78.1, ...]}. */
    public String describe() {
        List<String> out = new java.util.ArrayList<>();
        for (int i = 0; i < hosts; i++) {
            out.add(namespaces.get(i) + "=" + addresses.get(i));
        }
        return out.toString();
    }

    public String address(int host) {
        return addresses.get(host);
    }

    /** The bridge port of {@code host}'s link (its end in the root namespace). */
    public String port(int host) {
        return ports.get(host);
    }

    /** Which host {@code address} is, or -1. */
    public int hostOf(String address) {
        for (int i = 0; i < hosts; i++) {
            if (address(i).equals(address)) {
                return i;
            }
        }
        return -1;
    }

    public void linkDown(int host) {
        sh("ip", "link", "set", port(host), "down");
    }

    public void linkUp(int host) {
        sh("ip", "link", "set", port(host), "up");
    }

    /** Runs a command inside {@code host}'s namespace and returns its output (fails on a non-zero exit). */
    public String exec(int host, String... command) {
        List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", namespace(host)));
        cmd.addAll(List.of(command));
        return sh(cmd.toArray(String[]::new));
    }

    /** The listening TCP sockets inside {@code host}'s namespace as {@code address:port} (ss's local column). */
    public List<String> listening(int host) {
        List<String> out = new ArrayList<>();
        for (String line : exec(host, "ss", "-Hltn").split("\n")) {
            String[] cols = line.trim().split("\\s+");
            if (cols.length >= 4) {
                out.add(cols[3]);
            }
        }
        return out;
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            if (Thread.currentThread() != hook) {
                Runtime.getRuntime().removeShutdownHook(hook);
            }
        } catch (IllegalStateException shuttingDown) {
            // the JVM is exiting: the hook runs this anyway
        }
        if (prefix != null) {
            removeLeftovers(prefix);
        } else {
            namespaces.forEach(HostRing::killProcessesIn);
        }
    }

    /** Every namespace whose name starts with {@code prefix} (its processes killed first), and that prefix's bridge. */
    static void removeLeftovers(String prefix) {
        for (String line : sh("ip", "netns", "list").split("\n")) {
            String ns = line.trim().split("\\s+")[0];
            if (ns.startsWith(prefix)) {
                killProcessesIn(ns);
                shQuiet("ip", "netns", "del", ns);
            }
        }
        if (Files.exists(Path.of("/sys/class/net/" + prefix + "br"))) {
            shQuiet("ip", "link", "del", prefix + "br");
        }
    }

    private static void killProcessesIn(String ns) {
        for (String pid : shQuiet("ip", "netns", "pids", ns).split("\\s+")) {
            if (pid.matches("\\d+")) {
                ProcessHandle.of(Long.parseLong(pid)).ifPresent(ProcessHandle::destroyForcibly);
            }
        }
    }

    static String sh(String... command) {
        String out = shQuiet(command);
        if (out.startsWith(FAILED)) {
            throw new IllegalStateException(out.substring(FAILED.length()));
        }
        return out;
    }

    private static final String FAILED = "\u0000failed:";

    /** Output of {@code command}, or {@link #FAILED} and why; bounded to 30 s. */
    private static String shQuiet(String... command) {
        Path out = null;
        try {
            out = Files.createTempFile("ring-sh", ".out");
            Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(out.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return FAILED + String.join(" ", command) + ": still running after 30 s";
            }
            String text = Files.readString(out, StandardCharsets.UTF_8);
            return p.exitValue() == 0 ? text : FAILED + String.join(" ", command) + " exited " + p.exitValue() + ": " + text.trim();
        } catch (IOException e) {
            return FAILED + String.join(" ", command) + ": " + e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return FAILED + String.join(" ", command) + ": interrupted";
        } finally {
            if (out != null) {
                out.toFile().delete();
            }
        }
    }
}

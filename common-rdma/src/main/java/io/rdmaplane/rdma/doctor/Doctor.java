package io.rdmaplane.rdma.doctor;

import io.rdmaplane.rdma.config.ConfigException;
import io.rdmaplane.rdma.config.ConfigKey;
import io.rdmaplane.rdma.config.TransportKeys;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.rdma.provider.verbs.DisniRuntime;
import io.rdmaplane.rdma.provider.verbs.RdmaDevices;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.stream.Collectors;

/**
 * The command operators run on a node before enabling the plug-ins: is RDMA usable here, and if
 * not, what to do about it.
 *
 * <pre>
 * java -cp &lt;common-rdma jar and its dependencies&gt; io.rdmaplane.rdma.doctor.Doctor [--peer HOST:PORT] [--pool-capacity 256m]
 * java -cp ... io.rdmaplane.rdma.doctor.Doctor --serve [--bind ADDR] [--port 7471]     (the other side of --peer)
 * </pre>
 *
 * Prints one line per finding, {@code VERDICT CHECK DETAIL} with the verdict OK, INFO, WARN or
 * FAIL, and under every WARN and FAIL a {@code FIX CHECK ...} line saying what to do; the last
 * line is {@code RESULT exit N ...}. See {@link #USAGE} for the checks and the exit codes.
 * Reads only sysfs and procfs (under {@code --root}, default {@code /}), asks the
 * {@link DisniRuntime} whether the native library loads and the providers of
 * {@link Providers#all()} whether they are available, and speaks to a peer through the SPI.
 */
public final class Doctor {
    /** RDMA is usable (and the peer check, when asked for, passed). */
    public static final int EXIT_OK = 0;
    /** No RDMA device: the tcp provider would be used. */
    public static final int EXIT_NO_DEVICE = 1;
    /** An RDMA device is present but not usable: library, limits, port down, no verbs provider. */
    public static final int EXIT_UNUSABLE = 2;
    /** The peer check failed (or {@code --serve} could not start). */
    public static final int EXIT_PEER = 3;
    /** Bad command line. */
    public static final int EXIT_USAGE = 64;

    static final String VERBS = "verbs";
    static final String VERBS_CLASS = "io.rdmaplane.rdma.provider.verbs.VerbsProvider";

    public static final String USAGE = """
            usage: Doctor [--peer HOST:PORT] [--pool-capacity SIZE] [--provider NAME] [--bind ADDR] [--timeout DURATION] [--root DIR]
                   Doctor --serve [--bind ADDR] [--port N] [--serve-for DURATION] [--provider NAME]

            Checks whether this node can use RDMA and prints one line per finding:
              VERDICT CHECK      DETAIL        verdict OK, INFO (a fact), WARN or FAIL
              FIX     CHECK      what to do    under every WARN and FAIL
              RESULT  exit N     the outcome
            Checks: RDMA devices and ports (state, link layer, netdev and MTU, GIDs and which are RoCE v2,
            NUMA node), memlock against the pool capacity, huge pages, user-space verbs drivers, the native
            library (DiSNI + libdisni.so), the providers and the one `auto` picks, and with --peer a connect,
            a descriptor request and ten verified READs (first and median time) from a node running `Doctor --serve`.

              --peer HOST:PORT       connect to `Doctor --serve` there and READ its region (default port 7471)
              --pool-capacity SIZE   registered-memory pool to check memlock against (default: pool.capacity's, 256m)
              --provider NAME        provider of the peer check and of --serve: auto (default), or one of Providers.all()
              --bind ADDR            local address: --serve listens there (default 0.0.0.0), --peer connects from it
              --port N               --serve's port (default 7471; 0 = any free port, printed)
              --serve                expose a small registered region and answer descriptor requests until stopped
              --serve-for DURATION   stop serving after this long (default: until killed)
              --timeout DURATION     per step of the peer check (default 10s)
              --root DIR             read sys/ and proc/ under DIR instead of / (tests, copied trees)

            Exit codes (the highest that applies):
              0  RDMA is usable (and the peer check passed)
              1  no RDMA device: the tcp provider would be used (a passing tcp peer check keeps 1)
              2  an RDMA device is present but unusable (native library, memlock, port down, no usable verbs provider)
              3  the peer check failed, or --serve could not start
              64 bad command line
            """;

    /** Chooses a provider by name ("auto" or a provider's name), as {@link Providers#select} does. */
    @FunctionalInterface
    public interface Selector {
        TransportProvider select(String name) throws TransportException;
    }

    /**
     * What the doctor examines; {@link #system()} is the real machine, tests pass their own.
     *
     * @param root         where {@code sys/} and {@code proc/} are read from
     * @param providers    the build's providers, most preferred first
     * @param selector     how a provider name becomes a provider
     * @param library      why the native library cannot be used, or null when it loads
     * @param verbsInBuild whether the verbs provider's class is on the class path
     */
    public record Environment(Path root, List<TransportProvider> providers, Selector selector,
                              Supplier<Throwable> library, boolean verbsInBuild) {
        public Environment {
            Objects.requireNonNull(root, "root");
            Objects.requireNonNull(providers, "providers");
            Objects.requireNonNull(selector, "selector");
            Objects.requireNonNull(library, "library");
        }

        public static Environment system() {
            return system(Path.of("/"));
        }

        public static Environment system(Path root) {
            return new Environment(root, Providers.all(), Providers::select, DisniRuntime::unavailabilityCause,
                    classPresent(VERBS_CLASS));
        }

        public Environment withRoot(Path newRoot) {
            return new Environment(newRoot, providers, selector, library, verbsInBuild);
        }
    }

    /** The command line, parsed. */
    public record Options(InetSocketAddress peer, long poolCapacity, String provider, String bind, int port, boolean serve,
                          Duration serveFor, Duration timeout, Path root) {
        public static Options defaults() {
            return new Options(null, TransportKeys.POOL_CAPACITY.defaultValue(), Providers.AUTO, null, PeerCheck.DEFAULT_PORT,
                    false, null, TIMEOUT.defaultValue(), null);
        }

        public Options withPeer(InetSocketAddress p) {
            return new Options(p, poolCapacity, provider, bind, port, serve, serveFor, timeout, root);
        }

        public Options withPoolCapacity(long bytes) {
            return new Options(peer, bytes, provider, bind, port, serve, serveFor, timeout, root);
        }
    }

    static final ConfigKey<Duration> TIMEOUT = ConfigKey.durationKey("timeout", "10s", "1ms", "1h",
            "Per step of the peer check.");
    static final ConfigKey<Duration> SERVE_FOR = ConfigKey.durationKey("serve-for", "1h", "1ms", "10000h",
            "How long --serve serves.");
    static final ConfigKey<Integer> PORT = ConfigKey.intKey("port", PeerCheck.DEFAULT_PORT, 0, 65535, "Port of --serve.");

    private final Environment env;

    public Doctor(Environment env) {
        this.env = Objects.requireNonNull(env, "env");
    }

    public static void main(String[] args) {
        // The report says what DiSNI's layout checks and the provider choice would log; with
        // slf4j-simple (the integration tests' binding) keep their INFO lines off the terminal.
        quiet("com.ibm.disni");
        quiet(Providers.class.getName());
        System.exit(run(args, Environment.system(), System.out, System.err));
    }

    private static void quiet(String logger) {
        String property = "org.slf4j.simpleLogger.log." + logger;
        if (System.getProperty(property) == null) {
            System.setProperty(property, "warn");
        }
    }

    /** Runs the command line and returns the exit code. */
    public static int run(String[] args, Environment env, PrintStream out, PrintStream err) {
        Options options;
        try {
            options = parse(args);
        } catch (IllegalArgumentException e) {
            err.println("Doctor: " + e.getMessage());
            err.print(USAGE);
            return EXIT_USAGE;
        }
        if (options == null) {
            out.print(USAGE);
            return EXIT_OK;
        }
        Environment e = options.root() != null ? env.withRoot(options.root()) : env;
        Doctor doctor = new Doctor(e);
        if (options.serve()) {
            return doctor.serve(options, out, null);
        }
        Report report = doctor.examine(options);
        report.print(out);
        out.println(doctor.result(report));
        out.flush();
        return report.exitCode();
    }

    /** Parses the arguments; null for --help. */
    static Options parse(String[] args) {
        Options o = Options.defaults();
        InetSocketAddress peer = null;
        long capacity = o.poolCapacity();
        String provider = o.provider();
        String bind = null;
        int port = o.port();
        boolean serve = false;
        Duration serveFor = null;
        Duration timeout = o.timeout();
        Path root = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("-h") || a.equals("--help")) {
                return null;
            }
            if (a.equals("--serve")) {
                serve = true;
                continue;
            }
            String name = a;
            String value;
            int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 0) {
                name = a.substring(0, eq);
                value = a.substring(eq + 1);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new IllegalArgumentException(a.startsWith("--") ? a + " needs a value" : "unexpected argument '" + a + "'");
            }
            try {
                switch (name) {
                    case "--peer" -> peer = hostPort(value);
                    case "--pool-capacity" -> capacity = TransportKeys.POOL_CAPACITY.parse("--pool-capacity", value);
                    case "--provider" -> provider = value.trim().toLowerCase(Locale.ROOT);
                    case "--bind" -> bind = value.trim();
                    case "--port" -> port = PORT.parse("--port", value);
                    case "--serve-for" -> serveFor = SERVE_FOR.parse("--serve-for", value);
                    case "--timeout" -> timeout = TIMEOUT.parse("--timeout", value);
                    case "--root" -> root = Path.of(value);
                    default -> throw new IllegalArgumentException("unknown option '" + name + "'");
                }
            } catch (ConfigException e) {
                throw new IllegalArgumentException(e.getMessage(), e);
            }
        }
        if (serve && peer != null) {
            throw new IllegalArgumentException("--serve and --peer exclude each other: serve on one node, check from the other");
        }
        return new Options(peer, capacity, provider, bind, port, serve, serveFor, timeout, root);
    }

    /** "host:port", "[v6]:port", or "host" (port 7471). */
    static InetSocketAddress hostPort(String text) {
        String t = text.trim();
        String host = t;
        int port = PeerCheck.DEFAULT_PORT;
        if (t.startsWith("[")) {
            int close = t.indexOf(']');
            if (close < 0) {
                throw new IllegalArgumentException("--peer '" + text + "': missing ']'");
            }
            host = t.substring(1, close);
            if (t.length() > close + 1) {
                if (t.charAt(close + 1) != ':') {
                    throw new IllegalArgumentException("--peer '" + text + "': expected HOST:PORT");
                }
                port = PORT.parse("--peer port", t.substring(close + 2));
            }
        } else if (t.indexOf(':') >= 0 && t.indexOf(':') == t.lastIndexOf(':')) {
            host = t.substring(0, t.indexOf(':'));
            port = PORT.parse("--peer port", t.substring(t.indexOf(':') + 1));
        }
        if (host.isEmpty() || port == 0) {
            throw new IllegalArgumentException("--peer '" + text + "': expected HOST:PORT with a port of 1..65535");
        }
        return new InetSocketAddress(host, port);
    }

    // ------------------------------------------------------------------------------- the checks

    /** Runs every local check, and the peer check when {@code options.peer()} is set. */
    public Report examine(Options options) {
        Report r = new Report();
        Path root = env.root();
        r.info("doctor", "host " + ProcFacts.hostname(root) + ", java " + System.getProperty("java.version") + ", root " + root
                + ", pool capacity " + ProcFacts.bytes(options.poolCapacity())
                + (options.poolCapacity() == TransportKeys.POOL_CAPACITY.defaultValue() ? " (default of pool.capacity)" : ""));
        List<RdmaDevices.Device> devices = RdmaDevices.devices(root);
        boolean present = !devices.isEmpty();
        boolean anyActive = devices.stream().flatMap(d -> d.ports().stream()).anyMatch(RdmaDevices.Port::active);
        devices(r, devices, anyActive);
        memlock(r, options.poolCapacity(), present);
        hugePages(r, options.poolCapacity());
        drivers(r, devices);
        library(r, present);
        providers(r, present, anyActive);
        if (options.peer() != null) {
            peer(r, options);
        }
        return r;
    }

    private void devices(Report r, List<RdmaDevices.Device> devices, boolean anyActive) {
        if (devices.isEmpty()) {
            r.fail("device", "no RDMA device: tcp provider will be used (nothing in " + RdmaDevices.classDir(env.root()) + ")",
                    "to use RDMA, load the NIC's RDMA driver (mlx5_ib, irdma, bnxt_re, ...) or create Soft-RoCE on an Ethernet"
                            + " device: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0`",
                    EXIT_NO_DEVICE);
            return;
        }
        for (RdmaDevices.Device d : devices) {
            StringBuilder s = new StringBuilder(d.name());
            s.append(": ").append(d.ports().size()).append(d.ports().size() == 1 ? " port" : " ports");
            if (d.nodeType() != null) {
                s.append(", node_type ").append(d.nodeType());
            }
            if (d.software()) {
                s.append(", software device").append(d.parent() != null ? " on " + d.parent() : "")
                        .append(d.nodeDesc() != null && !d.nodeDesc().isEmpty() ? " (" + d.nodeDesc() + ")" : "");
            } else {
                s.append(", driver ").append(d.driver() != null ? d.driver() : "unknown");
            }
            if (d.fwVer() != null && !d.fwVer().isEmpty()) {
                s.append(", fw ").append(d.fwVer());
            }
            r.info("device", s.toString());
            for (RdmaDevices.Port p : d.ports()) {
                port(r, p, anyActive);
                gids(r, p);
            }
            numa(r, d);
        }
    }

    private void port(Report r, RdmaDevices.Port p, boolean anyActive) {
        StringBuilder s = new StringBuilder(p.id()).append(' ').append(p.state() != null ? p.state() : "state unknown");
        s.append(" (").append(p.physState() != null ? p.physState() : "phys_state unknown").append(')');
        s.append(", link_layer ").append(p.linkLayer() != null ? p.linkLayer() : "unknown");
        if (p.netdev() != null) {
            s.append(", netdev ").append(p.netdev());
            if (p.netdevMtu() > 0) {
                s.append(" mtu ").append(p.netdevMtu());
            }
            if (p.netdevOper() != null) {
                s.append(' ').append(p.netdevOper());
            }
        } else {
            s.append(", no netdev");
        }
        if (p.ethernet() && p.roceMtu() > 0) {
            s.append(", RoCE active_mtu ").append(p.roceMtu()).append(" (from netdev mtu ").append(p.netdevMtu()).append(')');
        }
        if (p.rate() != null) {
            s.append(", rate ").append(p.rate());
        }
        if (p.active()) {
            r.ok("port", s.toString());
            return;
        }
        String fix;
        if (!"LinkUp".equals(p.physState())) {
            fix = (p.netdev() != null ? "bring the link up: `ip link set " + p.netdev() + " up`, then check" : "check")
                    + " the cable and the switch port (phys_state " + p.physState() + ")";
        } else if (!p.ethernet() && ("INIT".equals(p.state()) || "ARMED".equals(p.state()))) {
            fix = "the link is up but no subnet manager configured the port: run opensm on the fabric (or enable the switch's SM)";
        } else {
            fix = "the link is up but the port is " + p.state() + ": check `dmesg` for the driver's messages and the switch port";
        }
        if (anyActive) {
            r.warn("port", s + "; another port is ACTIVE", fix);
        } else {
            r.fail("port", s + "; no RDMA port is ACTIVE", fix, EXIT_UNUSABLE);
        }
    }

    private void gids(Report r, RdmaDevices.Port p) {
        for (RdmaDevices.Gid g : p.gids()) {
            r.info("gid", p.id() + " gid " + g.index() + " " + (g.type() != null ? g.type() : "type unknown") + " "
                    + g.display() + (g.ndev() != null ? " " + g.ndev() : ""));
        }
        if (!p.ethernet()) {
            r.info("roce", p.id() + " link_layer " + p.linkLayer() + ": not RoCE; RDMA-CM resolves IPv4 addresses through IPoIB"
                    + (p.netdev() != null ? " (" + p.netdev() + ")" : ""));
            return;
        }
        List<RdmaDevices.Gid> v2 = p.gids().stream().filter(RdmaDevices.Gid::roceV2).toList();
        List<RdmaDevices.Gid> v2ipv4 = v2.stream().filter(g -> g.ipv4() != null).toList();
        String dev = p.netdev() != null ? p.netdev() : "the port's netdev";
        if (p.gids().isEmpty()) {
            r.warn("roce", p.id() + ": empty GID table",
                    "give " + dev + " an IPv4 address and bring it up (`ip addr add ADDR/PREFIX dev " + dev + "; ip link set " + dev + " up`)");
        } else if (v2.isEmpty()) {
            r.warn("roce", p.id() + ": only RoCE v1 GIDs (" + p.gids().size() + ")",
                    "use RoCE v2 (routable, what RDMA-CM prefers): `cma_roce_mode -d " + p.device() + " -p " + p.number()
                            + " -m 2` or the NIC's RoCE mode setting");
        } else if (v2ipv4.isEmpty()) {
            r.warn("roce", p.id() + ": RoCE v2 GIDs at index " + indexes(v2) + " but none with an IPv4 address",
                    "give " + dev + " an IPv4 address (`ip addr add ADDR/PREFIX dev " + dev + "`): the data plane connects over IPv4");
        } else {
            r.ok("roce", p.id() + ": RoCE v2 GIDs at index " + indexes(v2) + ", IPv4 "
                    + v2ipv4.stream().map(g -> g.ipv4() + " (gid " + g.index() + ")").collect(Collectors.joining(", ")));
        }
    }

    private static String indexes(List<RdmaDevices.Gid> gids) {
        return gids.stream().map(g -> Integer.toString(g.index())).collect(Collectors.joining(","));
    }

    private void numa(Report r, RdmaDevices.Device d) {
        if (d.software()) {
            r.info("numa", d.name() + ": software device (no PCI device behind it): no NUMA node (rxe has none)");
        } else if (d.numaNode() == null) {
            r.info("numa", d.name() + ": NUMA node unknown (no device/numa_node)");
        } else if (d.numaNode().equals("-1")) {
            r.info("numa", d.name() + ": no NUMA node reported (numa_node -1: one node, or the firmware does not say)");
        } else {
            r.info("numa", d.name() + ": NUMA node " + d.numaNode() + ": run the executors / DataNode there for the best"
                    + " latency (`numactl --cpunodebind=" + d.numaNode() + " --membind=" + d.numaNode() + "`)");
        }
    }

    static final String MEMLOCK_FIX = "raise memlock: `ulimit -l unlimited` or LimitMEMLOCK=infinity (systemd unit)"
            + " / `<user> - memlock unlimited` in /etc/security/limits.conf";

    private void memlock(Report r, long capacity, boolean present) {
        ProcFacts.Limit limit = ProcFacts.memlock(env.root());
        String cap = ProcFacts.bytes(capacity);
        if (limit == null) {
            r.warn("memlock", "cannot read \"Max locked memory\" from " + env.root().resolve("proc/self/limits"),
                    "check `ulimit -l`: it must be at least the pool capacity " + cap);
            return;
        }
        String values = "Max locked memory soft " + ProcFacts.bytes(limit.soft()) + ", hard " + ProcFacts.bytes(limit.hard());
        if (limit.soft() >= capacity) {
            r.ok("memlock", values + " >= pool capacity " + cap);
            return;
        }
        String detail = values + " < pool capacity " + cap;
        Boolean ipcLock = ProcFacts.hasIpcLock(env.root());
        if (!present) {
            r.warn("memlock", detail + ": matters once an RDMA device is used (tcp pins nothing)", MEMLOCK_FIX);
        } else if (Boolean.TRUE.equals(ipcLock)) {
            r.warn("memlock", detail + "; this process has CAP_IPC_LOCK, which lifts the limit for it, but a service"
                    + " user without it cannot register the pool", MEMLOCK_FIX);
        } else {
            r.fail("memlock", detail + ": registering the pool would fail (ENOMEM)", MEMLOCK_FIX, EXIT_UNUSABLE);
        }
    }

    /** What pool.memory=auto will map the pool on here, and how to give it reserved huge pages. */
    private void hugePages(Report r, long capacity) {
        ProcFacts.HugePages h = ProcFacts.hugePages(env.root());
        String thp = RdmaDevices.read(env.root().resolve("sys/kernel/mm/transparent_hugepage/enabled"));
        String transparent = thp == null ? "no transparent huge pages in this kernel"
                : thp.contains("[never]") ? "transparent huge pages disabled (transparent_hugepage/enabled: never)"
                : "transparent huge pages (transparent_hugepage/enabled: " + thp.trim() + ")";
        if (h == null) {
            r.info("hugepages", "no huge page figures in " + env.root().resolve("proc/meminfo") + "; pool.memory=auto maps the"
                    + " pool on " + transparent);
            return;
        }
        String figures = "HugePages_Total " + h.total() + ", HugePages_Free " + h.free() + ", Hugepagesize " + h.pageSizeKb() + " kB";
        long pageBytes = h.pageSizeKb() << 10;
        long needed = pageBytes > 0 ? (capacity + pageBytes - 1) / pageBytes : 0;
        if (pageBytes != 2L << 20) {
            r.info("hugepages", figures + ": the pool maps 8 MiB chunks on the default huge page size only when it divides"
                    + " them; pool.memory=auto maps it on " + transparent);
        } else if (h.free() >= needed) {
            r.info("hugepages", figures + ": pool.memory=auto maps the pool (" + ProcFacts.bytes(capacity) + ", " + needed
                    + " pages) on reserved huge pages");
        } else {
            r.info("hugepages", figures + ": the pool (" + ProcFacts.bytes(capacity) + ") needs " + needed + " free 2 MiB pages"
                    + " to be all on reserved huge pages: reserve them with `sysctl vm.nr_hugepages=" + (h.total() - h.free() + needed)
                    + "` (or hugepages=N on the kernel command line); until then pool.memory=auto takes " + h.free()
                    + " and maps the rest on " + transparent);
        }
    }

    private void drivers(Report r, List<RdmaDevices.Device> devices) {
        Path dir = env.root().resolve("etc/libibverbs.d");
        List<String> drivers = RdmaDevices.list(dir).stream().map(p -> p.getFileName().toString())
                .filter(n -> n.endsWith(".driver")).map(n -> n.substring(0, n.length() - ".driver".length())).toList();
        String fix = "install the user-space verbs drivers: `apt-get install ibverbs-providers` (rdma-core)";
        if (drivers.isEmpty()) {
            if (devices.isEmpty()) {
                r.warn("drivers", "no user-space verbs driver in " + dir + ": needed once an RDMA device is present", fix);
            } else {
                r.fail("drivers", "no user-space verbs driver in " + dir + ": libibverbs will see no device", fix, EXIT_UNUSABLE);
            }
            return;
        }
        List<String> missing = new ArrayList<>();
        for (RdmaDevices.Device d : devices) {
            if (d.software() && d.name().startsWith("rxe") && !drivers.contains("rxe")) {
                missing.add(d.name() + " needs rxe");
            }
        }
        String detail = drivers.size() + " user-space verbs drivers in " + dir + " (" + String.join(" ", drivers) + ")";
        if (!missing.isEmpty()) {
            r.fail("drivers", detail + ": " + String.join(", ", missing), fix, EXIT_UNUSABLE);
        } else if (devices.isEmpty()) {
            r.info("drivers", detail);
        } else {
            r.ok("drivers", detail);
        }
    }

    private void library(Report r, boolean present) {
        Throwable cause;
        try {
            cause = env.library().get();
        } catch (RuntimeException | LinkageError e) {
            cause = e;
        }
        if (cause == null) {
            r.ok("library", "DiSNI and the bundled libdisni.so load (libibverbs.so.1 and librdmacm.so.1 found)");
            return;
        }
        String detail = "the native library does not load: " + PeerCheck.oneLine(cause);
        if (present) {
            r.fail("library", detail, libraryFix(cause), EXIT_UNUSABLE);
        } else {
            r.warn("library", detail + " (needed once an RDMA device is present)", libraryFix(cause));
        }
    }

    static String libraryFix(Throwable cause) {
        String m = String.valueOf(cause.getMessage());
        if (m.contains("libibverbs")) {
            return "`apt-get install libibverbs1 ibverbs-providers` (rdma-core)";
        }
        if (m.contains("librdmacm")) {
            return "`apt-get install librdmacm1` (rdma-core)";
        }
        if (m.contains("libnl")) {
            return "`apt-get install libnl-3-200 libnl-route-3-200`";
        }
        if (m.contains("older than")) {
            return "`apt-get install --only-upgrade libibverbs1 librdmacm1 ibverbs-providers`";
        }
        if (m.contains("no bundled native library")) {
            return "use a common-rdma jar built with its native library (the build needs gcc, libibverbs-dev, librdmacm-dev)";
        }
        if (m.contains("extract") || m.contains("failed to map") || m.contains("noexec")) {
            return "set the product's verbs.native.tmpdir (spark.shuffle.rdma.verbs.native.tmpdir, dfs.rdma.verbs.native.tmpdir,"
                    + " dfs.datanode.rdma.verbs.native.tmpdir) to a writable folder that is not mounted noexec";
        }
        return "`apt-get install rdma-core libibverbs1 librdmacm1 ibverbs-providers`, then see the cause above";
    }

    private void providers(Report r, boolean present, boolean anyActive) {
        boolean verbsListed = false;
        for (TransportProvider p : env.providers()) {
            verbsListed |= p.name().equals(VERBS);
            if (p.isAvailable()) {
                r.ok("provider", p.name() + ": available");
            } else {
                r.info("provider", p.name() + ": unavailable: " + causeText(p));
            }
        }
        String verbsAbsent = null;
        if (!verbsListed) {
            verbsAbsent = env.verbsInBuild()
                    ? "verbs provider in this build but not in Providers.all()"
                    : "verbs provider not in this build";
            r.info("provider", verbsAbsent);
        }
        TransportProvider chosen;
        try {
            chosen = env.selector().select(Providers.AUTO);
        } catch (TransportException | RuntimeException e) {
            r.fail("auto", "auto finds no usable provider: " + PeerCheck.oneLine(e),
                    "fix the FAIL lines above", present ? EXIT_UNUSABLE : EXIT_NO_DEVICE);
            return;
        }
        List<String> skipped = new ArrayList<>();
        for (TransportProvider p : env.providers()) {
            if (p == chosen) {
                break;
            }
            skipped.add(p.name() + ": " + causeText(p));
        }
        if (verbsAbsent != null) {
            skipped.add(verbsAbsent);
        }
        String why = skipped.isEmpty() ? "" : " (" + String.join("; ", skipped) + ")";
        if (chosen.name().equals(VERBS)) {
            r.ok("auto", "auto picks verbs" + why);
        } else if (anyActive) {
            String fix = verbsAbsent != null
                    ? "use a build of the plug-ins that includes the verbs provider (" + VERBS_CLASS + ")"
                    : "make verbs available: fix the FAIL lines above (its cause is on the provider line)";
            r.fail("auto", "auto picks " + chosen.name() + " although an RDMA port is ACTIVE" + why, fix, EXIT_UNUSABLE);
        } else {
            r.info("auto", "auto picks " + chosen.name() + why);
        }
    }

    private static String causeText(TransportProvider p) {
        Throwable c = p.unavailabilityCause();
        return c == null ? "unavailable" : PeerCheck.oneLine(c);
    }

    private void peer(Report r, Options options) {
        if (options.peer().isUnresolved()) {
            r.fail(PeerCheck.CHECK, "cannot resolve " + options.peer().getHostString(),
                    "pass the peer's IP address, or fix DNS / /etc/hosts", EXIT_PEER);
            return;
        }
        TransportProvider provider;
        try {
            provider = env.selector().select(options.provider());
        } catch (TransportException | RuntimeException e) {
            r.fail(PeerCheck.CHECK, "no provider for the peer check: " + PeerCheck.oneLine(e),
                    "fix the provider lines above or pass --provider tcp", EXIT_PEER);
            return;
        }
        InetSocketAddress local = new InetSocketAddress(options.bind() != null ? options.bind() : "0.0.0.0", 0);
        PeerCheck.check(r, provider, nodeOptions(local, options.timeout()), options.peer(), options.timeout());
    }

    static NodeOptions nodeOptions(InetSocketAddress bind, Duration timeout) {
        Duration op = TransportKeys.OPERATION_TIMEOUT.defaultValue();
        return new NodeOptions(bind, Math.toIntExact(TransportKeys.MAX_MESSAGE_SIZE.defaultValue()),
                timeout.compareTo(op) < 0 ? timeout : op, PeerCheck.QUEUE_DEPTH);
    }

    /** The last line: the exit code and why. */
    String result(Report report) {
        int code = report.exitCode();
        List<Report.Line> deciding = report.deciding();
        boolean peerPassed = report.lines().stream().anyMatch(l -> l.check().equals(PeerCheck.CHECK))
                && report.lines().stream().noneMatch(l -> l.check().equals(PeerCheck.CHECK) && l.verdict() == Report.Verdict.FAIL);
        String text = switch (code) {
            case EXIT_OK -> "RDMA is usable" + (peerPassed ? "; peer check passed" : "");
            case EXIT_NO_DEVICE -> "no RDMA device: tcp provider will be used" + (peerPassed ? "; peer check over tcp passed" : "");
            case EXIT_UNUSABLE -> "RDMA device present but unusable: " + deciding.get(0).check() + ": " + deciding.get(0).detail();
            default -> "peer check failed: " + deciding.get(0).detail();
        };
        return Report.format("RESULT", "exit " + code, text);
    }

    // ------------------------------------------------------------------------------- --serve

    /**
     * Serves until {@code options.serveFor()} passes, {@code stop} counts down, or the JVM is
     * stopped; returns the exit code.
     */
    int serve(Options options, PrintStream out, CountDownLatch stop) {
        TransportProvider provider;
        try {
            provider = env.selector().select(options.provider());
        } catch (TransportException | RuntimeException e) {
            out.println(Report.format("FAIL", PeerCheck.CHECK, "no provider to serve with: " + PeerCheck.oneLine(e)));
            out.println(Report.format("FIX", PeerCheck.CHECK, "run the doctor without --serve to see why, or pass --provider tcp"));
            out.flush();
            return EXIT_PEER;
        }
        InetSocketAddress bind = new InetSocketAddress(options.bind() != null ? options.bind() : "0.0.0.0", options.port());
        PeerCheck.Server server;
        try {
            server = PeerCheck.Server.start(provider, nodeOptions(bind, TransportKeys.OPERATION_TIMEOUT.defaultValue()),
                    event -> {
                        synchronized (out) {
                            out.println(Report.format("SERVE", PeerCheck.CHECK, event));
                            out.flush();
                        }
                    });
        } catch (TransportException | RuntimeException e) {
            out.println(Report.format("FAIL", PeerCheck.CHECK, "cannot serve on " + bind + " via " + provider.name() + ": "
                    + PeerCheck.oneLine(e)));
            out.println(Report.format("FIX", PeerCheck.CHECK, "pick a free --port, or --bind an address of this node"));
            out.flush();
            return EXIT_PEER;
        }
        Thread hook = new Thread(server::close, "doctor-serve-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        try (server) {
            InetSocketAddress at = server.address();
            synchronized (out) {
                out.println(Report.format("SERVE", PeerCheck.CHECK, String.format(Locale.ROOT,
                        "listening on %s:%d via %s: region %d B at 0x%x rkey 0x%x; check from another node with"
                                + " `Doctor --peer <address of this node>:%d`%s",
                        at.getHostString(), at.getPort(), server.provider(), server.descriptor().length(),
                        server.descriptor().address(), server.descriptor().rkey(), at.getPort(),
                        options.serveFor() != null ? "; serving for " + options.serveFor().toMillis() + " ms" : "")));
                out.flush();
            }
            CountDownLatch latch = stop != null ? stop : new CountDownLatch(1);
            try {
                if (options.serveFor() != null) {
                    latch.await(options.serveFor().toMillis(), TimeUnit.MILLISECONDS);
                } else {
                    latch.await();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            synchronized (out) {
                out.println(Report.format("SERVE", PeerCheck.CHECK, "stopped after " + server.served() + " descriptor(s)"));
                out.flush();
            }
        } finally {
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException e) {
                // the JVM is already shutting down: the hook closes the server
            }
        }
        return EXIT_OK;
    }

    /** Starts serving in the background (for tests and embedding); close it to stop. */
    static PeerCheck.Server startServer(TransportProvider provider, InetSocketAddress bind) throws TransportException {
        return PeerCheck.Server.start(provider, nodeOptions(bind, TransportKeys.OPERATION_TIMEOUT.defaultValue()), e -> {
        });
    }

    static boolean classPresent(String name) {
        try {
            Class.forName(name, false, Doctor.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }
}

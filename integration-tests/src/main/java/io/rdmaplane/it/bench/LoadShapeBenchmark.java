package io.rdmaplane.it.bench;

import io.rdmaplane.it.Args;
import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.rdma.provider.VerbsOptions;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Latency and throughput under every load shape (issue 13), with the baseline measured in the
 * same run (on tcp a plain socket stream and ping-pong between the same loopback endpoints; on
 * verbs the caller passes what {@code ib_read_lat}/{@code ib_read_bw} measured just before):
 * <ol>
 * <li>queue-depth sweep 1..64 at 64 B, 4 KiB, 64 KiB, 1 MiB and 8 MiB: p50/p99 of each READ,
 *     MiB/s, and CPU seconds per GiB on each side (flat latency as the depth grows means the
 *     path keeps up; linear growth means a heavy lookup or completion path);</li>
 * <li>control round trip p50/p99/p999 idle, under saturating bulk READs, under bulk both ways
 *     and during bursts (idle, then 64 outstanding 8 MiB READs at once);</li>
 * <li>fan-in (one server, N clients) and fan-out (one client, N servers): aggregate MiB/s and
 *     fairness (slowest peer / fastest).</li>
 * </ol>
 * A table goes to stdout, charts (PNG) to {@code out}, and the run ends with the
 * {@code load-shapes:} lines. A benchmark, not a test: nothing asserts a time.
 *
 * <p>Arguments (all optional): {@code provider=auto server=127.0.0.1 client=127.0.0.1 seconds=0.25}
 * (per sweep point) {@code rounds=2000} (control round trips per shape) {@code bursts=3 peers=8
 * fanSeconds=1.5 maxDepth=64 out=target/load-shapes baselineLatUs= baselineBwMiBs=} (these two
 * replace the socket baseline: 64 B READ p50 latency and 64 KiB READ bandwidth) {@code only=control|fan|latency}
 * (one part alone) {@code spinMicros=0 hybridSpinMicros=100} (verbs: the completion spins, as
 * {@code verbs.completion.spinMicros} and {@code .hybridSpinMicros}) {@code detectionWindowMs=200 requestTimeoutMs=1000} (the policy layer's, defaults
 * as shipped; a slow guest such as the Soft-RoCE VM under TCG raises them so no probe or request
 * times out under bulk: they bound waits, they do not change a figure unless they fire).
 * Longer runs: raise {@code seconds}, {@code rounds}, {@code bursts}, {@code fanSeconds}.
 */
public final class LoadShapeBenchmark {
    private static final int[] SIZES = {64, 4 << 10, 64 << 10, 1 << 20, 8 << 20};
    private static final int BULK = 8 << 20;
    private static final int FAN_BLOCK = 1 << 20;
    private static final int FAN_DEPTH = 16;
    private static final int BULK_STREAMS = 16;
    private static final int BURST = 64;

    public static void main(String[] args) throws Exception {
        VerbsOptions.Completion completion = ProviderReadBenchmark.completion(
                Args.get(args, "completion", VerbsOptions.defaults().completion().name()));
        NodeOptions serverOptions = ProviderReadBenchmark.options(Args.get(args, "server", "127.0.0.1"), completion, args);
        NodeOptions clientOptions = ProviderReadBenchmark.options(Args.get(args, "client", "127.0.0.1"), completion, args);
        int latRounds = Integer.parseInt(Args.get(args, "latRounds", "2000"));
        TransportProvider provider = Providers.select(Args.get(args, "provider", "auto"), serverOptions);
        long pointNanos = (long) (Double.parseDouble(Args.get(args, "seconds", "0.25")) * 1e9);
        int rounds = Integer.parseInt(Args.get(args, "rounds", "2000"));
        int bursts = Integer.parseInt(Args.get(args, "bursts", "3"));
        int peers = Integer.parseInt(Args.get(args, "peers", "8"));
        long fanNanos = (long) (Double.parseDouble(Args.get(args, "fanSeconds", "1.5")) * 1e9);
        int maxDepth = Integer.parseInt(Args.get(args, "maxDepth", "64"));
        Path out = Path.of(Args.get(args, "out", "target/load-shapes"));
        String latArg = Args.get(args, "baselineLatUs", "");
        String bwArg = Args.get(args, "baselineBwMiBs", "");
        String only = Args.get(args, "only", "");
        PolicyOptions defaults = PolicyOptions.defaults();
        PolicyOptions policy = defaults.withChecksumSampleRate(0).withTimeouts(
                millis(args, "detectionWindowMs", defaults.detectionWindow()), defaults.handshakeTimeout(),
                millis(args, "requestTimeoutMs", defaults.requestTimeout()));
        List<Integer> depths = new ArrayList<>();
        for (int d = 1; d <= maxDepth; d *= 2) {
            depths.add(d);
        }
        System.out.printf("load shapes over %s (%d cores; other processes share them)%n", provider.name(),
                Runtime.getRuntime().availableProcessors());
        if (only.equals("fan")) { // one shape alone, to look at it
            printFan("fan-in: 1 server, " + peers + " clients", fan(provider, serverOptions, clientOptions, peers, fanNanos, true));
            printFan("fan-out: 1 client, " + peers + " servers", fan(provider, serverOptions, clientOptions, peers, fanNanos, false));
            return;
        }
        if (only.equals("latency")) { // the waited 64 B READ of each completion mode against the given baseline
            Map<String, ReadLoad.LatencyRun> waited = waitedLatency(provider, serverOptions, clientOptions,
                    latRounds);
            // without a given baseline, the plain socket's, measured here as the full run measures it
            double base = latArg.isEmpty() ? socketRoundTripP50Nanos() : Double.parseDouble(latArg) * 1e3;
            if (latArg.isEmpty()) {
                System.out.printf("baseline (plain socket): 64 B round trip p50 %.1f us%n", base / 1e3);
            }
            printWaited(waited, completion, base, Double.NaN);
            return;
        }
        if (only.equals("control")) {
            Map<String, long[]> control = controlShapes(provider, serverOptions, clientOptions, policy, rounds, bursts);
            printControl(control);
            printControlRatio(control);
            return;
        }

        // Baseline, measured first and in the same run.
        double baseLatNanos;
        double baseBw;
        String baseName;
        if (!latArg.isEmpty() && !bwArg.isEmpty()) {
            baseLatNanos = Double.parseDouble(latArg) * 1e3;
            baseBw = Double.parseDouble(bwArg);
            baseName = "given (perftest)";
        } else {
            baseLatNanos = socketRoundTripP50Nanos();
            SocketBaseline.streamThroughput(pointNanos);
            baseBw = SocketBaseline.streamThroughput(Math.max(pointNanos, 1_000_000_000L));
            baseName = "plain socket";
        }
        System.out.printf("baseline (%s): 64 B round trip p50 %.1f us, stream %.0f MiB/s%n", baseName, baseLatNanos / 1e3, baseBw);

        // 1. Queue-depth sweep.
        Map<Integer, ReadLoad.Point[]> sweep = sweep(provider, serverOptions, clientOptions, depths, pointNanos);
        System.out.printf("%n%-8s %6s %11s %11s %11s %14s %14s%n", "size", "depth", "p50 us", "p99 us", "MiB/s",
                "client s/GiB", "server s/GiB");
        for (int size : SIZES) {
            ReadLoad.Point[] points = sweep.get(size);
            for (int i = 0; i < depths.size(); i++) {
                ReadLoad.Point p = points[i];
                long[] q = Samples.percentiles(p.latencies());
                double gib = p.bytes() / (double) (1L << 30);
                System.out.printf("%-8s %6d %11.1f %11.1f %11.1f %14.3f %14.3f%n", label(size), depths.get(i), q[0] / 1e3,
                        q[1] / 1e3, p.mibs(), p.clientCpuNanos() / 1e9 / gib, p.serverCpuNanos() / 1e9 / gib);
            }
        }

        // 1b. 64 B READs posted and waited for on one thread (as ib_read_lat), in each completion mode.
        Map<String, ReadLoad.LatencyRun> waited = waitedLatency(provider, serverOptions, clientOptions,
                latRounds);

        // 2. Control round trips under each shape.
        Map<String, long[]> control = controlShapes(provider, serverOptions, clientOptions, policy, rounds, bursts);
        printControl(control);

        // 3. Fan-in and fan-out.
        // A failed fan shape (rxe under TCG can exceed its retries with many peers) is reported in
        // its row; the other figures, the charts and the ratio lines still come, then the run fails.
        Map<String, Object> fans = new LinkedHashMap<>();
        for (boolean inward : new boolean[] {true, false}) {
            String what = inward ? "fan-in: 1 server, " + peers + " clients" : "fan-out: 1 client, " + peers + " servers";
            try {
                fans.put(what, fan(provider, serverOptions, clientOptions, peers, fanNanos, inward));
            } catch (Exception e) {
                fans.put(what, e);
            }
        }
        System.out.printf("%n%-30s %12s %12s %12s %9s%n", "fan (" + label(FAN_BLOCK) + " READs, depth " + FAN_DEPTH + ")",
                "total MiB/s", "min MiB/s", "max MiB/s", "min/max");
        boolean fanFailed = false;
        for (Map.Entry<String, Object> e : fans.entrySet()) {
            if (e.getValue() instanceof double[] mibs) {
                printFan(e.getKey(), mibs);
            } else {
                fanFailed = true;
                System.out.printf("%-30s failed: %s%n", e.getKey(), e.getValue());
            }
        }

        charts(out, provider.name(), sweep, depths, control);
        System.out.printf("%ncharts: %s%n", out.toAbsolutePath());

        long read64p50 = Samples.percentiles(sweep.get(64)[0].latencies())[0];
        double bw64k = 0;
        for (ReadLoad.Point p : sweep.get(64 << 10)) {
            bw64k = Math.max(bw64k, p.mibs());
        }
        printControlRatio(control);
        printWaited(waited, completion, baseLatNanos, read64p50);
        System.out.printf("load-shapes: read-64KiB-bw/baseline = %.2fx%n", bw64k / baseBw);
        if (fanFailed) {
            throw new IllegalStateException("a fan shape failed (its row above); the other figures stand");
        }
    }

    /**
     * On verbs each completion mode in turn (fresh nodes each), else the provider once: the p50/p99 of
     * {@code rounds} 64 B READs each waited for on the posting thread, and the CPU they cost.
     */
    private static Map<String, ReadLoad.LatencyRun> waitedLatency(TransportProvider provider,
            NodeOptions serverOptions, NodeOptions clientOptions, int rounds) throws Exception {
        Map<String, ReadLoad.LatencyRun> runs = new LinkedHashMap<>();
        List<VerbsOptions.Completion> modes = provider.name().equals("verbs")
                ? List.of(VerbsOptions.Completion.values()) : List.of(serverOptions.verbs().completion());
        for (VerbsOptions.Completion mode : modes) {
            String name = provider.name().equals("verbs") ? "completion=" + mode.name().toLowerCase(java.util.Locale.ROOT)
                    : provider.name();
            runs.put(name, ReadLoad.waitedLatencyRun(provider, serverOptions.withVerbs(serverOptions.verbs().withCompletion(mode)),
                    clientOptions.withVerbs(clientOptions.verbs().withCompletion(mode)), 64, Math.max(100, rounds / 10), rounds));
        }
        return runs;
    }

    /** A plain socket's 64 B round trip, p50, after a warm-up: the baseline where perftest's is not given. */
    private static double socketRoundTripP50Nanos() throws Exception {
        SocketBaseline.pingPong(2000, 64);
        return Samples.percentiles(SocketBaseline.pingPong(20000, 64))[0];
    }

    /**
     * The waited 64 B READ table and its ratio lines: {@code read-64B-p50/baseline} is the run in
     * {@code main}'s mode (perftest's method: post, then wait on the same thread), one line per mode,
     * and the callback-driven depth-1 point of the sweep ({@code callbackP50}, NaN when not run).
     */
    private static void printWaited(Map<String, ReadLoad.LatencyRun> waited, VerbsOptions.Completion main,
                                    double baseLatNanos, double callbackP50) {
        System.out.printf("%n%-34s %10s %10s %16s%n", "64 B READ, posting thread waits", "p50 us", "p99 us", "cpu us per READ");
        for (Map.Entry<String, ReadLoad.LatencyRun> e : waited.entrySet()) {
            long[] p = e.getValue().percentiles();
            System.out.printf("%-34s %10.1f %10.1f %16.1f%n", e.getKey(),
                    p[0] / 1e3, p[1] / 1e3, e.getValue().cpuNanos() / 1e3 / e.getValue().rounds());
        }
        ReadLoad.LatencyRun headline = waited.getOrDefault("completion=" + main.name().toLowerCase(java.util.Locale.ROOT),
                waited.values().iterator().next());
        System.out.printf("load-shapes: read-64B-p50/baseline = %.2fx%n", headline.percentiles()[0] / baseLatNanos);
        for (Map.Entry<String, ReadLoad.LatencyRun> e : waited.entrySet()) {
            System.out.printf("load-shapes: read-64B-p50-%s/baseline = %.2fx (cpu %.1f us per READ)%n",
                    e.getKey().replace("completion=", ""), e.getValue().percentiles()[0] / baseLatNanos,
                    e.getValue().cpuNanos() / 1e3 / e.getValue().rounds());
        }
        if (!Double.isNaN(callbackP50)) {
            System.out.printf("load-shapes: read-64B-p50-callbacks/baseline = %.2fx%n", callbackP50 / baseLatNanos);
        }
    }

    private static Map<Integer, ReadLoad.Point[]> sweep(TransportProvider provider, NodeOptions serverOptions,
                                                        NodeOptions clientOptions, List<Integer> depths, long nanos)
            throws Exception {
        Map<Integer, ReadLoad.Point[]> result = new LinkedHashMap<>();
        int maxDepth = depths.get(depths.size() - 1);
        try (Node server = provider.createNode(serverOptions);
             Node client = provider.createNode(clientOptions)) {
            server.listen(ch -> new ChannelHandler() { });
            MemoryRegion source = server.register(ByteBuffer.allocateDirect(16 << 20));
            MemoryRegion landing = client.register(ByteBuffer.allocateDirect(64 << 20), EnumSet.of(Access.LOCAL_WRITE));
            Channel channel = client.connect(server.localAddress(), maxDepth, new ChannelHandler() { }).get(60, TimeUnit.SECONDS);
            ReadLoad.atDepth(channel, source, landing, 64, 1, nanos, client, server); // warm-up
            ReadLoad.atDepth(channel, source, landing, 64 << 10, Math.min(8, maxDepth), nanos, client, server);
            for (int size : SIZES) {
                ReadLoad.Point[] points = new ReadLoad.Point[depths.size()];
                for (int i = 0; i < depths.size(); i++) {
                    points[i] = ReadLoad.atDepth(channel, source, landing, size, depths.get(i), nanos, client, server);
                }
                result.put(size, points);
            }
        }
        return result;
    }

    private static Map<String, long[]> controlShapes(TransportProvider provider, NodeOptions serverOptions,
                                                     NodeOptions clientOptions, PolicyOptions options, int rounds,
                                                     int bursts) throws Exception {
        Map<String, long[]> result = new LinkedHashMap<>();
        try (PolicyBenchmark.Pair pair = new PolicyBenchmark.Pair(provider, options, serverOptions, clientOptions);
             PolicyBenchmark.Pair back = pair.reverse(options)) {
            RemoteBlock block = pair.block(BULK);
            MemoryRegion landing = pair.landing(BULK);
            PeerConnection peer = pair.peer();
            RemoteBlock backBlock = back.block(BULK);
            MemoryRegion backLanding = back.landing(BULK);
            PeerConnection backPeer = back.peer();
            // Connect, warm up, and READ the first block (always verified) before the landing is shared.
            PolicyBenchmark.roundTrips(peer, rounds / 4);
            peer.read(block, landing, 0).get(60, TimeUnit.SECONDS);
            backPeer.read(backBlock, backLanding, 0).get(60, TimeUnit.SECONDS);
            result.put("idle", PolicyBenchmark.roundTrips(peer, rounds));

            Bulk forward = new Bulk(peer, block, landing);
            result.put("saturating bulk READs", forward.during(() -> PolicyBenchmark.roundTrips(peer, rounds)));

            Bulk both = new Bulk(peer, block, landing);
            Bulk reverse = new Bulk(backPeer, backBlock, backLanding);
            reverse.start();
            try {
                result.put("bulk both ways", both.during(() -> PolicyBenchmark.roundTrips(peer, rounds)));
            } finally {
                reverse.stop();
            }

            List<long[]> burstSamples = new ArrayList<>();
            for (int b = 0; b < bursts; b++) {
                AtomicInteger left = new AtomicInteger(BURST);
                List<CompletableFuture<Void>> reads = new ArrayList<>();
                for (int i = 0; i < BURST; i++) {
                    CompletableFuture<Void> read = peer.read(block, landing, 0);
                    read.whenComplete((ok, e) -> left.decrementAndGet());
                    reads.add(read);
                }
                burstSamples.add(PolicyBenchmark.roundTrips(peer, 100 * rounds, () -> left.get() == 0));
                CompletableFuture.allOf(reads.toArray(new CompletableFuture[0])).get(120, TimeUnit.SECONDS);
                PolicyBenchmark.roundTrips(peer, 50); // back to idle before the next burst
            }
            result.put("burst of " + BURST + " x " + label(BULK) + " READs", concat(burstSamples));
        }
        return result;
    }

    /** Bulk READ streams on one peer connection, kept going until stopped. */
    private static final class Bulk {
        private final PeerConnection peer;
        private final RemoteBlock block;
        private final MemoryRegion landing;
        private final AtomicBoolean running = new AtomicBoolean(true);
        private final AtomicLong bytes = new AtomicLong();
        private final AtomicReference<Throwable> failure = new AtomicReference<>();
        private final CountDownLatch stopped = new CountDownLatch(BULK_STREAMS);

        Bulk(PeerConnection peer, RemoteBlock block, MemoryRegion landing) {
            this.peer = peer;
            this.block = block;
            this.landing = landing;
        }

        void start() throws Exception {
            for (int i = 0; i < BULK_STREAMS; i++) {
                PolicyBenchmark.bulk(peer, block, landing, running, bytes, failure, stopped);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (bytes.get() < 4L * BULK && System.nanoTime() < deadline) { // running at full rate
                Thread.onSpinWait();
            }
        }

        void stop() throws Exception {
            running.set(false);
            stopped.await(120, TimeUnit.SECONDS);
            if (failure.get() != null) {
                throw new IllegalStateException("bulk READ failed", failure.get());
            }
        }

        long[] during(java.util.concurrent.Callable<long[]> measure) throws Exception {
            start();
            try {
                return measure.call();
            } finally {
                stop();
            }
        }
    }

    /** Per-peer MiB/s with all peers loaded at once: fan-in (one server node) or fan-out (one client node). */
    private static double[] fan(TransportProvider provider, NodeOptions serverOptions, NodeOptions clientOptions, int peers,
                                long nanos, boolean in) throws Exception {
        List<Node> nodes = new ArrayList<>();
        try {
            Node hub = provider.createNode(in ? serverOptions : clientOptions);
            nodes.add(hub);
            if (in) {
                hub.listen(ch -> new ChannelHandler() { });
            }
            MemoryRegion hubSource = in ? hub.register(ByteBuffer.allocateDirect(16 << 20)) : null;
            List<Channel> channels = new ArrayList<>();
            List<MemoryRegion> sources = new ArrayList<>();
            List<MemoryRegion> landings = new ArrayList<>();
            for (int i = 0; i < peers; i++) {
                Node other = provider.createNode(in ? clientOptions : serverOptions);
                nodes.add(other);
                Node reader = in ? other : hub;
                Node serving = in ? hub : other;
                if (!in) {
                    other.listen(ch -> new ChannelHandler() { });
                    sources.add(other.register(ByteBuffer.allocateDirect(16 << 20)));
                } else {
                    sources.add(hubSource);
                }
                landings.add(reader.register(ByteBuffer.allocateDirect(FAN_DEPTH * FAN_BLOCK), EnumSet.of(Access.LOCAL_WRITE)));
                channels.add(reader.connect(serving.localAddress(), FAN_DEPTH, new ChannelHandler() { }).get(60, TimeUnit.SECONDS));
            }
            ReadLoad.concurrently(channels, sources, landings, FAN_BLOCK, FAN_DEPTH, nanos / 4); // warm-up
            return ReadLoad.concurrently(channels, sources, landings, FAN_BLOCK, FAN_DEPTH, nanos);
        } finally {
            for (Node node : nodes) {
                node.close();
            }
        }
    }

    private static void printControl(Map<String, long[]> control) {
        System.out.printf("%n%-34s %9s %9s %9s %8s%n", "control round trip", "p50 us", "p99 us", "p999 us", "samples");
        for (Map.Entry<String, long[]> e : control.entrySet()) {
            long[] q = Samples.percentiles(e.getValue(), 0.5, 0.99, 0.999);
            System.out.printf("%-34s %9.1f %9.1f %9.1f %8d%n", e.getKey(), q[0] / 1e3, q[1] / 1e3, q[2] / 1e3, e.getValue().length);
        }
    }

    private static void printControlRatio(Map<String, long[]> control) {
        long idleP99 = Samples.percentiles(control.get("idle"))[1];
        long bulkP99 = Samples.percentiles(control.get("saturating bulk READs"))[1];
        System.out.printf("load-shapes: control-p99-under-bulk/idle = %.2fx (goal <= 2.00x)%n", (double) bulkP99 / idleP99);
    }

    private static void printFan(String what, double[] mibs) {
        double total = 0;
        double min = Double.MAX_VALUE;
        double max = 0;
        for (double m : mibs) {
            total += m;
            min = Math.min(min, m);
            max = Math.max(max, m);
        }
        System.out.printf("%-30s %12.1f %12.1f %12.1f %9.2f%n", what, total, min, max, max == 0 ? 0 : min / max);
    }

    private static void charts(Path out, String provider, Map<Integer, ReadLoad.Point[]> sweep, List<Integer> depths,
                               Map<String, long[]> control) throws Exception {
        String[] x = depths.stream().map(String::valueOf).toArray(String[]::new);
        Chart p50 = new Chart(provider + ": READ p50 latency by queue depth", "us", x, true);
        Chart p99 = new Chart(provider + ": READ p99 latency by queue depth", "us", x, true);
        Chart bw = new Chart(provider + ": READ throughput by queue depth", "MiB/s", x, true);
        for (Map.Entry<Integer, ReadLoad.Point[]> e : sweep.entrySet()) {
            ReadLoad.Point[] points = e.getValue();
            double[] a = new double[points.length];
            double[] b = new double[points.length];
            double[] c = new double[points.length];
            for (int i = 0; i < points.length; i++) {
                long[] q = Samples.percentiles(points[i].latencies());
                a[i] = q[0] / 1e3;
                b[i] = q[1] / 1e3;
                c[i] = points[i].mibs();
            }
            p50.line(label(e.getKey()), a);
            p99.line(label(e.getKey()), b);
            bw.line(label(e.getKey()), c);
        }
        p50.write(out.resolve(provider + "-read-p50.png"));
        p99.write(out.resolve(provider + "-read-p99.png"));
        bw.write(out.resolve(provider + "-read-throughput.png"));
        String[] quantiles = {"p50", "p99", "p999"};
        Chart ctl = new Chart(provider + ": control round trip by load shape", "us", quantiles, true);
        for (Map.Entry<String, long[]> e : control.entrySet()) {
            long[] q = Samples.percentiles(e.getValue(), 0.5, 0.99, 0.999);
            ctl.line(e.getKey(), new double[] {q[0] / 1e3, q[1] / 1e3, q[2] / 1e3});
        }
        ctl.write(out.resolve(provider + "-control.png"));
    }

    /** {@code name=N} milliseconds, positive, or {@code fallback}. */
    private static Duration millis(String[] args, String name, Duration fallback) {
        String v = Args.get(args, name, String.valueOf(fallback.toMillis()));
        try {
            long ms = Long.parseLong(v);
            if (ms > 0) {
                return Duration.ofMillis(ms);
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(name + "=" + v + ": expected a positive number of milliseconds");
    }

    private static long[] concat(List<long[]> parts) {
        int n = 0;
        for (long[] p : parts) {
            n += p.length;
        }
        long[] all = new long[n];
        int at = 0;
        for (long[] p : parts) {
            System.arraycopy(p, 0, all, at, p.length);
            at += p.length;
        }
        return all;
    }

    private static String label(int size) {
        return size >= 1 << 20 ? (size >> 20) + " MiB" : size >= 1 << 10 ? (size >> 10) + " KiB" : size + " B";
    }
}

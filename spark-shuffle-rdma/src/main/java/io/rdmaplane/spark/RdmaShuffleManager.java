package io.rdmaplane.spark;

import io.rdmaplane.rdma.config.Conf;
import io.rdmaplane.rdma.config.PolicyKeys;
import io.rdmaplane.rdma.config.TransportKeys;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.VerbsOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.spark.fetch.RdmaBlockStoreClient;
import io.rdmaplane.spark.registry.ExecutorRegistry;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.network.shuffle.BlockStoreClient;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleManager;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.BlockManagerId;
import org.apache.spark.storage.ShuffleBlockId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Tuple2;
import scala.Tuple3;
import scala.collection.Iterator;
import scala.collection.Seq;

/**
 * Spark's sort shuffle with a faster way to the same bytes: set {@code spark.shuffle.manager}
 * to this class. Everything is delegated to a {@link SortShuffleManager}; map outputs are also
 * published for one-sided RDMA READ, and reducers fetch remote blocks over RDMA, falling back to
 * Netty per block.
 *
 * <p>Three fallback levels: the application (disabled, the external shuffle service enabled (it is
 * then the read path), wire encryption asked for while the shuffle bytes are plaintext, no usable provider, no registry address, or any start-up failure: this JVM
 * behaves exactly as sort shuffle, one WARN line says why),
 * the shuffle (more blocks than {@code maxBlocksPerShuffle}: one INFO line), and the block (in
 * the RDMA block client). A bad setting is an error naming the key, never a silent fallback.
 */
public final class RdmaShuffleManager implements ShuffleManager {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaShuffleManager.class);
    private static final String PREFIX = SparkRdmaConfig.REGISTRY.prefix();
    static final String NETWORK_CRYPTO = "spark.network.crypto.enabled";
    static final String IO_ENCRYPTION = "spark.io.encryption.enabled";
    static final String SHUFFLE_SERVICE = "spark.shuffle.service.enabled";

    private final SparkConf conf;
    private final boolean isDriver;
    private final SortShuffleManager sort;
    private final Conf settings;
    private final PolicyMetrics policyMetrics = new PolicyMetrics();
    private final ShuffleMetrics metrics;
    /** The executor's reconnect attempts with their times and planned delays, for {@link #executorReport()}. */
    private final ReconnectLog reconnects = new ReconnectLog();
    final ExecutorRegistry registry; // the driver's, null elsewhere or when off
    private final Object lock = new Object();
    /** Why this JVM behaves as sort shuffle, or null while RDMA is (or may still be) on. */
    private volatile String off;
    private volatile ExecutorRuntime runtime;
    private volatile boolean runtimeTried;
    private volatile RdmaMetricsSource source;
    private volatile boolean stopped;

    /**
     * Spark calls this on the driver ({@code isDriver}) and on every executor.
     *
     * @throws io.rdmaplane.rdma.config.ConfigException when a {@code spark.shuffle.rdma.*} setting is unknown or bad
     */
    public RdmaShuffleManager(SparkConf conf, boolean isDriver) {
        this.conf = conf;
        this.isDriver = isDriver;
        this.settings = SparkRdmaConfig.validated(conf);
        this.sort = new SortShuffleManager(conf);
        this.metrics = new ShuffleMetrics(policyMetrics);
        ExecutorRegistry started = null;
        String reason = !settings.get(SparkRdmaConfig.ENABLED) ? PREFIX + "enabled=false; set it to true to use RDMA"
                : conf.getBoolean(SHUFFLE_SERVICE, false) ? SHUFFLE_SERVICE + "=true: the external shuffle service is the read"
                        + " path of this application (it serves map outputs after their executor is gone, and when it has"
                        + " dropped the application a fetch fails as with sort shuffle), so RDMA does not carry its shuffle;"
                        + " set " + SHUFFLE_SERVICE + "=false to use RDMA"
                : encryptionConflict(conf);
        if (reason != null) {
            // off already: nothing starts
        } else if (isDriver) {
            try {
                started = startRegistry();
            } catch (Exception | LinkageError e) {
                reason = "the driver's executor registry did not start (" + e + "); check " + PREFIX
                        + "registry.port, " + PREFIX + "registry.provider and spark.driver.host, or set " + PREFIX + "enabled=false";
            }
        } else if (settings.get(SparkRdmaConfig.REGISTRY_ADDRESS).isEmpty()) {
            reason = PREFIX + "registry.address is missing in this executor's conf, so the driver did not start its"
                    + " registry; set spark.shuffle.manager=" + RdmaShuffleManager.class.getName()
                    + " for the whole application (driver too)";
        }
        this.registry = started;
        if (started != null) {
            listenForRemovals(conf);
        }
        if (reason != null) {
            if (isDriver) {
                conf.remove(SparkRdmaConfig.REGISTRY.fullName(SparkRdmaConfig.REGISTRY_ADDRESS));
            }
            appFallback(reason);
        } else if (!isDriver && SparkLine.CURRENT.managerCreatedAfterEnv()) {
            // Spark 4 builds an executor's manager once its environment is up, before tasks come: start the
            // transport now, off the task path (probing devices and registering take a second or two); a
            // map task waits for it only when it commits its output, a reduce task that comes sooner waits.
            // Spark 3.5 builds it inside the environment's construction (no SparkEnv yet): there the first
            // task to need it starts it.
            Thread starter = new Thread(this::runtime, "rdma-shuffle-start");
            starter.setDaemon(true);
            starter.start();
        }
    }

    /**
     * Why RDMA must not carry this application's shuffle, or null. The RDMA data plane does not
     * encrypt: where the operator asked for encrypted traffic it may carry only bytes Spark
     * encrypted already (IO encryption encrypts shuffle files, so the bytes a READ takes).
     */
    private static String encryptionConflict(SparkConf conf) {
        if (!conf.getBoolean(NETWORK_CRYPTO, false)) {
            return null;
        }
        if (conf.getBoolean(IO_ENCRYPTION, false)) {
            LOG.info("RDMA shuffle: {}=true and {}=true: RDMA carries the shuffle bytes as Spark wrote them, already"
                    + " encrypted by its IO encryption (the RDMA data plane itself does not encrypt)", NETWORK_CRYPTO, IO_ENCRYPTION);
            return null;
        }
        return NETWORK_CRYPTO + "=true asks for encrypted shuffle traffic, but with " + IO_ENCRYPTION + "=false the shuffle"
                + " bytes are plaintext and the RDMA data plane does not encrypt; set " + IO_ENCRYPTION + "=true (RDMA then"
                + " carries the already-encrypted bytes) to use RDMA, or " + PREFIX + "enabled=false to silence this";
    }

    private ExecutorRegistry startRegistry() throws TransportException {
        String bindHost = firstSet(conf.get("spark.driver.bindAddress", null), conf.get("spark.driver.host", null),
                System.getenv("SPARK_LOCAL_IP"));
        if (bindHost == null) {
            bindHost = localAddress();
        }
        NodeOptions base = TransportKeys.nodeOptions(settings, bindHost);
        NodeOptions options = new NodeOptions(new InetSocketAddress(bindHost, settings.get(SparkRdmaConfig.REGISTRY_PORT)),
                base.maxMessageSize(), base.operationTimeout(), base.acceptQueueDepth(), base.idleTimeout(), VerbsOptions.defaults());
        ExecutorRegistry started = new ExecutorRegistry(Providers.select(settings.get(SparkRdmaConfig.REGISTRY_PROVIDER)), options,
                PolicyKeys.policyOptions(settings, secret()), PolicyKeys.serverLimits(settings), policyMetrics);
        // Executors reach the driver by spark.driver.host; the registry listens there (or on the bind address).
        String advertised = firstSet(conf.get("spark.driver.host", null), bindHost);
        String address = SparkRdmaConfig.format(new InetSocketAddress(advertised, started.address().getPort()));
        // Executors fetch the driver's conf after this (CoarseGrainedSchedulerBackend's lazy sparkProperties).
        conf.set(SparkRdmaConfig.REGISTRY.fullName(SparkRdmaConfig.REGISTRY_ADDRESS), address);
        LOG.info("RDMA shuffle: executor registry listening at {}", address);
        return started;
    }

    private void appFallback(String reason) {
        off = reason;
        metrics.fallbackApp().inc();
        LOG.warn("RDMA shuffle is OFF in this {} JVM, which uses Spark's sort shuffle: {}",
                isDriver ? "driver" : "executor", reason);
    }

    static final String EXTRA_LISTENERS = "spark.extraListeners";

    /**
     * Adds {@link ExecutorRemovals} to {@code spark.extraListeners}, a public setting Spark reads when its
     * SparkContext starts its listener bus, after it built this manager: the listener hears every removal
     * from the application's start, before its first shuffle too.
     */
    private static void listenForRemovals(SparkConf conf) {
        String listener = ExecutorRemovals.class.getName();
        String listed = conf.get(EXTRA_LISTENERS, "").trim();
        if (java.util.Arrays.stream(listed.split(",")).map(String::trim).noneMatch(listener::equals)) {
            conf.set(EXTRA_LISTENERS, listed.isEmpty() ? listener : listed + "," + listener);
        }
    }

    /**
     * Tells the driver's registry which executors Spark removed (lost, killed, decommissioned), so a
     * reducer whose connection to one is refused falls back to Netty at once. (Not on a block manager's
     * removal: a live executor re-registers its block manager under the same id.) Spark creates it from
     * {@code spark.extraListeners} (public, with no arguments); it then tells the registry of the driver's
     * manager, found through {@link SparkEnv} when a removal comes.
     */
    public static final class ExecutorRemovals extends SparkListener {
        private final ExecutorRegistry registry; // null: the driver's manager's

        public ExecutorRemovals() {
            this(null);
        }

        ExecutorRemovals(ExecutorRegistry registry) {
            this.registry = registry;
        }

        @Override
        public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
            ExecutorRegistry to = registry != null ? registry : driverRegistry();
            if (to != null) {
                to.forget(removed.executorId());
            }
        }

        private static ExecutorRegistry driverRegistry() {
            SparkEnv env = SparkEnv.get();
            return env != null && env.shuffleManager() instanceof RdmaShuffleManager manager ? manager.registry : null;
        }
    }

    // ---------------------------------------------------------------- ShuffleManager

    @Override
    public <K, V, C> ShuffleHandle registerShuffle(int shuffleId, ShuffleDependency<K, V, C> dependency) {
        registerSource();
        @SuppressWarnings("unchecked")
        BaseShuffleHandle<K, V, C> base = (BaseShuffleHandle<K, V, C>) sort.registerShuffle(shuffleId, dependency);
        boolean rdma = off == null;
        if (rdma) {
            long maps = dependency.rdd().getNumPartitions();
            long partitions = dependency.partitioner().numPartitions();
            long limit = settings.get(SparkRdmaConfig.MAX_BLOCKS_PER_SHUFFLE);
            if (maps * partitions > limit) { // both are ints: the product fits a long
                rdma = false;
                metrics.fallbackShuffle().inc();
                LOG.info("RDMA shuffle: shuffle {} uses Spark's standard path: {} maps x {} partitions = {} blocks is over {}"
                        + "maxBlocksPerShuffle={}", shuffleId, maps, partitions, maps * partitions, PREFIX, limit);
            }
        }
        return new RdmaShuffleHandle<>(base, rdma);
    }

    @Override
    public <K, V> ShuffleWriter<K, V> getWriter(ShuffleHandle handle, long mapId, TaskContext context,
                                                ShuffleWriteMetricsReporter writeMetrics) {
        registerSource();
        if (!(handle instanceof RdmaShuffleHandle<?, ?, ?> ours)) {
            return sort.getWriter(handle, mapId, context, writeMetrics);
        }
        ShuffleWriter<K, V> writer = sort.getWriter(ours.delegate(), mapId, context, writeMetrics);
        if (!ours.rdma() || off != null) {
            return writer;
        }
        // The runtime is wanted when the map output is committed, not before: on an executor's first task it
        // may still be starting (rdma-shuffle-start), and the map's own work does not wait for it.
        return new RdmaShuffleWriter<>(writer, handle.shuffleId(), mapId,
                (IndexShuffleBlockResolver) sort.shuffleBlockResolver(), () -> {
                    ExecutorRuntime rt = runtime();
                    return rt != null ? rt.store() : null;
                });
    }

    @Override
    public <K, C> ShuffleReader<K, C> getReader(ShuffleHandle handle, int startMapIndex, int endMapIndex,
                                                int startPartition, int endPartition, TaskContext context,
                                                ShuffleReadMetricsReporter readMetrics) {
        registerSource();
        if (!(handle instanceof RdmaShuffleHandle<?, ?, ?> ours)) {
            return sort.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, readMetrics);
        }
        @SuppressWarnings("unchecked")
        BaseShuffleHandle<K, ?, C> base = (BaseShuffleHandle<K, ?, C>) ours.delegate();
        ExecutorRuntime rt = ours.rdma() ? runtime() : null;
        // A push-merged shuffle (YARN's external shuffle service) is read as Spark reads it.
        if (rt == null || base.dependency().isShuffleMergeFinalizedMarked()) {
            return sort.getReader(base, startMapIndex, endMapIndex, startPartition, endPartition, context, readMetrics);
        }
        int shuffleId = handle.shuffleId();
        // Materialized once: the fetcher iterates it and the RDMA client groups its blocks by executor.
        List<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> blocks = new ArrayList<>();
        Iterator<Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>>> sizes = SparkEnv.get().mapOutputTracker()
                .getMapSizesByExecutorId(shuffleId, startMapIndex, endMapIndex, startPartition, endPartition);
        while (sizes.hasNext()) {
            blocks.add(sizes.next());
        }
        Map<String, List<ShuffleBlockId>> byExecutor = new LinkedHashMap<>();
        Map<String, String> hosts = new LinkedHashMap<>(); // Spark's own view of where each executor is
        for (Tuple2<BlockManagerId, Seq<Tuple3<BlockId, Object, Object>>> entry : blocks) {
            String executor = entry._1().executorId();
            if (executor.equals(rt.executorId())) {
                continue; // local blocks: the fetcher reads them from this executor's disk
            }
            Iterator<Tuple3<BlockId, Object, Object>> it = entry._2().iterator();
            while (it.hasNext()) {
                if (it.next()._1() instanceof ShuffleBlockId id) {
                    byExecutor.computeIfAbsent(executor, e -> new ArrayList<>()).add(id);
                    hosts.put(executor, entry._1().host());
                }
            }
        }
        return new RdmaShuffleReader<>(base, blocks, context, readMetrics, () -> newClient(rt, shuffleId, byExecutor, hosts));
    }

    /**
     * The RDMA block client of one reduce task: addresses of the executors it reads from, asked for
     * together, each used only if it is on the host of the executor's BlockManagerId.
     */
    private BlockStoreClient newClient(ExecutorRuntime rt, int shuffleId, Map<String, List<ShuffleBlockId>> byExecutor,
                                       Map<String, String> hosts) {
        Map<String, InetSocketAddress> addresses = byExecutor.isEmpty() ? Map.of() : rt.lookup(hosts);
        return new RdmaBlockStoreClient(rt.policy(), rt.pool(), rt.node(), SparkEnv.get().blockManager().blockStoreClient(),
                addresses::get, shuffleId, byExecutor, metrics);
    }

    @Override
    public boolean unregisterShuffle(int shuffleId) {
        ExecutorRuntime rt = runtime;
        if (rt != null) {
            try {
                rt.store().removeShuffle(shuffleId);
            } catch (RuntimeException e) {
                LOG.warn("RDMA shuffle: releasing the registered map outputs of shuffle {} failed", shuffleId, e);
            }
        }
        return sort.unregisterShuffle(shuffleId);
    }

    @Override
    public ShuffleBlockResolver shuffleBlockResolver() {
        return sort.shuffleBlockResolver();
    }

    @Override
    public void stop() {
        ExecutorRuntime rt;
        synchronized (lock) {
            stopped = true;
            runtimeTried = true;
            rt = runtime;
            runtime = null;
        }
        if (rt != null) {
            rt.close();
        }
        if (registry != null) {
            registry.close();
        }
        RdmaMetricsSource s = source;
        SparkEnv env = SparkEnv.get();
        if (s != null && env != null) {
            env.metricsSystem().removeSource(s);
        }
        sort.stop();
    }

    // ---------------------------------------------------------------- the executor runtime

    /** The running runtime of this JVM, started on first use; null when RDMA is off here. */
    private ExecutorRuntime runtime() {
        if (runtimeTried) {
            return runtime;
        }
        synchronized (lock) {
            if (!runtimeTried) {
                if (off == null && !stopped) {
                    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
                    long cpu = threads.getCurrentThreadCpuTime(); // -1 where unsupported: counted as 0
                    long wall = System.nanoTime();
                    runtime = startRuntime();
                    metrics.started(System.nanoTime() - wall, cpu < 0 ? 0 : threads.getCurrentThreadCpuTime() - cpu);
                }
                runtimeTried = true;
            }
            return runtime;
        }
    }

    private ExecutorRuntime startRuntime() {
        String providerName = settings.get(TransportKeys.PROVIDER);
        SparkEnv env = SparkEnv.get();
        TransportProvider provider;
        try {
            // probed with this executor's node settings (verbs: where its native library is extracted)
            provider = Providers.select(providerName, TransportKeys.nodeOptions(settings, bindHost(env)));
        } catch (TransportException | IllegalArgumentException e) {
            appFallback(PREFIX + "provider=" + providerName + " is not usable here (" + e.getMessage() + "); set " + PREFIX
                    + "provider=auto (verbs when an RDMA device is usable, else tcp) or " + PREFIX + "enabled=false");
            return null;
        }
        try {
            InetSocketAddress registryAddress = SparkRdmaConfig.parseAddress(settings.get(SparkRdmaConfig.REGISTRY_ADDRESS));
            return ExecutorRuntime.start(env.executorId(), bindHost(env), registryAddress, provider, settings, secret(),
                    policyMetrics, metrics, reconnects);
        } catch (Exception | LinkageError e) {
            LOG.debug("RDMA shuffle start-up failure", e);
            appFallback("the RDMA shuffle runtime did not start (" + e + "); check " + PREFIX + "port, " + PREFIX
                    + "provider and the driver's registry at " + settings.get(SparkRdmaConfig.REGISTRY_ADDRESS)
                    + ", or set " + PREFIX + "enabled=false");
            return null;
        }
    }

    /** Where this executor's data node listens: the host its block manager advertises (Netty's, so reachable). */
    private String bindHost(SparkEnv env) {
        String host = null;
        if (env.blockManager() != null && env.blockManager().blockManagerId() != null) {
            host = env.blockManager().blockManagerId().host();
        }
        host = firstSet(System.getenv("SPARK_LOCAL_IP"), host, isDriver ? conf.get("spark.driver.host", null) : null);
        return host != null ? host : localAddress();
    }

    /** The application's secret when {@code spark.authenticate} is on, else null. */
    private byte[] secret() {
        if (isDriver && !SparkLine.CURRENT.managerCreatedAfterEnv()) {
            return driverSecretBeforeEnv();
        }
        SparkEnv env = SparkEnv.get();
        if (env != null) {
            return env.securityManager().isAuthenticationEnabled()
                    ? env.securityManager().getSecretKey().getBytes(StandardCharsets.UTF_8) : null;
        }
        if (conf.getBoolean("spark.authenticate", false)) {
            throw new IllegalStateException("spark.authenticate is on but Spark's environment is not set up to give its secret");
        }
        return null;
    }

    /**
     * Spark 3.5 creates the driver's manager (and so its registry) before its SecurityManager exists: the secret
     * is the one the operator gave Spark in {@code spark.authenticate.secret} (which Spark's standalone mode
     * requires anyway). The driver's own runtime (local mode) takes it too, so both ends agree; executors,
     * started later, take their SparkEnv's, which in standalone mode is that same secret.
     */
    private byte[] driverSecretBeforeEnv() {
        if (!conf.getBoolean("spark.authenticate", false)) {
            return null;
        }
        String secret = conf.get("spark.authenticate.secret", null);
        if (secret == null || secret.isEmpty()) {
            throw new IllegalStateException("spark.authenticate is on, and on Spark 3.5 the RDMA shuffle's driver takes the"
                    + " secret from spark.authenticate.secret (its SecurityManager does not exist yet), which is not set;"
                    + " set spark.authenticate.secret");
        }
        return secret.getBytes(StandardCharsets.UTF_8);
    }

    private void registerSource() {
        if (source != null) {
            return;
        }
        SparkEnv env = SparkEnv.get();
        if (env == null || env.metricsSystem() == null) {
            return;
        }
        synchronized (lock) {
            if (source == null && !stopped) {
                RdmaMetricsSource s = new RdmaMetricsSource(metrics.registry());
                env.metricsSystem().registerSource(s);
                source = s;
            }
        }
    }

    private static String firstSet(String... values) {
        for (String v : values) {
            if (v != null && !v.isBlank()) {
                return v;
            }
        }
        return null;
    }

    private static String localAddress() {
        try {
            return InetAddress.getLocalHost().getHostAddress();
        } catch (UnknownHostException e) {
            return InetAddress.getLoopbackAddress().getHostAddress();
        }
    }

    // ---------------------------------------------------------------- reports

    /** Why RDMA is off in this JVM, or null while it is on (or not yet started). */
    public String offReason() {
        return off;
    }

    /** The provider this JVM's runtime runs on, or null when it is not running. */
    public String providerName() {
        ExecutorRuntime rt = runtime;
        return rt == null ? null : rt.providerName();
    }

    /** Bytes of map outputs registered for RDMA READ in this JVM (0 when the runtime is not running). */
    public long mapOutputBytes() {
        ExecutorRuntime rt = runtime;
        return rt == null ? 0 : rt.store().usedBytes();
    }

    /** This JVM's counters (shuffle and policy layer). */
    public ShuffleMetrics metrics() {
        return metrics;
    }

    /**
     * This executor's RDMA report, to be run inside a task (e.g.
     * {@code sc.parallelize(..).map(i -> RdmaShuffleManager.executorReport())}): {@code executorId}, {@code sparkLine},
     * {@code provider} (its name, {@code off: <reason>}, or {@code not started}), every counter, and its last reconnect
     * attempts ({@code rdma.reconnect.attempts}: when each started, with its planned backoff and jitter).
     */
    public static Map<String, String> executorReport() {
        SparkEnv env = SparkEnv.get();
        Map<String, String> report = new LinkedHashMap<>();
        report.put("executorId", env == null ? "unknown" : env.executorId());
        report.put("sparkLine", LineName.VALUE);
        ShuffleManager manager = env == null ? null : env.shuffleManager();
        if (manager instanceof RdmaShuffleManager ours) {
            String provider = ours.providerName();
            report.put("provider", provider != null ? provider
                    : ours.off != null ? "off: " + ours.off
                    : "not started: no RDMA shuffle task ran in this JVM yet" + (ours.isDriver ? " (a driver runs tasks only in local mode)" : ""));
            ours.metrics.snapshot().forEach((name, value) -> report.put(name, String.valueOf(value)));
            report.put(ReconnectLog.REPORT_KEY, ours.reconnects.text());
        } else {
            report.put("provider", "off: the shuffle manager is " + (manager == null ? "not set" : manager.getClass().getName()));
        }
        return report;
    }
}

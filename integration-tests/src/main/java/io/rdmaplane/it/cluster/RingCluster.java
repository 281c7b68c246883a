package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * A Spark standalone cluster and an HDFS cluster as separate JVMs on the ring's hosts, started from a line's jars
 * the way users deploy them: host 0 runs the Master, the NameNode, the drivers ({@code SparkSubmit}) and the HDFS
 * shell ({@code FsShell}); hosts 1..N run a Worker (which starts its executors) and a DataNode with the RDMA
 * plug-in. Every process binds its own host's address (fixed ports: each host is its own namespace). Spark runs
 * from a Spark home whose {@code jars/} folder links the line's jars, as a distribution's does. A side whose
 * plug-in jar the lines leave out ({@link RingLines#sparkOnly()}, {@link RingLines#hdfsOnly()}) is not started.
 */
public final class RingCluster implements AutoCloseable {
    static final int MASTER_PORT = 7077;
    static final int MASTER_UI = 8080;
    static final int WORKER_PORT = 7078;
    static final int WORKER_UI = 8081;
    static final int DRIVER_PORT = 7079;
    static final int BLOCK_MANAGER_PORT = 7200;
    static final int RDMA_PORT = 7300;
    /** The driver's executor registry (fixed, so that its connections are known as the transport's). */
    static final int REGISTRY_PORT = 7301;
    /** FLIP_READ_PAYLOAD's relay on host 0 (only while that fault runs). */
    static final int FLIP_RELAY_PORT = 7390;
    static final int NAMENODE_RPC = 8020;
    static final int NAMENODE_HTTP = 9870;
    static final int DATANODE_XFER = 9866;
    static final int DATANODE_HTTP = 9864;
    static final int DATANODE_IPC = 9867;
    static final int DATANODE_RDMA = 9880;
    /** The HDFS block size of the ring's files: small, so that a few MiB make a file of several blocks. */
    static final long BLOCK_SIZE = 1 << 20;
    /**
     * The SQL settings of every application on a ring with HDFS (before the application's own): scan splits of one
     * block, so a table's scan is several tasks, each reading blocks of its own; joins that shuffle (no broadcast), into
     * partitions AQE keeps, so a query's reduce stages are tasks on both executors. {@link TpcdsExpectedRows} plans with
     * them too.
     */
    static final Map<String, String> SQL_OVER_HDFS = Map.of("spark.sql.files.maxPartitionBytes", String.valueOf(BLOCK_SIZE),
            "spark.sql.autoBroadcastJoinThreshold", "-1", "spark.sql.shuffle.partitions", "8", "spark.sql.adaptive.coalescePartitions.enabled", "false");
    static final int HDFS_FILE = 5 * (1 << 20) + 12345;
    static final String RDMA_MANAGER = "io.rdmaplane.spark.RdmaShuffleManager";
    static final String SLF4J_QUIET = "-Dorg.slf4j.simpleLogger.log.org.apache.spark=warn -Dorg.slf4j.simpleLogger.log.org.sparkproject=warn"
            + " -Dorg.slf4j.simpleLogger.log.org.apache.spark.scheduler.DAGScheduler=info -Dorg.slf4j.simpleLogger.showDateTime=true";

    final HostRing ring;
    final RingLines lines;
    final Path dir;
    final Path logs;
    final int workers;
    final Duration limit;
    /**
     * The transport settings of every RDMA plug-in the ring runs, by their name after the prefix ({@code provider},
     * {@code operationTimeout}, ...): given as {@code spark.shuffle.rdma.NAME}, {@code dfs.datanode.rdma.NAME} and
     * {@code dfs.rdma.NAME}. The host ring runs {@code provider=tcp}; the Soft-RoCE VM's ring {@code verbs}.
     */
    final Map<String, String> transport;
    private final List<RingProcess> processes = new ArrayList<>();
    private final Path sparkHome;
    private final Path appJar;
    RingProcess master;
    final List<RingProcess> workerProcesses = new ArrayList<>();
    RingProcess nameNode;
    final List<RingProcess> dataNodes = new ArrayList<>();
    /** The file hdfsFile() wrote, once written. */
    private byte[] hdfsData;

    private RingCluster(HostRing ring, RingLines lines, Path dir, Duration limit, Map<String, String> transport) {
        this.ring = ring;
        this.transport = Map.copyOf(transport);
        this.lines = lines;
        this.dir = dir.toAbsolutePath();
        this.logs = this.dir.resolve("logs");
        this.workers = ring.hosts() - 1;
        this.limit = limit;
        this.sparkHome = this.dir.resolve("spark-home");
        this.appJar = this.dir.resolve("ring-job.jar");
    }

    /**
     * Starts Spark and HDFS (each unless {@code lines} leave it out) on {@code ring} (host 0 and one worker host per
     * further host) and waits until the Master has every Worker and the NameNode every DataNode, each DataNode's RDMA
     * service running. Every
     * process is killed at {@code limit}. {@code dir} (emptied first) holds the logs, the Spark home and the
     * HDFS folders.
     */
    public static RingCluster start(HostRing ring, RingLines lines, Path dir, Duration limit) {
        return start(ring, lines, dir, limit, Map.of("provider", "tcp"));
    }

    /**
     * {@link #start(HostRing, RingLines, Path, Duration)} with the {@code transport} settings of every plug-in
     * (the Soft-RoCE VM's ring: {@code provider=verbs}).
     */
    public static RingCluster start(HostRing ring, RingLines lines, Path dir, Duration limit, Map<String, String> transport) {
        if (ring.hosts() < 3) {
            throw new IllegalArgumentException("ring: " + ring.hosts() + " hosts; the cluster needs host 0 and at least 2 workers");
        }
        if (!transport.containsKey("provider")) {
            throw new IllegalArgumentException("ring: the transport settings " + transport + " name no provider");
        }
        RingCluster c = new RingCluster(ring, lines, dir, limit, transport);
        try {
            c.prepare();
            if (c.spark()) {
                c.startSpark();
            }
            if (c.hdfs()) {
                c.startHdfs();
            }
            if (c.spark()) {
                c.awaitSpark();
            }
            if (c.hdfs()) {
                c.awaitHdfs();
            }
            return c;
        } catch (RuntimeException | Error e) {
            String tails = c.tails();
            c.close();
            throw new IllegalStateException("ring cluster did not come up: " + e.getMessage() + "\n" + tails, e);
        }
    }

    /**
     * Starts HDFS alone on {@code ring}: the NameNode on host 0, a DataNode with the RDMA plug-in on every further
     * host, each plug-in (and every client {@link #fsShell} or {@link #hdfsClient} starts) with the {@code transport}
     * settings; waits until every DataNode is live and its RDMA service running. Every process is killed at
     * {@code limit}; {@code dir} (emptied first) holds the logs and the HDFS folders.
     */
    public static RingCluster startHdfs(HostRing ring, RingLines lines, Path dir, Duration limit, Map<String, String> transport) {
        if (ring.hosts() < 2) {
            throw new IllegalArgumentException("ring: " + ring.hosts() + " host(s); HDFS needs host 0 and at least 1 DataNode host");
        }
        if (!transport.containsKey("provider")) {
            throw new IllegalArgumentException("ring: the transport settings " + transport + " name no provider");
        }
        RingCluster c = new RingCluster(ring, lines, dir, limit, transport);
        try {
            c.prepare();
            c.startHdfs();
            c.awaitHdfs();
            return c;
        } catch (RuntimeException | Error e) {
            String tails = c.tails();
            c.close();
            throw new IllegalStateException("ring HDFS did not come up: " + e.getMessage() + "\n" + tails, e);
        }
    }

    private void prepare() {
        try {
            deleteTree(dir);
            Files.createDirectories(sparkHome.resolve("jars"));
            Files.createDirectories(logs);
            for (Path jar : lines.sparkJars()) {
                Path link = sparkHome.resolve("jars").resolve(jar.getFileName());
                if (!Files.exists(link)) {
                    Files.createSymbolicLink(link, jar.toAbsolutePath());
                }
            }
            writeAppJar();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The application jar SparkSubmit runs (RingJob's classes) and HDFS clients run (RingHdfsRead's), from wherever
     * this JVM loaded them.
     */
    private void writeAppJar() throws IOException {
        Path classes = Path.of(java.net.URI.create(RingJob.class.getProtectionDomain().getCodeSource().getLocation().toString()));
        String pkg = RingJob.class.getPackageName().replace('.', '/');
        try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(appJar))) {
            if (Files.isDirectory(classes)) {
                try (Stream<Path> files = Files.list(classes.resolve(pkg))) {
                    for (Path f : files.filter(p -> isAppClass(p.getFileName().toString())).toList()) {
                        out.putNextEntry(new JarEntry(pkg + "/" + f.getFileName()));
                        out.write(Files.readAllBytes(f));
                        out.closeEntry();
                    }
                }
            } else {
                try (java.util.jar.JarFile jar = new java.util.jar.JarFile(classes.toFile())) {
                    for (JarEntry e : jar.stream().filter(e -> isAppClass(e.getName().substring(pkg.length() + 1))).toList()) {
                        out.putNextEntry(new JarEntry(e.getName()));
                        out.write(jar.getInputStream(e).readAllBytes());
                        out.closeEntry();
                    }
                }
            }
        }
    }

    private static boolean isAppClass(String fileName) {
        return fileName.startsWith(RingJob.class.getSimpleName()) || fileName.startsWith(RingHdfsRead.class.getSimpleName())
                || fileName.startsWith(RingStaleRead.class.getSimpleName()) || fileName.startsWith("RingFlip") // RingFlipRelay, RingFlipRead
                || fileName.startsWith(RingTpcds.class.getSimpleName()) || fileName.startsWith(TpcdsTables.class.getSimpleName());
    }

    boolean spark() {
        return lines.sparkPlugin() != null;
    }

    boolean hdfs() {
        return lines.hdfsPlugin() != null;
    }

    String masterUrl() {
        return "spark://" + ring.address(0) + ":" + MASTER_PORT;
    }

    private List<Path> sparkClassPath() {
        return List.of(sparkHome.resolve("jars").resolve("*"));
    }

    private Map<String, String> sparkEnv(int host) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("SPARK_HOME", sparkHome.toString());
        env.put("SPARK_LOCAL_IP", ring.address(host));
        env.put("SPARK_SCALA_VERSION", lines.scalaVersion());
        env.put("SPARK_CONF_DIR", sparkHome.resolve("conf").toString());
        return env;
    }

    private void startSpark() {
        master = spawn(0, "master", RingProcess.java("256m", sparkClassPath(), slowGuestOptions(), "org.apache.spark.deploy.master.Master",
                List.of("--host", ring.address(0), "--port", String.valueOf(MASTER_PORT), "--webui-port", String.valueOf(MASTER_UI))),
                sparkEnv(0));
        for (int w = 1; w <= workers; w++) {
            Path work = dir.resolve("work-" + w);
            workerProcesses.add(spawn(w, "worker-" + w, RingProcess.java("256m", sparkClassPath(), slowGuestOptions(), "org.apache.spark.deploy.worker.Worker",
                    List.of("--host", ring.address(w), "--port", String.valueOf(WORKER_PORT), "--webui-port", String.valueOf(WORKER_UI),
                            "--cores", "1", "--memory", "1g", "--work-dir", work.toString(), masterUrl())), sparkEnv(w)));
        }
    }

    /**
     * Spark's RPC timeout (spark.network.timeout, 120 s) times {@link #WAIT_SCALE}, as system properties of the
     * Master and Workers: in the emulated guest the Master's own start-up ask of its RPC endpoint outlasted 120 s.
     */
    private static List<String> slowGuestOptions() {
        return WAIT_SCALE == 1 ? List.of() : List.of("-Dspark.network.timeout=" + 120 * WAIT_SCALE + "s");
    }

    /**
     * The Spark application's settings: the same for RDMA and its sort-shuffle baseline but the shuffle manager and,
     * on a ring with HDFS, the HDFS client plug-in (its jar on the driver's and executors' class path, its accessor
     * configured with the transport settings) for the RDMA application's reads of the ring's HDFS, which is every
     * application's default filesystem.
     */
    private List<String> submitArgs(String name, boolean rdma, Map<String, String> extra) {
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("spark.driver.host", ring.address(0));
        conf.put("spark.driver.bindAddress", ring.address(0));
        conf.put("spark.driver.port", String.valueOf(DRIVER_PORT));
        conf.put("spark.blockManager.port", String.valueOf(BLOCK_MANAGER_PORT));
        conf.put("spark.ui.enabled", "false");
        conf.put("spark.executor.memory", "512m");
        conf.put("spark.executor.cores", "1");
        conf.put("spark.cores.max", String.valueOf(workers));
        conf.put("spark.executor.extraJavaOptions", String.join(" ", RingProcess.moduleFlags())
                + " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss512k -Djava.net.preferIPv4Stack=true " + SLF4J_QUIET);
        conf.put("spark.reducer.maxSizeInFlight", "1m");
        if (WAIT_SCALE > 1) {
            conf.put("spark.network.timeout", 120 * WAIT_SCALE + "s");
        }
        transport.forEach((k, v) -> conf.put("spark.shuffle.rdma." + k, v));
        conf.put("spark.shuffle.rdma.port", String.valueOf(RDMA_PORT));
        conf.put("spark.shuffle.rdma.registry.port", String.valueOf(REGISTRY_PORT));
        if (rdma) {
            conf.put("spark.shuffle.manager", RDMA_MANAGER);
        }
        List<String> executorClassPath = new ArrayList<>();
        if (hdfs()) {
            // the ring's HDFS is the application's filesystem (RingTpcds writes and reads its tables there)
            conf.put("spark.hadoop.fs.defaultFS", "hdfs://" + ring.address(0) + ":" + NAMENODE_RPC);
            conf.put("spark.hadoop.dfs.replication", "2"); // a killed DataNode leaves a replica
            conf.put("spark.hadoop.dfs.blocksize", String.valueOf(BLOCK_SIZE));
            // row groups of one block
            conf.put("spark.hadoop.parquet.block.size", String.valueOf(BLOCK_SIZE));
            conf.putAll(SQL_OVER_HDFS);
            if (rdma) {
                conf.put("spark.hadoop.dfs.client.replica.accessor.builder.classes", "io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder");
                transport.forEach((k, v) -> conf.put("spark.hadoop.dfs.rdma." + k, v));
                // idle token sessions closed after 5 s (the default is 30 s): a fault's settle after q3 need not wait longer
                conf.put("spark.hadoop.dfs.rdma.tokenSession.idle", "5s");
                executorClassPath.add(lines.hdfsPlugin().toString()); // a Hadoop client plug-in: the executors' class path
            }
        }
        conf.putAll(extra);
        List<String> args = new ArrayList<>(List.of("--master", masterUrl(), "--deploy-mode", "client", "--name", name,
                "--class", RingJob.class.getName()));
        if (lines.sparkPluginOn() == RingLines.PluginOn.JARS) {
            args.addAll(List.of("--jars", lines.sparkPlugin().toString()));
        } else {
            executorClassPath.add(0, lines.sparkPlugin().toString());
        }
        if (!executorClassPath.isEmpty()) {
            conf.put("spark.driver.extraClassPath", String.join(java.io.File.pathSeparator, executorClassPath));
            conf.put("spark.executor.extraClassPath", String.join(java.io.File.pathSeparator, executorClassPath));
        }
        conf.forEach((k, v) -> {
            args.add("--conf");
            args.add(k + "=" + v);
        });
        args.add(appJar.toString());
        return args;
    }

    /**
     * Submits RingJob through SparkSubmit from host 0 with the plug-in jar (where the line wants it,
     * {@link RingLines.PluginOn}) and, when {@code rdma}, {@code spark.shuffle.manager} (and on a ring with HDFS the
     * HDFS client plug-in); waits until the application has started (its SparkContext), at most 3 minutes times
     * {@link #WAIT_SCALE}.
     */
    public RingDriver submit(String name, boolean rdma, Map<String, String> extra) {
        List<String> jvm = List.of(SLF4J_QUIET.split(" "));
        List<Path> cp = new ArrayList<>(sparkClassPath());
        // spark.driver.extraClassPath: what spark-submit's launcher puts on the driver JVM's class path
        if (lines.sparkPluginOn() == RingLines.PluginOn.EXTRA_CLASS_PATH) {
            cp.add(lines.sparkPlugin());
        }
        if (rdma && hdfs()) {
            cp.add(lines.hdfsPlugin()); // the same for the HDFS client plug-in
        }
        cp.addAll(lines.appJars()); // the application's own dependencies, on its driver's class path
        RingProcess p = spawn(0, "driver-" + name, RingProcess.java("512m", cp, jvm, "org.apache.spark.deploy.SparkSubmit",
                submitArgs(name, rdma, extra)), sparkEnv(0));
        RingDriver driver = new RingDriver(this, p);
        driver.ready = driver.awaitLine(l -> l.startsWith("RING-READY"), Duration.ofMinutes(3).multipliedBy(WAIT_SCALE), "the application started");
        return driver;
    }

    /**
     * {@link RingStaleRead} on host 0 (the Spark jars and the plug-in jar on its class path), pointed at the executor
     * RDMA server of {@code host}; waits until it reads its input.
     */
    RingProcess staleReader(int host) {
        List<Path> cp = new ArrayList<>(sparkClassPath());
        cp.add(lines.sparkPlugin());
        cp.add(appJar);
        RingProcess p = spawn(0, "stale-read-" + System.nanoTime() % 100000, RingProcess.java("128m", cp, List.of(SLF4J_QUIET.split(" ")),
                RingStaleRead.class.getName(), List.of(ring.address(0), ring.address(host), String.valueOf(RDMA_PORT))), Map.of());
        awaitLog(p, "RING-STALE-READY", Duration.ofMinutes(1));
        return p;
    }

    /**
     * FLIP_READ_PAYLOAD: a {@link RingFlipRelay} on host 0 at {@link #FLIP_RELAY_PORT} to {@code host}'s executor's
     * RDMA port (flipping a bit in the first and every {@code every}-th READ response, {@code max} at most), and a
     * {@link RingFlipRead} on host 0 whose connection goes through it. Returns {relay, reader}, both ready.
     */
    RingProcess[] flipReaders(int host, int every, int max) {
        String tag = String.valueOf(System.nanoTime() % 100000);
        RingProcess relay = spawn(0, "flip-relay-" + tag, RingProcess.java("64m", List.of(appJar), List.of(), RingFlipRelay.class.getName(),
                List.of(ring.address(0), String.valueOf(FLIP_RELAY_PORT), ring.address(host), String.valueOf(RDMA_PORT), String.valueOf(every),
                        String.valueOf(max))), Map.of());
        awaitLog(relay, "RING-FLIP-READY", Duration.ofMinutes(1));
        List<Path> cp = new ArrayList<>(sparkClassPath());
        cp.add(lines.sparkPlugin());
        cp.add(appJar);
        RingProcess reader = spawn(0, "flip-read-" + tag, RingProcess.java("128m", cp, List.of(SLF4J_QUIET.split(" ")), RingFlipRead.class.getName(),
                List.of(ring.address(0), ring.address(0), String.valueOf(FLIP_RELAY_PORT))), Map.of());
        awaitLog(reader, "RING-FLIP-READER-READY", Duration.ofMinutes(1));
        return new RingProcess[] {relay, reader};
    }

    /** The first line of {@code p}'s log that starts with {@code prefix}, polled for at most {@code deadline}. */
    static String awaitLog(RingProcess p, String prefix, Duration deadline) {
        String[] found = {null};
        waitUntil(() -> {
            found[0] = p.lines().stream().filter(l -> l.startsWith(prefix)).findFirst().orElse(null);
            if (found[0] == null && !p.isAlive()) {
                throw new IllegalStateException(p.name + " exited before saying " + prefix + "\n" + p.tail(40));
            }
            return found[0] != null;
        }, deadline, () -> p.name + " says " + prefix + "\n" + p.tail(40));
        return found[0];
    }

    // ---- HDFS

    private Path conf(String name, Map<String, String> hdfsSite) {
        Path d = dir.resolve("conf").resolve(name);
        try {
            Files.createDirectories(d);
            Files.writeString(d.resolve("core-site.xml"), xml(Map.of("fs.defaultFS", "hdfs://" + ring.address(0) + ":" + NAMENODE_RPC,
                    "hadoop.tmp.dir", dir.resolve("hadoop-tmp").resolve(name).toString())));
            Map<String, String> all = new LinkedHashMap<>();
            all.put("dfs.replication", "2");
            all.put("dfs.blocksize", String.valueOf(BLOCK_SIZE));
            all.put("dfs.block.access.token.enable", "true");
            all.put("dfs.namenode.datanode.registration.ip-hostname-check", "false");
            all.put("dfs.namenode.safemode.extension", "0");
            all.put("dfs.namenode.rpc-address", ring.address(0) + ":" + NAMENODE_RPC);
            all.put("dfs.namenode.http-address", ring.address(0) + ":" + NAMENODE_HTTP);
            all.put("dfs.permissions.enabled", "false");
            all.putAll(hdfsSite);
            Files.writeString(d.resolve("hdfs-site.xml"), xml(all));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return d;
    }

    private static String xml(Map<String, String> props) {
        return "<?xml version=\"1.0\"?>\n<configuration>\n" + props.entrySet().stream()
                .map(e -> "  <property><name>" + e.getKey() + "</name><value>" + e.getValue() + "</value></property>")
                .collect(Collectors.joining("\n")) + "\n</configuration>\n";
    }

    private List<Path> hadoopClassPath(Path conf, boolean plugin) {
        List<Path> cp = new ArrayList<>();
        cp.add(conf);
        cp.addAll(lines.hadoopJars());
        if (plugin) {
            cp.add(lines.hdfsPlugin());
        }
        return cp;
    }

    private void startHdfs() {
        Path nnConf = conf("namenode", Map.of("dfs.namenode.name.dir", dir.resolve("hdfs/name").toUri().toString(),
                "dfs.namenode.handler.count", "4"));
        List<Path> cp = hadoopClassPath(nnConf, false);
        RingProcess format = spawn(0, "namenode-format", RingProcess.java("256m", cp, List.of(), "org.apache.hadoop.hdfs.server.namenode.NameNode",
                List.of("-format", "-nonInteractive", "-force")), Map.of());
        int code = format.waitFor(Duration.ofMinutes(3).multipliedBy(WAIT_SCALE));
        if (code != 0) {
            throw new IllegalStateException("NameNode -format exited " + code + "\n" + format.tail(40));
        }
        nameNode = spawn(0, "namenode", RingProcess.java("256m", cp, List.of(), "org.apache.hadoop.hdfs.server.namenode.NameNode", List.of()), Map.of());
        for (int w = 1; w <= workers; w++) {
            dataNodes.add(startDataNode(w, "datanode-" + w));
        }
    }

    private RingProcess startDataNode(int w, String name) {
        String a = ring.address(w);
        Map<String, String> dn = new LinkedHashMap<>();
        dn.put("dfs.datanode.data.dir", dir.resolve("hdfs/data-" + w).toUri().toString());
        dn.put("dfs.datanode.address", a + ":" + DATANODE_XFER);
        dn.put("dfs.datanode.http.address", a + ":" + DATANODE_HTTP);
        dn.put("dfs.datanode.ipc.address", a + ":" + DATANODE_IPC);
        dn.put("dfs.datanode.hostname", a);
        dn.put("dfs.datanode.handler.count", "2");
        dn.put("dfs.datanode.plugins", "io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin");
        transport.forEach((k, v) -> dn.put("dfs.datanode.rdma." + k, v));
        dn.put("dfs.datanode.rdma.port", String.valueOf(DATANODE_RDMA));
        return spawn(w, name, RingProcess.java("256m", hadoopClassPath(conf("datanode-" + w, dn), true), List.of(),
                "org.apache.hadoop.hdfs.server.datanode.DataNode", List.of()), Map.of());
    }

    /** Starts DataNode {@code w} again (after it was killed) and waits until its RDMA block service runs. */
    void restartDataNode(int w) {
        dataNodes.get(w - 1).kill();
        dataNodes.set(w - 1, startDataNode(w, "datanode-" + w + "-restarted-" + System.nanoTime() % 100000));
        waitUntil(() -> "RUNNING".equals(jsonString(dataNodeBean(w), "State")), Duration.ofMinutes(2),
                () -> "the restarted DataNode " + w + "'s RDMA block service is RUNNING");
    }

    /** Fails at once, with its log's tail, when a daemon has exited (a NameNode missing a class waits for nothing). */
    private boolean alive() {
        List<RingProcess> daemons = new ArrayList<>(workerProcesses);
        daemons.add(master);
        daemons.add(nameNode);
        daemons.addAll(dataNodes);
        for (RingProcess p : daemons) {
            if (p != null && !p.isAlive()) {
                throw new IllegalStateException(p.name + " exited\n" + p.tail(30));
            }
        }
        return true;
    }

    private void awaitSpark() {
        waitUntil(() -> alive() && jsonLong(curl(0, "http://" + ring.address(0) + ":" + MASTER_UI + "/json/"), "aliveworkers") == workers,
                Duration.ofMinutes(3), () -> "the Master has " + workers + " alive workers");
    }

    private void awaitHdfs() {
        waitUntil(() -> alive() && jsonLong(curl(0, nameNodeJmx("Hadoop:service=NameNode,name=FSNamesystemState")), "NumLiveDataNodes") == workers,
                Duration.ofMinutes(3), () -> "the NameNode has " + workers + " live DataNodes");
        for (int w = 1; w <= workers; w++) {
            int host = w;
            waitUntil(() -> "RUNNING".equals(jsonString(dataNodeBean(host), "State")), Duration.ofMinutes(1),
                    () -> "DataNode " + host + "'s RDMA block service is RUNNING");
        }
        waitUntil(() -> !curl(0, nameNodeJmx("Hadoop:service=NameNode,name=NameNodeInfo")).contains("\"Safemode\" : \"Safe"),
                Duration.ofMinutes(1), () -> "the NameNode left safe mode");
    }

    String nameNodeJmx(String bean) {
        return "http://" + ring.address(0) + ":" + NAMENODE_HTTP + "/jmx?qry=" + bean;
    }

    /** DataNode {@code host}'s RDMA block service bean, as its /jmx shows it. */
    String dataNodeBean(int host) {
        return curl(0, "http://" + ring.address(host) + ":" + DATANODE_HTTP + "/jmx?qry=Hadoop:service=DataNode,name=RdmaBlockService-"
                + DATANODE_XFER);
    }

    /** An HTTP GET from inside {@code host}'s namespace (no address of the ring exists outside them); "" when it fails. */
    String curl(int host, String url) {
        try {
            return ring.exec(host, "curl", "-sf", "-m", "5", url);
        } catch (IllegalStateException e) {
            return "";
        }
    }

    static long jsonLong(String json, String field) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(field) + "\"\\s*:\\s*(-?\\d+)").matcher(json);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    static String jsonString(String json, String field) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(field) + "\"\\s*:\\s*\"([^\"]*)\"").matcher(json);
        return m.find() ? m.group(1) : null;
    }

    static List<String> jsonStrings(String json, String field) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(field) + "\"\\s*:\\s*\"([^\"]*)\"").matcher(json);
        List<String> out = new ArrayList<>();
        while (m.find()) {
            out.add(m.group(1));
        }
        return out;
    }

    /**
     * {@code org.apache.hadoop.fs.FsShell} on host 0 with {@code args}; with {@code plugin} its client reads through the
     * RDMA accessor (the plug-in jar on its class path, {@code dfs.client.replica.accessor.builder.classes} set). Its
     * standard output goes to {@code stdout} when given. Returns the started process.
     */
    public RingProcess fsShell(String name, boolean plugin, Path stdout, String... args) {
        Map<String, String> client = new LinkedHashMap<>();
        if (plugin) {
            client.put("dfs.client.replica.accessor.builder.classes", "io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder");
            transport.forEach((k, v) -> client.put("dfs.rdma." + k, v));
        }
        Path conf = conf(plugin ? "client-rdma" : "client-stock", client);
        return spawn(0, name, RingProcess.java("256m", hadoopClassPath(conf, plugin), List.of(), "org.apache.hadoop.fs.FsShell", List.of(args)),
                Map.of(), stdout);
    }

    /**
     * {@link RingHdfsRead} on host 0 with {@code args}, its client configured as {@link #fsShell}'s with {@code plugin};
     * runs it to its end (at most {@code deadline}) and returns its output; fails with its log's tail unless it exits 0.
     */
    public String hdfsClient(String name, boolean plugin, Duration deadline, String... args) {
        Map<String, String> client = new LinkedHashMap<>();
        if (plugin) {
            client.put("dfs.client.replica.accessor.builder.classes", "io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder");
            transport.forEach((k, v) -> client.put("dfs.rdma." + k, v));
        }
        List<Path> cp = new ArrayList<>(hadoopClassPath(conf(plugin ? "client-rdma" : "client-stock", client), plugin));
        cp.add(appJar);
        RingProcess p = spawn(0, name, RingProcess.java("256m", cp, List.of(), RingHdfsRead.class.getName(), List.of(args)), Map.of());
        int code = p.waitFor(deadline);
        if (code != 0) {
            throw new IllegalStateException(RingHdfsRead.class.getSimpleName() + " " + String.join(" ", args) + " exited " + code + "\n" + p.tail(60));
        }
        return String.join("\n", p.lines());
    }

    /** Runs FsShell to its end (at most 3 minutes times {@link #WAIT_SCALE}); fails with its log's tail unless it exits 0. */
    public void fsShellOk(String name, boolean plugin, Path stdout, String... args) {
        RingProcess p = fsShell(name, plugin, stdout, args);
        int code = p.waitFor(Duration.ofMinutes(3).multipliedBy(WAIT_SCALE));
        if (code != 0) {
            throw new IllegalStateException("FsShell " + String.join(" ", args) + " exited " + code + "\n" + p.tail(60));
        }
    }

    /** Writes a file of several blocks with the stock client, reads it with {@code -cat} and {@code -get} through the plug-in. */
    public void hdfsCatAndGet() {
        byte[] data = hdfsFile();
        long servedBefore = served();
        Path cat = dir.resolve("cat.bin");
        fsShellOk("fs-cat", true, cat, "-cat", "/ring/data.bin");
        Path got = dir.resolve("get.bin");
        fsShellOk("fs-get", true, null, "-get", "/ring/data.bin", got.toString());
        long served = served() - servedBefore;
        int blocks = (data.length + (1 << 20) - 1) >> 20;
        System.out.println("ring: hdfs -cat and -get of " + data.length + " bytes (" + blocks + " blocks), RDMA READs served by the DataNodes: "
                + served);
        try {
            if (!Arrays.equals(data, Files.readAllBytes(cat)) || !Arrays.equals(data, Files.readAllBytes(got))) {
                throw new AssertionError("hdfs -cat or -get gave other bytes than were written");
            }
            for (String log : List.of("fs-cat", "fs-get")) {
                String text = Files.readString(logs.resolve(log + ".log"));
                if (!text.contains("HDFS RDMA reads enabled in this JVM") || text.contains("fell back to TCP")) {
                    throw new AssertionError(log + " did not read over RDMA without fallback:\n" + text);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (served < 2L * blocks) {
            throw new AssertionError("the DataNodes served " + served + " RDMA reads for 2 reads of " + blocks + " blocks");
        }
    }

    /** The file of several blocks (HDFS_FILE bytes) at /ring/data.bin, written once with the stock client; its bytes. */
    byte[] hdfsFile() {
        if (hdfsData == null) {
            byte[] data = new byte[HDFS_FILE];
            new Random(14).nextBytes(data);
            Path local = dir.resolve("data.bin");
            try {
                Files.write(local, data);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            fsShellOk("fs-mkdir", false, null, "-mkdir", "-p", "/ring");
            fsShellOk("fs-put", false, null, "-put", "-f", local.toString(), "/ring/data.bin");
            hdfsData = data;
        }
        return hdfsData;
    }

    /** The RDMA reads the DataNodes' block services served so far. */
    private long served() {
        long sum = 0;
        for (int w = 1; w <= workers; w++) {
            sum += Math.max(0, RingCluster.jsonLong(dataNodeBean(w), "Served"));
        }
        return sum;
    }

    // ---- processes

    RingProcess spawn(int host, String name, List<String> command, Map<String, String> env) {
        return spawn(host, name, command, env, null);
    }

    private synchronized RingProcess spawn(int host, String name, List<String> command, Map<String, String> env, Path stdout) {
        RingProcess p = RingProcess.start(ring, host, name, command, env, logs, stdout, limit);
        processes.add(p);
        return p;
    }

    /** The executor JVMs the Worker on {@code host} runs now (its child processes). */
    List<ProcessHandle> executorsOn(int host) {
        RingProcess worker = workerProcesses.get(host - 1);
        return ProcessHandle.of(worker.pid()).map(h -> h.children().filter(ProcessHandle::isAlive).toList()).orElse(List.of());
    }

    /** The executors' logs: each executor's {@code stderr} under a Worker's work folder, in name order. */
    private List<Path> executorLogs() throws IOException {
        try (Stream<Path> files = Files.exists(dir) ? Files.walk(dir) : Stream.empty()) {
            return files.filter(f -> f.getFileName().toString().equals("stderr") && f.toString().contains("/work-")).sorted().toList();
        }
    }

    /** An executor log's "application/executor id", from its folders. */
    private static String executorName(Path log) {
        return log.getParent().getParent().getFileName() + "/" + log.getParent().getFileName();
    }

    /** The last lines of every process's log and of the executors' logs: what a failure prints. */
    public synchronized String tails() {
        StringBuilder b = new StringBuilder();
        for (RingProcess p : processes) {
            b.append(p.tail(p.name.startsWith("driver") ? 60 : 25));
        }
        try {
            for (Path f : executorLogs()) {
                List<String> all = Files.readAllLines(f, java.nio.charset.StandardCharsets.ISO_8859_1);
                b.append("---- last lines of executor log ").append(f).append('\n');
                all.subList(Math.max(0, all.size() - 25), all.size())
                        .forEach(l -> b.append("    ").append(l.length() > 400 ? l.substring(0, 400) + " ..." : l).append('\n'));
            }
        } catch (IOException e) {
            b.append("(executor logs unreadable: ").append(e).append(")\n");
        }
        return b.toString();
    }

    /**
     * Why an executor JVM died at its start (its log's {@code Exception in thread "main"} and the deepest cause after
     * it, e.g. a shuffle manager class not found), or null while none did.
     */
    public String executorDeath() {
        try {
            for (Path f : executorLogs()) {
                List<String> lines = Files.readAllLines(f, java.nio.charset.StandardCharsets.ISO_8859_1);
                for (int i = 0; i < lines.size(); i++) {
                    if (lines.get(i).startsWith("Exception in thread \"main\"")) {
                        String cause = lines.get(i);
                        for (String l : lines.subList(i + 1, lines.size())) {
                            if (l.startsWith("Caused by: ")) {
                                cause = l;
                            }
                        }
                        return "executor " + executorName(f) + " died: " + cause.trim();
                    }
                }
            }
        } catch (IOException | UncheckedIOException e) {
            return null; // a work folder appearing or going while walked: asked again
        }
        return null;
    }

    /**
     * The lines of the executors' logs in which {@code pattern} occurs, at most {@code max}, each after its log's work folder:
     * what a failed check prints when a counter says something fell back (the log says why).
     */
    public List<String> executorLogLines(Pattern pattern, int max) {
        List<String> out = new ArrayList<>();
        try {
            for (Path f : executorLogs()) {
                for (String l : Files.readAllLines(f, java.nio.charset.StandardCharsets.ISO_8859_1)) {
                    if (out.size() < max && pattern.matcher(l).find()) {
                        out.add(executorName(f) + ": " + (l.length() > 600 ? l.substring(0, 600) + " ..." : l));
                    }
                }
            }
        } catch (IOException | UncheckedIOException e) {
            out.add("(executor logs unreadable: " + e + ")");
        }
        return out;
    }

    /**
     * How many times longer the ring waits for its daemons than on a host (system property {@code rdma.ring.waitScale},
     * default 1): the Soft-RoCE VM emulates its CPUs and starts a JVM 25-50x slower.
     */
    static final long WAIT_SCALE = Math.max(1, Long.getLong("rdma.ring.waitScale", 1));

    /**
     * Polls {@code condition} every 200 ms until it holds; fails after {@code deadline} (times {@link #WAIT_SCALE})
     * saying what was awaited.
     */
    static void waitUntil(BooleanSupplier condition, Duration deadline, Supplier<String> what) {
        deadline = deadline.multipliedBy(WAIT_SCALE);
        long end = System.nanoTime() + deadline.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new IllegalStateException("timed out after " + deadline.toSeconds() + " s waiting until " + what.get());
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting until " + what.get());
            }
        }
    }

    @Override
    public synchronized void close() {
        for (int i = processes.size() - 1; i >= 0; i--) {
            processes.get(i).kill();
        }
    }

    static void deleteTree(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(root)) {
            for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}

package io.rdmaplane.it.packaging;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import io.rdmaplane.it.hdfs.HdfsCluster;
import io.rdmaplane.rdma.testing.Skip;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Both plug-in jars in one Spark application, deployed as an operator deploys them: a MiniDFSCluster whose DataNodes
 * run the DataNode plug-in holds a file of four blocks; a {@code local-cluster[2,1,...]} application started through
 * SparkSubmit, on Spark's class path and the plug-in jars only (a JVM of its own), reads it through the HDFS client
 * plug-in and shuffles it with RdmaShuffleManager (map outputs served from their file mappings, tcp provider), in the
 * two ways the jars meet in one JVM: both on the class path (Hadoop's and Spark's, the HDFS jar first), and the Spark
 * jar in {@code --jars} (Spark's child class loader) with the HDFS jar on the class path. Each gives the sums of Spark's
 * sort shuffle over the stock HDFS client, every byte read came over RDMA with no fallback, and reducers READ remote
 * shuffle blocks with no fallback. Each jar alone is SparkPluginJarTest's and ShadedPluginJarTest's. With the two jars
 * as they were before common-rdma was relocated in the HDFS jar, both arrangements fail.
 *
 * <p>On the host the plug-ins run the tcp provider on loopback. {@code integration-tests/vm/both-verbs.sh} runs the
 * first arrangement in the Soft-RoCE VM over verbs, through the {@code rdma.both.*} system properties below: every
 * plug-in's provider, Spark (driver and executors) on one rxe device's address, the DataNodes on the other's, and the
 * NameNode's service RPC (the DataNodes' registration, hence the address clients are given) on the first.
 */
class BothPluginsOneClassPathTest {
    private static final int BLOCKS = 4;
    private static final long LENGTH = (long) BLOCKS * HdfsCluster.BLOCK;
    private static final String FILE = "/both-plugins/records";
    /** A bound against hanging, not a time to meet (the emulated VM needs more). */
    private static final long TIMEOUT_MINUTES = Long.getLong("rdma.both.timeoutMinutes", 4);
    /** Every plug-in's provider; unset: their defaults (tcp for the Spark job, auto for HDFS: tcp without a device). */
    private static final String PROVIDER = System.getProperty("rdma.both.provider");
    /** SPARK_LOCAL_IP of the driver and the executors. */
    private static final String SPARK_ADDRESS = System.getProperty("rdma.both.sparkAddress", "127.0.0.1");
    /** The DataNodes' addresses (transfer, HTTP, IPC); unset: MiniDFSCluster's 127.0.0.1. */
    private static final String DATANODE_ADDRESS = System.getProperty("rdma.both.dataNodeAddress");
    /**
     * The NameNode's service RPC address, where the DataNodes register: the NameNode gives clients the address a
     * DataNode's registration came from (MiniDFSCluster's client RPC is on 127.0.0.1, which RDMA-CM does not serve).
     */
    private static final String NAMENODE_ADDRESS = System.getProperty("rdma.both.nameNodeAddress");
    /**
     * Transport settings of every plug-in ({@code NAME=VALUE,...}), as {@code dfs.datanode.rdma.NAME},
     * {@code dfs.rdma.NAME} and {@code spark.shuffle.rdma.NAME}; and the HDFS client's own ({@code dfs.rdma.NAME}).
     */
    private static final Map<String, String> TRANSPORT = settings("rdma.both.transport");
    private static final Map<String, String> HDFS_CLIENT = settings("rdma.both.hdfsClient");

    private static Path sparkJar;
    private static Path hdfsJar;
    private static List<Path> spark;
    /** An SLF4J provider for the application's log (Spark's own log4j binding is not on this build's class path). */
    private static List<Path> logging;
    private static HdfsCluster hdfs;
    private static Path work;
    private static Path jobJar;
    private static Map<String, String> sort;

    @BeforeAll
    static void start() throws Exception {
        sparkJar = jar(SparkPluginJarTest.JAR_PROPERTY);
        hdfsJar = jar(ShadedPluginJarTest.JAR_PROPERTY);
        spark = java.util.Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(entry -> SparkPluginJarTest.NOT_SPARK.stream().noneMatch(p -> entry.replace('\\', '/').contains(p)))
                .filter(entry -> entry.endsWith(".jar"))
                .map(Path::of)
                .collect(Collectors.toList());
        assertTrue(spark.stream().anyMatch(p -> p.getFileName().toString().startsWith("hadoop-client-api")), "Spark's Hadoop client: " + spark);
        logging = java.util.Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(entry -> entry.replace('\\', '/').contains("/org/slf4j/slf4j-simple/")).map(Path::of).collect(Collectors.toList());
        String workDir = System.getProperty("rdma.both.work"); // the VM script keeps the applications' logs there
        work = workDir != null ? Files.createDirectories(Path.of(workDir)) : Files.createTempDirectory("both-plugins");
        jobJar = jobJar(work.resolve("both-plugins-job.jar"));
        hdfs = new HdfsCluster(2, 0, true, dfsSettings());
        assertEquals(2, RdmaDataNodePlugin.running().size(), "both DataNodes run the RDMA block service");
        hdfs.write(FILE, records(), 2);
    }

    @AfterAll
    static void stop() throws Exception {
        if (hdfs != null) {
            hdfs.close();
        }
    }

    /** The first application of the JVM is the sort-shuffle baseline (local mode, stock HDFS client), then the RDMA one. */
    @Test
    void bothJarsOnOneClassPath() throws Exception {
        Map<String, String> facts = submit("sort,rdma", List.of(hdfsJar, sparkJar), null);
        sort = run(facts, "sort");
        assertEquals(expectedChecksum(), Long.parseLong(sort.get("checksum")), "sort shuffle over the stock client: " + sort);
        assertEquals(String.valueOf(LENGTH), sort.get("bytesRead"), sort.toString());
        assertRdmaEqualsSort(run(facts, "rdma"));
    }

    @Test
    void sparkJarInJarsOptionAndHdfsJarOnTheClassPath() throws Exception {
        Map<String, String> facts = submit("sort,rdma", List.of(hdfsJar), sparkJar);
        sort = run(facts, "sort");
        assertEquals(expectedChecksum(), Long.parseLong(sort.get("checksum")), "sort shuffle over the stock client: " + sort);
        assertRdmaEqualsSort(run(facts, "rdma"));
    }

    /** The facts of one run ({@code RUN.NAME} keys), without the prefix. */
    private static Map<String, String> run(Map<String, String> facts, String run) {
        Map<String, String> of = new TreeMap<>();
        facts.forEach((k, v) -> {
            if (k.startsWith(run + ".")) {
                of.put(k.substring(run.length() + 1), v);
            }
        });
        assertTrue(!of.isEmpty(), "no facts of the " + run + " run: " + facts);
        return of;
    }

    private static void assertRdmaEqualsSort(Map<String, String> rdma) {
        assertEquals(sort.get("keys"), rdma.get("keys"), "keys: " + rdma);
        assertEquals(sort.get("checksum"), rdma.get("checksum"), "the sums equal sort shuffle's: " + rdma);
        assertEquals(String.valueOf(LENGTH), rdma.get("bytesRead"), rdma.toString());
        assertEquals(String.valueOf(LENGTH), rdma.get("hdfsRdmaBytes"), "every byte read through the HDFS client plug-in: " + rdma);
        assertEquals("0", rdma.get("hdfsFallbacks"), rdma.toString());
        assertEquals("0", rdma.get("hdfsDeclined"), rdma.toString());
        assertEquals("2", rdma.get("executors"), rdma.toString());
        String provider = PROVIDER == null ? "tcp" : PROVIDER;
        assertEquals(provider + " " + provider, rdma.get("providers"), "both executors run RDMA shuffle: " + rdma);
        assertEquals("0", rdma.get("shuffleAppFallbacks"), rdma.toString());
        assertEquals("0", rdma.get("shuffleFetchFallbacks"), rdma.toString());
        assertEquals(String.valueOf(BLOCKS), rdma.get("shufflePublishedMaps"), "every map output published: " + rdma);
        // mapOutput.mapFiles is on: every map output is served from its data file's mapping (zero-copy), which tcp and
        // verbs from Linux 6.2 register; verbs on 6.1 refuses a read-only shared file mapping, and copies
        boolean registersMappings = !"verbs".equals(provider) || !kernelBefore(6, 2);
        assertEquals(String.valueOf(registersMappings ? BLOCKS : 0), rdma.get("shuffleMappedMaps"), "map outputs mapped: " + rdma);
        assertEquals(String.valueOf(registersMappings ? 0 : BLOCKS), rdma.get("shuffleCopiedMaps"), "map outputs copied: " + rdma);
        assertTrue(Long.parseLong(rdma.get("shuffleRdmaBlocks")) > 0, "reducers READ remote blocks: " + rdma);
    }

    private static boolean kernelBefore(int major, int minor) {
        String[] v = System.getProperty("os.version").split("[.-]");
        int ma = Integer.parseInt(v[0]);
        int mi = v.length > 1 ? Integer.parseInt(v[1]) : 0;
        return ma < major || (ma == major && mi < minor);
    }

    /**
     * Runs the job through SparkSubmit in a JVM whose class path is {@code classPath} then Spark's, with
     * {@code jars} (or none) in --jars, and returns its facts; fails with its output when it does not end well.
     */
    private static Map<String, String> submit(String runs, List<Path> classPath, Path jars) throws Exception {
        List<Path> cp = new ArrayList<>(classPath);
        cp.addAll(spark);
        cp.addAll(logging);
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-Xmx768m");
        String flags = System.getProperty("rdma.jvm.module.flags", "");
        command.addAll(List.of(flags.trim().split("\\s+")));
        command.add("-Drdma.jvm.module.flags=" + flags);
        command.add("-Dspark.test.home=" + sparkTestHome());
        // the system property (not the conf) makes local-cluster's workers start executors with this JVM's class path
        command.add("-Dspark.testing=1");
        command.add("-D" + BothPluginsJob.ADDRESS_PROPERTY + "=" + SPARK_ADDRESS);
        // SparkConf reads spark.* system properties; the job hands spark.hadoop.dfs.rdma.* to its HDFS reads
        Map<String, String> client = new TreeMap<>(TRANSPORT);
        client.putAll(HDFS_CLIENT);
        if (PROVIDER != null) {
            command.add("-Dspark.shuffle.rdma.provider=" + PROVIDER);
            client.put("provider", PROVIDER);
        }
        TRANSPORT.forEach((k, v) -> command.add("-Dspark.shuffle.rdma." + k + "=" + v));
        client.forEach((k, v) -> command.add("-Dspark.hadoop.dfs.rdma." + k + "=" + v));
        command.add("-cp");
        command.add(cp.stream().map(Path::toString).collect(Collectors.joining(File.pathSeparator)));
        command.add("org.apache.spark.deploy.SparkSubmit");
        command.addAll(List.of("--master", "local-cluster[2,1,768]", "--class", BothPluginsJob.class.getName()));
        if (jars != null) {
            command.addAll(List.of("--jars", jars.toString()));
        }
        command.add(jobJar.toString());
        command.addAll(List.of(runs, hdfs.cluster.getURI().toString(), FILE, String.valueOf(LENGTH), String.valueOf(HdfsCluster.BLOCK)));
        Path log = work.resolve(runs.replace(',', '-') + (jars != null ? "-jars" : "-classpath") + ".log");
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().put("SPARK_TESTING", "1");
        pb.environment().put("SPARK_LOCAL_IP", SPARK_ADDRESS);
        pb.environment().putIfAbsent("SPARK_SCALA_VERSION", System.getProperty("rdma.scala.binary.version", "2.13"));
        long began = System.nanoTime();
        Process p = pb.start();
        boolean ended = p.waitFor(TIMEOUT_MINUTES, TimeUnit.MINUTES);
        if (!ended) {
            p.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
        List<String> lines = Files.readAllLines(log);
        Map<String, String> facts = new HashMap<>();
        for (String line : lines) {
            if (line.startsWith("fact ")) {
                String[] parts = line.split(" ", 3);
                facts.put(parts[1], parts.length > 2 ? parts[2] : "");
            }
        }
        String tail = String.join("\n", lines.subList(Math.max(0, lines.size() - 80), lines.size()));
        assertTrue(ended, "the application did not end within " + TIMEOUT_MINUTES + " minutes; its log " + log + " ends:\n" + tail);
        assertEquals(0, p.exitValue(), "the application failed (class path " + classPath + ", --jars " + jars + "); its log " + log
                + " ends:\n" + errors(lines) + "\n...\n" + tail);
        System.out.printf("both plug-ins (%s; class path %s, --jars %s): %d s, %s%n", runs, names(classPath), jars == null ? "-" : jars.getFileName(),
                TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - began), new TreeMap<>(facts));
        return facts;
    }

    /** The first lines that name an error or exception, where the cause of a failure usually is. */
    private static String errors(List<String> lines) {
        return lines.stream().filter(l -> l.contains("Exception") || l.contains("Error") || l.contains(" WARN ") && l.contains("rdma"))
                .limit(15).collect(Collectors.joining("\n"));
    }

    private static String names(List<Path> jars) {
        return jars.stream().map(p -> p.getFileName().toString()).collect(Collectors.joining(", "));
    }

    private static Path jar(String property) {
        String path = System.getProperty(property);
        Skip.unless(path != null && Files.isRegularFile(Path.of(path)),
                "no plug-in jar at " + path + " (" + property + "): the jars are built in the package phase (mvn verify)");
        return Path.of(path).toAbsolutePath().normalize();
    }

    /** The NameNode's and DataNodes' settings (the DataNode plug-in's among them) from the rdma.both.* properties. */
    private static Map<String, String> dfsSettings() {
        Map<String, String> dfs = new TreeMap<>();
        if (PROVIDER != null) {
            dfs.put("dfs.datanode.rdma.provider", PROVIDER);
        }
        TRANSPORT.forEach((k, v) -> dfs.put("dfs.datanode.rdma." + k, v));
        if (DATANODE_ADDRESS != null) {
            dfs.put("dfs.datanode.address", DATANODE_ADDRESS + ":0");
            dfs.put("dfs.datanode.http.address", DATANODE_ADDRESS + ":0");
            dfs.put("dfs.datanode.ipc.address", DATANODE_ADDRESS + ":0");
            // the address has no name to resolve to
            dfs.put("dfs.namenode.datanode.registration.ip-hostname-check", "false");
        }
        if (NAMENODE_ADDRESS != null) {
            dfs.put("dfs.namenode.servicerpc-address", NAMENODE_ADDRESS + ":0");
        }
        return dfs;
    }

    /** The NAME=VALUE,... pairs of a system property (none when unset). */
    private static Map<String, String> settings(String property) {
        Map<String, String> pairs = new TreeMap<>();
        for (String pair : System.getProperty(property, "").split(",")) {
            if (pair.isBlank()) {
                continue;
            }
            int eq = pair.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException(property + ": \"" + pair + "\" is not NAME=VALUE");
            }
            pairs.put(pair.substring(0, eq).trim(), pair.substring(eq + 1).trim());
        }
        return pairs;
    }

    private static String sparkTestHome() throws IOException {
        Path home = Path.of(System.getProperty("rdma.spark.test.home", work.resolve("spark-test-home").toString()));
        Files.createDirectories(home);
        return home.toAbsolutePath().toString();
    }

    /** The job's classes in a jar of their own: SparkSubmit's application jar, the only test code the application sees. */
    private static Path jobJar(Path jar) throws IOException {
        Path classes = Path.of(BothPluginsJob.class.getProtectionDomain().getCodeSource().getLocation().getPath());
        Path dir = classes.resolve(BothPluginsJob.class.getPackageName().replace('.', '/'));
        List<Path> files;
        try (var list = Files.list(dir)) {
            files = list.filter(f -> f.getFileName().toString().startsWith(BothPluginsJob.class.getSimpleName()))
                    .filter(f -> f.getFileName().toString().endsWith(".class")).sorted().collect(Collectors.toList());
        }
        assertTrue(!files.isEmpty(), "the job's class files under " + dir);
        try (OutputStream out = Files.newOutputStream(jar); JarOutputStream zip = new JarOutputStream(out)) {
            for (Path f : files) {
                zip.putNextEntry(new JarEntry(classes.relativize(f).toString().replace(File.separatorChar, '/')));
                try (InputStream in = Files.newInputStream(f)) {
                    in.transferTo(zip);
                }
                zip.closeEntry();
            }
        }
        return jar;
    }

    /** Record i is (key i mod 997, value i), 16 bytes big-endian. */
    private static byte[] records() {
        ByteBuffer b = ByteBuffer.allocate((int) LENGTH);
        for (long i = 0; b.remaining() >= BothPluginsJob.RECORD; i++) {
            b.putLong(i % 997).putLong(i);
        }
        return b.array();
    }

    /** The job's checksum over the per-key sums of {@link #records()}, computed here without Spark. */
    private static long expectedChecksum() {
        Map<Long, Long> sums = new TreeMap<>();
        for (long i = 0; i < LENGTH / BothPluginsJob.RECORD; i++) {
            sums.merge(i % 997, i, Long::sum);
        }
        long checksum = 0;
        for (Map.Entry<Long, Long> e : sums.entrySet()) {
            checksum = checksum * 31 + e.getKey() * 1_000_003L + e.getValue();
        }
        return checksum;
    }
}

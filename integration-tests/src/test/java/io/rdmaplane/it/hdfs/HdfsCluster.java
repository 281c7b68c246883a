package io.rdmaplane.it.hdfs;

import io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder;
import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.datanode.DataNode;

/**
 * A MiniDFSCluster whose first {@code withPlugin} DataNodes run the RDMA block service and the
 * rest do not, with two clients: one with the RDMA accessor, one stock. Small blocks (1 MiB),
 * block access tokens on.
 */
public final class HdfsCluster implements AutoCloseable {
    public static final int BLOCK = 1 << 20;
    static final String ACCESSOR_KEY = "dfs.client.replica.accessor.builder.classes";

    public final MiniDFSCluster cluster;
    final FileSystem rdma;
    final FileSystem stock;
    final Configuration rdmaConf;
    private final Path base;

    public HdfsCluster(int withPlugin, int without, boolean tokens) throws IOException {
        this(withPlugin, without, tokens, java.util.Map.of());
    }

    /**
     * As above, with {@code settings} added to the configuration of every node and both clients. A
     * {@code dfs.datanode.address} among them is kept (MiniDFSCluster's default is 127.0.0.1:0).
     */
    public HdfsCluster(int withPlugin, int without, boolean tokens, java.util.Map<String, String> settings) throws IOException {
        base = Files.createTempDirectory("minidfs");
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toString());
        conf.setLong("dfs.blocksize", BLOCK);
        conf.setBoolean("dfs.block.access.token.enable", tokens);
        conf.setInt("dfs.datanode.handler.count", 2);
        conf.setInt("dfs.namenode.handler.count", 4);
        conf.setInt("dfs.datanode.max.transfer.threads", 64);
        conf.set("dfs.datanode.plugins", RdmaDataNodePlugin.class.getName());
        conf.set("dfs.datanode.rdma.idleRelease", "2s");
        settings.forEach(conf::set);
        cluster = new MiniDFSCluster.Builder(conf).numDataNodes(withPlugin)
                .checkDataNodeAddrConfig(settings.containsKey("dfs.datanode.address")).build();
        if (without > 0) {
            Configuration plain = new Configuration(conf);
            plain.unset("dfs.datanode.plugins");
            cluster.startDataNodes(plain, without, true, null, null);
        }
        cluster.waitActive();
        URI uri = cluster.getURI();
        rdmaConf = new Configuration(conf);
        rdmaConf.set(ACCESSOR_KEY, RdmaReplicaAccessorBuilder.class.getName());
        // A lost DataNode service is given up quickly, so a test of it does not wait out the production backoff.
        // (The client's transport is one per JVM, made from the first configuration that reads.)
        rdmaConf.set("dfs.rdma.reconnect.base", "10ms");
        rdmaConf.set("dfs.rdma.reconnect.jitter", "10ms");
        rdmaConf.set("dfs.rdma.reconnect.cap", "100ms");
        rdmaConf.set("dfs.rdma.reconnect.maxAttempts", "3");
        rdma = FileSystem.newInstance(uri, rdmaConf);
        Configuration stockConf = new Configuration(conf);
        stock = FileSystem.newInstance(uri, stockConf);
    }

    static byte[] bytes(int size, long seed) {
        byte[] b = new byte[size];
        new Random(seed).nextBytes(b);
        return b;
    }

    /** Writes {@code data} with {@code replication} replicas, preferring {@code favored} DataNodes when given. */
    public void write(String path, byte[] data, int replication, DataNode... favored) throws IOException {
        DistributedFileSystem dfs = (DistributedFileSystem) stock;
        InetSocketAddress[] nodes = favored.length == 0 ? null : new InetSocketAddress[favored.length];
        for (int i = 0; i < favored.length; i++) {
            nodes[i] = favored[i].getXferAddress();
        }
        try (FSDataOutputStream out = dfs.create(new org.apache.hadoop.fs.Path(path), FsPermission.getFileDefault(), true,
                4096, (short) replication, BLOCK, null, nodes)) {
            out.write(data);
        }
    }

    static byte[] readAll(InputStream in, int bufferSize) throws IOException {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        byte[] buf = new byte[bufferSize];
        int n;
        while ((n = in.read(buf)) >= 0) {
            out.write(buf, 0, n);
        }
        return out.toByteArray();
    }

    @Override
    public void close() throws IOException {
        rdma.close();
        stock.close();
        cluster.shutdown();
        try (var walk = Files.walk(base)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }
}

package io.rdmaplane.it.bench;

import io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder;
import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import io.rdmaplane.it.Args;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * HDFS read throughput through the RDMA plug-in versus the stock client, in the same run, from
 * one MiniDFSCluster DataNode (with the plug-in) in this JVM: sequential reads of the whole file
 * and positioned reads of random ranges, each client in turn, rounds alternating. Prints both and
 * the ratio (plug-in / stock). A benchmark, not a test: nothing here asserts a time.
 *
 * <p>Arguments (all optional): {@code sizeMiB=512 blockMiB=64 rounds=3 preadKiB=1024 preads=256 readahead=4m}.
 * It lives with the tests because MiniDFSCluster is a test dependency; run it with
 * {@code mvn -B -q -Prun -DskipTests verify -pl integration-tests -am -Dexec.classpathScope=test
 * -Drun.main=io.rdmaplane.it.bench.HdfsReadBenchmark}.
 */
public final class HdfsReadBenchmark {
    public static void main(String[] args) throws Exception {
        long size = Long.parseLong(Args.get(args, "sizeMiB", "512")) << 20;
        long block = Long.parseLong(Args.get(args, "blockMiB", "64")) << 20;
        int rounds = Integer.parseInt(Args.get(args, "rounds", "3"));
        int preadBytes = Integer.parseInt(Args.get(args, "preadKiB", "1024")) << 10;
        int preads = Integer.parseInt(Args.get(args, "preads", "256"));
        Path base = Files.createTempDirectory("hdfs-bench");
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toString());
        conf.setLong("dfs.blocksize", block);
        conf.set("dfs.datanode.plugins", RdmaDataNodePlugin.class.getName());
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(1).build();
        try {
            cluster.waitActive();
            Configuration rdmaConf = new Configuration(conf);
            rdmaConf.set("dfs.client.replica.accessor.builder.classes", RdmaReplicaAccessorBuilder.class.getName());
            rdmaConf.set("dfs.rdma.readahead", Args.get(args, "readahead", "4m"));
            FileSystem rdma = FileSystem.newInstance(cluster.getURI(), rdmaConf);
            FileSystem stock = FileSystem.newInstance(cluster.getURI(), new Configuration(conf));
            org.apache.hadoop.fs.Path file = new org.apache.hadoop.fs.Path("/bench");
            byte[] chunk = new byte[1 << 20];
            new Random(1).nextBytes(chunk);
            try (FSDataOutputStream out = stock.create(file, (short) 1)) {
                for (long w = 0; w < size; w += chunk.length) {
                    out.write(chunk, 0, (int) Math.min(chunk.length, size - w));
                }
            }
            System.out.printf("file %d MiB, blocks of %d MiB, provider %s, checksum verification on%n", size >> 20,
                    block >> 20, RdmaDataNodePlugin.running().get(0).getProvider());
            // warm-up: page cache, JIT, connections
            sequential(stock, file, size);
            sequential(rdma, file, size);
            double seqStock = 0;
            double seqRdma = 0;
            double preStock = 0;
            double preRdma = 0;
            for (int r = 0; r < rounds; r++) {
                seqStock += sequential(stock, file, size);
                seqRdma += sequential(rdma, file, size);
                preStock += positioned(stock, file, size, preadBytes, preads, r);
                preRdma += positioned(rdma, file, size, preadBytes, preads, r);
            }
            long fallbacks = RdmaReplicaAccessorBuilder.metrics().counter("hdfs.client.fallbacks").getCount();
            long rdmaBytes = RdmaReplicaAccessorBuilder.metrics().counter("hdfs.client.rdma.bytes").getCount();
            print("sequential", seqRdma / rounds, seqStock / rounds);
            print("positioned " + (preadBytes >> 10) + " KiB", preRdma / rounds, preStock / rounds);
            System.out.printf("plug-in: %d MiB through RDMA READ, %d fallbacks%n", rdmaBytes >> 20, fallbacks);
            exposureCost(cluster.getBlockFile(0, ((org.apache.hadoop.hdfs.DistributedFileSystem) stock).getClient()
                    .getLocatedBlocks("/bench", 0, 1).get(0).getBlock()).toPath());
            rdma.close();
            stock.close();
        } finally {
            cluster.shutdown();
            try (var walk = Files.walk(base)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    /**
     * What the DataNode pays to make a block READ-able, the two ways: a read-only mapping of the
     * block file registered once (what the plug-in does) versus copying each 4 MiB window into an
     * already registered buffer (the alternative), on the same block file.
     */
    private static void exposureCost(Path blockFile) throws Exception {
        io.rdmaplane.rdma.provider.Node node = io.rdmaplane.rdma.provider.Providers.select("auto")
                .createNode(io.rdmaplane.rdma.provider.NodeOptions.loopback());
        try (java.nio.channels.FileChannel file = java.nio.channels.FileChannel.open(blockFile)) {
            long length = file.size();
            int reps = 20;
            long t0 = System.nanoTime();
            for (int i = 0; i < reps; i++) {
                java.nio.MappedByteBuffer map = file.map(java.nio.channels.FileChannel.MapMode.READ_ONLY, 0, length);
                node.register(map).deregister();
            }
            double mapMs = (System.nanoTime() - t0) / 1e6 / reps;
            java.nio.ByteBuffer window = java.nio.ByteBuffer.allocateDirect(4 << 20);
            io.rdmaplane.rdma.provider.MemoryRegion registered = node.register(window);
            long copied = 0;
            t0 = System.nanoTime();
            for (int i = 0; i < reps; i++) {
                for (long at = 0; at < length; at += window.capacity()) {
                    window.clear();
                    copied += file.read(window, at);
                }
            }
            double copyMs = (System.nanoTime() - t0) / 1e6 / reps;
            registered.deregister();
            System.out.printf("DataNode, one %d MiB block (%s provider): map + register once %.2f ms; copy into registered"
                    + " windows %.2f ms per full read (%.0f MiB/s)%n", length >> 20, node.providerName(), mapMs, copyMs,
                    copied / 1048576.0 / (copyMs * reps / 1000));
        } finally {
            node.close();
        }
    }

    private static void print(String what, double rdma, double stock) {
        System.out.printf("%-22s plug-in %8.1f MiB/s   stock %8.1f MiB/s   ratio %.2fx%n", what, rdma, stock, rdma / stock);
    }

    /** MiB/s of reading the whole file with 1 MiB reads. */
    private static double sequential(FileSystem fs, org.apache.hadoop.fs.Path file, long size) throws Exception {
        byte[] buf = new byte[1 << 20];
        long start = System.nanoTime();
        long total = 0;
        try (FSDataInputStream in = fs.open(file)) {
            int n;
            while ((n = in.read(buf)) >= 0) {
                total += n;
            }
        }
        if (total != size) {
            throw new IllegalStateException("read " + total + " of " + size + " bytes");
        }
        return total / 1048576.0 / ((System.nanoTime() - start) / 1e9);
    }

    /** MiB/s of positioned reads of {@code length} bytes at random offsets (same offsets for both clients). */
    private static double positioned(FileSystem fs, org.apache.hadoop.fs.Path file, long size, int length, int count, int seed)
            throws Exception {
        Random random = new Random(seed);
        byte[] buf = new byte[length];
        long start = System.nanoTime();
        try (FSDataInputStream in = fs.open(file)) {
            for (int i = 0; i < count; i++) {
                long pos = (long) (random.nextDouble() * (size - length));
                in.readFully(pos, buf);
            }
        }
        return (double) count * length / 1048576.0 / ((System.nanoTime() - start) / 1e9);
    }
}

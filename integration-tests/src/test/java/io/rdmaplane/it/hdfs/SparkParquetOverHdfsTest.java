package io.rdmaplane.it.hdfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder;
import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Spark SQL reads a Parquet table from a MiniDFSCluster (two DataNodes with the RDMA block
 * service, 1 MiB blocks) once with the stock HDFS client and once with the RDMA replica
 * accessor, which Spark's Hadoop configuration turns on through {@code spark.hadoop.*}: the
 * aggregation gives the same rows, and only the second run reads through RDMA.
 */
class SparkParquetOverHdfsTest {
    static final int ROWS = 120_000;
    static final String QUERY = "SELECT k, count(*) AS n, sum(v) AS sv, min(s) AS mins, max(s) AS maxs,"
            + " bit_xor(xxhash64(id, k, v, s)) AS h FROM t GROUP BY k ORDER BY k";
    static HdfsCluster hdfs;
    static String table;

    @BeforeAll
    static void start() throws Exception {
        hdfs = new HdfsCluster(2, 0, true);
        assertEquals(2, RdmaDataNodePlugin.running().size(), "both DataNodes run the RDMA block service");
        table = hdfs.cluster.getURI() + "/table";
    }

    @AfterAll
    static void stop() throws Exception {
        if (hdfs != null) {
            hdfs.close();
        }
    }

    /** A local session whose Hadoop configuration has the RDMA accessor, or not. */
    static SparkSession session(boolean rdma) throws Exception {
        SparkSession.Builder b = SparkSession.builder().master("local[2]").appName("parquet-over-hdfs-" + rdma)
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.sql.warehouse.dir", Files.createTempDirectory("warehouse").toUri().toString())
                // FileSystem instances are cached per scheme, authority and user, not per configuration:
                // without this a session would read with the client (and accessor setting) of an earlier one.
                .config("spark.hadoop.fs.hdfs.impl.disable.cache", "true")
                // the accessor builder is given the file's path but not its NameNode: it takes fs.defaultFS,
                // as on a Hadoop cluster's Spark (a file of another namespace is read by HDFS over TCP)
                .config("spark.hadoop.fs.defaultFS", hdfs.cluster.getURI().toString())
                .config("spark.hadoop.dfs.blocksize", String.valueOf(HdfsCluster.BLOCK))
                .config("spark.hadoop.dfs.replication", "2")
                // row groups of 1 MiB: Parquet's HDFS block size is the larger of it and dfs.blocksize
                .config("spark.hadoop.parquet.block.size", String.valueOf(HdfsCluster.BLOCK));
        if (rdma) {
            b.config("spark.hadoop." + HdfsCluster.ACCESSOR_KEY, RdmaReplicaAccessorBuilder.class.getName());
        }
        return b.getOrCreate();
    }

    static long counter(String name) {
        return RdmaReplicaAccessorBuilder.metrics().counter(name).getCount();
    }

    /** Bytes read by all HDFS clients of this JVM, through RDMA or TCP (Hadoop's per-scheme statistics). */
    @SuppressWarnings("deprecation")
    static long hdfsBytesRead() {
        return FileSystem.getStatistics("hdfs", DistributedFileSystem.class).getBytesRead();
    }

    static long served() {
        return RdmaDataNodePlugin.running().stream().mapToLong(RdmaDataNodePlugin::getServed).sum();
    }

    static List<String> run(SparkSession spark) {
        spark.read().parquet(table).createOrReplaceTempView("t");
        return spark.sql(QUERY).collectAsList().stream().map(Row::toString).collect(Collectors.toList());
    }

    @Test
    void aggregationOverParquetIsTheSameWithAndWithoutRdma() throws Exception {
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        long accessors = counter("hdfs.client.accessors");
        long servedBefore = served();

        List<String> stock;
        SparkSession spark = session(false);
        try {
            // written with the plain client: a few MiB in two files, each over several 1 MiB blocks
            spark.range(0, ROWS, 1, 2).selectExpr("id", "CAST(id % 37 AS INT) AS k",
                            "CAST(rand(42) * 1000000 AS BIGINT) AS v",
                            "substr(sha2(CAST(id AS STRING), 256), 1, 24) AS s")
                    .write().mode("overwrite").parquet(table);
            long before = hdfsBytesRead();
            stock = run(spark);
            assertTrue(hdfsBytesRead() > before, "the stock session read the table from HDFS");
        } finally {
            spark.stop();
        }
        assertEquals(rdmaBytes, counter("hdfs.client.rdma.bytes"), "the stock session read nothing through RDMA");
        assertEquals(accessors, counter("hdfs.client.accessors"), "the stock session made no RDMA accessor");

        DistributedFileSystem fs = (DistributedFileSystem) hdfs.stock;
        FileStatus[] parts = Arrays.stream(fs.listStatus(new Path("/table")))
                .filter(f -> f.getPath().getName().endsWith(".parquet")).toArray(FileStatus[]::new);
        long size = Arrays.stream(parts).mapToLong(FileStatus::getLen).sum();
        assertTrue(parts.length >= 2 && size > 3L * HdfsCluster.BLOCK, parts.length + " files, " + size + " B");
        for (FileStatus part : parts) {
            assertEquals(HdfsCluster.BLOCK, part.getBlockSize(), part.getPath() + " block size");
        }

        long fallbacks = counter("hdfs.client.fallbacks");
        long declined = counter("hdfs.client.declined");
        long hdfsBefore = hdfsBytesRead();
        long hdfsRead;
        List<String> viaRdma;
        spark = session(true);
        try {
            viaRdma = run(spark);
            hdfsRead = hdfsBytesRead() - hdfsBefore;
        } finally {
            spark.stop();
        }

        assertEquals(37, stock.size());
        assertEquals(ROWS, stock.stream().mapToLong(r -> Long.parseLong(r.split(",")[1])).sum(), "every row counted");
        assertEquals(stock, viaRdma, "the same result through RDMA");
        long read = counter("hdfs.client.rdma.bytes") - rdmaBytes;
        assertTrue(read > 0, "the RDMA session read through RDMA");
        assertEquals(hdfsRead, read, "every byte the RDMA session read from HDFS came through RDMA");
        assertTrue(counter("hdfs.client.accessors") > accessors);
        assertEquals(fallbacks, counter("hdfs.client.fallbacks"), "no read fell back to TCP");
        assertEquals(declined, counter("hdfs.client.declined"), "no block was declined");
        assertTrue(served() > servedBefore, "the DataNodes served RDMA windows");
        System.out.println("SparkParquetOverHdfsTest: " + parts.length + " files, " + size + " B, " + read
                + " B read through RDMA");
    }
}

package io.rdmaplane.it.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder;
import java.io.IOException;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A cluster whose NameNode and DataNodes require encrypted data transfer: the RDMA data plane does
 * not encrypt, so the client plug-in steps aside even when its own configuration does not say so
 * (HDFS's client follows the NameNode), unless the operator opts in.
 */
class HdfsEncryptedTransferTest {
    private static final int SIZE = 2 * HdfsCluster.BLOCK + 3;
    static HdfsCluster hdfs;

    @BeforeAll
    static void start() throws IOException {
        hdfs = new HdfsCluster(1, 0, true, Map.of("dfs.encrypt.data.transfer", "true"));
        hdfs.write("/secret", HdfsCluster.bytes(SIZE, 7), 1);
    }

    @AfterAll
    static void stop() throws IOException {
        if (hdfs != null) {
            hdfs.close();
        }
    }

    @Test
    void aClusterThatRequiresEncryptionIsReadOverHdfsEncryptedTcpUnlessTheOperatorOptsIn() throws IOException {
        Configuration client = new Configuration(hdfs.rdmaConf);
        client.unset("dfs.encrypt.data.transfer"); // only the NameNode says so
        long declined = counter("hdfs.client.declined");
        long rdmaBytes = counter("hdfs.client.rdma.bytes");
        assertArrayEquals(HdfsCluster.bytes(SIZE, 7), read(client));
        assertTrue(counter("hdfs.client.declined") > declined, "the accessor declined: HDFS read over encrypted TCP");
        assertEquals(rdmaBytes, counter("hdfs.client.rdma.bytes"), "no byte through RDMA");

        client.setBoolean("dfs.rdma.encryption.allowPlaintext", true);
        assertArrayEquals(HdfsCluster.bytes(SIZE, 7), read(client));
        assertEquals(SIZE, counter("hdfs.client.rdma.bytes") - rdmaBytes, "opted in: every byte through RDMA");
    }

    private static byte[] read(Configuration conf) throws IOException {
        try (FileSystem fs = FileSystem.newInstance(hdfs.cluster.getURI(), conf);
             FSDataInputStream in = fs.open(new Path("/secret"))) {
            return HdfsCluster.readAll(in, 65536);
        }
    }

    private static long counter(String name) {
        return RdmaReplicaAccessorBuilder.metrics().counter(name).getCount();
    }
}

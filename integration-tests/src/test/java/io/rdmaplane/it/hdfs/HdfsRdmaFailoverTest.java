package io.rdmaplane.it.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.client.RdmaReplicaAccessorBuilder;
import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import java.util.Arrays;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.Test;

/** The DataNode's RDMA service goes away in the middle of a read: the read goes on over TCP with the same bytes. */
class HdfsRdmaFailoverTest {
    @Test
    void serviceLostMidReadFallsBackToTcpWithTheSameBytes() throws Exception {
        try (HdfsCluster hdfs = new HdfsCluster(1, 0, false)) {
            int size = 3 * HdfsCluster.BLOCK + 12345;
            byte[] expected = HdfsCluster.bytes(size, 77);
            hdfs.write("/lost", expected, 1);
            long fallbacks = RdmaReplicaAccessorBuilder.metrics().counter("hdfs.client.fallbacks").getCount();
            long rdmaBytes = RdmaReplicaAccessorBuilder.metrics().counter("hdfs.client.rdma.bytes").getCount();
            try (FSDataInputStream in = hdfs.rdma.open(new Path("/lost"))) {
                byte[] head = new byte[HdfsCluster.BLOCK + HdfsCluster.BLOCK / 2];
                in.readFully(head);
                assertArrayEquals(Arrays.copyOf(expected, head.length), head);
                assertEquals(1, RdmaDataNodePlugin.running().size());
                RdmaDataNodePlugin service = RdmaDataNodePlugin.running().get(0);
                service.stop(); // channels closed, regions deregistered: rkeys revoked mid-read
                assertEquals("STOPPED", service.getState());
                byte[] rest = HdfsCluster.readAll(in, 100_000);
                assertArrayEquals(Arrays.copyOfRange(expected, head.length, size), rest);
            }
            assertTrue(RdmaReplicaAccessorBuilder.metrics().counter("hdfs.client.rdma.bytes").getCount() - rdmaBytes
                    >= HdfsCluster.BLOCK, "the head came through RDMA");
            assertTrue(RdmaReplicaAccessorBuilder.metrics().counter("hdfs.client.fallbacks").getCount() > fallbacks,
                    "the reader fell back");
            // and a new reader of the whole file gets it all, over TCP now
            try (FSDataInputStream in = hdfs.rdma.open(new Path("/lost"))) {
                assertArrayEquals(expected, HdfsCluster.readAll(in, 65536));
            }
        }
    }
}

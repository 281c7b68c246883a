package io.rdmaplane.hdfs;

import io.rdmaplane.rdma.config.ConfigRegistry;
import io.rdmaplane.rdma.config.PolicyKeys;

/** The settings of the HDFS plug-ins, read from the Hadoop Configuration of each side. */
public final class HdfsRdmaConfig {
    /** The client's reader (ReplicaAccessorBuilder). */
    public static final ConfigRegistry CLIENT = new ConfigRegistry("HDFS client", "dfs.rdma.", PolicyKeys.SHARED);
    /** The DataNode plug-in (ServicePlugin). */
    public static final ConfigRegistry DATANODE = new ConfigRegistry("HDFS DataNode", "dfs.datanode.rdma.", PolicyKeys.SHARED);

    private HdfsRdmaConfig() {
    }
}

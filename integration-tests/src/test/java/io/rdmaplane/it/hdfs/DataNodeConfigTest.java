package io.rdmaplane.it.hdfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import io.rdmaplane.rdma.config.ConfigException;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.util.ServicePlugin;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A bad {@code dfs.datanode.rdma.*} setting stops the DataNode's start-up with an error naming the
 * key, as a bad value of HDFS's own settings does; a plug-in that cannot start at run time leaves
 * the DataNode serving over TCP instead (HdfsRdmaReadTest).
 */
class DataNodeConfigTest {
    static final String PLUGINS = "dfs.datanode.plugins";
    static final String LISTED = " (HDFS DataNode settings are listed in conf/configuration.md)";

    @TempDir
    Path dir;

    /** Through the call a DataNode loads its plug-ins with (DataNode.startPlugins). */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "dfs.datanode.rdma.registered.capp | 2g | unknown key dfs.datanode.rdma.registered.capp (did you mean dfs.datanode.rdma.registered.cap?)",
        "dfs.datanode.rdma.registered.cap | 2m | dfs.datanode.rdma.registered.cap = '2m': expected a byte size like 64k, 8m, 1g between 8m and 1t",
        "dfs.datanode.rdma.provider | rdma | dfs.datanode.rdma.provider = 'rdma': expected one of auto, verbs, tcp",
        "dfs.datanode.rdma.idleRelease | 1d | dfs.datanode.rdma.idleRelease = '1d': expected a duration like 200ms, 2s, 1m between 10ms and 1h"})
    void aBadSettingFailsTheLoadingOfThePluginNamingTheKey(String key, String value, String expected) {
        Configuration conf = new Configuration(false);
        conf.set(PLUGINS, RdmaDataNodePlugin.class.getName());
        conf.set(key, value);
        ConfigException e = assertThrows(ConfigException.class, () -> conf.getInstances(PLUGINS, ServicePlugin.class));
        assertEquals(expected + LISTED, e.getMessage());
    }

    @Test
    void goodSettingsLoadThePlugin() {
        Configuration conf = new Configuration(false);
        conf.set(PLUGINS, RdmaDataNodePlugin.class.getName());
        conf.set("dfs.datanode.rdma.registered.cap", "2g");
        conf.set("dfs.rdma.readahead", "8m"); // the client's keys are not the DataNode's business
        List<ServicePlugin> plugins = conf.getInstances(PLUGINS, ServicePlugin.class);
        assertEquals(1, plugins.size());
        assertTrue(plugins.get(0) instanceof RdmaDataNodePlugin);
        assertEquals(conf, ((RdmaDataNodePlugin) plugins.get(0)).getConf());
    }

    /**
     * A real DataNode, made as {@code hdfs datanode} makes it, stops: the DataNode rethrows what
     * loading its plug-ins throws (what a plug-in's start throws it only logs). No NameNode: the
     * DataNode would only keep trying to reach one.
     */
    @Test
    void aTypoStopsARealDataNodesStartUp() throws IOException {
        Configuration conf = new HdfsConfiguration();
        conf.set("fs.defaultFS", "hdfs://127.0.0.1:" + freePort());
        conf.setInt("ipc.client.connect.max.retries", 0); // its NameNode actor gives up at once, so shutdown is quick
        conf.set("dfs.datanode.data.dir", dir.resolve("data").toUri().toString());
        for (String address : new String[] {"dfs.datanode.address", "dfs.datanode.http.address", "dfs.datanode.ipc.address"}) {
            conf.set(address, "127.0.0.1:0");
        }
        conf.set(PLUGINS, RdmaDataNodePlugin.class.getName());
        conf.set("dfs.datanode.rdma.idelRelease", "30s");
        DataNode dataNode = DataNode.instantiateDataNode(new String[0], conf);
        try {
            ConfigException e = assertThrows(ConfigException.class, dataNode::runDatanodeDaemon);
            assertEquals("unknown key dfs.datanode.rdma.idelRelease (did you mean dfs.datanode.rdma.idleRelease?)" + LISTED,
                    e.getMessage());
        } finally {
            dataNode.shutdown();
        }
    }

    /** A port nothing listens on (the NameNode address the DataNode tries). */
    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }
}

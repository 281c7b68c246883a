package io.rdmaplane.hdfs;

import io.rdmaplane.rdma.config.Conf;
import io.rdmaplane.rdma.config.ConfigKey;
import io.rdmaplane.rdma.config.ConfigRegistry;
import io.rdmaplane.rdma.config.PolicyKeys;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;

/** The settings of the HDFS plug-ins, read from the Hadoop Configuration of each side. */
public final class HdfsRdmaConfig {
    // ---------------------------------------------------------------- client (dfs.rdma.)
    public static final ConfigKey<Boolean> CLIENT_ENABLED = ConfigKey.booleanKey("enabled", true,
            "Whether the client reads block data with RDMA READ (false: the accessor always declines, HDFS reads over TCP).");
    public static final ConfigKey<Integer> CLIENT_DATANODE_PORT = ConfigKey.intKey("datanode.port", 0, 0, 65535,
            "RDMA port of every DataNode when they all use one fixed port; 0 = ask each DataNode (its /jmx lists the port its plug-in bound).");
    public static final ConfigKey<Long> CLIENT_READAHEAD = ConfigKey.byteSizeKey("readahead", "4m", "64k", "8m",
            "Bytes one RDMA READ window covers; each open block reader holds two registered landing buffers of this size (the window being read and the next).");
    public static final ConfigKey<Duration> CLIENT_DISCOVERY_TIMEOUT = ConfigKey.durationKey("discovery.timeout", "2s",
            "10ms", "1m", "Connect and read timeout of asking a DataNode's HTTP server for its RDMA port.");
    public static final ConfigKey<Duration> CLIENT_NEGATIVE_CACHE = ConfigKey.durationKey("negativeCache.time", "30s",
            "0ms", "1h", "How long a DataNode without a usable RDMA service (or a block it refused) is read over TCP before RDMA is tried again.");
    public static final ConfigKey<Duration> CLIENT_TOKEN_SESSION_IDLE = ConfigKey.durationKey("tokenSession.idle", "30s", "1s", "1h",
            "With block tokens on, the client's RDMA session with a DataNode (its own connections, one per block pool and"
                    + " token user) that no open block reader holds and none used for this long is closed, on both ends; a later read"
                    + " opens a new one. Without this bound"
                    + " the sessions of every DataNode and user once read from would stay open.");
    public static final ConfigKey<Boolean> CLIENT_ALLOW_PLAINTEXT = ConfigKey.booleanKey("encryption.allowPlaintext", false,
            "Where dfs.encrypt.data.transfer=true (in the client's configuration or the NameNode's) the client reads over"
                    + " HDFS's encrypted TCP path, because the RDMA data plane does not encrypt; true reads over RDMA all the"
                    + " same, so block data crosses the network unencrypted.");

    // ---------------------------------------------------------------- DataNode (dfs.datanode.rdma.)
    public static final ConfigKey<Boolean> DN_ENABLED = ConfigKey.booleanKey("enabled", true,
            "Whether the plug-in listed in dfs.datanode.plugins starts the RDMA block service.");
    public static final ConfigKey<Long> DN_REGISTERED_CAP = ConfigKey.byteSizeKey("registered.cap", "1g", "8m", "1t",
            "Cap on the bytes of block-file mappings registered for READ at once; past it idle regions are released, else clients fall back.");
    public static final ConfigKey<Duration> DN_IDLE_RELEASE = ConfigKey.durationKey("idleRelease", "30s", "10ms", "1h",
            "A registered block region not asked for this long is deregistered (and so is one whose replica is gone or changed).");
    public static final ConfigKey<Duration> DN_LEASE = ConfigKey.durationKey("lease", "5s", "0ms", "10m",
            "A region handed to a client is not released to make room under the cap for this long, so its READs can finish.");

    private static final List<ConfigKey<?>> CLIENT_KEYS = List.of(CLIENT_ENABLED, CLIENT_DATANODE_PORT, CLIENT_READAHEAD,
            CLIENT_DISCOVERY_TIMEOUT, CLIENT_NEGATIVE_CACHE, CLIENT_ALLOW_PLAINTEXT, CLIENT_TOKEN_SESSION_IDLE);
    private static final List<ConfigKey<?>> DATANODE_KEYS = List.of(DN_ENABLED, DN_REGISTERED_CAP, DN_IDLE_RELEASE, DN_LEASE);

    /** The client's reader (ReplicaAccessorBuilder). */
    public static final ConfigRegistry CLIENT = new ConfigRegistry("HDFS client", "dfs.rdma.",
            Stream.concat(PolicyKeys.SHARED.stream(), CLIENT_KEYS.stream()).toList());
    /** The DataNode plug-in (ServicePlugin). */
    public static final ConfigRegistry DATANODE = new ConfigRegistry("HDFS DataNode", "dfs.datanode.rdma.",
            Stream.concat(PolicyKeys.SHARED.stream(), DATANODE_KEYS.stream()).toList());

    private HdfsRdmaConfig() {
    }

    /**
     * The client's {@code dfs.rdma.*} settings in {@code conf}, validated.
     *
     * @throws io.rdmaplane.rdma.config.ConfigException naming every unknown key and bad value
     */
    public static Conf client(Configuration conf) {
        return validated(CLIENT, conf);
    }

    /**
     * The DataNode's {@code dfs.datanode.rdma.*} settings in {@code conf}, validated.
     *
     * @throws io.rdmaplane.rdma.config.ConfigException naming every unknown key and bad value
     */
    public static Conf dataNode(Configuration conf) {
        return validated(DATANODE, conf);
    }

    private static Conf validated(ConfigRegistry registry, Configuration conf) {
        // Only the names under the prefix: a client checks on every block reader, and a Configuration holds about a
        // thousand keys. Values through get, which substitutes variables and follows deprecated names as Hadoop does.
        List<String> names = conf.getPropsWithPrefix(registry.prefix()).keySet().stream()
                .map(suffix -> registry.prefix() + suffix).toList();
        return registry.validate(names, conf::get);
    }
}

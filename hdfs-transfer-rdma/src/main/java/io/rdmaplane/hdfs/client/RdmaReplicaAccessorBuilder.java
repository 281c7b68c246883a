package io.rdmaplane.hdfs.client;

import com.codahale.metrics.MetricRegistry;
import io.rdmaplane.hdfs.HdfsRdmaConfig;
import io.rdmaplane.rdma.config.Conf;
import io.rdmaplane.rdma.config.ConfigException;
import io.rdmaplane.rdma.policy.PeerConnection;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.ReplicaAccessor;
import org.apache.hadoop.hdfs.ReplicaAccessorBuilder;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The client side: listed in {@code dfs.client.replica.accessor.builder.classes}, HDFS's block
 * reader factory asks it first for every block reader (sequential reads, each positioned read).
 * {@link #build()} returns an RDMA accessor, or null so that HDFS uses its own readers (TCP,
 * short-circuit): when RDMA is off, the transport cannot start here, the block is not found or
 * still being written, no DataNode holding it runs the RDMA service, or one of them recently
 * refused it, or encrypted data transfer is asked for ({@code dfs.encrypt.data.transfer}: the RDMA
 * data plane does not encrypt, HDFS's TCP path does; {@code dfs.rdma.encryption.allowPlaintext}
 * overrides it). A bad {@code dfs.rdma.*} setting is not a reason to read over TCP: it is an error
 * naming the key, thrown by the reads of that block.
 *
 * <p>HDFS gives the builder the block but not the DataNode it chose, so the builder asks the
 * NameNode for the file's block locations (cached per file) and takes the first location, in
 * the NameNode's distance order, whose RDMA service is known and not given up.
 */
public final class RdmaReplicaAccessorBuilder extends ReplicaAccessorBuilder {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaReplicaAccessorBuilder.class);
    static final String ENCRYPT_DATA_TRANSFER = "dfs.encrypt.data.transfer";
    private static final AtomicBoolean ENCRYPTION_SAID = new AtomicBoolean();

    private String fileName;
    private long blockId;
    private String poolId;
    private long generationStamp;
    private boolean verifyChecksum = true;
    private long visibleLength;
    private Configuration conf;
    private byte[] token = new byte[0];

    /** The client counters of this JVM ({@code hdfs.client.*}) and the policy layer's ({@code rdma.*}). */
    public static MetricRegistry metrics() {
        return RdmaClientContext.registry();
    }

    /**
     * This JVM's {@code hdfs.client.*} counters as plain numbers, for callers that cannot link {@link #metrics()}'s
     * type: the HDFS plug-in jar relocates it (e.g. a Spark application reporting what its executors read).
     */
    public static Map<String, Long> clientCounters() {
        Map<String, Long> out = new TreeMap<>();
        metrics().getCounters((name, metric) -> name.startsWith("hdfs.client.")).forEach((name, c) -> out.put(name, c.getCount()));
        return out;
    }

    @Override
    public ReplicaAccessorBuilder setFileName(String fileName) {
        this.fileName = fileName;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setBlock(long blockId, String blockPoolId) {
        this.blockId = blockId;
        this.poolId = blockPoolId;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setGenerationStamp(long generationStamp) {
        this.generationStamp = generationStamp;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setVerifyChecksum(boolean verifyChecksum) {
        this.verifyChecksum = verifyChecksum;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setClientName(String clientName) {
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setAllowShortCircuitReads(boolean allowShortCircuitReads) {
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setVisibleLength(long visibleLength) {
        this.visibleLength = visibleLength;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setConfiguration(Configuration configuration) {
        this.conf = configuration;
        return this;
    }

    @Override
    public ReplicaAccessorBuilder setBlockAccessToken(byte[] token) {
        this.token = token == null ? new byte[0] : token.clone();
        return this;
    }

    /**
     * @return an RDMA accessor; null when RDMA cannot serve this block (HDFS then reads it over TCP);
     *         or, when a {@code dfs.rdma.*} setting is bad, an accessor whose reads fail with the
     *         error naming the key: a misconfigured client must not quietly read over TCP
     */
    @Override
    public ReplicaAccessor build() {
        if (conf == null || fileName == null || poolId == null || visibleLength <= 0) {
            RdmaClientContext.count("hdfs.client.declined");
            return null;
        }
        Conf c;
        try {
            c = RdmaClientContext.settings(conf);
        } catch (ConfigException bad) {
            RdmaClientContext.count("hdfs.client.configErrors");
            return new MisconfiguredReplicaAccessor(bad);
        }
        try {
            ReplicaAccessor accessor = tryBuild(c);
            RdmaClientContext.count(accessor == null ? "hdfs.client.declined" : "hdfs.client.accessors");
            return accessor;
        } catch (Throwable t) {
            RdmaClientContext.count("hdfs.client.declined");
            LOG.debug("no RDMA reader for block {} of {}; HDFS reads it over TCP", blockId, fileName, t);
            return null;
        }
    }

    private ReplicaAccessor tryBuild(Conf c) throws Exception {
        if (!c.get(HdfsRdmaConfig.CLIENT_ENABLED)) {
            return null;
        }
        URI nameNode = RdmaClientContext.nameNodeOf(conf);
        if (!"hdfs".equals(nameNode.getScheme())) {
            return null;
        }
        RdmaClientContext ctx = RdmaClientContext.get(c);
        if (ctx == null) {
            return null;
        }
        String encryption = encryptionAskedFor(ctx, nameNode);
        if (encryption != null) {
            boolean allowed = c.get(HdfsRdmaConfig.CLIENT_ALLOW_PLAINTEXT);
            if (ENCRYPTION_SAID.compareAndSet(false, true)) {
                String key = HdfsRdmaConfig.CLIENT.fullName(HdfsRdmaConfig.CLIENT_ALLOW_PLAINTEXT);
                if (allowed) {
                    LOG.warn("HDFS RDMA client: {}, but {}=true: block data is read over RDMA, unencrypted", encryption, key);
                } else {
                    LOG.warn("HDFS RDMA client: {}, and the RDMA data plane does not encrypt: blocks are read over HDFS's"
                            + " encrypted TCP path ({}=true would read them over RDMA, unencrypted)", encryption, key);
                }
            }
            if (!allowed) {
                return null;
            }
        }
        RdmaClientContext.LocatedBlockInFile located = ctx.locate(nameNode, conf, fileName, poolId, blockId, generationStamp);
        if (located == null || located.underConstruction()) {
            return null; // another namespace's file, a block that moved on, or one being written: HDFS knows best
        }
        int fixedPort = c.get(HdfsRdmaConfig.CLIENT_DATANODE_PORT);
        int timeout = (int) Math.min(Integer.MAX_VALUE, c.get(HdfsRdmaConfig.CLIENT_DISCOVERY_TIMEOUT).toMillis());
        long negative = c.get(HdfsRdmaConfig.CLIENT_NEGATIVE_CACHE).toNanos();
        for (DatanodeInfo dn : located.block().getLocations()) {
            if (ctx.refused(poolId, blockId, generationStamp, dn)) {
                continue;
            }
            int port = ctx.directory.port(dn, fixedPort, timeout, negative);
            if (port <= 0) {
                continue;
            }
            PeerConnection peer = ctx.connection(new InetSocketAddress(dn.getIpAddr(), port), token);
            if (peer.isFailed()) {
                ctx.release(peer);
                continue;
            }
            return new RdmaReplicaAccessor(ctx, peer, dn, located.block(), nameNode, conf, fileName, token, verifyChecksum,
                    visibleLength, Math.toIntExact(c.get(HdfsRdmaConfig.CLIENT_READAHEAD)), negative);
        }
        return null;
    }

    /** Where encrypted data transfer is asked for (this client's configuration, else the NameNode's), or null. */
    private String encryptionAskedFor(RdmaClientContext ctx, URI nameNode) throws Exception {
        if (conf.getBoolean(ENCRYPT_DATA_TRANSFER, false)) {
            return ENCRYPT_DATA_TRANSFER + "=true in this client's configuration";
        }
        // What HDFS's own client follows: the NameNode's server defaults (cached by the DFSClient).
        if (ctx.plainClient(nameNode, conf).getServerDefaults().getEncryptDataTransfer()) {
            return "the NameNode at " + nameNode + " requires encrypted data transfer (" + ENCRYPT_DATA_TRANSFER + "=true)";
        }
        return null;
    }
}

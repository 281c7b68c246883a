package io.rdmaplane.hdfs.client;

import com.codahale.metrics.MetricRegistry;
import io.rdmaplane.hdfs.HdfsRdmaConfig;
import io.rdmaplane.rdma.config.Conf;
import io.rdmaplane.rdma.config.PolicyKeys;
import io.rdmaplane.rdma.config.TransportKeys;
import io.rdmaplane.hdfs.BlockTokens;
import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import io.rdmaplane.rdma.policy.ClientCredential;
import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.DFSClient;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.hdfs.protocol.LocatedBlocks;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.security.token.Token;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the HDFS client's RDMA readers of one JVM share: the transport node, the policy client
 * (one connection pair per DataNode), the registered landing pool, the DataNode directory, the
 * per-file block locations, and plain DFSClients (without the accessor) for locations, bad-block
 * reports and the TCP fallback. Made on first use from the first configuration that enables it.
 */
final class RdmaClientContext {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaClientContext.class);
    static final String BUILDER_CLASSES_KEY = "dfs.client.replica.accessor.builder.classes";
    private static final long LOCATIONS_TTL_NANOS = 30_000_000_000L;
    private static final PolicyMetrics METRICS = new PolicyMetrics();
    private static volatile RdmaClientContext instance;
    private static volatile Throwable initFailure;
    /**
     * Client settings already validated, per Configuration: HDFS hands every block reader of a client
     * the same one, and checking its thousand names on each would cost more than a small READ. Like
     * HDFS's own client settings, names are checked when the client first reads (values on every get).
     * Weak keys: a closed client's configuration is not kept; identity, as Configuration has no equals.
     */
    private static final Map<Configuration, Conf> VALIDATED = Collections.synchronizedMap(new WeakHashMap<>());

    final Node node;
    final PolicyClient policy;
    final RegisteredMemoryPool pool;
    final DataNodeDirectory directory = new DataNodeDirectory();
    private final Map<URI, DFSClient> plainClients = new ConcurrentHashMap<>();
    private final Map<String, Located> locations = new ConcurrentHashMap<>();
    /** Blocks a DataNode refused, until when: read over TCP meanwhile. Key: pool/block/genstamp@ip:xferPort. */
    private final Map<String, Long> refusedUntil = new ConcurrentHashMap<>();

    private record Located(LocatedBlocks blocks, long fetchedNanos) {
    }

    /** Token sessions kept for reuse (a pread opens a reader per call); the least recently used beyond it are closed. */
    static final int TOKEN_SESSIONS_KEPT = 256;
    /**
     * Connections of their own per (DataNode service, block pool, token user): a DataNode with block tokens on
     * opens a session for a valid token and serves it the blocks of that token's pool and user, each request
     * checked with its own token. One no reader holds and none used for {@code tokenSession.idle} is closed.
     */
    private final TokenSessions<PeerConnection> tokenSessions;
    /** Closes idle token sessions, a few times per idle bound. */
    private final ScheduledExecutorService sweeper;

    private RdmaClientContext(Conf c) throws Exception {
        NodeOptions options = TransportKeys.nodeOptions(c, "0.0.0.0");
        node = Providers.select(c.get(TransportKeys.PROVIDER), options).createNode(options);
        try {
            // A DataNode whose RDMA port turns connections away is dead or restarting: its readers go to TCP (the
            // stock reader tries the next replica) at once instead of through every reconnect attempt (~15 s)
            policy = new PolicyClient(node, PolicyKeys.policyOptions(c, null), METRICS, new PolicyClient.Listener() { },
                    PolicyClient.Liveness.REFUSED_IS_GONE);
            pool = new RegisteredMemoryPool(node, TransportKeys.poolOptions(c));
            METRICS.watchPool("hdfsClient", pool);
        } catch (Exception | Error e) {
            node.close();
            throw e;
        }
        long idle = c.get(HdfsRdmaConfig.CLIENT_TOKEN_SESSION_IDLE).toNanos();
        tokenSessions = new TokenSessions<>(TOKEN_SESSIONS_KEPT, idle, PeerConnection::close);
        sweeper = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "rdma-hdfs-token-sessions");
            t.setDaemon(true); // the context lives as long as its JVM
            return t;
        });
        long period = Math.max(TimeUnit.MILLISECONDS.toNanos(250), idle / 4);
        sweeper.scheduleWithFixedDelay(() -> {
            try {
                tokenSessions.closeIdle(System.nanoTime());
            } catch (RuntimeException e) {
                LOG.warn("closing idle token sessions failed", e); // the next sweep tries again
            }
        }, period, period, TimeUnit.NANOSECONDS);
        LOG.info("HDFS RDMA reads enabled in this JVM over the {} provider", node.providerName());
    }

    /**
     * The client's validated {@code dfs.rdma.*} settings in {@code conf}.
     *
     * @throws io.rdmaplane.rdma.config.ConfigException naming every unknown key and bad value
     */
    static Conf settings(Configuration conf) {
        Conf c = VALIDATED.get(conf);
        if (c == null) {
            c = HdfsRdmaConfig.client(conf);
            VALIDATED.put(conf, c);
        }
        return c;
    }

    /**
     * The JVM's context, or null when it could not be made (logged once; HDFS then reads over TCP).
     *
     * @param c validated client settings; the first call's settings make the context
     */
    static RdmaClientContext get(Conf c) {
        RdmaClientContext ctx = instance;
        if (ctx != null || initFailure != null) {
            return ctx;
        }
        synchronized (RdmaClientContext.class) {
            if (instance == null && initFailure == null) {
                try {
                    instance = new RdmaClientContext(c);
                } catch (Throwable t) {
                    initFailure = t;
                    LOG.warn("HDFS RDMA reads are OFF in this JVM: the transport could not start ({}); reading over TCP", t.toString(), t);
                }
            }
            return instance;
        }
    }

    static PolicyMetrics metrics() {
        return METRICS;
    }

    static void count(String name) {
        METRICS.registry().counter(name).inc();
    }

    static void count(String name, long n) {
        METRICS.registry().counter(name).inc(n);
    }

    static MetricRegistry registry() {
        return METRICS.registry();
    }

    /**
     * The connection to read a block from the DataNode service at {@code service} with {@code token}
     * (Hadoop {@code Token.write} bytes): with a token that carries a password (block tokens on), the
     * session of its pool and user, opened proving the password of the first such token; without one, the
     * JVM's shared connection. The caller holds it until {@link #release}: a held session is never closed as idle.
     *
     * @throws IOException when the token bytes are malformed (the read goes over TCP)
     */
    PeerConnection connection(InetSocketAddress service, byte[] token) throws IOException {
        if (token.length == 0) {
            return policy.peer(service);
        }
        Token<BlockTokenIdentifier> parsed = BlockTokens.decode(token);
        if (!BlockTokens.hasPassword(parsed)) {
            return policy.peer(service);
        }
        // the DataNode serves a session any block of its token's pool and user, each request with its own token:
        // one session per (DataNode, pool, user), opened with the first token it reads with
        BlockTokenIdentifier id = BlockTokens.identifier(parsed.getIdentifier());
        String key = service + "/" + id.getBlockPoolId() + "/" + id.getUserId();
        return tokenSessions.acquire(key, existing -> !existing.isFailed(), () -> {
            count("hdfs.client.tokenSessions.opened");
            return policy.dedicated(service, new ClientCredential(parsed.getIdentifier(), parsed.getPassword()));
        });
    }

    /** A reader is done with {@code connection} from {@link #connection}: a token session's idle time starts now. */
    void release(PeerConnection connection) {
        tokenSessions.release(connection, System.nanoTime());
    }

    /** A DFSClient for {@code nameNode} that never uses a replica accessor: no recursion into us. */
    DFSClient plainClient(URI nameNode, Configuration conf) throws IOException {
        DFSClient existing = plainClients.get(nameNode);
        if (existing != null) {
            return existing;
        }
        synchronized (plainClients) {
            existing = plainClients.get(nameNode);
            if (existing == null) {
                Configuration plain = new Configuration(conf);
                plain.unset(BUILDER_CLASSES_KEY);
                existing = new DFSClient(nameNode, plain);
                plainClients.put(nameNode, existing);
            }
            return existing;
        }
    }

    /**
     * The located block {@code blockId} of {@code file} (cached per file; asked again once when the
     * block or its generation stamp is not in the cached list), or null.
     */
    LocatedBlockInFile locate(URI nameNode, Configuration conf, String file, String poolId, long blockId, long genStamp)
            throws IOException {
        String key = nameNode + file;
        long now = System.nanoTime();
        Located cached = locations.get(key);
        LocatedBlockInFile found = cached != null && now - cached.fetchedNanos < LOCATIONS_TTL_NANOS
                ? find(cached.blocks, poolId, blockId, genStamp) : null;
        if (found != null && !found.underConstruction()) {
            return found; // a block being written may be complete by now: ask again for it
        }
        LocatedBlocks fresh = plainClient(nameNode, conf).getLocatedBlocks(file, 0, Long.MAX_VALUE);
        count("hdfs.client.locationLookups");
        if (fresh == null) {
            return null;
        }
        locations.put(key, new Located(fresh, now));
        if (locations.size() > 10_000) {
            locations.clear(); // a crude bound: long-lived clients open many files
        }
        return find(fresh, poolId, blockId, genStamp);
    }

    /** A block with its place in the file and whether it is the file's block still being written. */
    record LocatedBlockInFile(LocatedBlock block, boolean underConstruction) {
    }

    private static LocatedBlockInFile find(LocatedBlocks blocks, String poolId, long blockId, long genStamp) {
        for (LocatedBlock lb : blocks.getLocatedBlocks()) {
            if (lb.getBlock().getBlockId() == blockId) {
                if (!lb.getBlock().getBlockPoolId().equals(poolId) || lb.getBlock().getGenerationStamp() != genStamp) {
                    return null;
                }
                boolean last = lb == blocks.getLocatedBlocks().get(blocks.getLocatedBlocks().size() - 1);
                return new LocatedBlockInFile(lb, last && blocks.isUnderConstruction() && !blocks.isLastBlockComplete());
            }
        }
        return null;
    }

    void refuse(String poolId, long blockId, long genStamp, DatanodeInfo dn, long nanos) {
        refusedUntil.put(refusalKey(poolId, blockId, genStamp, dn), System.nanoTime() + nanos);
    }

    boolean refused(String poolId, long blockId, long genStamp, DatanodeInfo dn) {
        Long until = refusedUntil.get(refusalKey(poolId, blockId, genStamp, dn));
        if (until == null) {
            return false;
        }
        if (System.nanoTime() - until >= 0) {
            refusedUntil.remove(refusalKey(poolId, blockId, genStamp, dn), until);
            return false;
        }
        return true;
    }

    private static String refusalKey(String poolId, long blockId, long genStamp, DatanodeInfo dn) {
        return poolId + "/" + blockId + "/" + genStamp + "@" + dn.getIpAddr() + ":" + dn.getXferPort();
    }

    static URI nameNodeOf(Configuration conf) {
        return FileSystem.getDefaultUri(conf);
    }
}

package io.rdmaplane.hdfs.datanode;

import io.rdmaplane.hdfs.HdfsRdmaConfig;
import io.rdmaplane.rdma.config.Conf;
import io.rdmaplane.rdma.config.PolicyKeys;
import io.rdmaplane.rdma.config.TransportKeys;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyServer;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import javax.management.ObjectName;
import org.apache.hadoop.conf.Configurable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.security.token.block.BlockPoolTokenSecretManager;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.util.ServicePlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The DataNode side: a {@link ServicePlugin} listed in {@code dfs.datanode.plugins}. On
 * {@link #start} (the DataNode's ports are bound by then) it starts a transport node and a policy
 * server on the DataNode's transfer host at {@code dfs.datanode.rdma.port} (0: any free port),
 * and publishes its state and port as a JMX bean, which the DataNode's {@code /jmx} serves and
 * clients read to find the port. Failing to start never stops the DataNode: it logs one ERROR
 * line that says so and the bean shows FAILED with the cause; clients then read over TCP.
 *
 * <p>A bad {@code dfs.datanode.rdma.*} setting is different: it stops the DataNode's start-up with
 * an error naming the key, as a bad value of HDFS's own settings does. Hadoop makes the plug-in
 * with {@code ReflectionUtils.newInstance}, which hands a {@link Configurable} its configuration,
 * and the DataNode rethrows what that throws (it only logs what {@link #start} throws).
 */
public final class RdmaDataNodePlugin implements ServicePlugin, Configurable, RdmaBlockServiceMXBean {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaDataNodePlugin.class);
    /** The bean name of the service of the DataNode whose transfer port is {@code xferPort}. */
    public static final String BEAN_PREFIX = "Hadoop:service=DataNode,name=RdmaBlockService-";
    private static final List<RdmaDataNodePlugin> RUNNING = new ArrayList<>();

    private volatile String state = "STARTING";
    private volatile String error = "";
    private volatile int port;
    private volatile String provider = "";
    private DataNode dataNode;
    private Node node;
    private PolicyServer server;
    private BlockService service;
    private ScheduledExecutorService sweeper;
    private ObjectName beanName;
    private Configuration conf;
    private final PolicyMetrics metrics = new PolicyMetrics();

    public static String beanName(int xferPort) {
        return BEAN_PREFIX + xferPort;
    }

    /**
     * @throws io.rdmaplane.rdma.config.ConfigException naming every unknown key and bad value under
     *         {@code dfs.datanode.rdma.}
     */
    @Override
    public void setConf(Configuration conf) {
        HdfsRdmaConfig.dataNode(conf);
        this.conf = conf;
    }

    @Override
    public Configuration getConf() {
        return conf;
    }

    @Override
    public void start(Object service) {
        if (!(service instanceof DataNode dn)) {
            LOG.error("RDMA block service NOT started: it is a DataNode plug-in (dfs.datanode.plugins) but was started by {}",
                    service == null ? "null" : service.getClass().getName());
            return;
        }
        dataNode = dn;
        InetSocketAddress xfer = dn.getXferAddress();
        publishBean(xfer.getPort());
        try {
            Configuration conf = dn.getConf();
            Conf c = HdfsRdmaConfig.dataNode(conf); // checked in setConf already when Hadoop made the plug-in
            if (!c.get(HdfsRdmaConfig.DN_ENABLED)) {
                state = "DISABLED";
                LOG.info("RDMA block service disabled on DataNode {} (dfs.datanode.rdma.enabled=false)", dn.getDisplayName());
                return;
            }
            String host = xfer.getAddress().getHostAddress();
            NodeOptions options = TransportKeys.nodeOptions(c, host);
            node = Providers.select(c.get(TransportKeys.PROVIDER), options).createNode(options);
            provider = node.providerName();
            boolean tokens = conf.getBoolean("dfs.block.access.token.enable", false);
            BlockService.DataNodeView view = new BlockService.DataNodeView() {
                @Override
                public FsDatasetSpi<?> dataset() {
                    return dn.getFSDataset();
                }

                @Override
                public BlockPoolTokenSecretManager tokenSecretManager() {
                    return tokens ? dn.getBlockPoolTokenSecretManager() : null;
                }
            };
            this.service = new BlockService(view, node, c.get(HdfsRdmaConfig.DN_REGISTERED_CAP),
                    c.get(HdfsRdmaConfig.DN_LEASE).toNanos());
            // With block tokens, a client opens its session with a valid block token, proving the token's password
            // (each request then brings its block's own token); without them, no proof is asked for and the server logs that its data plane is open.
            BlockTokenAuthenticator authenticator = tokens
                    ? new BlockTokenAuthenticator(dn.getBlockPoolTokenSecretManager(), this.service.tokenRefused) : null;
            server = new PolicyServer(node, PolicyKeys.policyOptions(c, null), PolicyKeys.serverLimits(c), metrics,
                    authenticator, this.service::handle).start();
            server.markReady(); // regions are registered per request, before their descriptor leaves
            long idle = c.get(HdfsRdmaConfig.DN_IDLE_RELEASE).toNanos();
            sweeper = new ScheduledThreadPoolExecutor(1, r -> {
                Thread t = new Thread(r, "rdma-block-service-sweeper");
                t.setDaemon(true);
                return t;
            });
            long period = Math.max(TimeUnit.MILLISECONDS.toNanos(5), Math.min(idle / 2, TimeUnit.SECONDS.toNanos(5)));
            BlockService s = this.service;
            sweeper.scheduleWithFixedDelay(() -> {
                try {
                    s.regions().sweep(idle, s::servable);
                } catch (RuntimeException e) {
                    LOG.warn("RDMA block service: sweeping regions failed", e);
                }
            }, period, period, TimeUnit.NANOSECONDS);
            port = node.localAddress().getPort();
            state = "RUNNING";
            node.terminated().whenCompleteAsync((closed, cause) -> { // not on the dying thread
                if (cause != null) {
                    died(dn, cause);
                }
            });
            synchronized (RUNNING) {
                RUNNING.add(this);
            }
            LOG.info("RDMA block service RUNNING on DataNode {}: {} provider at {} (block tokens {})", dn.getDisplayName(),
                    provider, node.localAddress(), tokens ? "checked" : "disabled");
        } catch (Throwable t) {
            state = "FAILED";
            error = String.valueOf(t);
            LOG.error("############ RDMA BLOCK SERVICE FAILED TO START on DataNode {}: {} -- this DataNode serves reads over TCP"
                    + " only; see the RdmaBlockService bean in its /jmx ############", dn.getDisplayName(), t.toString(), t);
            closeQuietly();
        }
    }

    /** The transport died under a running service: the bean says FAILED and why, clients read over TCP. */
    private void died(DataNode dn, Throwable cause) {
        if (!"RUNNING".equals(state)) {
            return;
        }
        state = "FAILED";
        error = "the transport failed: " + cause;
        port = 0;
        LOG.error("############ RDMA BLOCK SERVICE FAILED on DataNode {}: {} -- this DataNode serves reads over TCP only from"
                + " now on; see the RdmaBlockService bean in its /jmx ############", dn.getDisplayName(), error, cause);
        synchronized (RUNNING) {
            RUNNING.remove(this);
        }
        closeQuietly();
    }

    private void publishBean(int xferPort) {
        try {
            ObjectName name = new ObjectName(beanName(xferPort));
            var server = ManagementFactory.getPlatformMBeanServer();
            if (server.isRegistered(name)) {
                server.unregisterMBean(name); // a DataNode restarted in the same JVM (MiniDFSCluster)
            }
            server.registerMBean(this, name);
            beanName = name;
        } catch (Exception e) {
            LOG.warn("RDMA block service: could not publish its JMX bean; clients must use a fixed dfs.rdma.datanode.port", e);
        }
    }

    @Override
    public void stop() {
        if (!"FAILED".equals(state) && !"DISABLED".equals(state)) {
            state = "STOPPED";
        }
        port = 0;
        closeQuietly();
        synchronized (RUNNING) {
            RUNNING.remove(this);
        }
        if (beanName != null) {
            try {
                ManagementFactory.getPlatformMBeanServer().unregisterMBean(beanName);
            } catch (Exception ignored) {
                // already gone
            }
            beanName = null;
        }
    }

    private void closeQuietly() {
        if (sweeper != null) {
            sweeper.shutdownNow();
        }
        if (server != null) {
            server.close();
        }
        if (service != null) {
            service.close();
        }
        if (node != null) {
            node.close();
        }
    }

    @Override
    public void close() {
        stop();
    }

    /** The services running in this JVM (several DataNodes share one in MiniDFSCluster): for tests and tools. */
    public static List<RdmaDataNodePlugin> running() {
        synchronized (RUNNING) {
            return List.copyOf(RUNNING);
        }
    }

    public DataNode dataNode() {
        return dataNode;
    }

    public PolicyMetrics metrics() {
        return metrics;
    }

    @Override
    public String getState() {
        return state;
    }

    @Override
    public String getError() {
        return error;
    }

    @Override
    public int getPort() {
        return port;
    }

    @Override
    public String getProvider() {
        return provider;
    }

    @Override
    public long getRequests() {
        return service == null ? 0 : service.requests.get();
    }

    @Override
    public long getServed() {
        return service == null ? 0 : service.served.get();
    }

    @Override
    public long getRefused() {
        return service == null ? 0 : service.refused.get();
    }

    @Override
    public long getTokenRefused() {
        return service == null ? 0 : service.tokenRefused.get();
    }

    @Override
    public long getRegisteredBytes() {
        return service == null ? 0 : service.regions().registeredBytes();
    }

    @Override
    public int getRegions() {
        return service == null ? 0 : service.regions().size();
    }

    @Override
    public long getRegionsReleased() {
        return service == null ? 0 : service.regions().released();
    }
}

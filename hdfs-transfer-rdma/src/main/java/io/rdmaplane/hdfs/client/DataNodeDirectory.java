package io.rdmaplane.hdfs.client;

import io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where each DataNode's RDMA block service listens. With a fixed {@code dfs.rdma.datanode.port}
 * that port; otherwise the DataNode says it: its HTTP server's {@code /jmx} (Hadoop's JMX JSON
 * servlet, on every DataNode) lists the plug-in's bean with its state and port. One HTTP GET per
 * DataNode per client process; a DataNode without a running service is remembered for the
 * negative-cache time, during which HDFS reads it over TCP.
 */
final class DataNodeDirectory {
    private static final Logger LOG = LoggerFactory.getLogger(DataNodeDirectory.class);
    private static final Pattern PORT = Pattern.compile("\"Port\"\\s*:\\s*(\\d+)");
    private static final Pattern STATE = Pattern.compile("\"State\"\\s*:\\s*\"(\\w+)\"");

    private record Entry(int port, long expiresNanos) {
    }

    private final Map<String, Entry> entries = new ConcurrentHashMap<>();

    /** The RDMA port of {@code dn}, or 0 when it has no running service (as far as we know now). */
    int port(DatanodeInfo dn, int fixedPort, int timeoutMillis, long negativeNanos) {
        if (fixedPort > 0) {
            return fixedPort;
        }
        String key = dn.getIpAddr() + ":" + dn.getXferPort();
        long now = System.nanoTime();
        Entry e = entries.get(key);
        if (e != null && (e.port > 0 || now - e.expiresNanos < 0)) {
            return e.port;
        }
        Entry fresh = entries.compute(key, (k, old) -> old != null && old != e ? old
                : new Entry(ask(dn, timeoutMillis), System.nanoTime() + negativeNanos));
        return fresh.port;
    }

    /** Forgets what {@code dn} said, e.g. after its service stopped answering. */
    void forget(String ipAddr, int xferPort, long negativeNanos) {
        entries.put(ipAddr + ":" + xferPort, new Entry(0, System.nanoTime() + negativeNanos));
    }

    private static int ask(DatanodeInfo dn, int timeoutMillis) {
        String bean = RdmaDataNodePlugin.beanName(dn.getXferPort());
        String url = "http://" + dn.getIpAddr() + ":" + dn.getInfoPort() + "/jmx?qry="
                + URLEncoder.encode(bean, StandardCharsets.UTF_8);
        try {
            HttpURLConnection http = (HttpURLConnection) URI.create(url).toURL().openConnection();
            http.setConnectTimeout(timeoutMillis);
            http.setReadTimeout(timeoutMillis);
            String body;
            try (InputStream in = http.getInputStream()) {
                body = new String(in.readNBytes(1 << 20), StandardCharsets.UTF_8);
            } finally {
                http.disconnect();
            }
            Matcher state = STATE.matcher(body);
            Matcher port = PORT.matcher(body);
            if (state.find() && state.group(1).equals("RUNNING") && port.find()) {
                int p = Integer.parseInt(port.group(1));
                LOG.info("DataNode {} serves RDMA reads on port {}", dn.getXferAddr(), p);
                return p;
            }
            LOG.info("DataNode {} has no running RDMA block service (state {}); reading it over TCP", dn.getXferAddr(),
                    state.find(0) ? state.group(1) : "absent");
        } catch (IOException | RuntimeException ex) {
            LOG.info("could not ask DataNode {} for its RDMA port ({}); reading it over TCP", dn.getXferAddr(), ex.toString());
        }
        return 0;
    }
}

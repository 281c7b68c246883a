package io.rdmaplane.rdma.policy;

import com.codahale.metrics.Counter;
import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import com.codahale.metrics.Timer;
import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import java.net.InetSocketAddress;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * The policy layer's metrics in a Dropwizard registry (the library Spark's metrics system uses,
 * so Spark and HDFS can report them as they are). Names start with {@code rdma.}.
 */
public final class PolicyMetrics {
    private final MetricRegistry registry;
    private final Counter readBytes;
    private final Counter reads;
    private final Timer readLatency;
    private final Timer controlRoundTrip;
    private final Counter reconnects;
    private final Counter checksumChecks;
    private final Counter checksumFailures;
    private final Counter fallbacks;
    private final Counter controlDropped;
    private final Counter authFailures;
    private final Counter requestRetries;
    private final Counter connectionsRefused;

    public PolicyMetrics() {
        this(new MetricRegistry());
    }

    public PolicyMetrics(MetricRegistry registry) {
        this.registry = registry;
        readBytes = registry.counter("rdma.read.bytes");
        reads = registry.counter("rdma.read.count");
        readLatency = registry.timer("rdma.read.latency");
        controlRoundTrip = registry.timer("rdma.control.roundTrip");
        reconnects = registry.counter("rdma.reconnects");
        checksumChecks = registry.counter("rdma.checksum.checks");
        checksumFailures = registry.counter("rdma.checksum.failures");
        fallbacks = registry.counter("rdma.fallbacks");
        controlDropped = registry.counter("rdma.control.dropped");
        authFailures = registry.counter("rdma.auth.failures");
        requestRetries = registry.counter("rdma.control.retries");
        connectionsRefused = registry.counter("rdma.server.refused");
    }

    public MetricRegistry registry() {
        return registry;
    }

    void blockRead(InetSocketAddress peer, int bytes, long nanos) {
        readBytes.inc(bytes);
        reads.inc();
        readLatency.update(nanos, TimeUnit.NANOSECONDS);
        registry.counter("rdma.peer." + name(peer) + ".read.bytes").inc(bytes);
        registry.counter("rdma.peer." + name(peer) + ".read.count").inc();
    }

    void controlRoundTrip(long nanos) {
        controlRoundTrip.update(nanos, TimeUnit.NANOSECONDS);
    }

    void transition(TrafficClass trafficClass, ChannelState from, ChannelState to) {
        registry.counter("rdma.state." + trafficClass.name().toLowerCase(Locale.ROOT) + "."
                + from.name().toLowerCase(Locale.ROOT) + "_to_" + to.name().toLowerCase(Locale.ROOT)).inc();
    }

    void reconnect() {
        reconnects.inc();
    }

    void checksumCheck(boolean passed) {
        checksumChecks.inc();
        if (!passed) {
            checksumFailures.inc();
        }
    }

    /** A caller was told to fall back (peer unavailable or block undeliverable). */
    public void fallback() {
        fallbacks.inc();
    }

    void controlDropped() {
        controlDropped.inc();
    }

    void authFailure() {
        authFailures.inc();
    }

    /** A server refused a channel: too many unauthenticated ones (from that address, or in total). */
    void connectionRefused() {
        connectionsRefused.inc();
    }

    /**
     * A READ or send completed with an error: {@code rdma.completion.<status>} (a verbs QP in the error state
     * shows as {@code flushed} for the work it held).
     */
    void completionError(io.rdmaplane.rdma.provider.Status status) {
        registry.counter("rdma.completion." + status.name().toLowerCase(Locale.ROOT)).inc();
    }

    /** Work a broken channel gave back goes out again on the next one (READs are idempotent). */
    void reissued() {
        registry.counter("rdma.reissued").inc();
    }

    void requestRetry() {
        requestRetries.inc();
    }

    /** Reports a value such as bytes in flight as a gauge, once per name. */
    void gauge(String name, LongSupplier value) {
        registry.gauge(name, () -> (Gauge<Long>) value::getAsLong);
    }

    /** Reports a pool's registered and in-use bytes. */
    public void watchPool(String name, RegisteredMemoryPool pool) {
        gauge("rdma.pool." + name + ".registeredBytes", pool::registeredBytes);
        gauge("rdma.pool." + name + ".inUseBytes", pool::inUseBytes);
    }

    private static String name(InetSocketAddress peer) {
        return (peer.getHostString() + "_" + peer.getPort()).replace('.', '_').replace(':', '_');
    }
}

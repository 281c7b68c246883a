package io.rdmaplane.rdma.config;

import io.rdmaplane.rdma.memory.PoolOptions;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;

/** The transport settings every product shares; each product's registry puts them under its own prefix. */
public final class TransportKeys {
    public static final ConfigKey<String> PROVIDER = providerKey("provider", Providers.AUTO,
            "Which transport; auto picks verbs when an RDMA device is usable, else tcp.");
    public static final ConfigKey<Integer> PORT = ConfigKey.intKey("port", 0, 0, 65535,
            "Port the node listens on (0 = any free port).");
    public static final ConfigKey<Long> MAX_MESSAGE_SIZE = ConfigKey.byteSizeKey("maxMessageSize", "64k", "1k", "16m",
            "Largest two-sided control message.");
    public static final ConfigKey<Duration> OPERATION_TIMEOUT = ConfigKey.durationKey("operationTimeout", "2s", "10ms", "10m",
            "An outstanding operation with no progress from the peer for this long fails with RETRY_EXCEEDED.");
    public static final ConfigKey<Integer> QUEUE_DEPTH = ConfigKey.intKey("queueDepth", 256, 1, 16384,
            "Queue depth of channels this node accepts from peers.");
    public static final ConfigKey<Long> POOL_CAPACITY = ConfigKey.byteSizeKey("pool.capacity", "256m", "8m", "1t",
            "Cap on registered (pinned) memory in the pool.");
    public static final ConfigKey<Duration> POOL_ACQUIRE_TIMEOUT = ConfigKey.durationKey("pool.acquireTimeout", "5s", "0ms", "10m",
            "How long a pool allocation waits for memory when the cap is reached before failing (0 = fail at once).");

    /** All of the above, in reference order. */
    public static final List<ConfigKey<?>> ALL = List.of(PROVIDER, PORT, MAX_MESSAGE_SIZE, OPERATION_TIMEOUT, QUEUE_DEPTH,
            POOL_CAPACITY, POOL_ACQUIRE_TIMEOUT);

    private TransportKeys() {
    }

    /**
     * A setting naming a transport provider: {@code auto} or a provider on the class path. The reference lists
     * {@link Providers#names()}; a provider that auto never picks (a test-only one) is accepted too, not listed.
     */
    public static ConfigKey<String> providerKey(String suffix, String defaultValue, String doc) {
        return ConfigKey.choiceKey(suffix, defaultValue, Providers.names(), Providers::isKnown, doc);
    }

    /** Node settings from {@code conf}, listening on {@code bindHost} at the configured port. */
    public static NodeOptions nodeOptions(Conf conf, String bindHost) {
        // maxMessageSize is capped at 16m by its bounds, so it always fits an int.
        return new NodeOptions(new InetSocketAddress(bindHost, conf.get(PORT)), Math.toIntExact(conf.get(MAX_MESSAGE_SIZE)),
                conf.get(OPERATION_TIMEOUT), conf.get(QUEUE_DEPTH));
    }

    /** Registered-memory pool settings from {@code conf}. */
    public static PoolOptions poolOptions(Conf conf) {
        return new PoolOptions(conf.get(POOL_CAPACITY), conf.get(POOL_ACQUIRE_TIMEOUT));
    }
}

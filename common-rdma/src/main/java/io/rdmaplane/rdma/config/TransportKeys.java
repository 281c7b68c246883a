package io.rdmaplane.rdma.config;

import io.rdmaplane.rdma.memory.MemoryKind;
import io.rdmaplane.rdma.memory.PoolOptions;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.VerbsOptions;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Pattern;

/** The transport settings every product shares; each product's registry puts them under its own prefix. */
public final class TransportKeys {
    public static final ConfigKey<String> PROVIDER = providerKey("provider", Providers.AUTO,
            "Which transport; auto picks verbs when an RDMA device is usable, else tcp.");
    public static final ConfigKey<Integer> PORT = ConfigKey.intKey("port", 0, 0, 65535,
            "Port the node listens on (0 = any free port).");
    public static final ConfigKey<Long> MAX_MESSAGE_SIZE = ConfigKey.byteSizeKey("maxMessageSize", "64k", "1k", "16m",
            "Largest two-sided control message.");
    public static final ConfigKey<Duration> OPERATION_TIMEOUT = ConfigKey.durationKey("operationTimeout", "2s", "10ms", "10m",
            "An outstanding operation with no progress from the peer for this long fails with RETRY_EXCEEDED; a peer"
                    + " that takes none of the bytes waiting for it (READ responses included) for this long loses its channel.");
    public static final ConfigKey<Integer> QUEUE_DEPTH = ConfigKey.intKey("queueDepth", 256, 1, 16384,
            "Queue depth of channels this node accepts from peers.");
    public static final ConfigKey<Duration> IDLE_TIMEOUT = ConfigKey.durationKey("idleTimeout", "10m", "1s", "24h",
            "A channel this node accepted that moved no byte either way for this long is closed; its peer reconnects"
                    + " when it needs it again (tcp provider: on verbs a server does not see the READs it serves).");
    public static final ConfigKey<Long> POOL_CAPACITY = ConfigKey.byteSizeKey("pool.capacity", "256m", "8m", "1t",
            "Cap on registered (pinned) memory in the pool.");
    public static final ConfigKey<Duration> POOL_ACQUIRE_TIMEOUT = ConfigKey.durationKey("pool.acquireTimeout", "5s", "0ms", "10m",
            "How long a pool allocation waits for memory when the cap is reached before failing (0 = fail at once).");
    public static final ConfigKey<String> POOL_MEMORY = ConfigKey.choiceKey(MemoryKind.SETTING, "auto",
            List.of("auto", "hugetlb", "thp", "direct"), "What the pool's chunks are made of: hugetlb maps huge pages"
                    + " reserved with vm.nr_hugepages (MAP_HUGETLB), thp advises transparent huge pages on 2 MiB-aligned"
                    + " memory (MADV_HUGEPAGE), direct is ByteBuffer.allocateDirect; auto takes hugetlb while free huge pages"
                    + " last, else thp, else direct. Huge pages come from the RDMA device's NUMA node when it has one. A kind"
                    + " that cannot be had (no huge pages free, no native library) falls back to direct with one log line.");

    // The verbs provider's own settings (VerbsOptions); the tcp provider ignores them.
    public static final ConfigKey<String> VERBS_COMPLETION = ConfigKey.choiceKey("verbs.completion", "hybrid",
            List.of("event", "poll", "hybrid"), "verbs: how completions are waited for: event: each lane's completion"
                    + " thread sleeps on the completion channel (after verbs.completion.spinMicros of polling); poll: the"
                    + " bulk lane's busy-polls its completion queue, a core per node (the control lane's always sleeps);"
                    + " hybrid: a thread waiting for a READ (get or join of its future) polls the completion queue itself"
                    + " for up to verbs.completion.hybridSpinMicros, as perftest does, and the completion threads sleep on"
                    + " the completion channel once no thread polled for that long (callbacks alone: as event).");
    public static final ConfigKey<Integer> VERBS_COMPLETION_SPIN_MICROS = ConfigKey.intKey("verbs.completion.spinMicros",
            VerbsOptions.DEFAULT_COMPLETION_SPIN_MICROS, 0, VerbsOptions.MAX_COMPLETION_SPIN_MICROS,
            "verbs, with completion=event: microseconds a completion thread keeps polling its completion queue after the"
                    + " last completion before it sleeps on the completion channel (0 = at once); a READ answered within"
                    + " them skips the wake-up of a completion event, at the price of that much CPU after each burst.");
    public static final ConfigKey<Integer> VERBS_COMPLETION_HYBRID_SPIN_MICROS = ConfigKey.intKey(
            "verbs.completion.hybridSpinMicros", VerbsOptions.DEFAULT_HYBRID_SPIN_MICROS, VerbsOptions.MIN_HYBRID_SPIN_MICROS,
            VerbsOptions.MAX_COMPLETION_SPIN_MICROS, "verbs, with completion=hybrid: microseconds a thread waiting for a READ"
                    + " polls the completion queue before it sleeps (a small READ lands within them: about 37 us on the"
                    + " Soft-RoCE VM, a few on a NIC), and how long the queue stays polled, not armed, after such a poll;"
                    + " completions nobody waits for meanwhile are delivered within about a millisecond.");
    public static final ConfigKey<String> VERBS_NATIVE_TMPDIR = ConfigKey.stringKey("verbs.native.tmpdir", "",
            Pattern.compile("/[^\\x00]*"), "an absolute folder path",
            "verbs: where the bundled native library is extracted to be loaded (unset = java.io.tmpdir); set it where that"
                    + " folder is mounted noexec. The library loads once per JVM, with the folder of the first node.");
    public static final ConfigKey<Duration> VERBS_CM_TICK = ConfigKey.durationKey("verbs.cmTick", "10ms", "1ms", "1s",
            "verbs: longest wait of a node's connection-manager thread per turn: how late a queued connect or listen may"
                    + " start, and how often operation timeouts are checked.");
    public static final ConfigKey<Integer> VERBS_RECEIVE_BUFFERS = ConfigKey.intKey("verbs.receiveBuffers", 32,
            VerbsOptions.MIN_RECEIVE_BUFFERS, VerbsOptions.MAX_RECEIVE_BUFFERS,
            "verbs: receive buffers (each maxMessageSize) a channel posts at most; never more than its queue depth.");
    public static final ConfigKey<Integer> VERBS_CQ_ENTRIES = ConfigKey.intKey("verbs.cqEntries", 16384,
            VerbsOptions.MIN_CQ_ENTRIES, VerbsOptions.MAX_CQ_ENTRIES,
            "verbs: entries of each of a node's two completion queues, bulk and control (halved down to 1024 while the"
                    + " device refuses); every channel"
                    + " takes its queue depth + 68 + its receive buffers, so this bounds the channels of a node.");
    public static final ConfigKey<Long> VERBS_READ_PIECE_SIZE = ConfigKey.byteSizeKey("verbs.readPieceSize", "256k", "128k",
            "8m", "verbs: longest work request of a READ; a longer READ is posted as several (Soft-RoCE re-sends a whole"
                    + " long READ after one lost packet).");

    /** All of the above, in reference order. */
    public static final List<ConfigKey<?>> ALL = List.of(PROVIDER, PORT, MAX_MESSAGE_SIZE, OPERATION_TIMEOUT, QUEUE_DEPTH,
            IDLE_TIMEOUT, POOL_CAPACITY, POOL_ACQUIRE_TIMEOUT, POOL_MEMORY, VERBS_COMPLETION, VERBS_COMPLETION_SPIN_MICROS, VERBS_COMPLETION_HYBRID_SPIN_MICROS, VERBS_NATIVE_TMPDIR, VERBS_CM_TICK, VERBS_RECEIVE_BUFFERS,
            VERBS_CQ_ENTRIES, VERBS_READ_PIECE_SIZE);

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
                conf.get(OPERATION_TIMEOUT), conf.get(QUEUE_DEPTH), conf.get(IDLE_TIMEOUT), verbsOptions(conf));
    }

    /** The verbs provider's settings from {@code conf}. */
    public static VerbsOptions verbsOptions(Conf conf) {
        String tmpdir = conf.get(VERBS_NATIVE_TMPDIR);
        // readPieceSize is capped at 8m by its bounds, so it always fits an int.
        return new VerbsOptions(conf.get(VERBS_CM_TICK), conf.get(VERBS_RECEIVE_BUFFERS), conf.get(VERBS_CQ_ENTRIES),
                Math.toIntExact(conf.get(VERBS_READ_PIECE_SIZE)),
                VerbsOptions.Completion.valueOf(conf.get(VERBS_COMPLETION).toUpperCase(java.util.Locale.ROOT)),
                tmpdir.isEmpty() ? null : Path.of(tmpdir), conf.get(VERBS_COMPLETION_SPIN_MICROS),
                conf.get(VERBS_COMPLETION_HYBRID_SPIN_MICROS));
    }

    /** Registered-memory pool settings from {@code conf}. */
    public static PoolOptions poolOptions(Conf conf) {
        return new PoolOptions(conf.get(POOL_CAPACITY), conf.get(POOL_ACQUIRE_TIMEOUT), MemoryKind.of(conf.get(POOL_MEMORY)));
    }
}

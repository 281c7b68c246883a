package io.rdmaplane.spark;

import com.codahale.metrics.Counter;
import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import java.util.Map;
import java.util.TreeMap;

/**
 * The shuffle plug-in's counters, in the same Dropwizard registry as the executor's
 * {@link PolicyMetrics} (so one Spark metrics Source reports both). Names start with
 * {@value #PREFIX}. Thread-safe.
 */
public final class ShuffleMetrics {
    public static final String PREFIX = "rdma.shuffle.";
    /** Map outputs published into registered memory. */
    public static final String PUBLISHED_MAPS = PREFIX + "published.maps";
    /** Of {@link #PUBLISHED_MAPS}, those served from their data file's registered mapping (zero-copy, MappedPublisher). */
    public static final String PUBLISHED_MAPPED = PREFIX + "published.mapped";
    /** Of {@link #PUBLISHED_MAPS}, those copied into registered memory (mapFiles off, or a refused file mapping). */
    public static final String PUBLISHED_COPIED = PREFIX + "published.copied";
    /** Registered bytes of published map outputs (framed Arrow segments). */
    public static final String PUBLISHED_BYTES = PREFIX + "published.bytes";
    /**
     * Microseconds map tasks spent publishing their outputs (reading and checksumming the data file, framing,
     * registering), summed over tasks: what the map side pays on top of Spark's own writer.
     */
    public static final String PUBLISH_MICROS = PREFIX + "publish.micros";
    /**
     * Microseconds this executor took to start its RDMA runtime (probing the provider, the data node, the registry
     * round trip): on Spark 4 on a thread of its own while the first tasks run, so it competes with them for the CPU.
     */
    public static final String START_MICROS = PREFIX + "start.micros";
    /** Of {@link #START_MICROS}, the CPU time of the starting thread (not of the threads it starts), in microseconds. */
    public static final String START_CPU_MICROS = PREFIX + "start.cpu.micros";
    /** Map outputs not published because the registered-memory cap was reached (Netty serves them). */
    public static final String NOT_PUBLISHED_OVER_CAP = PREFIX + "notPublished.overCap";
    /** Map outputs not published for another reason (missing or short data file, a segment too big). */
    public static final String NOT_PUBLISHED_FAILED = PREFIX + "notPublished.failed";
    /** Map outputs not offered for publishing because publishing stopped after consecutive failures (Netty serves them). */
    public static final String NOT_PUBLISHED_STOPPED = PREFIX + "notPublished.stopped";
    /** Blocks fetched over RDMA (one READ each, or inline in the LOCATE answer) and handed to Spark. */
    public static final String FETCH_RDMA_BLOCKS = PREFIX + "fetch.rdma.blocks";
    /** Payload bytes of the blocks fetched over RDMA. */
    public static final String FETCH_RDMA_BYTES = PREFIX + "fetch.rdma.bytes";
    /** Of {@link #FETCH_RDMA_BLOCKS}, those that came inline in the LOCATE answer (no READ). */
    public static final String FETCH_INLINE_BLOCKS = PREFIX + "fetch.inline.blocks";
    /**
     * Of {@link #FETCH_RDMA_BLOCKS}, those the task released without opening (it stopped reading early: a join whose
     * other side ran out, a killed task). Spark's task metrics count a remote block only when the task opens it.
     */
    public static final String FETCH_UNREAD_BLOCKS = PREFIX + "fetch.unread.blocks";
    /** Memory registrations the fetch path made for one block (a landing buffer over the pool's largest slice). */
    public static final String FETCH_REGISTRATIONS = PREFIX + "fetch.registrations";
    /** Gauge: memory registrations the executor's data node has made (map outputs, the reduce pool, landings). */
    public static final String REGISTRATIONS = PREFIX + "registrations";
    /** Gauge: READ keys the data node registered for reducers (verbs: one per block and reducer process that LOCATEd it). */
    public static final String KEY_REGISTRATIONS = PREFIX + "keyRegistrations";
    /** Gauge: of {@link #REGISTRATIONS}, the reduce pool's chunks (its warm-up: it stops growing at its working set). */
    public static final String POOL_REGISTRATIONS = PREFIX + "pool.chunkRegistrations";
    /** Blocks handed to Spark's own block transfer (Netty) instead. */
    public static final String FALLBACK_FETCH = PREFIX + "fallback.fetch";
    /** Shuffles routed to the standard path as a whole. */
    public static final String FALLBACK_SHUFFLE = PREFIX + "fallback.shuffle";
    /** Applications (executors) that run without RDMA. */
    public static final String FALLBACK_APP = PREFIX + "fallback.app";
    /** LOCATE requests sent (one per reduce task and remote executor, split only above {@code LocateProtocol.MAX_BLOCKS}). */
    public static final String LOCATE_REQUESTS = PREFIX + "locate.requests";

    private final PolicyMetrics policy;
    private final MetricRegistry registry;
    private final Counter publishedMaps;
    private final Counter publishedMapped;
    private final Counter publishedCopied;
    private final Counter publishedBytes;
    private final Counter publishMicros;
    private final Counter startMicros;
    private final Counter startCpuMicros;
    private final Counter notPublishedOverCap;
    private final Counter notPublishedFailed;
    private final Counter notPublishedStopped;
    private final Counter fetchRdmaBlocks;
    private final Counter fetchRdmaBytes;
    private final Counter fetchInlineBlocks;
    private final Counter fetchUnreadBlocks;
    private final Counter fetchRegistrations;
    private final Counter fallbackFetch;
    private final Counter fallbackShuffle;
    private final Counter fallbackApp;
    private final Counter locateRequests;

    /** Counters in a registry of their own, with a fresh {@link PolicyMetrics} (tests, tools). */
    public ShuffleMetrics() {
        this(new PolicyMetrics());
    }

    /** Counters in {@code policy}'s registry. */
    public ShuffleMetrics(PolicyMetrics policy) {
        this.policy = policy;
        this.registry = policy.registry();
        publishedMaps = registry.counter(PUBLISHED_MAPS);
        publishedMapped = registry.counter(PUBLISHED_MAPPED);
        publishedCopied = registry.counter(PUBLISHED_COPIED);
        publishedBytes = registry.counter(PUBLISHED_BYTES);
        publishMicros = registry.counter(PUBLISH_MICROS);
        startMicros = registry.counter(START_MICROS);
        startCpuMicros = registry.counter(START_CPU_MICROS);
        notPublishedOverCap = registry.counter(NOT_PUBLISHED_OVER_CAP);
        notPublishedFailed = registry.counter(NOT_PUBLISHED_FAILED);
        notPublishedStopped = registry.counter(NOT_PUBLISHED_STOPPED);
        fetchRdmaBlocks = registry.counter(FETCH_RDMA_BLOCKS);
        fetchRdmaBytes = registry.counter(FETCH_RDMA_BYTES);
        fetchInlineBlocks = registry.counter(FETCH_INLINE_BLOCKS);
        fetchUnreadBlocks = registry.counter(FETCH_UNREAD_BLOCKS);
        fetchRegistrations = registry.counter(FETCH_REGISTRATIONS);
        fallbackFetch = registry.counter(FALLBACK_FETCH);
        fallbackShuffle = registry.counter(FALLBACK_SHUFFLE);
        fallbackApp = registry.counter(FALLBACK_APP);
        locateRequests = registry.counter(LOCATE_REQUESTS);
    }

    public PolicyMetrics policy() {
        return policy;
    }

    public MetricRegistry registry() {
        return registry;
    }

    public Counter publishMicros() {
        return publishMicros;
    }

    /** Counts a runtime start's wall and CPU time ({@link #START_MICROS}, {@link #START_CPU_MICROS}). */
    public void started(long wallNanos, long cpuNanos) {
        startMicros.inc(wallNanos / 1000);
        startCpuMicros.inc(cpuNanos / 1000);
    }

    public Counter publishedMaps() {
        return publishedMaps;
    }

    public Counter publishedMapped() {
        return publishedMapped;
    }

    public Counter publishedCopied() {
        return publishedCopied;
    }

    public Counter publishedBytes() {
        return publishedBytes;
    }

    public Counter notPublishedOverCap() {
        return notPublishedOverCap;
    }

    public Counter notPublishedFailed() {
        return notPublishedFailed;
    }

    public Counter notPublishedStopped() {
        return notPublishedStopped;
    }

    public Counter fetchRdmaBlocks() {
        return fetchRdmaBlocks;
    }

    public Counter fetchRdmaBytes() {
        return fetchRdmaBytes;
    }

    public Counter fetchUnreadBlocks() {
        return fetchUnreadBlocks;
    }

    public Counter fetchInlineBlocks() {
        return fetchInlineBlocks;
    }

    public Counter fetchRegistrations() {
        return fetchRegistrations;
    }

    /** Reports the registrations of {@code node} and of its reduce {@code pool} as gauges (once per registry). */
    public void watchRegistrations(io.rdmaplane.rdma.provider.Node node, io.rdmaplane.rdma.memory.RegisteredMemoryPool pool) {
        if (!registry.getGauges().containsKey(REGISTRATIONS)) {
            registry.register(REGISTRATIONS, (Gauge<Long>) node::registrationCount);
            registry.register(KEY_REGISTRATIONS, (Gauge<Long>) node::keyRegistrationCount);
            registry.register(POOL_REGISTRATIONS, (Gauge<Long>) pool::registrations);
        }
    }

    public Counter fallbackFetch() {
        return fallbackFetch;
    }

    public Counter fallbackShuffle() {
        return fallbackShuffle;
    }

    public Counter fallbackApp() {
        return fallbackApp;
    }

    public Counter locateRequests() {
        return locateRequests;
    }

    /** The current value of the counter {@code name} (0 if there is none). */
    public long count(String name) {
        Counter counter = registry.getCounters().get(name);
        return counter == null ? 0 : counter.getCount();
    }

    /**
     * Every counter of the registry (the policy layer's {@code rdma.*} ones included) and every
     * gauge with an integral value, by name, sorted.
     */
    public Map<String, Long> snapshot() {
        Map<String, Long> values = new TreeMap<>();
        registry.getCounters().forEach((name, counter) -> values.put(name, counter.getCount()));
        for (Map.Entry<String, Gauge> e : registry.getGauges().entrySet()) {
            Object value = e.getValue().getValue();
            if (value instanceof Long || value instanceof Integer) {
                values.put(e.getKey(), ((Number) value).longValue());
            }
        }
        return values;
    }
}

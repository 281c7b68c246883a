package io.rdmaplane.rdma.provider.faulty;

import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;
import java.util.Objects;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The test-only provider {@value #NAME}: each node is a {@link FaultyNode} over a node of another
 * provider (tcp unless told otherwise). Found through common-rdma's test jar (its
 * {@code META-INF/services} file), never chosen by {@code auto} and not listed among the choices of
 * the {@code provider} setting; a test names it, e.g. {@code spark.shuffle.rdma.provider=faulty}.
 *
 * <p>Found by {@link java.util.ServiceLoader}, it arms each node from system properties, which a test
 * passes to the JVMs it starts (Spark executors: {@code spark.executor.extraJavaOptions}):
 * <ul>
 * <li>{@value #OVER}: the wrapped provider (default tcp);</li>
 * <li>{@value #ID}: this JVM's name in the fault properties below; set, they are read as
 * {@code rdmaplane.faults.<id>.<fault>}, so one option string can arm one Spark executor of many
 * (Spark replaces {@code {{EXECUTOR_ID}}} in executor JVM options);</li>
 * <li>{@code rdmaplane.faults.[<id>.]}{@value #CORRUPT_READS}{@code =N}: see {@link FaultyNode#corruptReads};</li>
 * <li>{@code rdmaplane.faults.[<id>.]}{@value #CLOSE_AFTER_REQUESTS}{@code =N}: see
 * {@link FaultyNode#closeAfterRequests};</li>
 * <li>{@code rdmaplane.faults.[<id>.]}{@value #DIE_AFTER_REQUESTS}{@code =N}: see
 * {@link FaultyNode#dieAfterRequests};</li>
 * <li>{@code rdmaplane.faults.[<id>.]}{@value #GRANT_UNKNOWN_KEYS}{@code =N}: see
 * {@link FaultyNode#grantUnknownKeys}.</li>
 * </ul>
 */
public final class FaultyProvider implements TransportProvider {
    public static final String NAME = "faulty";
    public static final String PREFIX = "rdmaplane.faults.";
    public static final String OVER = PREFIX + "over";
    public static final String ID = PREFIX + "id";
    public static final String CORRUPT_READS = "corruptReads";
    public static final String CLOSE_AFTER_REQUESTS = "closeAfterRequests";
    public static final String DIE_AFTER_REQUESTS = "dieAfterRequests";
    public static final String GRANT_UNKNOWN_KEYS = "grantUnknownKeys";
    private static final Logger LOG = LoggerFactory.getLogger(FaultyProvider.class);

    private final String over;
    private final Consumer<FaultyNode> arm;

    /** The one {@link java.util.ServiceLoader} makes: configured by system properties (see the class comment). */
    public FaultyProvider() {
        this(null, FaultyProvider::armFromSystemProperties);
    }

    /**
     * @param over the provider whose nodes are wrapped (null: {@value #OVER}, else tcp)
     * @param arm  arms each new node with the faults a test wants
     */
    public FaultyProvider(String over, Consumer<FaultyNode> arm) {
        this.over = over;
        this.arm = Objects.requireNonNull(arm, "arm");
    }

    @Override
    public String name() {
        return NAME;
    }

    /** Negative: never chosen by auto, not listed; only a setting that names it selects it. */
    @Override
    public int preference() {
        return -1;
    }

    /** Its nodes need the wrapped provider: {@link #createNode} fails as that one does where it is unavailable. */
    @Override
    public boolean isAvailable() {
        return true;
    }

    @Override
    public Throwable unavailabilityCause() {
        return null;
    }

    @Override
    public Node createNode(NodeOptions options) throws TransportException {
        String wrapped = over != null ? over : System.getProperty(OVER, "tcp");
        if (wrapped.trim().equalsIgnoreCase(NAME)) {
            throw new IllegalArgumentException(OVER + " = '" + wrapped + "': the faulty provider cannot wrap itself");
        }
        FaultyNode node = new FaultyNode(Providers.select(wrapped, options).createNode(options));
        try {
            arm.accept(node);
        } catch (RuntimeException e) {
            node.close();
            throw e;
        }
        return node;
    }

    private static void armFromSystemProperties(FaultyNode node) {
        String id = System.getProperty(ID);
        String prefix = PREFIX + (id == null || id.isBlank() ? "" : id.trim() + ".");
        int reads = count(prefix + CORRUPT_READS);
        if (reads > 0) {
            node.corruptReads(reads);
            LOG.error("########## TEST FAULT HOOK ARMED: {} corrupts the next {} READ payloads it receives ({}) ##########",
                    node, reads, prefix + CORRUPT_READS);
        }
        int requests = count(prefix + CLOSE_AFTER_REQUESTS);
        if (requests > 0) {
            node.closeAfterRequests(requests);
            LOG.error("########## TEST FAULT HOOK ARMED: {} closes after answering {} requests ({}) ##########",
                    node, requests, prefix + CLOSE_AFTER_REQUESTS);
        }
        int spoiled = count(prefix + GRANT_UNKNOWN_KEYS);
        if (spoiled > 0) {
            node.grantUnknownKeys(spoiled);
            LOG.error("########## TEST FAULT HOOK ARMED: {} hands out its next {} peer keys with an rkey it never made ({}) ##########",
                    node, spoiled, prefix + GRANT_UNKNOWN_KEYS);
        }
        int dies = count(prefix + DIE_AFTER_REQUESTS);
        if (dies > 0) {
            node.dieAfterRequests(dies);
            LOG.error("########## TEST FAULT HOOK ARMED: the transport of {} dies after answering {} requests ({}) ##########",
                    node, dies, prefix + DIE_AFTER_REQUESTS);
        }
    }

    /** The whole number in system property {@code key}, 0 when unset. */
    private static int count(String key) {
        String value = System.getProperty(key);
        if (value == null) {
            return 0;
        }
        try {
            int n = Integer.parseInt(value.trim());
            if (n >= 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("system property " + key + " = '" + value + "': expected a whole number >= 0");
    }
}

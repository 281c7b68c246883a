package io.rdmaplane.rdma.provider;

/**
 * One way of moving bytes (verbs, tcp). Probed once: {@link #isAvailable()} and
 * {@link #unavailabilityCause()} never change during the life of the JVM.
 */
public interface TransportProvider {
    /** The name used in the {@code provider} setting. */
    String name();

    boolean isAvailable();

    /**
     * {@link #isAvailable()} for a node with these settings: a provider whose probe needs settings
     * takes them from here (verbs: {@link VerbsOptions#nativeTmpdir()}). The probe still runs once
     * per JVM, so only the settings of the first question count; {@link #isAvailable()} alone
     * probes with the defaults.
     */
    default boolean isAvailable(NodeOptions options) {
        return isAvailable();
    }

    /** Why the provider cannot be used, or null when it can. */
    Throwable unavailabilityCause();

    /** @throws TransportException if the provider is unavailable or the node cannot start */
    Node createNode(NodeOptions options) throws TransportException;
}

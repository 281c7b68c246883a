package io.rdmaplane.rdma.provider;

/**
 * One way of moving bytes (verbs, tcp). Probed once: {@link #isAvailable()} and
 * {@link #unavailabilityCause()} never change during the life of the JVM.
 */
public interface TransportProvider {
    /** The name used in the {@code provider} setting. */
    String name();

    boolean isAvailable();

    /** Why the provider cannot be used, or null when it can. */
    Throwable unavailabilityCause();

    /** @throws TransportException if the provider is unavailable or the node cannot start */
    Node createNode(NodeOptions options) throws TransportException;
}

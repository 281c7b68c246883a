package io.rdmaplane.rdma.provider;

/**
 * One way of moving bytes (verbs, tcp). Probed once: {@link #isAvailable()} and
 * {@link #unavailabilityCause()} never change during the life of the JVM.
 *
 * <p>{@link Providers} finds implementations with {@link java.util.ServiceLoader}: each is named in a
 * {@code META-INF/services/io.rdmaplane.rdma.provider.TransportProvider} file and has a public
 * no-argument constructor. Nothing above the SPI names an implementation.
 */
public interface TransportProvider {
    /** The name used in the {@code provider} setting. */
    String name();

    /**
     * Where {@code auto} tries this provider: higher first (verbs before tcp). A negative value
     * means never chosen by {@code auto} nor listed among the setting's choices: such a provider
     * (a test-only one) is used only where a setting names it.
     */
    int preference();

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

    /**
     * The native memory this provider's library maps, for any provider's pools; null when it has no
     * native library (tcp).
     *
     * @throws java.io.IOException why its library cannot map memory here (it failed to load)
     */
    default HostMemory hostMemory() throws java.io.IOException {
        return null;
    }
}

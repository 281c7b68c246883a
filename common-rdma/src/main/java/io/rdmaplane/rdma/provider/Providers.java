package io.rdmaplane.rdma.provider;

import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.provider.verbs.VerbsProvider;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The providers this build knows, in order of preference, and the {@code auto} choice:
 * the first available one. Choosing a provider is configuration, never a code change.
 */
public final class Providers {
    public static final String AUTO = "auto";
    private static final Logger LOG = LoggerFactory.getLogger(Providers.class);

    private Providers() {
    }

    /** Every provider of this build, most preferred first. */
    public static List<TransportProvider> all() {
        return List.of(VerbsProvider.INSTANCE, TcpProvider.INSTANCE);
    }

    /** The names the {@code provider} setting accepts. */
    public static List<String> names() {
        return java.util.stream.Stream.concat(java.util.stream.Stream.of(AUTO), all().stream().map(TransportProvider::name))
                .collect(Collectors.toList());
    }

    /**
     * Returns the provider named {@code name}, or for {@code auto} the first available one.
     * Logs which provider was chosen and why the ones before it were skipped.
     *
     * @throws IllegalArgumentException for an unknown name
     * @throws TransportException       when the named provider is unavailable (with its cause)
     */
    public static TransportProvider select(String name) throws TransportException {
        return select(name, null);
    }

    /**
     * {@link #select(String)} for a node with these settings: each provider considered is probed
     * with them ({@link TransportProvider#isAvailable(NodeOptions)}).
     *
     * @param options the settings of the node about to be created, or null for the defaults
     */
    public static TransportProvider select(String name, NodeOptions options) throws TransportException {
        String wanted = name.trim().toLowerCase(Locale.ROOT);
        if (wanted.equals(AUTO)) {
            StringBuilder skipped = new StringBuilder();
            for (TransportProvider p : all()) {
                if (available(p, options)) {
                    LOG.info("RDMA transport: auto chose provider '{}'{}", p.name(), skipped);
                    return p;
                }
                skipped.append(skipped.length() == 0 ? " (skipped: " : "; ")
                        .append(p.name()).append(": ").append(p.unavailabilityCause());
            }
            throw new TransportException(Status.UNAVAILABLE, "no transport provider is available" + skipped);
        }
        for (TransportProvider p : all()) {
            if (p.name().equals(wanted)) {
                if (!available(p, options)) {
                    throw new TransportException(Status.UNAVAILABLE,
                            "provider '" + p.name() + "' is unavailable: " + p.unavailabilityCause(), p.unavailabilityCause());
                }
                LOG.info("RDMA transport: using configured provider '{}'", p.name());
                return p;
            }
        }
        throw new IllegalArgumentException("unknown transport provider '" + name + "'; allowed: " + names());
    }

    private static boolean available(TransportProvider p, NodeOptions options) {
        return options == null ? p.isAvailable() : p.isAvailable(options);
    }
}

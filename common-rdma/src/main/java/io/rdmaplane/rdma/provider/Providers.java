package io.rdmaplane.rdma.provider;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The providers on the class path, in order of preference, and the {@code auto} choice: the first
 * available one. Choosing a provider is configuration, never a code change: providers are found
 * with {@link ServiceLoader} (see {@link TransportProvider}), so this package names none of them.
 */
public final class Providers {
    public static final String AUTO = "auto";
    private static final Logger LOG = LoggerFactory.getLogger(Providers.class);

    private Providers() {
    }

    /** Found once, on first use. */
    private static final class Found {
        static final List<TransportProvider> ALL = discover();
    }

    /**
     * Loads with the SPI's own class loader, not the thread's context loader: the one that loaded this
     * class (Spark's executor loader for the plug-in jar, an isolated loader in a test) sees its service files.
     */
    private static List<TransportProvider> discover() {
        List<TransportProvider> found = new ArrayList<>();
        Iterator<TransportProvider> it = ServiceLoader.load(TransportProvider.class, TransportProvider.class.getClassLoader())
                .iterator();
        while (true) {
            TransportProvider p;
            try {
                if (!it.hasNext()) {
                    break;
                }
                p = it.next();
            } catch (ServiceConfigurationError e) {
                LOG.warn("RDMA transport: skipping a provider that cannot be loaded: {}", e.toString());
                continue;
            }
            if (found.stream().anyMatch(q -> q.name().equals(p.name()))) {
                LOG.warn("RDMA transport: provider name '{}' is taken; ignoring {}", p.name(), p.getClass().getName());
                continue;
            }
            found.add(p);
        }
        found.sort(Comparator.comparingInt(TransportProvider::preference).reversed().thenComparing(TransportProvider::name));
        return List.copyOf(found);
    }

    /** The providers {@code auto} chooses from, most preferred first (those of negative preference left out). */
    public static List<TransportProvider> all() {
        return Found.ALL.stream().filter(p -> p.preference() >= 0).collect(Collectors.toList());
    }

    /**
     * The first provider's {@link HostMemory}, whatever the provider a node uses: huge pages need a native
     * library, not an RDMA device.
     *
     * @throws java.io.IOException why none can be had: every provider's reason, or that none has a native library
     */
    public static HostMemory hostMemory() throws java.io.IOException {
        List<String> why = new ArrayList<>();
        for (TransportProvider p : Found.ALL) {
            try {
                HostMemory memory = p.hostMemory();
                if (memory != null) {
                    return memory;
                }
            } catch (java.io.IOException e) {
                why.add(p.name() + ": " + e.getMessage());
            }
        }
        throw new java.io.IOException(why.isEmpty() ? "no transport provider on the class path has a native library"
                : String.join("; ", why));
    }

    /** The names the {@code provider} setting lists: {@code auto} and those of {@link #all()}. */
    public static List<String> names() {
        return Stream.concat(Stream.of(AUTO), all().stream().map(TransportProvider::name)).collect(Collectors.toList());
    }

    /** True for {@code auto} and the name of any provider found, listed or not (case-insensitive). */
    public static boolean isKnown(String name) {
        String wanted = name.trim().toLowerCase(Locale.ROOT);
        return wanted.equals(AUTO) || Found.ALL.stream().anyMatch(p -> p.name().equals(wanted));
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
            throw new TransportException(Status.UNAVAILABLE, "no transport provider is available"
                    + (Found.ALL.isEmpty() ? " (none found: no META-INF/services/" + TransportProvider.class.getName()
                    + " on the class path)" : skipped.toString()));
        }
        for (TransportProvider p : Found.ALL) {
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

package io.rdmaplane.rdma.provider.verbs;

import io.rdmaplane.rdma.provider.HostMemory;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * RDMA verbs through DiSNI: RC queue pairs set up with RDMA-CM, one-sided READ, SEND/RECV for
 * messages. This class is loaded by the application's class loader and touches no DiSNI class:
 * the implementation ({@code io.rdmaplane.rdma.provider.verbs.impl}) is defined, together with
 * DiSNI, by {@link DisniRuntime#loader()}, next to the bundled native library, and implements
 * the SPI interfaces of this loader.
 *
 * <p>Probed once, on first use: usable when an RDMA device exists (sysfs; without one no native
 * code is loaded), the native library loads, and an active port's network device has an IPv4
 * address RDMA-CM binds to. A probe through {@link #isAvailable(NodeOptions)} extracts the
 * library under {@link io.rdmaplane.rdma.provider.VerbsOptions#nativeTmpdir()}.
 */
public final class VerbsProvider implements TransportProvider {
    /** For code that wants verbs itself (its tests); the rest selects through {@code Providers}. */
    public static final VerbsProvider INSTANCE = new VerbsProvider();
    public static final String NAME = "verbs";
    static final String IMPL_PACKAGE = "io.rdmaplane.rdma.provider.verbs.impl.";
    private static final Logger LOG = LoggerFactory.getLogger(VerbsProvider.class);

    /** Public for {@link java.util.ServiceLoader}; every instance shares the one probe of this JVM. */
    public VerbsProvider() {
    }

    /** The probe's result once it ran (null there means available); guarded by the class. */
    private static Throwable cause;
    private static boolean probed;

    /** Probes on the first call, extracting the native library under {@code tmpdir} (null: java.io.tmpdir). */
    private static synchronized Throwable probeOnce(Path tmpdir) {
        if (!probed) {
            cause = probe(tmpdir);
            probed = true;
        } else if (tmpdir != null) {
            DisniRuntime.load(tmpdir); // logs that the folder comes too late, if it differs
        }
        return cause;
    }

    @Override
    public String name() {
        return NAME;
    }

    /** First: real RDMA wherever a device is usable. */
    @Override
    public int preference() {
        return 200;
    }

    @Override
    public boolean isAvailable() {
        return probeOnce(null) == null;
    }

    @Override
    public boolean isAvailable(NodeOptions options) {
        return probeOnce(options.verbs().nativeTmpdir()) == null;
    }

    @Override
    public Throwable unavailabilityCause() {
        return probeOnce(null);
    }

    @Override
    public Node createNode(NodeOptions options) throws TransportException {
        Objects.requireNonNull(options, "options");
        Throwable why = probeOnce(options.verbs().nativeTmpdir());
        if (why != null) {
            throw new TransportException(Status.UNAVAILABLE, "provider 'verbs' is unavailable: " + why.getMessage(), why);
        }
        try {
            Class<?> type = Class.forName(IMPL_PACKAGE + "VerbsNode", true, DisniRuntime.loader());
            return (Node) type.getConstructor(NodeOptions.class).newInstance(options);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof TransportException t) {
                throw t;
            }
            if (cause instanceof RuntimeException r) {
                throw r;
            }
            throw new TransportException(Status.UNAVAILABLE, "cannot start a verbs node: " + cause, cause);
        } catch (ReflectiveOperationException | LinkageError | ClassCastException e) {
            throw new TransportException(Status.UNAVAILABLE,
                    "the verbs implementation cannot be loaded through DisniRuntime: " + e, e);
        }
    }

    /**
     * The bundled native library's memory mappings (huge pages, NUMA placement), which need the library
     * only, not an RDMA device: tcp nodes' pools use them too.
     */
    @Override
    public HostMemory hostMemory() throws IOException {
        DisniRuntime.State state = DisniRuntime.state();
        return hostMemory(state.loader, state.cause);
    }

    /** The library's {@link HostMemory} from a probe's outcome (a loader, or why there is none). */
    static HostMemory hostMemory(ClassLoader loader, Throwable cause) throws IOException {
        if (loader == null) {
            throw new IOException("the bundled native library is unavailable: " + cause.getMessage(), cause);
        }
        try {
            return (HostMemory) Class.forName(IMPL_PACKAGE + "NativeMemory", true, loader).getConstructor().newInstance();
        } catch (ReflectiveOperationException | LinkageError | ClassCastException e) {
            throw new IOException("the bundled native library maps no memory: " + e, e);
        }
    }

    /** Null when usable, else why not, as precisely as the machine lets us say. */
    static Throwable probe(Path tmpdir) {
        // Devices first, from sysfs: where there is none, no native code is loaded at all.
        List<RdmaDevices.Port> ports = RdmaDevices.ports();
        String devices = describe(ports);
        if (ports.isEmpty()) {
            return unavailable("no RDMA device (nothing under " + RdmaDevices.classDir(Path.of("/")) + "): "
                    + RdmaDevices.howToGetOne(), null);
        }
        Throwable why = DisniRuntime.load(tmpdir);
        if (why != null) {
            String text = why.getMessage();
            String hint = mentionsVerbsLibraries(why)
                    ? "; libibverbs/librdmacm are missing: install rdma-core's libraries (Debian: apt-get install "
                    + "libibverbs1 librdmacm1 ibverbs-providers)"
                    : "";
            return unavailable("the native library for DiSNI cannot be loaded (" + text + ")" + hint + " (devices: "
                    + devices + ")", why);
        }
        if (ports.stream().noneMatch(RdmaDevices.Port::active)) {
            return unavailable("no RDMA port is ACTIVE (" + devices + "): bring the link of the network device up, "
                    + "or " + RdmaDevices.howToGetOne(), null);
        }
        try {
            Class<?> probe = Class.forName(IMPL_PACKAGE + "VerbsProbe", true, DisniRuntime.loader());
            String problem = (String) probe.getMethod("probe", List.class).invoke(null,
                    ports.stream().filter(RdmaDevices.Port::active).map(RdmaDevices.Port::netdev)
                            .filter(Objects::nonNull).distinct().collect(Collectors.toList()));
            if (problem != null) {
                return unavailable(problem + " (devices: " + devices + ")", null);
            }
            LOG.debug("verbs provider available: {}", devices);
            return null;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            String hint = mentionsVerbsLibraries(cause)
                    ? "; libibverbs/librdmacm are missing or too old: install rdma-core's libraries" : "";
            return unavailable("RDMA-CM does not work on this machine: " + cause + hint + " (devices: " + devices + ")", cause);
        } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
            return unavailable("the verbs implementation cannot be loaded through DisniRuntime: " + e, e);
        }
    }

    private static boolean mentionsVerbsLibraries(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            String m = String.valueOf(c.getMessage());
            if (m.contains("libibverbs") || m.contains("librdmacm") || m.contains("ibv_") || m.contains("rdma_")) {
                return true;
            }
        }
        return false;
    }

    private static String describe(List<RdmaDevices.Port> ports) {
        return ports.isEmpty() ? "none" : ports.stream().map(RdmaDevices.Port::toString).collect(Collectors.joining(", "));
    }

    private static Throwable unavailable(String message, Throwable cause) {
        return new VerbsUnavailableException("verbs provider unavailable: " + message, cause);
    }

    /** Why the verbs provider cannot be used on this machine. */
    public static final class VerbsUnavailableException extends Exception {
        VerbsUnavailableException(String message, Throwable cause) {
            super(message, cause);
        }
    }
}

package io.rdmaplane.rdma.provider.verbs;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.net.JarURLConnection;
import java.net.URL;
import java.net.URLConnection;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.CodeSource;
import java.security.ProtectionDomain;
import java.security.cert.Certificate;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * DiSNI with the project's own native library, usable without any {@code java.library.path}
 * setup.
 *
 * <p>DiSNI's Java classes call {@code System.loadLibrary("disni")} in their static
 * initialisers, and no package provides that library. common-rdma's jar carries the project's
 * build of it under {@code native/linux-<arch>/libdisni.so} ({@code x86_64}, {@code aarch64}).
 * On first use this class extracts it for the running platform into a private temporary
 * folder and creates {@link #loader() a class loader} that defines DiSNI's classes
 * ({@code com.ibm.disni.*}) and the verbs provider's implementation
 * ({@code io.rdmaplane.rdma.provider.verbs.impl.*}) itself, child-first, from the class files
 * its parent sees; everything else comes from the parent. Its {@code findLibrary("disni")}
 * answers the extracted file, so DiSNI's own {@code loadLibrary} finds it: a class loader's
 * {@code findLibrary} is the standard hook. The library is loaded once, into that loader only,
 * and nothing DiSNI-related is loaded into the parent's namespace.
 *
 * <p>The probe runs once: the resource must exist for this OS/architecture, extract, load
 * (its dependencies {@code libibverbs.so.1} and {@code librdmacm.so.1} must be present) and
 * pass DiSNI's own version and layout checks. Its failure is reported by
 * {@link #unavailabilityCause()} with the Debian package to install, never by a crash. The
 * extracted file is deleted as soon as the library is loaded (the JVM keeps its mapping);
 * the temporary folder is created under {@code java.io.tmpdir}, or where the first
 * {@link #load(Path)} says (the products' {@code verbs.native.tmpdir} key, for a default
 * temporary folder mounted noexec). A JVM loads the library once, so the first probe's folder
 * is the one used.
 *
 * <p>Available here means the library loads; whether an RDMA device exists is the verbs
 * provider's question.
 */
public final class DisniRuntime {

    /** The library name DiSNI passes to {@code System.loadLibrary}. */
    static final String LIBRARY = "disni";
    /** Packages defined by the runtime's loader rather than its parent. */
    static final String[] CHILD_FIRST_PACKAGES = {"com.ibm.disni.", "io.rdmaplane.rdma.provider.verbs.impl."};

    private static final String NATIVE_AFFINITY = "com.ibm.disni.util.NativeAffinity";
    private static final String NATIVE_DISPATCHER = "com.ibm.disni.verbs.impl.NativeDispatcher";

    private static final Logger LOG = LoggerFactory.getLogger(DisniRuntime.class);
    /** The outcome of the one probe of this JVM; guarded by the class. */
    private static State state;
    private static Path probedUnder;

    private DisniRuntime() {
    }

    /**
     * Probes once per JVM, extracting the library under {@code tmpdir} (null: {@code java.io.tmpdir})
     * if this is the first probe; later calls return the first outcome (a different folder asked
     * for then is logged, as it cannot apply any more).
     *
     * @return why DiSNI cannot be used here, or null when it can
     */
    public static synchronized Throwable load(Path tmpdir) {
        Path root = tmpdir != null ? tmpdir : Paths.get(System.getProperty("java.io.tmpdir"));
        if (state == null) {
            probedUnder = root;
            state = probe(DisniRuntime.class.getClassLoader(), root);
        } else if (tmpdir != null && !tmpdir.equals(probedUnder)) {
            LOG.warn("DiSNI's native library was already probed with {} as its temporary folder; {} applies to the first"
                    + " probe of a JVM only", probedUnder, tmpdir);
        }
        return state.cause;
    }

    /** True when DiSNI and the bundled native library are loaded and usable (probing with the defaults if not yet). */
    public static boolean isAvailable() {
        return load(null) == null;
    }

    /** Why DiSNI cannot be used here, or null when {@link #isAvailable()}. */
    public static Throwable unavailabilityCause() {
        return load(null);
    }

    /** The outcome of this JVM's probe (probing with the defaults if not yet). */
    static synchronized State state() {
        load(null);
        return state;
    }

    /**
     * The class loader that defines DiSNI and {@code io.rdmaplane.rdma.provider.verbs.impl}
     * next to the loaded native library.
     *
     * @throws IllegalStateException with the {@linkplain #unavailabilityCause() cause} when
     *     DiSNI is unavailable
     */
    public static ClassLoader loader() {
        State probed = state();
        if (probed.cause != null) {
            throw new IllegalStateException("DiSNI is unavailable: " + probed.cause.getMessage(), probed.cause);
        }
        return probed.loader;
    }

    /** The outcome of one probe: a loader, or the cause of unavailability. */
    static final class State {
        final ClassLoader loader;
        final Throwable cause;
        /** Where the library was extracted to (deleted again), or null. */
        final Path extracted;

        private State(ClassLoader loader, Throwable cause, Path extracted) {
            this.loader = loader;
            this.cause = cause;
            this.extracted = extracted;
        }
    }

    /** {@link #probe(ClassLoader, Path)} under {@code java.io.tmpdir}. */
    static State probe(ClassLoader parent) {
        return probe(parent, Paths.get(System.getProperty("java.io.tmpdir")));
    }

    /**
     * Probes once with {@code parent} as the source of the library resource and of the class
     * files, and as the parent of the returned loader, extracting under {@code tempRoot}.
     * Package-private so that tests can probe against a class path without the library.
     */
    static State probe(ClassLoader parent, Path tempRoot) {
        Path dir = null;
        try {
            String platform = platform(System.getProperty("os.name", ""), System.getProperty("os.arch", ""));
            String resource = "native/" + platform + "/lib" + LIBRARY + ".so";
            URL url = parent.getResource(resource);
            if (url == null) {
                return new State(null, new UnsatisfiedLinkError("no bundled native library " + resource
                        + " on the class path: common-rdma's jar was built without it (its build compiles"
                        + " src/main/native with gcc against the Debian packages libibverbs-dev and librdmacm-dev)"
                        + " or for another platform"), null);
            }
            dir = Files.createTempDirectory(tempRoot, "rdmaplane-disni-",
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            Path library = dir.resolve("lib" + LIBRARY + ".so");
            try (InputStream in = url.openStream()) {
                Files.copy(in, library, StandardCopyOption.REPLACE_EXISTING);
            }
            DisniClassLoader loader = new DisniClassLoader(parent, library);
            Throwable cause = load(loader, resource);
            return cause == null ? new State(loader, null, library) : new State(null, cause, library);
        } catch (IOException | UncheckedIOException e) {
            return new State(null, new IOException("cannot extract DiSNI's native library under " + tempRoot + ": "
                    + e.getMessage(), e), null);
        } catch (UnsatisfiedLinkError | UnsupportedOperationException e) {
            return new State(null, e, null);
        } catch (RuntimeException e) {
            return new State(null, new IllegalStateException("cannot prepare DiSNI's native library: " + e, e), null);
        } finally {
            // Loaded (or failed): the JVM keeps its own mapping, so the file can go now.
            deleteQuietly(dir);
        }
    }

    /**
     * Loads the library through DiSNI's two classes that call {@code loadLibrary} and runs
     * DiSNI's own version and layout checks (NativeDispatcher's constructor); after this no
     * DiSNI class needs the library file any more. Returns null, or the cause of failure.
     */
    private static Throwable load(ClassLoader loader, String resource) {
        try {
            Class.forName(NATIVE_AFFINITY, true, loader);
            Class<?> dispatcher = Class.forName(NATIVE_DISPATCHER, true, loader);
            Constructor<?> constructor = dispatcher.getDeclaredConstructor();
            constructor.setAccessible(true);
            constructor.newInstance(); // checks _getVersion() == 32 and adopts the struct layouts
            return null;
        } catch (UnsatisfiedLinkError e) {
            return explainLoadFailure(e, resource);
        } catch (InvocationTargetException e) {
            return new IllegalStateException("DiSNI rejected the bundled native library " + resource + ": "
                    + e.getCause(), e.getCause());
        } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
            return new IllegalStateException("DiSNI cannot be loaded with the bundled native library " + resource
                    + ": " + e, e);
        }
    }

    /** Turns the dynamic linker's message into one that names what to install. */
    static Throwable explainLoadFailure(UnsatisfiedLinkError e, String resource) {
        String message = String.valueOf(e.getMessage());
        String explained;
        if (notFound(message, "libibverbs.so")) {
            explained = "libibverbs.so.1 not found: install Debian package ibverbs-providers / libibverbs1 (rdma-core)";
        } else if (notFound(message, "librdmacm.so")) {
            explained = "librdmacm.so.1 not found: install Debian package librdmacm1 (rdma-core)";
        } else if (notFound(message, "libnl-3.so") || notFound(message, "libnl-route-3.so")) {
            explained = "libnl-3 not found (libibverbs needs it): install Debian packages libnl-3-200 libnl-route-3-200";
        } else if (message.contains("version `IBVERBS_") || message.contains("version `RDMACM_")) {
            explained = "the installed rdma-core is older than the one the bundled " + resource
                    + " was built against: upgrade the Debian packages libibverbs1 librdmacm1 (" + message + ")";
        } else {
            explained = "cannot load the bundled native library " + resource + ": " + message;
        }
        UnsatisfiedLinkError error = new UnsatisfiedLinkError(explained);
        error.initCause(e);
        return error;
    }

    private static boolean notFound(String message, String library) {
        int at = message.indexOf(library);
        return at >= 0 && message.indexOf("cannot open shared object file", at) >= 0;
    }

    /** The native folder name for an OS and architecture, e.g. {@code linux-x86_64}. */
    static String platform(String osName, String osArch) {
        if (!osName.toLowerCase(Locale.ROOT).startsWith("linux")) {
            throw new UnsupportedOperationException("DiSNI's native library is built for Linux only, not " + osName);
        }
        switch (osArch.toLowerCase(Locale.ROOT)) {
            case "amd64":
            case "x86_64":
                return "linux-x86_64";
            case "aarch64":
            case "arm64":
                return "linux-aarch64";
            default:
                throw new UnsupportedOperationException(
                        "DiSNI's native library is built for x86_64 and aarch64 only, not " + osArch);
        }
    }

    private static void deleteQuietly(Path dir) {
        if (dir == null) {
            return;
        }
        try {
            Files.deleteIfExists(dir.resolve("lib" + LIBRARY + ".so"));
            Files.deleteIfExists(dir);
        } catch (IOException e) {
            dir.resolve("lib" + LIBRARY + ".so").toFile().deleteOnExit();
            dir.toFile().deleteOnExit();
        }
    }

    /**
     * Defines {@link #CHILD_FIRST_PACKAGES} itself from the class files its parent sees, and
     * delegates everything else to the parent. {@link #findLibrary} names the extracted
     * library.
     */
    static final class DisniClassLoader extends ClassLoader {
        static {
            registerAsParallelCapable();
        }

        private final Path library;
        private final Map<String, ProtectionDomain> domains = new ConcurrentHashMap<>();

        DisniClassLoader(ClassLoader parent, Path library) {
            super("rdmaplane-disni", parent);
            this.library = library;
        }

        static boolean isChildFirst(String className) {
            for (String prefix : CHILD_FIRST_PACKAGES) {
                if (className.startsWith(prefix)) {
                    return true;
                }
            }
            return false;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!isChildFirst(name)) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> type = findLoadedClass(name);
                if (type == null) {
                    type = findClass(name);
                }
                if (resolve) {
                    resolveClass(type);
                }
                return type;
            }
        }

        @Override
        protected Class<?> findClass(String name) throws ClassNotFoundException {
            if (!isChildFirst(name)) {
                throw new ClassNotFoundException(name);
            }
            String resource = name.replace('.', '/') + ".class";
            URL url = getParent().getResource(resource);
            if (url == null) {
                throw new ClassNotFoundException(name);
            }
            byte[] bytes;
            try (InputStream in = url.openStream()) {
                bytes = in.readAllBytes();
            } catch (IOException e) {
                throw new ClassNotFoundException(name + ": cannot read " + url, e);
            }
            return defineClass(name, bytes, 0, bytes.length, domainOf(url, resource));
        }

        @Override
        protected String findLibrary(String libname) {
            return LIBRARY.equals(libname) ? library.toAbsolutePath().toString() : null;
        }

        /** One protection domain per jar or class folder, so classes keep their code source. */
        private ProtectionDomain domainOf(URL url, String resource) {
            URL location = locationOf(url, resource);
            if (location == null) {
                return null;
            }
            return domains.computeIfAbsent(location.toExternalForm(),
                    key -> new ProtectionDomain(new CodeSource(location, (Certificate[]) null), null, this, null));
        }

        private static URL locationOf(URL url, String resource) {
            try {
                if ("jar".equals(url.getProtocol())) {
                    URLConnection connection = url.openConnection();
                    if (connection instanceof JarURLConnection) {
                        return ((JarURLConnection) connection).getJarFileURL();
                    }
                }
                String external = url.toExternalForm();
                if (external.endsWith(resource)) {
                    return new URL(external.substring(0, external.length() - resource.length()));
                }
            } catch (IOException e) {
                return null;
            }
            return null;
        }

        @Override
        public String toString() {
            return "DisniRuntime loader (DiSNI + verbs impl, native library " + library.getFileName() + ")";
        }
    }
}

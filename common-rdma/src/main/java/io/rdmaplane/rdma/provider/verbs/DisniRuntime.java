package io.rdmaplane.rdma.provider.verbs;

/**
 * PLACEHOLDER until the {@code native} branch lands its DisniRuntime (same class, same API):
 * the bundled JNI library for DiSNI and the child-first class loader that defines
 * {@code com.ibm.disni.} and {@code io.rdmaplane.rdma.provider.verbs.impl.}. This placeholder
 * never claims availability; the verbs provider reports itself unavailable with this cause.
 */
public final class DisniRuntime {
    private static final Throwable CAUSE = new UnsatisfiedLinkError(
            "the native library for DiSNI (libdisni) is not part of this build yet");

    private DisniRuntime() {
    }

    public static boolean isAvailable() {
        return false;
    }

    public static Throwable unavailabilityCause() {
        return CAUSE;
    }

    /** The class loader that defines DiSNI and the verbs impl next to the native library. */
    public static ClassLoader loader() {
        throw new IllegalStateException("DiSNI runtime unavailable", CAUSE);
    }
}

package io.rdmaplane.it;

/** {@code name=value} command-line arguments of the demo and benchmark commands. */
public final class Args {
    private Args() {
    }

    /** The value of {@code name=...} among {@code args}, or {@code fallback}. */
    public static String get(String[] args, String name, String fallback) {
        for (String a : args) {
            if (a.startsWith(name + "=")) {
                return a.substring(name.length() + 1);
            }
        }
        return fallback;
    }
}

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

    /** A size such as {@code 256m}, {@code 2g}, {@code 512k} or plain bytes (units are powers of 1024). */
    public static long bytes(String[] args, String name, String fallback) {
        String v = get(args, name, fallback).trim().toLowerCase(java.util.Locale.ROOT);
        int shift = switch (v.isEmpty() ? ' ' : v.charAt(v.length() - 1)) {
            case 'k' -> 10;
            case 'm' -> 20;
            case 'g' -> 30;
            case 't' -> 40;
            default -> 0;
        };
        try {
            long n = Long.parseLong(shift == 0 ? v : v.substring(0, v.length() - 1));
            if (n < 0) {
                throw new NumberFormatException();
            }
            return Math.multiplyExact(n, 1L << shift);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new IllegalArgumentException(name + "=" + v + ": expected a size like 512k, 256m, 2g");
        }
    }

    /** Every {@code spark.*=value} argument, in order: settings passed through to SparkConf. */
    public static java.util.Map<String, String> sparkSettings(String[] args) {
        java.util.Map<String, String> out = new java.util.LinkedHashMap<>();
        for (String a : args) {
            int eq = a.indexOf('=');
            if (a.startsWith("spark.") && eq > 0) {
                out.put(a.substring(0, eq), a.substring(eq + 1));
            }
        }
        return out;
    }
}

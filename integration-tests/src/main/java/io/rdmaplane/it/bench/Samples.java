package io.rdmaplane.it.bench;

import java.util.Arrays;

/** Latency samples in nanoseconds and their percentiles; shared by the benchmarks. */
final class Samples {
    private Samples() {
    }

    /** The given percentiles (0..1) of {@code samples}, in nanoseconds; the array is not changed. */
    static long[] percentiles(long[] samples, double... quantiles) {
        long[] sorted = samples.clone();
        Arrays.sort(sorted);
        long[] out = new long[quantiles.length];
        for (int i = 0; i < quantiles.length; i++) {
            out[i] = sorted[Math.min(sorted.length - 1, (int) (sorted.length * quantiles[i]))];
        }
        return out;
    }

    /** p50 and p99. */
    static long[] percentiles(long[] samples) {
        return percentiles(samples, 0.5, 0.99);
    }
}

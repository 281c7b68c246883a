package io.rdmaplane.it.shuffle;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/** Text formatting shared by the Spark shuffle demo and benchmark: aligned columns, sizes, counters. */
public final class ShuffleReport {
    private final List<String[]> rows = new ArrayList<>();

    public ShuffleReport row(String... cells) {
        rows.add(cells);
        return this;
    }

    /** The rows with every column padded to its widest cell, two spaces apart. */
    public String render() {
        int columns = rows.stream().mapToInt(r -> r.length).max().orElse(0);
        int[] width = new int[columns];
        for (String[] r : rows) {
            for (int i = 0; i < r.length; i++) {
                width[i] = Math.max(width[i], r[i].length());
            }
        }
        StringBuilder out = new StringBuilder();
        for (String[] r : rows) {
            StringBuilder line = new StringBuilder();
            for (int i = 0; i < r.length; i++) {
                line.append(i + 1 < r.length ? String.format("%-" + width[i] + "s  ", r[i]) : r[i]);
            }
            out.append(line.toString().stripTrailing()).append('\n');
        }
        return out.toString();
    }

    public static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.1f MiB", bytes / 1048576.0);
    }

    public static String count(long n) {
        return String.format(Locale.ROOT, "%,d", n);
    }

    public static String ratio(double a, double b) {
        return b <= 0 ? "n/a" : String.format(Locale.ROOT, "%.2fx", a / b);
    }

    /**
     * The sum over the executors' reports of the counters whose name ends with {@code suffix}
     * (e.g. "fetch.rdma.blocks"), or -1 when no report has such a counter.
     */
    public static long sum(List<Map<String, String>> reports, String suffix) {
        long total = -1;
        for (Map<String, String> report : reports) {
            for (Map.Entry<String, String> e : report.entrySet()) {
                if (e.getKey().endsWith(suffix)) {
                    try {
                        total = Math.max(total, 0) + Long.parseLong(e.getValue().trim());
                    } catch (NumberFormatException notACounter) {
                        // a text entry such as the provider
                    }
                }
            }
        }
        return total;
    }

    /** "tcp" when every executor ran the same provider, else each executor's: "1=tcp, 0=off: ...". */
    public static String providers(List<Map<String, String>> reports) {
        Map<String, String> byExecutor = new TreeMap<>();
        for (Map<String, String> r : reports) {
            byExecutor.put(r.getOrDefault("executorId", "?"), r.getOrDefault("provider", "?"));
        }
        if (byExecutor.isEmpty()) {
            return "(no executor report)";
        }
        if (byExecutor.values().stream().distinct().count() == 1) {
            return byExecutor.values().iterator().next() + " (" + byExecutor.size() + " executors)";
        }
        StringBuilder out = new StringBuilder();
        byExecutor.forEach((id, p) -> out.append(out.length() == 0 ? "" : ", ").append(id).append('=').append(p));
        return out.toString();
    }

    /** Prints a counter sum, or "-" when absent. */
    public static String counter(List<Map<String, String>> reports, String suffix) {
        long v = sum(reports, suffix);
        return v < 0 ? "-" : count(v);
    }

    /**
     * The executors' memory registrations: the total, then by kind (map outputs, the reduce pool's
     * chunks, per-block landings), and per-block registrations per GiB fetched over RDMA: the
     * registrations after warm-up, whose goal is zero (a map output's are once per map task, the pool's
     * its warm-up).
     */
    public static String registrations(List<Map<String, String>> reports) {
        long total = sum(reports, "rdma.shuffle.registrations");
        if (total < 0) {
            return "-";
        }
        long pool = Math.max(0, sum(reports, "pool.chunkRegistrations"));
        long perBlock = Math.max(0, sum(reports, "fetch.registrations"));
        return count(total) + " (map outputs " + count(total - pool - perBlock) + ", reduce pool " + count(pool) + ", per block "
                + count(perBlock) + " = " + String.format(Locale.ROOT, "%.2f", perBlockPerGiB(reports)) + "/GiB fetched)";
    }

    /** Per-block registrations per GiB fetched over RDMA (0 when nothing was fetched). */
    public static double perBlockPerGiB(List<Map<String, String>> reports) {
        long bytes = sum(reports, "fetch.rdma.bytes");
        return bytes <= 0 ? 0 : Math.max(0, sum(reports, "fetch.registrations")) / (bytes / (double) (1L << 30));
    }
}

package io.rdmaplane.rdma.doctor;

import io.rdmaplane.rdma.provider.verbs.RdmaDevices;
import java.nio.file.Path;
import java.util.Locale;

/** What the doctor reads from {@code <root>/proc}: memlock limits, capabilities, huge pages, host name. */
final class ProcFacts {
    /** A limit of "unlimited". */
    static final long UNLIMITED = Long.MAX_VALUE;
    /** Bit of CAP_IPC_LOCK in the capability sets ({@code linux/capability.h}). */
    static final int CAP_IPC_LOCK = 14;

    private ProcFacts() {
    }

    /** Soft and hard limits in bytes ({@link #UNLIMITED} for "unlimited"). */
    record Limit(long soft, long hard) {
    }

    /** The "Max locked memory" line of {@code /proc/self/limits}, or null when it cannot be read. */
    static Limit memlock(Path root) {
        String text = RdmaDevices.read(root.resolve("proc/self/limits"));
        if (text == null) {
            return null;
        }
        for (String line : text.split("\n")) {
            if (line.startsWith("Max locked memory")) {
                String[] f = line.substring("Max locked memory".length()).trim().split("\\s+");
                if (f.length < 2) {
                    return null;
                }
                Long soft = limit(f[0]);
                Long hard = limit(f[1]);
                return soft == null || hard == null ? null : new Limit(soft, hard);
            }
        }
        return null;
    }

    private static Long limit(String text) {
        if (text.equals("unlimited")) {
            return UNLIMITED;
        }
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** Whether CapEff in {@code /proc/self/status} has CAP_IPC_LOCK (pinning then ignores memlock); null if unknown. */
    static Boolean hasIpcLock(Path root) {
        String text = RdmaDevices.read(root.resolve("proc/self/status"));
        if (text == null) {
            return null;
        }
        for (String line : text.split("\n")) {
            if (line.startsWith("CapEff:")) {
                try {
                    long caps = Long.parseUnsignedLong(line.substring("CapEff:".length()).trim(), 16);
                    return (caps & (1L << CAP_IPC_LOCK)) != 0;
                } catch (NumberFormatException e) {
                    return null;
                }
            }
        }
        return null;
    }

    /** Huge pages from {@code /proc/meminfo}: total, free (pages) and page size (kB); null if not found. */
    record HugePages(long total, long free, long pageSizeKb) {
    }

    static HugePages hugePages(Path root) {
        String text = RdmaDevices.read(root.resolve("proc/meminfo"));
        if (text == null) {
            return null;
        }
        long total = -1;
        long free = -1;
        long size = -1;
        for (String line : text.split("\n")) {
            String[] f = line.trim().split("\\s+");
            if (f.length < 2) {
                continue;
            }
            try {
                switch (f[0]) {
                    case "HugePages_Total:" -> total = Long.parseLong(f[1]);
                    case "HugePages_Free:" -> free = Long.parseLong(f[1]);
                    case "Hugepagesize:" -> size = Long.parseLong(f[1]);
                    default -> {
                    }
                }
            } catch (NumberFormatException e) {
                return null;
            }
        }
        return total < 0 || free < 0 || size < 0 ? null : new HugePages(total, free, size);
    }

    static String hostname(Path root) {
        String name = RdmaDevices.read(root.resolve("proc/sys/kernel/hostname"));
        return name == null || name.isEmpty() ? "unknown" : name;
    }

    /** 268435456 to "256 MiB", 1536 to "1.5 KiB", {@link #UNLIMITED} to "unlimited". */
    static String bytes(long n) {
        if (n == UNLIMITED) {
            return "unlimited";
        }
        String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = n;
        int u = 0;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return u == 0 ? n + " B"
                : v == Math.rint(v) ? String.format(Locale.ROOT, "%d %s", (long) v, units[u])
                : String.format(Locale.ROOT, "%.1f %s", v, units[u]);
    }
}

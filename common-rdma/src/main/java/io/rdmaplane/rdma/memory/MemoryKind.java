package io.rdmaplane.rdma.memory;

import java.util.Locale;

/**
 * What the registered-memory pool's chunks are made of ({@value #SETTING}). Huge pages mean fewer
 * translations for the NIC to cache per chunk (4 per 8 MiB chunk instead of 2048), which is where
 * registered memory's IOPS go on real hardware. A kind that cannot be had falls back to direct
 * buffers, with one log line naming why.
 */
public enum MemoryKind {
    /** Reserved huge pages when there are free ones, else transparent huge pages when enabled, else direct. */
    AUTO,
    /** Huge pages the administrator reserved ({@code vm.nr_hugepages}), mapped with {@code MAP_HUGETLB}. */
    HUGETLB,
    /** Transparent huge pages: a 2 MiB-aligned anonymous mapping advised {@code MADV_HUGEPAGE}. */
    THP,
    /** {@link java.nio.ByteBuffer#allocateDirect} memory, as the JVM lays it out (4 KiB pages). */
    DIRECT;

    /** The setting that chooses it, named in errors and log lines. */
    public static final String SETTING = "pool.memory";

    /** The setting's value for this kind. */
    public String settingValue() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The kind a setting's value names, case-insensitively.
     *
     * @throws IllegalArgumentException naming the setting and the values allowed
     */
    public static MemoryKind of(String value) {
        for (MemoryKind kind : values()) {
            if (kind.settingValue().equalsIgnoreCase(value.trim())) {
                return kind;
            }
        }
        throw new IllegalArgumentException(SETTING + " must be one of auto, hugetlb, thp, direct, was '" + value + "'");
    }
}

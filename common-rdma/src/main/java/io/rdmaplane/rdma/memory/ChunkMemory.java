package io.rdmaplane.rdma.memory;

import io.rdmaplane.rdma.provider.HostMemory;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where one pool's chunks come from: the {@link MemoryKind} asked for, through the native library's
 * {@link HostMemory}, else direct buffers. The first time a chunk falls back to direct memory, one line
 * says why (later chunks fall back silently, counted by {@link #chunksByKind()}); auto taking thp
 * because no reserved huge page is free is no fallback (debug). Not thread-safe:
 * the pool calls it under its lock.
 */
final class ChunkMemory {
    private static final Logger LOG = LoggerFactory.getLogger(ChunkMemory.class);
    /** Alignment of direct chunks: fewer pages pinned per chunk, and Arrow's 64-byte alignment for free. */
    private static final int PAGE_BYTES = 4 << 10;
    static final Path MEMINFO = Path.of("/proc/meminfo");
    static final Path THP_ENABLED = Path.of("/sys/kernel/mm/transparent_hugepage/enabled");

    /** One chunk's memory and what it is made of. */
    record Mapping(ByteBuffer buffer, MemoryKind kind) {
    }

    private final MemoryKind asked;
    private final int numaNode;
    private final Callable<HostMemory> lookup;
    private HostMemory host;
    private IOException hostMissing;
    private String fallback;
    private boolean warned;
    private final Map<MemoryKind, Integer> chunks = new EnumMap<>(MemoryKind.class);

    /**
     * @param numaNode the RDMA device's NUMA node the pages should come from, or -1
     * @param lookup   finds the native library's memory (Providers::hostMemory), asked once, on the first chunk that needs it
     */
    ChunkMemory(MemoryKind asked, int numaNode, Callable<HostMemory> lookup) {
        this.asked = asked;
        this.numaNode = numaNode;
        this.lookup = lookup;
    }

    /** A chunk of {@code bytes} (a multiple of 2 MiB), of the kind asked if it can be had, else direct (or thp for auto). */
    Mapping allocate(int bytes) {
        StringBuilder why = new StringBuilder();
        if (asked != MemoryKind.DIRECT && host() == null) {
            why.append(hostMissing.getMessage());
        } else if (asked == MemoryKind.HUGETLB || asked == MemoryKind.AUTO) {
            ByteBuffer b = map(MemoryKind.HUGETLB, bytes, why);
            if (b != null) {
                return counted(new Mapping(b, MemoryKind.HUGETLB));
            }
        }
        if (host != null && (asked == MemoryKind.THP || asked == MemoryKind.AUTO)) {
            ByteBuffer b = map(MemoryKind.THP, bytes, why);
            if (b != null) {
                if (asked == MemoryKind.AUTO && fallback == null) {
                    fallback = why.toString();
                    LOG.debug("Registered memory pool: transparent huge pages for its chunks ({})", fallback);
                }
                return counted(new Mapping(b, MemoryKind.THP));
            }
        }
        if (asked != MemoryKind.DIRECT && !warned) {
            warned = true;
            fallback = why.toString();
            // auto is the default, so its fallback is news rather than a setting that did not take
            String line = "Registered memory pool: {} = {} falls back to direct buffers (4 KiB pages): {}";
            if (asked == MemoryKind.AUTO) {
                LOG.info(line, MemoryKind.SETTING, asked.settingValue(), fallback);
            } else {
                LOG.warn(line, MemoryKind.SETTING, asked.settingValue(), fallback);
            }
        }
        ByteBuffer direct = ByteBuffer.allocateDirect(bytes + PAGE_BYTES - 1).alignedSlice(PAGE_BYTES);
        direct.limit(bytes);
        return counted(new Mapping(direct.slice(), MemoryKind.DIRECT));
    }

    /** Unmaps a chunk nothing refers to any more; a direct chunk goes with the garbage collector. */
    void free(Mapping mapping) {
        chunks.merge(mapping.kind(), -1, Integer::sum);
        if (mapping.kind() == MemoryKind.DIRECT) {
            return;
        }
        try {
            host.unmap(mapping.buffer());
        } catch (IOException e) {
            LOG.warn("Registered memory pool: cannot unmap a {}-byte {} chunk: {}", mapping.buffer().capacity(),
                    mapping.kind().settingValue(), e.getMessage());
        }
    }

    /** Chunks held now, by kind (kinds with none left out). */
    Map<MemoryKind, Integer> chunksByKind() {
        Map<MemoryKind, Integer> held = new EnumMap<>(MemoryKind.class);
        chunks.forEach((kind, n) -> {
            if (n > 0) {
                held.put(kind, n);
            }
        });
        return held;
    }

    /** Why the first chunk that could not be had as asked was not (what the log line said), or null. */
    String fallback() {
        return fallback;
    }

    private Mapping counted(Mapping mapping) {
        chunks.merge(mapping.kind(), 1, Integer::sum);
        return mapping;
    }

    /** A native mapping of {@code kind} (the library is loaded), or null with the reason appended to {@code why}. */
    private ByteBuffer map(MemoryKind kind, int bytes, StringBuilder why) {
        HostMemory memory = host();
        if (kind == MemoryKind.THP) {
            String enabled = read(THP_ENABLED);
            if (enabled == null || enabled.contains("[never]")) {
                append(why, kind, "transparent huge pages are " + (enabled == null ? "not built into this kernel (no "
                        + THP_ENABLED + ")" : "disabled (" + THP_ENABLED + ": " + enabled.trim() + ")"));
                return null;
            }
        }
        try {
            return kind == MemoryKind.HUGETLB ? memory.mapHugetlb(bytes, numaNode) : memory.mapTransparent(bytes, numaNode);
        } catch (IOException e) {
            append(why, kind, e.getMessage() + (kind == MemoryKind.HUGETLB ? " (" + hugePages() + ")" : ""));
            return null;
        }
    }

    private HostMemory host() {
        if (host == null && hostMissing == null) {
            try {
                host = lookup.call();
            } catch (Exception e) {
                hostMissing = e instanceof IOException io ? io : new IOException(e.toString(), e);
            }
        }
        return host;
    }

    private static void append(StringBuilder why, MemoryKind kind, String reason) {
        why.append(why.length() == 0 ? "" : "; ").append(kind.settingValue()).append(": ").append(reason);
    }

    /** The huge page figures of /proc/meminfo and what to do, for the reason a hugetlb chunk failed. */
    private static String hugePages() {
        String meminfo = read(MEMINFO);
        if (meminfo == null) {
            return "no " + MEMINFO;
        }
        List<String> lines = meminfo.lines().filter(l -> l.startsWith("HugePages_Free") || l.startsWith("HugePages_Total")
                || l.startsWith("Hugepagesize")).map(l -> l.replaceAll("\\s+", " ")).toList();
        return String.join(", ", lines) + "; reserve 2 MiB huge pages for the pool's capacity with"
                + " `sysctl vm.nr_hugepages=N` or hugepages=N on the kernel command line";
    }

    private static String read(Path file) {
        try {
            return Files.readString(file);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }
}

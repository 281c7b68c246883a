package io.rdmaplane.rdma.provider.verbs.impl;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Whether memory lies in a private file mapping (MAP_PRIVATE of a file, e.g. FileChannel's
 * MapMode.PRIVATE), from the process's memory map. On Linux 7.2 (ext4) ibv_reg_mr of a read-only
 * private file mapping hung unless the range was advised MADV_NOHUGEPAGE first (issue 12's table),
 * so {@link VerbsNode} asks before it registers.
 */
final class PrivateFileMappings {
    static final Path SELF = Path.of("/proc/self/maps");

    private PrivateFileMappings() {
    }

    /** Whether any byte of [address, address + length) is in a private file mapping of this process. */
    static boolean overlaps(long address, long length) throws IOException {
        return overlaps(SELF, address, length);
    }

    /**
     * The same over a memory map in /proc/PID/maps form ("start-end perms offset dev inode path"): a
     * private file mapping has perms ending in 'p' and a non-zero inode. Lines come by address.
     */
    static boolean overlaps(Path maps, long address, long length) throws IOException {
        long end = address + length;
        try (BufferedReader in = Files.newBufferedReader(maps, StandardCharsets.ISO_8859_1)) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                String[] f = line.trim().split("\\s+", 6);
                if (f.length < 5) {
                    continue;
                }
                int dash = f[0].indexOf('-');
                long from = Long.parseUnsignedLong(f[0], 0, dash, 16);
                long to = Long.parseUnsignedLong(f[0], dash + 1, f[0].length(), 16);
                if (Long.compareUnsigned(from, end) >= 0) {
                    return false; // past the range: the rest lies higher still
                }
                // hugetlb memory (the pool's "hugetlb" kind) shows as a file, /anon_hugepage: not a file mapping
                if (Long.compareUnsigned(to, address) > 0 && f[1].endsWith("p") && !"0".equals(f[4])
                        && !(f.length > 5 && f[5].startsWith("/anon_hugepage"))) {
                    return true;
                }
            }
        }
        return false;
    }
}

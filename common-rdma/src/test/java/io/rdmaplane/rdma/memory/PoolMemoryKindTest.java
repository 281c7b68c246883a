package io.rdmaplane.rdma.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.HostMemory;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.Skip;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The pool's chunks of each {@link MemoryKind} on this host (tcp node: mmap and madvise need no RDMA
 * device): they hold data as direct buffers, are accounted as before, are unmapped when the pool closes
 * (the mapping leaves /proc/self/maps) and fall back to direct buffers, saying why, when the kind cannot
 * be had. The kernel's own view (/proc/self/smaps) proves the page size.
 */
class PoolMemoryKindTest {
    static final int MiB = 1 << 20;
    static final Path NR_HUGEPAGES = Path.of("/proc/sys/vm/nr_hugepages");

    private Node node;

    @BeforeEach
    void setUp() throws Exception {
        node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
    }

    @AfterEach
    void tearDown() {
        node.close();
    }

    @Test
    void transparentHugePagesHoldDataAndAreUnmappedOnClose() throws Exception {
        String enabled = Files.readString(ChunkMemory.THP_ENABLED);
        Skip.unless(!enabled.contains("[never]"), "transparent huge pages are disabled here (" + enabled.trim() + ")");
        long address = fillCheckAndClose(MemoryKind.THP, smaps -> assertTrue(smaps.matches("(?s).*THPeligible:\\s+1\n.*VmFlags:[^\n]* hg .*"),
                "advised MADV_HUGEPAGE (VmFlags hg) and eligible for huge pages:\n" + smaps));
        assertFalse(mapped(address), "the chunk's mapping is gone after close (munmap)");
    }

    @Test
    void directChunksAreWhatTheyWere() throws Exception {
        fillCheckAndClose(MemoryKind.DIRECT, smaps -> { });
    }

    @Test
    void reservedHugePagesHoldDataAndAreUnmappedOnClose() throws Exception {
        withHugePages(4, () -> {
            long address = fillCheckAndClose(MemoryKind.HUGETLB, smaps -> assertTrue(
                    smaps.matches("(?s).*KernelPageSize:\\s+2048 kB.*"), "2 MiB pages:\n" + smaps));
            assertFalse(mapped(address), "the chunk's mapping is gone after close (munmap)");
            assertEquals(4, hugePagesFree(), "its 4 huge pages are free again");
            return null;
        });
    }

    @Test
    void autoTakesReservedHugePagesWhileTheyLastThenTransparentOnes() throws Exception {
        String enabled = Files.readString(ChunkMemory.THP_ENABLED);
        Skip.unless(!enabled.contains("[never]"), "transparent huge pages are disabled here (" + enabled.trim() + ")");
        withHugePages(4, () -> {
            try (RegisteredMemoryPool pool = new RegisteredMemoryPool(node, new PoolOptions(16 * MiB, Duration.ZERO, MemoryKind.AUTO))) {
                RegisteredBuffer first = pool.acquire(8 * MiB);
                RegisteredBuffer second = pool.acquire(8 * MiB);
                assertEquals(Map.of(MemoryKind.HUGETLB, 1, MemoryKind.THP, 1), pool.chunksByKind());
                assertTrue(pool.memoryFallback().isPresent() && pool.memoryFallback().get().startsWith("hugetlb: mmap(MAP_HUGETLB)"),
                        "why the second chunk is not hugetlb: " + pool.memoryFallback());
                first.close();
                second.close();
            }
            return null;
        });
    }

    @Test
    void hugetlbWithoutFreeHugePagesFallsBackToDirectAndSaysWhy() throws Exception {
        Skip.unless(hugePagesFree() == 0, "this host has free huge pages (" + hugePagesFree()
                + "): the test needs none, and does not take them from whoever reserved them");
        try (RegisteredMemoryPool pool = new RegisteredMemoryPool(node, new PoolOptions(8 * MiB, Duration.ZERO, MemoryKind.HUGETLB))) {
            try (RegisteredBuffer b = pool.acquire(MiB)) {
                roundTrip(b.buffer());
            }
            assertEquals(Map.of(MemoryKind.DIRECT, 1), pool.chunksByKind());
            String why = pool.memoryFallback().orElseThrow();
            assertTrue(why.startsWith("hugetlb: mmap(MAP_HUGETLB) of 8388608 bytes failed: "), why);
            assertTrue(why.contains("HugePages_Free: 0") && why.contains("vm.nr_hugepages"), "names the fix: " + why);
            System.out.println("[pool] hugetlb without huge pages: " + why);
        }
    }

    @Test
    void withoutTheNativeLibraryEveryKindFallsBackToDirect() throws Exception {
        Callable<HostMemory> missing = () -> {
            throw new IOException("verbs: the bundled native library is unavailable: no bundled native library"
                    + " native/linux-x86_64/libdisni.so on the class path");
        };
        for (MemoryKind kind : MemoryKind.values()) {
            try (RegisteredMemoryPool pool = new RegisteredMemoryPool(node, new PoolOptions(8 * MiB, Duration.ZERO, kind), missing)) {
                try (RegisteredBuffer b = pool.acquire(8 * MiB)) {
                    roundTrip(b.buffer());
                }
                assertEquals(Map.of(MemoryKind.DIRECT, 1), pool.chunksByKind(), kind.toString());
                if (kind == MemoryKind.DIRECT) {
                    assertTrue(pool.memoryFallback().isEmpty(), "direct asked, direct had");
                } else {
                    String why = pool.memoryFallback().orElseThrow();
                    assertTrue(why.contains("no bundled native library"), kind + ": " + why);
                }
            }
        }
    }

    @Test
    void aLeakedSliceKeepsItsChunkMapped() throws Exception {
        RegisteredMemoryPool pool = new RegisteredMemoryPool(node, new PoolOptions(8 * MiB, Duration.ZERO, MemoryKind.THP));
        RegisteredBuffer leaked = pool.acquire(4096);
        Skip.unless(pool.chunksByKind().containsKey(MemoryKind.THP), "no thp chunk here: " + pool.memoryFallback());
        pool.close();
        assertEquals(List.of(leaked), pool.leakedOnClose());
        assertTrue(mapped(leaked.memoryAddress()), "a late writer of a leaked slice writes to mapped memory");
        roundTrip(leaked.buffer());
    }

    /** Fills a whole chunk of {@code kind} through the pool, checks the accounting, closes; returns the chunk's address. */
    private long fillCheckAndClose(MemoryKind kind, java.util.function.Consumer<String> smapsCheck) throws Exception {
        long address;
        RegisteredMemoryPool pool = new RegisteredMemoryPool(node, new PoolOptions(8 * MiB, Duration.ZERO, kind));
        try (pool) {
            RegisteredBuffer b = pool.acquire(8 * MiB);
            address = b.memoryAddress();
            assertTrue(b.buffer().isDirect());
            roundTrip(b.buffer());
            assertEquals(Map.of(kind, 1), pool.chunksByKind(), "fell back: " + pool.memoryFallback());
            assertTrue(pool.memoryFallback().isEmpty());
            assertEquals(8L * MiB, pool.registeredBytes());
            assertEquals(8L * MiB, pool.inUseBytes());
            if (kind != MemoryKind.DIRECT) {
                assertEquals(0, address % (2 * MiB), "aligned to huge pages");
                smapsCheck.accept(smapsOf(address));
            }
            b.close();
            assertEquals(0, pool.inUseBytes());
        }
        assertEquals(List.of(), pool.leakedOnClose());
        assertEquals(Map.of(), pool.chunksByKind(), "every chunk is released");
        return address;
    }

    private static void roundTrip(ByteBuffer buffer) {
        ByteBuffer b = buffer.duplicate();
        for (int i = 0; i + 8 <= b.capacity(); i += 4096) {
            b.putLong(i, i * 31L + 7);
        }
        for (int i = 0; i + 8 <= b.capacity(); i += 4096) {
            assertEquals(i * 31L + 7, b.getLong(i));
        }
    }

    /**
     * Runs {@code body} with exactly {@code pages} free huge pages, reserved on top of what is in use now (a
     * global setting: the previous value is restored afterwards whatever happens); skips, saying so, where
     * they cannot be reserved or others are free already.
     */
    private static void withHugePages(int pages, Callable<Void> body) throws Exception {
        String before;
        try {
            before = Files.readString(NR_HUGEPAGES).trim();
        } catch (IOException e) {
            Skip.now("cannot read " + NR_HUGEPAGES + ": " + e);
            return;
        }
        long free = hugePagesFree();
        Skip.unless(free == 0, "this host has " + free + " free huge pages reserved by someone else: the test counts"
                + " pages and does not take theirs");
        try {
            try {
                Files.writeString(NR_HUGEPAGES, Long.toString(Long.parseLong(before) + pages));
            } catch (IOException e) {
                Skip.now("cannot reserve huge pages (root writes " + NR_HUGEPAGES + "): " + e);
            }
            Skip.unless(hugePagesFree() == free + pages, "the kernel reserved " + (hugePagesFree() - free) + " of "
                    + pages + " huge pages asked (memory too fragmented here)");
            body.call();
        } finally {
            Files.writeString(NR_HUGEPAGES, before);
        }
    }

    static long hugePagesFree() throws IOException {
        for (String line : Files.readAllLines(ChunkMemory.MEMINFO)) {
            if (line.startsWith("HugePages_Free:")) {
                return Long.parseLong(line.split("\\s+")[1]);
            }
        }
        return 0;
    }

    /** Whether a mapping of this process contains {@code address} (/proc/self/maps). */
    static boolean mapped(long address) throws IOException {
        return !smapsOf(address).isEmpty();
    }

    /** The /proc/self/smaps entry of the mapping containing {@code address}, or "" if none does. */
    static String smapsOf(long address) throws IOException {
        List<String> lines = Files.readAllLines(Path.of("/proc/self/smaps"));
        StringBuilder entry = new StringBuilder();
        boolean inside = false;
        for (String line : lines) {
            int dash = line.indexOf('-');
            int space = line.indexOf(' ');
            if (dash > 0 && space > dash && line.substring(0, dash).matches("[0-9a-f]+")) {
                if (inside) {
                    break;
                }
                long start = Long.parseUnsignedLong(line.substring(0, dash), 16);
                long end = Long.parseUnsignedLong(line.substring(dash + 1, space), 16);
                inside = address >= start && address < end;
            }
            if (inside) {
                entry.append(line).append('\n');
            }
        }
        return entry.toString();
    }
}

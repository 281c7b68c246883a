package io.rdmaplane.rdma.provider.verbs.impl;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** VerbsNode tells private file mappings (which it advises off huge pages before registering) from the rest. */
class PrivateFileMappingsTest {
    @Test
    void privateFileMappingsAreFoundAndSharedOnesAndHeapMemoryAreNot(@TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("data"), new byte[1 << 20]);
        MappedByteBuffer privateMapping;
        MappedByteBuffer sharedMapping;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            privateMapping = ch.map(FileChannel.MapMode.PRIVATE, 0, ch.size());
            sharedMapping = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
        }
        ByteBuffer direct = ByteBuffer.allocateDirect(1 << 20);
        assertTrue(overlaps(privateMapping), "a MapMode.PRIVATE mapping");
        assertTrue(overlaps(privateMapping.asReadOnlyBuffer().slice(4096, 8192)), "a read-only slice of it");
        assertFalse(overlaps(sharedMapping), "a MapMode.READ_ONLY (shared) mapping");
        assertFalse(overlaps(direct), "a direct buffer (anonymous memory)");
    }

    private static boolean overlaps(ByteBuffer buffer) throws Exception {
        return PrivateFileMappings.overlaps(Verbs.address(buffer), buffer.capacity());
    }
}

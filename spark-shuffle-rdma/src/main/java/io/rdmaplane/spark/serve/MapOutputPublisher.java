package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.MemoryRegion;
import java.io.EOFException;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.List;

/**
 * One way of turning a committed map output (its data file and partition lengths) into
 * registered REMOTE_READ memory that reducers READ: {@link MappedPublisher} registers the data
 * file's read-only mapping as it is, {@link CopyingPublisher} copies it into memory of its own.
 * {@link MapOutputStore} chooses between them, in one place, and keeps what they publish.
 */
interface MapOutputPublisher {

    /**
     * Frames and registers every non-empty partition, reserving the registered bytes against
     * the store's cap first; null when this way cannot serve the output here (the store then
     * copies it).
     *
     * @param payload the sum of {@code lengths}, already checked against the data file
     * @throws OverCapException when the output does not fit the cap (nothing is kept or reserved)
     */
    MapOutput publish(int shuffleId, long mapId, File dataFile, long[] lengths, long payload)
            throws IOException, OverCapException;

    /** Deregisters the output's regions (rkeys revoked first), then frees or keeps its memory. Not its cap bytes. */
    void release(MapOutput output);

    /** One registered region of a map output and the memory under it. */
    record Held(MemoryRegion region, ByteBuffer memory) {
    }

    /**
     * A published map output: its regions, each reduce partition's segment as the pieces a
     * reader gathers in order and as the block LOCATE serves (both null for an empty partition),
     * the registered bytes it holds against the cap, and the publisher that releases it.
     */
    record MapOutput(MapOutputPublisher publisher, List<Held> regions, RemoteBlock[][] segments, Block[] blocks, long bytes) {
    }

    /**
     * One partition's Arrow block as LOCATE serves it: {@code header}, the bytes of {@code remote}
     * and {@code trailer} back to back are the block; {@code remoteBytes} is the memory under
     * {@code remote}, copied into an answer when the block travels inline; {@code region} is the
     * registered region {@code remote} lies in (a grant of it goes with its deregistration). A copied
     * segment has its framing in the region already (empty header and trailer).
     */
    record Block(ByteBuffer header, RemoteBlock remote, ByteBuffer trailer, ByteBuffer remoteBytes, MemoryRegion region) {
        int length() {
            return header.remaining() + remote.length() + trailer.remaining();
        }
    }

    /** Thrown inside a publish when the output does not fit the cap. */
    final class OverCapException extends Exception {
        final long bytes;

        OverCapException(long bytes) {
            super(null, null, false, false);
            this.bytes = bytes;
        }
    }

    /** Reads {@code target}'s remaining bytes from {@code position} of the data file; a short file is an error. */
    static void readFully(FileChannel file, ByteBuffer target, long position, File dataFile) throws IOException {
        long at = position;
        while (target.hasRemaining()) {
            int n = file.read(target, at);
            if (n < 0) {
                throw new EOFException(dataFile + " ended at byte " + at + " before the partition's end");
            }
            at += n;
        }
    }
}

package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.format.ArrowBlock;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Set;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.BufferAllocator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Map outputs served where the bytes lie: the data file's mapping. The data file, just written
 * and so in the page cache, is mapped read-only and registered REMOTE_READ as it is: one
 * registration per map output. Each segment's Arrow framing (schema and batch header before the
 * payload; padding and end-of-stream after it, {@link ArrowBlock#frame}) stays in this JVM and
 * travels in the LOCATE answer; a reader READs the payload between the two, so its buffer holds
 * exactly the Arrow block {@link ArrowBlock#write} would have made. The payload is neither
 * copied nor put into fresh memory, which on this project's 2-core VM costs about 270 MiB/s of
 * page faults against about 1.5 GiB/s to map page-cache pages (measured with a 64 MiB file).
 *
 * <p>Works where the provider can register file mappings (tcp; verbs on kernels from 6.2). Verbs
 * on kernels before 6.2 cannot pin a read-only shared file mapping: the first refusal turns this
 * publisher off for good ({@link #serves} is false from then on) and the store copies instead.
 * Nothing here is recycled: a mapping is unmapped by the collector once its region is gone.
 */
final class MappedPublisher implements MapOutputPublisher {
    private static final Logger LOG = LoggerFactory.getLogger(MappedPublisher.class);

    private final Node node;
    private final RegisteredBytes cap;
    private final BufferAllocator allocator;
    private volatile boolean usable = true;

    MappedPublisher(Node node, RegisteredBytes cap, BufferAllocator allocator) {
        this.node = node;
        this.cap = cap;
        this.allocator = allocator;
    }

    /** Whether this publisher takes a map output of {@code payload} bytes: one mapping, while the provider registers them. */
    boolean serves(long payload) {
        return usable && payload > 0 && payload <= Integer.MAX_VALUE;
    }

    /** Null when the provider cannot register a file mapping: then, and from then on, {@link #serves} is false. */
    @Override
    public MapOutput publish(int shuffleId, long mapId, File dataFile, long[] lengths, long payload)
            throws IOException, OverCapException {
        ByteBuffer mapping;
        int[] crcs = new int[lengths.length];
        try (FileChannel file = FileChannel.open(dataFile.toPath(), StandardOpenOption.READ)) {
            mapping = file.map(FileChannel.MapMode.READ_ONLY, 0, payload);
            // Through a small reused buffer (page cache to a hot buffer, GiB/s), not the mapping: its pages
            // would each fault in; READs (or verbs' pinning) touch them later anyway.
            ByteBuffer chunk = ByteBuffer.allocateDirect(1 << 20);
            long from = 0;
            for (int r = 0; r < lengths.length; r++) {
                CRC32C crc = new CRC32C();
                for (long done = 0; done < lengths[r]; ) {
                    int n = (int) Math.min(chunk.capacity(), lengths[r] - done);
                    MapOutputPublisher.readFully(file, chunk.clear().limit(n), from + done, dataFile);
                    crc.update(chunk.flip());
                    done += n;
                }
                crcs[r] = (int) crc.getValue();
                from += lengths[r];
            }
        }
        ArrowBlock.Framing[] framings = new ArrowBlock.Framing[lengths.length];
        int[] fileOffsets = new int[lengths.length];
        int at = 0;
        for (int r = 0; r < lengths.length; r++) {
            fileOffsets[r] = at;
            if (lengths[r] > 0) {
                framings[r] = ArrowBlock.frame(MapOutputStore.metadata(shuffleId, mapId, r),
                        mapping.slice(at, (int) lengths[r]), crcs[r], allocator);
            }
            at += (int) lengths[r];
        }
        long bytes = payload; // registered: the mapping alone
        if (!cap.reserve(bytes)) {
            throw new OverCapException(bytes);
        }
        MemoryRegion payloadRegion;
        try {
            // Not registerForGrants: memory windows need an MR registered MW_BIND, which pins the memory for
            // write, and a read-only file mapping refuses that. So a mapped output's key is the region's own
            // rkey on verbs (any data channel READs with it); tcp still checks it against each peer's grants.
            payloadRegion = node.register(mapping, Set.of(Access.REMOTE_READ));
        } catch (TransportException | RuntimeException e) {
            cap.release(bytes);
            usable = false;
            LOG.info("RDMA shuffle: the {} provider cannot register a mapping of a shuffle data file here ({}); map outputs"
                    + " are copied into registered memory from now on", node.providerName(), e.getMessage());
            return null;
        }
        RemoteBlock[][] segments = new RemoteBlock[lengths.length][];
        Block[] blocks = new Block[lengths.length];
        for (int r = 0; r < lengths.length; r++) {
            if (framings[r] != null) {
                RemoteBlock remote = new RemoteBlock(payloadRegion.address() + fileOffsets[r], payloadRegion.rkey(),
                        (int) lengths[r], framings[r].payloadCrc32c());
                segments[r] = new RemoteBlock[] {remote};
                blocks[r] = new Block(framings[r].header().asReadOnlyBuffer(), remote, framings[r].trailer().asReadOnlyBuffer(),
                        mapping.slice(fileOffsets[r], (int) lengths[r]), payloadRegion);
            }
        }
        return new MapOutput(this, List.of(new Held(payloadRegion, mapping)), segments, blocks, bytes);
    }

    @Override
    public void release(MapOutput output) {
        output.regions().forEach(held -> held.region().deregister());
    }
}

package io.rdmaplane.hdfs.datanode;

import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.hdfs.protocol.BlockLocalPathInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockPoolTokenSecretManager;
import org.apache.hadoop.hdfs.server.common.HdfsServerConstants.ReplicaState;
import org.apache.hadoop.hdfs.server.datanode.BlockMetadataHeader;
import org.apache.hadoop.hdfs.server.datanode.Replica;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.LengthInputStream;
import org.apache.hadoop.util.DataChecksum;

/**
 * A DataNode as {@link BlockService} sees it: replicas stored as a DataNode stores them (a block
 * file and a meta file with Hadoop's checksum header and per-chunk sums) in a test directory,
 * found through a dataset that answers the three calls the service makes (getReplica,
 * getBlockLocalPathInfo, getMetaDataInputStream) and refuses every other.
 */
final class FakeDataNode implements BlockService.DataNodeView {
    static final String POOL = "BP-1-127.0.0.1-1";

    private final Path dir;
    private final Map<Long, FakeReplica> replicas = new ConcurrentHashMap<>();
    private final FsDatasetSpi<?> dataset;
    /** Null: block access tokens disabled, as {@code dfs.block.access.token.enable=false}. */
    volatile BlockPoolTokenSecretManager tokens;
    /** Runs after every replica lookup (a test may change the replica there, as an append would). */
    volatile Runnable afterLookup = () -> { };

    FakeDataNode(Path dir) {
        this.dir = dir;
        InvocationHandler calls = (proxy, method, args) -> switch (method.getName()) {
            case "getReplica" -> {
                FakeReplica replica = POOL.equals(args[0]) ? replicas.get((Long) args[1]) : null;
                afterLookup.run();
                yield replica;
            }
            case "getBlockLocalPathInfo" -> {
                ExtendedBlock block = (ExtendedBlock) args[0];
                yield new BlockLocalPathInfo(block, blockFile(block.getBlockId()).toString(),
                        metaFile(block.getBlockId()).toString());
            }
            case "getMetaDataInputStream" -> {
                Path meta = metaFile(((ExtendedBlock) args[0]).getBlockId());
                yield new LengthInputStream(Files.newInputStream(meta), Files.size(meta));
            }
            case "toString" -> "FakeDataNode dataset of " + dir;
            case "hashCode" -> System.identityHashCode(proxy);
            case "equals" -> proxy == args[0];
            default -> throw new UnsupportedOperationException("FsDatasetSpi." + method.getName() + " is not used by BlockService");
        };
        dataset = (FsDatasetSpi<?>) Proxy.newProxyInstance(FsDatasetSpi.class.getClassLoader(),
                new Class<?>[] {FsDatasetSpi.class}, calls);
    }

    @Override
    public FsDatasetSpi<?> dataset() {
        return dataset;
    }

    @Override
    public BlockPoolTokenSecretManager tokenSecretManager() {
        return tokens;
    }

    /** Seeded bytes, so a test can recompute them. */
    static byte[] bytes(int length, long seed) {
        byte[] bytes = new byte[length];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }

    /** Stores a finalized replica of {@code bytes} with its meta file of {@code type} sums per {@code bytesPerChecksum}. */
    FakeReplica add(long blockId, long generationStamp, byte[] bytes, DataChecksum.Type type, int bytesPerChecksum)
            throws IOException {
        Files.write(blockFile(blockId), bytes);
        DataChecksum sum = DataChecksum.newDataChecksum(type, bytesPerChecksum);
        byte[] sums = new byte[sum.getChecksumSize(bytes.length)];
        sum.calculateChunkedSums(bytes, 0, bytes.length, sums, 0);
        try (DataOutputStream meta = new DataOutputStream(Files.newOutputStream(metaFile(blockId)))) {
            BlockMetadataHeader.writeHeader(meta, sum);
            meta.write(sums);
        }
        FakeReplica replica = new FakeReplica(blockId, generationStamp, bytes.length);
        replicas.put(blockId, replica);
        return replica;
    }

    /** A finalized CRC32C replica with 512-byte chunks, HDFS's default. */
    FakeReplica add(long blockId, long generationStamp, byte[] bytes) throws IOException {
        return add(blockId, generationStamp, bytes, DataChecksum.Type.CRC32C, 512);
    }

    /** Replaces the replica by one with the next generation stamp, as an append does (the old object stays as it was). */
    void appended(long blockId) {
        replicas.computeIfPresent(blockId, (id, old) -> new FakeReplica(id, old.generationStamp + 1, old.length));
    }

    void remove(long blockId) {
        replicas.remove(blockId);
    }

    Path blockFile(long blockId) {
        return dir.resolve("blk_" + blockId);
    }

    Path metaFile(long blockId) {
        return dir.resolve("blk_" + blockId + ".meta");
    }

    /** The stored per-chunk sums of the replica's chunks {@code [from, to)}. */
    byte[] storedSums(long blockId, int from, int to, int checksumSize) throws IOException {
        byte[] meta = Files.readAllBytes(metaFile(blockId));
        int at = BlockMetadataHeader.getHeaderSize() + from * checksumSize;
        return java.util.Arrays.copyOfRange(meta, at, at + (to - from) * checksumSize);
    }

    /** A replica whose state and generation stamp a test may change, as recovery or an append would. */
    static final class FakeReplica implements Replica {
        private final long blockId;
        private final long length;
        volatile long generationStamp;
        volatile ReplicaState state = ReplicaState.FINALIZED;

        FakeReplica(long blockId, long generationStamp, long length) {
            this.blockId = blockId;
            this.generationStamp = generationStamp;
            this.length = length;
        }

        @Override
        public long getBlockId() {
            return blockId;
        }

        @Override
        public long getGenerationStamp() {
            return generationStamp;
        }

        @Override
        public ReplicaState getState() {
            return state;
        }

        @Override
        public long getNumBytes() {
            return length;
        }

        @Override
        public long getBytesOnDisk() {
            return length;
        }

        @Override
        public long getVisibleLength() {
            return length;
        }

        @Override
        public String getStorageUuid() {
            return "DS-fake";
        }

        @Override
        public boolean isOnTransientStorage() {
            return false;
        }

        // no @Override: Replica.getVolume() exists from Hadoop 3.4 on, and this fake compiles on the 3.3 line too
        public FsVolumeSpi getVolume() {
            return null;
        }
    }
}

package io.rdmaplane.hdfs.datanode;

import io.rdmaplane.hdfs.BlockProtocol.Request;
import io.rdmaplane.hdfs.BlockProtocol.Response;
import io.rdmaplane.hdfs.BlockProtocol.Status;
import io.rdmaplane.hdfs.BlockTokens;
import io.rdmaplane.rdma.policy.PolicyServer.PeerIdentity;
import io.rdmaplane.rdma.provider.Node;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;
import org.apache.hadoop.hdfs.protocol.BlockLocalPathInfo;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockPoolTokenSecretManager;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.server.common.HdfsServerConstants.ReplicaState;
import org.apache.hadoop.hdfs.server.datanode.BlockMetadataHeader;
import org.apache.hadoop.hdfs.server.datanode.Replica;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsDatasetSpi;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.util.DataChecksum;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Answers block requests on a DataNode: checks the block access token (the request's, for this block, and that the
 * client's session was opened with a token of the same pool and user: {@link BlockTokenAuthenticator}), finds the finalized
 * replica through the dataset interface, checks its generation stamp and length, and hands out
 * a chunk-aligned range of the replica's registered mapping with its CRC32C and stored chunk
 * checksums. Public DataNode APIs only.
 */
final class BlockService implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(BlockService.class);
    /** Stored checksums per response at most, so a response stays well within one control message. */
    static final int MAX_CHECKSUM_BYTES = 40 << 10;
    /** Hadoop's DataChecksum type id of CRC32C. */
    private static final int CRC32C_TYPE = 2;

    /** What the service needs from the DataNode; the plug-in passes the real one, tests may pass others. */
    interface DataNodeView {
        FsDatasetSpi<?> dataset();

        /** Null when block access tokens are disabled. */
        BlockPoolTokenSecretManager tokenSecretManager();
    }

    private final DataNodeView dataNode;
    private final RegionCache regions;
    final AtomicLong requests = new AtomicLong();
    final AtomicLong served = new AtomicLong();
    final AtomicLong refused = new AtomicLong();
    final AtomicLong tokenRefused = new AtomicLong();

    BlockService(DataNodeView dataNode, Node node, long capBytes, long leaseNanos) {
        this.dataNode = dataNode;
        this.regions = new RegionCache(node, capBytes, leaseNanos);
    }

    RegionCache regions() {
        return regions;
    }

    ByteBuffer handle(PeerIdentity peer, ByteBuffer message) {
        requests.incrementAndGet();
        Request request = Request.decode(message);
        Response response;
        try {
            response = serve(peer, request);
        } catch (IOException | RuntimeException e) {
            LOG.warn("RDMA block service: could not serve block {} of pool {} to {}: {}", request.blockId(), request.poolId(),
                    peer.address(), e.toString());
            response = Response.refused(Status.ERROR, "could not serve the block: " + e.getMessage());
        }
        (response.status() == Status.OK ? served : refused).incrementAndGet();
        return response.encode();
    }

    private Response serve(PeerIdentity peer, Request request) throws IOException {
        ExtendedBlock block = new ExtendedBlock(request.poolId(), request.blockId(), 0, request.generationStamp());
        BlockPoolTokenSecretManager tokens = dataNode.tokenSecretManager();
        long grantUntil = Long.MAX_VALUE; // without tokens, for as long as the region lives
        if (tokens != null) {
            try {
                if (!(peer.binding() instanceof BlockTokenIdentifier session)) {
                    throw new IOException("the client's session was not opened with a block access token");
                }
                Token<BlockTokenIdentifier> token = BlockTokens.decode(request.token()); // lengths bounded before allocation
                // the request's token is the capability: this block, READ, its password, not expired
                tokens.checkAccess(token, null, block, BlockTokenIdentifier.AccessMode.READ);
                BlockTokenIdentifier granted = identifier(token);
                // the session proved a token of the same pool for the same user: the same principal, whichever block
                // it was opened for (a session per block would cost a connection per block read)
                if (!session.getBlockPoolId().equals(granted.getBlockPoolId())
                        || !Objects.equals(session.getUserId(), granted.getUserId())) {
                    throw new IOException("the client's session was opened with a token of another block pool or user");
                }
                // the descriptor READs nothing once its token, or its session's, has expired
                grantUntil = Math.min(granted.getExpiryDate(), session.getExpiryDate());
            } catch (IOException | RuntimeException e) {
                tokenRefused.incrementAndGet();
                LOG.warn("RDMA block service: refused the block access token from {} for block {}: {}", peer.address(),
                        block, e.getMessage());
                return Response.refused(Status.TOKEN_REFUSED, "block access token refused");
            }
        }
        FsDatasetSpi<?> dataset = dataNode.dataset();
        Replica replica = dataset.getReplica(request.poolId(), request.blockId());
        if (replica == null) {
            return Response.refused(Status.NOT_FOUND, "no replica of block " + request.blockId());
        }
        if (replica.getState() != ReplicaState.FINALIZED) {
            return Response.refused(Status.NOT_FINALIZED, "replica is " + replica.getState());
        }
        if (replica.getGenerationStamp() != request.generationStamp()) {
            return Response.refused(Status.STALE_GENERATION, "replica generation stamp is " + replica.getGenerationStamp());
        }
        long length = replica.getVisibleLength();
        if (request.offset() >= length) {
            return Response.refused(Status.OUT_OF_RANGE, "offset " + request.offset() + " is at or past the replica's " + length + " bytes");
        }
        RegionCache.Key key = new RegionCache.Key(request.poolId(), request.blockId(), request.generationStamp());
        block.setNumBytes(length);
        BlockLocalPathInfo paths = dataset.getBlockLocalPathInfo(block);
        RegionCache.Region region = regions.acquire(key, length, Path.of(paths.getBlockPath()));
        if (region == null) {
            return Response.refused(Status.BUSY, "registered memory cap reached");
        }
        RegionCache.ChecksumLayout layout = region.checksums;
        if (layout == null) {
            try (InputStream meta = dataset.getMetaDataInputStream(block)) {
                DataChecksum sum = BlockMetadataHeader.readHeader(new DataInputStream(meta)).getChecksum();
                layout = new RegionCache.ChecksumLayout(sum.getChecksumType().id, sum.getBytesPerChecksum(), sum.getChecksumSize());
            }
            region.checksums = layout;
        }
        // The range: whole chunks around the asked bytes, within the capacity and the checksum budget.
        int bpc = layout.bytesPerChecksum();
        long start = request.offset() - request.offset() % bpc;
        long end = Math.min(length, ceil(request.offset() + request.length(), bpc));
        long maxBytes = request.capacity();
        if (request.wantsChecksums() && layout.checksumSize() > 0) {
            maxBytes = Math.min(maxBytes, (long) (MAX_CHECKSUM_BYTES / layout.checksumSize()) * bpc);
        }
        if (end - start > maxBytes) {
            end = start + (maxBytes / bpc) * bpc;
        }
        if (end <= request.offset()) {
            return Response.refused(Status.OUT_OF_RANGE, "a capacity of " + request.capacity() + " bytes holds no whole "
                    + bpc + "-byte chunk");
        }
        int rangeLength = (int) (end - start);
        // Stored CRC32C chunk sums give the range's CRC32C without this process touching the bytes
        // (the NIC, or the tcp transport, reads them); other checksum types: hash the mapped range.
        boolean crc32cStored = layout.typeId() == CRC32C_TYPE && layout.checksumSize() == 4;
        byte[] sums = new byte[0];
        if ((request.wantsChecksums() || crc32cStored) && layout.checksumSize() > 0) {
            long firstChunk = start / bpc;
            int chunks = (int) ((rangeLength + bpc - 1) / bpc);
            sums = new byte[chunks * layout.checksumSize()];
            try (DataInputStream meta = new DataInputStream(dataset.getMetaDataInputStream(block))) {
                meta.skipNBytes(BlockMetadataHeader.getHeaderSize() + firstChunk * layout.checksumSize());
                meta.readFully(sums);
            }
        }
        int rangeCrc;
        if (crc32cStored) {
            rangeCrc = concatenated(sums, bpc, rangeLength);
        } else {
            CRC32C crc = new CRC32C();
            crc.update(region.mapping.slice((int) start, rangeLength));
            rangeCrc = (int) crc.getValue();
        }
        if (!request.wantsChecksums()) {
            sums = new byte[0];
        }
        // The replica may have changed while we mapped and hashed: hand out nothing stale.
        Replica now = dataset.getReplica(request.poolId(), request.blockId());
        if (now == null || now.getState() != ReplicaState.FINALIZED || now.getGenerationStamp() != request.generationStamp()) {
            regions.invalidate(key);
            return Response.refused(Status.STALE_GENERATION, "replica changed while being served");
        }
        // only the client whose token was checked may READ it, while the region lives and the token is valid, with
        // the key granted to it for this range only: on tcp a key of its own bound to the client's data channel, on
        // verbs a registration of the range in the client's key domain (the protection domain of its data QPs)
        int rkey = peer.grant(region.memory, region.memory.address() + start, rangeLength, grantUntil);
        return new Response(Status.OK, "", start, rangeLength, region.memory.address() + start, rkey,
                rangeCrc, layout.typeId(), bpc, sums);
    }

    /** The identifier of a token {@code checkAccess} has accepted, so its identifier is sound. */
    private static BlockTokenIdentifier identifier(Token<BlockTokenIdentifier> token) throws IOException {
        BlockTokenIdentifier id = new BlockTokenIdentifier();
        id.readFields(new DataInputStream(new ByteArrayInputStream(token.getIdentifier())));
        return id;
    }

    /** True while the replica behind a region is still finalized with the same generation stamp. */
    boolean servable(RegionCache.Key key) {
        Replica replica = dataNode.dataset().getReplica(key.poolId(), key.blockId());
        return replica != null && replica.getState() == ReplicaState.FINALIZED
                && replica.getGenerationStamp() == key.generationStamp();
    }

    /** The CRC32C of {@code length} bytes in chunks of {@code bpc} from the chunks' CRC32Cs (big-endian ints). */
    static int concatenated(byte[] sums, int bpc, int length) {
        ByteBuffer crcs = ByteBuffer.wrap(sums);
        int chunks = (length + bpc - 1) / bpc;
        int[] full = Crc32cConcat.shift(bpc);
        int crc = crcs.getInt(0);
        for (int i = 1; i < chunks; i++) {
            int chunk = Math.min(bpc, length - i * bpc);
            crc = Crc32cConcat.concat(crc, crcs.getInt(i * 4), chunk == bpc ? full : Crc32cConcat.shift(chunk));
        }
        return crc;
    }

    private static long ceil(long value, int unit) {
        return (value + unit - 1) / unit * unit;
    }

    @Override
    public void close() {
        regions.close();
    }
}

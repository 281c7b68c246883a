package io.rdmaplane.hdfs.client;

import io.rdmaplane.hdfs.BlockProtocol;
import io.rdmaplane.hdfs.BlockProtocol.Response;
import io.rdmaplane.hdfs.BlockProtocol.Status;
import io.rdmaplane.rdma.memory.RegisteredBuffer;
import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.RemoteBlock;
import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSInputStream;
import org.apache.hadoop.hdfs.ReplicaAccessor;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads one block of one file for one HDFS block reader: asks the DataNode for a window of the
 * replica (at most the read-ahead, in whole chunks), READs it into a registered landing buffer,
 * verifies every chunk against the DataNode's stored checksums when HDFS asks for verification,
 * and serves the reader's reads from the window. Any failure -- refused, peer lost, READ failed,
 * checksum mismatch -- switches this reader to a plain DFSClient's positioned read of the same
 * file range over TCP, so the caller gets the same bytes; a mismatch is also reported to the
 * NameNode as a bad replica, the HDFS way. Used by one thread at a time, as HDFS block readers are.
 */
final class RdmaReplicaAccessor extends ReplicaAccessor {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaReplicaAccessor.class);
    private static final long WAIT_SECONDS = 120; // the policy layer ends requests and READs well before this

    private final RdmaClientContext ctx;
    private final PeerConnection peer;
    private final DatanodeInfo dataNode;
    private final LocatedBlock block;
    private final URI nameNode;
    private final Configuration conf;
    private final String file;
    private final byte[] token;
    private final boolean verify;
    private final long visibleLength;
    private final int readahead;
    private final long negativeNanos;

    private RegisteredBuffer landing;
    private long windowStart = -1;
    private int windowLength;
    private boolean tcp;
    private DFSInputStream plain;

    RdmaReplicaAccessor(RdmaClientContext ctx, PeerConnection peer, DatanodeInfo dataNode, LocatedBlock block, URI nameNode,
                        Configuration conf, String file, byte[] token, boolean verify, long visibleLength, int readahead,
                        long negativeNanos) {
        this.ctx = ctx;
        this.peer = peer;
        this.dataNode = dataNode;
        this.block = block;
        this.nameNode = nameNode;
        this.conf = conf;
        this.file = file;
        this.token = token;
        this.verify = verify;
        this.visibleLength = visibleLength;
        this.readahead = readahead;
        this.negativeNanos = negativeNanos;
    }

    /** Why RDMA could not serve; the read goes on over TCP. */
    private static final class Fallback extends Exception {
        final String reason;

        Fallback(String reason, String message, Throwable cause) {
            super(message, cause);
            this.reason = reason;
        }
    }

    @Override
    public int read(long pos, byte[] buf, int off, int len) throws IOException {
        if (len == 0) {
            return 0;
        }
        if (pos >= visibleLength) {
            return -1;
        }
        int n = (int) Math.min(len, visibleLength - pos);
        if (!tcp) {
            try {
                int at = window(pos);
                int got = (int) Math.min(n, windowStart + windowLength - pos);
                landing.buffer().get(at, buf, off, got);
                RdmaClientContext.count("hdfs.client.rdma.bytes", got);
                return got;
            } catch (Fallback f) {
                fallBack(f);
            }
        }
        return tcpRead(pos, ByteBuffer.wrap(buf, off, n));
    }

    @Override
    public int read(long pos, ByteBuffer dst) throws IOException {
        if (!dst.hasRemaining()) {
            return 0;
        }
        if (pos >= visibleLength) {
            return -1;
        }
        int n = (int) Math.min(dst.remaining(), visibleLength - pos);
        if (!tcp) {
            try {
                int at = window(pos);
                int got = (int) Math.min(n, windowStart + windowLength - pos);
                dst.put(landing.buffer().slice(at, got));
                RdmaClientContext.count("hdfs.client.rdma.bytes", got);
                return got;
            } catch (Fallback f) {
                fallBack(f);
            }
        }
        ByteBuffer part = dst.slice(dst.position(), n);
        int got = tcpRead(pos, part);
        dst.position(dst.position() + got);
        return got;
    }

    /** Makes the window hold {@code pos}; returns where {@code pos} is in the landing buffer. */
    private int window(long pos) throws Fallback {
        if (pos >= windowStart && pos < windowStart + windowLength) {
            return (int) (pos - windowStart);
        }
        try {
            if (landing == null) {
                landing = ctx.pool.acquire(readahead);
            }
            int want = (int) Math.min(readahead, visibleLength - pos);
            BlockProtocol.Request request = new BlockProtocol.Request(verify ? BlockProtocol.FLAG_CHECKSUMS : 0,
                    block.getBlock().getBlockPoolId(), block.getBlock().getBlockId(), block.getBlock().getGenerationStamp(),
                    pos, want, landing.capacity(), token);
            Response response = Response.decode(peer.request(request.encode()).get(WAIT_SECONDS, TimeUnit.SECONDS));
            if (response.status() != Status.OK) {
                ctx.refuse(block.getBlock().getBlockPoolId(), block.getBlock().getBlockId(),
                        block.getBlock().getGenerationStamp(), dataNode, negativeNanos);
                throw new Fallback(response.status().name(), "the DataNode did not serve: " + response.message(), null);
            }
            if (response.rangeOffset() > pos || response.rangeOffset() + response.rangeLength() <= pos
                    || response.rangeLength() > landing.capacity()) {
                throw new Fallback("PROTOCOL", "the DataNode served a range that does not hold offset " + pos, null);
            }
            windowStart = -1; // the landing buffer is about to change
            RemoteBlock remote = new RemoteBlock(response.address(), response.rkey(), response.rangeLength(), response.crc32c());
            peer.read(remote, landing.region(), landing.offset()).get(WAIT_SECONDS, TimeUnit.SECONDS);
            if (verify) {
                verifyChunks(response);
            }
            windowStart = response.rangeOffset();
            windowLength = response.rangeLength();
            RdmaClientContext.count("hdfs.client.rdma.windows");
            return (int) (pos - windowStart);
        } catch (Fallback f) {
            throw f;
        } catch (ExecutionException e) {
            throw new Fallback(e.getCause().getClass().getSimpleName(), String.valueOf(e.getCause().getMessage()), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Fallback("INTERRUPTED", "interrupted", e);
        } catch (Exception e) {
            throw new Fallback(e.getClass().getSimpleName(), String.valueOf(e.getMessage()), e);
        }
    }

    private void verifyChunks(Response response) throws Fallback {
        Checksum sum = switch (response.checksumType()) {
            case 0 -> null; // the file was written without checksums
            case 1 -> new CRC32();
            case 2 -> new CRC32C();
            default -> throw new Fallback("CHECKSUM_TYPE", "unknown checksum type " + response.checksumType(), null);
        };
        if (sum == null) {
            return;
        }
        int bpc = response.bytesPerChecksum();
        int chunks = (response.rangeLength() + bpc - 1) / bpc;
        if (response.checksums().length != chunks * 4) {
            throw new Fallback("PROTOCOL", response.checksums().length / 4 + " checksums for " + chunks + " chunks", null);
        }
        ByteBuffer data = landing.buffer();
        ByteBuffer sums = ByteBuffer.wrap(response.checksums());
        for (int i = 0; i < chunks; i++) {
            int from = i * bpc;
            sum.reset();
            sum.update(data.slice(from, Math.min(bpc, response.rangeLength() - from)));
            if ((int) sum.getValue() != sums.getInt(i * 4)) {
                RdmaClientContext.count("hdfs.client.checksum.mismatches");
                reportBadReplica();
                throw new Fallback("CHECKSUM", "chunk at block offset " + (response.rangeOffset() + from)
                        + " does not match the DataNode's stored checksum", null);
            }
        }
    }

    private void reportBadReplica() {
        try {
            ctx.plainClient(nameNode, conf).reportBadBlocks(
                    new LocatedBlock[] {new LocatedBlock(block.getBlock(), new DatanodeInfo[] {dataNode})});
            LOG.warn("reported block {} on {} as corrupt (RDMA read failed its stored checksums)", block.getBlock(),
                    dataNode.getXferAddr());
        } catch (IOException e) {
            LOG.warn("could not report block {} on {} as corrupt", block.getBlock(), dataNode.getXferAddr(), e);
        }
    }

    private void fallBack(Fallback f) {
        tcp = true;
        windowStart = -1;
        releaseLanding();
        if (f.getCause() instanceof io.rdmaplane.rdma.policy.PeerUnavailableException) {
            // its service may have moved (a restarted DataNode): ask the DataNode again after the negative-cache time
            ctx.directory.forget(dataNode.getIpAddr(), dataNode.getXferPort(), negativeNanos);
        }
        RdmaClientContext.count("hdfs.client.fallbacks");
        RdmaClientContext.count("hdfs.client.fallback." + f.reason);
        LOG.info("RDMA read of block {} from {} fell back to TCP ({}: {})", block.getBlock(), dataNode.getXferAddr(),
                f.reason, f.getMessage());
    }

    /** A plain DFSClient's positioned read of the same bytes of the file: the normal TCP path. */
    private int tcpRead(long pos, ByteBuffer dst) throws IOException {
        if (plain == null) {
            plain = ctx.plainClient(nameNode, conf).open(file);
        }
        long inFile = block.getStartOffset() + pos;
        int total = 0;
        byte[] chunk = new byte[Math.min(dst.remaining(), 1 << 20)];
        while (dst.hasRemaining()) {
            int got = plain.read(inFile + total, chunk, 0, Math.min(chunk.length, dst.remaining()));
            if (got < 0) {
                break;
            }
            dst.put(chunk, 0, got);
            total += got;
        }
        RdmaClientContext.count("hdfs.client.fallback.bytes", total);
        return total == 0 ? -1 : total;
    }

    private void releaseLanding() {
        if (landing != null) {
            landing.close();
            landing = null;
        }
    }

    @Override
    public void close() throws IOException {
        releaseLanding();
        if (plain != null) {
            plain.close();
            plain = null;
        }
    }

    @Override
    public boolean isLocal() {
        return false;
    }

    @Override
    public boolean isShortCircuit() {
        return false;
    }
}

package io.rdmaplane.hdfs.client;

import io.rdmaplane.hdfs.BlockProtocol;
import io.rdmaplane.hdfs.BlockProtocol.Response;
import io.rdmaplane.hdfs.BlockProtocol.Status;
import io.rdmaplane.rdma.memory.RegisteredBuffer;
import io.rdmaplane.rdma.policy.KeyRefusedException;
import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.RemoteBlock;
import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
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

    private Landing current;
    private Landing next;
    private boolean tcp;
    private DFSInputStream plain;
    private boolean closed;

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

    /** New grants asked for (BLOCK_REQUEST again with the token) after a READ's key was refused, before falling back. */
    static final int MAX_REGRANTS = 2;

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
                int got = (int) Math.min(n, current.start + current.length - pos);
                current.buffer.buffer().get(at, buf, off, got);
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
                int got = (int) Math.min(n, current.start + current.length - pos);
                dst.put(current.buffer.buffer().slice(at, got));
                RdmaClientContext.count("hdfs.client.rdma.bytes", got);
                return got;
            } catch (Fallback f) {
                fallBack(f);
            }
        }
        ByteBuffer part = dst.slice(dst.position(), n);
        int got = tcpRead(pos, part);
        if (got > 0) {
            dst.position(dst.position() + got);
        }
        return got;
    }

    /** A registered landing buffer and the range of the replica it holds (start -1: none). */
    private static final class Landing {
        final RegisteredBuffer buffer;
        long start = -1;
        int length;
        /** The READ into it that may still be running; the buffer goes back to the pool only after it. */
        CompletableFuture<Response> busy;

        Landing(RegisteredBuffer buffer) {
            this.buffer = buffer;
        }

        boolean holds(long pos) {
            return pos >= start && pos < start + length;
        }

        void release() {
            CompletableFuture<Response> running = busy;
            if (running == null || running.isDone()) {
                buffer.close();
            } else {
                running.whenComplete((r, e) -> buffer.close());
            }
        }
    }

    /** A refusal or malformed answer inside a fetch's future chain. */
    private static final class Refused extends RuntimeException {
        final Status status;

        Refused(Status status, String message) {
            super(message, null, false, false);
            this.status = status;
        }
    }

    /**
     * Makes the current window hold {@code pos}, and starts READing the window after it into the
     * other landing buffer, so a sequential reader's next window is on its way while it consumes
     * this one. Returns where {@code pos} is in the current landing buffer.
     */
    private int window(long pos) throws Fallback {
        if (current != null && current.holds(pos)) {
            return (int) (pos - current.start);
        }
        try {
            if (current == null) {
                current = new Landing(ctx.pool.acquire(readahead));
            }
            boolean have = false;
            if (next != null && next.busy != null) {
                CompletableFuture<Response> prefetched = next.busy;
                if (next.start == pos) {
                    Response response = await(prefetched);
                    Landing swap = current;
                    current = next;
                    next = swap;
                    next.start = -1;
                    accept(current, response);
                    have = current.holds(pos);
                } else {
                    try {
                        prefetched.get(WAIT_SECONDS, TimeUnit.SECONDS); // a seek: let the READ land, then reuse the buffer
                    } catch (ExecutionException | TimeoutException ignored) {
                        // the next fetch reports the peer's trouble, if it lasts
                    }
                    next.start = -1;
                }
            }
            if (!have) {
                current.start = -1; // the landing buffer is about to change
                current.busy = fetch(current, pos, 0);
                accept(current, await(current.busy));
            }
            long after = current.start + current.length;
            if (after < visibleLength) {
                prefetch(after);
            }
            return (int) (pos - current.start);
        } catch (Fallback f) {
            throw f;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Fallback("INTERRUPTED", "interrupted", e);
        } catch (Exception e) {
            throw new Fallback(e.getClass().getSimpleName(), String.valueOf(e.getMessage()), e);
        }
    }

    private void prefetch(long pos) {
        try {
            if (next == null) {
                if (ctx.pool.inUseBytes() + 2L * readahead > ctx.pool.options().capacityBytes()) {
                    return; // the pool is getting full: its room goes to readers' first windows, not to read-ahead
                }
                next = new Landing(ctx.pool.acquire(readahead));
            }
            next.start = pos; // the asked position; the answer's range starts there (a chunk boundary)
            next.busy = fetch(next, pos, 0);
        } catch (Exception e) {
            LOG.debug("no read-ahead window for block {}: {}", block.getBlock(), e.toString()); // reads go on window by window
        }
    }

    /**
     * Asks for the window at {@code pos} and READs it into {@code into}; completes with the answer. A READ whose key
     * the DataNode refused (the grant went with an ended session, or with an earlier data channel where keys do) asks
     * again with the block token, a new grant in the connection's current session, up to {@value #MAX_REGRANTS} times;
     * then the refusal is the reader's fallback.
     */
    private CompletableFuture<Response> fetch(Landing into, long pos, int regrants) {
        int want = (int) Math.min(readahead, visibleLength - pos);
        BlockProtocol.Request request = new BlockProtocol.Request(verify ? BlockProtocol.FLAG_CHECKSUMS : 0,
                block.getBlock().getBlockPoolId(), block.getBlock().getBlockId(), block.getBlock().getGenerationStamp(),
                pos, want, into.buffer.capacity(), token);
        return peer.request(request.encode()).thenCompose(bytes -> {
            Response response = Response.decode(bytes);
            if (response.status() != Status.OK) {
                throw new Refused(response.status(), "the DataNode did not serve: " + response.message());
            }
            if (response.rangeOffset() > pos || response.rangeOffset() + response.rangeLength() <= pos
                    || response.rangeLength() > into.buffer.capacity()) {
                throw new Refused(Status.ERROR, "the DataNode served a range that does not hold offset " + pos);
            }
            RemoteBlock remote = new RemoteBlock(response.address(), response.rkey(), response.rangeLength(), response.crc32c());
            return peer.read(remote, into.buffer.region(), into.buffer.offset()).thenApply(v -> response);
        }).exceptionallyCompose(e -> {
            Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
            if (cause instanceof KeyRefusedException && regrants < MAX_REGRANTS) {
                RdmaClientContext.count("hdfs.client.regrants");
                return fetch(into, pos, regrants + 1);
            }
            return CompletableFuture.failedFuture(cause);
        });
    }

    private Response await(CompletableFuture<Response> fetch) throws Fallback, InterruptedException {
        try {
            return fetch.get(WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() instanceof java.util.concurrent.CompletionException && e.getCause().getCause() != null
                    ? e.getCause().getCause() : e.getCause();
            if (cause instanceof Refused refused) {
                ctx.refuse(block.getBlock().getBlockPoolId(), block.getBlock().getBlockId(),
                        block.getBlock().getGenerationStamp(), dataNode, negativeNanos);
                throw new Fallback(refused.status.name(), refused.getMessage(), null);
            }
            if (cause instanceof io.rdmaplane.rdma.policy.PeerUnavailableException && peer.isAuthenticationRefused()) {
                // the DataNode (or this client, checking the DataNode's proof) refused the session of the block's token
                ctx.refuse(block.getBlock().getBlockPoolId(), block.getBlock().getBlockId(),
                        block.getBlock().getGenerationStamp(), dataNode, negativeNanos);
                throw new Fallback(Status.TOKEN_REFUSED.name(), "the DataNode's session refused the block token: "
                        + cause.getMessage(), null);
            }
            if (cause instanceof KeyRefusedException) {
                throw new Fallback("KEY_REFUSED", "the DataNode refused the READ's key, also after " + MAX_REGRANTS
                        + " new grants for the block token: " + cause.getMessage(), cause);
            }
            if (cause instanceof io.rdmaplane.rdma.policy.BlockFetchException failed && failed.isChecksumMismatch()) {
                // READ twice and twice not the CRC32C the DataNode derived from the replica's stored chunk sums:
                // the replica's bytes are bad (a link that flips bits twice in a row is far less likely)
                RdmaClientContext.count("hdfs.client.checksum.mismatches");
                reportBadReplica();
                throw new Fallback("CHECKSUM", cause.getMessage(), cause);
            }
            throw new Fallback(cause.getClass().getSimpleName(), String.valueOf(cause.getMessage()), cause);
        } catch (TimeoutException e) {
            throw new Fallback("TIMEOUT", "no answer or READ within " + WAIT_SECONDS + " s", e);
        }
    }

    /** Verifies a landed window (when HDFS asks for it) and makes it the range {@code into} holds. */
    private void accept(Landing into, Response response) throws Fallback {
        if (verify) {
            verifyChunks(into.buffer.buffer(), response);
        }
        into.start = response.rangeOffset();
        into.length = response.rangeLength();
        RdmaClientContext.count("hdfs.client.rdma.windows");
    }

    private void verifyChunks(ByteBuffer data, Response response) throws Fallback {
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
        if (current != null) {
            current.release();
            current = null;
        }
        if (next != null) {
            next.release();
            next = null;
        }
    }

    @Override
    public void close() throws IOException {
        if (!closed) {
            closed = true;
            ctx.release(peer); // this reader's hold on its token session
        }
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

package io.rdmaplane.spark.fetch;

import com.codahale.metrics.MetricSet;
import io.rdmaplane.rdma.format.ArrowBlock;
import io.rdmaplane.rdma.format.CorruptBlockException;
import io.rdmaplane.rdma.memory.RegisteredBuffer;
import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import io.rdmaplane.rdma.policy.KeyRefusedException;
import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.spark.DirectMemory;
import io.rdmaplane.spark.ShuffleMetrics;
import io.rdmaplane.spark.serve.LocateProtocol;
import io.rdmaplane.spark.serve.LocateProtocol.BlockRef;
import io.rdmaplane.spark.serve.MapOutputStore;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.function.Function;
import java.util.zip.CRC32C;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.BlockPushingListener;
import org.apache.spark.network.shuffle.BlockStoreClient;
import org.apache.spark.network.shuffle.DownloadFileManager;
import org.apache.spark.network.shuffle.MergeFinalizerListener;
import org.apache.spark.network.shuffle.MergedBlocksMetaListener;
import org.apache.spark.network.shuffle.checksum.Cause;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.ShuffleBlockId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One reduce task's block client. It knows every block of the task by executor, so the first
 * {@link #fetchBlocks} sends, at once, a LOCATE to every remote executor of the task for all of
 * its blocks there (in parts of {@link LocateProtocol#BLOCKS_PER_REQUEST}, sent together; blocks
 * an answer DEFERRED are asked again; the futures are cached, also when they fail), so no READ
 * waits for a LOCATE behind another executor's READs. The answer carries each block's Arrow
 * framing: a block is ONE READ of its payload into a slice of the executor's registered pool (a
 * dedicated registered buffer above 8 MiB) between its header and trailer, or, if small, comes
 * whole in the answer with no READ. Either way it is decoded in place as an Arrow block (an
 * inline one always CRC32C-checked, a READ one as the policy samples), checked to be the block
 * asked for, and handed to the listener as a {@link ManagedBuffer} over the payload.
 *
 * <p>Any per-block failure (no address for the executor, LOCATE failed, block not served, no
 * registered buffer, READ failed after the policy's retries or its checksum, a READ key still refused after
 * {@value #MAX_REGRANTS} LOCATEs again, a decode that throws
 * anything or an identity mismatch, a block id that is not of this shuffle, or Spark asking for a
 * download to disk)
 * sends that block to Spark's own client with the same listener: the failed blocks of one
 * {@code fetchBlocks} call go in one fallback call, after all of its blocks are settled. Each
 * block reaches the listener exactly once, through us or through the fallback.
 *
 * <p>Threads: {@code fetchBlocks} never blocks. Acquiring buffers (which may wait for the pool)
 * and calling the fallback (which may connect) happen on one daemon worker thread of this
 * client, started on demand and ended when idle or closed; READ completions decode and call the
 * listener on the transport's thread.
 */
public final class RdmaBlockStoreClient extends BlockStoreClient {
    private static final Logger LOG = LoggerFactory.getLogger(RdmaBlockStoreClient.class);
    private static final AtomicInteger IDS = new AtomicInteger();
    /** LOCATEs again of one block whose READ key was refused, before it falls back. */
    static final int MAX_REGRANTS = 2;

    private final PolicyClient policy;
    private final RegisteredMemoryPool pool;
    private final Node node;
    private final BlockStoreClient fallback;
    private final Function<String, InetSocketAddress> addresses;
    private final BlockDecoder decoder;
    private final int shuffleId;
    private final Map<String, List<ShuffleBlockId>> blocksByExecutor;
    private final ShuffleMetrics metrics;
    private final Map<String, CompletableFuture<Located>> locates = new ConcurrentHashMap<>();
    private final Set<String> reported = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean locatedAll = new AtomicBoolean();
    private final ThreadPoolExecutor worker;
    private volatile boolean closed;

    /** Decodes a landed segment in place (the Arrow block reader; a test substitutes its own). */
    @FunctionalInterface
    interface BlockDecoder {
        ArrowBlock.Block decode(ByteBuffer segment) throws CorruptBlockException;
    }

    /** What one executor's LOCATE said: where each asked-for block is. */
    private record Located(PeerConnection peer, Map<BlockRef, LocateProtocol.Location> blocks) {
    }

    /**
     * @param policy    the executor's PolicyClient (shared, not closed here)
     * @param pool      the executor's registered pool for reduce buffers (shared)
     * @param node      the executor's node (to register buffers for blocks over 8 MiB)
     * @param fallback  Spark's own client (blockManager.blockStoreClient())
     * @param addresses executorId -> RDMA address of its ShuffleBlockServer, or null if unknown
     * @param shuffleId the shuffle; blocksByExecutor: executorId -> every ShuffleBlockId of this task there
     */
    public RdmaBlockStoreClient(PolicyClient policy, RegisteredMemoryPool pool, Node node, BlockStoreClient fallback,
            Function<String, InetSocketAddress> addresses, int shuffleId,
            Map<String, List<ShuffleBlockId>> blocksByExecutor, ShuffleMetrics metrics) {
        this(policy, pool, node, fallback, addresses, shuffleId, blocksByExecutor, metrics, segment -> ArrowBlock.read(segment, false));
    }

    RdmaBlockStoreClient(PolicyClient policy, RegisteredMemoryPool pool, Node node, BlockStoreClient fallback,
            Function<String, InetSocketAddress> addresses, int shuffleId,
            Map<String, List<ShuffleBlockId>> blocksByExecutor, ShuffleMetrics metrics, BlockDecoder decoder) {
        this.decoder = Objects.requireNonNull(decoder, "decoder");
        this.policy = Objects.requireNonNull(policy, "policy");
        this.pool = Objects.requireNonNull(pool, "pool");
        this.node = Objects.requireNonNull(node, "node");
        this.fallback = Objects.requireNonNull(fallback, "fallback");
        this.addresses = Objects.requireNonNull(addresses, "addresses");
        this.shuffleId = shuffleId;
        this.blocksByExecutor = Map.copyOf(blocksByExecutor);
        this.metrics = Objects.requireNonNull(metrics, "metrics");
        String name = "rdma-shuffle-fetch-" + shuffleId + "-" + IDS.incrementAndGet();
        this.worker = new ThreadPoolExecutor(0, 1, 2, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        });
    }

    @Override
    public void fetchBlocks(String host, int port, String execId, String[] blockIds, BlockFetchingListener listener,
            DownloadFileManager downloadFileManager) {
        Call call = new Call(host, port, execId, blockIds, listener, downloadFileManager);
        if (downloadFileManager != null) {
            call.failAll("Spark streams this request to disk (it is over spark.network.maxRemoteBlockSizeFetchToMem)", false);
            return;
        }
        if (closed) {
            call.failAll("the task's RDMA client is closed", false);
            return;
        }
        InetSocketAddress address;
        try {
            address = addresses.apply(execId);
        } catch (RuntimeException e) {
            call.failAll("looking up its RDMA address failed: " + e, true);
            return;
        }
        if (address == null) {
            call.failAll("no RDMA address is known for it", false);
            return;
        }
        BlockRef[] refs = new BlockRef[blockIds.length];
        List<BlockRef> asked = new ArrayList<>();
        for (int i = 0; i < blockIds.length; i++) {
            refs[i] = parse(blockIds[i]);
            if (refs[i] == null) {
                call.fail(i, "block " + blockIds[i] + " is not a block of shuffle " + shuffleId, false);
            } else {
                asked.add(refs[i]);
            }
        }
        CompletableFuture<Located> located = locates.computeIfAbsent(execId, e -> locate(e, address, asked));
        locateAll();
        located.whenComplete((answer, error) -> run(() -> readAll(call, refs, answer, error)));
    }

    /** Sends the LOCATEs of every other remote executor of the task too (once), before any READ starts. */
    private void locateAll() {
        if (!locatedAll.compareAndSet(false, true)) {
            return;
        }
        for (String execId : blocksByExecutor.keySet()) {
            if (!locates.containsKey(execId)) {
                InetSocketAddress address;
                try {
                    address = addresses.apply(execId);
                } catch (RuntimeException e) {
                    continue; // its own fetchBlocks looks it up again and falls back
                }
                if (address != null) {
                    locates.computeIfAbsent(execId, e -> locate(e, address, List.of()));
                }
            }
        }
    }

    // ---------------------------------------------------------------- LOCATE

    private CompletableFuture<Located> locate(String execId, InetSocketAddress address, List<BlockRef> asked) {
        Set<BlockRef> all = new LinkedHashSet<>();
        for (ShuffleBlockId block : blocksByExecutor.getOrDefault(execId, List.of())) {
            if (block.shuffleId() == shuffleId) {
                all.add(new BlockRef(block.mapId(), block.reduceId()));
            }
        }
        all.addAll(asked);
        if (all.isEmpty()) {
            return CompletableFuture.completedFuture(new Located(null, Map.of()));
        }
        PeerConnection peer;
        try {
            peer = policy.peer(address);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        List<BlockRef> list = new ArrayList<>(all);
        List<CompletableFuture<Map<BlockRef, LocateProtocol.Location>>> parts = new ArrayList<>();
        for (int from = 0; from < list.size(); from += LocateProtocol.BLOCKS_PER_REQUEST) {
            parts.add(locatePart(peer, list.subList(from, Math.min(list.size(), from + LocateProtocol.BLOCKS_PER_REQUEST))));
        }
        return CompletableFuture.allOf(parts.toArray(CompletableFuture[]::new)).thenApply(v -> {
            Map<BlockRef, LocateProtocol.Location> blocks = new HashMap<>();
            parts.forEach(p -> blocks.putAll(p.join()));
            return new Located(peer, blocks);
        });
    }

    /**
     * One LOCATE for {@code part}, and another for the blocks its answer DEFERRED, as long as each
     * answer locates at least one; blocks deferred by an answer that located none stay DEFERRED.
     */
    private CompletableFuture<Map<BlockRef, LocateProtocol.Location>> locatePart(PeerConnection peer, List<BlockRef> part) {
        ByteBuffer request = LocateProtocol.encodeRequest(new LocateProtocol.Request(shuffleId, part));
        metrics.locateRequests().inc();
        CompletableFuture<ByteBuffer> answer;
        try {
            answer = peer.request(request);
        } catch (RuntimeException e) {
            answer = CompletableFuture.failedFuture(e);
        }
        return answer.thenCompose(response -> {
            List<LocateProtocol.Location> located = LocateProtocol.decodeResponse(response, part.size());
            Map<BlockRef, LocateProtocol.Location> map = new HashMap<>();
            List<BlockRef> deferred = new ArrayList<>();
            for (int i = 0; i < located.size(); i++) {
                map.put(part.get(i), located.get(i));
                if (located.get(i) instanceof LocateProtocol.Deferred) {
                    deferred.add(part.get(i));
                }
            }
            if (deferred.isEmpty() || deferred.size() == part.size()) {
                return CompletableFuture.completedFuture(map);
            }
            return locatePart(peer, deferred).thenApply(more -> {
                map.putAll(more);
                return map;
            });
        });
    }

    // ---------------------------------------------------------------- READs

    /** On the worker: READs every block of the call that the LOCATE says is served. */
    private void readAll(Call call, BlockRef[] refs, Located located, Throwable error) {
        VirtualMachineError fatal = null;
        try {
            for (int i = 0; i < refs.length; i++) {
                if (refs[i] == null) {
                    continue; // already failed
                }
                if (error != null) {
                    call.fail(i, "LOCATE failed: " + describe(error), true);
                } else if (!located.blocks.containsKey(refs[i])) {
                    call.fail(i, "block " + call.blockIds[i] + " was not in the task's block list, so not located", false);
                } else if (located.blocks.get(refs[i]) instanceof LocateProtocol.NotServed) {
                    call.fail(i, "block " + call.blockIds[i] + " is not served over RDMA (not published there, e.g. over"
                            + " its map-output cap)", false);
                } else if (located.blocks.get(refs[i]) instanceof LocateProtocol.Deferred) {
                    call.fail(i, "block " + call.blockIds[i] + " found no room in any LOCATE answer", true);
                } else {
                    int index = i;
                    LocateProtocol.Location location = located.blocks.get(refs[index]);
                    VirtualMachineError thrown = guarded(call, i, () -> {
                        if (location instanceof LocateProtocol.Inline inline) {
                            deliverInline(call, index, refs[index], inline.block());
                        } else {
                            read(call, index, refs[index], (LocateProtocol.Read) location, located.peer, 0);
                        }
                    });
                    fatal = fatal == null ? thrown : fatal;
                }
            }
        } finally {
            call.armed();
        }
        if (fatal != null) {
            throw fatal;
        }
    }

    /**
     * Puts the block's header and trailer into one landing buffer and READs its payload between them: the Arrow block.
     * {@code regrants}: how many times this block was LOCATEd again because a READ's key was refused.
     */
    private void read(Call call, int index, BlockRef ref, LocateProtocol.Read location, PeerConnection peer, int regrants) {
        if (closed) {
            call.fail(index, "the task's RDMA client is closed", false);
            return;
        }
        int length = location.blockLength(); // the decoder bounds it well below 2 GiB
        int header = location.header().remaining();
        Landing landing;
        try {
            if (length <= RegisteredMemoryPool.MAX_SLICE_BYTES) {
                landing = new PooledLanding(pool.acquire(length));
            } else {
                landing = new DedicatedLanding(node, length);
                metrics.fetchRegistrations().inc();
            }
        } catch (Exception e) { // PoolExhaustedException, TransportException, a closed pool
            call.fail(index, "no registered buffer for " + length + " bytes: " + describe(e), true);
            return;
        }
        ByteBuffer framed = landing.view(length);
        framed.put(0, location.header(), location.header().position(), header);
        framed.put(header + location.payload().length(), location.trailer(), location.trailer().position(),
                location.trailer().remaining());
        CompletableFuture<?>[] reads = new CompletableFuture<?>[1];
        try {
            reads[0] = peer.read(location.payload(), landing.region(), landing.offset() + header);
        } catch (RuntimeException e) {
            landing.free();
            call.fail(index, "READ of " + call.blockIds[index] + " (" + length + " bytes) could not start: " + describe(e), true);
            return;
        }
        reads[0].whenComplete((v, ignored) -> {
            VirtualMachineError fatal = guarded(call, index, () -> landed(call, index, ref, length, landing, reads, peer, regrants));
            if (fatal != null) {
                throw fatal;
            }
        });
    }

    /** The block's READ key was refused: LOCATE it again (a new grant, in the current session) and READ it with that. */
    private void regrant(Call call, int index, BlockRef ref, PeerConnection peer, int regrants) {
        locatePart(peer, List.of(ref)).whenComplete((blocks, error) -> run(() -> {
            VirtualMachineError fatal = guarded(call, index, () -> {
                LocateProtocol.Location location = error == null ? blocks.get(ref) : null;
                if (location instanceof LocateProtocol.Read read) {
                    read(call, index, ref, read, peer, regrants);
                } else if (location instanceof LocateProtocol.Inline inline) {
                    deliverInline(call, index, ref, inline.block());
                } else {
                    call.fail(index, "its READ key was refused and the LOCATE again " + (error != null ? "failed: "
                            + describe(error) : "does not READ it: " + location), true);
                }
            });
            if (fatal != null) {
                throw fatal;
            }
        }));
    }

    /** Delivers a block that came whole in the LOCATE answer, its payload CRC32C-checked (no READ verified it). */
    private void deliverInline(Call call, int index, BlockRef ref, ByteBuffer block) {
        RdmaManagedBuffer buffer;
        try {
            ArrowBlock.Block decoded = decoder.decode(block.duplicate());
            String mismatch = identityMismatch(decoded.metadata(), ref);
            if (mismatch != null) {
                throw new CorruptBlockException(mismatch);
            }
            CRC32C crc = new CRC32C();
            decoded.payload().forEach(view -> crc.update(view.duplicate()));
            if ((int) crc.getValue() != decoded.crc32c()) {
                throw new CorruptBlockException("the inline payload fails its CRC32C");
            }
            buffer = new RdmaManagedBuffer(decoded.payload(), decoded.payloadLength(), () -> { }, metrics.fetchUnreadBlocks()::inc,
                    call.blockIds[index]);
        } catch (Throwable e) { // anything: a hostile block must not leave its block unsettled
            call.fail(index, "inline block " + call.blockIds[index] + " did not decode: " + describe(e), true);
            if (isFatal(e)) {
                throw (VirtualMachineError) e;
            }
            return;
        }
        metrics.fetchRdmaBlocks().inc();
        metrics.fetchRdmaBytes().inc(buffer.size());
        metrics.fetchInlineBlocks().inc();
        call.succeed(index, buffer);
    }

    /**
     * On the completion of a block's last READ: delivers it, or fails it if a READ failed. A READ whose key was refused
     * (its grant went with an ended session, or with an earlier data channel where keys do) is not a failure yet: the
     * block is LOCATEd again, in the connection's current session, and READ with the new descriptor, up to
     * {@value #MAX_REGRANTS} times; then it falls back, saying why.
     */
    private void landed(Call call, int index, BlockRef ref, int blockLength, Landing landing, CompletableFuture<?>[] reads,
                        PeerConnection peer, int regrants) {
        Throwable error = null;
        for (CompletableFuture<?> read : reads) {
            if (read.isCompletedExceptionally()) {
                error = read.handle((r, x) -> x).join();
                break;
            }
        }
        if (error != null) {
            landing.free();
            boolean refused = unwrap(error) instanceof KeyRefusedException;
            if (refused && regrants < MAX_REGRANTS && !closed) {
                regrant(call, index, ref, peer, regrants + 1);
            } else {
                call.fail(index, "READ of " + call.blockIds[index] + " failed" + (refused ? " (its key was refused, also after "
                        + regrants + " new LOCATEs)" : "") + ": " + describe(error), true);
            }
        } else {
            deliver(call, index, ref, blockLength, landing);
        }
    }

    /** Decodes the landed segment in place, checks it is the block asked for, and hands it to the listener. */
    private void deliver(Call call, int index, BlockRef ref, int length, Landing landing) {
        RdmaManagedBuffer buffer;
        long payloadLength;
        try {
            ArrowBlock.Block decoded = decoder.decode(landing.view(length));
            String mismatch = identityMismatch(decoded.metadata(), ref);
            if (mismatch != null) {
                throw new CorruptBlockException(mismatch);
            }
            payloadLength = decoded.payloadLength();
            buffer = new RdmaManagedBuffer(decoded.payload(), payloadLength, landing::free, metrics.fetchUnreadBlocks()::inc,
                    call.blockIds[index]);
        } catch (Throwable e) { // anything: a hostile segment must not leave its block unsettled
            landing.free();
            call.fail(index, "block " + call.blockIds[index] + " did not decode: " + describe(e), true);
            if (isFatal(e)) {
                throw (VirtualMachineError) e;
            }
            return;
        }
        metrics.fetchRdmaBlocks().inc();
        metrics.fetchRdmaBytes().inc(payloadLength);
        call.succeed(index, buffer);
    }

    /**
     * Runs one step of block {@code index}; whatever it throws, the block settles (it falls back).
     * Returns a fatal error it threw, for the caller to rethrow once nothing else waits on it.
     */
    private VirtualMachineError guarded(Call call, int index, Runnable step) {
        try {
            step.run();
            return null;
        } catch (Throwable e) {
            call.fail(index, "block " + call.blockIds[index] + " failed: " + describe(e), true);
            if (!isFatal(e)) {
                return null;
            }
            LOG.error("RDMA shuffle: {} while fetching block {} (it falls back); rethrown", e, call.blockIds[index]);
            return (VirtualMachineError) e;
        }
    }

    /**
     * A StackOverflowError, like any other Throwable, is one block's failure (hostile or broken
     * bytes; the stack has unwound): it falls back and ends there. The other VirtualMachineErrors
     * (OutOfMemoryError, InternalError, UnknownError) say the JVM itself is in trouble: the block
     * still falls back, and the error is rethrown rather than hidden.
     */
    private static boolean isFatal(Throwable e) {
        return e instanceof VirtualMachineError && !(e instanceof StackOverflowError);
    }

    private String identityMismatch(Map<String, String> metadata, BlockRef ref) {
        String expected = shuffleId + "/" + ref.mapId() + "/" + ref.reduceId();
        String got = metadata.get(MapOutputStore.SHUFFLE_ID_KEY) + "/" + metadata.get(MapOutputStore.MAP_ID_KEY) + "/"
                + metadata.get(MapOutputStore.PARTITION_ID_KEY);
        return expected.equals(got) ? null : "the segment is shuffle/map/partition " + got + ", not " + expected;
    }

    private BlockRef parse(String blockId) {
        try {
            BlockId id = BlockId.apply(blockId);
            if (id instanceof ShuffleBlockId block && block.shuffleId() == shuffleId && block.mapId() >= 0) {
                return new BlockRef(block.mapId(), block.reduceId());
            }
        } catch (RuntimeException e) {
            // not a block id Spark knows: fall back
        }
        return null;
    }

    /**
     * Runs on the worker; once the client is closed (the worker shut down), on a thread of its
     * own, never on the caller's, which may be a transport thread (Spark's client may connect).
     */
    private void run(Runnable task) {
        try {
            worker.execute(task);
        } catch (RejectedExecutionException e) {
            Thread late = new Thread(task, "rdma-shuffle-fetch-late-" + shuffleId);
            late.setDaemon(true);
            late.start();
        }
    }

    private static String describe(Throwable e) {
        Throwable cause = unwrap(e);
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }

    private static Throwable unwrap(Throwable e) {
        Throwable cause = e;
        while ((cause instanceof CompletionException || cause instanceof ExecutionException) && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    // ---------------------------------------------------------------- one fetchBlocks call

    /** The blocks of one fetchBlocks call: each settles once, as a success or a failure; failures fall back together. */
    private final class Call {
        final String host;
        final int port;
        final String execId;
        final String[] blockIds;
        final BlockFetchingListener listener;
        final DownloadFileManager downloadFileManager;
        /** 0 unsettled, 1 delivered, 2 failed. */
        final AtomicIntegerArray states;
        /** Unsettled blocks plus one until every READ of the call has been started. */
        final AtomicInteger open;

        Call(String host, int port, String execId, String[] blockIds, BlockFetchingListener listener,
             DownloadFileManager downloadFileManager) {
            this.host = host;
            this.port = port;
            this.execId = execId;
            this.blockIds = blockIds.clone();
            this.listener = listener;
            this.downloadFileManager = downloadFileManager;
            this.states = new AtomicIntegerArray(blockIds.length);
            this.open = new AtomicInteger(blockIds.length + 1);
        }

        void succeed(int index, RdmaManagedBuffer buffer) {
            if (!states.compareAndSet(index, 0, 1)) {
                buffer.release();
                return;
            }
            try {
                listener.onBlockFetchSuccess(blockIds[index], buffer);
            } catch (RuntimeException e) {
                LOG.warn("the fetch listener failed on block {}", blockIds[index], e);
            } finally {
                buffer.release(); // ours; the listener retained what it keeps
                settled();
            }
        }

        void fail(int index, String reason, boolean error) {
            if (!states.compareAndSet(index, 0, 2)) {
                return;
            }
            metrics.fallbackFetch().inc();
            LOG.debug("shuffle {}: block {} from executor {} goes through Spark's block transfer: {}", shuffleId,
                    blockIds[index], execId, reason);
            if (reported.add(execId)) {
                String message = "shuffle {}: blocks from executor {} go through Spark's block transfer, the first because {}";
                if (error) {
                    LOG.warn(message, shuffleId, execId, reason);
                } else {
                    LOG.info(message, shuffleId, execId, reason);
                }
            }
            settled();
        }

        void failAll(String reason, boolean error) {
            for (int i = 0; i < blockIds.length; i++) {
                fail(i, reason, error);
            }
            armed();
        }

        /** Every READ of the call has been started (or the call failed as a whole). */
        void armed() {
            settled();
        }

        private void settled() {
            if (open.decrementAndGet() == 0) {
                List<String> failed = new ArrayList<>();
                for (int i = 0; i < blockIds.length; i++) {
                    if (states.get(i) == 2) {
                        failed.add(blockIds[i]);
                    }
                }
                if (!failed.isEmpty()) {
                    run(() -> fallBack(failed.toArray(String[]::new)));
                }
            }
        }

        private void fallBack(String[] failed) {
            try {
                fallback.fetchBlocks(host, port, execId, failed, listener, downloadFileManager);
            } catch (RuntimeException e) {
                // Spark's client reports its own failures to the listener; this one did not get that far.
                LOG.warn("Spark's block transfer refused {} blocks from {}", failed.length, execId, e);
                for (String id : failed) {
                    listener.onBlockFetchFailure(id, e);
                }
            }
        }
    }

    // ---------------------------------------------------------------- where a READ lands

    private interface Landing {
        MemoryRegion region();

        int offset();

        /** The landed segment: {@code length} bytes from the landing's start. */
        ByteBuffer view(int length);

        /** Gives the memory back; only the first call counts. */
        void free();
    }

    /** A slice of the executor's pool. */
    private static final class PooledLanding implements Landing {
        private final RegisteredBuffer buffer;
        private final AtomicBoolean freed = new AtomicBoolean();

        PooledLanding(RegisteredBuffer buffer) {
            this.buffer = buffer;
        }

        @Override
        public MemoryRegion region() {
            return buffer.region();
        }

        @Override
        public int offset() {
            return buffer.offset();
        }

        @Override
        public ByteBuffer view(int length) {
            return buffer.buffer().duplicate().limit(length).position(0).slice();
        }

        @Override
        public void free() {
            if (freed.compareAndSet(false, true)) {
                buffer.close();
            }
        }
    }

    /** A buffer of its own for a block over the pool's largest slice, registered as a READ destination needs (LOCAL_WRITE). */
    private static final class DedicatedLanding implements Landing {
        private final MemoryRegion region;
        private final AtomicBoolean freed = new AtomicBoolean();

        DedicatedLanding(Node node, int length) throws Exception {
            ByteBuffer memory = DirectMemory.pageAligned(length);
            this.region = node.register(memory, Set.of(Access.LOCAL_WRITE));
        }

        @Override
        public MemoryRegion region() {
            return region;
        }

        @Override
        public int offset() {
            return 0;
        }

        @Override
        public ByteBuffer view(int length) {
            return region.buffer().limit(length).slice();
        }

        @Override
        public void free() {
            if (freed.compareAndSet(false, true)) {
                region.deregister(); // the memory goes with the last view of it
            }
        }
    }

    // ---------------------------------------------------------------- delegated to Spark's client

    @Override
    public Cause diagnoseCorruption(String host, int port, String execId, int shuffleId, long mapId, int reduceId,
            long checksum, String algorithm) {
        return fallback.diagnoseCorruption(host, port, execId, shuffleId, mapId, reduceId, checksum, algorithm);
    }

    @Override
    public void getHostLocalDirs(String host, int port, String[] execIds,
            CompletableFuture<Map<String, String[]>> hostLocalDirsCompletable) {
        fallback.getHostLocalDirs(host, port, execIds, hostLocalDirsCompletable);
    }

    @Override
    public MetricSet shuffleMetrics() {
        return fallback.shuffleMetrics();
    }

    @Override
    public void setAppAttemptId(String appAttemptId) {
        fallback.setAppAttemptId(appAttemptId);
    }

    @Override
    public String getAppAttemptId() {
        return fallback.getAppAttemptId();
    }

    @Override
    public void pushBlocks(String host, int port, String[] blockIds, ManagedBuffer[] buffers, BlockPushingListener listener) {
        fallback.pushBlocks(host, port, blockIds, buffers, listener);
    }

    @Override
    public void finalizeShuffleMerge(String host, int port, int shuffleId, int shuffleMergeId,
            MergeFinalizerListener listener) {
        fallback.finalizeShuffleMerge(host, port, shuffleId, shuffleMergeId, listener);
    }

    @Override
    public void getMergedBlockMeta(String host, int port, int shuffleId, int shuffleMergeId, int reduceId,
            MergedBlocksMetaListener listener) {
        fallback.getMergedBlockMeta(host, port, shuffleId, shuffleMergeId, reduceId, listener);
    }

    @Override
    public boolean removeShuffleMerge(String host, int port, int shuffleId, int shuffleMergeId) {
        return fallback.removeShuffleMerge(host, port, shuffleId, shuffleMergeId);
    }

    /**
     * Ends this task's use of RDMA: work already queued (READs to start, fallbacks to call) still
     * runs, then the worker thread ends; later calls go straight to Spark's client. The shared
     * Spark client, policy client, pool and node stay open.
     */
    @Override
    public void close() throws IOException {
        closed = true;
        worker.shutdown();
    }

    @Override
    public String toString() {
        return "RdmaBlockStoreClient[shuffle " + shuffleId + ", executors " + blocksByExecutor.keySet() + "]";
    }
}

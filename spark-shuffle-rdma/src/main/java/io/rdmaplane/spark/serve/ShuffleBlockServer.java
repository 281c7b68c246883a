package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.PolicyServer;
import io.rdmaplane.rdma.policy.ReadGrants;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.policy.ServerLimits;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.spark.SparkRdmaConfig;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The serving side of one executor: a {@link PolicyServer} on its data node that answers LOCATE
 * requests from a {@link MapOutputStore}, granting each located block's payload bytes (not the rest of
 * its map output) to the asking peer's session and handing out the grant's key (on tcp a key of its own
 * for that range and the peer's data channel; on verbs a registration of the range in the peer's key
 * domain, whose protection domain its data QPs are in, {@link MapOutputStore#keyBinding}). Each block is answered with its Arrow
 * framing and the remote block of its payload (one READ), or, below the inline threshold, as the
 * whole block in the answer (no READ), within {@link LocateProtocol#MAX_RESPONSE_BYTES}: blocks
 * beyond that are DEFERRED, and the reader asks again. A malformed request
 * (anything {@link LocateProtocol#decodeRequest} refuses) is answered with the policy layer's
 * ERROR frame naming the field; the channel and the server go on.
 */
public final class ShuffleBlockServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ShuffleBlockServer.class);

    private final Node node;
    private final MapOutputStore store;
    private final PolicyServer server;
    private final int inlineThreshold;
    private final int responseBudget;
    private volatile Runnable locateListener;

    /** A server with the {@linkplain ServerLimits#defaults() default limits} and inline threshold. */
    public ShuffleBlockServer(Node node, PolicyOptions options, PolicyMetrics metrics, MapOutputStore store) {
        this(node, options, ServerLimits.defaults(), metrics, store, DEFAULT_INLINE_THRESHOLD, LocateProtocol.MAX_RESPONSE_BYTES);
    }

    /** The default of {@code spark.shuffle.rdma.locate.inlineThreshold}. */
    public static final int DEFAULT_INLINE_THRESHOLD = SparkRdmaConfig.LOCATE_INLINE_THRESHOLD.defaultValue().intValue();

    /**
     * @param inlineThreshold blocks (framed) of fewer bytes than this travel inline in the answer; 0: none
     * @param responseBudget  the most bytes of one answer (at most {@link LocateProtocol#MAX_RESPONSE_BYTES},
     *                        and below the control message size)
     */
    public ShuffleBlockServer(Node node, PolicyOptions options, ServerLimits limits, PolicyMetrics metrics,
                              MapOutputStore store, int inlineThreshold, int responseBudget) {
        this.node = Objects.requireNonNull(node, "node");
        this.store = Objects.requireNonNull(store, "store");
        if (inlineThreshold < 0 || inlineThreshold > LocateProtocol.MAX_INLINE_BYTES) {
            throw new IllegalArgumentException("inlineThreshold must be 0.." + LocateProtocol.MAX_INLINE_BYTES + ", was "
                    + inlineThreshold);
        }
        if (responseBudget < 64 || responseBudget > LocateProtocol.MAX_RESPONSE_BYTES) {
            throw new IllegalArgumentException("responseBudget must be 64.." + LocateProtocol.MAX_RESPONSE_BYTES + ", was "
                    + responseBudget);
        }
        this.inlineThreshold = inlineThreshold;
        this.responseBudget = responseBudget;
        this.server = new PolicyServer(node, options, limits, metrics, this::locate);
    }

    /** Listens on the node and marks READY (the store registers each map output before it is locatable). */
    public ShuffleBlockServer start() throws TransportException {
        server.start();
        server.markReady();
        LOG.info("RDMA shuffle block server listening on {} ({}); READ keys: {}", node.localAddress(), node.providerName(),
                store.keyBinding());
        return this;
    }

    /** What {@code peer} may READ here beyond what LOCATE granted it (descriptors handed out by other means). */
    public ReadGrants grants(UUID peer) {
        return server.grants(peer);
    }

    /** What LOCATE granted {@code peer} in its live session (null without one). */
    public ReadGrants grantsInSession(UUID peer) {
        return server.grantsInSession(peer);
    }

    /** Where reducers reach this server (valid after {@link #start()}). */
    public InetSocketAddress address() {
        return node.localAddress();
    }

    /**
     * Runs after every LOCATE answered (tests count them): on the transport thread, once the
     * answer is computed and just before the policy layer sends it; it must be quick. An
     * exception it throws is logged; the answer still goes out.
     */
    public void setLocateListener(Runnable listener) {
        this.locateListener = listener;
    }

    private ByteBuffer locate(PolicyServer.PeerIdentity peer, ByteBuffer request) {
        LocateProtocol.Request decoded = LocateProtocol.decodeRequest(request); // IllegalArgumentException → ERROR answer
        List<LocateProtocol.BlockRef> refs = decoded.blocks();
        MapOutputPublisher.Block[] blocks = new MapOutputPublisher.Block[refs.size()];
        List<LocateProtocol.Location> answer = new ArrayList<>(refs.size());
        for (int i = 0; i < blocks.length; i++) {
            LocateProtocol.BlockRef ref = refs.get(i);
            blocks[i] = store.block(decoded.shuffleId(), ref.mapId(), ref.reduceId());
            answer.add(blocks[i] == null ? LocateProtocol.NOT_SERVED
                    : new LocateProtocol.Read(blocks[i].header().duplicate(), blocks[i].remote(), blocks[i].trailer().duplicate()));
        }
        // Every block's READ entry if they fit, the last ones DEFERRED if not; then, with the room
        // left, small blocks inline instead, in order.
        int bytes = LocateProtocol.responseBytes(answer);
        for (int i = answer.size() - 1; i >= 0 && bytes > responseBudget; i--) {
            bytes -= LocateProtocol.entryBytes(answer.get(i)) - 1;
            answer.set(i, LocateProtocol.DEFERRED);
        }
        for (int i = 0; i < answer.size(); i++) {
            if (answer.get(i) instanceof LocateProtocol.Read read && blocks[i].length() < inlineThreshold) {
                int extra = 1 + 4 + blocks[i].length() - LocateProtocol.entryBytes(read);
                if (bytes + extra <= responseBudget) {
                    answer.set(i, new LocateProtocol.Inline(inline(blocks[i])));
                    bytes += extra;
                }
            }
        }
        for (int i = 0; i < answer.size(); i++) {
            if (answer.get(i) instanceof LocateProtocol.Read read) {
                // The asking peer READs this block's bytes, nothing else of the map output, and no other peer by
                // their key: the key handed out is the grant's, over the block's payload range only, bound to this
                // peer's data channels (tcp: a key of its own, checked per READ; verbs: a registration of the
                // range in the peer's key domain, copied and mapped outputs alike). A grant goes when its region is deregistered (the shuffle unregistered), not only
                // when the peer is forgotten.
                RemoteBlock p = read.payload();
                int key;
                try {
                    key = peer.grant(blocks[i].region(), p.address(), p.length(), Long.MAX_VALUE);
                } catch (IllegalStateException e) { // no key to make (e.g. the device's windows ran out)
                    LOG.warn("shuffle {}: block {} not served over RDMA to {}: {}", decoded.shuffleId(), refs.get(i),
                            peer.address(), e.getMessage());
                    answer.set(i, LocateProtocol.NOT_SERVED); // the reader fetches it from Spark's own server
                    continue;
                }
                answer.set(i, new LocateProtocol.Read(read.header(), new RemoteBlock(p.address(), key, p.length(), p.crc32c()),
                        read.trailer()));
            }
        }
        ByteBuffer encoded = LocateProtocol.encodeResponse(answer);
        Runnable listener = locateListener;
        if (listener != null) {
            try {
                listener.run();
            } catch (RuntimeException e) {
                LOG.warn("the LOCATE listener failed", e);
            }
        }
        return encoded;
    }

    /** The whole Arrow block, copied out of its framing and the memory under its payload. */
    private static ByteBuffer inline(MapOutputPublisher.Block block) {
        ByteBuffer bytes = ByteBuffer.allocate(block.length());
        bytes.put(block.header().duplicate()).put(block.remoteBytes().duplicate()).put(block.trailer().duplicate());
        return bytes.flip();
    }

    /** Stops answering (the policy server's timers and per-peer scopes). The node and the store stay open: their owner closes them. */
    @Override
    public void close() {
        server.close();
    }
}

package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.PolicyServer;
import io.rdmaplane.rdma.policy.ReadGrants;
import io.rdmaplane.rdma.policy.RemoteBlock;
import io.rdmaplane.rdma.policy.ServerLimits;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The serving side of one executor: a {@link PolicyServer} on its data node that answers LOCATE
 * requests from a {@link MapOutputStore}, granting the located regions to the asking peer (the
 * provider serves a peer's READs of its grants only). A malformed request
 * (anything {@link LocateProtocol#decodeRequest} refuses) is answered with the policy layer's
 * ERROR frame naming the field; the channel and the server go on.
 */
public final class ShuffleBlockServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ShuffleBlockServer.class);

    private final Node node;
    private final MapOutputStore store;
    private final PolicyServer server;
    private volatile Runnable locateListener;

    /** A server with the {@linkplain ServerLimits#defaults() default limits}. */
    public ShuffleBlockServer(Node node, PolicyOptions options, PolicyMetrics metrics, MapOutputStore store) {
        this(node, options, ServerLimits.defaults(), metrics, store);
    }

    public ShuffleBlockServer(Node node, PolicyOptions options, ServerLimits limits, PolicyMetrics metrics,
                              MapOutputStore store) {
        this.node = Objects.requireNonNull(node, "node");
        this.store = Objects.requireNonNull(store, "store");
        this.server = new PolicyServer(node, options, limits, metrics, this::locate);
    }

    /** Listens on the node and marks READY (the store registers each map output before it is locatable). */
    public ShuffleBlockServer start() throws TransportException {
        server.start();
        server.markReady();
        LOG.info("RDMA shuffle block server listening on {} ({})", node.localAddress(), node.providerName());
        return this;
    }

    /** What {@code peer} may READ here beyond what LOCATE granted it (descriptors handed out by other means). */
    public ReadGrants grants(UUID peer) {
        return server.grants(peer);
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
        List<LocateProtocol.BlockRef> blocks = decoded.blocks();
        RemoteBlock[][] located = new RemoteBlock[blocks.size()][];
        for (int i = 0; i < located.length; i++) {
            LocateProtocol.BlockRef block = blocks.get(i);
            located[i] = store.locate(decoded.shuffleId(), block.mapId(), block.reduceId());
            if (located[i] != null) {
                for (RemoteBlock piece : located[i]) {
                    peer.grant(piece.rkey()); // the asking peer READs these, and no other peer by their keys
                }
            }
        }
        ByteBuffer answer = LocateProtocol.encodeResponse(located);
        Runnable listener = locateListener;
        if (listener != null) {
            try {
                listener.run();
            } catch (RuntimeException e) {
                LOG.warn("the LOCATE listener failed", e);
            }
        }
        return answer;
    }

    /** Stops answering (the policy server's timers and per-peer scopes). The node and the store stay open: their owner closes them. */
    @Override
    public void close() {
        server.close();
    }
}

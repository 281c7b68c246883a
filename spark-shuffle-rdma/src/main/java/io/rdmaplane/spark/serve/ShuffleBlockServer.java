package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import java.net.InetSocketAddress;

/** A PolicyServer on the executor's data node answering LOCATE from a {@link MapOutputStore}. */
public final class ShuffleBlockServer implements AutoCloseable {
    public ShuffleBlockServer(Node node, PolicyOptions options, PolicyMetrics metrics, MapOutputStore store) {
        throw new UnsupportedOperationException("not yet");
    }

    /** Listens and marks READY. */
    public ShuffleBlockServer start() throws TransportException {
        throw new UnsupportedOperationException("not yet");
    }

    public InetSocketAddress address() {
        throw new UnsupportedOperationException("not yet");
    }

    /** Runs after every LOCATE answered (the glue's fault hook counts them). */
    public void setLocateListener(Runnable listener) {
        throw new UnsupportedOperationException("not yet");
    }

    @Override
    public void close() {
        throw new UnsupportedOperationException("not yet");
    }
}

package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.TransportProvider;

/**
 * Verbs semantics over TCP sockets: the embedded default where no RDMA device exists.
 * Built on plain NIO rather than Netty so it adds no dependency that could clash with the
 * Netty versions Spark and Hadoop bring, and so a READ payload goes from the socket straight
 * into the caller's registered buffer with no intermediate buffer.
 */
public final class TcpProvider implements TransportProvider {
    public static final TcpProvider INSTANCE = new TcpProvider();

    private TcpProvider() {
    }

    @Override
    public String name() {
        return "tcp";
    }

    @Override
    public boolean isAvailable() {
        return true;
    }

    @Override
    public Throwable unavailabilityCause() {
        return null;
    }

    @Override
    public Node createNode(NodeOptions options) throws TransportException {
        return new TcpNode(options);
    }
}

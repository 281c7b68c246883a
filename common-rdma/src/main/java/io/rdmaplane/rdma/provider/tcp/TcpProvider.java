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
    public static final String NAME = "tcp";
    /** For code that wants tcp itself (tests, the tcp benchmark); the rest selects through {@code Providers}. */
    public static final TcpProvider INSTANCE = new TcpProvider();

    /** Public for {@link java.util.ServiceLoader}; the provider holds no state. */
    public TcpProvider() {
    }

    @Override
    public String name() {
        return NAME;
    }

    /** After verbs: tcp is the fallback that works everywhere. */
    @Override
    public int preference() {
        return 100;
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

package io.rdmaplane.rdma.testing;

import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.tcp.TcpNode;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import java.time.Duration;

/** Transport nodes for tests: the tcp provider on loopback, real sockets and registrations, no RDMA device needed. */
public final class TestNodes {
    /** Long enough for a loaded 2-core build host, short enough that a lost operation fails a test quickly. */
    public static final Duration OPERATION_TIMEOUT = Duration.ofSeconds(2);

    private TestNodes() {
    }

    /** A tcp node bound to an ephemeral loopback port, operations timing out after {@link #OPERATION_TIMEOUT}. */
    public static TcpNode tcp() throws TransportException {
        return (TcpNode) TcpProvider.INSTANCE.createNode(NodeOptions.loopback().withOperationTimeout(OPERATION_TIMEOUT));
    }
}

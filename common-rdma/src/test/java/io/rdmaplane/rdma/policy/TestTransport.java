package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.provider.verbs.VerbsProvider;
import io.rdmaplane.rdma.testing.RdmaVmOnly;
import java.net.InetSocketAddress;
import java.time.Duration;

/**
 * The providers a policy test runs on: tcp on loopback everywhere; verbs over the Soft-RoCE VM's
 * two rxe devices (server on RDMA_VM_ADDR_A, clients on RDMA_VM_ADDR_B), skipped loudly elsewhere.
 */
enum TestTransport {
    TCP {
        @Override
        NodeOptions options(boolean server) {
            return NodeOptions.loopback().withOperationTimeout(Duration.ofSeconds(2));
        }

        @Override
        Node node(boolean server) throws TransportException {
            return TcpProvider.INSTANCE.createNode(options(server));
        }

        @Override
        PolicyOptions policy() {
            return PolicyFixture.fast();
        }
    },
    VERBS {
        @Override
        NodeOptions options(boolean server) {
            String address = System.getenv(server ? "RDMA_VM_ADDR_A" : "RDMA_VM_ADDR_B");
            // The VM's guest is ~25x slower than the host: a generous operation timeout.
            return new NodeOptions(new InetSocketAddress(address, 0), 64 << 10, Duration.ofSeconds(10), 256);
        }

        @Override
        Node node(boolean server) throws TransportException {
            RdmaVmOnly.assumeInVm();
            return VerbsProvider.INSTANCE.createNode(options(server));
        }

        @Override
        PolicyOptions policy() {
            return PolicyFixture.fast().withTimeouts(Duration.ofSeconds(2), Duration.ofSeconds(20), Duration.ofSeconds(5));
        }
    };

    abstract NodeOptions options(boolean server);

    /** A node of this provider (a server's, or a client's); skips the test where the provider cannot run. */
    abstract Node node(boolean server) throws TransportException;

    /** Policy options whose timers suit this provider's test environment. */
    abstract PolicyOptions policy();
}

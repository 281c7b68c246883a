package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.ProviderConformanceSuite;
import io.rdmaplane.rdma.provider.TransportProvider;

/** The conformance suite on the tcp provider, over loopback. */
class TcpConformanceTest extends ProviderConformanceSuite {
    @Override
    protected TransportProvider provider() {
        return TcpProvider.INSTANCE;
    }

    @Override
    protected NodeOptions serverOptions() {
        return NodeOptions.loopback();
    }

    @Override
    protected NodeOptions clientOptions() {
        return NodeOptions.loopback();
    }

    /** The socket's own words. */
    @Override
    protected String nobodyListensWords() {
        return "Connection refused";
    }
}

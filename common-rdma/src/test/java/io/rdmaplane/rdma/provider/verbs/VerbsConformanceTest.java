package io.rdmaplane.rdma.provider.verbs;

import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.ProviderConformanceSuite;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.rdma.testing.RdmaVmOnly;
import java.net.InetSocketAddress;
import java.time.Duration;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The conformance suite on the verbs provider, over real verbs: Soft-RoCE (rxe) in the QEMU VM
 * of integration-tests/vm, where RDMA_VM=1 and two rxe devices carry RDMA_VM_ADDR_A (server)
 * and RDMA_VM_ADDR_B (client). CI runs it there with integration-tests/vm/verbs-conformance.sh;
 * anywhere else every test is skipped, and says so.
 */
@ExtendWith(RdmaVmOnly.class)
class VerbsConformanceTest extends ProviderConformanceSuite {
    /** The VM's guest is ~25x slower than the host: a generous operation timeout. */
    private static final Duration TIMEOUT = Duration.ofSeconds(10);

    @Override
    protected TransportProvider provider() {
        return VerbsProvider.INSTANCE;
    }

    @Override
    protected NodeOptions serverOptions() {
        return options(System.getenv("RDMA_VM_ADDR_A"));
    }

    @Override
    protected NodeOptions clientOptions() {
        return options(System.getenv("RDMA_VM_ADDR_B"));
    }

    /** RDMA-CM's reject reason 8 (invalid service id), not only REJECTED. */
    @Override
    protected String nobodyListensWords() {
        return "no listener on that address and port";
    }

    /**
     * Soft-RoCE checks a memory window's READ against the window's MR, not the window (seen on 7.2: the
     * MR's first bytes, outside the window, were served with the window's rkey): not asserted here.
     */
    @Override
    protected boolean enforcesKeyRanges() {
        return false;
    }

    /** 2 MiB of backlog: rxe moves a few MB/s under TCG, and the operation timeout is 10 s. */
    @Override
    protected int backlogReadBytes() {
        return 32 << 10;
    }

    static NodeOptions options(String address) {
        return new NodeOptions(new InetSocketAddress(address, 0), 64 << 10, TIMEOUT, 256);
    }
}

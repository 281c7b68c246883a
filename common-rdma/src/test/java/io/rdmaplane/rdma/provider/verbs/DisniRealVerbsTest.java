package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.rdmaplane.rdma.testing.RdmaVmOnly;
import org.junit.jupiter.api.Test;

/**
 * Real RDMA verbs through DiSNI and the project's native library. Runs only inside the
 * Soft-RoCE VM (integration-tests/vm/run.sh sets RDMA_VM=1 and the two device addresses);
 * elsewhere it is skipped, saying so loudly.
 */
class DisniRealVerbsTest {

    @Test
    void rdmaReadBetweenTwoSoftRoceDevices() throws Exception {
        RdmaVmOnly.assumeInVm();
        String a = System.getenv("RDMA_VM_ADDR_A");
        String b = System.getenv("RDMA_VM_ADDR_B");
        assertNotNull(a, "RDMA_VM_ADDR_A");
        assertNotNull(b, "RDMA_VM_ADDR_B");
        Object report = DisniTestSupport.call("io.rdmaplane.rdma.provider.verbs.impl.DisniReadCheck", "run", a, b);
        System.out.println("[disni] real verbs between " + a + " and " + b + ": " + report);
    }

    @Test
    void disniEndpointsReadThroughTheirCmAndCqProcessors() throws Exception {
        RdmaVmOnly.assumeInVm();
        String b = System.getenv("RDMA_VM_ADDR_B");
        assertNotNull(b, "RDMA_VM_ADDR_B");
        Object report = DisniTestSupport.call("io.rdmaplane.rdma.provider.verbs.impl.DisniEndpointCheck", "run", b);
        System.out.println("[disni] " + report);
    }
}

package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;

/**
 * Real RDMA verbs through DiSNI and the project's native library. Runs only inside the
 * Soft-RoCE VM (integration-tests/vm/run.sh sets RDMA_VM=1 and the two device addresses);
 * elsewhere it is skipped, saying so loudly.
 */
class DisniRealVerbsTest {

    @Test
    void rdmaReadBetweenTwoSoftRoceDevices() throws Exception {
        assumeInVm("rdmaReadBetweenTwoSoftRoceDevices");
        String a = System.getenv("RDMA_VM_ADDR_A");
        String b = System.getenv("RDMA_VM_ADDR_B");
        assertNotNull(a, "RDMA_VM_ADDR_A");
        assertNotNull(b, "RDMA_VM_ADDR_B");
        Object report = DisniTestSupport.call("io.rdmaplane.rdma.provider.verbs.impl.DisniReadCheck", "run", a, b);
        System.out.println("[disni] real verbs between " + a + " and " + b + ": " + report);
    }

    @Test
    void disniEndpointsReadThroughTheirCmAndCqProcessors() throws Exception {
        assumeInVm("disniEndpointsReadThroughTheirCmAndCqProcessors");
        String b = System.getenv("RDMA_VM_ADDR_B");
        assertNotNull(b, "RDMA_VM_ADDR_B");
        Object report = DisniTestSupport.call("io.rdmaplane.rdma.provider.verbs.impl.DisniEndpointCheck", "run", b);
        System.out.println("[disni] " + report);
    }

    private static void assumeInVm(String test) {
        boolean inVm = "1".equals(System.getenv("RDMA_VM"));
        if (!inVm) {
            System.out.println("[disni] SKIPPED DisniRealVerbsTest." + test + ": needs real RDMA devices; run it in the"
                    + " Soft-RoCE VM (integration-tests/vm/run.sh sets RDMA_VM=1)");
        }
        assumeTrue(inVm, "RDMA_VM is not 1: real-verbs test skipped (run it inside the Soft-RoCE VM)");
    }
}

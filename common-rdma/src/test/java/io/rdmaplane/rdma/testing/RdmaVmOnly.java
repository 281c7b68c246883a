package io.rdmaplane.rdma.testing;

import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * {@code @ExtendWith(RdmaVmOnly.class)}: the class's tests run only inside the Soft-RoCE VM
 * (integration-tests/vm/run.sh, which CI runs, sets {@code RDMA_VM=1} and the addresses of its two
 * rxe devices, {@code RDMA_VM_ADDR_A} and {@code RDMA_VM_ADDR_B}); anywhere else each test is
 * skipped through {@link Skip}, saying so on stderr. A test that needs the VM for one method only
 * calls {@link #assumeInVm()}.
 */
public final class RdmaVmOnly implements BeforeEachCallback {
    static final String REASON = "needs RDMA devices; runs in the Soft-RoCE VM (integration-tests/vm, which CI runs),"
            + " and RDMA_VM=1 with RDMA_VM_ADDR_A and RDMA_VM_ADDR_B is not set here";

    /** Whether this JVM runs inside the Soft-RoCE VM, with the addresses of its two rxe devices. */
    public static boolean inVm() {
        return "1".equals(System.getenv("RDMA_VM")) && System.getenv("RDMA_VM_ADDR_A") != null
                && System.getenv("RDMA_VM_ADDR_B") != null;
    }

    /** Skips the calling test outside the VM. */
    public static void assumeInVm() {
        Skip.unless(inVm(), REASON);
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        if (!inVm()) {
            Skip.skip(context.getRequiredTestClass().getSimpleName() + "." + context.getRequiredTestMethod().getName(), REASON);
        }
    }
}

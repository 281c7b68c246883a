package io.rdmaplane.rdma.provider.verbs;

import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Runs a test class only inside the Soft-RoCE VM (RDMA_VM=1, see integration-tests/vm); skips
 * it elsewhere and says so on stderr, where a build log shows it.
 */
final class RdmaVmOnly implements ExecutionCondition {
    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        if ("1".equals(System.getenv("RDMA_VM"))) {
            return ConditionEvaluationResult.enabled("RDMA_VM=1: running on the Soft-RoCE devices of the VM");
        }
        String why = "SKIPPED: needs RDMA devices; runs in the Soft-RoCE VM (integration-tests/vm/verbs-conformance.sh, "
                + "which CI runs), and RDMA_VM=1 is not set here";
        if (context.getTestMethod().isEmpty()) {
            System.err.println(context.getDisplayName() + " " + why);
        }
        return ConditionEvaluationResult.disabled(why);
    }
}

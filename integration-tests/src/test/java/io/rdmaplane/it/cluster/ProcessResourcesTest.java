package io.rdmaplane.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The ring's leak rule for rdma-* threads: a process may grow to what a warmed process of its role held, not beyond. */
class ProcessResourcesTest {
    private static ProcessResources process(String name, int rdmaThreads) {
        return new ProcessResources(name, 42, 50, 40, 1, 60, rdmaThreads, 0, 0);
    }

    @Test
    void aColdProcessMayGrowToWhatAWarmedOneOfItsRoleHeldButNoFurther() {
        ProcessResources before = process("datanode 1", 3);
        assertEquals("datanode", before.role());
        assertEquals("", process("datanode 1", 5).leaksAgainst(before, 5), "warm-up to a warmed DataNode's threads");
        String leak = process("datanode 1", 6).leaksAgainst(before, 5);
        assertTrue(leak.startsWith("rdma-* threads 6>5"), leak);
        assertTrue(process("datanode 1", 4).leaksAgainst(before).startsWith("rdma-* threads 4>3"),
                "without a warmed peer the process's own baseline is the bound");
    }
}

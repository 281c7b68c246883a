package io.rdmaplane.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The ring's leak rules: what a process may grow to after a fault (rdma-* threads, transport sockets by peer) and no further. */
class ProcessResourcesTest {
    private static ProcessResources process(String name, int rdmaThreads) {
        return new ProcessResources(name, 42, 50, 40, 1, Map.of("to 10.77.0.1:7077", 1), 0, 60, rdmaThreads, 0, 0);
    }

    private static ProcessResources sockets(Map<String, Integer> byPeer, int halfClosed) {
        int total = byPeer.values().stream().mapToInt(Integer::intValue).sum();
        return new ProcessResources("executor 0", 42, 50, 40, total, byPeer, halfClosed, 60, 4, 0, 0);
    }

    @Test
    void aColdProcessMayGrowToWhatAWarmedOneOfItsRoleHeldButNoFurther() {
        ProcessResources before = process("datanode 1", 3);
        assertEquals("datanode", before.role());
        assertEquals("", process("datanode 1", 5).leaksAgainst(before, 5, 0), "warm-up to a warmed DataNode's threads");
        String leak = process("datanode 1", 6).leaksAgainst(before, 5, 0);
        assertTrue(leak.startsWith("rdma-* threads 6>5"), leak);
        assertTrue(process("datanode 1", 4).leaksAgainst(before, 0, 0).startsWith("rdma-* threads 4>3"),
                "without a warmed peer the process's own baseline is the bound");
    }

    @Test
    void channelsToANewPeerMayReachAWarmedGroupButAPeerHeldAtTheBaselineMayNotGrow() {
        ProcessResources before = sockets(Map.of("to 10.77.0.1:7077", 1, "to 10.77.0.3:7337", 2), 0);
        ProcessResources otherDirection = sockets(Map.of("to 10.77.0.1:7077", 1, "to 10.77.0.3:7337", 2, "from 10.77.0.3 to :7337", 2), 0);
        assertEquals("", otherDirection.leaksAgainst(before, 0, 2), "the first fetch from a peer in the other direction");
        String tooMany = sockets(Map.of("to 10.77.0.1:7077", 1, "to 10.77.0.3:7337", 2, "from 10.77.0.3 to :7337", 3), 0)
                .leaksAgainst(before, 0, 2);
        assertEquals("transport sockets from 10.77.0.3 to :7337 3>2 (a new peer)", tooMany);
        String kept = sockets(Map.of("to 10.77.0.1:7077", 1, "to 10.77.0.3:7337", 4), 0).leaksAgainst(before, 0, 4);
        assertEquals("transport sockets to 10.77.0.3:7337 4>2", kept,
                "old channels kept beside the new ones to a peer replaced at the same address, whatever the warmed group");
        String halfClosed = sockets(Map.of("to 10.77.0.1:7077", 1, "to 10.77.0.3:7337", 2), 2).leaksAgainst(before, 0, 2);
        assertEquals("half-closed transport sockets 2>0", halfClosed);
    }

    @Test
    void aSocketBelongsToTheServerEndOfItsConnection() {
        Set<Integer> ports = Set.of(7337);
        // net/tcp keeps an IPv4 address little-endian: 0300A8C0 is 192.168.0.3; 1CA9 is 7337
        assertEquals("from 192.168.0.3 to :7337", ProcessResources.peer("0200A8C0:1CA9", "0300A8C0:D431", ports));
        assertEquals("to 192.168.0.3:7337", ProcessResources.peer("0200A8C0:D431", "0300A8C0:1CA9", ports));
        assertNull(ProcessResources.peer("0200A8C0:D431", "0300A8C0:1F90", ports), "a socket of another port is not the transport's");
    }
}

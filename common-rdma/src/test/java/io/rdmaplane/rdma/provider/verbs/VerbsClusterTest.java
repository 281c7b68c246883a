package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.RdmaVmOnly;
import io.rdmaplane.rdma.testing.Skip;
import io.rdmaplane.rdma.testing.VmHostJvm;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The verbs provider between hosts of the VM's cluster (run.sh --hosts 3: network namespaces
 * host1..host3 on a bridge, each with its own address and rxe device; every rxe device is visible
 * in every namespace). Each host's process is a JVM of its own ({@link ClusterPeer}) started in its
 * namespace with {@code ip netns exec}. Proves a READ's bytes arrive intact between two namespaces,
 * that each process used the device of its own address (the kernel's packet counters of the
 * others, including the initial namespace's rxe0/rxe1, stay still), and that a process cannot
 * open another host's device by naming that host's address. Skipped, saying so, without a cluster.
 */
@ExtendWith(RdmaVmOnly.class)
class VerbsClusterTest {
    private static final Duration WAIT = Duration.ofSeconds(180);
    private static final String[] COUNTERS = {"sent_pkts", "rcvd_pkts"};
    private final List<VmHostJvm> processes = new ArrayList<>();

    @BeforeEach
    void needsACluster() {
        String hosts = System.getenv("RDMA_VM_HOSTS");
        Skip.unless(hosts != null && Integer.parseInt(hosts) >= 3,
                "needs the VM's cluster of at least 3 hosts (integration-tests/vm/run.sh --hosts 3), RDMA_VM_HOSTS is " + hosts);
    }

    @AfterEach
    void stopProcesses() throws InterruptedException {
        for (VmHostJvm p : processes) {
            p.close();
        }
    }

    @Test
    void aReadBetweenTwoHostsCarriesTheBytesOverTheirOwnDevicesOnly() throws Exception {
        int size = 1 << 20;
        long seed = 12;
        Map<String, Long> before = counters();
        VmHostJvm server = start(1, "serve", host(1, "ADDR"), Long.toString(seed), Integer.toString(size));
        String[] ready = server.awaitLine("READY ").split(" ");
        VmHostJvm reader = start(2, "read", host(2, "ADDR"), host(1, "ADDR"), ready[1], ready[2], ready[3],
                Integer.toString(size), Long.toString(seed));
        assertEquals(0, reader.exitCode(), reader::describe);
        assertTrue(reader.lines.contains("READ-OK " + size), reader::describe);
        Map<String, Long> moved = delta(before, counters());

        // host1 sent the READ responses (at least one packet per RoCE MTU of 1024 bytes), host2 got them.
        String dev1 = host(1, "DEV");
        String dev2 = host(2, "DEV");
        assertTrue(moved.get(dev1 + "/sent_pkts") >= size / 4096, () -> "packets of " + dev1 + ": " + moved);
        assertTrue(moved.get(dev2 + "/rcvd_pkts") >= size / 4096, () -> "packets of " + dev2 + ": " + moved);
        // No other device, visible as they all are, carried any of it.
        moved.forEach((counter, change) -> {
            if (!counter.startsWith(dev1 + "/") && !counter.startsWith(dev2 + "/")) {
                assertEquals(0L, change, () -> counter + " moved, but only " + dev1 + " and " + dev2 + " may: " + moved);
            }
        });
    }

    @Test
    void aProcessCannotOpenAnotherHostsDeviceByItsAddress() throws Exception {
        // host3 names host1's address: rxe-host1 is visible in host3's namespace, but RDMA-CM binds
        // only addresses of the caller's namespace, so the node refuses to open any device.
        String foreign = host(1, "ADDR");
        VmHostJvm intruder = start(3, "read", foreign, host(2, "ADDR"), "1", "0", "0", "4096", "1");
        assertEquals(2, intruder.exitCode(), intruder::describe);
        String error = intruder.lines.stream().filter(l -> l.startsWith("ERROR ")).findFirst().orElse("");
        assertTrue(error.contains("no RDMA device serves " + foreign), intruder::describe);
    }

    private static String host(int index, String what) {
        return VmHostJvm.host(index, what);
    }

    /** The packet counters of every rxe device, as the kernel keeps them. */
    private static Map<String, Long> counters() throws IOException {
        Map<String, Long> all = new TreeMap<>();
        Path root = Path.of("/sys/class/infiniband");
        try (var devices = Files.list(root)) {
            for (Path dev : devices.toList()) {
                for (String c : COUNTERS) {
                    Path file = dev.resolve("ports/1/hw_counters/" + c);
                    all.put(dev.getFileName() + "/" + c, Long.parseLong(Files.readString(file).trim()));
                }
            }
        }
        return all;
    }

    private static Map<String, Long> delta(Map<String, Long> before, Map<String, Long> after) {
        Map<String, Long> moved = new TreeMap<>();
        after.forEach((k, v) -> moved.put(k, v - before.getOrDefault(k, 0L)));
        return moved;
    }

    /** A ClusterPeer JVM in host {@code index}'s namespace. */
    private VmHostJvm start(int index, String... args) throws IOException {
        VmHostJvm peer = VmHostJvm.start(index, ClusterPeer.class, WAIT, args);
        processes.add(peer);
        return peer;
    }
}

package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.Polling;
import io.rdmaplane.rdma.testing.RdmaVmOnly;
import io.rdmaplane.rdma.testing.Skip;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
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
    private final List<Process> processes = new ArrayList<>();

    @BeforeEach
    void needsACluster() {
        String hosts = System.getenv("RDMA_VM_HOSTS");
        Skip.unless(hosts != null && Integer.parseInt(hosts) >= 3,
                "needs the VM's cluster of at least 3 hosts (integration-tests/vm/run.sh --hosts 3), RDMA_VM_HOSTS is " + hosts);
    }

    @AfterEach
    void stopProcesses() throws InterruptedException {
        for (Process p : processes) {
            p.destroy();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
        }
    }

    @Test
    void aReadBetweenTwoHostsCarriesTheBytesOverTheirOwnDevicesOnly() throws Exception {
        int size = 1 << 20;
        long seed = 12;
        Map<String, Long> before = counters();
        Peer server = start(1, "serve", host(1, "ADDR"), Long.toString(seed), Integer.toString(size));
        String[] ready = server.awaitLine("READY ").split(" ");
        Peer reader = start(2, "read", host(2, "ADDR"), host(1, "ADDR"), ready[1], ready[2], ready[3],
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
        Peer intruder = start(3, "read", foreign, host(2, "ADDR"), "1", "0", "0", "4096", "1");
        assertEquals(2, intruder.exitCode(), intruder::describe);
        String error = intruder.lines.stream().filter(l -> l.startsWith("ERROR ")).findFirst().orElse("");
        assertTrue(error.contains("no RDMA device serves " + foreign), intruder::describe);
    }

    private static String host(int index, String what) {
        String value = System.getenv("RDMA_VM_HOST" + index + "_" + what);
        assertTrue(value != null && !value.isEmpty(), "RDMA_VM_HOST" + index + "_" + what + " is not set (run.sh --hosts)");
        return value;
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

    /** A ClusterPeer JVM in host {@code index}'s namespace, with this JVM's flags and the test class path. */
    private Peer start(int index, String... args) throws IOException {
        String classpath = System.getenv("RDMA_VM_TEST_CLASSPATH");
        if (classpath == null || classpath.isEmpty()) {
            classpath = System.getProperty("java.class.path");
        }
        List<String> command = new ArrayList<>(List.of("ip", "netns", "exec", host(index, "NS"),
                Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        command.addAll(List.of("-cp", classpath, ClusterPeer.class.getName()));
        command.addAll(List.of(args));
        Path err = Files.createTempFile("cluster-peer-host" + index + "-", ".err");
        Process process = new ProcessBuilder(command).redirectError(err.toFile()).start();
        processes.add(process);
        return new Peer("host" + index + " " + String.join(" ", args), process, err);
    }

    /** A started peer: its stdout lines as they come, its stderr in a file. */
    private static final class Peer {
        final String name;
        final Process process;
        final Path stderr;
        final List<String> lines = new CopyOnWriteArrayList<>();

        Peer(String name, Process process, Path stderr) {
            this.name = name;
            this.process = process;
            this.stderr = stderr;
            Thread reader = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = in.readLine()) != null; ) {
                        lines.add(line);
                    }
                } catch (IOException e) {
                    lines.add("(stdout unreadable: " + e + ")");
                }
            }, "cluster-peer-stdout");
            reader.setDaemon(true);
            reader.start();
        }

        String awaitLine(String prefix) {
            return Polling.waitFor(() -> {
                for (String l : lines) {
                    if (l.startsWith(prefix)) {
                        return l;
                    }
                }
                if (!process.isAlive()) {
                    throw new AssertionError(name + " ended before printing '" + prefix + "': " + describe());
                }
                return null;
            }, WAIT, () -> "'" + prefix + "' from " + describe());
        }

        int exitCode() throws InterruptedException {
            Polling.waitUntil(() -> !process.isAlive(), WAIT, () -> name + " to finish: " + describe());
            return process.exitValue();
        }

        String describe() {
            String tail;
            try {
                List<String> err = Files.readAllLines(stderr);
                tail = String.join("\n  ", err.subList(Math.max(0, err.size() - 30), err.size()));
            } catch (IOException e) {
                tail = e.toString();
            }
            return name + " (" + (process.isAlive() ? "running" : "exit " + process.exitValue()) + "), stdout " + lines
                    + ", stderr's last lines:\n  " + tail;
        }
    }
}

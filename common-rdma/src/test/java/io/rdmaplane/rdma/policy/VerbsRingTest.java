package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.RdmaVmOnly;
import io.rdmaplane.rdma.testing.Skip;
import io.rdmaplane.rdma.testing.VmHostJvm;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The VM ring: link faults between two hosts of the VM's cluster (run.sh --hosts 2 or more) under
 * in-flight verbs READs through the policy layer. host1 serves {@value #BLOCKS} blocks ({@link RingPeer}
 * serve: RDMA and a TCP fallback path), host2 reads them all once per round ({@link RingPeer} read);
 * the faults act on host1's link: its bridge port ({@code RDMA_VM_HOST1_PORT}) down and up, and
 * {@code tc netem} (loss, delay and reordering; bit flips) on both ends of it; both hosts' ports at once (a switch
 * flap); host1's JVM stopped (SIGSTOP) and replaced (SIGKILL, then a new process at the same address and ports)
 * under a reader holding its descriptors. The cuts and the stop begin before their round posts its READs
 * ({@link #roundInside}), so READs are in flight through them on a fast machine as on a loaded one. Every round must deliver every block
 * exactly once with the seed's bytes; the report prints a table (recovery, reconnects, fallbacks, lost, duplicated).
 * Skipped, saying so, without a cluster.
 */
@ExtendWith(RdmaVmOnly.class)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class VerbsRingTest {
    private static final Duration WAIT = Duration.ofSeconds(420);
    static final int BLOCKS = 24;
    private static final int SIZE = 256 << 10;
    private static final long SEED = 14;
    private static final String NETEM = "delay 5ms 2ms loss 1% reorder 25% 50%";
    private static final String CORRUPT = "corrupt 0.1%";
    private static VmHostJvm server;
    private static VmHostJvm reader;
    /** The baseline round's report: the project's threads and the open files the reader returns to after each fault. */
    private static Map<String, String> baseline;
    /** host1's ports, which a successor at the same address takes over. */
    private static String rdmaPort;
    private static String tcpPort;
    /** Where the current round's lines start in the reader's output. */
    private static int roundStart;
    private static final List<String> TABLE = new ArrayList<>();

    @BeforeAll
    static void start() throws IOException {
        RdmaVmOnly.assumeInVm();
        String hosts = System.getenv("RDMA_VM_HOSTS");
        Skip.unless(hosts != null && Integer.parseInt(hosts) >= 2,
                "needs the VM's cluster of at least 2 hosts (integration-tests/vm/run.sh --hosts 2), RDMA_VM_HOSTS is " + hosts);
        server = startServer("0", "0", 0);
        String[] ready = server.awaitLine("READY ").split(" ");
        rdmaPort = ready[1];
        tcpPort = ready[2];
        reader = VmHostJvm.start(2, RingPeer.class, WAIT, "read", VmHostJvm.host(2, "ADDR"), VmHostJvm.host(1, "ADDR"), rdmaPort, tcpPort,
                String.valueOf(BLOCKS), String.valueOf(SIZE), String.valueOf(SEED));
        reader.awaitLine("READY");
    }

    /** host1's serving JVM: ports "0" for ephemeral ones; its blocks start {@code pad} bytes into its registered memory. */
    private static VmHostJvm startServer(String rdma, String tcp, int pad) throws IOException {
        return VmHostJvm.start(1, RingPeer.class, WAIT, "serve", VmHostJvm.host(1, "ADDR"), String.valueOf(BLOCKS), String.valueOf(SIZE),
                String.valueOf(SEED), rdma, tcp, String.valueOf(pad));
    }

    @AfterAll
    static void stop() throws InterruptedException {
        if (server == null) {
            return; // skipped: nothing started, no link touched
        }
        try {
            shQuiet("ip", "link", "set", VmHostJvm.host(2, "PORT"), "up");
            linkUp();
        } catch (RuntimeException e) {
            System.out.println("vm ring: could not restore host1's link: " + e.getMessage());
        }
        if (!TABLE.isEmpty()) {
            System.out.println("vm ring faults (verbs, " + BLOCKS + " blocks of " + (SIZE >> 10) + " KiB per round):");
            System.out.println(String.format(Locale.ROOT, "%-28s %8s %10s %5s %5s %5s %5s %5s %7s %7s %s", "case", "round ms", "stall ms",
                    "recon", "fb", "tcp", "lost", "dup", "threads", "fds", "completion errors / re-issued"));
            System.out.println("(stall ms: the longest time between two blocks delivered, i.e. the time to recover; fb: the policy"
                    + " layer's fallbacks; tcp: blocks fetched over TCP; threads: all / the project's rdma-*; threads and fds at the round's end,"
                    + " each fault's test then waits for the baseline's and asserts them)");
            TABLE.forEach(System.out::println);
        }
        if (reader != null) {
            reader.close();
        }
        server.close();
    }

    @Test
    @Order(1)
    void baselineRoundReadsEveryBlockOnceOverRdma() throws Exception {
        Map<String, String> r = round("baseline", BLOCKS, () -> { });
        baseline = r;
        assertEquals("0", r.get("tcp"), () -> "no fault, no fallback: " + r);
        assertEquals("0", r.get("rdma.reconnects"), () -> "no fault, no reconnect: " + r);
    }

    @Test
    @Order(2)
    void linkDown150msUnderInFlightReads() throws Exception {
        // Under the 2 s detection window: rxe retransmits what the cut dropped; the outcome is the baseline's.
        roundInside("link down 150 ms", VerbsRingTest::linkDown, sleep(150), VerbsRingTest::linkUp);
        assertBackToBaseline("link down 150 ms");
    }

    @Test
    @Order(3)
    void linkDownUntilTheQpIsRebuiltFlushesAndReissuesWithNoFallback() throws Exception {
        // The READs sit on the dead link; past the detection window the data channel is torn down (its QP's work
        // flushed) and rebuilt.
        Map<String, String> r = roundInside("link down until reconnecting", VerbsRingTest::linkDown,
                () -> reader.awaitLine(l -> l.startsWith("STATE DATA ") && l.endsWith("->RECONNECTING"), roundStart, "the data channel reconnecting"),
                VerbsRingTest::linkUp);
        assertTrue(number(r, "rdma.reconnects") >= 1, () -> "the channel was rebuilt: " + r);
        assertTrue(number(r, "rdma.reissued") >= 1, () -> "work flushed by the broken QP went out again: " + r);
        assertEquals("0", r.get("tcp"), () -> "reconnected within the attempts: no fallback: " + r);
        assertBackToBaseline("link down until reconnecting");
    }

    @Test
    @Order(4)
    void linkDownPastTheReconnectAttemptsEndsInFallbackWithTheSameBytes() throws Exception {
        // Past every reconnect attempt: the channel fails and the waiting READs fall back.
        Map<String, String> r = roundInside("link down past the attempts", VerbsRingTest::linkDown,
                () -> reader.awaitLine(l -> l.startsWith("STATE ") && l.endsWith("->FAILED"), roundStart, "a channel failing"),
                VerbsRingTest::linkUp);
        assertTrue(number(r, "tcp") >= 1, () -> "blocks fell back to TCP: " + r);
        assertTrue(number(r, "rdma.fallbacks") >= 1, () -> "the policy layer said fall back: " + r);
        assertBackToBaseline("link down past the attempts");
    }

    @Test
    @Order(5)
    void everyLinkDown1sAtOnce() throws Exception {
        // A switch flap: both hosts' bridge ports go down together and come back after 1 s.
        roundInside("every link down 1 s", () -> {
            sh("ip", "link", "set", VmHostJvm.host(1, "PORT"), "down");
            sh("ip", "link", "set", VmHostJvm.host(2, "PORT"), "down");
        }, sleep(1_000), () -> {
            try {
                sh("ip", "link", "set", VmHostJvm.host(2, "PORT"), "up");
            } finally {
                linkUp();
            }
        });
        assertBackToBaseline("every link down 1 s");
    }

    @Test
    @Order(6)
    void serverStopped3sUnderInFlightReads() throws Exception {
        // SIGSTOP freezes the serving JVM, not the kernel's rxe: what the device answers (READs of granted memory)
        // may go on; what needs the process (control answers) waits for SIGCONT. Either way nothing is lost.
        roundInside("server stopped 3 s", () -> server.signal("STOP"), sleep(3_000), () -> server.signal("CONT"));
        assertBackToBaseline("server stopped 3 s");
    }

    @Test
    @Order(7)
    void netemLossDelayReorderingOnOneLink() throws Exception {
        // A sixth of the blocks: on rxe this link stalls READs for 10 s at a time (the first run's 24 blocks did
        // not settle in 300 s; 8 blocks took 115 s of CI's VM ring, which waits on these stalls, not on the CPU),
        // and each block ends over RDMA or, after the attempts, over TCP.
        netemRound(NETEM, BLOCKS / 6);
        assertBackToBaseline("netem");
    }

    @Test
    @Order(8)
    void bitsFlippedOnTheWireNeverReachAReader() throws Exception {
        // netem corrupt flips one random bit in a packet: rxe's ICRC (or the IP/UDP checksums) drop it and the
        // requester retransmits; a flipped payload that got through would fail the block's CRC32C (sampled at 1.0
        // here) and be READ again. Either way no wrong byte is delivered.
        Map<String, String> r = netemRound(CORRUPT, BLOCKS / 3);
        System.out.println("vm ring: corrupt: the policy layer's checksum failures (flips the NIC let through): "
                + r.get("rdma.checksum.failures"));
        assertBackToBaseline("corrupt");
    }

    /** A round of {@code blocks} with {@code tc netem SPEC} on both ends of host1's link: its bridge port and host1's veth. */
    private static Map<String, String> netemRound(String spec, int blocks) throws Exception {
        String port = VmHostJvm.host(1, "PORT");
        String ns = VmHostJvm.host(1, "NS");
        String dev = VmHostJvm.host(1, "NETDEV");
        sh(("tc qdisc add dev " + port + " root netem " + spec).split(" "));
        try {
            sh(("ip netns exec " + ns + " tc qdisc add dev " + dev + " root netem " + spec).split(" "));
            return round("netem " + spec, blocks, () -> { });
        } finally {
            shQuiet(("tc qdisc del dev " + port + " root").split(" "));
            shQuiet(("ip netns exec " + ns + " tc qdisc del dev " + dev + " root").split(" "));
        }
    }

    @Test
    @Order(9)
    void aServerReplacedAtTheSameAddressAndPortRefusesItsPredecessorsDescriptors() throws Exception {
        // A reducer holding a dead executor's descriptors meets a new process at the same address and port with
        // the same blocks laid out elsewhere: each stale READ must be refused by the device (no QP of the successor
        // holds those keys), never answered with whatever the successor's memory holds there.
        int probed = 4;
        int from = reader.lines.size();
        reader.send("round before-replacement " + probed); // the descriptors the probe reuses
        reader.awaitLine("ROUND before-replacement ", from);
        server.kill();
        server = startServer(rdmaPort, tcpPort, 4096);
        server.awaitLine("READY ");
        from = reader.lines.size();
        reader.send("probe stale " + probed);
        Map<String, String> p = parse(reader.awaitLine("PROBE stale ", from));
        System.out.println("vm ring: the predecessor's descriptors at its successor: " + p);
        assertEquals(String.valueOf(probed), p.get("REMOTE_ACCESS_ERROR"), () -> "every stale READ is refused by the device: " + p);
        round("after the replacement", BLOCKS, () -> { });
        assertBackToBaseline("after the replacement");
    }

    interface Fault {
        void inject() throws Exception;
    }

    /**
     * A round that starts inside its fault, so its READs are in flight through the fault on any machine: a one-block
     * prime round (fresh descriptors, both channels READY), {@code begin}, the round's READs posted at once with those
     * descriptors, then {@code until} (the fault's length, or a wait for what it must cause) and {@code end}. A fault
     * injected once a round's first blocks had arrived missed its READs on a quiet host (CI at 3376347: the flap's
     * round ended 924 ms into its 1 s cut, its longest stall 75 ms; the 150 ms cut's longest stall was 32 ms), and a
     * cut after the first blocks came after all 24 were in (1.6 s) in an earlier CI run.
     */
    private static Map<String, String> roundInside(String name, Fault begin, Fault until, Fault end) throws Exception {
        int from = reader.lines.size();
        reader.send("round prime 1");
        reader.awaitLine("ROUND prime ", from);
        begin.inject();
        try {
            return round(name, BLOCKS, true, () -> {
                until.inject();
                end.inject();
            });
        } finally {
            end.inject(); // again when the round failed (a link already up stays up; CONT of a running process is nothing)
        }
    }

    /** The fault's length: a sleep, not a synchronisation. */
    private static Fault sleep(long millis) {
        return () -> TimeUnit.MILLISECONDS.sleep(millis);
    }

    /**
     * Starts a round, injects {@code fault} once the first blocks have arrived (the rest are in flight),
     * and checks the outcome: every block delivered once, none lost, none duplicated, none wrong, every
     * byte the seed's. Returns the round's report.
     */
    private static Map<String, String> round(String name, int blocks, Fault fault) throws Exception {
        return round(name, blocks, false, fault);
    }

    /**
     * As {@link #round(String, int, Fault)}; with {@code linkAlreadyDown} the round READs with the last round's
     * descriptors and {@code fault} (what ends the fault) starts at once, watching the lines from the round's start.
     */
    private static Map<String, String> round(String name, int blocks, boolean linkAlreadyDown, Fault fault) throws Exception {
        String id = name.replaceAll("[^A-Za-z0-9]+", "-");
        int from = reader.lines.size();
        roundStart = from;
        reader.send("round " + id + " " + blocks + (linkAlreadyDown ? " cached" : ""));
        if (!linkAlreadyDown) {
            reader.awaitLine("PROGRESS " + id + " 2 ", from);
        }
        fault.inject();
        Map<String, String> r = parse(reader.awaitLine("ROUND " + id + " ", from));
        TABLE.add(String.format(Locale.ROOT, "%-28s %8s %10s %5s %5s %5s %5s %5s %7s %7s %s", name.length() > 28 ? name.substring(0, 28) : name,
                r.get("ms"), r.get("stallMs"), r.get("rdma.reconnects"), r.get("rdma.fallbacks"), r.get("tcp"), r.get("lost"),
                r.get("duplicated"), r.get("threads") + "/" + r.get("rdmaThreads"), r.get("fds"), completionErrors(r)));
        System.out.println("vm ring: " + name + ": " + r);
        assertEquals("0", r.get("lost"), () -> name + ": " + r + "\n" + reader.describe());
        assertEquals("0", r.get("duplicated"), () -> name + ": " + r);
        assertEquals("0", r.get("wrong"), () -> name + ": " + r);
        assertEquals("true", r.get("same"), () -> name + ": " + r);
        return r;
    }

    /**
     * What the fault took (channels, QPs, sockets, the threads that serve them) is given back once it has ended:
     * the reader's open files and the project's threads return to the baseline round's. A round ends when its
     * blocks are in, possibly while a channel still reconnects, so the reader waits (bounded) for the counts.
     */
    private static void assertBackToBaseline(String name) throws Exception {
        int from = reader.lines.size();
        reader.send("settle " + baseline.get("fds") + " " + baseline.get("rdmaThreads"));
        Map<String, String> s = parse(reader.awaitLine("SETTLED ", from));
        System.out.println("vm ring: " + name + ": after the fault: " + s);
        assertEquals(baseline.get("rdmaThreads"), s.get("rdmaThreads"), () -> name + ": the project's threads against the baseline's "
                + baseline.get("rdmaThreads") + ": " + s);
        assertEquals(baseline.get("fds"), s.get("fds"), () -> name + ": open files against the baseline's " + baseline.get("fds") + ": " + s);
    }

    private static String completionErrors(Map<String, String> r) {
        StringBuilder b = new StringBuilder();
        r.forEach((k, v) -> {
            if (k.startsWith("rdma.completion.") || k.equals("rdma.reissued")) {
                b.append(k.substring(5)).append('=').append(v).append(' ');
            }
        });
        return b.toString().trim();
    }

    private static Map<String, String> parse(String line) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String word : line.split(" ")) {
            int eq = word.indexOf('=');
            if (eq > 0) {
                out.put(word.substring(0, eq), word.substring(eq + 1));
            }
        }
        return out;
    }

    private static long number(Map<String, String> r, String key) {
        return Long.parseLong(r.getOrDefault(key, "0"));
    }

    private static void linkDown() {
        sh("ip", "link", "set", VmHostJvm.host(1, "PORT"), "down");
    }

    private static void linkUp() {
        sh("ip", "link", "set", VmHostJvm.host(1, "PORT"), "up");
    }

    private static void sh(String... command) {
        String failure = shQuiet(command);
        if (failure != null) {
            throw new IllegalStateException(failure);
        }
    }

    /** Runs {@code command} (bounded to 30 s); null when it exited 0, else what went wrong. */
    private static String shQuiet(String... command) {
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return String.join(" ", command) + ": still running after 30 s";
            }
            String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).trim();
            return p.exitValue() == 0 ? null : String.join(" ", command) + " exited " + p.exitValue() + ": " + out;
        } catch (IOException e) {
            return String.join(" ", command) + ": " + e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return String.join(" ", command) + ": interrupted";
        }
    }
}

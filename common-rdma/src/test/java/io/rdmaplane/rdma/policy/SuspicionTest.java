package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.testing.Polling;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Suspicion means no progress: a big READ on a busy host is not a dead peer. While every core is
 * kept busy (bounded: a few spinning threads, stopped when the READs are done) and 64 MiB blocks are
 * READ, no READ completes within the detection window, yet bytes keep arriving: no channel may be
 * rebuilt (a suspicion, which only sends a probe, ends as soon as bytes move). A real stall (nothing arrives: the faulty node holds everything back)
 * is still suspected and rebuilt.
 */
class SuspicionTest {
    private static final int WAIT = 120;
    /** The default: three 64 MiB READs at once through a busy 2-core host's loopback outlast it many times. */
    private static final Duration WINDOW = PolicyOptions.defaults().detectionWindow();
    private static final int PARALLEL = 3;
    private static final int BLOCK = 64 << 20;
    private static final int ROUNDS = 3;

    private static PolicyOptions options() {
        return PolicyFixture.fast().withTimeouts(WINDOW, Duration.ofSeconds(10), Duration.ofSeconds(5))
                .withBytesInFlight((long) PARALLEL * BLOCK, (long) PARALLEL * BLOCK);
    }

    @Test
    void largeReadsOnABusyMachineCauseNoSuspicionAndNoReconnect() throws Exception {
        try (PolicyFixture f = new PolicyFixture(options(), options(), PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(BLOCK, 11);
            List<MemoryRegion> landings = new ArrayList<>();
            for (int i = 0; i < PARALLEL; i++) {
                landings.add(f.landing(BLOCK));
            }
            AtomicBoolean busy = new AtomicBoolean(true);
            List<Thread> spinners = spin(busy);
            long longestRead = 0;
            AtomicLong longestSilence = new AtomicLong();
            Thread sampler = sample(peer.channel(TrafficClass.DATA), busy, longestSilence);
            try {
                for (int round = 0; round < ROUNDS; round++) {
                    long started = System.nanoTime();
                    List<CompletableFuture<Void>> reads = new ArrayList<>();
                    for (MemoryRegion landing : landings) {
                        reads.add(peer.read(block, landing, 0));
                    }
                    CompletableFuture.allOf(reads.toArray(CompletableFuture[]::new)).get(WAIT, TimeUnit.SECONDS);
                    longestRead = Math.max(longestRead, System.nanoTime() - started);
                    for (MemoryRegion landing : landings) {
                        assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()), "round " + round + " landed intact");
                    }
                }
            } finally {
                busy.set(false);
                for (Thread t : spinners) {
                    t.join();
                }
                sampler.join();
            }
            System.out.printf("suspicion: %d x " + PARALLEL + " READs of %d MiB on %d busy cores, the longest %d ms, the longest silence"
                            + " (no byte, no completion) %d ms, detection window %d ms: %d suspicions, %d reconnects%n", ROUNDS,
                    BLOCK >> 20, Runtime.getRuntime().availableProcessors(), TimeUnit.NANOSECONDS.toMillis(longestRead),
                    TimeUnit.NANOSECONDS.toMillis(longestSilence.get()), WINDOW.toMillis(), suspicions(f), f.count("rdma.reconnects"));
            assertEquals(0, f.count("rdma.reconnects"), "no needless reconnect; transitions " + f.transitions);
            // A suspicion only sends a probe; bytes moving (or the probe's answer) make the channel READY again.
            assertTrue(f.transitions.stream().noneMatch(t -> t.endsWith("->RECONNECTING")), f.transitions.toString());
        }
    }

    /**
     * The same without timing luck: the link crawls (nothing completes, the probe's answer waits behind
     * the bulk data, but bytes keep arriving) for several detection windows. Before, the channel went
     * SUSPECT, the probe went unanswered and it was rebuilt, flushing the READ; now it stays.
     */
    @Test
    void aCrawlingLinkIsNotRebuilt() throws Exception {
        try (PolicyFixture f = new PolicyFixture(options(), options(), PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(1 << 20, 13);
            MemoryRegion landing = f.landing(1 << 20);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            f.clientNode.crawl(true);
            CompletableFuture<Void> read = peer.read(block, landing, 0);
            CompletableFuture<java.nio.ByteBuffer> request = peer.request(java.nio.ByteBuffer.wrap(new byte[] {5}));
            // The fault lasts five detection windows (twenty checks), not a wait for anything to happen.
            long until = System.nanoTime() + 5 * WINDOW.toNanos();
            Polling.waitUntil(() -> System.nanoTime() - until > 0, Duration.ofSeconds(WAIT), "the crawl's five windows");
            f.clientNode.crawl(false);
            read.get(WAIT, TimeUnit.SECONDS);
            request.get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()));
            assertEquals(0, f.count("rdma.reconnects"), "a crawling link is not cut; transitions " + f.transitions);
            assertTrue(f.transitions.stream().noneMatch(t -> t.endsWith("->RECONNECTING")), f.transitions.toString());
        }
    }

    @Test
    void aStalledPeerIsStillSuspectedAndRebuilt() throws Exception {
        try (PolicyFixture f = new PolicyFixture(options(), options(), PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(BLOCK, 12);
            MemoryRegion landing = f.landing(BLOCK);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            AtomicLong stalledAt = new AtomicLong(System.nanoTime());
            f.clientNode.stall(true); // nothing the server sends reaches the client any more, as on a hung link
            CompletableFuture<Void> read = peer.read(block, landing, 0);
            Polling.waitUntil(() -> f.transitions.contains("DATA:SUSPECT->RECONNECTING"), Duration.ofSeconds(WAIT),
                    () -> "the stalled data channel being suspected and rebuilt; transitions " + f.transitions);
            System.out.printf("suspicion: a stall was detected and the channel rebuilt %d ms after it began (window %d ms)%n",
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stalledAt.get()), WINDOW.toMillis());
            assertTrue(f.transitions.contains("DATA:READY->SUSPECT"), f.transitions.toString());
            f.clientNode.stall(false);
            read.get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()));
        }
    }

    /** Samples how long the data channel goes without hearing from the peer while READs are outstanding. */
    private static Thread sample(PeerChannel channel, AtomicBoolean busy, AtomicLong longest) {
        Thread t = new Thread(() -> {
            while (busy.get()) {
                long silence = System.nanoTime() - channel.heardNanos();
                longest.accumulateAndGet(silence, Math::max);
                try {
                    Thread.sleep(1); // sampling pace, not synchronisation
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "suspicion-test-sampler");
        t.setDaemon(true);
        t.start();
        return t;
    }

    private static long suspicions(PolicyFixture f) {
        return f.transitions.stream().filter(t -> t.endsWith("->SUSPECT")).count();
    }

    /** Two spinning threads per core until {@code busy} is cleared: the machine is saturated, for a bounded time. */
    private static List<Thread> spin(AtomicBoolean busy) {
        List<Thread> threads = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT);
        for (int i = 0; i < 2 * Runtime.getRuntime().availableProcessors(); i++) {
            Thread t = new Thread(() -> {
                long x = 0;
                while (busy.get() && System.nanoTime() < deadline) {
                    x += System.nanoTime() % 7;
                }
                if (x == 42) {
                    System.out.print("");
                }
            }, "suspicion-test-spinner-" + i);
            t.setDaemon(true);
            t.start();
            threads.add(t);
        }
        return threads;
    }
}

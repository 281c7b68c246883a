package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.testing.Polling;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class PolicyTest {
    private static final int WAIT = 30;

    @Test
    void requestsAndReadsWaitForTheServersReadyAndThenSucceed() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), PolicyFixture.echo())) {
            PeerConnection peer = f.peer();
            CompletableFuture<ByteBuffer> answer = peer.request(ByteBuffer.wrap("hello".getBytes()));
            // The server has not said READY (its regions are not registered yet): nothing may go out.
            assertThrows(TimeoutException.class, () -> answer.get(500, TimeUnit.MILLISECONDS));
            assertEquals(0, f.handled.get());
            RemoteBlock block = f.exposeBlock(1 << 20, 1);
            MemoryRegion landing = f.landing(1 << 20);
            CompletableFuture<Void> read = peer.read(block, landing, 0);
            f.server.markReady();
            assertEquals("hello", StandardCharsets.UTF_8.decode(answer.get(WAIT, TimeUnit.SECONDS)).toString());
            read.get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()));
            assertEquals(ChannelState.READY, peer.state(TrafficClass.CONTROL));
            assertEquals(ChannelState.READY, peer.state(TrafficClass.DATA));
            assertEquals(1, f.count("rdma.checksum.checks"), "the first block from a new peer is always verified");
        }
    }

    @Test
    void blocksLargerThanOneReadArriveWhole() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast().withChecksumSampleRate(1.0),
                PolicyFixture.echo())) {
            f.server.markReady();
            int size = 20 << 20; // three READs: 8 + 8 + 4 MiB
            RemoteBlock block = f.exposeBlock(size, 2);
            MemoryRegion landing = f.landing(size + 100);
            f.peer().read(block, landing, 100).get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer().slice(100, size)));
            assertEquals(size, f.count("rdma.read.bytes"));
        }
    }

    @Test
    void aControlRequestCompletesWhileTheDataChannelIsSaturated() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast().withChecksumSampleRate(0),
                PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(8 << 20, 3);
            MemoryRegion landing = f.landing(8 << 20);
            List<CompletableFuture<Void>> bulk = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                bulk.add(peer.read(block, landing, 0)); // 512 MiB queued behind the data channel's budget
            }
            ByteBuffer answer = peer.request(ByteBuffer.wrap(new byte[] {42})).get(WAIT, TimeUnit.SECONDS);
            assertEquals(42, answer.get(0));
            long stillQueued = bulk.stream().filter(b -> !b.isDone()).count();
            assertTrue(stillQueued > 0, "the request should have overtaken queued bulk READs");
            for (CompletableFuture<Void> b : bulk) {
                b.get(WAIT * 2, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void bytesInFlightStayWithinThePeerBudget() throws Exception {
        long budget = 1 << 20;
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(),
                PolicyFixture.fast().withBytesInFlight(budget, 4 * budget).withChecksumSampleRate(0), PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(64 << 10, 4);
            MemoryRegion landing = f.landing(64 << 10);
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < 2000; i++) {
                reads.add(peer.read(block, landing, 0));
            }
            long most = 0;
            while (reads.stream().anyMatch(r -> !r.isDone())) {
                most = Math.max(most, peer.bytesInFlight());
                assertTrue(f.client.bytesInFlight() <= 4 * budget);
            }
            for (CompletableFuture<Void> r : reads) {
                r.get(WAIT, TimeUnit.SECONDS);
            }
            assertTrue(most <= budget, "peer bytes in flight reached " + most + " > " + budget);
            assertTrue(most > 0);
        }
    }

    @Test
    void readsWaitingForTheTotalBudgetOnOneConnectionGoWhenAnotherConnectionReleasesIt() throws Exception {
        long total = 256 << 10;
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(),
                PolicyFixture.fast().withBytesInFlight(64L << 20, total).withChecksumSampleRate(0), PolicyFixture.echo())) {
            f.server.markReady();
            RemoteBlock block = f.exposeBlock(64 << 10, 14);
            MemoryRegion landing = f.landing(64 << 10);
            List<PeerConnection> connections = List.of(f.client.dedicated(f.serverNode.localAddress()),
                    f.client.dedicated(f.serverNode.localAddress()));
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < 400; i++) {
                reads.add(connections.get(i % 2).read(block, landing, 0));
            }
            long most = 0;
            while (reads.stream().anyMatch(r -> !r.isDone())) {
                most = Math.max(most, f.client.bytesInFlight());
            }
            for (CompletableFuture<Void> r : reads) {
                r.get(WAIT, TimeUnit.SECONDS); // none is left waiting for a wake-up that never comes
            }
            assertTrue(most <= total, "total bytes in flight reached " + most);
            connections.forEach(PeerConnection::close);
        }
    }

    @Test
    void cutConnectionsAreRebuiltAndOutstandingReadsReissuedWithoutLoss() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast().withChecksumSampleRate(1.0),
                PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(4 << 20, 5);
            int blocks = 40;
            MemoryRegion landing = f.landing(blocks * (4 << 20));
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < blocks; i++) {
                reads.add(peer.read(block, landing, i * (4 << 20)));
            }
            f.serverNode.cutConnections();
            for (CompletableFuture<Void> r : reads) {
                r.get(WAIT, TimeUnit.SECONDS);
            }
            for (int i = 0; i < blocks; i++) {
                assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer().slice(i * (4 << 20), 4 << 20)), "block " + i);
            }
            assertTrue(f.count("rdma.reconnects") >= 1, "a reconnect should have happened");
            assertTrue(f.transitions.contains("DATA:RECONNECTING->READY"), f.transitions.toString());
            assertEquals(ChannelState.READY, peer.state(TrafficClass.DATA));
            // Traffic ramps up after a reconnect instead of resuming at full depth.
            assertTrue(peer.channel(TrafficClass.DATA).window() <= PolicyFixture.fast().dataQueueDepth());
        }
    }

    @Test
    void whenTheControlChannelIsRebuiltTheDataChannelRejoinsInItsNewSessionAndReadsGoOn() throws Exception {
        byte[] secret = "app-secret".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        PolicyOptions options = PolicyFixture.fast().withSecret(secret);
        try (PolicyFixture f = new PolicyFixture(options, options, PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(64 << 10, 11);
            MemoryRegion landing = f.landing(64 << 10);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(1, f.server.liveSessions());

            f.clientNode.cutConnections(io.rdmaplane.rdma.provider.Lane.CONTROL); // only the control channel breaks
            // Its session ends, and the server closes the session's data channel: it is rebuilt in the next session.
            io.rdmaplane.rdma.testing.Polling.waitUntil(() -> f.transitions.contains("DATA:RECONNECTING->READY"),
                    java.time.Duration.ofSeconds(WAIT), "the data channel rebuilt: " + f.transitions);
            landing.buffer().put(0, new byte[64 << 10]);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()));
            assertEquals(1, f.server.liveSessions(), "the new session only");
            assertEquals(ChannelState.READY, peer.state(TrafficClass.CONTROL));
        }
    }

    @Test
    void afterAReconnectTheWindowStartsSmallAndGrows() throws Exception {
        PolicyOptions options = PolicyFixture.fast().withChecksumSampleRate(0);
        try (PolicyFixture f = new PolicyFixture(options, options, PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(4096, 6);
            MemoryRegion landing = f.landing(4096);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(options.dataQueueDepth(), peer.channel(TrafficClass.DATA).window(), "first connect: full depth");
            f.serverNode.cutConnections();
            Polling.waitUntil(() -> f.transitions.contains("DATA:RECONNECTING->READY"), Duration.ofSeconds(WAIT),
                    () -> "the data channel reconnected; transitions " + f.transitions);
            assertEquals(options.rampInitialWindow(), peer.channel(TrafficClass.DATA).window(), "after a reconnect: small");
            for (int i = 0; i < 50; i++) {
                peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            }
            assertEquals(options.rampInitialWindow() + 50, peer.channel(TrafficClass.DATA).window(), "grows per completion");
        }
    }

    @Test
    void aStalledPeerBecomesSuspectThenIsRebuiltAndTheReadStillCompletes() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(64 << 10, 7);
            MemoryRegion landing = f.landing(64 << 10);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            f.clientNode.stall(true); // the server stops answering, as the client sees it
            CompletableFuture<Void> read = peer.read(block, landing, 0);
            Polling.waitUntil(() -> f.transitions.contains("DATA:SUSPECT->RECONNECTING"), Duration.ofSeconds(WAIT),
                    () -> "the stalled data channel being rebuilt; transitions " + f.transitions);
            assertTrue(f.transitions.contains("DATA:READY->SUSPECT"), f.transitions.toString());
            assertTrue(f.transitions.contains("DATA:SUSPECT->RECONNECTING"), f.transitions.toString());
            f.clientNode.stall(false);
            read.get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()));
        }
    }

    @Test
    void aReSentRequestIsAppliedOnceAndAnsweredOnce() throws Exception {
        AtomicLong applied = new AtomicLong();
        PolicyServer.RequestHandler slowFirst = (peer, request) -> {
            if (request.get(0) == 7 && applied.incrementAndGet() == 1) {
                Thread.sleep(1000); // the load itself: longer than the request timeout, so the client sends it again
            }
            return request;
        };
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), slowFirst)) {
            f.server.markReady();
            ByteBuffer answer = f.peer().request(ByteBuffer.wrap(new byte[] {7})).get(WAIT, TimeUnit.SECONDS);
            assertEquals(7, answer.get(0));
            assertTrue(f.count("rdma.control.retries") >= 1, "the request should have been sent again");
            // Messages on the control channel are handled in order: once a later request is answered, every
            // duplicate sent before it has arrived and been answered (from the cache, or by running the handler).
            assertEquals(8, f.peer().request(ByteBuffer.wrap(new byte[] {8})).get(WAIT, TimeUnit.SECONDS).get(0));
            assertEquals(1, applied.get(), "a re-sent request must not run the handler twice");
        }
    }

    @Test
    void aCorruptedResponseIsDroppedAndTheRetryDeliversIt() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            peer.request(ByteBuffer.wrap(new byte[] {1})).get(WAIT, TimeUnit.SECONDS);
            // The data channel's handshake runs beside the request: its READY must be out before the fault, or it is
            // the server's next message instead of the answer.
            Polling.waitUntil(() -> peer.state(TrafficClass.DATA) == ChannelState.READY, Duration.ofSeconds(WAIT),
                    "the data channel is READY");
            f.serverNode.corruptSends(1); // the next message the server sends: the answer
            ByteBuffer answer = peer.request(ByteBuffer.wrap(new byte[] {2, 3})).get(WAIT, TimeUnit.SECONDS);
            assertArrayEquals(new byte[] {2, 3}, new byte[] {answer.get(0), answer.get(1)});
            assertEquals(1, f.count("rdma.control.dropped"), "the corrupted response is counted and dropped");
            assertEquals(2, f.handled.get(), "the retry is answered from the server's cache, not run again");
        }
    }

    @Test
    void aFlippedBlockIsCaughtReReadAndDeliveredIntactAtSampleRateOne() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast().withChecksumSampleRate(1.0),
                PolicyFixture.echo())) {
            f.server.markReady();
            RemoteBlock block = f.exposeBlock(1 << 20, 8);
            MemoryRegion landing = f.landing(1 << 20);
            PeerConnection peer = f.peer();
            for (int i = 0; i < 5; i++) {
                f.clientNode.corruptReads(1);
                peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
                assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()), "delivered bytes are intact");
            }
            assertEquals(5, f.count("rdma.checksum.failures"));
            assertEquals(10, f.count("rdma.checksum.checks"), "each block checked, then its re-READ checked");
        }
    }

    @Test
    void aBlockCorruptedTwiceIsReportedNotDelivered() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast().withChecksumSampleRate(1.0),
                PolicyFixture.echo())) {
            f.server.markReady();
            RemoteBlock block = f.exposeBlock(64 << 10, 9);
            MemoryRegion landing = f.landing(64 << 10);
            f.clientNode.corruptReads(2);
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> f.peer().read(block, landing, 0).get(WAIT, TimeUnit.SECONDS));
            BlockFetchException failure = assertInstanceOf(BlockFetchException.class, e.getCause());
            assertTrue(failure.isChecksumMismatch());
            assertEquals(1, f.count("rdma.fallbacks"));
        }
    }

    @Test
    void atSampleRateZeroOnlyThePeersFirstBlockIsVerified() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast().withChecksumSampleRate(0),
                PolicyFixture.echo())) {
            f.server.markReady();
            RemoteBlock block = f.exposeBlock(64 << 10, 10);
            MemoryRegion landing = f.landing(64 << 10);
            PeerConnection peer = f.peer();
            f.clientNode.corruptReads(1);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS); // first block: verified, caught, re-READ
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()));
            f.clientNode.corruptReads(1);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS); // not sampled: nobody looks
            assertEquals(2, f.count("rdma.checksum.checks"), "first block and its re-READ only");
            assertFalse(block.crc32c() == PolicyFixture.crc(landing.buffer()),
                    "unsampled corruption gets through at rate 0: that is what the sample rate trades");
        }
    }

    @Test
    void matchingSecretsAuthenticateMutually() throws Exception {
        byte[] secret = "app-secret-1".getBytes();
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast().withSecret(secret), PolicyFixture.fast().withSecret(secret),
                PolicyFixture.echo())) {
            f.server.markReady();
            assertEquals(5, f.peer().request(ByteBuffer.wrap(new byte[] {5})).get(WAIT, TimeUnit.SECONDS).get(0));
        }
    }

    @Test
    void aPeerWithTheWrongSecretIsRejectedAndNeverServed() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast().withSecret("right".getBytes()),
                PolicyFixture.fast().withSecret("wrong".getBytes()), PolicyFixture.echo())) {
            f.server.markReady();
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> f.peer().request(ByteBuffer.wrap(new byte[] {5})).get(WAIT, TimeUnit.SECONDS));
            assertInstanceOf(PeerUnavailableException.class, e.getCause());
            assertEquals(0, f.handled.get(), "no request of an unauthenticated peer reaches the handler");
            assertTrue(f.serverMetrics.registry().counter("rdma.auth.failures").getCount()
                    + f.clientMetrics.registry().counter("rdma.auth.failures").getCount() >= 1);
            assertTrue(f.peer().isFailed());
        }
    }

    @Test
    void aClientWithoutTheSecretIsRejected() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast().withSecret("s".getBytes()), PolicyFixture.fast(),
                PolicyFixture.echo())) {
            f.server.markReady();
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> f.peer().request(ByteBuffer.wrap(new byte[] {5})).get(WAIT, TimeUnit.SECONDS));
            assertInstanceOf(PeerUnavailableException.class, e.getCause());
            assertEquals(0, f.handled.get());
        }
    }

    @Test
    void closingAScopeRevokesItsRegionsAndReadsFailForFallback() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), PolicyFixture.echo())) {
            f.server.markReady();
            RegionScope shuffle = new RegionScope("shuffle 0");
            ByteBuffer memory = ByteBuffer.allocateDirect(4096);
            MemoryRegion region = shuffle.add(f.serverNode.register(memory));
            f.server.grants(f.client.instance(f.serverNode.localAddress())).grant(region.rkey());
            RemoteBlock block = new RemoteBlock(region.address(), region.rkey(), 4096, PolicyFixture.crc(region.buffer()));
            MemoryRegion landing = f.landing(4096);
            PeerConnection peer = f.peer();
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            shuffle.close();
            assertFalse(region.isValid());
            ExecutionException e = assertThrows(ExecutionException.class, () -> peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS));
            BlockFetchException failure = assertInstanceOf(BlockFetchException.class, e.getCause());
            assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, failure.getCause()).status());
            assertThrows(IllegalStateException.class, () -> shuffle.add(f.serverNode.register(ByteBuffer.allocateDirect(64))));
            // The data channel broke (as a verbs QP would) and is rebuilt: other blocks still flow.
            RemoteBlock other = f.exposeBlock(4096, 11);
            peer.read(other, landing, 0).get(WAIT, TimeUnit.SECONDS);
        }
    }

    @Test
    void regionsOfAPeerAreRevokedWhenItsChannelsAreTornDown() throws Exception {
        java.util.concurrent.atomic.AtomicReference<MemoryRegion> exposed = new java.util.concurrent.atomic.AtomicReference<>();
        PolicyFixture[] self = new PolicyFixture[1];
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), (peer, request) -> {
            // Expose a region for this peer only, and say where it is.
            MemoryRegion region = self[0].server.peerScope(peer.instance()).add(self[0].serverNode.register(ByteBuffer.allocateDirect(4096)));
            exposed.set(region);
            peer.grant(region.rkey());
            return ByteBuffer.allocate(12).putLong(region.address()).putInt(region.rkey()).flip();
        })) {
            self[0] = f;
            f.server.markReady();
            PeerConnection peer = f.peer();
            ByteBuffer where = peer.request(ByteBuffer.allocate(1)).get(WAIT, TimeUnit.SECONDS);
            RemoteBlock block = new RemoteBlock(where.getLong(), where.getInt(), 4096, PolicyFixture.crc(exposed.get().buffer()));
            peer.read(block, f.landing(4096), 0).get(WAIT, TimeUnit.SECONDS);
            f.client.close();
            Polling.waitUntil(() -> !exposed.get().isValid(), Duration.ofSeconds(WAIT), "the peer's region revoked");
            assertFalse(exposed.get().isValid(), "the peer's region must be revoked once its channels are gone");
        }
    }

    @Test
    void aPeerThatNeverComesBackFailsAfterTheMaximumAttemptsSoCallersFallBack() throws Exception {
        PolicyOptions quick = PolicyFixture.fast().withReconnect(Duration.ofMillis(10), Duration.ofMillis(10),
                Duration.ofMillis(40), 4);
        try (PolicyFixture f = new PolicyFixture(quick, quick, PolicyFixture.echo())) {
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(4096, 12);
            MemoryRegion landing = f.landing(4096);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            f.serverNode.close();
            ExecutionException e = assertThrows(ExecutionException.class, () -> peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS));
            assertInstanceOf(PeerUnavailableException.class, e.getCause());
            assertTrue(peer.isFailed(), () -> peer + " " + f.transitions + " " + e.getCause());
            assertTrue(f.transitions.stream().anyMatch(t -> t.endsWith("->FAILED")), f.transitions.toString());
            assertTrue(f.count("rdma.fallbacks") >= 1);
        }
    }

    @Test
    void backoffGrowsFromTheBaseIsCappedAndAddsBoundedJitter() {
        PolicyOptions o = PolicyOptions.defaults();
        assertEquals(100, TimeUnit.NANOSECONDS.toMillis(o.backoffNanos(1, 0)));
        assertEquals(150, TimeUnit.NANOSECONDS.toMillis(o.backoffNanos(1, 1.0)));
        assertEquals(200, TimeUnit.NANOSECONDS.toMillis(o.backoffNanos(2, 0)));
        assertEquals(800, TimeUnit.NANOSECONDS.toMillis(o.backoffNanos(4, 0)));
        assertEquals(5000, TimeUnit.NANOSECONDS.toMillis(o.backoffNanos(10, 0)));
        assertEquals(5000, TimeUnit.NANOSECONDS.toMillis(o.backoffNanos(63, 0)));
        assertEquals(5025, TimeUnit.NANOSECONDS.toMillis(o.backoffNanos(40, 0.5)));
    }

    @Test
    void metricsCountReadsRoundTripsTransitionsChecksumsAndPoolUse() throws Exception {
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast().withChecksumSampleRate(1.0),
                PolicyFixture.echo());
             io.rdmaplane.rdma.memory.RegisteredMemoryPool pool = new io.rdmaplane.rdma.memory.RegisteredMemoryPool(
                     f.clientNode, new io.rdmaplane.rdma.memory.PoolOptions(16 << 20, Duration.ZERO))) {
            f.server.markReady();
            f.clientMetrics.watchPool("reduce", pool);
            PeerConnection peer = f.peer();
            RemoteBlock block = f.exposeBlock(100_000, 13);
            try (io.rdmaplane.rdma.memory.RegisteredBuffer landing = pool.acquire(100_000)) {
                for (int i = 0; i < 3; i++) {
                    peer.read(block, landing.region(), landing.offset()).get(WAIT, TimeUnit.SECONDS);
                }
                peer.request(ByteBuffer.allocate(8)).get(WAIT, TimeUnit.SECONDS);
                var registry = f.clientMetrics.registry();
                assertEquals(300_000, registry.counter("rdma.read.bytes").getCount());
                assertEquals(3, registry.counter("rdma.read.count").getCount());
                String peerName = "rdma.peer." + (f.serverNode.localAddress().getHostString() + "_"
                        + f.serverNode.localAddress().getPort()).replace('.', '_');
                assertEquals(300_000, registry.counter(peerName + ".read.bytes").getCount());
                assertEquals(3, registry.timer("rdma.read.latency").getCount());
                assertEquals(1, registry.timer("rdma.control.roundTrip").getCount());
                assertEquals(3, registry.counter("rdma.checksum.checks").getCount());
                assertEquals(0, registry.counter("rdma.checksum.failures").getCount());
                assertEquals(1, registry.counter("rdma.state.data.connecting_to_ready").getCount());
                assertEquals(0L, registry.getGauges().get("rdma.read.inFlightBytes").getValue());
                assertEquals(8L << 20, registry.getGauges().get("rdma.pool.reduce.registeredBytes").getValue());
                assertEquals(128L << 10, registry.getGauges().get("rdma.pool.reduce.inUseBytes").getValue());
            }
            f.serverNode.cutConnections();
            peer.read(block, f.landing(100_000), 0).get(WAIT, TimeUnit.SECONDS);
            assertTrue(f.count("rdma.reconnects") >= 1);
            assertTrue(f.clientMetrics.registry().counter("rdma.state.data.ready_to_reconnecting").getCount() >= 1);
            assertEquals(0L, f.clientMetrics.registry().getGauges().get("rdma.pool.reduce.inUseBytes").getValue());
        }
    }
}

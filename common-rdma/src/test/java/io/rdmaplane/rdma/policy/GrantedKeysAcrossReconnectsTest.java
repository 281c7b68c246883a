package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.testing.Polling;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * READs with keys a request granted (a key of its own per grant, bound to the session's data channel) across
 * reconnects, on tcp: a data-channel reconnect within the session keeps the keys, so re-issued READs READ; a
 * refused key (its session ended) ends its READs with {@link KeyRefusedException} for the reader to ask anew, and
 * is never a reason to reconnect again and again (before: every re-issued READ was refused, and each refusal
 * broke the new data channel, about one reconnect per backoff, for as long as READs were outstanding).
 */
class GrantedKeysAcrossReconnectsTest {
    private static final int WAIT = 30;
    private static final int BLOCK = 1 << 20;
    private static final int BLOCKS = 24;

    /** A server whose every request grants the whole of {@code region} (a key per grant) and answers address and key. */
    private static PolicyFixture fixture(AtomicReference<MemoryRegion> region) throws TransportException {
        return new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast().withChecksumSampleRate(1.0), (peer, request) -> {
            MemoryRegion r = region.get();
            int rkey = peer.grant(r, r.address(), r.length(), Long.MAX_VALUE);
            return ByteBuffer.allocate(12).putLong(0, r.address()).putInt(8, rkey);
        });
    }

    private static MemoryRegion seeded(PolicyFixture f) throws TransportException {
        byte[] bytes = new byte[BLOCK];
        new Random(21).nextBytes(bytes);
        return f.serverNode.register(ByteBuffer.allocateDirect(BLOCK).put(bytes).flip());
    }

    /** Asks for a grant: the block's descriptor with its key. */
    private static RemoteBlock granted(PeerConnection peer, MemoryRegion region) throws Exception {
        ByteBuffer answer = peer.request(ByteBuffer.allocate(1)).get(WAIT, TimeUnit.SECONDS);
        return new RemoteBlock(answer.getLong(0), answer.getInt(8), BLOCK, PolicyFixture.crc(region.buffer()));
    }

    @Test
    void readsReIssuedAfterADataChannelReconnectReadWithTheKeysTheyWereGranted() throws Exception {
        AtomicReference<MemoryRegion> region = new AtomicReference<>();
        try (PolicyFixture f = fixture(region)) {
            region.set(seeded(f));
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = granted(peer, region.get());
            assertTrue(block.rkey() != region.get().rkey(), "the grant's own key, not the region's rkey");
            MemoryRegion landing = f.landing(BLOCKS * BLOCK);
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < BLOCKS; i++) {
                reads.add(peer.read(block, landing, i * BLOCK));
            }
            f.clientNode.cutConnections(Lane.BULK); // the data channel only: the session lives on
            for (int i = 0; i < BLOCKS; i++) {
                reads.get(i).get(WAIT, TimeUnit.SECONDS);
                assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer().slice(i * BLOCK, BLOCK)), "block " + i);
            }
            // And after it, with the same key.
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer().slice(0, BLOCK)));
            assertEquals(1, f.server.liveSessions(), "one session throughout");
            assertTrue(f.count("rdma.reconnects") <= 2, "the cut data channel rebuilt once (twice at most if the cut"
                    + " raced its READY), was " + f.count("rdma.reconnects") + ": " + f.transitions);
        }
    }

    @Test
    void readsWithTheKeysOfAnEndedSessionFailForANewGrantAndReconnectNoMore() throws Exception {
        AtomicReference<MemoryRegion> region = new AtomicReference<>();
        try (PolicyFixture f = fixture(region)) {
            region.set(seeded(f));
            f.server.markReady();
            PeerConnection peer = f.peer();
            RemoteBlock block = granted(peer, region.get());
            MemoryRegion landing = f.landing(BLOCKS * BLOCK);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);

            // The control channel breaks: its session ends on the server, and with it the session's keys.
            long reconnectsBefore = f.count("rdma.reconnects");
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < BLOCKS; i++) {
                reads.add(peer.read(block, landing, i * BLOCK));
            }
            f.clientNode.cutConnections(Lane.CONTROL);
            int refused = 0;
            for (int i = 0; i < BLOCKS; i++) {
                try {
                    reads.get(i).get(WAIT, TimeUnit.SECONDS);
                    assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer().slice(i * BLOCK, BLOCK)),
                            "block " + i + ", READ before the session ended");
                } catch (ExecutionException e) {
                    assertInstanceOf(KeyRefusedException.class, e.getCause(), "block " + i + ": " + e.getCause());
                    refused++;
                }
            }
            Polling.waitUntil(() -> peer.state(TrafficClass.DATA) == ChannelState.READY, Duration.ofSeconds(WAIT),
                    () -> "the data channel is READY in the next session: " + f.transitions);

            // A READ with the ended session's key now: refused, not re-issued, said so to the reader.
            ExecutionException stale = assertThrows(ExecutionException.class,
                    () -> peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS));
            KeyRefusedException why = assertInstanceOf(KeyRefusedException.class, stale.getCause());
            assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, why.getCause()).status());

            // The reader asks anew (a new grant in the new session) and READs.
            RemoteBlock again = granted(peer, region.get());
            landing.buffer().put(0, new byte[BLOCK]);
            peer.read(again, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer().slice(0, BLOCK)));
            long reconnects = f.count("rdma.reconnects") - reconnectsBefore;
            // The control channel and the data channel (its session ended) once each; each refusal breaks the data
            // channel once, as an RC QP does: the first re-issued READ refused fails the others from before it, and
            // the stale READ above. Before, each of the BLOCKS re-issued READs broke it in turn.
            assertTrue(reconnects <= 5, "reconnects: " + reconnects + " (refused READs: " + refused + "): " + f.transitions);
        }
    }
}

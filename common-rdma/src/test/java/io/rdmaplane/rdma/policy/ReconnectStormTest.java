package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.faulty.FaultyNode;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.Polling;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * 500 connections (1000 channels) to one server, all cut at the same instant. Every one must
 * recover, and the jitter must spread the reconnect attempts out instead of sending them all
 * at the server in the same moment.
 */
class ReconnectStormTest {
    private static final int CONNECTIONS = 500;

    @Test
    void fiveHundredConnectionsCutAtOnceAllRecoverWithSpreadOutAttempts() throws Exception {
        PolicyOptions options = PolicyOptions.defaults() // base 100 ms, jitter 0-50 ms, as documented
                .withReconnect(Duration.ofMillis(100), Duration.ofMillis(50), Duration.ofSeconds(2), 10)
                .withTimeouts(Duration.ofMillis(200), Duration.ofSeconds(20), Duration.ofSeconds(1));
        ConcurrentLinkedQueue<Long> planned = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Long> started = new ConcurrentLinkedQueue<>();
        NodeOptions nodeOptions = NodeOptions.loopback().withOperationTimeout(Duration.ofSeconds(5));
        try (FaultyNode serverNode = new FaultyNode(TcpProvider.INSTANCE.createNode(nodeOptions));
             Node clientNode = TcpProvider.INSTANCE.createNode(nodeOptions);
             PolicyServer server = new PolicyServer(serverNode, options, new PolicyMetrics(), (peer, request) -> request).start();
             PolicyClient client = new PolicyClient(clientNode, options, new PolicyMetrics(), new PolicyClient.Listener() {
                 @Override
                 public void reconnectScheduled(InetSocketAddress peer, TrafficClass c, int attempt, long delayNanos) {
                     planned.add(System.nanoTime() + delayNanos);
                 }

                 @Override
                 public void reconnectAttempted(InetSocketAddress peer, TrafficClass c, int attempt) {
                     started.add(System.nanoTime());
                 }
             })) {
            server.markReady();
            List<PeerConnection> connections = new ArrayList<>();
            for (int i = 0; i < CONNECTIONS; i++) {
                connections.add(client.dedicated(serverNode.localAddress()));
            }
            roundTripOnEach(connections);
            // A data channel joins its control session after the session is up: one still joining when the cut
            // comes is not a broken READY channel, and would be missing from the count below.
            Polling.waitUntil(() -> connections.stream().allMatch(c -> c.state(TrafficClass.DATA) == ChannelState.READY),
                    Duration.ofSeconds(60), () -> "every data channel READY before the cut");
            planned.clear();
            started.clear();

            long cut = System.nanoTime();
            serverNode.cutConnections();
            roundTripOnEach(connections); // every connection answers again
            long recovered = System.nanoTime();
            for (PeerConnection c : connections) {
                assertEquals(ChannelState.READY, c.state(TrafficClass.CONTROL));
            }

            long[] plannedTimes = sorted(planned);
            long[] startTimes = sorted(started);
            int plannedPeak = peakIn10ms(plannedTimes);
            int startedPeak = peakIn10ms(startTimes);
            System.out.printf("reconnect storm: %d connections (%d channels) cut at once; all recovered in %d ms; "
                            + "%d reconnect attempts, largest number in any 10 ms window: %d planned, %d started "
                            + "(spread of planned attempts: %d ms)%n",
                    CONNECTIONS, 2 * CONNECTIONS, TimeUnit.NANOSECONDS.toMillis(recovered - cut), plannedTimes.length,
                    plannedPeak, startedPeak,
                    TimeUnit.NANOSECONDS.toMillis(plannedTimes[plannedTimes.length - 1] - plannedTimes[0]));
            assertTrue(plannedTimes.length >= 2 * CONNECTIONS, "each broken channel reconnects: " + plannedTimes.length);
            // Without jitter every attempt would land in the same 10 ms; uniform 0-50 ms jitter
            // puts about a fifth of them in any 10 ms window.
            assertTrue(plannedPeak < plannedTimes.length / 2, "attempts not spread out: " + plannedPeak + " of "
                    + plannedTimes.length + " in one 10 ms window");
            connections.forEach(PeerConnection::close);
        }
    }

    private static void roundTripOnEach(List<PeerConnection> connections) throws Exception {
        List<CompletableFuture<ByteBuffer>> answers = new ArrayList<>();
        for (PeerConnection c : connections) {
            answers.add(c.request(ByteBuffer.wrap(new byte[] {1})));
        }
        for (CompletableFuture<ByteBuffer> a : answers) {
            a.get(60, TimeUnit.SECONDS);
        }
    }

    private static long[] sorted(ConcurrentLinkedQueue<Long> times) {
        long[] out = times.stream().mapToLong(Long::longValue).toArray();
        Arrays.sort(out);
        return out;
    }

    /** The largest number of times within any 10 ms window. */
    private static int peakIn10ms(long[] sorted) {
        int peak = 0;
        for (int lo = 0, hi = 0; hi < sorted.length; hi++) {
            while (sorted[hi] - sorted[lo] >= TimeUnit.MILLISECONDS.toNanos(10)) {
                lo++;
            }
            peak = Math.max(peak, hi - lo + 1);
        }
        return peak;
    }
}

package io.rdmaplane.it.cluster;

import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.PeerUnavailableException;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.spark.serve.LocateProtocol;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * A reducer's block client outside Spark that holds descriptors across an executor's replacement (the host ring's
 * REPLACE_EXECUTOR case), run from the ring's app jar with the Spark plug-in jar on its class path. Arguments:
 * {@code BIND_ADDRESS EXECUTOR_ADDRESS PORT}. Commands on its input, answers on its output:
 * <ul>
 * <li>{@code locate SHUFFLE REDUCES MAP_ID,MAP_ID,...}: LOCATEs those maps' blocks at the executor and keeps every READ
 * descriptor of the answer; {@code RING-STALE-LOCATED reads=N}.</li>
 * <li>{@code read}: (the executor has been replaced at the same address and port) READs every kept descriptor through
 * a new connection to whatever serves there now, then LOCATEs the same blocks again; {@code RING-STALE-RESULT
 * blocks=B reads=N delivered=D outcomes={STATUS=count,...} relocated={KIND=count,...}}. A READ that delivered bytes would
 * be the bug: the old rkey reaching the new executor's memory.</li>
 * </ul>
 */
public final class RingStaleRead {
    private RingStaleRead() {
    }

    public static void main(String[] args) throws Exception {
        InetSocketAddress executor = new InetSocketAddress(args[1], Integer.parseInt(args[2]));
        Node node = Providers.select("tcp").createNode(new NodeOptions(new InetSocketAddress(args[0], 0), 64 << 10, Duration.ofSeconds(5), 16));
        PolicyClient client = new PolicyClient(node, PolicyOptions.defaults(), new PolicyMetrics());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int shuffle = -1;
        List<LocateProtocol.BlockRef> refs = new ArrayList<>();
        List<LocateProtocol.Read> kept = new ArrayList<>();
        RingJob.say("RING-STALE-READY");
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("locate")) {
                shuffle = Integer.parseInt(w[1]);
                for (String map : w[3].split(",")) {
                    for (int r = 0; r < Integer.parseInt(w[2]); r++) {
                        refs.add(new LocateProtocol.BlockRef(Long.parseLong(map), r));
                    }
                }
                for (LocateProtocol.Location l : locate(client.peer(executor), shuffle, refs)) {
                    if (l instanceof LocateProtocol.Read read) {
                        kept.add(read);
                    }
                }
                RingJob.say("RING-STALE-LOCATED reads=" + kept.size());
            } else if (w[0].equals("read")) {
                Map<String, Integer> outcomes = new TreeMap<>();
                int delivered = readAll(client, node, executor, kept, outcomes);
                Map<String, Integer> relocated = new TreeMap<>();
                PeerConnection again = client.dedicated(executor);
                try {
                    for (LocateProtocol.Location l : locate(again, shuffle, refs)) {
                        relocated.merge(l.getClass().getSimpleName(), 1, Integer::sum);
                    }
                } finally {
                    again.close();
                }
                RingJob.say("RING-STALE-RESULT blocks=" + refs.size() + " reads=" + kept.size() + " delivered=" + delivered + " outcomes=" + outcomes + " relocated=" + relocated);
                client.close();
                node.close();
                return;
            }
        }
    }

    /** LOCATEs {@code refs} at {@code peer}, in requests of at most {@link LocateProtocol#BLOCKS_PER_REQUEST} blocks (also RingFlipRead's). */
    static List<LocateProtocol.Location> locate(PeerConnection peer, int shuffle, List<LocateProtocol.BlockRef> refs) throws Exception {
        List<LocateProtocol.Location> out = new ArrayList<>();
        for (int i = 0; i < refs.size(); i += LocateProtocol.BLOCKS_PER_REQUEST) {
            List<LocateProtocol.BlockRef> part = refs.subList(i, Math.min(refs.size(), i + LocateProtocol.BLOCKS_PER_REQUEST));
            ByteBuffer answer = peer.request(LocateProtocol.encodeRequest(new LocateProtocol.Request(shuffle, part))).get(60, TimeUnit.SECONDS);
            out.addAll(LocateProtocol.decodeResponse(answer, part.size()));
        }
        return out;
    }

    /**
     * READs every kept descriptor on one new connection to {@code executor}; while the connection cannot be made
     * (the replacement still starting) it tries again with a fresh one, for at most a minute. Counts each READ's
     * outcome by its status; returns how many delivered bytes.
     */
    private static int readAll(PolicyClient client, Node node, InetSocketAddress executor, List<LocateProtocol.Read> kept,
            Map<String, Integer> outcomes) throws Exception {
        long end = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
        while (true) {
            PeerConnection peer = client.dedicated(executor);
            try {
                int delivered = 0;
                Map<String, Integer> got = new TreeMap<>();
                for (LocateProtocol.Read read : kept) {
                    String outcome = read(peer, node, read);
                    if (outcome.equals("unavailable") && got.isEmpty() && System.nanoTime() < end) {
                        break; // not connected yet: a new connection
                    }
                    got.merge(outcome, 1, Integer::sum);
                    if (outcome.equals("delivered")) {
                        delivered++;
                    }
                }
                if (!got.isEmpty() || kept.isEmpty()) {
                    outcomes.putAll(got);
                    return delivered;
                }
            } finally {
                peer.close();
            }
            Thread.sleep(500); // the retry's period
        }
    }

    private static String read(PeerConnection peer, Node node, LocateProtocol.Read read) throws Exception {
        try (MemoryRegion landing = node.register(ByteBuffer.allocateDirect(read.payload().length()), Set.of(Access.LOCAL_WRITE))) {
            peer.read(read.payload(), landing, 0).get(60, TimeUnit.SECONDS);
            return "delivered";
        } catch (ExecutionException e) {
            if (e.getCause() instanceof PeerUnavailableException) {
                return "unavailable";
            }
            for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                if (c instanceof TransportException t) {
                    return t.status().name(); // the completion's status, under the policy layer's BlockFetchException
                }
            }
            return e.getCause().getClass().getSimpleName();
        }
    }
}

package io.rdmaplane.it.cluster;

import io.rdmaplane.rdma.policy.PeerConnection;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
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
import java.util.zip.CRC32C;

/**
 * The host ring's FLIP_READ_PAYLOAD reader: a reducer's block client outside Spark (the policy layer with its default
 * options, as the shuffle reader runs it) whose connection to an executor goes through a {@link RingFlipRelay}, so
 * that READs of real map outputs come back with bits flipped. Arguments: {@code BIND_ADDRESS RELAY_ADDRESS
 * RELAY_PORT}. On {@code read SHUFFLE REDUCES MAP_ID,MAP_ID,... PASSES} in its input it LOCATEs those maps' blocks
 * through the relay and READs every READ descriptor of the answer, PASSES times; each block a READ delivered is
 * checked against the CRC32C its writer computed (the descriptor's): a mismatch is a wrong block delivered, the bug.
 * Says {@code RING-FLIP-RESULT reads=N intact=I wrong=W failed={OUTCOME=count,...} caughtByWire=X caughtByBlockCrc=Y
 * reissued=Z fallbacks=F}: X are READs the tcp wire's CRC32C failed (BAD_RESPONSE completions), Y blocks the policy
 * layer's sampled CRC32C found wrong, Z READs re-issued on a new channel.
 */
public final class RingFlipRead {
    private RingFlipRead() {
    }

    public static void main(String[] args) throws Exception {
        InetSocketAddress relay = new InetSocketAddress(args[1], Integer.parseInt(args[2]));
        Node node = Providers.select("tcp").createNode(new NodeOptions(new InetSocketAddress(args[0], 0), 64 << 10, Duration.ofSeconds(5), 16));
        PolicyMetrics metrics = new PolicyMetrics();
        PolicyClient client = new PolicyClient(node, PolicyOptions.defaults(), metrics);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        RingJob.say("RING-FLIP-READER-READY");
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            if (!w[0].equals("read")) {
                continue;
            }
            int shuffle = Integer.parseInt(w[1]);
            List<LocateProtocol.BlockRef> refs = new ArrayList<>();
            for (String map : w[3].split(",")) {
                for (int r = 0; r < Integer.parseInt(w[2]); r++) {
                    refs.add(new LocateProtocol.BlockRef(Long.parseLong(map), r));
                }
            }
            PeerConnection peer = client.peer(relay);
            int reads = 0;
            int intact = 0;
            int wrong = 0;
            Map<String, Integer> failed = new TreeMap<>();
            for (int pass = 0; pass < Integer.parseInt(w[4]); pass++) {
                for (LocateProtocol.Location l : RingStaleRead.locate(peer, shuffle, refs)) {
                    if (l instanceof LocateProtocol.Read read) {
                        reads++;
                        String outcome = read(peer, node, read);
                        switch (outcome) {
                            case "intact" -> intact++;
                            case "wrong" -> wrong++;
                            default -> failed.merge(outcome, 1, Integer::sum);
                        }
                    }
                }
            }
            RingJob.say("RING-FLIP-RESULT reads=" + reads + " intact=" + intact + " wrong=" + wrong + " failed=" + failed
                    + " caughtByWire=" + count(metrics, "rdma.completion.bad_response") + " caughtByBlockCrc="
                    + count(metrics, "rdma.checksum.failures") + " reissued=" + count(metrics, "rdma.reissued") + " fallbacks="
                    + count(metrics, "rdma.fallbacks"));
            client.close();
            node.close();
            return;
        }
    }

    private static long count(PolicyMetrics metrics, String name) {
        return metrics.registry().counter(name).getCount();
    }

    /** One READ: "intact" (the writer's CRC32C), "wrong" (delivered, another CRC32C) or what failed it. */
    private static String read(PeerConnection peer, Node node, LocateProtocol.Read read) throws Exception {
        try (MemoryRegion landing = node.register(ByteBuffer.allocateDirect(read.payload().length()), Set.of(Access.LOCAL_WRITE))) {
            peer.read(read.payload(), landing, 0).get(60, TimeUnit.SECONDS);
            CRC32C crc = new CRC32C();
            crc.update(landing.buffer().duplicate().clear());
            return (int) crc.getValue() == read.payload().crc32c() ? "intact" : "wrong";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        }
    }
}

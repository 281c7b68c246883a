package io.rdmaplane.it.bench;

import io.rdmaplane.it.Args;
import io.rdmaplane.rdma.memory.PoolOptions;
import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.ServerLimits;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.spark.ShuffleMetrics;
import io.rdmaplane.spark.fetch.RdmaBlockStoreClient;
import io.rdmaplane.spark.serve.LocateProtocol;
import io.rdmaplane.spark.serve.MapOutputStore;
import io.rdmaplane.spark.serve.ShuffleBlockServer;
import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.BlockStoreClient;
import org.apache.spark.network.shuffle.DownloadFileManager;
import org.apache.spark.storage.ShuffleBlockId;

/**
 * Where small blocks should travel inline in the LOCATE answer rather than by one READ each, on
 * the tcp provider over loopback: for each block size, a reduce task's fetch of {@code blocks}
 * blocks from one executor (LOCATE, then every block), timed end to end, against two servers
 * holding the same map output, one that never inlines (the baseline, READ per block) and one
 * that inlines every block that fits. Rounds alternate between the two. Prints the medians and
 * the ratio inline/READ per size; the crossover is the largest size whose ratio stays below 1.
 * A benchmark: nothing is asserted. Verbs is not measured here (no device on the host).
 *
 * <p>Arguments (all optional): {@code rounds=60 blocks=64 sizes=256,1024,2048,4096,8192,16384,32768}.
 */
public final class LocateInlineBenchmark {
    private static final int SHUFFLE = 1;

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(Args.get(args, "rounds", "60"));
        int blocks = Integer.parseInt(Args.get(args, "blocks", String.valueOf(LocateProtocol.BLOCKS_PER_REQUEST)));
        int[] sizes = Arrays.stream(Args.get(args, "sizes", "256,1024,2048,4096,8192,16384,32768").split(","))
                .mapToInt(Integer::parseInt).toArray();
        System.out.printf("LOCATE inline vs one READ per block, tcp on loopback: a task fetches %d blocks from one executor,"
                + " %d rounds per size, alternating%n", blocks, rounds);
        System.out.printf("%10s %14s %14s %10s%n", "block", "READ p50", "inline p50", "inline/READ");
        File dir = Files.createTempDirectory("locate-inline-bench").toFile();
        PolicyOptions options = PolicyOptions.defaults();
        int crossover = 0;
        double lastRatio = 0;
        boolean below = true;
        try (Node readNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             Node inlineNode = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             Node reducer = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             MapOutputStore readStore = new MapOutputStore(readNode, 1L << 30, new ShuffleMetrics());
             MapOutputStore inlineStore = new MapOutputStore(inlineNode, 1L << 30, new ShuffleMetrics());
             ShuffleBlockServer readServer = new ShuffleBlockServer(readNode, options, ServerLimits.defaults(),
                     new ShuffleMetrics().policy(), readStore, 0, LocateProtocol.MAX_RESPONSE_BYTES).start();
             ShuffleBlockServer inlineServer = new ShuffleBlockServer(inlineNode, options, ServerLimits.defaults(),
                     new ShuffleMetrics().policy(), inlineStore, LocateProtocol.MAX_INLINE_BYTES,
                     LocateProtocol.MAX_RESPONSE_BYTES).start();
             PolicyClient policy = new PolicyClient(reducer, options, new ShuffleMetrics().policy());
             RegisteredMemoryPool pool = new RegisteredMemoryPool(reducer, new PoolOptions(256L << 20, Duration.ofSeconds(1)))) {
            for (int s = 0; s < sizes.length; s++) {
                int size = sizes[s];
                long[] lengths = new long[blocks];
                Arrays.fill(lengths, size);
                File data = dataFile(dir, s, lengths);
                readStore.publish(SHUFFLE, s, data, lengths);
                inlineStore.publish(SHUFFLE, s, data, lengths);
                List<ShuffleBlockId> ids = new ArrayList<>();
                for (int r = 0; r < blocks; r++) {
                    ids.add(new ShuffleBlockId(SHUFFLE, s, r));
                }
                long[] read = new long[rounds];
                long[] inline = new long[rounds];
                for (int w = 0; w < 5; w++) { // warm-up
                    task(policy, pool, reducer, readServer.address(), ids);
                    task(policy, pool, reducer, inlineServer.address(), ids);
                }
                ShuffleMetrics counted = new ShuffleMetrics();
                for (int round = 0; round < rounds; round++) {
                    read[round] = task(policy, pool, reducer, readServer.address(), ids);
                    inline[round] = task(policy, pool, reducer, inlineServer.address(), ids, counted);
                }
                Arrays.sort(read);
                Arrays.sort(inline);
                double ratio = (double) inline[rounds / 2] / read[rounds / 2];
                System.out.printf("%8d B %11.1f us %11.1f us %9.2fx%s%n", size, read[rounds / 2] / 1e3, inline[rounds / 2] / 1e3,
                        ratio, counted.fetchInlineBlocks().getCount() == (long) rounds * blocks ? ""
                                : "  (" + counted.fetchInlineBlocks().getCount() + " of " + (long) rounds * blocks + " inline)");
                below &= ratio < 1;
                if (below) {
                    crossover = size;
                    lastRatio = ratio;
                }
            }
        } finally {
            for (File f : dir.listFiles()) {
                f.delete();
            }
            dir.delete();
        }
        System.out.printf("locate-inline: crossover = %d B (every size up to it: inline beats READ)%n", crossover);
        System.out.printf("locate-inline: inline/READ at the crossover = %.2fx (goal <= 1.00)%n", lastRatio);
        System.out.println("locate-inline: verbs not measured here (no RDMA device on this host)");
    }

    private static long task(PolicyClient policy, RegisteredMemoryPool pool, Node node, InetSocketAddress server,
                             List<ShuffleBlockId> ids) throws Exception {
        return task(policy, pool, node, server, ids, new ShuffleMetrics());
    }

    /** One reduce task's fetch of every block: nanoseconds from the first fetchBlocks to the last block delivered. */
    private static long task(PolicyClient policy, RegisteredMemoryPool pool, Node node, InetSocketAddress server,
                             List<ShuffleBlockId> ids, ShuffleMetrics metrics) throws Exception {
        CountDownLatch done = new CountDownLatch(ids.size());
        AtomicInteger failed = new AtomicInteger();
        BlockFetchingListener listener = new BlockFetchingListener() {
            @Override
            public void onBlockFetchSuccess(String blockId, ManagedBuffer data) {
                done.countDown();
            }

            @Override
            public void onBlockFetchFailure(String blockId, Throwable exception) {
                failed.incrementAndGet();
                done.countDown();
            }
        };
        long start = System.nanoTime();
        try (RdmaBlockStoreClient client = new RdmaBlockStoreClient(policy, pool, node, new NoFallback(), e -> server, SHUFFLE,
                Map.of("exec", ids), metrics)) {
            client.fetchBlocks("h", 1, "exec", ids.stream().map(ShuffleBlockId::name).toArray(String[]::new), listener, null);
            if (!done.await(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("a fetch did not settle in 60 s");
            }
        }
        long took = System.nanoTime() - start;
        if (failed.get() > 0) {
            throw new IllegalStateException(failed.get() + " blocks fell back: the benchmark measures RDMA only");
        }
        return took;
    }

    private static File dataFile(File dir, int map, long[] lengths) throws IOException {
        File file = new File(dir, "shuffle_" + SHUFFLE + "_" + map + "_0.data");
        byte[] bytes = new byte[(int) Arrays.stream(lengths).sum()];
        new java.util.Random(map).nextBytes(bytes);
        try (RandomAccessFile out = new RandomAccessFile(file, "rw")) {
            out.write(bytes);
        }
        return file;
    }

    /** Every block comes over RDMA here; a fallback is a failure of the benchmark. */
    private static final class NoFallback extends BlockStoreClient {
        @Override
        public void fetchBlocks(String host, int port, String execId, String[] blockIds, BlockFetchingListener listener,
                                DownloadFileManager downloadFileManager) {
            for (String id : blockIds) {
                listener.onBlockFetchFailure(id, new IOException("fell back"));
            }
        }

        @Override
        public void close() {
        }
    }
}

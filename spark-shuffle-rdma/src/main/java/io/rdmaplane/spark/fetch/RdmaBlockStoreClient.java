package io.rdmaplane.spark.fetch;

import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.spark.ShuffleMetrics;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.BlockStoreClient;
import org.apache.spark.network.shuffle.DownloadFileManager;
import org.apache.spark.storage.ShuffleBlockId;

/** One reduce task's block client: RDMA READ where it can, Spark's own client for the rest. */
public final class RdmaBlockStoreClient extends BlockStoreClient {
    /**
     * @param policy    the executor's PolicyClient (shared, not closed here)
     * @param pool      the executor's registered pool for reduce buffers (shared)
     * @param node      the executor's node (to register buffers for blocks over 8 MiB)
     * @param fallback  Spark's own client (blockManager.blockStoreClient())
     * @param addresses executorId -> RDMA address of its ShuffleBlockServer, or null if unknown
     * @param shuffleId the shuffle; blocksByExecutor: executorId -> every ShuffleBlockId of this task there
     */
    public RdmaBlockStoreClient(PolicyClient policy, RegisteredMemoryPool pool, Node node, BlockStoreClient fallback,
            Function<String, InetSocketAddress> addresses, int shuffleId,
            Map<String, List<ShuffleBlockId>> blocksByExecutor, ShuffleMetrics metrics) {
        throw new UnsupportedOperationException("not yet");
    }

    @Override
    public void fetchBlocks(String host, int port, String execId, String[] blockIds, BlockFetchingListener listener,
            DownloadFileManager downloadFileManager) {
        throw new UnsupportedOperationException("not yet");
    }

    /** Ends this task's use of RDMA; the shared Spark client, policy client and pool stay open. */
    @Override
    public void close() {
        throw new UnsupportedOperationException("not yet");
    }
}

package io.rdmaplane.spark.fetch;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.spark.network.buffer.NioManagedBuffer;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.BlockStoreClient;
import org.apache.spark.network.shuffle.DownloadFileManager;

/** Spark's client stand-in: records every fetch and answers each block with its expected bytes. */
final class FakeFallback extends BlockStoreClient {
    /** One per fetchBlocks call: execId, then the block ids. */
    final List<List<String>> calls = Collections.synchronizedList(new ArrayList<>());
    private final Function<String, byte[]> bytes;
    volatile boolean closed;

    FakeFallback(Function<String, byte[]> bytes) {
        this.bytes = bytes;
    }

    @Override
    public void fetchBlocks(String host, int port, String execId, String[] blockIds, BlockFetchingListener listener,
            DownloadFileManager downloadFileManager) {
        List<String> call = new ArrayList<>();
        call.add(execId);
        call.addAll(List.of(blockIds));
        calls.add(call);
        for (String id : blockIds) {
            listener.onBlockFetchSuccess(id, new NioManagedBuffer(ByteBuffer.wrap(bytes.apply(id))));
        }
    }

    /** Every block id the fallback was asked for, in call order. */
    List<String> blocks() {
        List<String> all = new ArrayList<>();
        synchronized (calls) {
            calls.forEach(c -> all.addAll(c.subList(1, c.size())));
        }
        return all;
    }

    @Override
    public void close() {
        closed = true;
    }

    @Override
    public String toString() {
        return "FakeFallback" + Map.of("calls", calls);
    }
}

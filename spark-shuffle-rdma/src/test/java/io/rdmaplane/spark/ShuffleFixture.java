package io.rdmaplane.spark;

import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.faulty.FaultyNode;
import io.rdmaplane.rdma.testing.TestNodes;
import io.rdmaplane.spark.serve.MapOutputStore;
import io.rdmaplane.spark.serve.ShuffleBlockServer;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

/** Test helpers: a serving "executor" over tcp on loopback, and map-output data files of known bytes. */
public final class ShuffleFixture {
    private ShuffleFixture() {
    }

    /** Quick timers so failures are detected within a second or two; every block's CRC32C checked. */
    public static PolicyOptions fastOptions() {
        return PolicyOptions.defaults()
                .withReconnect(Duration.ofMillis(10), Duration.ofMillis(10), Duration.ofMillis(100), 2)
                .withTimeouts(Duration.ofMillis(200), Duration.ofSeconds(2), Duration.ofMillis(300))
                .withChecksumSampleRate(1.0);
    }

    public static Node node() throws TransportException {
        return TestNodes.tcp();
    }

    /** A tcp node a test can inject faults into (cut, stall, corrupt). */
    public static FaultyNode faultyNode() throws TransportException {
        return new FaultyNode(node());
    }

    /** One executor's serving side: node, store, LOCATE server. */
    public static final class Executor implements AutoCloseable {
        public final String id;
        public final Node node;
        public final ShuffleMetrics metrics = new ShuffleMetrics();
        public final MapOutputStore store;
        public final ShuffleBlockServer server;
        public final AtomicInteger locatesAnswered = new AtomicInteger();

        public Executor(String id, long capacity) throws TransportException {
            this(id, capacity, true);
        }

        /** @param mapFiles serve payloads from the data files' mappings (true) or copies */
        public Executor(String id, long capacity, boolean mapFiles) throws TransportException {
            this.id = id;
            this.node = node();
            this.store = new MapOutputStore(node, capacity, metrics, mapFiles);
            this.server = new ShuffleBlockServer(node, fastOptions(), metrics.policy(), store).start();
            server.setLocateListener(locatesAnswered::incrementAndGet);
        }

        @Override
        public void close() {
            server.close();
            store.close();
            node.close();
        }
    }

    /** The bytes of some views, concatenated. */
    public static byte[] bytes(java.util.List<java.nio.ByteBuffer> views) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        for (java.nio.ByteBuffer view : views) {
            byte[] part = new byte[view.remaining()];
            view.duplicate().get(part);
            out.writeBytes(part);
        }
        return out.toByteArray();
    }

    /** The bytes of block (shuffle, map, reduce) of the given length: seeded, so tests can recompute them. */
    public static byte[] blockBytes(int shuffleId, long mapId, int reduceId, long length) {
        byte[] bytes = new byte[(int) length];
        new Random(shuffleId * 1_000_003L + mapId * 7919L + reduceId).nextBytes(bytes);
        return bytes;
    }

    /** A map output's data file: the blocks of every partition back to back, as Spark writes it. */
    public static File dataFile(Path dir, int shuffleId, long mapId, long[] lengths) throws IOException {
        File file = dir.resolve("shuffle_" + shuffleId + "_" + mapId + "_0.data").toFile();
        try (OutputStream out = Files.newOutputStream(file.toPath())) {
            for (int r = 0; r < lengths.length; r++) {
                out.write(blockBytes(shuffleId, mapId, r, lengths[r]));
            }
        }
        return file;
    }
}

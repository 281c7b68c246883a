package io.rdmaplane.it.packaging;

import io.rdmaplane.rdma.memory.PoolOptions;
import io.rdmaplane.rdma.memory.RegisteredBuffer;
import io.rdmaplane.rdma.memory.RegisteredMemoryPool;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.verbs.DisniRuntime;
import io.rdmaplane.rdma.provider.verbs.VerbsProvider;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Runs inside {@link ShadedPluginJarTest}'s isolated class loader (defined there from this class
 * file, with the shaded jar as parent): what an HDFS client does on its first RDMA read, namely pick a
 * provider, register a memory pool (an Arrow RootAllocator inside) and watch it with the metrics.
 * Uses only io.rdmaplane types, which the shade does not rename; relocated types
 * (Arrow, metrics) are reached by reflection and reported by class name.
 */
public final class ShadedJarProbe {
    private ShadedJarProbe() {
    }

    public static Map<String, String> run() throws Exception {
        Map<String, String> facts = new LinkedHashMap<>();
        // extracts and loads libdisni.so from the jar (null cause), or says why it cannot (e.g. no libibverbs)
        facts.put("disniCause", String.valueOf(DisniRuntime.unavailabilityCause()));
        facts.put("verbsCause", String.valueOf(VerbsProvider.INSTANCE.unavailabilityCause()));
        facts.put("providers", String.valueOf(Providers.names()));
        try (Node node = Providers.select(Providers.AUTO).createNode(NodeOptions.loopback())) {
            facts.put("provider", node.providerName());
            RegisteredMemoryPool pool = new RegisteredMemoryPool(node, new PoolOptions(8 << 20, Duration.ofSeconds(1)));
            PolicyMetrics metrics = new PolicyMetrics();
            metrics.watchPool("probe", pool);
            Method registry = PolicyMetrics.class.getMethod("registry");
            facts.put("metricRegistry", registry.invoke(metrics).getClass().getName());
            try (RegisteredBuffer buffer = pool.acquire(4096)) {
                buffer.buffer().putLong(0, 42L);
                facts.put("buffer", String.valueOf(buffer.capacity()));
            }
            Method newArrowAllocator = RegisteredMemoryPool.class.getMethod("newArrowAllocator", String.class, long.class);
            AutoCloseable allocator = (AutoCloseable) newArrowAllocator.invoke(pool, "probe", 1L << 20);
            facts.put("arrowAllocator", allocator.getClass().getName());
            // the (relocated) BufferAllocator interface: the allocator's own class is package-private
            Object arrowBuf = newArrowAllocator.getReturnType().getMethod("buffer", long.class).invoke(allocator, 1024L);
            facts.put("arrowBuf", arrowBuf.getClass().getName());
            ((AutoCloseable) arrowBuf).close();
            allocator.close();
            pool.close();
        }
        return facts;
    }
}

package io.rdmaplane.it.packaging;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Runs inside {@link ShadedPluginJarTest}'s isolated class loader (defined there from this class
 * file, with the shaded jar as parent): what an HDFS client does on its first RDMA read, namely pick a
 * provider, register a memory pool (an Arrow RootAllocator inside) and watch it with the metrics.
 * The jar relocates common-rdma to {@value #RELOCATED} (and Arrow and metrics), so every type of it is
 * reached by reflection under that name, and relocated types are reported by class name.
 */
public final class ShadedJarProbe {
    /** Where the HDFS plug-in jar puts common-rdma's {@code io.rdmaplane.rdma} (hdfs-transfer-rdma/pom.xml). */
    static final String RELOCATED = "io.rdmaplane.shaded.rdma.";

    private ShadedJarProbe() {
    }

    public static Map<String, String> run() throws Exception {
        Map<String, String> facts = new LinkedHashMap<>();
        // extracts and loads libdisni.so from the jar (null cause), or says why it cannot (e.g. no libibverbs)
        facts.put("disniCause", String.valueOf(call(type("provider.verbs.DisniRuntime"), null, "unavailabilityCause")));
        Object verbs = type("provider.verbs.VerbsProvider").getField("INSTANCE").get(null);
        facts.put("verbsCause", String.valueOf(call(verbs.getClass(), verbs, "unavailabilityCause")));
        Class<?> providers = type("provider.Providers");
        facts.put("providers", String.valueOf(call(providers, null, "names")));
        Object provider = providers.getMethod("select", String.class).invoke(null, "auto");
        Object options = call(type("provider.NodeOptions"), null, "loopback");
        try (AutoCloseable node = (AutoCloseable) call(provider.getClass(), provider, "createNode", options)) {
            facts.put("provider", String.valueOf(call(node.getClass(), node, "providerName")));
            Class<?> poolType = type("memory.RegisteredMemoryPool");
            Object poolOptions = constructor(type("memory.PoolOptions"), 2).newInstance(8L << 20, Duration.ofSeconds(1));
            Object pool = constructor(poolType, 2).newInstance(node, poolOptions);
            Class<?> metricsType = type("policy.PolicyMetrics");
            Object metrics = constructor(metricsType, 0).newInstance();
            call(metricsType, metrics, "watchPool", "probe", pool);
            facts.put("metricRegistry", call(metricsType, metrics, "registry").getClass().getName());
            try (AutoCloseable buffer = (AutoCloseable) call(poolType, pool, "acquire", 4096)) {
                ((java.nio.ByteBuffer) call(buffer.getClass(), buffer, "buffer")).putLong(0, 42L);
                facts.put("buffer", String.valueOf(call(buffer.getClass(), buffer, "capacity")));
            }
            Method newArrowAllocator = poolType.getMethod("newArrowAllocator", String.class, long.class);
            AutoCloseable allocator = (AutoCloseable) newArrowAllocator.invoke(pool, "probe", 1L << 20);
            facts.put("arrowAllocator", allocator.getClass().getName());
            // the (relocated) BufferAllocator interface: the allocator's own class is package-private
            Object arrowBuf = newArrowAllocator.getReturnType().getMethod("buffer", long.class).invoke(allocator, 1024L);
            facts.put("arrowBuf", arrowBuf.getClass().getName());
            ((AutoCloseable) arrowBuf).close();
            allocator.close();
            ((AutoCloseable) pool).close();
        }
        return facts;
    }

    private static Class<?> type(String name) throws ClassNotFoundException {
        return Class.forName(RELOCATED + name, true, ShadedJarProbe.class.getClassLoader());
    }

    private static Constructor<?> constructor(Class<?> type, int parameters) {
        for (Constructor<?> c : type.getConstructors()) {
            if (c.getParameterCount() == parameters) {
                return c;
            }
        }
        throw new IllegalArgumentException("no public constructor of " + parameters + " parameters in " + type);
    }

    /**
     * Calls the public method {@code name} taking {@code args.length} parameters, found on {@code type} or its public
     * supertypes (the class of an object may be package-private while the interface it implements is public).
     */
    private static Object call(Class<?> type, Object target, String name, Object... args) throws Exception {
        Deque<Class<?>> todo = new ArrayDeque<>();
        todo.add(type);
        while (!todo.isEmpty()) {
            Class<?> t = todo.poll();
            if (Modifier.isPublic(t.getModifiers())) {
                for (Method m : t.getMethods()) {
                    if (m.getName().equals(name) && m.getParameterCount() == args.length
                            && Modifier.isPublic(m.getDeclaringClass().getModifiers())) {
                        return m.invoke(target, args);
                    }
                }
            }
            if (t.getSuperclass() != null) {
                todo.add(t.getSuperclass());
            }
            todo.addAll(java.util.List.of(t.getInterfaces()));
        }
        throw new NoSuchMethodException(type.getName() + "." + name + " with " + args.length + " parameters");
    }
}

package io.rdmaplane.spark;

import io.rdmaplane.rdma.config.Conf;
import io.rdmaplane.rdma.config.ConfigKey;
import io.rdmaplane.rdma.config.ConfigRegistry;
import io.rdmaplane.rdma.config.PolicyKeys;
import io.rdmaplane.rdma.config.TransportKeys;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import scala.Tuple2;

/** The settings of the Spark shuffle plug-in, read from SparkConf. */
public final class SparkRdmaConfig {
    public static final ConfigKey<Boolean> ENABLED = ConfigKey.booleanKey("enabled", true,
            "Whether RdmaShuffleManager serves and fetches shuffle blocks over RDMA; false makes it behave exactly as Spark's sort shuffle.");
    public static final ConfigKey<Long> MAP_OUTPUT_CAPACITY = ConfigKey.byteSizeKey("mapOutput.capacity", "1g", "0", "1t",
            "Registered (pinned) bytes for map outputs per executor; a map output over the cap is not published and is served by Netty (0 = publish none).");
    public static final ConfigKey<Boolean> MAP_OUTPUT_MAP_FILES = ConfigKey.booleanKey("mapOutput.mapFiles", true,
            "Serve map outputs from a read-only mapping of Spark's data file, registered as it is (no copy; only the Arrow framing is in memory). Where the provider cannot register file mappings (verbs on kernels before 6.2), or when false, map outputs are copied into registered memory.");
    public static final ConfigKey<Integer> MAP_OUTPUT_MAX_PUBLISH_FAILURES = ConfigKey.intKey("mapOutput.maxPublishFailures", 3, 0,
            1_000_000, "Consecutive failures to register map outputs (a broken data node) after which this executor stops publishing"
                    + " them, logged once: Netty serves every later map output (0 = never stop).");
    public static final ConfigKey<Long> LOCATE_INLINE_THRESHOLD = ConfigKey.byteSizeKey("locate.inlineThreshold", "4k", "0", "60k",
            "Blocks (Arrow-framed) of fewer bytes than this travel inline in the LOCATE answer, with no READ, while the answer has room; larger blocks are one READ each. 0 = never inline. The default is the crossover LocateInlineBenchmark measured on tcp (see README).");
    public static final ConfigKey<Long> MAX_BLOCKS_PER_SHUFFLE = ConfigKey.longKey("maxBlocksPerShuffle", 50_000_000L, 0,
            Long.MAX_VALUE, "A shuffle with more map tasks x reduce partitions than this uses Spark's standard path (logged once per shuffle).");
    public static final ConfigKey<Integer> REGISTRY_PORT = ConfigKey.intKey("registry.port", 0, 0, 65535,
            "Port of the driver's executor registry, where executors register their RDMA address (0 = any free port).");
    public static final ConfigKey<String> REGISTRY_ADDRESS = ConfigKey.stringKey("registry.address", "",
            Pattern.compile("\\S+:[0-9]{1,5}"), "host:port",
            "Set by the driver (do not set it): where executors find the registry. Unset on an executor means it uses Spark's sort shuffle.")
            .internal();
    public static final ConfigKey<String> REGISTRY_PROVIDER = TransportKeys.providerKey("registry.provider", "tcp",
            "Transport of the driver's executor registry and of the executors' clients of it: control messages only, whatever"
                    + " provider carries the data; tcp works everywhere.");

    private static final List<ConfigKey<?>> SPARK_KEYS = List.of(ENABLED, MAP_OUTPUT_CAPACITY, MAP_OUTPUT_MAP_FILES,
            MAP_OUTPUT_MAX_PUBLISH_FAILURES, LOCATE_INLINE_THRESHOLD, MAX_BLOCKS_PER_SHUFFLE,
            REGISTRY_PORT, REGISTRY_ADDRESS, REGISTRY_PROVIDER);

    public static final ConfigRegistry REGISTRY = new ConfigRegistry("Spark shuffle", "spark.shuffle.rdma.",
            Stream.concat(PolicyKeys.SHARED.stream(), SPARK_KEYS.stream()).toList());

    private SparkRdmaConfig() {
    }

    /**
     * The plug-in's settings in {@code conf}, validated the way every product's are (read on each
     * get, so the registry address the driver sets later is seen).
     *
     * @throws io.rdmaplane.rdma.config.ConfigException naming every unknown key and bad value
     */
    public static Conf validated(SparkConf conf) {
        List<String> names = new ArrayList<>();
        for (Tuple2<String, String> entry : conf.getAll()) {
            names.add(entry._1());
        }
        return REGISTRY.validate(names, name -> conf.contains(name) ? conf.get(name) : null);
    }

    /** Parses a {@code host:port} the registry published. */
    static InetSocketAddress parseAddress(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        String host = hostPort.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        return new InetSocketAddress(host, Integer.parseInt(hostPort.substring(colon + 1)));
    }

    /** Formats an address as {@code host:port} (IPv6 in brackets). */
    static String format(InetSocketAddress address) {
        String host = address.getAddress() != null ? address.getAddress().getHostAddress() : address.getHostString();
        return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + address.getPort();
    }
}

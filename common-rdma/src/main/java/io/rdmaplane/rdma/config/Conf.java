package io.rdmaplane.rdma.config;

import java.util.Objects;
import java.util.function.Function;

/**
 * A {@link ConfigRegistry} bound to where settings live (a SparkConf, a Hadoop Configuration),
 * made by {@link ConfigRegistry#validate}. Values are read and checked again on each {@link #get},
 * so a value changed after validation cannot slip through either.
 */
public final class Conf {
    private final ConfigRegistry registry;
    private final Function<String, String> lookup;

    Conf(ConfigRegistry registry, Function<String, String> lookup) {
        this.registry = registry;
        this.lookup = Objects.requireNonNull(lookup, "lookup");
    }

    /** The key's full name here (prefix + suffix), for messages about its value. */
    public String name(ConfigKey<?> key) {
        return registry.fullName(key);
    }

    /**
     * The key's value, or its default when unset.
     *
     * @throws ConfigException          when the key is set to a value it does not allow
     * @throws IllegalArgumentException when the key is not in this registry
     */
    public <T> T get(ConfigKey<T> key) {
        String name = registry.fullName(key);
        String raw = lookup.apply(name);
        return raw == null ? key.defaultValue() : key.parse(name, raw);
    }
}

package io.rdmaplane.rdma.config;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;

/**
 * The settings of one product (e.g. Spark shuffle): a title, a name prefix and its keys in
 * the order the reference lists them. Every name under the prefix must be a registered key.
 */
public final class ConfigRegistry {
    private final String title;
    private final String prefix;
    private final List<ConfigKey<?>> keys;

    public ConfigRegistry(String title, String prefix, List<ConfigKey<?>> keys) {
        this.title = Objects.requireNonNull(title, "title");
        this.prefix = Objects.requireNonNull(prefix, "prefix");
        this.keys = List.copyOf(keys);
        if (!prefix.endsWith(".")) {
            throw new IllegalArgumentException("prefix must end with '.': " + prefix);
        }
        Set<String> suffixes = new HashSet<>();
        for (ConfigKey<?> key : this.keys) {
            if (!suffixes.add(key.suffix())) {
                throw new IllegalArgumentException("duplicate key " + prefix + key.suffix());
            }
        }
    }

    public String title() {
        return title;
    }

    public String prefix() {
        return prefix;
    }

    public List<ConfigKey<?>> keys() {
        return keys;
    }

    /** @throws IllegalArgumentException when the key is not registered here */
    public String fullName(ConfigKey<?> key) {
        // Identity, not suffix: a look-alike key from elsewhere would carry other bounds.
        if (keys.stream().noneMatch(k -> k == key)) {
            throw new IllegalArgumentException("key '" + key.suffix() + "' is not in the " + title + " registry (" + prefix + ")");
        }
        return prefix + key.suffix();
    }

    /**
     * The settings bound without checks: each {@link Conf#get} parses its key then. For tests and
     * tools that build a few settings by hand; products read theirs through {@link #validate}.
     *
     * @param lookup returns the value of a full key name, or null when it is unset
     */
    public Conf bind(Function<String, String> lookup) {
        return new Conf(this, lookup);
    }

    /**
     * The one way a product reads its settings (Spark driver and executors, HDFS DataNode and
     * client): every name under the prefix must be a registered key, so a typo is an error instead
     * of a silently ignored setting, and every registered key that is set must hold a value it
     * allows. All problems are reported at once, each naming its key: the value and what is
     * allowed, or the closest registered key.
     *
     * @param presentNames every name that is set, e.g. the keys of SparkConf.getAll(); others than
     *                     this registry's are ignored
     * @param lookup       returns the value of a full key name, or null when it is unset; the
     *                     returned Conf keeps reading through it
     * @throws ConfigException naming every unknown key and every bad value
     */
    public Conf validate(Iterable<String> presentNames, Function<String, String> lookup) {
        List<String> problems = new ArrayList<>();
        for (String name : presentNames) {
            if (name.startsWith(prefix) && keys.stream().noneMatch(k -> name.equals(prefix + k.suffix()))) {
                problems.add("unknown key " + name + closestSuggestion(name.substring(prefix.length())));
            }
        }
        Conf conf = bind(lookup);
        for (ConfigKey<?> key : keys) {
            try {
                conf.get(key);
            } catch (ConfigException bad) {
                problems.add(bad.getMessage());
            }
        }
        if (!problems.isEmpty()) {
            throw new ConfigException(String.join("; ", problems) + " (" + title + " settings are listed in conf/configuration.md)");
        }
        return conf;
    }

    private String closestSuggestion(String suffix) {
        ConfigKey<?> best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (ConfigKey<?> key : keys) {
            // Case-insensitive, so queuedepth points to queueDepth at distance 0.
            int d = editDistance(suffix.toLowerCase(Locale.ROOT), key.suffix().toLowerCase(Locale.ROOT));
            if (d < bestDistance) {
                best = key;
                bestDistance = d;
            }
        }
        return best == null ? "" : " (did you mean " + prefix + best.suffix() + "?)";
    }

    /** Levenshtein distance: insertions, deletions and substitutions each cost 1. */
    static int editDistance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitution = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                current[j] = Math.min(substitution, Math.min(previous[j], current[j - 1]) + 1);
            }
            int[] swap = previous;
            previous = current;
            current = swap;
        }
        return previous[b.length()];
    }
}

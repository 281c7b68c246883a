package io.rdmaplane.rdma.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ConfigRegistryTest {
    private static final ConfigKey<Integer> DEPTH = ConfigKey.intKey("queueDepth", 256, 1, 16384, "depth");
    private static final ConfigKey<Long> CAPACITY = ConfigKey.byteSizeKey("pool.capacity", "256m", "8m", "1t", "capacity");
    private static final ConfigKey<Duration> WAIT = ConfigKey.durationKey("pool.acquireTimeout", "5s", "0ms", "10m", "wait");
    private static final ConfigRegistry REGISTRY = new ConfigRegistry("Test", "x.rdma.", List.of(DEPTH, CAPACITY, WAIT));

    @Test
    void fullNameIsPrefixPlusSuffix() {
        assertEquals("x.rdma.pool.capacity", REGISTRY.fullName(CAPACITY));
        assertEquals(List.of(DEPTH, CAPACITY, WAIT), REGISTRY.keys());
        assertEquals("Test", REGISTRY.title());
        assertEquals("x.rdma.", REGISTRY.prefix());
    }

    @Test
    void absentKeysGiveDefaultsAndPresentOnesAreParsed() {
        Map<String, String> settings = Map.of("x.rdma.pool.capacity", "1g");
        List<String> asked = new ArrayList<>();
        Conf conf = REGISTRY.bind(name -> {
            asked.add(name);
            return settings.get(name);
        });
        assertEquals(256, conf.get(DEPTH));
        assertEquals(1L << 30, conf.get(CAPACITY));
        assertEquals(Duration.ofSeconds(5), conf.get(WAIT));
        assertEquals(List.of("x.rdma.queueDepth", "x.rdma.pool.capacity", "x.rdma.pool.acquireTimeout"), asked);
    }

    @Test
    void aPresentBadValueFailsInsteadOfFallingBackToTheDefault() {
        Conf conf = REGISTRY.bind(Map.of("x.rdma.queueDepth", "0")::get);
        ConfigException e = assertThrows(ConfigException.class, () -> conf.get(DEPTH));
        assertEquals("x.rdma.queueDepth = '0': expected an integer between 1 and 16384", e.getMessage());
    }

    @Test
    void rejectsKeysNotInTheRegistry() {
        // Same suffix, other bounds: only the registered instance is accepted.
        ConfigKey<Integer> lookAlike = ConfigKey.intKey("queueDepth", 1, 1, 2, "other");
        Conf conf = REGISTRY.bind(name -> null);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> conf.get(lookAlike));
        assertEquals("key 'queueDepth' is not in the Test registry (x.rdma.)", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> REGISTRY.fullName(lookAlike));
    }

    /** Validates {@code names} (each set to a value its key allows, or to "x" when not registered). */
    private static Conf validate(ConfigRegistry registry, String... names) {
        Map<String, String> settings = new LinkedHashMap<>();
        for (String name : names) {
            settings.put(name, registry.keys().stream().filter(k -> name.equals(registry.prefix() + k.suffix()))
                    .map(ConfigKey::defaultText).findFirst().orElse("x"));
        }
        return registry.validate(settings.keySet(), settings::get);
    }

    @Test
    void registeredAndForeignNamesAreNotUnknown() {
        validate(REGISTRY, "x.rdma.queueDepth", "x.rdma.pool.capacity", "x.other.queueDepth", "spark.master",
                "x.rdmaqueueDepth");
        validate(REGISTRY);
    }

    @Test
    void aTypoIsAnErrorThatSuggestsTheClosestKey() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> validate(REGISTRY, "x.rdma.queueDepth", "x.rdma.pool.capacty"));
        assertEquals("unknown key x.rdma.pool.capacty (did you mean x.rdma.pool.capacity?)"
                + " (Test settings are listed in conf/configuration.md)", e.getMessage());
    }

    @Test
    void wrongCaseSuggestsTheRightlyCasedKey() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> validate(REGISTRY, "x.rdma.pool.acquiretimeout"));
        assertEquals("unknown key x.rdma.pool.acquiretimeout (did you mean x.rdma.pool.acquireTimeout?)"
                + " (Test settings are listed in conf/configuration.md)", e.getMessage());
    }

    @Test
    void everyUnknownKeyIsNamed() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> validate(REGISTRY, "x.rdma.queueDepht", "x.rdma.pool.cap", "x.rdma."));
        assertEquals("unknown key x.rdma.queueDepht (did you mean x.rdma.queueDepth?);"
                + " unknown key x.rdma.pool.cap (did you mean x.rdma.pool.capacity?);"
                + " unknown key x.rdma. (did you mean x.rdma.queueDepth?)"
                + " (Test settings are listed in conf/configuration.md)", e.getMessage());
    }

    @Test
    void anEmptyRegistryReportsUnknownKeysWithoutSuggestion() {
        ConfigRegistry empty = new ConfigRegistry("Empty", "e.", List.of());
        ConfigException e = assertThrows(ConfigException.class, () -> validate(empty, "e.x"));
        assertEquals("unknown key e.x (Empty settings are listed in conf/configuration.md)", e.getMessage());
    }

    @Test
    void validationChecksEveryValueAndReportsUnknownKeysAndBadValuesAtOnce() {
        Map<String, String> settings = new LinkedHashMap<>();
        settings.put("x.rdma.queueDepth", "0");
        settings.put("x.rdma.pool.capacty", "1g");
        settings.put("x.rdma.pool.acquireTimeout", "soon");
        ConfigException e = assertThrows(ConfigException.class, () -> REGISTRY.validate(settings.keySet(), settings::get));
        assertEquals("unknown key x.rdma.pool.capacty (did you mean x.rdma.pool.capacity?);"
                + " x.rdma.queueDepth = '0': expected an integer between 1 and 16384;"
                + " x.rdma.pool.acquireTimeout = 'soon': expected a duration like 200ms, 2s, 1m between 0ms and 10m"
                + " (Test settings are listed in conf/configuration.md)", e.getMessage());
    }

    @Test
    void aBadValueIsFoundThroughTheLookupEvenWhenItsNameIsNotListed() {
        // e.g. a Hadoop value that comes from a default resource or a deprecated name
        ConfigException e = assertThrows(ConfigException.class,
                () -> REGISTRY.validate(List.of(), Map.of("x.rdma.pool.capacity", "7m")::get));
        assertEquals("x.rdma.pool.capacity = '7m': expected a byte size like 64k, 8m, 1g between 8m and 1t"
                + " (Test settings are listed in conf/configuration.md)", e.getMessage());
    }

    @Test
    void theValidatedConfReadsThroughTheLookup() {
        Map<String, String> settings = new HashMap<>(Map.of("x.rdma.queueDepth", "8"));
        Conf conf = REGISTRY.validate(settings.keySet(), settings::get);
        assertEquals(8, conf.get(DEPTH));
        settings.put("x.rdma.queueDepth", "9"); // as the Spark driver adds its registry's address after start-up
        assertEquals(9, conf.get(DEPTH));
        settings.put("x.rdma.queueDepth", "-1");
        assertThrows(ConfigException.class, () -> conf.get(DEPTH), "a later bad value is an error too");
    }

    @Test
    void malformedRegistriesAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> new ConfigRegistry("T", "x.rdma", List.of(DEPTH)));
        ConfigKey<Integer> duplicate = ConfigKey.intKey("queueDepth", 1, 1, 2, "again");
        assertThrows(IllegalArgumentException.class, () -> new ConfigRegistry("T", "x.", List.of(DEPTH, duplicate)));
    }

    @Test
    void editDistanceCountsInsertionsDeletionsAndSubstitutions() {
        assertEquals(0, ConfigRegistry.editDistance("port", "port"));
        assertEquals(3, ConfigRegistry.editDistance("kitten", "sitting"));
        assertEquals(4, ConfigRegistry.editDistance("", "port"));
        assertEquals(4, ConfigRegistry.editDistance("port", ""));
        assertEquals(2, ConfigRegistry.editDistance("queueDepht", "queueDepth"));
    }
}

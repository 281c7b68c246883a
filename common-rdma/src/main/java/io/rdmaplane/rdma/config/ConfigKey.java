package io.rdmaplane.rdma.config;

import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One setting: its name suffix (the registry adds the prefix), type, default, bounds, a
 * one-line doc and who sets it ({@link Visibility}). Values are trimmed, then parsed strictly: a
 * present value that does not parse or is out of bounds throws {@link ConfigException}; it is
 * never replaced by the default.
 *
 * @param <T> Boolean, Integer, Long (plain or a byte size, in bytes), Double, Duration, or
 *            String (a choice, normalized to lower case)
 */
public final class ConfigKey<T> {
    /** Who sets a key. Both kinds are registered and validated alike; only user keys go into the templates. */
    public enum Visibility {
        /** Set by users: listed in the reference and in the templates. */
        USER,
        /** Set by the plug-in itself or by tests, never by users: listed apart in the reference, left out of templates. */
        INTERNAL
    }

    /** The byte-size grammar, shown in the generated reference. */
    public static final String BYTE_SIZE_GRAMMAR = "a whole number followed by an optional unit, case-insensitive:"
            + " none or `b` (bytes), `k`/`kb`, `m`/`mb`, `g`/`gb`, `t`/`tb`; units are powers of 1024 (`64k` = 65536)."
            + " No fractions, signs or spaces between number and unit.";
    /** The duration grammar, shown in the generated reference. */
    public static final String DURATION_GRAMMAR = "a whole number followed by an optional unit, case-insensitive:"
            + " `ms`, `s`, `m` (minutes), `h`; a plain number is milliseconds (`200` = `200ms`)."
            + " No fractions, signs or spaces between number and unit.";

    private static final Pattern BYTE_SIZE = Pattern.compile("([0-9]+)(b|k|kb|m|mb|g|gb|t|tb)?");
    private static final Pattern DURATION = Pattern.compile("([0-9]+)(ms|s|m|h)?");
    private static final Pattern INTEGER = Pattern.compile("[+-]?[0-9]+");
    // Double.parseDouble alone would also take NaN, Infinity, hex floats and "1d".
    private static final Pattern DECIMAL = Pattern.compile("[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?");

    private final String suffix;
    private final String type;
    private final String defaultText;
    private final String allowed;
    private final String expected;
    private final String doc;
    private final Visibility visibility;
    /** Returns the value, or null when the text is unparseable or out of bounds. */
    private final Function<String, T> parser;
    private final T defaultValue;

    private ConfigKey(String suffix, String type, String defaultText, String allowed, String expected, String doc,
                      Function<String, T> parser) {
        this(suffix, type, defaultText, allowed, expected, doc, Visibility.USER, parser);
    }

    private ConfigKey(String suffix, String type, String defaultText, String allowed, String expected, String doc,
                      Visibility visibility, Function<String, T> parser) {
        this.suffix = Objects.requireNonNull(suffix, "suffix");
        this.type = type;
        this.defaultText = defaultText;
        this.allowed = allowed;
        this.expected = expected;
        this.doc = Objects.requireNonNull(doc, "doc");
        this.visibility = Objects.requireNonNull(visibility, "visibility");
        this.parser = parser;
        // Parsing the default's own text proves the reference shows a value the key accepts.
        this.defaultValue = parser.apply(defaultText);
        if (defaultValue == null) {
            throw new IllegalArgumentException("default of '" + suffix + "' is '" + defaultText + "', not " + expected);
        }
    }

    public static ConfigKey<Boolean> booleanKey(String suffix, boolean defaultValue, String doc) {
        return new ConfigKey<>(suffix, "boolean", Boolean.toString(defaultValue), "true, false", "true or false", doc,
                s -> s.equalsIgnoreCase("true") ? Boolean.TRUE : s.equalsIgnoreCase("false") ? Boolean.FALSE : null);
    }

    public static ConfigKey<Integer> intKey(String suffix, int defaultValue, int min, int max, String doc) {
        return new ConfigKey<>(suffix, "int", Integer.toString(defaultValue), min + " .. " + max,
                "an integer between " + min + " and " + max, doc,
                bounded(s -> INTEGER.matcher(s).matches() ? parseOrNull(s, Integer::valueOf) : null, min, max));
    }

    public static ConfigKey<Long> longKey(String suffix, long defaultValue, long min, long max, String doc) {
        return new ConfigKey<>(suffix, "long", Long.toString(defaultValue), min + " .. " + max,
                "an integer between " + min + " and " + max, doc,
                bounded(s -> INTEGER.matcher(s).matches() ? parseOrNull(s, Long::valueOf) : null, min, max));
    }

    public static ConfigKey<Double> doubleKey(String suffix, double defaultValue, double min, double max, String doc) {
        return new ConfigKey<>(suffix, "double", Double.toString(defaultValue), min + " .. " + max,
                "a number between " + min + " and " + max, doc,
                // + 0.0 turns -0.0 into 0.0, which Double.compareTo would put below a bound of 0.
                bounded(s -> DECIMAL.matcher(s).matches() ? Double.parseDouble(s) + 0.0 : null, min, max));
    }

    /** A size in bytes written in the {@link #BYTE_SIZE_GRAMMAR}, e.g. {@code byteSizeKey("x", "64k", "1k", "16m", ...)}. */
    public static ConfigKey<Long> byteSizeKey(String suffix, String defaultValue, String min, String max, String doc) {
        Long low = grammarBound(min, ConfigKey::parseByteSize);
        Long high = grammarBound(max, ConfigKey::parseByteSize);
        return new ConfigKey<>(suffix, "byte size", defaultValue, min + " .. " + max,
                "a byte size like 64k, 8m, 1g between " + min + " and " + max, doc,
                bounded(ConfigKey::parseByteSize, low, high));
    }

    /** A duration written in the {@link #DURATION_GRAMMAR}, e.g. {@code durationKey("x", "2s", "10ms", "10m", ...)}. */
    public static ConfigKey<Duration> durationKey(String suffix, String defaultValue, String min, String max, String doc) {
        Duration low = grammarBound(min, ConfigKey::parseDuration);
        Duration high = grammarBound(max, ConfigKey::parseDuration);
        return new ConfigKey<>(suffix, "duration", defaultValue, min + " .. " + max,
                "a duration like 200ms, 2s, 1m between " + min + " and " + max, doc,
                bounded(ConfigKey::parseDuration, low, high));
    }

    /** One of {@code allowed} (lower case), matched case-insensitively; the value is returned in lower case. */
    public static ConfigKey<String> choiceKey(String suffix, String defaultValue, List<String> allowed, String doc) {
        List<String> values = List.copyOf(allowed);
        for (String v : values) {
            if (!v.equals(v.toLowerCase(Locale.ROOT))) {
                throw new IllegalArgumentException("choices of '" + suffix + "' must be lower case: " + v);
            }
        }
        String list = String.join(", ", values);
        return new ConfigKey<>(suffix, "choice", defaultValue, list, "one of " + list, doc, s -> {
            String v = s.toLowerCase(Locale.ROOT);
            return values.contains(v) ? v : null;
        });
    }

    /**
     * Free text that must match {@code pattern} entirely (after trimming), e.g. an identifier or
     * {@code host:port}; an empty default means unset. The value is returned as written (trimmed).
     *
     * @param allowed how the reference describes the allowed values, e.g. "an executor id"
     */
    public static ConfigKey<String> stringKey(String suffix, String defaultValue, Pattern pattern, String allowed, String doc) {
        Objects.requireNonNull(pattern, "pattern");
        return new ConfigKey<>(suffix, "string", defaultValue, allowed, allowed, doc,
                s -> s.isEmpty() || pattern.matcher(s).matches() ? s : null);
    }

    /** This key, set by the plug-in itself or by tests rather than by users (see {@link Visibility#INTERNAL}). */
    public ConfigKey<T> internal() {
        return new ConfigKey<>(suffix, type, defaultText, allowed, expected, doc, Visibility.INTERNAL, parser);
    }

    public String suffix() {
        return suffix;
    }

    public Visibility visibility() {
        return visibility;
    }

    /** The type as the reference shows it, e.g. "byte size". */
    public String type() {
        return type;
    }

    public T defaultValue() {
        return defaultValue;
    }

    /** The default as written in configuration, e.g. "64k". */
    public String defaultText() {
        return defaultText;
    }

    /** The allowed range or values, e.g. "1k .. 16m" or "auto, tcp". */
    public String allowed() {
        return allowed;
    }

    public String doc() {
        return doc;
    }

    /**
     * Parses a present value.
     *
     * @param fullName the key's full name (prefix + suffix), for the error message
     * @throws ConfigException when the value is unparseable or not allowed
     */
    public T parse(String fullName, String raw) {
        T value = parser.apply(raw.strip());
        if (value == null) {
            throw new ConfigException(fullName + " = '" + raw + "': expected " + expected);
        }
        return value;
    }

    @Override
    public String toString() {
        return suffix;
    }

    private static <V extends Comparable<V>> Function<String, V> bounded(Function<String, V> parse, V min, V max) {
        return s -> {
            V v = parse.apply(s);
            return v != null && v.compareTo(min) >= 0 && v.compareTo(max) <= 0 ? v : null;
        };
    }

    private static <V> V grammarBound(String text, Function<String, V> parse) {
        V v = parse.apply(text);
        if (v == null) {
            throw new IllegalArgumentException("bad bound '" + text + "'");
        }
        return v;
    }

    private static <V> V parseOrNull(String s, Function<String, V> parse) {
        try {
            return parse.apply(s);
        } catch (NumberFormatException tooLarge) {
            return null;
        }
    }

    /** Bytes, or null when not in the grammar or larger than a long. */
    private static Long parseByteSize(String s) {
        Matcher m = BYTE_SIZE.matcher(s.toLowerCase(Locale.ROOT));
        if (!m.matches()) {
            return null;
        }
        String unit = m.group(2) == null ? "b" : m.group(2);
        int shift = switch (unit.charAt(0)) {
            case 'k' -> 10;
            case 'm' -> 20;
            case 'g' -> 30;
            case 't' -> 40;
            default -> 0;
        };
        Long number = parseOrNull(m.group(1), Long::valueOf);
        // multiplyExact, not <<, so 99999999999g is an error instead of a wrapped value.
        return number == null ? null : exactOrNull(() -> Math.multiplyExact(number, 1L << shift));
    }

    /** The duration, or null when not in the grammar or longer than Long.MAX_VALUE milliseconds. */
    private static Duration parseDuration(String s) {
        Matcher m = DURATION.matcher(s.toLowerCase(Locale.ROOT));
        if (!m.matches()) {
            return null;
        }
        long millisPerUnit = switch (m.group(2) == null ? "ms" : m.group(2)) {
            case "s" -> 1_000L;
            case "m" -> 60_000L;
            case "h" -> 3_600_000L;
            default -> 1L;
        };
        Long number = parseOrNull(m.group(1), Long::valueOf);
        Long millis = number == null ? null : exactOrNull(() -> Math.multiplyExact(number, millisPerUnit));
        return millis == null ? null : Duration.ofMillis(millis);
    }

    private static Long exactOrNull(LongSupplier product) {
        try {
            return product.getAsLong();
        } catch (ArithmeticException overflow) {
            return null;
        }
    }
}

package io.rdmaplane.rdma.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class ConfigKeyTest {
    private static final ConfigKey<Boolean> FLAG = ConfigKey.booleanKey("flag", true, "a flag");
    private static final ConfigKey<Integer> PORT = ConfigKey.intKey("port", 0, 0, 65535, "a port");
    private static final ConfigKey<Long> COUNT = ConfigKey.longKey("count", 0, -10, Long.MAX_VALUE, "a count");
    private static final ConfigKey<Double> RATE = ConfigKey.doubleKey("rate", 0.01, 0, 1, "a rate");
    private static final ConfigKey<Long> SIZE = ConfigKey.byteSizeKey("size", "256m", "8m", "1t", "a size");
    private static final ConfigKey<Long> ANY_SIZE = ConfigKey.byteSizeKey("anySize", "0", "0", "8388607t", "any size");
    private static final ConfigKey<Duration> TIMEOUT = ConfigKey.durationKey("timeout", "2s", "10ms", "10m", "a timeout");
    private static final ConfigKey<Duration> ANY_TIME = ConfigKey.durationKey("anyTime", "0", "0ms", "100000000000h", "any time");
    private static final ConfigKey<String> MODE = ConfigKey.choiceKey("mode", "fast", List.of("fast", "safe"), "a mode");

    private static final ConfigKey<String> ID = ConfigKey.stringKey("id", "", java.util.regex.Pattern.compile("[A-Za-z0-9_-]+"),
            "letters, digits, _ and -", "an id");

    @Test
    void stringKeyTakesMatchingTextAndEmptyMeansUnset() {
        assertEquals("", ID.defaultValue());
        assertEquals("exec-1", parse(ID, " exec-1 "));
        assertEquals("", parse(ID, "  "));
        assertRejected(ID, "a b", "letters, digits, _ and -");
    }

    private static <T> T parse(ConfigKey<T> key, String raw) {
        return key.parse("test." + key.suffix(), raw);
    }

    /** Parses a bad value and checks the message names the full key, the value and what is allowed. */
    private static void assertRejected(ConfigKey<?> key, String raw, String expected) {
        ConfigException e = assertThrows(ConfigException.class, () -> parse(key, raw));
        assertEquals("test." + key.suffix() + " = '" + raw + "': expected " + expected, e.getMessage());
    }

    @Test
    void configExceptionIsAnIllegalArgumentException() {
        assertThrows(IllegalArgumentException.class, () -> parse(PORT, "x"));
    }

    @Test
    void booleans() {
        assertEquals(true, parse(FLAG, "true"));
        assertEquals(false, parse(FLAG, "FALSE"));
        assertEquals(true, parse(FLAG, " True "));
        for (String bad : List.of("yes", "1", "", "tru")) {
            assertRejected(FLAG, bad, "true or false");
        }
    }

    @Test
    void ints() {
        assertEquals(0, parse(PORT, "0"));
        assertEquals(65535, parse(PORT, "65535"));
        assertEquals(7, parse(PORT, "+7"));
        assertEquals(8080, parse(PORT, " 8080\t"));
        // Below min, above max, overflow, not a number, a fraction, non-ASCII digits, empty.
        for (String bad : List.of("-1", "65536", "99999999999", "12x", "1.0", "\u0661\u0662", "")) {
            assertRejected(PORT, bad, "an integer between 0 and 65535");
        }
    }

    @Test
    void longs() {
        assertEquals(-10L, parse(COUNT, "-10"));
        assertEquals(Long.MAX_VALUE, parse(COUNT, "9223372036854775807"));
        for (String bad : List.of("-11", "9223372036854775808", "1k", "")) {
            assertRejected(COUNT, bad, "an integer between -10 and 9223372036854775807");
        }
    }

    @Test
    void doubles() {
        assertEquals(0.5, parse(RATE, "0.5"));
        assertEquals(1.0, parse(RATE, "1"));
        assertEquals(0.25, parse(RATE, ".25"));
        assertEquals(0.1, parse(RATE, "1e-1"));
        assertEquals(0.0, parse(RATE, "0."));
        assertEquals(0.0, parse(RATE, "-0"));
        // Out of range, and what Double.parseDouble would take but a config file should not.
        for (String bad : List.of("1.5", "-0.1", "NaN", "Infinity", "0x1p-2", "0.5d", "", "half")) {
            assertRejected(RATE, bad, "a number between 0.0 and 1.0");
        }
    }

    @ParameterizedTest
    @CsvSource({
        "0, 0", "4096, 4096", "512b, 512", "512B, 512",
        "64k, 65536", "64K, 65536", "64kb, 65536", "64KB, 65536", "64kB, 65536",
        "8m, 8388608", "8mb, 8388608", "1g, 1073741824", "1GB, 1073741824",
        "1t, 1099511627776", "1tb, 1099511627776", "007k, 7168",
        "8388607t, 9223370937343148032",
    })
    void byteSizes(String raw, long bytes) {
        assertEquals(bytes, parse(ANY_SIZE, raw));
    }

    @Test
    void byteSizeIgnoresSurroundingWhitespace() {
        assertEquals(8L << 20, parse(SIZE, "  8m \n"));
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "12q", "1.5g", "-1k", "+1k", "64 k", "k", "", "1kk", "1bk", "1p", "1kib", "0x10",
        "99999999999g",           // overflows a long after scaling: must not wrap
        "16777216t",              // 2^64 bytes: a wrapping multiply would give 0, which is in range
        "17179869184g",           // 2^64 bytes again
        "8388608t",               // 2^63 bytes, one past Long.MAX_VALUE
        "99999999999999999999",   // too many digits for a long even unscaled
    })
    void badByteSizes(String raw) {
        assertRejected(ANY_SIZE, raw, "a byte size like 64k, 8m, 1g between 0 and 8388607t");
    }

    @Test
    void byteSizeBoundsAreInclusive() {
        assertEquals(8L << 20, parse(SIZE, "8m"));
        assertEquals(1L << 40, parse(SIZE, "1024g"));
        for (String bad : List.of("8388607", "8191k", "1025g", "2t")) {
            assertRejected(SIZE, bad, "a byte size like 64k, 8m, 1g between 8m and 1t");
        }
    }

    @ParameterizedTest
    @CsvSource({
        "200ms, 200", "200MS, 200", "250, 250", "0, 0", "2s, 2000", "2S, 2000",
        "1m, 60000", "1M, 60000", "1h, 3600000", "0ms, 0",
    })
    void durations(String raw, long millis) {
        assertEquals(Duration.ofMillis(millis), parse(ANY_TIME, raw));
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "2.5s", "5 s", "1d", "-1s", "+1s", "1ns", "1us", "s", "", "1sec", "1min", "PT2S",
        "9999999999999999h",      // overflows a long of milliseconds: must not wrap
        "2305843009213693952s",   // 2^61 s = 2^64 * 125 ms: a wrapping multiply would give 0, which is in range
        "144115188075855872h",    // 2^57 h = 2^64 * 28125 ms, likewise
        "99999999999999999999",
    })
    void badDurations(String raw) {
        assertRejected(ANY_TIME, raw, "a duration like 200ms, 2s, 1m between 0ms and 100000000000h");
    }

    @Test
    void durationBoundsAreInclusive() {
        assertEquals(Duration.ofMillis(10), parse(TIMEOUT, "10ms"));
        assertEquals(Duration.ofMinutes(10), parse(TIMEOUT, "600s"));
        for (String bad : List.of("9ms", "9", "0", "601s", "11m", "1h")) {
            assertRejected(TIMEOUT, bad, "a duration like 200ms, 2s, 1m between 10ms and 10m");
        }
    }

    @Test
    void choicesAreCaseInsensitiveAndNormalizedToLowerCase() {
        assertEquals("safe", parse(MODE, "safe"));
        assertEquals("safe", parse(MODE, "SAFE"));
        assertEquals("fast", parse(MODE, " Fast "));
        for (String bad : List.of("slow", "", "fast,safe")) {
            assertRejected(MODE, bad, "one of fast, safe");
        }
    }

    @Test
    void badValueMessageKeepsTheValueAsWritten() {
        ConfigException e = assertThrows(ConfigException.class, () -> SIZE.parse("x.size", " 12Q "));
        assertEquals("x.size = ' 12Q ': expected a byte size like 64k, 8m, 1g between 8m and 1t", e.getMessage());
    }

    @Test
    void defaultsAreParsedFromTheirText() {
        assertEquals(true, FLAG.defaultValue());
        assertEquals(0, PORT.defaultValue());
        assertEquals(0.01, RATE.defaultValue());
        assertEquals(256L << 20, SIZE.defaultValue());
        assertEquals("256m", SIZE.defaultText());
        assertEquals(Duration.ofSeconds(2), TIMEOUT.defaultValue());
        assertEquals("fast", MODE.defaultValue());
    }

    @Test
    void describesItselfForTheReference() {
        assertEquals("byte size", SIZE.type());
        assertEquals("8m .. 1t", SIZE.allowed());
        assertEquals("duration", TIMEOUT.type());
        assertEquals("10ms .. 10m", TIMEOUT.allowed());
        assertEquals("0 .. 65535", PORT.allowed());
        assertEquals("0.0 .. 1.0", RATE.allowed());
        assertEquals("fast, safe", MODE.allowed());
        assertEquals("true, false", FLAG.allowed());
        assertEquals("a size", SIZE.doc());
    }

    @Test
    void definitionsWithADefaultOutOfBoundsOrBadBoundsFail() {
        assertThrows(IllegalArgumentException.class, () -> ConfigKey.intKey("x", 5, 6, 10, "d"));
        assertThrows(IllegalArgumentException.class, () -> ConfigKey.byteSizeKey("x", "1k", "8m", "1t", "d"));
        assertThrows(IllegalArgumentException.class, () -> ConfigKey.byteSizeKey("x", "8m", "8q", "1t", "d"));
        assertThrows(IllegalArgumentException.class, () -> ConfigKey.durationKey("x", "1h", "0ms", "10m", "d"));
        assertThrows(IllegalArgumentException.class, () -> ConfigKey.choiceKey("x", "c", List.of("a", "b"), "d"));
        assertThrows(IllegalArgumentException.class, () -> ConfigKey.choiceKey("x", "a", List.of("a", "B"), "d"));
    }

    @Test
    void keysAreForUsersUnlessMarkedInternalWhichKeepsEverythingElse() {
        assertEquals(ConfigKey.Visibility.USER, SIZE.visibility());
        ConfigKey<Long> internal = SIZE.internal();
        assertEquals(ConfigKey.Visibility.INTERNAL, internal.visibility());
        assertEquals(ConfigKey.Visibility.USER, SIZE.visibility(), "the original is unchanged");
        assertEquals(List.of("size", "byte size", "256m", "8m .. 1t", "a size"),
                List.of(internal.suffix(), internal.type(), internal.defaultText(), internal.allowed(), internal.doc()));
        assertEquals(1L << 30, internal.parse("test.size", "1g"));
        ConfigException e = assertThrows(ConfigException.class, () -> internal.parse("test.size", "1k"));
        assertEquals("test.size = '1k': expected a byte size like 64k, 8m, 1g between 8m and 1t", e.getMessage());
    }
}

package io.rdmaplane.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The flap's storm analysis on made-up reports: what HostRingTest's switch flap asserts holds, and fails, when it should. */
class ReconnectStormTest {
    private static final long CUT = 1_000_000_000L;
    private static final long UP = CUT + 1_000_000;

    private static String attempt(long micros, int n, long plannedMicros) {
        return micros + ":" + n + ":" + plannedMicros + ":10.214.0.3/7300:data";
    }

    @Test
    void jitteredFirstAttemptsOfTwoProcessesShowTheSpread() {
        ReconnectStorm storm = ReconnectStorm.of(CUT, UP, Map.of(
                "executor 1", attempt(CUT - 5_000_000, 1, 120_000) + " " + attempt(CUT + 520_000, 1, 131_000) + " " + attempt(UP + 300_000, 2, 210_000),
                "executor 2", attempt(CUT + 547_250, 1, 112_400)));
        assertEquals(2, storm.processes().size());
        assertEquals(27_250, storm.spreadAfter(CUT), "the attempt before the cut is not the storm's");
        assertTrue(storm.jitterApplied());
        String text = storm.describe();
        assertTrue(text.contains("first attempts after the cut over 2 process(es): min +520.0 ms, max +547.3 ms, spread 27.250 ms"), text);
        assertTrue(text.contains("first attempts after link-up over 1 process(es)"), text);
        assertTrue(text.contains("executor 2: 1 attempt(s), first +547.3 ms after the cut (attempt 1 to 10.214.0.3/7300 data, planned delay 112.4 ms)"
                + ", first after link-up none"), text);
    }

    @Test
    void withoutJitterEveryProcessPlansTheSameFirstDelayAndTheCheckFails() {
        // the detection ticks of two processes differ, so their attempts do not start together, but both planned the base
        ReconnectStorm storm = ReconnectStorm.of(CUT, UP, Map.of("executor 1", attempt(CUT + 500_000, 1, 100_000),
                "executor 2", attempt(CUT + 512_000, 1, 100_000)));
        assertTrue(storm.spreadAfter(CUT) > 0);
        assertFalse(storm.jitterApplied());
    }

    @Test
    void attemptsAtOneInstantOrInOneProcessAreNoStorm() {
        assertFalse(ReconnectStorm.of(CUT, UP, Map.of("executor 1", attempt(CUT + 500_000, 1, 110_000),
                "executor 2", attempt(CUT + 500_000, 1, 140_000))).jitterApplied(), "the same instant");
        ReconnectStorm one = ReconnectStorm.of(CUT, UP, Map.of("executor 1", attempt(CUT + 500_000, 1, 110_000), "executor 2", ""));
        assertEquals(1, one.processes().size());
        assertEquals(-1, one.spreadAfter(CUT));
        assertFalse(one.jitterApplied());
    }
}

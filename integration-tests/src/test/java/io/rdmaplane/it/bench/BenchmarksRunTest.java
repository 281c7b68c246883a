package io.rdmaplane.it.bench;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The transport benchmarks run end to end, on tcp and at a tiny size, and print their
 * machine-readable lines. A benchmark that stopped running (as the load shapes once did on
 * verbs, unseen until someone measured) fails here. Nothing about a time or a ratio is asserted.
 */
class BenchmarksRunTest {
    private static final String RATIO = " = \\d+\\.\\d\\dx";

    @Test
    void loadShapesRunsEveryShapeAndWritesItsCharts(@TempDir Path out) throws Exception {
        String printed = printedBy(() -> LoadShapeBenchmark.main(new String[] {"provider=tcp", "seconds=0.02",
                "maxDepth=2", "rounds=50", "bursts=1", "peers=2", "fanSeconds=0.1", "latRounds=50", "out=" + out}));
        for (String line : new String[] {"control-p99-under-bulk/idle", "read-64B-p50/baseline", "read-64KiB-bw/baseline"}) {
            assertPrinted(printed, "load-shapes: " + Pattern.quote(line) + RATIO);
        }
        for (String row : new String[] {"idle", "saturating bulk READs", "bulk both ways", "burst of 64",
                "fan-in: 1 server, 2 clients", "fan-out: 1 client, 2 servers"}) {
            assertPrinted(printed, "(?m)^" + Pattern.quote(row));
        }
        try (var charts = Files.list(out)) {
            assertTrue(charts.anyMatch(p -> p.toString().endsWith("tcp-control.png")), "no control chart in " + out);
        }
    }

    @Test
    void policyBenchmarkMeasuresControlUnderBulkAndChecksumCost() throws Exception {
        String printed = printedBy(() -> PolicyBenchmark.main(new String[] {"provider=tcp", "rounds=50", "seconds=0.1"}));
        assertPrinted(printed, "data channel saturated: .*bulk READs meanwhile: \\d+ MiB/s");
        assertPrinted(printed, "sample rate 1/16 .*\\(default; goal <= 3 %\\)");
    }

    private interface Run {
        void run() throws Exception;
    }

    /** What {@code run} printed to standard output (shown here too, for the test's log). */
    private static String printedBy(Run run) throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            run.run();
        } finally {
            System.setOut(original);
            original.print(captured.toString(StandardCharsets.UTF_8));
        }
        return captured.toString(StandardCharsets.UTF_8);
    }

    private static void assertPrinted(String printed, String regex) {
        assertTrue(Pattern.compile(regex).matcher(printed).find(), "not printed: /" + regex + "/ in:\n" + printed);
    }
}

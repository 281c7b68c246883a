package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Predicate;

/** The harness's side of a submitted {@link RingJob}: commands on its input, answers read from its log. */
public final class RingDriver implements AutoCloseable {
    /** What one {@code shuffle} command gave. */
    public record Result(String name, boolean failed, String failure, long count, String hash, long expectedCount, String expectedHash,
            long millis, int stageResubmits) {
        public boolean equalsExpected() {
            return !failed && count == expectedCount && hash.equals(expectedHash);
        }

        public long lost() {
            return Math.max(0, expectedCount - count);
        }

        public long duplicated() {
            return Math.max(0, count - expectedCount);
        }
    }

    /**
     * What one {@code tpcds-query} gave: the row count, the order-free hash of its rows, its rows sorted (the file the
     * application wrote), the job time, the shuffle blocks its tasks fetched from other executors, and the stage
     * resubmits (fetch failures) the driver logged while it ran.
     */
    public record QueryResult(String query, boolean failed, String failure, long rows, String hash, List<String> sortedRows, long millis,
            long remoteBlocks, int stageResubmits, long localBlocks, String readers) {
        /** The same rows as {@code baseline} (a successful run of the same query): count, hash and every row. */
        public boolean equalsBaseline(QueryResult baseline) {
            return !failed && rows == baseline.rows && hash.equals(baseline.hash) && sortedRows.equals(baseline.sortedRows);
        }

        /** Rows of {@code baseline} missing here, and rows here beyond {@code baseline}'s (as multisets): lost and duplicated. */
        public long[] lostAndDuplicated(QueryResult baseline) {
            Map<String, Integer> count = new java.util.HashMap<>();
            baseline.sortedRows.forEach(r -> count.merge(r, 1, Integer::sum));
            sortedRows.forEach(r -> count.merge(r, -1, Integer::sum));
            long lost = count.values().stream().filter(c -> c > 0).mapToLong(c -> c).sum();
            long duplicated = -count.values().stream().filter(c -> c < 0).mapToLong(c -> c).sum();
            return new long[] {lost, duplicated};
        }

        @Override
        public String toString() {
            return failed ? query + " FAILED " + failure : query + " rows=" + rows + " hash=" + hash + " millis=" + millis + " remoteBlocks="
                    + remoteBlocks + " localBlocks=" + localBlocks + " readers=" + readers + " stageResubmits=" + stageResubmits;
        }
    }

    /** One {@code report}: each executor's facts by executor id, and the driver's counters. */
    public record Reports(Map<String, Map<String, String>> executors, Map<String, String> driver) {
        long sum(String counter) {
            return executors.values().stream().mapToLong(r -> number(r, counter)).sum();
        }
    }

    /**
     * A shuffle's size: records, map tasks, reduce tasks, and the least time a reduce task takes; {@code paced}: that
     * time is spread over the task's records (it reads them slowly, so its fetches go on through it) rather than spent
     * after them, and each reduce task marks in {@link #readingMarks} when its READs go on ({@code RingJob.ReadingMark}).
     */
    public record Workload(long records, int maps, int reduces, long slowMillis, boolean paced) {
        public Workload(long records, int maps, int reduces, long slowMillis) {
            this(records, maps, reduces, slowMillis, false);
        }

        String command(String name, java.nio.file.Path marks) {
            return "shuffle " + name + " " + records + " " + maps + " " + reduces + " " + slowMillis + (paced ? " paced " + marks : "");
        }
    }

    /** Where the paced reduce tasks of shuffle {@code name} mark that their READs go on: {@code <this>/<name>-<partition>}. */
    java.nio.file.Path readingMarks() {
        return cluster.dir.resolve("reading-marks");
    }

    final RingCluster cluster;
    final RingProcess process;
    /** The application's RING-READY line: its id, shuffle manager and the Spark version the driver runs. */
    String ready = "";
    /** When set: why to stop waiting for the application at once (e.g. its executors died), or null to go on waiting. */
    java.util.function.Supplier<String> giveUpWhen;
    private long offset;
    private String partial = "";
    /** Times the DAGScheduler resubmitted failed stages (a fetch failure: map outputs recomputed) since the last shuffle began. */
    private int resubmits;
    /** Lines read from the log but not yet looked at. */
    private final java.util.ArrayDeque<String> pending = new java.util.ArrayDeque<>();
    private long nextGiveUpCheck;
    /** The last {@code RING-MAPS} line: the last shuffle's id and each executor's map ids. */
    String lastMaps = "";

    RingDriver(RingCluster cluster, RingProcess process) {
        this.cluster = cluster;
        this.process = process;
    }

    /** Runs a shuffle; {@code atReduce} (a fault) runs when its reduce stage is submitted, before its result is awaited. */
    public Result shuffle(String name, Workload w, Runnable atReduce, Duration deadline) {
        resubmits = 0;
        if (w.paced()) {
            try {
                java.nio.file.Files.createDirectories(readingMarks());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        process.send(w.command(name, readingMarks()));
        if (atReduce != null) {
            String line = awaitLine(l -> l.equals("RING-REDUCING " + name) || l.startsWith("RING-FAILED " + name + " "), deadline,
                    "the reduce stage of " + name + " started");
            if (line.startsWith("RING-REDUCING")) {
                atReduce.run();
            } else {
                return failed(name, line);
            }
        }
        String line = awaitLine(l -> l.startsWith("RING-RESULT " + name + " ") || l.startsWith("RING-FAILED " + name + " "), deadline,
                "the result of " + name);
        if (line.startsWith("RING-FAILED")) {
            return failed(name, line);
        }
        Map<String, String> f = fields(line.substring(("RING-RESULT " + name + " ").length()), " ");
        return new Result(name, false, "", Long.parseLong(f.get("count")), f.get("hash"), Long.parseLong(f.get("expectedCount")),
                f.get("expectedHash"), Long.parseLong(f.get("millis")), resubmits);
    }

    /**
     * Runs TPC-DS {@code query} over {@code tables} under {@code base} (in the application's filesystem), its sorted
     * rows written to {@code out}; {@code atMoment} (a fault) runs when the application announces {@code moment}
     * ({@code RING-READING}: its first task done, the scans reading; {@code RING-REDUCING}: its first stage reading
     * shuffle output submitted), before its result is awaited.
     */
    public QueryResult query(String query, String base, java.nio.file.Path out, List<String> tables, String moment, Runnable atMoment,
            Duration deadline) {
        resubmits = 0;
        try {
            java.nio.file.Files.deleteIfExists(out);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        process.send("tpcds-query " + query + " " + base + " " + out + " " + String.join(" ", tables));
        String failedPrefix = "RING-FAILED " + query + " ";
        if (atMoment != null) {
            String line = awaitLine(l -> l.equals(moment + " " + query) || l.startsWith(failedPrefix), deadline, moment + " " + query);
            if (line.startsWith("RING-FAILED")) {
                return new QueryResult(query, true, line, 0, "", List.of(), 0, 0, resubmits, 0, "none");
            }
            atMoment.run();
        }
        String line = awaitLine(l -> l.startsWith("RING-TPCDS-RESULT " + query + " ") || l.startsWith(failedPrefix), deadline,
                "the result of TPC-DS " + query);
        if (line.startsWith("RING-FAILED")) {
            return new QueryResult(query, true, line, 0, "", List.of(), 0, 0, resubmits, 0, "none");
        }
        Map<String, String> f = fields(line.substring(("RING-TPCDS-RESULT " + query + " ").length()), " ");
        try {
            return new QueryResult(query, false, "", Long.parseLong(f.get("rows")), f.get("hash"), java.nio.file.Files.readAllLines(out),
                    Long.parseLong(f.get("millis")), Long.parseLong(f.get("remoteBlocks")), resubmits, Long.parseLong(f.get("localBlocks")),
                    f.get("readers"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Generates the TPC-DS {@code tables} and writes them as Parquet under {@code base}, in the application's filesystem,
     * with only the {@code columns} named.
     */
    public void writeTpcds(String base, java.util.Collection<String> columns, List<String> tables, Duration deadline) {
        process.send("tpcds-write " + base + " columns=" + String.join(",", columns) + " " + String.join(" ", tables));
        String line = awaitLine(l -> l.startsWith("RING-TPCDS-WRITTEN") || l.startsWith("RING-FAILED " + base + " "), deadline,
                "the TPC-DS tables written");
        if (line.startsWith("RING-FAILED")) {
            throw new IllegalStateException("writing the TPC-DS tables under " + base + ": " + line + "\n" + cluster.tails());
        }
    }

    private Result failed(String name, String line) {
        return new Result(name, true, line, 0, "", 0, "", 0, resubmits);
    }

    /** Reports of {@code executors} executors (asked again until that many answer, for at most {@code deadline}). */
    public Reports report(int executors, Duration deadline) {
        long end = System.nanoTime() + deadline.toNanos();
        while (true) {
            process.send("report " + executors);
            Map<String, Map<String, String>> byId = new TreeMap<>();
            Map<String, String> driver = Map.of();
            while (true) {
                String line = awaitLine(l -> l.startsWith("RING-REPORT") || l.startsWith("RING-DRIVER") || l.startsWith("RING-FAILED report"),
                        deadline, "executor reports");
                if (line.startsWith("RING-REPORT-END") || line.startsWith("RING-FAILED")) {
                    break;
                } else if (line.startsWith("RING-DRIVER ")) {
                    driver = fields(line.substring("RING-DRIVER ".length()), "\t");
                } else {
                    Map<String, String> r = fields(line.substring("RING-REPORT ".length()), "\t");
                    byId.put(r.get("executorId"), r);
                }
            }
            if (byId.size() >= executors || System.nanoTime() > end) {
                if (byId.size() < executors) {
                    throw new IllegalStateException("reports from " + byId.keySet() + ", expected " + executors + " executors\n"
                            + cluster.tails());
                }
                return new Reports(byId, driver);
            }
        }
    }

    private static Map<String, String> fields(String text, String separator) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String kv : text.split(separator)) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                out.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        return out;
    }

    static long number(Map<String, String> report, String name) {
        String v = report.get(name);
        return v == null || !v.matches("-?\\d+") ? 0 : Long.parseLong(v);
    }

    /** The next line of the driver's log (after the ones already consumed) that {@code match}es. */
    String awaitLine(Predicate<String> match, Duration deadline, String what) {
        long end = System.nanoTime() + deadline.toNanos();
        while (true) {
            pending.addAll(newLines());
            while (!pending.isEmpty()) {
                String line = pending.poll();
                if (line.contains("DAGScheduler - Resubmitting failed stages")) {
                    resubmits++;
                } else if (line.startsWith("RING-MAPS ")) {
                    lastMaps = line;
                }
                if (match.test(line)) {
                    return line;
                }
            }
            if (!process.isAlive()) {
                throw new IllegalStateException("the driver " + process.name + " ended before " + what + "\n" + cluster.tails());
            }
            if (giveUpWhen != null && System.nanoTime() >= nextGiveUpCheck) {
                nextGiveUpCheck = System.nanoTime() + 1_000_000_000L; // at most once a second: it reads logs
                String why = giveUpWhen.get();
                if (why != null) {
                    throw new IllegalStateException("gave up waiting until " + what + ": " + why);
                }
            }
            if (System.nanoTime() > end) {
                throw new IllegalStateException("timed out after " + deadline.toSeconds() + " s waiting until " + what + "\n" + cluster.tails());
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting until " + what);
            }
        }
    }

    private List<String> newLines() {
        List<String> out = new ArrayList<>();
        try (RandomAccessFile f = new RandomAccessFile(process.log.toFile(), "r")) {
            if (f.length() <= offset) {
                return out;
            }
            f.seek(offset);
            byte[] bytes = new byte[(int) Math.min(f.length() - offset, 1 << 24)];
            f.readFully(bytes);
            offset += bytes.length;
            String text = partial + new String(bytes, StandardCharsets.ISO_8859_1);
            int last = text.lastIndexOf('\n');
            partial = text.substring(last + 1);
            if (last >= 0) {
                out.addAll(List.of(text.substring(0, last).split("\n")));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }

    /** Asks the application to stop and waits for it (at most a minute). */
    @Override
    public void close() {
        if (process.isAlive()) {
            try {
                process.send("quit");
            } catch (UncheckedIOException gone) {
                // already gone
            }
            process.waitFor(Duration.ofMinutes(1));
        }
    }
}

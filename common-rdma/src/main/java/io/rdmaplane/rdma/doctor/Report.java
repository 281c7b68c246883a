package io.rdmaplane.rdma.doctor;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * The doctor's findings, one line each, printed as aligned plain text:
 * <pre>
 * VERDICT CHECK      DETAIL
 * FIX     CHECK      what to do, in one line      (only under a WARN or FAIL)
 * </pre>
 * so that {@code grep ^FAIL}, {@code grep ^FIX} or {@code grep memlock} each give a useful answer.
 * A FAIL carries the exit code it stands for; the report's exit code is the highest of them.
 */
public final class Report {

    /** What a line says about the node. */
    public enum Verdict {
        /** Ready for RDMA in this respect. */
        OK,
        /** A fact that needs no action. */
        INFO,
        /** Works, but not as it should, or will fail in some setups; does not change the exit code. */
        WARN,
        /** Stops RDMA (or the peer check); sets the exit code. */
        FAIL
    }

    /**
     * One finding.
     *
     * @param exitCode for a FAIL, the exit code it stands for ({@link Doctor#EXIT_NO_DEVICE} ...); else 0
     * @param fix      the fix, one line; required for WARN and FAIL, null otherwise
     */
    public record Line(Verdict verdict, String check, String detail, String fix, int exitCode) {
        public Line {
            Objects.requireNonNull(verdict, "verdict");
            Objects.requireNonNull(check, "check");
            Objects.requireNonNull(detail, "detail");
            if ((verdict == Verdict.WARN || verdict == Verdict.FAIL) && (fix == null || fix.isBlank())) {
                throw new IllegalArgumentException("a " + verdict + " line needs a fix: " + check + " " + detail);
            }
            if (verdict == Verdict.FAIL ? exitCode <= 0 : exitCode != 0) {
                throw new IllegalArgumentException("only a FAIL carries an exit code: " + verdict + " " + exitCode);
            }
            if (detail.indexOf('\n') >= 0 || (fix != null && fix.indexOf('\n') >= 0)) {
                throw new IllegalArgumentException("detail and fix are one line each: " + detail);
            }
        }
    }

    static final int CHECK_WIDTH = 10;
    private final List<Line> lines = new ArrayList<>();

    public Report ok(String check, String detail) {
        return add(new Line(Verdict.OK, check, detail, null, 0));
    }

    public Report info(String check, String detail) {
        return add(new Line(Verdict.INFO, check, detail, null, 0));
    }

    public Report warn(String check, String detail, String fix) {
        return add(new Line(Verdict.WARN, check, detail, fix, 0));
    }

    public Report fail(String check, String detail, String fix, int exitCode) {
        return add(new Line(Verdict.FAIL, check, detail, fix, exitCode));
    }

    public Report add(Line line) {
        lines.add(line);
        return this;
    }

    public List<Line> lines() {
        return Collections.unmodifiableList(lines);
    }

    /** The highest exit code of any FAIL, or 0. */
    public int exitCode() {
        return lines.stream().mapToInt(Line::exitCode).max().orElse(0);
    }

    /** The FAIL lines that decide {@link #exitCode()}. */
    public List<Line> deciding() {
        int code = exitCode();
        return lines.stream().filter(l -> code != 0 && l.exitCode() == code).toList();
    }

    /** Prints every line (and each fix under its line). */
    public void print(PrintStream out) {
        for (Line line : lines) {
            out.println(format(line.verdict().name(), line.check(), line.detail()));
            if (line.fix() != null) {
                out.println(format("FIX", line.check(), line.fix()));
            }
        }
    }

    static String format(String first, String check, String detail) {
        return String.format(Locale.ROOT, "%-6s %-" + CHECK_WIDTH + "s %s", first, check, detail);
    }
}

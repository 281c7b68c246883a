package io.rdmaplane.it.cluster;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalLong;
import java.util.TreeMap;

/**
 * A switch flap's reconnect storm across the ring's processes, from each process's reconnect attempts (the executor
 * report's {@code rdma.reconnect.attempts}: {@code EPOCH_MICROS:ATTEMPT:PLANNED_DELAY_MICROS:PEER:CLASS} each) and the
 * moments the links went down and up (epoch microseconds, the harness's clock: every process of the host ring runs on
 * one machine, so one clock). Per process: its first attempt after the cut and its first after the links came back;
 * across processes: their earliest, latest and spread.
 */
record ReconnectStorm(long cutMicros, long upMicros, Map<String, Process> processes) {
    /** One process's attempts in the storm (those that started after the cut). */
    record Process(String name, List<Attempt> attempts) {
        OptionalLong firstAfter(long micros) {
            return attempts.stream().mapToLong(Attempt::micros).filter(t -> t >= micros).min();
        }

        Attempt first() {
            return attempts.get(0);
        }
    }

    record Attempt(long micros, int attempt, long plannedMicros, String peer, String trafficClass) {
    }

    /** {@code attemptsByProcess}: each process's report value (processes without an attempt after the cut are left out). */
    static ReconnectStorm of(long cutMicros, long upMicros, Map<String, String> attemptsByProcess) {
        Map<String, Process> out = new TreeMap<>();
        attemptsByProcess.forEach((name, text) -> {
            List<Attempt> attempts = new ArrayList<>();
            for (String entry : text == null ? new String[0] : text.trim().split("\\s+")) {
                String[] f = entry.split(":");
                if (f.length == 5 && Long.parseLong(f[0]) >= cutMicros) {
                    attempts.add(new Attempt(Long.parseLong(f[0]), Integer.parseInt(f[1]), Long.parseLong(f[2]), f[3], f[4]));
                }
            }
            attempts.sort(java.util.Comparator.comparingLong(Attempt::micros));
            if (!attempts.isEmpty()) {
                out.put(name, new Process(name, attempts));
            }
        });
        return new ReconnectStorm(cutMicros, upMicros, out);
    }

    /** The spread (latest minus earliest, microseconds) of the processes' first attempts after {@code from}, or -1 with fewer than 2. */
    long spreadAfter(long from) {
        List<Long> firsts = processes.values().stream().map(p -> p.firstAfter(from)).filter(OptionalLong::isPresent)
                .map(OptionalLong::getAsLong).toList();
        return firsts.size() < 2 ? -1 : firsts.stream().mapToLong(Long::longValue).max().getAsLong()
                - firsts.stream().mapToLong(Long::longValue).min().getAsLong();
    }

    /**
     * Whether the storm shows the jitter applied: at least 2 processes reconnected, their first attempts after the cut
     * did not start at the same instant, and the delays their backoff planned for them are not all equal. Not a timing
     * bound: without jitter every process plans the very same first delay (the backoff's base) whatever the machine's
     * speed, and with it two draws are equal only by a chance of about one in the jitter's microseconds; how long
     * anything took is never compared with a limit.
     */
    boolean jitterApplied() {
        if (processes.size() < 2 || spreadAfter(cutMicros) <= 0) {
            return false;
        }
        List<Attempt> firsts = processes.values().stream().map(Process::first).toList();
        boolean sameAttempt = firsts.stream().mapToInt(Attempt::attempt).distinct().count() == 1;
        return !sameAttempt || firsts.stream().mapToLong(Attempt::plannedMicros).distinct().count() > 1;
    }

    /** The report: a line per process, then the spread of first attempts after the cut and after the links came back. */
    String describe() {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "links down %.1f ms; %d process(es) reconnected", (upMicros - cutMicros) / 1000.0, processes.size()));
        for (Process p : processes.values()) {
            Attempt first = p.first();
            OptionalLong afterUp = p.firstAfter(upMicros);
            b.append(String.format(Locale.ROOT, "; %s: %d attempt(s), first +%.1f ms after the cut (attempt %d to %s %s, planned delay %.1f ms)"
                    + ", first after link-up %s", p.name, p.attempts.size(), (first.micros - cutMicros) / 1000.0, first.attempt,
                    first.peer, first.trafficClass, first.plannedMicros / 1000.0,
                    afterUp.isPresent() ? String.format(Locale.ROOT, "+%.1f ms", (afterUp.getAsLong() - upMicros) / 1000.0)
                            : "none (its attempt during the cut connected once the links were back)"));
        }
        b.append("; ").append(spreadLine("after the cut", cutMicros)).append("; ").append(spreadLine("after link-up", upMicros));
        return b.toString();
    }

    private String spreadLine(String what, long from) {
        List<Long> firsts = processes.values().stream().map(p -> p.firstAfter(from)).filter(OptionalLong::isPresent)
                .map(OptionalLong::getAsLong).sorted().toList();
        if (firsts.isEmpty()) {
            return "first attempts " + what + ": none";
        }
        return String.format(Locale.ROOT, "first attempts %s over %d process(es): min +%.1f ms, max +%.1f ms, spread %.3f ms", what,
                firsts.size(), (firsts.get(0) - from) / 1000.0, (firsts.get(firsts.size() - 1) - from) / 1000.0,
                (firsts.get(firsts.size() - 1) - firsts.get(0)) / 1000.0);
    }
}

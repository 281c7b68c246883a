package io.rdmaplane.it.cluster;

import io.rdmaplane.it.Args;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * The soak command: one host ring, then {@code rounds} rounds of a randomly chosen fault ({@link RingSession.Fault}),
 * each hitting the shuffle and then the TPC-DS query over HDFS, until the rounds or {@code minutes} run out; a row per round and the summary line
 * {@code soak: R rounds, F faults, L lost, D duplicated, J failed jobs, K rounds leaked} (a round leaks when a process's
 * descriptors, rdma-* threads or registered bytes stay above their baseline once settled, after the shuffle or after the query). Exits 1 unless all four are
 * 0, 2 when the ring cannot be built here.
 */
public final class Soak {
    private Soak() {
    }

    public static void main(String[] args) {
        int rounds = Integer.parseInt(Args.get(args, "rounds", "10"));
        Duration budget = Duration.ofMinutes(Long.parseLong(Args.get(args, "minutes", "20")));
        long seed = Long.parseLong(Args.get(args, "seed", String.valueOf(System.nanoTime())));
        List<RingSession.Fault> faults = Arrays.stream(Args.get(args, "faults", String.join(",",
                Arrays.stream(RingSession.Fault.values()).map(Enum::name).toList())).split(",")).map(String::trim).map(name -> {
                    try {
                        return RingSession.Fault.valueOf(name);
                    } catch (IllegalArgumentException e) {
                        throw new IllegalArgumentException("faults=" + name + ": not one of " + Arrays.toString(RingSession.Fault.values()));
                    }
                }).toList();
        String cause = HostRing.unavailableCause();
        if (cause != null) {
            System.out.println("soak: no host ring here: " + cause);
            System.exit(2);
        }
        System.out.println("soak: rounds=" + rounds + " minutes=" + budget.toMinutes() + " seed=" + seed + " faults:\n" + RingSession.describeFaults());
        Summary summary;
        try (RingSession session = RingSession.start(RingLines.fromTestClassPath(), Path.of("target/ring-soak"), budget.plusMinutes(10))) {
            summary = rounds(session, faults, rounds, budget, new Random(seed));
        }
        System.out.println("soak: " + summary);
        System.exit(summary.clean() ? 0 : 1);
    }

    /** What a soak's rounds came to; {@link #toString()} is the summary line's text after "soak: ". */
    public record Summary(int rounds, int faults, long lost, long duplicated, int failedJobs, int roundsLeaked) {
        public boolean clean() {
            return lost == 0 && duplicated == 0 && failedJobs == 0 && roundsLeaked == 0;
        }

        @Override
        public String toString() {
            return rounds + " rounds, " + faults + " faults, " + lost + " lost, " + duplicated + " duplicated, " + failedJobs
                    + " failed jobs, " + roundsLeaked + " rounds leaked";
        }
    }

    /**
     * Up to {@code rounds} rounds on {@code session}, each a fault drawn from {@code faults}, within {@code budget};
     * prints a row per round. Stops at a round whose fault could not be run (the ring is then in an unknown state).
     */
    public static Summary rounds(RingSession session, List<RingSession.Fault> faults, int rounds, Duration budget, Random random) {
        long end = System.nanoTime() + budget.toNanos();
        int done = 0;
        long lost = 0;
        long duplicated = 0;
        int failed = 0;
        int leaked = 0;
        System.out.println("round " + RingSession.Row.header());
        for (int round = 1; round <= rounds && System.nanoTime() < end; round++) {
            RingSession.Fault fault = faults.get(random.nextInt(faults.size()));
            RingSession.Row row;
            done++;
            try {
                row = session.run(fault);
            } catch (RuntimeException e) {
                System.out.println(String.format("%5d %-18s FAILED %s", round, fault, e.getMessage()));
                failed++;
                break;
            }
            System.out.println(String.format("%5d %s", round, row.line()));
            lost += row.lost() + row.query().lost();
            duplicated += row.duplicated() + row.query().duplicated();
            if (!row.ok() || !row.query().ok()) {
                failed++;
            }
            if (!row.leaks().isEmpty() || !row.query().leaks().isEmpty()) {
                leaked++;
            }
        }
        return new Summary(done, done, lost, duplicated, failed, leaked);
    }
}

package io.rdmaplane.rdma.provider;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;

/**
 * Settings only the verbs provider reads, carried in {@link NodeOptions} so that callers
 * configure it without naming it; other providers ignore them. The products set them with
 * their {@code verbs.*} keys (see {@code TransportKeys}).
 *
 * @param cmTick              how long the CM thread waits for an event per turn: how late a queued
 *                            connect or listen may start, and how often operation timeouts are checked
 * @param receiveBuffers      receive buffers a channel posts at most (and at least 8; never more than its queue depth)
 * @param cqEntries           entries of the node's completion queue (halved down to 1024 while the device
 *                            refuses); every channel takes its depth plus its receive buffers from it
 * @param readPieceBytes      longest work request of a READ; longer READs go as several (Soft-RoCE re-sends a
 *                            whole long READ after one lost packet)
 * @param completion          how completions are waited for ({@link Completion})
 * @param nativeTmpdir        where the native library is extracted to be loaded, or null for {@code java.io.tmpdir};
 *                            the library loads once per JVM, so only the first probe's folder counts
 * @param completionSpinMicros with {@link Completion#EVENT}: how long a completion thread keeps polling its CQ after
 *                            the last completion before it arms the completion channel and sleeps (0: at once). A
 *                            request/answer loop then never pays the wake-up of a completion event
 * @param hybridSpinMicros    with {@link Completion#HYBRID}: how long a thread waiting for a READ polls the CQ itself
 *                            before it sleeps, and how long the CQ stays hot (polled, not armed) after such a poll
 */
public record VerbsOptions(Duration cmTick, int receiveBuffers, int cqEntries, int readPieceBytes,
                           Completion completion, Path nativeTmpdir, int completionSpinMicros, int hybridSpinMicros) {
    /** How a node's completions are waited for (the products' {@code verbs.completion}). */
    public enum Completion {
        /** The lane's completion thread sleeps on the completion channel (after {@link #completionSpinMicros()}). */
        EVENT,
        /** The bulk lane's completion thread busy-polls its CQ: a core per node (the control lane's sleeps). */
        POLL,
        /**
         * A thread waiting for a READ ({@code get()} or {@code join()} of its future) polls the CQ itself for up to
         * {@link #hybridSpinMicros()}, as perftest does on its posting thread; the completion thread sleeps on the
         * completion channel and arms it once no thread polled for that long.
         */
        HYBRID
    }

    public static final Duration MIN_CM_TICK = Duration.ofMillis(1);
    public static final Duration MAX_CM_TICK = Duration.ofSeconds(1);
    public static final int MIN_RECEIVE_BUFFERS = 8;
    public static final int MAX_RECEIVE_BUFFERS = 16384;
    public static final int MIN_CQ_ENTRIES = 1024;
    public static final int MAX_CQ_ENTRIES = 1 << 22;
    /** Pieces one READ may be split into at most: the send queue keeps this many spare entries for them. */
    public static final int MAX_READ_PIECES = 64;
    public static final int MIN_READ_PIECE_BYTES = Channel.MAX_READ_BYTES / MAX_READ_PIECES;
    public static final int MAX_READ_PIECE_BYTES = Channel.MAX_READ_BYTES;
    /** Off: on a starved 2-vCPU Soft-RoCE guest the spin took CPU from rxe itself (see integration-tests/vm/bench-perftest.sh). */
    public static final int DEFAULT_COMPLETION_SPIN_MICROS = 0;
    public static final int MAX_COMPLETION_SPIN_MICROS = 100_000;
    /**
     * 100 µs: a 64 B READ between the two Soft-RoCE devices of the TCG VM takes about 37 µs (ib_read_lat), real NICs
     * 2-5 µs, so a small READ lands within the spin with room to spare; a wait that misses (a large READ) burns at most
     * 100 µs of one core before it sleeps, less than the event path's wake-up and hand-over cost a 64 B READ in the VM
     * (about 260 µs, issue 13).
     */
    public static final int DEFAULT_HYBRID_SPIN_MICROS = 100;
    public static final int MIN_HYBRID_SPIN_MICROS = 1;

    public VerbsOptions {
        Objects.requireNonNull(cmTick, "cmTick");
        if (cmTick.compareTo(MIN_CM_TICK) < 0 || cmTick.compareTo(MAX_CM_TICK) > 0) {
            throw new IllegalArgumentException("cmTick must be 1ms..1s, was " + cmTick);
        }
        check("receiveBuffers", receiveBuffers, MIN_RECEIVE_BUFFERS, MAX_RECEIVE_BUFFERS);
        check("cqEntries", cqEntries, MIN_CQ_ENTRIES, MAX_CQ_ENTRIES);
        check("readPieceBytes", readPieceBytes, MIN_READ_PIECE_BYTES, MAX_READ_PIECE_BYTES);
        Objects.requireNonNull(completion, "completion");
        check("completionSpinMicros", completionSpinMicros, 0, MAX_COMPLETION_SPIN_MICROS);
        check("hybridSpinMicros", hybridSpinMicros, MIN_HYBRID_SPIN_MICROS, MAX_COMPLETION_SPIN_MICROS);
        if (nativeTmpdir != null && !nativeTmpdir.isAbsolute()) {
            throw new IllegalArgumentException("nativeTmpdir must be an absolute path, was " + nativeTmpdir);
        }
    }

    /** Event-driven ({@code busyPoll} false) or busy-polled, with the default spins. */
    public VerbsOptions(Duration cmTick, int receiveBuffers, int cqEntries, int readPieceBytes, boolean busyPollCompletions,
                        Path nativeTmpdir) {
        this(cmTick, receiveBuffers, cqEntries, readPieceBytes, busyPollCompletions ? Completion.POLL : Completion.EVENT,
                nativeTmpdir, DEFAULT_COMPLETION_SPIN_MICROS, DEFAULT_HYBRID_SPIN_MICROS);
    }

    /**
     * 10 ms CM tick, 32 receive buffers, 16384 CQ entries, 256 KiB READ pieces, hybrid completions with a
     * {@value #DEFAULT_HYBRID_SPIN_MICROS} µs spin, java.io.tmpdir.
     */
    public static VerbsOptions defaults() {
        return new VerbsOptions(Duration.ofMillis(10), 32, 16384, 256 << 10, Completion.HYBRID, null,
                DEFAULT_COMPLETION_SPIN_MICROS, DEFAULT_HYBRID_SPIN_MICROS);
    }

    /** Whether the bulk lane's completion thread busy-polls ({@link Completion#POLL}). */
    public boolean busyPollCompletions() {
        return completion == Completion.POLL;
    }

    /** {@link Completion#POLL} when {@code busyPoll}, else {@link Completion#EVENT}. */
    public VerbsOptions withBusyPollCompletions(boolean busyPoll) {
        return withCompletion(busyPoll ? Completion.POLL : Completion.EVENT);
    }

    public VerbsOptions withCompletion(Completion mode) {
        return new VerbsOptions(cmTick, receiveBuffers, cqEntries, readPieceBytes, mode, nativeTmpdir, completionSpinMicros,
                hybridSpinMicros);
    }

    public VerbsOptions withCompletionSpinMicros(int micros) {
        return new VerbsOptions(cmTick, receiveBuffers, cqEntries, readPieceBytes, completion, nativeTmpdir, micros,
                hybridSpinMicros);
    }

    public VerbsOptions withHybridSpinMicros(int micros) {
        return new VerbsOptions(cmTick, receiveBuffers, cqEntries, readPieceBytes, completion, nativeTmpdir,
                completionSpinMicros, micros);
    }

    private static void check(String name, int value, int min, int max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException(name + " must be " + min + ".." + max + ", was " + value);
        }
    }
}

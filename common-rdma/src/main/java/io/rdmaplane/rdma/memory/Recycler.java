package io.rdmaplane.rdma.memory;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongSupplier;

/**
 * Direct memory kept for reuse, by capacity. Touching fresh direct memory costs page faults
 * (hundreds of MiB/s on a small VM, against GiB/s for a copy into memory already touched), so
 * memory that was registered and is now deregistered is worth keeping for the next buffer of
 * about the same size.
 *
 * <ul>
 * <li>{@link #take} gives back an idle buffer whose capacity lies in
 *     {@code [bytes, bytes + bytes/16]} and whose quarantine is over, oldest first; null if none.</li>
 * <li>{@link #give} keeps a buffer, reusable once its quarantine is over: a margin for anything
 *     that may still read the memory after its rkey was revoked (the providers themselves send
 *     nothing of a region once its deregister returned). Memory never registered can be given
 *     with no quarantine.</li>
 * <li>Idle memory stays within a limit its owner computes ({@code idleLimit}, e.g. what a cap of
 *     registered bytes leaves unused): beyond it the largest idle buffers are dropped to the garbage
 *     collector, which frees them once nothing refers to them.</li>
 * </ul>
 * Buffers are not registered here: this keeps memory, not registrations. Thread-safe.
 */
public final class Recycler {
    private record Idle(ByteBuffer memory, long reusableAt) {
    }

    private final LongSupplier idleLimit;
    private final LongSupplier nanoClock;
    private final TreeMap<Integer, ArrayDeque<Idle>> idle = new TreeMap<>();
    private long idleBytes;
    private boolean closed;

    /** @param idleLimit the most idle bytes to keep, asked again at every {@link #give} and {@link #trim} */
    public Recycler(LongSupplier idleLimit) {
        this(idleLimit, System::nanoTime);
    }

    /** As {@link #Recycler(LongSupplier)}, with the clock quarantines are measured on (for tests). */
    Recycler(LongSupplier idleLimit, LongSupplier nanoClock) {
        this.idleLimit = idleLimit;
        this.nanoClock = nanoClock;
    }

    /**
     * An idle buffer of at least {@code bytes} and at most {@code bytes + bytes/16} whose
     * quarantine is over, cleared (position 0, limit its capacity); null if there is none.
     */
    public synchronized ByteBuffer take(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("bytes must not be negative, was " + bytes);
        }
        long now = nanoClock.getAsLong();
        int most = (int) Math.min(Integer.MAX_VALUE, bytes + (long) bytes / 16);
        for (Map.Entry<Integer, ArrayDeque<Idle>> e : idle.subMap(bytes, true, most, true).entrySet()) {
            for (Iterator<Idle> it = e.getValue().iterator(); it.hasNext(); ) {
                Idle candidate = it.next();
                if (candidate.reusableAt - now <= 0) {
                    it.remove();
                    if (e.getValue().isEmpty()) {
                        idle.remove(e.getKey());
                    }
                    idleBytes -= candidate.memory.capacity();
                    return candidate.memory.clear();
                }
            }
        }
        return null;
    }

    /**
     * Keeps {@code memory} for reuse once {@code quarantine} has passed, within the idle limit
     * (the largest idle buffers are dropped first). After {@link #close} it is dropped at once.
     */
    public void give(ByteBuffer memory, Duration quarantine) {
        if (quarantine.isNegative()) {
            throw new IllegalArgumentException("the quarantine must not be negative, was " + quarantine);
        }
        synchronized (this) {
            if (closed) {
                return;
            }
            idle.computeIfAbsent(memory.capacity(), c -> new ArrayDeque<>())
                    .addLast(new Idle(memory, nanoClock.getAsLong() + quarantine.toNanos()));
            idleBytes += memory.capacity();
        }
        trim(0);
    }

    /**
     * Drops idle memory, largest first, until idle bytes plus {@code more} fit the idle limit:
     * call it before allocating {@code more} fresh bytes, so fresh and idle memory together stay
     * within what the owner allows.
     */
    public synchronized void trim(long more) {
        long limit = idleLimit.getAsLong();
        while (idleBytes > 0 && idleBytes + more > limit) {
            Map.Entry<Integer, ArrayDeque<Idle>> largest = idle.lastEntry();
            Idle dropped = largest.getValue().pollFirst();
            if (largest.getValue().isEmpty()) {
                idle.remove(largest.getKey());
            }
            idleBytes -= dropped.memory.capacity();
        }
    }

    /** Idle bytes held now (in quarantine or reusable). */
    public synchronized long idleBytes() {
        return idleBytes;
    }

    /** Drops every idle buffer; later {@link #give}s drop theirs too. */
    public synchronized void close() {
        closed = true;
        idle.clear();
        idleBytes = 0;
    }
}

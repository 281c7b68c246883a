package io.rdmaplane.spark.serve;

import java.util.concurrent.atomic.AtomicLong;

/** A store's cap on registered bytes: reserved before a map output is registered, given back when it is dropped. */
final class RegisteredBytes {
    private final long capacity;
    private final AtomicLong used = new AtomicLong();

    RegisteredBytes(long capacity) {
        if (capacity < 0) {
            throw new IllegalArgumentException("capacityBytes must not be negative, was " + capacity);
        }
        this.capacity = capacity;
    }

    /** Reserves {@code bytes} if they fit under the cap; false (nothing reserved) if not. */
    boolean reserve(long bytes) {
        while (true) {
            long now = used.get();
            if (now + bytes > capacity) {
                return false;
            }
            if (used.compareAndSet(now, now + bytes)) {
                return true;
            }
        }
    }

    void release(long bytes) {
        used.addAndGet(-bytes);
    }

    /** Whether {@code bytes} more would fit now (a hint: a concurrent reserve may take the room). */
    boolean fits(long bytes) {
        return used.get() + bytes <= capacity;
    }

    long used() {
        return used.get();
    }

    /** What the cap leaves unused now. */
    long unused() {
        return capacity - used.get();
    }

    long capacity() {
        return capacity;
    }
}

package io.rdmaplane.rdma.provider;

import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * What every provider's region holds: the registered memory, its remote address and rkey, its
 * access, and whether it is still registered. A provider supplies only {@link #revoke()}.
 */
public abstract class AbstractMemoryRegion implements MemoryRegion {
    private final ByteBuffer memory;
    private final long address;
    private final int rkey;
    private final Set<Access> access;
    private final AtomicBoolean valid = new AtomicBoolean(true);
    private final Set<Consumer<MemoryRegion>> listeners = ConcurrentHashMap.newKeySet();

    protected AbstractMemoryRegion(ByteBuffer memory, long address, int rkey, Set<Access> access) {
        this.memory = memory;
        this.address = address;
        this.rkey = rkey;
        this.access = access;
    }

    /** Undoes the registration (the rkey stops working); called once, by {@link #deregister()}. */
    protected abstract void revoke();

    /** The registered memory itself, position and limit as registered. */
    protected final ByteBuffer memory() {
        return memory;
    }

    @Override
    public final long address() {
        return address;
    }

    @Override
    public final int length() {
        return memory.capacity();
    }

    @Override
    public final int rkey() {
        return rkey;
    }

    @Override
    public final Set<Access> access() {
        return access;
    }

    @Override
    public final ByteBuffer buffer() {
        return memory.duplicate().clear();
    }

    @Override
    public final boolean isValid() {
        return valid.get();
    }

    @Override
    public final void deregister() {
        if (valid.compareAndSet(true, false)) {
            revoke();
            for (Consumer<MemoryRegion> listener : listeners) {
                tell(listener);
            }
        }
    }

    @Override
    public final void whenDeregistered(Consumer<MemoryRegion> listener) {
        listeners.add(listener);
        if (!valid.get()) {
            tell(listener); // deregistered meanwhile: whichever side removes it tells it
        }
    }

    private void tell(Consumer<MemoryRegion> listener) {
        if (listeners.remove(listener)) {
            listener.accept(this);
        }
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "[rkey=" + Integer.toUnsignedString(rkey, 16) + ", address=0x"
                + Long.toHexString(address) + ", length=" + length() + ", access=" + access
                + (isValid() ? "" : ", deregistered") + "]";
    }
}

package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.AbstractMemoryRegion;
import io.rdmaplane.rdma.provider.Access;
import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A region in a {@link TcpNode}'s table. Its address is a virtual one the node assigns.
 *
 * <p>READ responses are written to the socket straight from this memory (no copy). Revocation is
 * real all the same: each socket write from it holds a {@linkplain #pinForWrite() pin}, and
 * {@link #deregister()} waits for the write under way (one non-blocking system call) before it
 * returns; later writes find the region revoked and send none of its bytes. So once deregister
 * returns, the memory may be reused and no peer ever receives what is written there next.
 */
final class TcpRegion extends AbstractMemoryRegion {
    private final TcpNode node;
    private final AtomicInteger writers = new AtomicInteger();
    /** Keys of grants of this region (TcpKey), revoked with it. */
    private final Set<TcpKey> keys = ConcurrentHashMap.newKeySet();

    TcpRegion(TcpNode node, ByteBuffer memory, long address, int rkey, Set<Access> access) {
        super(memory, address, rkey, access);
        this.node = node;
    }

    TcpNode node() {
        return node;
    }

    /** Revokes {@code key} with this region; false if the region is deregistered already. */
    boolean keep(TcpKey key) {
        keys.add(key);
        if (isValid()) {
            return true;
        }
        keys.remove(key);
        return false;
    }

    void forget(TcpKey key) {
        keys.remove(key);
    }

    /** The bytes at [offset, offset + length) of this region; the caller has checked bounds. */
    ByteBuffer slice(int offset, int length) {
        return memory().slice(offset, length);
    }

    /** Offset of [address, address + length) inside this region, or -1 if it is not inside. */
    int offsetOf(long remoteAddress, int length) {
        long offset = remoteAddress - address();
        if (remoteAddress < address() || length < 0 || offset > length() - (long) length) {
            return -1;
        }
        return (int) offset;
    }

    /**
     * Pins the memory for one socket write of its bytes, unless it is revoked (then false, not
     * pinned). Pin, then check: with deregister's revoke, then wait, one of the two always sees the other.
     */
    boolean pinForWrite() {
        writers.incrementAndGet();
        if (isValid()) {
            return true;
        }
        writers.decrementAndGet();
        return false;
    }

    void unpin() {
        writers.decrementAndGet();
    }

    @Override
    protected void revoke() {
        node.forget(this);
        for (TcpKey key : keys) {
            key.revoke();
        }
        keys.clear();
        // A write from this memory may be in a system call on a loop thread of the node right now: it is
        // short and never blocks (non-blocking socket), so wait for it rather than let it send
        // bytes the caller is about to overwrite. A loop thread itself never holds a pin here.
        for (int spins = 0; writers.get() != 0; spins++) {
            if (spins < 1000) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }
}

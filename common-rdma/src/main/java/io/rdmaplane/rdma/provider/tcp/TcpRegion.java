package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import java.nio.ByteBuffer;
import java.util.Set;

/** A region in a {@link TcpNode}'s table. Its address is a virtual one the node assigns. */
final class TcpRegion implements MemoryRegion {
    private final TcpNode node;
    private final ByteBuffer memory;
    private final long address;
    private final int rkey;
    private final Set<Access> access;
    private volatile boolean valid = true;

    TcpRegion(TcpNode node, ByteBuffer memory, long address, int rkey, Set<Access> access) {
        this.node = node;
        this.memory = memory;
        this.address = address;
        this.rkey = rkey;
        this.access = access;
    }

    TcpNode node() {
        return node;
    }

    /** The bytes at [offset, offset + length) of this region; the caller has checked bounds. */
    ByteBuffer slice(int offset, int length) {
        return memory.slice(offset, length);
    }

    /** Offset of [address, address + length) inside this region, or -1 if it is not inside. */
    int offsetOf(long remoteAddress, int length) {
        long offset = remoteAddress - address;
        if (remoteAddress < address || length < 0 || offset > memory.capacity() - (long) length) {
            return -1;
        }
        return (int) offset;
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public int length() {
        return memory.capacity();
    }

    @Override
    public int rkey() {
        return rkey;
    }

    @Override
    public Set<Access> access() {
        return access;
    }

    @Override
    public ByteBuffer buffer() {
        return memory.duplicate().clear();
    }

    @Override
    public boolean isValid() {
        return valid;
    }

    @Override
    public void deregister() {
        if (valid) {
            valid = false;
            node.forget(this);
        }
    }

    @Override
    public String toString() {
        return "TcpRegion[rkey=" + Integer.toUnsignedString(rkey, 16) + ", address=0x" + Long.toHexString(address)
                + ", length=" + length() + ", access=" + access + (valid ? "" : ", deregistered") + "]";
    }
}

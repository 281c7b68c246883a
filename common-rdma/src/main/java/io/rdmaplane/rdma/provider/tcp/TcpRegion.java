package io.rdmaplane.rdma.provider.tcp;

import io.rdmaplane.rdma.provider.AbstractMemoryRegion;
import io.rdmaplane.rdma.provider.Access;
import java.nio.ByteBuffer;
import java.util.Set;

/** A region in a {@link TcpNode}'s table. Its address is a virtual one the node assigns. */
final class TcpRegion extends AbstractMemoryRegion {
    private final TcpNode node;

    TcpRegion(TcpNode node, ByteBuffer memory, long address, int rkey, Set<Access> access) {
        super(memory, address, rkey, access);
        this.node = node;
    }

    TcpNode node() {
        return node;
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

    @Override
    protected void revoke() {
        node.forget(this);
    }
}

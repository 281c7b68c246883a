package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvMr;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** A memory region registered with ibv_reg_mr; its address is the buffer's native address. */
final class VerbsRegion implements MemoryRegion {
    private static final Logger LOG = LoggerFactory.getLogger(VerbsRegion.class);

    private final VerbsNode node;
    private final ByteBuffer memory;
    private final IbvMr mr;
    private final long address;
    private final int lkey;
    private final int rkey;
    private final Set<Access> access;
    private final AtomicBoolean valid = new AtomicBoolean(true);

    VerbsRegion(VerbsNode node, ByteBuffer memory, long address, IbvMr mr, Set<Access> access) {
        this.node = node;
        this.memory = memory;
        this.address = address;
        this.mr = mr;
        this.lkey = mr.getLkey();
        this.rkey = mr.getRkey();
        this.access = access;
    }

    VerbsNode node() {
        return node;
    }

    int lkey() {
        return lkey;
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
        return valid.get();
    }

    /** ibv_dereg_mr: the rkey is revoked when this returns. */
    @Override
    public void deregister() {
        if (valid.compareAndSet(true, false)) {
            try {
                Verbs.deregister(mr);
            } catch (IOException | RuntimeException e) {
                LOG.warn("ibv_dereg_mr of {} failed: {}", this, e.toString());
            }
            node.forget(this);
        }
    }

    @Override
    public String toString() {
        return "VerbsRegion[rkey=" + Integer.toUnsignedString(rkey, 16) + ", address=0x" + Long.toHexString(address)
                + ", length=" + length() + ", access=" + access + (valid.get() ? "" : ", deregistered") + "]";
    }
}

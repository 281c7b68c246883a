package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvMr;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.AbstractMemoryRegion;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** A memory region registered with ibv_reg_mr; its address is the buffer's native address. */
final class VerbsRegion extends AbstractMemoryRegion {
    private static final Logger LOG = LoggerFactory.getLogger(VerbsRegion.class);

    private final VerbsNode node;
    private final IbvMr mr;
    private final int lkey;

    VerbsRegion(VerbsNode node, ByteBuffer memory, long address, IbvMr mr, Set<Access> access) {
        super(memory, address, mr.getRkey(), access);
        this.node = node;
        this.mr = mr;
        this.lkey = mr.getLkey();
    }

    VerbsNode node() {
        return node;
    }

    int lkey() {
        return lkey;
    }

    /** ibv_dereg_mr: the rkey is revoked when this returns. */
    @Override
    protected void revoke() {
        try {
            Verbs.deregister(mr);
        } catch (IOException | RuntimeException e) {
            LOG.warn("ibv_dereg_mr of {} failed: {}", this, e.toString());
        }
        node.forget(this);
    }
}

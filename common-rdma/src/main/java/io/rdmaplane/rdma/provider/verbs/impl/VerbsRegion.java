package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvMr;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.AbstractMemoryRegion;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.Status;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A memory region registered with ibv_reg_mr; its address is the buffer's native address. A region
 * registered for grants (MW_BIND, no remote access of its own) is READ through its windows only.
 */
final class VerbsRegion extends AbstractMemoryRegion {
    private static final Logger LOG = LoggerFactory.getLogger(VerbsRegion.class);

    private final VerbsNode node;
    private final IbvMr mr;
    private final int lkey;
    private final boolean windowed;
    private final Set<VerbsWindow> windows = ConcurrentHashMap.newKeySet();
    private final Set<DomainKey> domainKeys = ConcurrentHashMap.newKeySet();

    VerbsRegion(VerbsNode node, ByteBuffer memory, long address, IbvMr mr, Set<Access> access, boolean windowed) {
        super(memory, address, mr.getRkey(), access);
        this.node = node;
        this.mr = mr;
        this.lkey = mr.getLkey();
        this.windowed = windowed;
    }

    VerbsNode node() {
        return node;
    }

    int lkey() {
        return lkey;
    }

    IbvMr mr() {
        return mr;
    }

    /** Registered for grants: READ through memory windows only. */
    boolean windowed() {
        return windowed;
    }

    /** A new type 2 window over [address, address + length) of this region (checked by the caller), not bound yet. */
    VerbsWindow newWindow(long address, int length) throws TransportException {
        VerbsWindow window;
        try {
            window = new VerbsWindow(this, NativeMw.alloc(node.pd()), address, length);
        } catch (IOException | RuntimeException e) {
            throw new TransportException(Status.LOCAL_PROTECTION_ERROR, "ibv_alloc_mw for " + this + " failed: " + e.getMessage(), e);
        }
        windows.add(window);
        if (!isValid()) {
            window.revoke(); // deregistered meanwhile
        }
        return window;
    }

    void forget(VerbsWindow window) {
        windows.remove(window);
    }

    /** Keeps a key registered over part of this region in a domain, to revoke with it; false if deregistered already. */
    boolean adopt(DomainKey key) {
        domainKeys.add(key);
        return isValid();
    }

    void forget(DomainKey key) {
        domainKeys.remove(key);
    }

    /**
     * Deallocates the windows (ibv_dereg_mr refuses a region with windows bound) and deregisters the domains' keys
     * over it, then ibv_dereg_mr: every rkey is revoked when this returns.
     */
    @Override
    protected void revoke() {
        for (VerbsWindow window : windows) {
            window.revoke();
        }
        for (DomainKey key : domainKeys) {
            key.revoke();
        }
        try {
            Verbs.deregister(mr);
        } catch (IOException | RuntimeException e) {
            LOG.warn("ibv_dereg_mr of {} failed: {}", this, e.toString());
        }
        node.forget(this);
    }
}

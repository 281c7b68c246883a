package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import io.rdmaplane.rdma.provider.KeyDomain;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link KeyDomain} on verbs: a protection domain of its own. The channels accepted into it have their QPs,
 * receive buffers and send buffers here; each key is an ibv_reg_mr of exactly its range here (REMOTE_READ),
 * so the device refuses a READ with it through any QP of another PD (the node's, another peer's domain), of
 * any byte outside the range, or after ibv_dereg_mr. Unlike a memory window this needs no MW_BIND, which a
 * read-only file mapping refuses: it binds mapped map outputs and HDFS block files per peer as well. The PD
 * is deallocated once the domain is closed and its last channel destroyed.
 */
final class VerbsDomain implements KeyDomain {
    private static final Logger LOG = LoggerFactory.getLogger(VerbsDomain.class);
    /** Send buffers per registered chunk: a domain's channels send little (handshakes, answers). */
    private static final int SEND_SLOTS_PER_CHUNK = 4;

    private final VerbsNode node;
    private final IbvPd pd;
    private final int sendSlotBytes;
    // guarded by this
    private final Set<DomainKey> keys = new HashSet<>();
    private SendPool sendPool;
    private int channels;
    private boolean closed;
    private boolean released;

    VerbsDomain(VerbsNode node, IbvPd pd, int sendSlotBytes) {
        this.node = node;
        this.pd = pd;
        this.sendSlotBytes = sendSlotBytes;
    }

    VerbsNode node() {
        return node;
    }

    IbvPd pd() {
        return pd;
    }

    /** A key over [address, address + length) of {@code region} (checked by the caller): a registration here. */
    DomainKey key(VerbsRegion region, long address, int length) throws TransportException {
        synchronized (this) {
            if (closed) {
                throw new TransportException(Status.FLUSHED, this + " is closed: no key is made for it");
            }
            IbvMr mr;
            try {
                // No /proc/self/maps scan per key: the region's own registration advised its whole mapping already.
                mr = Verbs.register(pd, address, length, IbvMr.IBV_ACCESS_REMOTE_READ);
            } catch (IOException | RuntimeException e) {
                throw new TransportException(Status.LOCAL_PROTECTION_ERROR, "ibv_reg_mr of a key's " + length + " bytes at 0x"
                        + Long.toHexString(address) + " of " + region + " in " + this + " failed: " + e.getMessage(), e);
            }
            DomainKey key = new DomainKey(this, region, mr, address, length);
            keys.add(key);
            node.countKeyRegistration();
            if (!region.adopt(key)) {
                key.revoke(); // deregistered meanwhile
            }
            return key;
        }
    }

    synchronized void forget(DomainKey key) {
        keys.remove(key);
    }

    /** An accepted channel joins before its QP is created; false once the domain is closed. */
    synchronized boolean enter() {
        if (closed) {
            return false;
        }
        channels++;
        return true;
    }

    /** The send buffers of this domain's channels (registered here: a SEND's source must be in its QP's PD). */
    synchronized SendPool sendPool() {
        if (sendPool == null) {
            sendPool = new SendPool(pd, sendSlotBytes, SEND_SLOTS_PER_CHUNK);
        }
        return sendPool;
    }

    /** A channel of the domain was destroyed (its QP and buffers gone): the last one lets the idle domain's buffers go. */
    void leave() {
        synchronized (this) {
            channels--;
            if (channels > 0) {
                return;
            }
            if (sendPool != null) { // a remembered peer with no channel keeps a PD, not buffers
                sendPool.close();
                sendPool = null;
            }
            if (!closed) {
                return;
            }
        }
        release();
    }

    @Override
    public void close() {
        List<DomainKey> revoked;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            revoked = new ArrayList<>(keys);
        }
        revoked.forEach(DomainKey::revoke);
        boolean idle;
        synchronized (this) {
            idle = channels == 0;
        }
        if (idle) {
            release();
        }
    }

    /** ibv_dealloc_pd, once, when closed and without channels (the node's close frees what is left). */
    void release() {
        synchronized (this) {
            if (released) {
                return;
            }
            released = true;
            closed = true;
            if (sendPool != null) {
                sendPool.close();
                sendPool = null;
            }
        }
        try {
            pd.deallocPd();
        } catch (Exception e) {
            LOG.warn("ibv_dealloc_pd of {} failed: {}", this, e.toString());
        }
        node.forget(this);
    }

    @Override
    public String toString() {
        return "key domain " + Integer.toHexString(System.identityHashCode(this)) + " of " + node.name();
    }
}

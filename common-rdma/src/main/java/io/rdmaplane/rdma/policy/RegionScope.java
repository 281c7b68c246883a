package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.MemoryRegion;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The regions that belong to one owner (an application, a shuffle, a peer). Closing the scope
 * deregisters them all, so their rkeys are revoked at once and a late READ fails with a
 * remote access error instead of reading memory that has moved on.
 */
public final class RegionScope implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RegionScope.class);
    private final String name;
    private final List<MemoryRegion> regions = new ArrayList<>();
    private boolean closed;

    public RegionScope(String name) {
        this.name = name;
    }

    /** Adds a region to the scope; if the scope is already closed, deregisters it at once. */
    public <R extends MemoryRegion> R add(R region) {
        synchronized (this) {
            if (!closed) {
                regions.add(region);
                return region;
            }
        }
        region.deregister();
        throw new IllegalStateException("scope " + name + " is closed; its regions are revoked");
    }

    public synchronized int size() {
        return regions.size();
    }

    public synchronized boolean isClosed() {
        return closed;
    }

    @Override
    public void close() {
        List<MemoryRegion> revoked;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            revoked = List.copyOf(regions);
            regions.clear();
        }
        revoked.forEach(MemoryRegion::deregister);
        LOG.debug("scope {} closed: {} regions deregistered", name, revoked.size());
    }

    @Override
    public String toString() {
        return "RegionScope[" + name + "]";
    }
}

package io.rdmaplane.hdfs.datanode;

import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;

import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Block files mapped read-only and registered for REMOTE_READ only, one region per replica
 * (pool, block id, generation stamp), within a cap of registered bytes. Least recently used
 * regions make room, but not one handed out within the lease (its READs may be in flight); when
 * nothing can make room the caller is told to fall back. The mapping is of a finalized replica,
 * whose bytes never change while its generation stamp stays (append and truncate bump it).
 */
final class RegionCache implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RegionCache.class);

    record Key(String poolId, long blockId, long generationStamp) {
    }

    /** One registered block file. {@code metaHeader} is filled on first use. */
    static final class Region {
        final Key key;
        final MappedByteBuffer mapping;
        final MemoryRegion memory;
        final long length;
        volatile long lastUsedNanos;
        volatile ChecksumLayout checksums;

        Region(Key key, MappedByteBuffer mapping, MemoryRegion memory, long length) {
            this.key = key;
            this.mapping = mapping;
            this.memory = memory;
            this.length = length;
            this.lastUsedNanos = System.nanoTime();
        }
    }

    /** The replica's stored checksum header: Hadoop DataChecksum type id, chunk size, bytes per checksum. */
    record ChecksumLayout(int typeId, int bytesPerChecksum, int checksumSize) {
    }

    private final Node node;
    private final long capBytes;
    private final long leaseNanos;
    private final LinkedHashMap<Key, Region> regions = new LinkedHashMap<>(64, 0.75f, true);
    private long registeredBytes;
    private long released;
    private boolean closed;

    RegionCache(Node node, long capBytes, long leaseNanos) {
        this.node = node;
        this.capBytes = capBytes;
        this.leaseNanos = leaseNanos;
    }

    /**
     * The region of the replica, mapped and registered on first use; null when the cap leaves
     * no room (every region is leased).
     */
    Region acquire(Key key, long length, Path blockFile) throws IOException {
        if (length > Integer.MAX_VALUE) {
            throw new IOException("block file of " + length + " bytes is too large to map as one region");
        }
        synchronized (this) {
            if (closed) {
                throw new IOException("the RDMA block service is stopping");
            }
            Region existing = regions.get(key);
            if (existing != null && existing.length == length && existing.memory.isValid()) {
                existing.lastUsedNanos = System.nanoTime();
                return existing;
            }
            if (existing != null) {
                remove(existing);
            }
            if (!makeRoom(length)) {
                return null;
            }
            registeredBytes += length; // reserved while mapping outside the lock
        }
        Region created;
        try (FileChannel file = FileChannel.open(blockFile, StandardOpenOption.READ)) {
            if (file.size() < length) {
                throw new IOException("block file " + blockFile + " holds " + file.size() + " bytes, the replica " + length);
            }
            MappedByteBuffer mapping = file.map(FileChannel.MapMode.READ_ONLY, 0, length);
            created = new Region(key, mapping, node.register(mapping), length); // REMOTE_READ only
        } catch (IOException | RuntimeException e) {
            synchronized (this) {
                registeredBytes -= length;
            }
            throw e;
        }
        synchronized (this) {
            Region raced = closed ? null : regions.get(key);
            if (closed || raced != null) {
                registeredBytes -= length;
                created.memory.deregister();
                if (closed) {
                    throw new IOException("the RDMA block service is stopping");
                }
                raced.lastUsedNanos = System.nanoTime();
                return raced;
            }
            regions.put(key, created);
            return created;
        }
    }

    /** Releases least recently used regions out of their lease until {@code length} more bytes fit. */
    private boolean makeRoom(long length) {
        long now = System.nanoTime();
        Iterator<Region> lru = regions.values().iterator();
        List<Region> evict = new ArrayList<>();
        long freed = 0;
        while (registeredBytes - freed + length > capBytes && lru.hasNext()) {
            Region r = lru.next();
            if (now - r.lastUsedNanos >= leaseNanos) {
                evict.add(r);
                freed += r.length;
            }
        }
        if (registeredBytes - freed + length > capBytes) {
            return false;
        }
        evict.forEach(this::remove);
        return true;
    }

    /** Releases the regions that are idle or whose replica is gone or changed. */
    synchronized int sweep(long idleNanos, Predicate<Key> replicaStillServable) {
        long now = System.nanoTime();
        List<Region> stale = new ArrayList<>();
        for (Region r : regions.values()) {
            if (now - r.lastUsedNanos >= idleNanos || !replicaStillServable.test(r.key)) {
                stale.add(r);
            }
        }
        stale.forEach(this::remove);
        return stale.size();
    }

    synchronized void invalidate(Key key) {
        Region r = regions.get(key);
        if (r != null) {
            remove(r);
        }
    }

    private void remove(Region r) {
        if (regions.remove(r.key, r)) {
            registeredBytes -= r.length;
            released++;
            r.memory.deregister(); // the rkey is revoked: a late READ fails and its reader falls back
            LOG.debug("released the RDMA region of {}", r.key);
        }
    }

    synchronized long registeredBytes() {
        return registeredBytes;
    }

    synchronized int size() {
        return regions.size();
    }

    synchronized long released() {
        return released;
    }

    @Override
    public void close() {
        synchronized (this) {
            closed = true;
            new ArrayList<>(regions.values()).forEach(this::remove);
        }
    }

}

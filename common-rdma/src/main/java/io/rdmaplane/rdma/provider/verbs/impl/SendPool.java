package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvPd;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Registered buffers that outgoing messages are copied into (a SEND's source must be
 * registered, and the caller may reuse its buffer as soon as send returns). Shared by the
 * node's channels; grows a registered chunk at a time, up to the peak of SENDs outstanding at
 * once (bounded by the channels' queue depths), and is deregistered when the node closes.
 */
final class SendPool {
    private static final Logger LOG = LoggerFactory.getLogger(SendPool.class);
    static final int SLOTS_PER_CHUNK = 16;

    /** One message buffer: header at 0, message after it. */
    static final class Slot {
        final ByteBuffer buffer;
        final long address;
        final int lkey;

        Slot(ByteBuffer buffer, long address, int lkey) {
            this.buffer = buffer;
            this.address = address;
            this.lkey = lkey;
        }
    }

    private final IbvPd pd;
    private final int slotBytes;
    private final int slotsPerChunk;
    private final ConcurrentLinkedQueue<Slot> free = new ConcurrentLinkedQueue<>();
    private final List<IbvMr> chunks = new ArrayList<>();
    private boolean closed;

    SendPool(IbvPd pd, int slotBytes) {
        this(pd, slotBytes, SLOTS_PER_CHUNK);
    }

    SendPool(IbvPd pd, int slotBytes, int slotsPerChunk) {
        this.pd = pd;
        this.slotBytes = Frames.align(slotBytes);
        this.slotsPerChunk = slotsPerChunk;
    }

    Slot take() throws IOException {
        Slot slot = free.poll();
        return slot != null ? slot : grow();
    }

    void release(Slot slot) {
        free.add(slot);
    }

    private synchronized Slot grow() throws IOException {
        Slot slot = free.poll();
        if (slot != null) {
            return slot;
        }
        if (closed) {
            throw new IOException("send buffers released (node closed)");
        }
        ByteBuffer chunk = ByteBuffer.allocateDirect(slotBytes * slotsPerChunk);
        long base = Verbs.address(chunk);
        IbvMr mr = Verbs.register(pd, base, chunk.capacity(), 0); // the HCA only reads these
        chunks.add(mr);
        for (int i = 1; i < slotsPerChunk; i++) {
            free.add(new Slot(chunk.slice(i * slotBytes, slotBytes), base + (long) i * slotBytes, mr.getLkey()));
        }
        return new Slot(chunk.slice(0, slotBytes), base, mr.getLkey());
    }

    synchronized void close() {
        closed = true;
        for (IbvMr mr : chunks) {
            try {
                Verbs.deregister(mr);
            } catch (IOException | RuntimeException e) {
                LOG.warn("ibv_dereg_mr of a send buffer chunk failed: {}", e.toString());
            }
        }
        chunks.clear();
        free.clear();
    }
}

package io.rdmaplane.spark.fetch;

import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.io.InputStream;
import java.io.SequenceInputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.network.buffer.ManagedBuffer;

/**
 * A block's payload as Spark sees it: views of the registered buffer the READ landed in,
 * decoded in place, never copied (except by {@link #nioByteBuffer()} of a payload in several
 * pieces). The reference count starts at 1, held by the fetcher, which releases it right after
 * the listener's callback returns; Spark's listener {@link #retain()}s it for its consumer. At
 * 0 the registered buffer is given back (to the pool, or deregistered). Views handed out before
 * then must not be used after. A buffer given back without ever having been opened runs
 * {@code unread} too: Spark counts a remote block in its task metrics only when it opens it, and
 * a task that stops reading early (a join whose other side ran out, a killed task) opens fewer
 * blocks than were fetched for it.
 */
final class RdmaManagedBuffer extends ManagedBuffer {
    private final List<ByteBuffer> views;
    private final long size;
    private final Runnable free;
    private final Runnable unread;
    private final String name;
    private final AtomicInteger refs = new AtomicInteger(1);
    private volatile boolean opened;

    RdmaManagedBuffer(List<ByteBuffer> views, long size, Runnable free, Runnable unread, String name) {
        this.views = List.copyOf(views);
        this.size = size;
        this.free = free;
        this.unread = unread;
        this.name = name;
    }

    @Override
    public long size() {
        return size;
    }

    /** The payload: a view of the registered memory when it is one piece, else a heap copy. */
    @Override
    public ByteBuffer nioByteBuffer() throws IOException {
        checkLive();
        if (views.size() == 1) {
            return views.get(0).duplicate();
        }
        if (size > Integer.MAX_VALUE) {
            throw new IOException(name + " has " + size + " bytes, too many for one ByteBuffer");
        }
        ByteBuffer copy = ByteBuffer.allocate((int) size);
        views.forEach(v -> copy.put(v.duplicate()));
        return copy.flip();
    }

    @Override
    public InputStream createInputStream() throws IOException {
        checkLive();
        if (views.size() == 1) {
            return new ViewInputStream(views.get(0).duplicate());
        }
        List<InputStream> streams = new ArrayList<>(views.size());
        views.forEach(v -> streams.add(new ViewInputStream(v.duplicate())));
        return new SequenceInputStream(Collections.enumeration(streams));
    }

    @Override
    public ManagedBuffer retain() {
        int before = refs.getAndUpdate(n -> n > 0 ? n + 1 : n);
        if (before <= 0) {
            throw new IllegalStateException(name + " retained after its last release");
        }
        return this;
    }

    @Override
    public ManagedBuffer release() {
        int after = refs.decrementAndGet();
        if (after == 0) {
            free.run();
            if (!opened) {
                unread.run();
            }
        } else if (after < 0) {
            throw new IllegalStateException(name + " released more often than retained");
        }
        return this;
    }

    /** References held now (0 once the registered buffer is given back). */
    int refCount() {
        return Math.max(0, refs.get());
    }

    @Override
    public Object convertToNetty() throws IOException {
        checkLive();
        ByteBuffer[] duplicates = views.stream().map(ByteBuffer::duplicate).toArray(ByteBuffer[]::new);
        return Unpooled.wrappedBuffer(duplicates);
    }

    // Abstract from Spark 4.0 (SSL for RPC); Spark 3.5 has no such method, so no @Override: the same source
    // compiles for every line.
    public Object convertToNettyForSsl() throws IOException {
        return convertToNetty();
    }

    /** Checks the buffer is still referenced, and notes it was opened. */
    private void checkLive() throws IOException {
        if (refs.get() <= 0) {
            throw new IOException(name + " used after its last release");
        }
        opened = true;
    }

    @Override
    public String toString() {
        return "RdmaManagedBuffer[" + name + ", " + size + " bytes in " + views.size() + " view(s), refs " + refs.get() + "]";
    }

    /** An input stream over one view, without copying it. */
    private static final class ViewInputStream extends InputStream {
        private final ByteBuffer view;
        private int mark;

        ViewInputStream(ByteBuffer view) {
            this.view = view;
            this.mark = view.position();
        }

        @Override
        public int read() {
            return view.hasRemaining() ? view.get() & 0xFF : -1;
        }

        @Override
        public int read(byte[] b, int off, int len) {
            java.util.Objects.checkFromIndexSize(off, len, b.length);
            if (len == 0) {
                return 0;
            }
            if (!view.hasRemaining()) {
                return -1;
            }
            int n = Math.min(len, view.remaining());
            view.get(b, off, n);
            return n;
        }

        @Override
        public long skip(long n) {
            int skipped = (int) Math.max(0, Math.min(n, view.remaining()));
            view.position(view.position() + skipped);
            return skipped;
        }

        @Override
        public int available() {
            return view.remaining();
        }

        @Override
        public boolean markSupported() {
            return true;
        }

        @Override
        public synchronized void mark(int readlimit) {
            mark = view.position();
        }

        @Override
        public synchronized void reset() {
            view.position(mark);
        }
    }
}

package io.rdmaplane.spark.fetch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class RdmaManagedBufferTest {
    private static ByteBuffer direct(int... bytes) {
        ByteBuffer buffer = ByteBuffer.allocateDirect(bytes.length);
        for (int b : bytes) {
            buffer.put((byte) b);
        }
        return buffer.flip();
    }

    @Test
    void testOneViewIsServedWithoutCopying() throws IOException {
        ByteBuffer view = direct(1, 2, 3, 4, 5);
        AtomicInteger freed = new AtomicInteger();
        RdmaManagedBuffer buffer = new RdmaManagedBuffer(List.of(view), 5, freed::incrementAndGet, () -> { }, "b");
        assertEquals(5, buffer.size());
        ByteBuffer nio = buffer.nioByteBuffer();
        assertTrue(nio.isDirect(), "the registered memory itself, not a copy");
        nio.put(0, (byte) 42);
        assertEquals(42, view.get(0), "same memory");
        try (InputStream in = buffer.createInputStream()) {
            assertEquals(42, in.read());
            byte[] rest = new byte[10];
            assertEquals(4, in.read(rest, 0, 10));
            assertEquals(-1, in.read());
        }
        ByteBuf netty = (ByteBuf) buffer.convertToNetty();
        assertEquals(5, netty.readableBytes());
        assertEquals(42, netty.getByte(0));
        assertEquals(5, ((ByteBuf) buffer.convertToNettyForSsl()).readableBytes());
        assertEquals(0, view.position(), "no user moves the view itself");
    }

    @Test
    void testSeveralViewsAreChained() throws IOException {
        RdmaManagedBuffer buffer = new RdmaManagedBuffer(List.of(direct(1, 2), direct(3), direct(4, 5, 6)), 6, () -> { }, () -> { }, "b");
        byte[] all = {1, 2, 3, 4, 5, 6};
        try (InputStream in = buffer.createInputStream()) {
            assertArrayEquals(all, in.readAllBytes());
        }
        ByteBuffer nio = buffer.nioByteBuffer();
        byte[] copy = new byte[nio.remaining()];
        nio.get(copy);
        assertArrayEquals(all, copy);
        ByteBuf netty = (ByteBuf) buffer.convertToNetty();
        byte[] wrapped = new byte[netty.readableBytes()];
        netty.readBytes(wrapped);
        assertArrayEquals(all, wrapped);
    }

    @Test
    void testReferenceCountingFreesOnceAtZero() throws IOException {
        AtomicInteger freed = new AtomicInteger();
        RdmaManagedBuffer buffer = new RdmaManagedBuffer(List.of(direct(7)), 1, freed::incrementAndGet, () -> { }, "b");
        assertSame(buffer, buffer.retain()); // Spark's listener keeps it
        buffer.release(); // the fetcher's own reference, right after the callback
        assertEquals(0, freed.get());
        assertEquals(1, buffer.refCount());
        assertEquals(7, buffer.createInputStream().read());
        buffer.release(); // Spark is done with it
        assertEquals(1, freed.get());
        assertEquals(0, buffer.refCount());
        assertThrows(IOException.class, buffer::createInputStream, "no use after the last release");
        assertThrows(IOException.class, buffer::nioByteBuffer);
        assertThrows(IllegalStateException.class, buffer::retain);
        assertThrows(IllegalStateException.class, buffer::release);
        assertEquals(1, freed.get(), "freed exactly once");
    }

    @Test
    void testABufferGivenBackUnopenedIsReportedUnreadOnceAndAnOpenedOneIsNot() throws IOException {
        AtomicInteger unread = new AtomicInteger();
        RdmaManagedBuffer skipped = new RdmaManagedBuffer(List.of(direct(1)), 1, () -> { }, unread::incrementAndGet, "skipped");
        skipped.retain();
        skipped.release();
        assertEquals(0, unread.get(), "still referenced");
        skipped.release();
        assertEquals(1, unread.get(), "given back without being opened");

        RdmaManagedBuffer read = new RdmaManagedBuffer(List.of(direct(2)), 1, () -> { }, unread::incrementAndGet, "read");
        assertEquals(2, read.createInputStream().read());
        read.release();
        RdmaManagedBuffer viewed = new RdmaManagedBuffer(List.of(direct(3)), 1, () -> { }, unread::incrementAndGet, "viewed");
        assertEquals(3, viewed.nioByteBuffer().get());
        viewed.release();
        assertEquals(1, unread.get(), "opened buffers are not unread");
    }
}

package io.rdmaplane.rdma.provider.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.testing.Polling;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Revocation on the tcp provider, which writes READ responses straight from registered memory:
 * a reader that stops draining holds responses queued, and neither its slowness nor its silence
 * may let memory out after its region was revoked (and reused), or keep the responses forever.
 * A {@link TcpRelay} between the nodes holds back what the server sends.
 */
class TcpRevocationTest {
    private static final int WAIT = 20;
    private static final int READ = 8 << 20;
    /** Many times what the sockets' buffers on the way hold, so most responses wait in the server's queue. */
    private static final int READS = 6;
    private static final byte OLD = 0x11;
    private static final byte NEW = 0x77;
    private final List<Node> nodes = new ArrayList<>();

    @AfterEach
    void stop() {
        nodes.forEach(Node::close);
    }

    @Test
    void aQueuedReadResponseNeverCarriesMemoryWrittenAfterItsRegionWasRevoked() throws Exception {
        CompletableFuture<Void> requestsServed = new CompletableFuture<>();
        Node server = node(Duration.ofSeconds(60), new ChannelHandler() {
            @Override
            public void onMessage(Channel channel, ByteBuffer message) {
                requestsServed.complete(null); // the SEND came after the READs: they are all queued now
            }
        }, null);
        ByteBuffer memory = ByteBuffer.allocateDirect(READ);
        fill(memory, OLD);
        MemoryRegion source = server.register(memory);
        Node client = node(Duration.ofSeconds(60), null, null);
        MemoryRegion landing = client.register(ByteBuffer.allocateDirect(READS * READ), EnumSet.of(Access.LOCAL_WRITE));
        try (TcpRelay link = new TcpRelay(server.localAddress())) {
            Channel channel = client.connect(link.address(), READS + 1, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
            link.stallReplies(true);
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < READS; i++) {
                reads.add(channel.read(source.address(), source.rkey(), READ, landing, i * READ));
            }
            channel.send(ByteBuffer.wrap(new byte[] {1}));
            requestsServed.get(WAIT, TimeUnit.SECONDS);
            // The first response is partly sent, the others wait whole in the server's queue.
            Polling.waitUntil(() -> link.repliesRead() > 0, Duration.ofSeconds(WAIT), "the server to start sending");

            source.deregister();
            fill(memory, NEW); // the memory is reused at once, as a pool does
            link.stallReplies(false);

            int completed = 0;
            for (CompletableFuture<Void> read : reads) {
                if (settled(read) == null) {
                    completed++;
                }
            }
            ByteBuffer received = landing.buffer();
            for (int i = 0; i < received.limit(); i++) {
                if (received.get(i) == NEW) {
                    throw new AssertionError("byte " + i + " of what the reader received (READ " + i / READ + ", "
                            + completed + " of " + READS + " READs completed) was written after the region was revoked");
                }
            }
            assertTrue(completed < READS, "every READ completed although its region was revoked while most were queued");
        }
    }

    @Test
    void aReaderThatStopsDrainingLosesItsChannelAfterTheOperationTimeout() throws Exception {
        CompletableFuture<TransportException> serverSide = new CompletableFuture<>();
        Node server = node(Duration.ofMillis(500), null, serverSide);
        ByteBuffer memory = ByteBuffer.allocateDirect(READ);
        fill(memory, OLD);
        MemoryRegion source = server.register(memory);
        // The reader's own timeout is far longer: only the server's can end this.
        Node client = node(Duration.ofSeconds(60), null, null);
        MemoryRegion landing = client.register(ByteBuffer.allocateDirect(READS * READ), EnumSet.of(Access.LOCAL_WRITE));
        try (TcpRelay link = new TcpRelay(server.localAddress())) {
            Channel channel = client.connect(link.address(), READS, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
            link.stallReplies(true);
            List<CompletableFuture<Void>> reads = new ArrayList<>();
            for (int i = 0; i < READS; i++) {
                reads.add(channel.read(source.address(), source.rkey(), READ, landing, i * READ));
            }

            TransportException cause = serverSide.get(WAIT, TimeUnit.SECONDS);
            assertEquals(Status.RETRY_EXCEEDED, cause.status(), cause.getMessage());
            assertTrue(cause.getMessage().contains("operationTimeout"), cause.getMessage());

            // What was already on the way arrives; then the reader sees the channel end, nothing hangs.
            link.stallReplies(false);
            int failed = 0;
            for (CompletableFuture<Void> read : reads) {
                if (settled(read) != null) {
                    failed++;
                }
            }
            assertTrue(failed > 0, "every READ completed although the server gave up on the reader");
            Polling.waitUntil(() -> !channel.isOpen(), Duration.ofSeconds(WAIT), "the reader's channel to close");
            assertFalse(channel.isOpen());
        }
    }

    /** A node with this operation timeout; listening (with {@code handler}, closes reported to {@code closed}) unless both are null. */
    private Node node(Duration timeout, ChannelHandler handler, CompletableFuture<TransportException> closed) throws Exception {
        Node node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback().withOperationTimeout(timeout));
        nodes.add(node);
        if (handler != null || closed != null) {
            node.listen(channel -> new ChannelHandler() {
                @Override
                public void onMessage(Channel c, ByteBuffer message) {
                    if (handler != null) {
                        handler.onMessage(c, message);
                    }
                }

                @Override
                public void onClosed(Channel c, TransportException cause) {
                    if (closed != null) {
                        closed.complete(cause);
                    }
                }
            });
        }
        return node;
    }

    /** Waits for the READ to end: null if it completed, else its error (a TransportException). */
    private static Throwable settled(CompletableFuture<Void> read) throws Exception {
        try {
            read.get(WAIT, TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            assertInstanceOf(TransportException.class, e.getCause());
            return e.getCause();
        }
    }

    private static void fill(ByteBuffer memory, byte value) {
        for (int i = 0; i < memory.capacity(); i++) {
            memory.put(i, value);
        }
    }
}

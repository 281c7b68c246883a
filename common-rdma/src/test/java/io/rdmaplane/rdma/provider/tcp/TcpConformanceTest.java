package io.rdmaplane.rdma.provider.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.ProviderConformanceSuite;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.rdma.testing.Polling;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The conformance suite on the tcp provider, over loopback, and what only tcp does yet. */
class TcpConformanceTest extends ProviderConformanceSuite {
    @Override
    protected TransportProvider provider() {
        return TcpProvider.INSTANCE;
    }

    @Override
    protected NodeOptions serverOptions() {
        return NodeOptions.loopback();
    }

    @Override
    protected NodeOptions clientOptions() {
        return NodeOptions.loopback();
    }

    /**
     * Control ahead of bulk: both ends' bulk paths are held busy (a handler that does not return
     * stands for a thread busy moving megabytes), a deep backlog of READs is queued behind them,
     * and a request on a {@link Lane#CONTROL} channel issued after the backlog is still answered
     * before any of it completes. A provider that serves both lanes on one thread (or completion
     * queue) answers only once the backlog has drained. Provider-neutral; here until the verbs
     * provider puts accepted channels in their lane too (issue 13), then it moves to the suite.
     */
    @Test
    void aControlRequestIsAnsweredBeforeABacklogOfBulkReadsDrains() throws Exception {
        int reads = 64;
        int size = 256 << 10;
        byte[] hold = {'H'};
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch held = new CountDownLatch(2); // the echo server's bulk thread and ours
        LinkedBlockingQueue<Channel> echoAccepted = new LinkedBlockingQueue<>();
        List<byte[]> answers = new CopyOnWriteArrayList<>();
        ChannelHandler holding = new ChannelHandler() {
            @Override
            public void onMessage(Channel ch, ByteBuffer message) {
                held.countDown();
                try {
                    release.await(2 * WAIT_SECONDS, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        Node echo = provider().createNode(serverOptions());
        Node third = provider().createNode(clientOptions());
        try {
            echo.listen(channel -> {
                echoAccepted.add(channel);
                return new ChannelHandler() {
                    @Override
                    public void onMessage(Channel ch, ByteBuffer message) {
                        if (message.remaining() == 1 && message.get(message.position()) == 'H') {
                            holding.onMessage(ch, message);
                        } else {
                            ch.send(message); // the answer to a control request: its bytes back
                        }
                    }
                };
            });
            MemoryRegion source = exposed(echo, reads * size, 21);
            MemoryRegion landing = landing(client, reads * size);
            Channel bulk = client.connect(echo.localAddress(), reads + 1, holding).get(WAIT_SECONDS, TimeUnit.SECONDS);
            Channel echoBulk = echoAccepted.poll(WAIT_SECONDS, TimeUnit.SECONDS);
            Channel control = client.connect(echo.localAddress(), 4, Lane.CONTROL, new ChannelHandler() {
                @Override
                public void onMessage(Channel ch, ByteBuffer message) {
                    answers.add(bytes(message));
                }
            }).get(WAIT_SECONDS, TimeUnit.SECONDS);
            // The echo server's bulk thread is held through another node's channel: ours will be held by then.
            Channel other = third.connect(echo.localAddress(), 4, new ChannelHandler() { }).get(WAIT_SECONDS, TimeUnit.SECONDS);
            await(echoBulk.send(ByteBuffer.wrap(hold)));
            await(other.send(ByteBuffer.wrap(hold)));
            assertTrue(held.await(WAIT_SECONDS, TimeUnit.SECONDS), "both bulk threads held");
            List<CompletableFuture<Void>> backlog = new ArrayList<>();
            for (int i = 0; i < reads; i++) {
                backlog.add(bulk.read(source.address() + (long) i * size, source.rkey(), size, landing, i * size));
            }
            byte[] request = {'c', 't', 'l'};
            CompletableFuture<Void> sent = control.send(ByteBuffer.wrap(request));
            Polling.waitUntil(() -> !answers.isEmpty(), WAIT, "the answer to a control request while bulk READs wait");
            await(sent);
            assertArrayEquals(request, answers.get(0));
            assertEquals(0, backlog.stream().filter(CompletableFuture::isDone).count(), "the backlog had not drained");
            release.countDown();
            for (CompletableFuture<Void> read : backlog) {
                await(read);
            }
            assertArrayEquals(bytes(source.buffer()), bytes(landing.buffer()), "the backlog's bytes, once released");
        } finally {
            release.countDown();
            third.close();
            echo.close();
        }
    }
}

package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.Polling;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * An Error thrown while serving one request (a decoder's OutOfMemoryError or StackOverflowError)
 * costs that request, or that channel, never the node: the node goes on serving everyone else.
 */
class HandlerErrorTest {
    private static final long WAIT = 30;

    @Test
    void aRequestHandlersErrorFailsThatRequestOnlyAndTheServerGoesOn() throws Exception {
        PolicyServer.RequestHandler handler = (peer, request) -> {
            if (request.get(0) == 13) {
                throw new StackOverflowError("a self-nesting message");
            }
            return request;
        };
        try (PolicyFixture f = new PolicyFixture(PolicyFixture.fast(), PolicyFixture.fast(), handler)) {
            f.server.markReady();
            ExecutionException failed = assertThrows(ExecutionException.class,
                    () -> f.peer().request(ByteBuffer.wrap(new byte[] {13})).get(WAIT, TimeUnit.SECONDS));
            assertTrue(String.valueOf(failed.getCause().getMessage()).contains("StackOverflowError"), failed.toString());
            assertEquals(14, f.peer().request(ByteBuffer.wrap(new byte[] {14})).get(WAIT, TimeUnit.SECONDS).get(0));
            try (Node other = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
                 PolicyClient client = new PolicyClient(other, PolicyFixture.fast(), new PolicyMetrics())) {
                assertEquals(15, client.peer(f.serverNode.localAddress()).request(ByteBuffer.wrap(new byte[] {15}))
                        .get(WAIT, TimeUnit.SECONDS).get(0), "another client is served too");
            }
        }
    }

    @Test
    void aMessageHandlersErrorClosesThatChannelOnlyAndTheNodeGoesOn() throws Exception {
        try (Node server = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             Node client = TcpProvider.INSTANCE.createNode(NodeOptions.loopback())) {
            server.listen(accepted -> new ChannelHandler() {
                @Override
                public void onMessage(Channel channel, ByteBuffer message) {
                    if (message.get(0) == 1) {
                        throw new OutOfMemoryError("Requested array size exceeds VM limit");
                    }
                    channel.send(ByteBuffer.wrap(new byte[] {2}));
                }
            });
            Channel hostile = client.connect(server.localAddress(), 4, new ChannelHandler() {
            }).get(WAIT, TimeUnit.SECONDS);
            hostile.send(ByteBuffer.wrap(new byte[] {1}));
            Polling.waitUntil(() -> !hostile.isOpen(), Duration.ofSeconds(WAIT), "the channel whose message threw is closed");
            assertFalse(server.terminated().isDone(), "the node is not closed");
            java.util.concurrent.CompletableFuture<Byte> answer = new java.util.concurrent.CompletableFuture<>();
            Channel honest = client.connect(server.localAddress(), 4, new ChannelHandler() {
                @Override
                public void onMessage(Channel channel, ByteBuffer message) {
                    answer.complete(message.get(0));
                }
            }).get(WAIT, TimeUnit.SECONDS);
            honest.send(ByteBuffer.wrap(new byte[] {0}));
            assertEquals((byte) 2, answer.get(WAIT, TimeUnit.SECONDS), "a new channel is served");
        }
    }
}

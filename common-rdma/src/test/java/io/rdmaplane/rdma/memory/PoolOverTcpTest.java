package io.rdmaplane.rdma.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Pool slices READ from one tcp node into another, as the data plane uses them. */
class PoolOverTcpTest {
    private static final int MiB = 1 << 20;
    private static final long WAIT_SECONDS = 20;

    private Node server;
    private Node client;
    private RegisteredMemoryPool serverPool;
    private RegisteredMemoryPool clientPool;
    private Channel channel;

    @BeforeEach
    void connect() throws Exception {
        server = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
        client = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
        serverPool = new RegisteredMemoryPool(server, new PoolOptions(32 * MiB, Duration.ZERO));
        clientPool = new RegisteredMemoryPool(client, new PoolOptions(32 * MiB, Duration.ZERO));
        server.listen(accepted -> new ChannelHandler() {
        });
        channel = client.connect(server.localAddress(), 64, new ChannelHandler() {
        }).get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    @AfterEach
    void close() {
        channel.close();
        clientPool.close();
        serverPool.close();
        client.close();
        server.close();
    }

    @Test
    void aReadCopiesAPoolSliceOfOneNodeIntoAPoolSliceOfAnother() throws Exception {
        for (int length : new int[] {1, 5000, MiB, 8 * MiB}) {
            // A second slice of each class, so offsets within the region are not zero.
            try (RegisteredBuffer firstSource = serverPool.acquire(length);
                 RegisteredBuffer source = serverPool.acquire(length);
                 RegisteredBuffer firstTarget = clientPool.acquire(length);
                 RegisteredBuffer target = clientPool.acquire(length)) {
                fill(source.buffer(), length, 31 * length);
                fill(firstSource.buffer(), length, 7);
                channel.read(source.remoteAddress(), source.region().rkey(), length, target.region(), target.offset())
                        .get(WAIT_SECONDS, TimeUnit.SECONDS);
                assertEquals(-1, source.buffer().slice(0, length).mismatch(target.buffer().slice(0, length)),
                        "first differing byte of " + length);
                assertEquals(0, firstTarget.buffer().get(0), "the READ landed only in the target slice");
            }
        }
        long serverRegistrations = server.registrationCount();
        long clientRegistrations = client.registrationCount();
        for (int i = 0; i < 50; i++) {
            try (RegisteredBuffer source = serverPool.acquire(64 << 10); RegisteredBuffer target = clientPool.acquire(64 << 10)) {
                source.buffer().putInt(0, i);
                channel.read(source.remoteAddress(), source.region().rkey(), 4, target.region(), target.offset())
                        .get(WAIT_SECONDS, TimeUnit.SECONDS);
                assertEquals(i, target.buffer().getInt(0));
            }
        }
        assertEquals(serverRegistrations, server.registrationCount(), "no registration per READ");
        assertEquals(clientRegistrations, client.registrationCount(), "no registration per READ");
    }

    @Test
    void closingThePoolRevokesItsRkeys() throws Exception {
        RegisteredBuffer source = serverPool.acquire(4096);
        long remoteAddress = source.remoteAddress();
        int rkey = source.region().rkey();
        serverPool.close();
        try (RegisteredBuffer target = clientPool.acquire(4096)) {
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> channel.read(remoteAddress, rkey, 4096, target.region(), target.offset()).get(WAIT_SECONDS, TimeUnit.SECONDS));
            assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, e.getCause()).status());
        }
    }

    private static void fill(ByteBuffer buffer, int length, int seed) {
        for (int i = 0; i < length; i++) {
            buffer.put(i, (byte) (seed + i * 131));
        }
    }
}

package io.rdmaplane.rdma.provider.faulty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import java.nio.ByteBuffer;
import java.util.EnumSet;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The test-only provider as a JVM started by a test sees it: selected by name, its nodes armed from
 * the system properties for this JVM's id, and a bad property is an error naming it.
 */
class FaultyProviderTest {
    private static final Map<String, String> PROPERTIES = Map.of(
            FaultyProvider.ID, "7",
            FaultyProvider.PREFIX + "7." + FaultyProvider.CORRUPT_READS, "1",
            FaultyProvider.PREFIX + "8." + FaultyProvider.CORRUPT_READS, "5");

    @AfterEach
    void clear() {
        PROPERTIES.keySet().forEach(System::clearProperty);
        System.clearProperty(FaultyProvider.PREFIX + FaultyProvider.CLOSE_AFTER_REQUESTS);
    }

    @Test
    void nodesAreArmedFromTheSystemPropertiesOfThisJvmsId() throws Exception {
        PROPERTIES.forEach(System::setProperty);
        byte[] bytes = new byte[4096];
        new Random(3).nextBytes(bytes);
        try (Node server = TcpProvider.INSTANCE.createNode(NodeOptions.loopback());
             Node client = Providers.select("faulty").createNode(NodeOptions.loopback())) {
            assertEquals("faulty", client.providerName());
            server.listen(channel -> new ChannelHandler() { });
            MemoryRegion source = server.register(ByteBuffer.allocateDirect(bytes.length).put(bytes).flip());
            MemoryRegion landing = client.register(ByteBuffer.allocateDirect(bytes.length), EnumSet.of(Access.LOCAL_WRITE));
            Channel channel = client.connect(server.localAddress(), 4, new ChannelHandler() { }).get(20, TimeUnit.SECONDS);

            channel.read(source.address(), source.rkey(), bytes.length, landing, 0).get(20, TimeUnit.SECONDS);
            byte[] first = new byte[bytes.length];
            landing.buffer().get(first);
            assertFalse(java.util.Arrays.equals(bytes, first), "rdmaplane.faults.7.corruptReads=1: the first READ is corrupted");

            channel.read(source.address(), source.rkey(), bytes.length, landing, 0).get(20, TimeUnit.SECONDS);
            byte[] second = new byte[bytes.length];
            landing.buffer().get(second);
            assertArrayEquals(bytes, second, "one READ only; id 8's five are not this JVM's");
        }
    }

    @Test
    void aBadCountIsAnErrorNamingTheProperty() throws Exception {
        System.setProperty(FaultyProvider.PREFIX + FaultyProvider.CLOSE_AFTER_REQUESTS, "three");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Providers.select("faulty").createNode(NodeOptions.loopback()));
        assertEquals("system property rdmaplane.faults.closeAfterRequests = 'three': expected a whole number >= 0", e.getMessage());
    }
}

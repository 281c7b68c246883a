package io.rdmaplane.spark.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.policy.PolicyMetrics;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.PolicyServer;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.WireFuzz;
import io.rdmaplane.spark.registry.RegistryProtocol.Type;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class RegistryTest {
    @Test
    void messagesRoundTrip() throws Exception {
        RegistryProtocol.Request r = RegistryProtocol.decodeRequest(RegistryProtocol.register("7", "10.0.0.1", 4711));
        assertEquals(new RegistryProtocol.Request(Type.REGISTER, "7", "10.0.0.1", 4711), r);
        r = RegistryProtocol.decodeRequest(RegistryProtocol.lookup("exécuteur"));
        assertEquals("exécuteur", r.executorId());
        assertEquals(Type.LOOKUP, r.type());
        assertNull(RegistryProtocol.decodeLookupAnswer(RegistryProtocol.lookupAnswer(null, 0)).address());
        assertTrue(RegistryProtocol.decodeLookupAnswer(RegistryProtocol.removed()).removed());
        InetSocketAddress a = RegistryProtocol.decodeLookupAnswer(RegistryProtocol.lookupAnswer("h", 9)).address();
        assertEquals("h", a.getHostString());
        assertEquals(9, a.getPort());
        RegistryProtocol.decodeRegistered(RegistryProtocol.registered());
        RegistrationRefusedException refused = assertThrows(RegistrationRefusedException.class,
                () -> RegistryProtocol.decodeRegistered(RegistryProtocol.refused("executor 7 is taken")));
        assertEquals("executor 7 is taken", refused.getMessage());
        String long_ = "é".repeat(RegistryProtocol.MAX_REASON_BYTES);
        refused = assertThrows(RegistrationRefusedException.class, () -> RegistryProtocol.decodeRegistered(RegistryProtocol.refused(long_)));
        assertTrue(refused.getMessage().endsWith("..."), "a long reason is cut to the bound");
    }

    @Test
    void malformedMessagesNameTheField() {
        byte v = RegistryProtocol.VERSION;
        assertMessage("version", ByteBuffer.allocate(0), true);
        assertMessage("version: unsupported registry version 1", ByteBuffer.wrap(new byte[] {1, id(Type.LOOKUP), 0, 0}), true);
        assertMessage("type: unknown", ByteBuffer.wrap(new byte[] {v, 9, 0, 0}), true);
        assertMessage("type", RegistryProtocol.lookupAnswer(null, 0), true);
        assertMessage("executorId", ByteBuffer.wrap(new byte[] {v, id(Type.REGISTER), 0, 5, 'a'}), true);
        assertMessage("executorId: 4096 bytes is more than the " + RegistryProtocol.MAX_STRING_BYTES + "-byte bound",
                ByteBuffer.wrap(new byte[] {v, id(Type.LOOKUP), 0x10, 0}), true);
        ByteBuffer shortPort = RegistryProtocol.register("1", "h", 1);
        assertMessage("port", shortPort.limit(shortPort.limit() - 1), true);
        ByteBuffer trailing = ByteBuffer.allocate(16).put(RegistryProtocol.lookup("1")).put((byte) 0).flip();
        assertMessage("trailing", trailing, true);
        assertMessage("found", ByteBuffer.wrap(new byte[] {v, id(Type.LOOKUP_ANSWER), 2}), false);
        assertMessage("host", ByteBuffer.wrap(new byte[] {v, id(Type.LOOKUP_ANSWER), 1, 0, 3, 'h'}), false);
        assertMessage("type: expected a registry LOOKUP_ANSWER message, was REGISTERED", RegistryProtocol.registered(), false);
    }

    /** Random bytes and mutations of valid messages: the decoders only ever throw the codec's error. */
    @Test
    void fuzzedMessagesOnlyEverThrowMalformedMessageException() {
        java.util.Random random = new java.util.Random(20250613);
        List<ByteBuffer> seeds = List.of(RegistryProtocol.register("17", "10.1.2.3", 4711), RegistryProtocol.lookup("exécuteur"),
                RegistryProtocol.lookupAnswer("host.example", 7337), RegistryProtocol.lookupAnswer(null, 0),
                RegistryProtocol.removed(), RegistryProtocol.registered(), RegistryProtocol.refused("executor 17 is registered from 10.0.0.9"));
        int decoded = 0;
        for (int round = 0; round < 5_000; round++) {
            ByteBuffer input = WireFuzz.mutation(random, seeds, round, 32);
            decoded += WireFuzz.decodes(() -> RegistryProtocol.decodeRequest(input.duplicate()))
                    + WireFuzz.decodes(() -> RegistryProtocol.decodeLookupAnswer(input.duplicate()))
                    + WireFuzz.decodes(() -> {
                        try {
                            RegistryProtocol.decodeRegistered(input.duplicate());
                        } catch (RegistrationRefusedException refused) {
                            // a well-formed REFUSED: decoded
                        }
                    });
        }
        assertTrue(decoded > 0, "some inputs (whole messages, harmless flips) still decode");
    }

    private static byte id(Type type) {
        return (byte) RegistryProtocol.PROTOCOL.wireId(type);
    }

    private static void assertMessage(String field, ByteBuffer bytes, boolean request) {
        MalformedMessageException e = assertThrows(MalformedMessageException.class, () -> {
            if (request) {
                RegistryProtocol.decodeRequest(bytes);
            } else {
                RegistryProtocol.decodeLookupAnswer(bytes);
            }
        });
        assertTrue(e.getMessage().startsWith(field), e.getMessage());
    }

    @Test
    void executorsRegisterAndLookUpOthers() throws Exception {
        PolicyOptions policy = PolicyOptions.defaults().withTimeouts(Duration.ofMillis(200), Duration.ofSeconds(5),
                Duration.ofMillis(500));
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), policy, new PolicyMetrics());
             RegistryClient one = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), policy, new PolicyMetrics(), registry.address());
             RegistryClient two = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), policy, new PolicyMetrics(), registry.address())) {
            one.register("1", new InetSocketAddress("127.0.0.1", 5001));
            assertEquals(Map.of("1", new InetSocketAddress("127.0.0.1", 5001)), two.lookup(List.of("1", "3")));
            assertNull(two.cached("3"), "an unknown executor is not cached as found");
            two.register("2", new InetSocketAddress("127.0.0.1", 5002));
            assertEquals(Map.of("1", new InetSocketAddress("127.0.0.1", 5001), "2", new InetSocketAddress("127.0.0.1", 5002)),
                    one.lookup(List.of("1", "2")));
            assertEquals(2, registry.executors().size());
        }
    }

    private static PolicyOptions quick(byte[] secret) {
        PolicyOptions base = PolicyOptions.defaults().withTimeouts(Duration.ofMillis(200), Duration.ofSeconds(5), Duration.ofMillis(500))
                .withReconnect(Duration.ofMillis(10), Duration.ZERO, Duration.ofMillis(20), 1);
        return secret == null ? base : base.withSecret(secret);
    }

    private static PolicyServer.PeerIdentity from(String host) {
        return new PolicyServer.PeerIdentity(UUID.randomUUID(), new InetSocketAddress(host, 40000));
    }

    /**
     * Without a secret anyone may REGISTER; an anonymous one used to overwrite an executor's address,
     * and reducers READ from the attacker. An executor id is now bound to its first registrant's host:
     * a REGISTER of it from another host is refused with the reason, and LOOKUP keeps answering the first.
     */
    @Test
    void aRegisterOfATakenIdFromAnotherHostIsRefusedAndLookupsStillReturnTheFirst() throws Exception {
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), quick(null), new PolicyMetrics());
             RegistryClient executor = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick(null), new PolicyMetrics(),
                     registry.address());
             RegistryClient reducer = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick(null), new PolicyMetrics(),
                     registry.address())) {
            InetSocketAddress real = new InetSocketAddress("127.0.0.1", 5001);
            executor.register("1", real);
            // The attacker, from another host (on loopback every connection comes from 127.0.0.1: its REGISTER is handed in).
            RegistrationRefusedException refused = assertThrows(RegistrationRefusedException.class, () -> RegistryProtocol.decodeRegistered(
                    registry.handle(from("10.6.6.6"), RegistryProtocol.register("1", "10.6.6.6", 6666))));
            assertTrue(refused.getMessage().contains("executor 1") && refused.getMessage().contains("127.0.0.1")
                    && refused.getMessage().contains("10.6.6.6"), refused.getMessage());
            assertEquals(Map.of("1", real), reducer.lookup(List.of("1")));
            assertEquals(Map.of("1", InetSocketAddress.createUnresolved("127.0.0.1", 5001)), registry.executors());

            // An id the attacker took first is refused to the real executor, over the wire, with the reason.
            RegistryProtocol.decodeRegistered(registry.handle(from("10.6.6.6"), RegistryProtocol.register("2", "10.6.6.6", 6666)));
            refused = assertThrows(RegistrationRefusedException.class, () -> executor.register("2", new InetSocketAddress("127.0.0.1", 5002)));
            assertTrue(refused.getMessage().contains("executor 2 is registered from another host (10.6.6.6)"), refused.getMessage());

            // The same host may register again (a restarted data node): the address is updated.
            InetSocketAddress restarted = new InetSocketAddress("127.0.0.1", 5003);
            executor.register("1", restarted);
            assertEquals(InetSocketAddress.createUnresolved("127.0.0.1", 5003), registry.executors().get("1"));
        }
    }

    /** With a secret the policy server answers no request before the handshake: a REGISTER without the secret is refused. */
    @Test
    void withASecretARegisterWithoutItIsRefused() throws Exception {
        byte[] secret = "app-secret".getBytes(java.nio.charset.StandardCharsets.UTF_8);
        PolicyMetrics metrics = new PolicyMetrics();
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), quick(secret), metrics);
             RegistryClient anonymous = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick(null), new PolicyMetrics(),
                     registry.address());
             RegistryClient forger = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(),
                     quick("guessed".getBytes(java.nio.charset.StandardCharsets.UTF_8)), new PolicyMetrics(), registry.address());
             RegistryClient executor = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick(secret), new PolicyMetrics(),
                     registry.address())) {
            assertThrows(Exception.class, () -> anonymous.register("1", new InetSocketAddress("127.0.0.1", 6666)));
            assertThrows(Exception.class, () -> forger.register("1", new InetSocketAddress("127.0.0.1", 6666)));
            assertEquals(Map.of(), registry.executors(), "nothing registered without the secret");
            assertTrue(metrics.registry().counter("rdma.auth.failures").getCount() > 0, "the refusals counted as authentication failures");
            executor.register("1", new InetSocketAddress("127.0.0.1", 5001));
            assertEquals(Map.of("1", InetSocketAddress.createUnresolved("127.0.0.1", 5001)), registry.executors());
        }
    }

    /** A LOOKUP answer is used only on the host Spark knows the executor by (its BlockManagerId host). */
    @Test
    void aLookupAnswerOnAnotherHostThanSparksIsNotUsed() throws Exception {
        try (ExecutorRegistry registry = new ExecutorRegistry(TcpProvider.INSTANCE, NodeOptions.loopback(), quick(null), new PolicyMetrics());
             RegistryClient reducer = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), quick(null), new PolicyMetrics(),
                     registry.address())) {
            reducer.register("1", new InetSocketAddress("127.0.0.1", 5001));
            reducer.register("2", new InetSocketAddress("127.0.0.1", 5002));
            reducer.register("3", new InetSocketAddress("127.0.0.1", 5003));
            Map<String, String> spark = new java.util.LinkedHashMap<>();
            spark.put("1", "127.0.0.1");
            spark.put("2", "192.0.2.7"); // Spark says executor 2 is elsewhere: the registry's answer is someone else's
            spark.put("3", "localhost"); // a name: compared by its addresses
            spark.put("4", "127.0.0.1"); // not registered
            assertEquals(Map.of("1", new InetSocketAddress("127.0.0.1", 5001), "3", new InetSocketAddress("127.0.0.1", 5003)),
                    reducer.lookup(spark));
            assertEquals(Map.of("1", new InetSocketAddress("127.0.0.1", 5001), "3", new InetSocketAddress("127.0.0.1", 5003)),
                    reducer.lookup(spark), "the same again (decided once)");
        }
    }

    @Test
    void anUnreachableRegistryIsAMissNotAHang() throws Exception {
        PolicyOptions policy = PolicyOptions.defaults().withTimeouts(Duration.ofMillis(50), Duration.ofMillis(300),
                Duration.ofMillis(100)).withReconnect(Duration.ofMillis(10), Duration.ZERO, Duration.ofMillis(20), 2);
        InetSocketAddress nobody;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            nobody = new InetSocketAddress("127.0.0.1", s.getLocalPort());
        }
        try (RegistryClient client = new RegistryClient(TcpProvider.INSTANCE, NodeOptions.loopback(), policy, new PolicyMetrics(), nobody)) {
            assertEquals(Map.of(), client.lookup(List.of("1")));
        }
    }
}

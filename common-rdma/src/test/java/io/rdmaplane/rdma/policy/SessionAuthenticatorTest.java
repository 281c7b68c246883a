package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.testing.Polling;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.time.Duration;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A server whose sessions open with a credential ({@link SessionAuthenticator}, as HDFS's block tokens):
 * only a client that names a credential the server takes and proves its key gets a session; the session
 * is bound to what the credential grants (the handler sees it) and ends when the credential expires.
 */
class SessionAuthenticatorTest {
    private static final byte[] KEY = "the key of credential A".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CREDENTIAL = "credential A".getBytes(StandardCharsets.US_ASCII);
    private final AtomicLong expiresAt = new AtomicLong(Long.MAX_VALUE);
    private Node serverNode;
    private Node clientNode;
    private PolicyServer server;
    private PolicyClient client;
    private InetSocketAddress address;

    @BeforeEach
    void start() throws Exception {
        serverNode = TestTransport.TCP.node(true);
        clientNode = TestTransport.TCP.node(false);
        SessionAuthenticator authenticator = credential -> {
            if (!Arrays.equals(CREDENTIAL, credential)) {
                throw new GeneralSecurityException("unknown credential");
            }
            return new SessionAuthenticator.SessionKey(KEY, "bound to A", expiresAt.get());
        };
        // the handler answers with what the request's session is bound to
        server = new PolicyServer(serverNode, PolicyFixture.fast(), ServerLimits.defaults(), new PolicyMetrics(), authenticator,
                (peer, request) -> ByteBuffer.wrap(String.valueOf(peer.binding()).getBytes(StandardCharsets.UTF_8))).start();
        server.markReady();
        client = new PolicyClient(clientNode, PolicyFixture.fast(), new PolicyMetrics());
        address = serverNode.localAddress();
    }

    @AfterEach
    void stop() {
        client.close();
        server.close();
        clientNode.close();
        serverNode.close();
    }

    private static String text(ByteBuffer b) {
        return StandardCharsets.UTF_8.decode(b).toString();
    }

    @Test
    void theRightCredentialAndKeyOpenASessionBoundToWhatTheCredentialGrantsAndItsDataChannelReads() throws Exception {
        try (PeerConnection peer = client.dedicated(address, new ClientCredential(CREDENTIAL, KEY))) {
            assertEquals("bound to A", text(peer.request(ByteBuffer.allocate(1)).get(10, TimeUnit.SECONDS)));
            byte[] bytes = new byte[4096];
            new java.util.Random(7).nextBytes(bytes);
            MemoryRegion region = serverNode.register(ByteBuffer.allocateDirect(bytes.length).put(bytes).flip());
            server.grants(client.instance(address)).grant(region.rkey());
            MemoryRegion landing = clientNode.register(ByteBuffer.allocateDirect(bytes.length), EnumSet.of(Access.LOCAL_WRITE));
            peer.read(new RemoteBlock(region.address(), region.rkey(), bytes.length, PolicyFixture.crc(region.buffer())), landing, 0)
                    .get(10, TimeUnit.SECONDS);
            byte[] got = new byte[bytes.length];
            landing.buffer().get(0, got);
            assertArrayEquals(bytes, got, "the data channel, bound to the session, READ the granted region");
        }
    }

    @Test
    void anUnknownCredentialAWrongKeyOrNoneOpenNoSession() {
        ClientCredential[] refused = {
            new ClientCredential("credential B".getBytes(StandardCharsets.US_ASCII), KEY), // the server does not take it
            new ClientCredential(CREDENTIAL, "a guessed key".getBytes(StandardCharsets.US_ASCII)), // not its key
            new ClientCredential(new byte[0], KEY), // none
        };
        for (ClientCredential credential : refused) {
            try (PeerConnection peer = client.dedicated(address, credential)) {
                ExecutionException e = assertThrows(ExecutionException.class,
                        () -> peer.request(ByteBuffer.allocate(1)).get(10, TimeUnit.SECONDS));
                assertInstanceOf(PeerUnavailableException.class, e.getCause());
                assertTrue(peer.isAuthenticationRefused(), "refused on authentication: " + e.getCause().getMessage());
            }
        }
        // and a client that asks for no authentication at all
        try (PolicyClient open = new PolicyClient(clientNode, PolicyFixture.fast(), new PolicyMetrics())) {
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> open.peer(address).request(ByteBuffer.allocate(1)).get(10, TimeUnit.SECONDS));
            assertInstanceOf(PeerUnavailableException.class, e.getCause());
        }
        assertEquals(0, server.liveSessions(), "no session was opened");
    }

    @Test
    void theSessionEndsWhenItsCredentialExpires() throws Exception {
        expiresAt.set(System.currentTimeMillis() + 1500);
        try (PeerConnection peer = client.dedicated(address, new ClientCredential(CREDENTIAL, KEY))) {
            assertEquals("bound to A", text(peer.request(ByteBuffer.allocate(1)).get(10, TimeUnit.SECONDS)));
            assertEquals(1, server.liveSessions());
            // the server closes the session at expiry; the client's reconnects name a credential now expired
            expiresAt.set(System.currentTimeMillis() - 1);
            Polling.waitUntil(peer::isFailed, Duration.ofSeconds(30), "the session to end with its credential");
            assertFalse(server.liveSessions() > 0, "no session outlives its credential");
        }
    }
}

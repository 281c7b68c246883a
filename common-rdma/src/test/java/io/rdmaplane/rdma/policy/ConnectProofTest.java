package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Admission;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelAcceptor;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.ConnectRequest;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.TransportException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** The proof a connect request carries where the transport reads it before a channel exists (verbs). */
class ConnectProofTest {
    private static final byte[] SECRET = "app-secret".getBytes(StandardCharsets.US_ASCII);
    private static final InetSocketAddress FROM = new InetSocketAddress("192.0.2.1", 4000);

    @Test
    void aFreshProofOfTheSecretIsTakenOnceAndSaysItsTrafficClass() throws Exception {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(16);
        long now = System.currentTimeMillis();
        byte[] data = ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce());
        assertTrue(data.length <= ConnectRequest.MAX_DATA, "fits RDMA-CM's private data: " + data.length);
        // RoCE pads the private data with zeros to 56 bytes.
        assertEquals(TrafficClass.DATA, check(verifier, SECRET, ByteBuffer.wrap(java.util.Arrays.copyOf(data, 56)), now).trafficClass());
        refused(verifier, data, now, "replayed");
        assertEquals(TrafficClass.CONTROL, check(verifier, SECRET, 
                ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.CONTROL, now, ConnectProof.nonce())), now).trafficClass());
    }

    @Test
    void aProofWithoutTheSecretOrOffTheClockOrAlteredOrMissingIsRefused() {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(16);
        long now = System.currentTimeMillis();
        refused(verifier, ConnectProof.create("other".getBytes(StandardCharsets.US_ASCII), TrafficClass.DATA, now, ConnectProof.nonce()),
                now, "does not match");
        refused(verifier, ConnectProof.create(null, TrafficClass.DATA, now, ConnectProof.nonce()), now, "does not match");
        long old = now - ConnectProof.CLOCK_SKEW - 1000;
        refused(verifier, ConnectProof.create(SECRET, TrafficClass.DATA, old, ConnectProof.nonce()), now, "off this host's clock");
        byte[] altered = ConnectProof.create(SECRET, TrafficClass.CONTROL, now, ConnectProof.nonce());
        altered[1] = 2; // CONTROL -> DATA: a readable QP for a control proof
        refused(verifier, altered, now, "does not match");
        refused(verifier, new byte[0], now, "no proof");
        refused(verifier, new byte[56], now, "no proof"); // what RoCE delivers for a connect without private data
        byte[] otherVersion = ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce());
        otherVersion[0] = 2; // the version whose data channels proved the secret
        refused(verifier, otherVersion, now, "version 2, this build speaks 3");
        refused(verifier, new byte[] {(byte) ConnectProof.VERSION, 2, 3}, now, "malformed");
    }

    @Test
    void theNoncesRememberedAgainstReplayAreBounded() throws Exception {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(2);
        long now = System.currentTimeMillis();
        check(verifier, SECRET, ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce())), now);
        check(verifier, SECRET, ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce())), now);
        refused(verifier, ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce()), now, "too many connects");
        long later = now + 2 * ConnectProof.CLOCK_SKEW + 1; // the first two can no longer be replayed: forgotten
        check(verifier, SECRET, ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.DATA, later, ConnectProof.nonce())), later);
    }

    @Test
    void aDataChannelsSessionIsCoveredByTheMac() throws Exception {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(16);
        long now = System.currentTimeMillis();
        byte[] session = Auth.nonce();
        byte[] data = ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce(), session);
        assertArrayEquals(session, check(verifier, SECRET, ByteBuffer.wrap(data), now).session(), "the session it names");
        byte[] otherSession = ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce(), session);
        otherSession[2 + Long.BYTES + ConnectProof.NONCE_BYTES] ^= 1; // another session's id under this proof's mac
        refused(verifier, otherSession, now, "does not match");
    }

    @Test
    void aDataChannelProvesItsSessionsKeyNotTheKeyItWasDerivedFrom() throws Exception {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(16);
        long now = System.currentTimeMillis();
        byte[] session = Auth.nonce();
        byte[] sessionKey = Auth.sessionKey(SECRET, session);
        assertEquals(TrafficClass.DATA, check(verifier, sessionKey,
                ByteBuffer.wrap(ConnectProof.create(sessionKey, TrafficClass.DATA, now, ConnectProof.nonce(), session)), now)
                .trafficClass());
        for (byte[] key : new byte[][] {SECRET, null, Auth.sessionKey(SECRET, Auth.nonce())}) { // the secret, none, another's
            byte[] data = ConnectProof.create(key, TrafficClass.DATA, now, ConnectProof.nonce(), session);
            ConnectProof.Refusal refusal = assertThrows(ConnectProof.Refusal.class,
                    () -> check(verifier, sessionKey, ByteBuffer.wrap(data), now));
            assertTrue(refusal.getMessage().contains("does not match the key of the session it names"), refusal.getMessage());
        }
    }

    @Test
    void withoutASecretOnlyTheLayoutIsChecked() throws Exception {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(16);
        long now = System.currentTimeMillis();
        assertEquals(TrafficClass.DATA, check(verifier, null, ByteBuffer.wrap(ConnectProof.create(null, TrafficClass.DATA)), now)
                .trafficClass());
        refused(verifier, new byte[0], now, "no proof");
    }

    @Test
    void thePolicyServerRefusesAConnectWithoutAValidProofAndServesNoReadOnControl() throws Exception {
        AcceptorOnly node = new AcceptorOnly();
        PolicyMetrics metrics = new PolicyMetrics();
        try (PolicyServer server = new PolicyServer(node, PolicyFixture.fast().withSecret(SECRET), metrics,
                PolicyFixture.echo()).start()) {
            ChannelAcceptor acceptor = node.acceptor;
            assertNotNull(acceptor);
            assertEquals(Admission.REFUSE, acceptor.admit(FROM, ByteBuffer.allocate(0)));
            assertEquals(Admission.REFUSE, acceptor.admit(FROM, ByteBuffer.wrap(ConnectProof.create(null, TrafficClass.CONTROL))));
            assertEquals(Admission.ACCEPT_WITHOUT_REMOTE_READ,
                    acceptor.admit(FROM, ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.CONTROL))));
            // A data channel's connect that names no live session (none was started here): refused before its mac
            // is looked at (it is on the session's key), no QP. (One in a live session: DataPlaneAuthTest on verbs.)
            assertEquals(Admission.REFUSE, acceptor.admit(FROM, ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.DATA))));
            assertEquals(3, metrics.registry().counter("rdma.server.refused").getCount());
            assertEquals(1, metrics.registry().counter("rdma.auth.failures").getCount(), "the control proof without the secret");
        }
    }

    /** What the server does: the proof's layout, then its mac on {@code key}, clock and nonce. */
    private static ConnectProof.Claim check(ConnectProof.Verifier verifier, byte[] key, ByteBuffer data, long now)
            throws ConnectProof.Refusal {
        ConnectProof.Parsed proof = ConnectProof.parse(data);
        verifier.verify(proof, key, now);
        return proof.claim;
    }

    private static void refused(ConnectProof.Verifier verifier, byte[] data, long now, String reason) {
        ConnectProof.Refusal refusal = assertThrows(ConnectProof.Refusal.class, () -> check(verifier, SECRET, ByteBuffer.wrap(data), now));
        assertTrue(refusal.getMessage().contains(reason), refusal.getMessage());
    }

    /** A node that only keeps the acceptor it is given, to ask it what a transport would. */
    private static final class AcceptorOnly implements Node {
        ChannelAcceptor acceptor;

        @Override
        public void listen(ChannelAcceptor acceptor) {
            this.acceptor = acceptor;
        }

        @Override
        public MemoryRegion register(ByteBuffer buffer, Set<io.rdmaplane.rdma.provider.Access> access) throws TransportException {
            throw new UnsupportedOperationException();
        }

        @Override
        public InetSocketAddress localAddress() {
            return FROM;
        }

        @Override
        public CompletableFuture<Channel> connect(InetSocketAddress peer, int queueDepth, ChannelHandler handler) {
            throw new UnsupportedOperationException();
        }

        @Override
        public long registrationCount() {
            return 0;
        }

        @Override
        public String providerName() {
            return "none";
        }

        @Override
        public CompletableFuture<Void> terminated() {
            return new CompletableFuture<>();
        }

        @Override
        public void close() {
        }
    }
}

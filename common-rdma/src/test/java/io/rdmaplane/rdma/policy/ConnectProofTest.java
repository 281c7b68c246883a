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
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(SECRET, 16);
        long now = System.currentTimeMillis();
        byte[] data = ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce());
        assertTrue(data.length <= ConnectRequest.MAX_DATA, "fits RDMA-CM's private data: " + data.length);
        // RoCE pads the private data with zeros to 56 bytes.
        assertEquals(TrafficClass.DATA, verifier.check(ByteBuffer.wrap(java.util.Arrays.copyOf(data, 56)), now).trafficClass());
        refused(verifier, data, now, "replayed");
        assertEquals(TrafficClass.CONTROL, verifier.check(
                ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.CONTROL, now, ConnectProof.nonce())), now).trafficClass());
    }

    @Test
    void aProofWithoutTheSecretOrOffTheClockOrAlteredOrMissingIsRefused() {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(SECRET, 16);
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
        otherVersion[0] = 1; // the version before the session was added
        refused(verifier, otherVersion, now, "version 1");
        refused(verifier, new byte[] {(byte) ConnectProof.VERSION, 2, 3}, now, "malformed");
    }

    @Test
    void theNoncesRememberedAgainstReplayAreBounded() throws Exception {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(SECRET, 2);
        long now = System.currentTimeMillis();
        verifier.check(ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce())), now);
        verifier.check(ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce())), now);
        refused(verifier, ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce()), now, "too many connects");
        long later = now + 2 * ConnectProof.CLOCK_SKEW + 1; // the first two can no longer be replayed: forgotten
        verifier.check(ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.DATA, later, ConnectProof.nonce())), later);
    }

    @Test
    void aDataChannelsSessionIsCoveredByTheMac() throws Exception {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(SECRET, 16);
        long now = System.currentTimeMillis();
        byte[] session = Auth.nonce();
        byte[] data = ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce(), session);
        assertArrayEquals(session, verifier.check(ByteBuffer.wrap(data), now).session(), "the session it names");
        byte[] otherSession = ConnectProof.create(SECRET, TrafficClass.DATA, now, ConnectProof.nonce(), session);
        otherSession[2 + Long.BYTES + ConnectProof.NONCE_BYTES] ^= 1; // another session's id under this proof's mac
        refused(verifier, otherSession, now, "does not match");
    }

    @Test
    void withoutASecretOnlyTheLayoutIsChecked() throws Exception {
        ConnectProof.Verifier verifier = new ConnectProof.Verifier(null, 16);
        long now = System.currentTimeMillis();
        assertEquals(TrafficClass.DATA, verifier.check(ByteBuffer.wrap(ConnectProof.create(null, TrafficClass.DATA)), now)
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
            assertEquals(Admission.REFUSE, acceptor.admit(FROM, ByteBuffer.wrap(ConnectProof.create(null, TrafficClass.DATA))));
            assertEquals(Admission.ACCEPT_WITHOUT_REMOTE_READ,
                    acceptor.admit(FROM, ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.CONTROL))));
            // A valid proof of a data channel that names no live session (none was started here): refused, no QP.
            // (A data connect in a live session is ACCEPTed: DataPlaneAuthTest on verbs.)
            assertEquals(Admission.REFUSE, acceptor.admit(FROM, ByteBuffer.wrap(ConnectProof.create(SECRET, TrafficClass.DATA))));
            assertEquals(3, metrics.registry().counter("rdma.server.refused").getCount());
            assertEquals(1, metrics.registry().counter("rdma.auth.failures").getCount(), "the proof without the secret");
        }
    }

    private static void refused(ConnectProof.Verifier verifier, byte[] data, long now, String reason) {
        ConnectProof.Refusal refusal = assertThrows(ConnectProof.Refusal.class, () -> verifier.check(ByteBuffer.wrap(data), now));
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

package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.policy.ControlFrame.Type;
import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.ConnectRequest;
import io.rdmaplane.rdma.provider.Lane;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.testing.Polling;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.EnumSet;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The data plane is authenticated and keys are bound to their peer: an outsider speaking the
 * transport and the policy protocol by hand READs nothing it is not entitled to, on either
 * channel kind, whatever valid rkey it holds. Each test runs on tcp (loopback) and on verbs (the
 * Soft-RoCE VM, skipped loudly elsewhere; integration-tests/vm/verbs-conformance.sh runs them).
 * Where the verbs provider refuses earlier than tcp (a connect without a valid proof gets no QP),
 * the test says what each provider does.
 */
class DataPlaneAuthTest {
    private static final int WAIT = 30;
    private static final int SIZE = 16 << 10;
    private static final byte[] SECRET = "app-secret".getBytes(StandardCharsets.US_ASCII);

    private TestTransport transport;
    private Node attackerNode;
    private MemoryRegion attackerLanding;
    private PolicyFixture fixture;
    /** How the outsider's channels closed, in order: a READ that found its channel closed says why. */
    private final java.util.List<String> closures = new java.util.concurrent.CopyOnWriteArrayList<>();

    /** The outsider's node and landing region on {@code on}, and a policy server with {@code secret} (null: none). */
    private PolicyFixture open(TestTransport on, byte[] secret) throws TransportException {
        transport = on;
        attackerNode = on.node(false);
        attackerLanding = attackerNode.register(ByteBuffer.allocateDirect(SIZE), EnumSet.of(Access.LOCAL_WRITE));
        fixture = fixture(secret);
        return fixture;
    }

    @AfterEach
    void closeAll() {
        if (fixture != null) {
            fixture.close();
        }
        if (attackerNode != null) {
            attackerNode.close();
        }
    }

    private boolean verbs() {
        return transport == TestTransport.VERBS;
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aChannelThatOnlyCompletedTheTransportHelloReadsNothingFromAServerWithASecret(TestTransport on) throws Exception {
        PolicyFixture f = open(on, SECRET);
        RemoteBlock block = f.exposeBlock(SIZE, 1);
        if (verbs()) {
            assertConnectRefused(f, ConnectRequest.OPEN); // no proof: rejected, no QP
            return;
        }
        Outsider outsider = connect(f, ConnectRequest.OPEN);
        assertRefused(outsider.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aDataChannelInItsHandshakeWindowReadsNothing(TestTransport on) throws Exception {
        PolicyFixture f = open(on, SECRET);
        RemoteBlock block = f.exposeBlock(SIZE, 2);
        // A proof made without the secret: tcp does not look at it, verbs rejects the connect.
        ConnectRequest forged = new ConnectRequest(ConnectProof.create("not-the-secret".getBytes(StandardCharsets.US_ASCII),
                TrafficClass.DATA), true);
        if (verbs()) {
            assertConnectRefused(f, forged);
            return;
        }
        Outsider outsider = connect(f, forged);
        // The outsider names a live session and its peer's id as seen on the wire (tcp carries them in the clear).
        UUID instance = UUID.randomUUID();
        Session seen = session(f, instance, SECRET);
        byte[] nonce = Auth.nonce();
        outsider.send(hello(TrafficClass.DATA, instance, nonce, seen.id(), true));
        assertEquals(Type.CHALLENGE, outsider.next().type(), "the server challenges the outsider");
        // The handshake is open (up to handshakeTimeout): the outsider cannot prove, but tries to READ now.
        assertRefused(outsider.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aDataChannelAdmittedWithAValidProofReadsNothingBeforeItsReady(TestTransport on) throws Exception {
        // Its connect names a live session with a valid proof, so it is admitted; its handshake is not done.
        // verbs admits the QP with no remote access and gives it REMOTE_READ only at READY; tcp asks per READ.
        PolicyFixture f = open(on, SECRET);
        RemoteBlock block = f.exposeBlock(SIZE, 8); // registered the plain way: its rkey READs on any QP with access
        UUID instance = UUID.randomUUID();
        byte[] session = session(f, instance, SECRET).id();
        Outsider early = connect(f, proven(SECRET, TrafficClass.DATA, session));
        assertReadFails(early.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
        // The same, named by its peer and challenged, still short of its PROOF.
        Outsider challenged = connect(f, proven(SECRET, TrafficClass.DATA, session));
        challenged.send(hello(TrafficClass.DATA, instance, Auth.nonce(), session, true));
        assertEquals(Type.CHALLENGE, challenged.next().type(), "the server challenges the data channel");
        assertReadFails(challenged.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aPeerWithoutTheSecretReadsNothingEvenRightAfterItsHello(TestTransport on) throws Exception {
        PolicyFixture f = open(on, SECRET);
        RemoteBlock block = f.exposeBlock(SIZE, 3);
        ConnectRequest unproven = new ConnectRequest(ConnectProof.create(null, TrafficClass.DATA), true);
        if (verbs()) {
            assertConnectRefused(f, unproven); // the layout of a proof, but no mac
            return;
        }
        Outsider outsider = connect(f, unproven);
        // Pipelined: the READ request is on the wire right behind the HELLO the server rejects.
        outsider.send(hello(TrafficClass.DATA, Auth.nonce(), false));
        assertReadFails(outsider.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aConnectProofIsTakenOnce(TestTransport on) throws Exception {
        PolicyFixture f = open(on, SECRET);
        UUID instance = UUID.randomUUID();
        RemoteBlock block = f.grant(instance, f.exposeBlock(SIZE, 7));
        Session session = session(f, instance, SECRET);
        ConnectRequest seen = proven(SECRET, TrafficClass.DATA, session.id());
        Outsider first = connect(f, seen);
        handshake(first, TrafficClass.DATA, instance, SECRET, session.id());
        first.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
        assertEquals(block.crc32c(), PolicyFixture.crc(attackerLanding.buffer()), "the peer with the secret READs the block");
        attackerLanding.buffer().put(new byte[SIZE]);
        if (verbs()) {
            assertConnectRefused(f, seen); // a replay of the connect request seen on the wire
            return;
        }
        Outsider replayed = connect(f, seen); // tcp carries no proof: the replay gets a channel, and no READ
        assertRefused(replayed.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void anAuthenticatedControlChannelReadsNothingWhileAnAuthenticatedDataChannelReads(TestTransport on) throws Exception {
        PolicyFixture f = open(on, SECRET);
        UUID instance = UUID.randomUUID();
        RemoteBlock block = f.grant(instance, f.exposeBlock(SIZE, 4)); // refused on control for being control, not for want of a grant
        Outsider control = connect(f, proven(SECRET, TrafficClass.CONTROL, Handshake.NO_SESSION));
        handshake(control, TrafficClass.CONTROL, instance, SECRET, Handshake.NO_SESSION);
        if (verbs()) {
            // The control QP has no responder resources: rxe's requester never sends the READ (the operation times
            // out), and a requester that sent it anyway would be NAKed.
            assertReadFails(control.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
        } else {
            assertRefused(control.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
        }

        // The refused READ broke that control channel, and its session with it: the data channel's is another.
        byte[] session = session(f, instance, SECRET).id();
        Outsider data = dataChannel(f, instance, SECRET, session);
        data.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
        assertEquals(block.crc32c(), PolicyFixture.crc(attackerLanding.buffer()), "the peer with the secret READs the block");
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void withoutASecretTheDataPlaneIsOpenButOnlyToPolicyPeers(TestTransport on) throws Exception {
        PolicyFixture f = open(on, null);
        RemoteBlock block = f.exposeBlock(SIZE, 5);
        if (verbs()) {
            assertConnectRefused(f, ConnectRequest.OPEN); // not even the layout of a connect proof
        } else {
            Outsider early = connect(f, ConnectRequest.OPEN);
            assertRefused(early.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0)); // before its handshake
        }

        UUID instance = UUID.randomUUID();
        RemoteBlock mine = f.grant(instance, block);
        Session session = session(f, instance, null);
        Outsider peer = dataChannel(f, instance, null, session.id());
        peer.channel.read(mine.address(), mine.rkey(), SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
        assertEquals(block.crc32c(), PolicyFixture.crc(attackerLanding.buffer()));
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aReadAfterThePeersSessionEndedReadsNothing(TestTransport on) throws Exception {
        PolicyFixture f = open(on, SECRET);
        UUID instance = UUID.randomUUID();
        ByteBuffer memory = ByteBuffer.allocateDirect(SIZE).put(0, (byte) 9);
        MemoryRegion region = f.server.peerScope(instance).add(f.serverNode.register(memory)); // lives as long as its session
        int key = f.grant(instance, region);
        Session session = session(f, instance, SECRET);
        Outsider data = dataChannel(f, instance, SECRET, session.id());
        data.channel.read(region.address(), key, SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
        assertEquals(9, attackerLanding.buffer().get(0), "the session READs its region");
        attackerLanding.buffer().put(new byte[SIZE]);

        data.channel.close(); // the peer's last channels: its session ends
        session.control().channel.close();
        Polling.waitUntil(() -> !region.isValid(), Duration.ofSeconds(WAIT), "the region revoked with the session");
        Session next = session(f, instance, SECRET);
        Outsider again = dataChannel(f, instance, SECRET, next.id()); // the same peer, a new session: the old key is gone
        assertRefused(again.channel.read(region.address(), key, SIZE, attackerLanding, 0));
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aDataChannelWithAValidProofInAnotherPeersOrAnEndedSessionIsRefused(TestTransport on) throws Exception {
        PolicyFixture f = open(on, SECRET);
        UUID victim = UUID.randomUUID();
        RemoteBlock block = f.grant(victim, f.exposeBlock(SIZE, 8));

        // The victim's id with another peer's live session, proven on that session's key (the secret is known).
        Session others = session(f, UUID.randomUUID(), SECRET);
        Outsider crossed = connect(f, proven(SECRET, TrafficClass.DATA, others.id())); // verbs: the session's host, admitted
        assertUnbound(crossed, victim, others.id(), block);

        // A session id the server never gave out.
        byte[] made = Auth.nonce();
        if (verbs()) {
            assertConnectRefused(f, proven(SECRET, TrafficClass.DATA, made)); // no QP
        } else {
            assertUnbound(connect(f, ConnectRequest.OPEN), victim, made, block);
        }

        // The victim's own session, ended.
        Session ended = session(f, victim, SECRET);
        ended.control().channel.close();
        Polling.waitUntil(() -> f.server.liveSessions() == 1, Duration.ofSeconds(WAIT), "the victim's session ended");
        if (verbs()) {
            assertConnectRefused(f, proven(SECRET, TrafficClass.DATA, ended.id()));
        } else {
            assertUnbound(connect(f, ConnectRequest.OPEN), victim, ended.id(), block);
        }
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aDataChannelIsClosedWithItsSessionAndReadsNothingAfter(TestTransport on) throws Exception {
        PolicyFixture f = open(on, SECRET);
        UUID instance = UUID.randomUUID();
        RemoteBlock block = f.grant(instance, f.exposeBlock(SIZE, 9));
        Session session = session(f, instance, SECRET);
        Outsider data = dataChannel(f, instance, SECRET, session.id());
        data.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
        assertEquals(block.crc32c(), PolicyFixture.crc(attackerLanding.buffer()), "the data channel READs in its session");
        attackerLanding.buffer().put(new byte[SIZE]);

        session.control().channel.close(); // the session ends; its data channel is left open by its peer
        Polling.waitUntil(() -> !data.channel.isOpen(), Duration.ofSeconds(WAIT), "the server closed the data channel");
        assertReadFails(data.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
        assertEquals(0, f.server.liveSessions());
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void withoutASecretTheOpenDataPlaneIsLoggedOncePerProcess(TestTransport on) throws Exception {
        java.io.PrintStream err = System.err;
        java.io.ByteArrayOutputStream captured = new java.io.ByteArrayOutputStream();
        PolicyServer.forgetOpenDataPlaneWarning(); // as in a fresh process
        System.setErr(new java.io.PrintStream(captured, true, StandardCharsets.UTF_8)); // slf4j-simple writes to System.err
        Node second = null;
        try {
            open(on, SECRET); // a server with a secret says nothing of it
            assertEquals(0, openDataPlaneLines(captured));
            fixture.close();
            fixture = fixture(null);
            second = on.node(true);
            try (PolicyServer another = new PolicyServer(second, on.policy(), new PolicyMetrics(), PolicyFixture.echo()).start()) {
                assertEquals(1, openDataPlaneLines(captured), "two servers without a secret, one line: " + captured);
            }
        } finally {
            System.setErr(err);
            if (second != null) {
                second.close();
            }
        }
    }

    private static long openDataPlaneLines(java.io.ByteArrayOutputStream captured) {
        return captured.toString(StandardCharsets.UTF_8).lines().filter(l -> l.contains("WARN")
                && l.contains("the RDMA data plane is open")).count();
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aReadWithAnotherPeersValidRkeyIsRefusedWithOrWithoutASecret(TestTransport on) throws Exception {
        // tcp checks each READ against the session's grants; verbs makes the key in the granted peer's key domain
        // (a protection domain its data QPs are in), and the region's own rkey READs nothing remotely.
        for (byte[] secret : new byte[][] {SECRET, null}) {
            closeAll();
            PolicyFixture f = open(on, secret);
            assumeKeysPerPeer(f);
            MemoryRegion region = seededForGrants(f, 6);
            int crc = PolicyFixture.crc(region.buffer());
            UUID owner = UUID.randomUUID();
            int key = f.server.grants(owner).grant(region, Long.MAX_VALUE);
            byte[] ownersSession = session(f, owner, secret).id();
            Outsider granted = dataChannel(f, owner, secret, ownersSession); // verbs: the window is bound before READY

            UUID stranger = UUID.randomUUID();
            byte[] strangersSession = session(f, stranger, secret).id();
            Outsider other = dataChannel(f, stranger, secret, strangersSession);
            assertRefused(other.channel.read(region.address(), key, SIZE, attackerLanding, 0));
            if (verbs()) {
                Outsider byRegionKey = dataChannel(f, owner, secret, ownersSession); // even as the owner, another QP
                assertRefused(byRegionKey.channel.read(region.address(), region.rkey(), SIZE, attackerLanding, 0));
            }

            granted.channel.read(region.address(), key, SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(crc, PolicyFixture.crc(attackerLanding.buffer()), "the peer it was granted to READs it");
            attackerLanding.buffer().put(new byte[SIZE]);
        }
        fixture = null;
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void whatARequestGrantedGoesWithItsSessionAndReadsNothingInThePeersNextSession(TestTransport on) throws Exception {
        // A request's grants belong to the session it came in, not to the peer process: when the session ends
        // they go, keys not yet bound to a data channel too. tcp checks region rkeys per READ (so a grant by rkey
        // is tested there); on verbs a region's own rkey READs nothing through a peer's data QP (it is in the
        // peer's key domain) and a grant by rkey is refused, so there only keys per grant are.
        transport = on;
        attackerNode = on.node(false);
        attackerLanding = attackerNode.register(ByteBuffer.allocateDirect(SIZE), EnumSet.of(Access.LOCAL_WRITE));
        AtomicReference<MemoryRegion> byRkey = new AtomicReference<>();
        AtomicReference<MemoryRegion> byKey = new AtomicReference<>();
        PolicyOptions options = on.policy().withSecret(SECRET);
        fixture = new PolicyFixture(on, options, options, (peer, request) -> {
            MemoryRegion region = request.get(0) == 1 ? byRkey.get() : byKey.get();
            return ByteBuffer.allocate(4).putInt(0, request.get(0) == 1 ? grantByRkey(peer, region)
                    : peer.grant(region, region.address(), region.length(), Long.MAX_VALUE));
        });
        PolicyFixture f = fixture;
        f.server.markReady();
        assumeKeysPerPeer(f);
        byRkey.set(f.serverNode.register(ByteBuffer.allocateDirect(SIZE).put(0, (byte) 3)));
        byKey.set(seededForGrants(f, 7));
        UUID instance = UUID.randomUUID();

        Session first = session(f, instance, SECRET);
        int rkey = verbs() ? 0 : request(first.control(), (byte) 1); // verbs refuses a grant by rkey (key domains)
        int key = request(first.control(), (byte) 2); // no data channel of the session yet: not bound to one
        Outsider data = dataChannel(f, instance, SECRET, first.id());
        if (!verbs()) {
            data.channel.read(byRkey.get().address(), rkey, SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(3, attackerLanding.buffer().get(0), "the session READs what its request was granted");
            attackerLanding.buffer().put(0, (byte) 0);
        }
        data.channel.close();
        Session unbound = session(f, instance, SECRET); // the same peer: a session whose key never met a data channel
        int neverBound = request(unbound.control(), (byte) 2);
        assertNotEquals(key, neverBound, "a key of each session's own");
        first.control().channel.close();
        unbound.control().channel.close();
        Polling.waitUntil(() -> f.server.liveSessions() == 0, Duration.ofSeconds(WAIT), "the peer's sessions ended");

        Session next = session(f, instance, SECRET);
        if (!verbs()) {
            assertRefused(dataChannel(f, instance, SECRET, next.id()).channel.read(byRkey.get().address(), rkey, SIZE,
                    attackerLanding, 0));
        }
        assertRefused(dataChannel(f, instance, SECRET, next.id()).channel.read(byKey.get().address(), key, SIZE,
                attackerLanding, 0));
        assertRefused(dataChannel(f, instance, SECRET, next.id()).channel.read(byKey.get().address(), neverBound, SIZE,
                attackerLanding, 0));
        int granted = request(next.control(), (byte) 2);
        Outsider now = dataChannel(f, instance, SECRET, next.id());
        now.channel.read(byKey.get().address(), granted, SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
        assertEquals(PolicyFixture.crc(byKey.get().buffer()), PolicyFixture.crc(attackerLanding.buffer()),
                "what the next session is granted READs");
    }

    /**
     * A read-only file mapping (what a mapped map output and an HDFS block file are) is READ by the peer it was
     * granted to, and by no other: not with that peer's key, not with the region's own rkey. Before key domains,
     * verbs could bind no memory window over such a mapping (MW_BIND pins for write), so its own rkey READ it
     * on any authenticated data QP of the node.
     */
    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aMappedFileIsReadByThePeerItWasGrantedToAndNoOther(TestTransport on, @TempDir Path dir) throws Exception {
        PolicyFixture f = open(on, SECRET);
        byte[] content = new byte[SIZE];
        new java.util.Random(12).nextBytes(content);
        Path file = Files.write(dir.resolve("block"), content);
        ByteBuffer mapping;
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            mapping = channel.map(FileChannel.MapMode.PRIVATE, 0, SIZE).asReadOnlyBuffer(); // registers on every kernel
        }
        MemoryRegion region = f.serverNode.register(mapping);
        UUID owner = UUID.randomUUID();
        int key = f.server.grants(owner).grant(region, Long.MAX_VALUE);
        Outsider granted = dataChannel(f, owner, SECRET, session(f, owner, SECRET).id());

        UUID stranger = UUID.randomUUID();
        byte[] strangersSession = session(f, stranger, SECRET).id();
        assertRefused(dataChannel(f, stranger, SECRET, strangersSession).channel.read(region.address(), key, SIZE,
                attackerLanding, 0));
        assertRefused(dataChannel(f, stranger, SECRET, strangersSession).channel.read(region.address(), region.rkey(), SIZE,
                attackerLanding, 0));

        granted.channel.read(region.address(), key, SIZE, attackerLanding, 0).get(WAIT, TimeUnit.SECONDS);
        assertArrayEquals(content, bytes(attackerLanding), "the peer it was granted to READs it");
        attackerLanding.buffer().put(new byte[SIZE]);
    }

    private static int grantByRkey(PolicyServer.PeerIdentity peer, MemoryRegion region) {
        peer.grant(region.rkey());
        return region.rkey();
    }

    private static final java.util.concurrent.atomic.AtomicLong REQUEST_IDS = new java.util.concurrent.atomic.AtomicLong();

    /** Sends a one-byte REQUEST (a new request id) on an authenticated control channel; its answer's int. */
    private static int request(Outsider control, byte what) throws Exception {
        control.send(new ControlFrame(Type.REQUEST, REQUEST_IDS.incrementAndGet(), ByteBuffer.wrap(new byte[] {what})).encode());
        ControlFrame answer = control.next();
        assertEquals(Type.RESPONSE, answer.type(), () -> "expected RESPONSE, was " + answer.type());
        return answer.payload().getInt(0);
    }

    /** On verbs, skips loudly unless the server's device binds type 2 memory windows (else keys are per region). */
    private void assumeKeysPerPeer(PolicyFixture f) {
        String binding = f.serverNode.keyBinding();
        if (verbs() && !binding.startsWith("per peer")) {
            System.err.println("SKIPPED (loudly): keys are " + binding + " on this device, not bound per peer");
            Assumptions.abort("keys are " + binding);
        }
    }

    /** SIZE seeded bytes on the server, registered for grants (verbs: READ through memory windows only). */
    private static MemoryRegion seededForGrants(PolicyFixture f, long seed) throws TransportException {
        byte[] bytes = new byte[SIZE];
        new java.util.Random(seed).nextBytes(bytes);
        return f.serverNode.registerForGrants(ByteBuffer.allocateDirect(SIZE).put(bytes).flip());
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aServerReadsNothingOfAClientThatConnectedToIt(TestTransport on) throws Exception {
        // The outsider plays a server (e.g. an address it slipped into a registry) and READs back
        // over the channel the victim's policy client opened to it.
        PolicyFixture f = open(on, null);
        MemoryRegion victimRegion = f.clientNode.register(ByteBuffer.allocateDirect(SIZE).put(0, (byte) 7));
        AtomicReference<Channel> opened = new AtomicReference<>();
        attackerNode.listen(channel -> {
            opened.set(channel);
            return new ChannelHandler() { };
        });
        f.client.peer(attackerNode.localAddress());
        Channel back = Polling.waitFor(opened::get, Duration.ofSeconds(WAIT), "the victim's channel to the outsider");
        Polling.waitUntil(back::isOpen, Duration.ofSeconds(WAIT), "the channel open");
        if (verbs()) {
            // The victim's connect offered no responder resources: the QP serves no READ.
            assertReadFails(back.read(victimRegion.address(), victimRegion.rkey(), SIZE, attackerLanding, 0));
        } else {
            assertRefused(back.read(victimRegion.address(), victimRegion.rkey(), SIZE, attackerLanding, 0));
        }
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aClientGoesByAnotherIdAtEachServerSoNoServerCanClaimItsGrantsElsewhere(TestTransport on) throws Exception {
        transport = on;
        attackerNode = on.node(false);
        AtomicReference<UUID> atServer = new AtomicReference<>();
        fixture = new PolicyFixture(on, on.policy(), on.policy(), (peer, request) -> {
            atServer.set(peer.instance());
            return request;
        });
        PolicyFixture f = fixture;
        f.server.markReady();
        f.peer().request(ByteBuffer.allocate(1)).get(WAIT, TimeUnit.SECONDS);
        AtomicReference<UUID> atOutsider = new AtomicReference<>();
        attackerNode.listen(channel -> new ChannelHandler() {
            @Override
            public void onMessage(Channel ch, ByteBuffer message) {
                try {
                    atOutsider.compareAndSet(null, Handshake.Hello.decode(ControlFrame.decode(message).payload()).instance());
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }
        });
        f.client.peer(attackerNode.localAddress());
        UUID shown = Polling.waitFor(atOutsider::get, Duration.ofSeconds(WAIT), "the client's HELLO at the outsider");
        assertNotEquals(atServer.get(), shown, "the outsider must not learn the id the server knows the client by");
    }

    @ParameterizedTest
    @EnumSource(TestTransport.class)
    void aDataChannelOfACredentialSessionProvesTheSessionsKeyBeforeItGetsAQueuePair(TestTransport on) throws Exception {
        // As the DataNode's service: no shared secret, sessions open with a credential (a block token) and its key.
        byte[] credential = "credential A".getBytes(StandardCharsets.US_ASCII);
        byte[] credentialKey = "the key of credential A".getBytes(StandardCharsets.US_ASCII);
        transport = on;
        attackerNode = on.node(false);
        attackerLanding = attackerNode.register(ByteBuffer.allocateDirect(SIZE), EnumSet.of(Access.LOCAL_WRITE));
        fixture = new PolicyFixture(on, on.policy(), on.policy(), named -> {
            if (!java.util.Arrays.equals(credential, named)) {
                throw new java.security.GeneralSecurityException("unknown credential");
            }
            return new SessionAuthenticator.SessionKey(credentialKey, null, Long.MAX_VALUE);
        }, PolicyFixture.echo());
        PolicyFixture f = fixture;
        f.server.markReady();
        RemoteBlock block = f.exposeBlock(SIZE, 9);
        // A live session whose id the outsider saw on the wire (its READY); the credential's key it does not have.
        UUID instance = UUID.randomUUID();
        Outsider control = connect(f, proven(null, TrafficClass.CONTROL, Handshake.NO_SESSION));
        byte[] nonce = Auth.nonce();
        control.send(new ControlFrame(Type.HELLO, 0,
                new Handshake.Hello(TrafficClass.CONTROL, instance, nonce, Handshake.NO_SESSION, true, credential).encode()).encode());
        byte[] serverNonce = Handshake.Challenge.decode(control.next().payload()).nonce();
        control.send(new ControlFrame(Type.PROOF, 0,
                new Handshake.Proof(Auth.clientProof(credentialKey, nonce, serverNonce)).encode()).encode());
        ControlFrame ready = control.next();
        assertEquals(Type.READY, ready.type(), () -> "expected READY, was " + ready.type());
        byte[] session = Handshake.Ready.decode(ready.payload()).session();
        RemoteBlock granted = f.grant(instance, block);
        ConnectRequest[] unproven = {
            new ConnectRequest(ConnectProof.create(null, TrafficClass.DATA, session), true), // no mac (before: admitted)
            new ConnectRequest(ConnectProof.create(credentialKey, TrafficClass.DATA, session), true), // not the session's key
            new ConnectRequest(ConnectProof.create(Auth.sessionKey(credentialKey, Auth.nonce()), TrafficClass.DATA, session),
                    true), // another session's key
        };
        for (ConnectRequest request : unproven) {
            if (verbs()) {
                assertConnectRefused(f, request); // no QP that could serve a READ
            } else { // tcp does not look at it: the data channel's handshake on the session's key refuses the outsider
                Outsider outsider = connect(f, request);
                ControlFrame answer = startHandshake(outsider, TrafficClass.DATA, instance,
                        "a guessed key".getBytes(StandardCharsets.US_ASCII), session);
                assertNotEquals(Type.READY, answer.type(), "a data channel in a session it cannot prove is not READY");
                assertReadFails(outsider.channel.read(granted.address(), granted.rkey(), SIZE, attackerLanding, 0));
            }
        }
        // The policy client with the credential: its data channel's connect proves the session's key, and it READs.
        try (PeerConnection peer = f.client.dedicated(f.serverNode.localAddress(), new ClientCredential(credential, credentialKey))) {
            MemoryRegion landing = f.landing(SIZE);
            peer.read(block, landing, 0).get(WAIT, TimeUnit.SECONDS);
            assertEquals(block.crc32c(), PolicyFixture.crc(landing.buffer()), "the credential's own client READs the block");
        }
    }

    // ---------------------------------------------------------------- the outsider's tools

    private PolicyFixture fixture(byte[] secret) throws TransportException {
        PolicyOptions options = transport.policy().withSecret(secret);
        PolicyFixture f = new PolicyFixture(transport, options, options, PolicyFixture.echo());
        f.server.markReady();
        return f;
    }

    /**
     * A connect request proven as a policy client that holds {@code secret} (or the key of its session's
     * credential) proves it: a control channel's on that key, a data channel's on its session's key.
     */
    private static ConnectRequest proven(byte[] secret, TrafficClass trafficClass, byte[] session) {
        boolean data = trafficClass == TrafficClass.DATA;
        byte[] key = data && secret != null ? Auth.sessionKey(secret, session) : secret;
        return new ConnectRequest(ConnectProof.create(key, trafficClass, session), data);
    }

    /** An authenticated data channel of {@code instance} in {@code session}: connected with its proof, handshake done. */
    private Outsider dataChannel(PolicyFixture f, UUID instance, byte[] secret, byte[] session) throws Exception {
        Outsider data = connect(f, proven(secret, TrafficClass.DATA, session));
        handshake(data, TrafficClass.DATA, instance, secret, session);
        return data;
    }

    /** A control session of {@code instance}: its authenticated control channel and the id its READY carried. */
    private record Session(Outsider control, byte[] id) {
    }

    private Session session(PolicyFixture f, UUID instance, byte[] secret) throws Exception {
        Outsider control = connect(f, proven(secret, TrafficClass.CONTROL, Handshake.NO_SESSION));
        return new Session(control, handshake(control, TrafficClass.CONTROL, instance, secret, Handshake.NO_SESSION));
    }

    /** A channel from the outsider's node to the server with transport HELLO done, and what arrives on it. */
    private record Outsider(Channel channel, BlockingQueue<ControlFrame> frames) {
        void send(ByteBuffer message) throws Exception {
            channel.send(message).get(WAIT, TimeUnit.SECONDS);
        }

        ControlFrame next() throws InterruptedException {
            ControlFrame frame = frames.poll(WAIT, TimeUnit.SECONDS);
            assertNotNull(frame, "no control frame from the server within " + WAIT + " s");
            return frame;
        }
    }

    private Outsider connect(PolicyFixture f, ConnectRequest request) throws Exception {
        BlockingQueue<ControlFrame> frames = new LinkedBlockingQueue<>();
        Channel channel = attackerNode.connect(f.serverNode.localAddress(), 16, Lane.BULK, new ChannelHandler() {
            @Override
            public void onMessage(Channel ch, ByteBuffer message) {
                try {
                    frames.add(ControlFrame.decode(message));
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }

            @Override
            public void onClosed(Channel ch, TransportException cause) {
                closures.add(ch + ": " + (cause == null ? "closed by the outsider" : cause.toString()));
            }
        }, request).get(WAIT, TimeUnit.SECONDS);
        return new Outsider(channel, frames);
    }

    /** The connect is rejected before any channel exists (verbs: RDMA-CM REJECTED, no QP at the server). */
    private void assertConnectRefused(PolicyFixture f, ConnectRequest request) {
        long refusedBefore = f.serverMetrics.registry().counter("rdma.server.refused").getCount();
        ExecutionException e = assertThrows(ExecutionException.class, () -> attackerNode.connect(f.serverNode.localAddress(), 16,
                Lane.BULK, new ChannelHandler() { }, request).get(WAIT, TimeUnit.SECONDS), "the connect must be rejected");
        assertEquals(Status.CONNECTION_REFUSED, assertInstanceOf(TransportException.class, e.getCause()).status(), e::toString);
        if (verbs()) { // the peer's reject reason, not only the event's name
            assertTrue(e.getCause().getMessage().contains("the peer's acceptor turned the request away"), e::toString);
        }
        assertEquals(refusedBefore + 1, f.serverMetrics.registry().counter("rdma.server.refused").getCount(),
                "the server refused it (not a network failure)");
        assertEquals(0, f.server.unauthenticatedChannels(), "no channel was created for it");
    }

    private static ByteBuffer hello(TrafficClass trafficClass, byte[] nonce, boolean wantsAuth) {
        return hello(trafficClass, UUID.randomUUID(), nonce, wantsAuth);
    }

    private static ByteBuffer hello(TrafficClass trafficClass, UUID instance, byte[] nonce, boolean wantsAuth) {
        return hello(trafficClass, instance, nonce, Handshake.NO_SESSION, wantsAuth);
    }

    private static ByteBuffer hello(TrafficClass trafficClass, UUID instance, byte[] nonce, byte[] session, boolean wantsAuth) {
        return new ControlFrame(Type.HELLO, 0, new Handshake.Hello(trafficClass, instance, nonce, session, wantsAuth).encode())
                .encode();
    }

    /**
     * The whole handshake by hand (with the secret, if not null) up to READY; a data channel's in {@code session},
     * on the session's key. Returns the session a control channel's READY started (a data channel's: null).
     */
    private static byte[] handshake(Outsider outsider, TrafficClass trafficClass, UUID instance, byte[] secret, byte[] session)
            throws Exception {
        ControlFrame answer = startHandshake(outsider, trafficClass, instance, secret, session);
        assertEquals(Type.READY, answer.type(), () -> "expected READY, was " + answer.type());
        return trafficClass == TrafficClass.CONTROL ? Handshake.Ready.decode(answer.payload()).session() : null;
    }

    /** The handshake by hand up to the server's last answer (READY, or a refusal). */
    private static ControlFrame startHandshake(Outsider outsider, TrafficClass trafficClass, UUID instance, byte[] secret,
                                               byte[] session) throws Exception {
        byte[] nonce = Auth.nonce();
        outsider.send(hello(trafficClass, instance, nonce, session, secret != null));
        ControlFrame challenge = outsider.next();
        if (secret == null || challenge.type() != Type.CHALLENGE) {
            return challenge;
        }
        byte[] key = trafficClass == TrafficClass.DATA ? Auth.sessionKey(secret, session) : secret;
        byte[] serverNonce = Handshake.Challenge.decode(challenge.payload()).nonce();
        outsider.send(new ControlFrame(Type.PROOF, 0, new Handshake.Proof(Auth.clientProof(key, nonce, serverNonce)).encode())
                .encode());
        return outsider.next();
    }

    /** The data channel's handshake in {@code session} as {@code instance} is refused as unbound, and it READs nothing. */
    private void assertUnbound(Outsider outsider, UUID instance, byte[] session, RemoteBlock block) throws Exception {
        ControlFrame answer = startHandshake(outsider, TrafficClass.DATA, instance, SECRET, session);
        assertEquals(Type.UNBOUND, answer.type(), () -> "expected UNBOUND, was " + answer.type());
        assertReadFails(outsider.channel.read(block.address(), block.rkey(), SIZE, attackerLanding, 0));
    }

    /** The READ fails, whatever the status, and no byte arrives. */
    private void assertReadFails(CompletableFuture<Void> read) {
        assertThrows(ExecutionException.class, () -> read.get(WAIT, TimeUnit.SECONDS));
        assertAllZero(attackerLanding);
    }

    private void assertRefused(CompletableFuture<Void> read) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> read.get(WAIT, TimeUnit.SECONDS));
        assertEquals(Status.REMOTE_ACCESS_ERROR, assertInstanceOf(TransportException.class, e.getCause()).status(),
                () -> "expected the READ refused, was " + e.getCause() + "; the outsider's channels closed: " + closures);
        assertAllZero(attackerLanding);
    }

    private static void assertAllZero(MemoryRegion region) {
        assertArrayEquals(new byte[region.length()], bytes(region), "no byte of the region reached the outsider");
    }

    private static byte[] bytes(MemoryRegion region) {
        byte[] out = new byte[region.length()];
        region.buffer().duplicate().get(out);
        return out;
    }
}

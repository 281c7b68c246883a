package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.MessageReader;
import io.rdmaplane.rdma.codec.MessageWriter;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What a policy client's connect request carries where the transport reads it before any channel
 * exists (verbs: RDMA-CM private data; the server rejects a request without a valid one, so no
 * QP is created for it). One message, no round trip: it proves a key over a fresh nonce and the
 * sender's clock, says the traffic class, so that a control channel's QP serves no READ, and a data
 * channel's names the control session it belongs to, so that no QP that serves READs exists for a
 * data channel of no live session.
 * <pre>
 * version:u8 class:u8 timeMillis:i64 nonce:8B session:16B mac:16B    (50 bytes; RoCE pads to 56 with zeros)
 * mac = HMAC-SHA256(key, "connect" | version | class | timeMillis | nonce | session), first 16 bytes
 * </pre>
 * A control channel's session is {@link Handshake#NO_SESSION} and its key the shared secret (a
 * credential such as a block token does not fit the private data: its control connect proves nothing
 * and its handshake authenticates it). A data channel's session is the id its control channel's READY
 * carried and its key that session's ({@link Auth#sessionKey} of the key the control channel proved),
 * so a data connect is proven wherever its session was, secret or credential. Without a key the mac is
 * zeros and nothing is checked but the layout and the session (the data plane is open, which the
 * server logs once). With one, the server takes a proof only within {@link #CLOCK_SKEW} of its own
 * clock (Kerberos's default skew) and only once: the nonces of that window are remembered
 * ({@link Verifier}), so a connect request seen on the wire cannot be replayed. Whether the session
 * is live, and the peer's, the server checks itself, before it looks for the session's key.
 *
 * <p>tcp channels do not carry it: each authenticates in the policy handshake (challenge-response,
 * a data channel's on its session's key) before its first READ is served, and every READ is checked
 * against the peer's grants.
 */
final class ConnectProof {
    /**
     * 3: a data channel's mac on its session's key (2 had it on the secret, 1 a 16-byte nonce and no
     * session); a peer of another version is refused with both versions named.
     */
    static final int VERSION = 3;
    /** Unique enough within the skew window; the session's 16 bytes left no room for a longer one. */
    static final int NONCE_BYTES = 8;
    static final int BYTES = 2 + Long.BYTES + NONCE_BYTES + Auth.SESSION_BYTES + Auth.CONNECT_MAC_BYTES;
    /** How far the client's clock may be from the server's. */
    static final long CLOCK_SKEW = java.util.concurrent.TimeUnit.MINUTES.toMillis(5);

    private ConnectProof() {
    }

    /** The proof for a connect of a control channel now, on the shared secret (none without one). */
    static byte[] create(byte[] secret, TrafficClass trafficClass) {
        return create(secret, trafficClass, Handshake.NO_SESSION);
    }

    /**
     * The proof for a connect of {@code trafficClass} in {@code session} now, on {@code key} (a control
     * channel's: the secret; a data channel's: its session's key; null: none, no mac).
     */
    static byte[] create(byte[] key, TrafficClass trafficClass, byte[] session) {
        return create(key, trafficClass, System.currentTimeMillis(), nonce(), session);
    }

    static byte[] create(byte[] key, TrafficClass trafficClass, long timeMillis, byte[] nonce) {
        return create(key, trafficClass, timeMillis, nonce, Handshake.NO_SESSION);
    }

    static byte[] create(byte[] key, TrafficClass trafficClass, long timeMillis, byte[] nonce, byte[] session) {
        ByteBuffer fields = fields(VERSION, trafficClass, timeMillis, nonce, session);
        byte[] mac = key == null ? new byte[Auth.CONNECT_MAC_BYTES] : Auth.connectProof(key, bytes(fields));
        ByteBuffer proof = MessageWriter.body().rest(fields).fixed(mac).finish();
        return bytes(proof);
    }

    static byte[] nonce() {
        return Arrays.copyOf(Auth.nonce(), NONCE_BYTES);
    }

    private static ByteBuffer fields(int version, TrafficClass trafficClass, long timeMillis, byte[] nonce, byte[] session) {
        return MessageWriter.body().u8(version).id(Handshake.TRAFFIC_CLASSES, trafficClass).i64(timeMillis).fixed(nonce)
                .fixed(session).finish();
    }

    /** What a connect proof asks for: a channel of {@code trafficClass}, in {@code session} (a data channel). */
    record Claim(TrafficClass trafficClass, byte[] session) {
    }

    /** A connect proof as read, not yet verified: what it claims, and what its mac covers. */
    static final class Parsed {
        final Claim claim;
        private final int version;
        private final long timeMillis;
        private final byte[] nonce;
        private final byte[] mac;

        private Parsed(Claim claim, int version, long timeMillis, byte[] nonce, byte[] mac) {
            this.claim = claim;
            this.version = version;
            this.timeMillis = timeMillis;
            this.nonce = nonce;
            this.mac = mac;
        }
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.duplicate().get(out);
        return out;
    }

    /** A connect proof's layout and version, or a {@link Refusal} saying why it is refused. */
    static Parsed parse(ByteBuffer data) throws Refusal {
        ByteBuffer proof = data.duplicate();
        try {
            if (allZero(proof)) { // RoCE pads a connect request's private data with zeros
                throw new Refusal("the connect request carries no proof (not a policy client of this version)");
            }
            MessageReader<Void> r = MessageReader.body("connect proof", proof);
            int version = r.u8("version");
            if (version != VERSION) {
                throw new Refusal("a connect proof of version " + version + ", this build speaks " + VERSION);
            }
            TrafficClass trafficClass = r.id("class", Handshake.TRAFFIC_CLASSES);
            long time = r.i64("timeMillis");
            byte[] nonce = r.fixed("nonce", NONCE_BYTES);
            byte[] session = r.fixed("session", Auth.SESSION_BYTES);
            byte[] mac = r.fixed("mac", Auth.CONNECT_MAC_BYTES);
            return new Parsed(new Claim(trafficClass, session), version, time, nonce, mac);
        } catch (MalformedMessageException e) {
            throw new Refusal("a malformed connect proof: " + e.getMessage());
        }
    }

    /** A server's check of connect proofs: the nonces already taken within the skew window. */
    static final class Verifier {
        private final int remembered;
        /** nonce (as a string key) to when it was taken (this host's clock), oldest first; guarded by this. */
        private final LinkedHashMap<String, Long> seen = new LinkedHashMap<>();

        /** @param remembered nonces kept at most; a valid proof beyond them is refused, never one forgotten and replayed */
        Verifier(int remembered) {
            this.remembered = remembered;
        }

        /**
         * Takes {@code proof} if its mac is {@code key}'s, its clock near ours and its nonce new; with no
         * key (an open data plane) it is taken as it is.
         */
        void verify(Parsed proof, byte[] key, long nowMillis) throws Refusal {
            if (key == null) {
                return;
            }
            Claim claim = proof.claim;
            byte[] expected = Auth.connectProof(key,
                    bytes(fields(proof.version, claim.trafficClass(), proof.timeMillis, proof.nonce, claim.session())));
            if (!Auth.matches(expected, proof.mac)) {
                throw new Refusal("authentication failed: the connect proof does not match the "
                        + (claim.trafficClass() == TrafficClass.DATA ? "key of the session it names" : "secret"));
            }
            if (Math.abs(nowMillis - proof.timeMillis) > CLOCK_SKEW) {
                throw new Refusal("the connect proof is " + (nowMillis - proof.timeMillis) / 1000 + " s off this host's clock"
                        + " (at most " + CLOCK_SKEW / 1000 + " s either way: are both clocks right?)");
            }
            String nonceKey = Arrays.toString(proof.nonce);
            synchronized (this) {
                for (Iterator<Map.Entry<String, Long>> it = seen.entrySet().iterator(); it.hasNext(); ) {
                    if (nowMillis - it.next().getValue() <= 2 * CLOCK_SKEW) {
                        break; // oldest first, near enough: the rest are younger
                    }
                    it.remove();
                }
                if (seen.containsKey(nonceKey)) {
                    throw new Refusal("authentication failed: a replayed connect proof");
                }
                if (seen.size() >= remembered) {
                    throw new Refusal("too many connects within " + 2 * CLOCK_SKEW / 1000 + " s (" + remembered
                            + " remembered against replay)");
                }
                seen.put(nonceKey, nowMillis); // its proof is valid until time + skew <= now + 2 skew
            }
        }
    }

    private static boolean allZero(ByteBuffer data) {
        for (int i = data.position(); i < data.limit(); i++) {
            if (data.get(i) != 0) {
                return false;
            }
        }
        return true;
    }

    /** Why a connect request is refused. */
    static final class Refusal extends Exception {
        Refusal(String reason) {
            super(reason, null, false, false);
        }
    }
}

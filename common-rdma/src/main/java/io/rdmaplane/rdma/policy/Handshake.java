package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.MessageReader;
import io.rdmaplane.rdma.codec.MessageWriter;
import io.rdmaplane.rdma.codec.WireIds;
import java.nio.ByteBuffer;
import java.util.UUID;

/**
 * The payloads of the handshake frames, each encoded and checked here only (the client builds
 * them, the server reads them, or the other way round). The frame's header carries the version.
 */
final class Handshake {
    static final WireIds<TrafficClass> TRAFFIC_CLASSES = WireIds.of(TrafficClass.class, "traffic class", c -> switch (c) {
        case CONTROL -> 1;
        case DATA -> 2;
    });

    private Handshake() {
    }

    /** A control channel's HELLO names no session: it starts one. */
    static final byte[] NO_SESSION = new byte[Auth.SESSION_BYTES];

    /**
     * HELLO: {@code class:u8 instance:16B nonce:16B session:16B wantsAuth:bool credential:bytes}; the
     * instance names the client process; a data channel names the control session it belongs to (the id
     * its control channel's READY carried), a control channel {@link #NO_SESSION}. A control channel's
     * credential says which key it proves ({@link SessionAuthenticator}; empty for a shared secret); a
     * data channel's is empty.
     */
    record Hello(TrafficClass trafficClass, UUID instance, byte[] nonce, byte[] session, boolean wantsAuth,
                 byte[] credential) {
        /** A HELLO with no credential. */
        Hello(TrafficClass trafficClass, UUID instance, byte[] nonce, byte[] session, boolean wantsAuth) {
            this(trafficClass, instance, nonce, session, wantsAuth, new byte[0]);
        }

        /** A control channel's HELLO with no credential. */
        Hello(TrafficClass trafficClass, UUID instance, byte[] nonce, boolean wantsAuth) {
            this(trafficClass, instance, nonce, NO_SESSION, wantsAuth);
        }

        ByteBuffer encode() {
            return MessageWriter.body().id(TRAFFIC_CLASSES, trafficClass).i64(instance.getMostSignificantBits())
                    .i64(instance.getLeastSignificantBits()).fixed(nonce).fixed(session).bool(wantsAuth)
                    .bytes("credential", credential, SessionAuthenticator.MAX_CREDENTIAL_BYTES).finish();
        }

        static Hello decode(ByteBuffer payload) throws MalformedMessageException {
            MessageReader<Void> r = MessageReader.body("control HELLO", payload);
            Hello hello = new Hello(r.id("class", TRAFFIC_CLASSES), new UUID(r.i64("instance"), r.i64("instance")),
                    r.fixed("nonce", Auth.NONCE_BYTES), r.fixed("session", Auth.SESSION_BYTES), r.bool("wantsAuth"),
                    r.bytes("credential", SessionAuthenticator.MAX_CREDENTIAL_BYTES));
            r.end();
            return hello;
        }
    }

    /**
     * READY on a control channel: {@code session:16B}, the id of the session it started, which the
     * peer's data channels name (HELLO, and on verbs the {@link ConnectProof}). READY on a data channel is empty.
     */
    record Ready(byte[] session) {
        ByteBuffer encode() {
            return MessageWriter.body().fixed(session).finish();
        }

        static Ready decode(ByteBuffer payload) throws MalformedMessageException {
            MessageReader<Void> r = MessageReader.body("control READY", payload);
            Ready ready = new Ready(r.fixed("session", Auth.SESSION_BYTES));
            r.end();
            return ready;
        }
    }

    /** CHALLENGE: {@code nonce:16B mac:32B}, the server's nonce and its proof over both nonces. */
    record Challenge(byte[] nonce, byte[] mac) {
        ByteBuffer encode() {
            return MessageWriter.body().fixed(nonce).fixed(mac).finish();
        }

        static Challenge decode(ByteBuffer payload) throws MalformedMessageException {
            MessageReader<Void> r = MessageReader.body("control CHALLENGE", payload);
            Challenge challenge = new Challenge(r.fixed("nonce", Auth.NONCE_BYTES), r.fixed("mac", Auth.MAC_BYTES));
            r.end();
            return challenge;
        }
    }

    /** PROOF: {@code mac:32B}, the client's proof. */
    record Proof(byte[] mac) {
        ByteBuffer encode() {
            return MessageWriter.body().fixed(mac).finish();
        }

        static Proof decode(ByteBuffer payload) throws MalformedMessageException {
            MessageReader<Void> r = MessageReader.body("control PROOF", payload);
            Proof proof = new Proof(r.fixed("mac", Auth.MAC_BYTES));
            r.end();
            return proof;
        }
    }
}

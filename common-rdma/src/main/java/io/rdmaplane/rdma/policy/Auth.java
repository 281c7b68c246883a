package io.rdmaplane.rdma.policy;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Mutual challenge-response on a shared secret: each side sends a fresh nonce and proves it
 * knows the secret with an HMAC-SHA256 over both nonces, tagged by role so one side's proof
 * can never be replayed as the other's.
 */
final class Auth {
    static final int NONCE_BYTES = 16;
    static final int MAC_BYTES = 32;
    /** A control session's id (see {@link #sessionKey}). */
    static final int SESSION_BYTES = 16;
    private static final SecureRandom RANDOM = new SecureRandom();

    private Auth() {
    }

    static byte[] nonce() {
        byte[] nonce = new byte[NONCE_BYTES];
        RANDOM.nextBytes(nonce);
        return nonce;
    }

    /** The server's proof: HMAC(secret, "server" | clientNonce | serverNonce). */
    static byte[] serverProof(byte[] secret, byte[] clientNonce, byte[] serverNonce) {
        return mac(secret, "server", clientNonce, serverNonce);
    }

    /** The client's proof: HMAC(secret, "client" | serverNonce | clientNonce). */
    static byte[] clientProof(byte[] secret, byte[] clientNonce, byte[] serverNonce) {
        return mac(secret, "client", serverNonce, clientNonce);
    }

    /**
     * The proof a connect request carries (see {@link ConnectProof}): HMAC(key, "connect" | fields),
     * the key being the secret (a control channel's) or a session's key (a data channel's), the fields
     * the request's version, traffic class, time, nonce and session, truncated to
     * {@link #CONNECT_MAC_BYTES} (RDMA-CM's private data has room for 56 bytes).
     */
    static byte[] connectProof(byte[] key, byte[] fields) {
        return java.util.Arrays.copyOf(mac(key, "connect", fields, new byte[0]), CONNECT_MAC_BYTES);
    }

    static final int CONNECT_MAC_BYTES = 16;

    /**
     * The key a data channel proves itself with: HMAC(secret, "session" | sessionId). A data channel's
     * challenge-response runs on it instead of on the secret, so its proof holds for that one control
     * session only, and the server takes it only while the session lives.
     */
    static byte[] sessionKey(byte[] secret, byte[] sessionId) {
        return mac(secret, "session", sessionId, new byte[0]);
    }

    /** Constant-time comparison, so timing does not leak how much of a proof was right. */
    static boolean matches(byte[] expected, byte[] actual) {
        return MessageDigest.isEqual(expected, actual);
    }

    private static byte[] mac(byte[] secret, String role, byte[] first, byte[] second) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            mac.update(role.getBytes(StandardCharsets.US_ASCII));
            mac.update(first);
            mac.update(second);
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is unavailable in this JVM", e);
        }
    }
}

package io.rdmaplane.rdma.policy;

import java.security.GeneralSecurityException;
import java.util.Objects;

/**
 * Who may open a control session on a {@link PolicyServer}, and the key its challenge-response runs
 * on. The client's HELLO names a credential (its {@link ClientCredential}); the server asks this
 * which key belongs to it, then both sides prove that key as they prove a shared secret
 * ({@link Auth}). The session is bound to what the credential grants ({@link SessionKey#binding},
 * handed to the request handler with each request) and ends when it expires. Data channels prove the
 * session's key derived from it ({@link Auth#sessionKey}), as always.
 *
 * <p>A shared secret is the authenticator {@link #secret}: an empty credential, the secret as key.
 * HDFS's DataNode plug-in takes a block access token's identifier as credential and the token's
 * password (which the DataNode's secret manager derives from the identifier) as key.
 */
@FunctionalInterface
public interface SessionAuthenticator {
    /** The longest credential a HELLO carries. */
    int MAX_CREDENTIAL_BYTES = 4096;

    /**
     * What an accepted credential opens.
     *
     * @param key              the key both sides prove
     * @param binding          what the session may do (e.g. the token's block), or null
     * @param expiresAtMillis  when the session ends (epoch millis; {@link Long#MAX_VALUE}: never)
     */
    record SessionKey(byte[] key, Object binding, long expiresAtMillis) {
        public SessionKey {
            Objects.requireNonNull(key, "key");
        }
    }

    /**
     * The key of the peer presenting {@code credential}.
     *
     * @throws GeneralSecurityException when the credential is refused (its message goes to the client)
     */
    SessionKey authenticate(byte[] credential) throws GeneralSecurityException;

    /** Authentication on a shared secret: the credential is empty, the key the secret. */
    static SessionAuthenticator secret(byte[] secret) {
        byte[] key = secret.clone();
        return credential -> {
            if (credential.length != 0) {
                throw new GeneralSecurityException("this server authenticates on a shared secret, not a credential");
            }
            return new SessionKey(key, null, Long.MAX_VALUE);
        };
    }
}

package io.rdmaplane.rdma.policy;

/**
 * What a client's control channel authenticates with: the credential its HELLO names (empty for a
 * shared secret) and the key it proves (see {@link SessionAuthenticator}).
 */
public record ClientCredential(byte[] credential, byte[] key) {
    public ClientCredential {
        if (credential.length > SessionAuthenticator.MAX_CREDENTIAL_BYTES) {
            throw new IllegalArgumentException("a credential of " + credential.length + " bytes; at most "
                    + SessionAuthenticator.MAX_CREDENTIAL_BYTES);
        }
        credential = credential.clone();
        key = key.clone();
    }

    /** The credential of a shared secret, or null without one. */
    static ClientCredential of(byte[] secret) {
        return secret == null ? null : new ClientCredential(new byte[0], secret);
    }
}

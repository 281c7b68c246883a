package io.rdmaplane.hdfs.datanode;

import io.rdmaplane.hdfs.BlockTokens;
import io.rdmaplane.rdma.policy.SessionAuthenticator;
import java.io.IOException;
import java.security.GeneralSecurityException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.hdfs.security.token.block.BlockPoolTokenSecretManager;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;

/**
 * The DataNode's session proof with block access tokens on: a client's control session names a block
 * token's identifier and proves the token's password, which only a holder of the token (or of the
 * block keys) knows; the DataNode derives it from the identifier with its secret manager
 * ({@code retrievePassword}, which refuses an expired token and an unknown key). The session is bound
 * to that token's block pool, user and expiry: {@link BlockService} grants a descriptor of a block only
 * for a request that carries a valid READ token of that block for the same pool and user, until the
 * earlier of both expiries, and the session ends when its token expires. One session serves all the
 * blocks a client reads from this DataNode, each with its own token, as HDFS's TCP path checks them.
 */
final class BlockTokenAuthenticator implements SessionAuthenticator {
    private final BlockPoolTokenSecretManager tokens;
    private final AtomicLong refused;

    /** @param refused counts the credentials refused (the service's token refusals) */
    BlockTokenAuthenticator(BlockPoolTokenSecretManager tokens, AtomicLong refused) {
        this.tokens = tokens;
        this.refused = refused;
    }

    @Override
    public SessionKey authenticate(byte[] credential) throws GeneralSecurityException {
        try {
            BlockTokenIdentifier id;
            try {
                id = BlockTokens.identifier(credential); // lengths bounded before allocation
            } catch (IOException e) {
                throw new GeneralSecurityException("not a block access token identifier: " + e.getMessage());
            }
            if (!id.getAccessModes().contains(BlockTokenIdentifier.AccessMode.READ)) {
                throw new GeneralSecurityException("the block access token does not grant READ");
            }
            if (id.getExpiryDate() <= System.currentTimeMillis()) {
                throw new GeneralSecurityException("the block access token has expired");
            }
            byte[] password;
            try {
                password = tokens.retrievePassword(id);
            } catch (IOException | RuntimeException e) { // InvalidToken; IllegalArgumentException for an unknown pool
                throw new GeneralSecurityException("the block access token is not valid here: " + e.getMessage());
            }
            return new SessionKey(password, id, id.getExpiryDate());
        } catch (GeneralSecurityException e) {
            refused.incrementAndGet();
            throw e;
        }
    }
}

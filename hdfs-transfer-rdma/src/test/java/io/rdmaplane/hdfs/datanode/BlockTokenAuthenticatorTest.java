package io.rdmaplane.hdfs.datanode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.rdmaplane.rdma.policy.SessionAuthenticator.SessionKey;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.security.GeneralSecurityException;
import java.util.EnumSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockPoolTokenSecretManager;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier.AccessMode;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenSecretManager;
import org.apache.hadoop.io.WritableUtils;
import org.apache.hadoop.security.token.Token;
import org.junit.jupiter.api.Test;

/** The DataNode's session proof from block tokens: the key is the token's password, and only a valid READ token's. */
class BlockTokenAuthenticatorTest {
    private static final String POOL = "BP-test";

    private static BlockTokenSecretManager issuer(long lifetimeMillis) {
        return new BlockTokenSecretManager(TimeUnit.MINUTES.toMillis(10), lifetimeMillis, 0, 1, POOL, null, false);
    }

    private static BlockPoolTokenSecretManager dataNode(BlockTokenSecretManager issuer) {
        BlockPoolTokenSecretManager checks = new BlockPoolTokenSecretManager();
        checks.addBlockPool(POOL, issuer);
        return checks;
    }

    private static Token<BlockTokenIdentifier> token(BlockTokenSecretManager issuer, long blockId, AccessMode mode) throws Exception {
        return issuer.generateToken("reader", new ExtendedBlock(POOL, blockId, 1000, 1), EnumSet.of(mode),
                new StorageType[] {StorageType.DEFAULT}, new String[] {"DS-fake"});
    }

    @Test
    void aValidReadTokensIdentifierOpensASessionKeyedOnItsPasswordAndBoundToItsBlockUntilItsExpiry() throws Exception {
        BlockTokenSecretManager issuer = issuer(TimeUnit.MINUTES.toMillis(10));
        AtomicLong refused = new AtomicLong();
        Token<BlockTokenIdentifier> token = token(issuer, 7, AccessMode.READ);
        SessionKey key = new BlockTokenAuthenticator(dataNode(issuer), refused).authenticate(token.getIdentifier());
        assertArrayEquals(token.getPassword(), key.key(), "the key is the token's password, which only its holder knows");
        BlockTokenIdentifier bound = assertInstanceOf(BlockTokenIdentifier.class, key.binding());
        assertEquals(7, bound.getBlockId());
        assertEquals(POOL, bound.getBlockPoolId());
        assertEquals(bound.getExpiryDate(), key.expiresAtMillis());
        assertEquals(0, refused.get());
    }

    @Test
    void noForgedExpiredWriteOnlyOrHostileTokenOpensASession() throws Exception {
        BlockTokenSecretManager issuer = issuer(TimeUnit.MINUTES.toMillis(10));
        BlockTokenSecretManager expiring = issuer(1);
        Token<BlockTokenIdentifier> expired = token(expiring, 7, AccessMode.READ);
        waitPast(expired);
        // a forger's own block keys: an identifier under a key id the DataNode does not have
        BlockTokenSecretManager forger = issuer(TimeUnit.MINUTES.toMillis(10));
        ByteArrayOutputStream hugeUser = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(hugeUser);
        WritableUtils.writeVLong(out, System.currentTimeMillis() + 60_000);
        WritableUtils.writeVInt(out, 1);
        out.writeInt(Integer.MAX_VALUE); // a 2 GiB user id
        byte[][] credentials = {
            token(issuer, 7, AccessMode.WRITE).getIdentifier(), // not for reading
            forger.generateToken("reader", new ExtendedBlock(POOL, 7, 1000, 1), EnumSet.of(AccessMode.READ),
                    new StorageType[] {StorageType.DEFAULT}, new String[] {"DS-fake"}).getIdentifier(), // forged
            expired.getIdentifier(), // expired
            {(byte) 0x8c, 0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff}, // five bytes announcing 2 GiB
            hugeUser.toByteArray(),
            new byte[0], // none
        };
        BlockPoolTokenSecretManager checks = dataNode(issuer);
        AtomicLong refused = new AtomicLong();
        BlockTokenAuthenticator authenticator = new BlockTokenAuthenticator(checks, refused);
        for (byte[] credential : credentials) {
            assertThrows(GeneralSecurityException.class, () -> authenticator.authenticate(credential));
        }
        assertEquals(credentials.length, refused.get());
    }

    private static void waitPast(Token<BlockTokenIdentifier> token) throws Exception {
        long until = io.rdmaplane.hdfs.BlockTokens.identifier(token.getIdentifier()).getExpiryDate();
        io.rdmaplane.rdma.testing.Polling.waitUntil(() -> System.currentTimeMillis() > until, java.time.Duration.ofSeconds(10),
                "the token to expire");
    }
}

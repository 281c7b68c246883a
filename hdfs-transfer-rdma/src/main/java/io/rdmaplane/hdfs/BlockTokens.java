package io.rdmaplane.hdfs;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.io.WritableUtils;
import org.apache.hadoop.security.token.Token;

/**
 * Reads a block access token from the bytes a client sent, checking every length it announces
 * against the bytes that are really there before anything is allocated. Hadoop's own readers
 * ({@code Token.readFields}, {@code BlockTokenIdentifier.readFields}) allocate whatever length
 * the bytes announce: five bytes can ask for a 2 GiB array. So the token's fields are read here,
 * and the identifier's legacy layout is walked (not kept) before Hadoop's secret manager parses it.
 * Both sides read tokens here: the client the one HDFS handed it (its session's credential and key),
 * the DataNode what a client sent (a HELLO's credential, a request's token).
 */
public final class BlockTokens {
    private BlockTokens() {
    }

    /**
     * The token in {@code bytes} (Hadoop's {@code Token.write} layout: identifier, password, kind,
     * service, each with a vint length).
     *
     * @throws IOException naming the field whose announced length exceeds what follows, or any other malformation
     */
    public static Token<BlockTokenIdentifier> decode(byte[] bytes) throws IOException {
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes));
        byte[] identifier = field(in, "identifier");
        byte[] password = field(in, "password");
        byte[] kind = field(in, "kind");
        byte[] service = field(in, "service");
        if (in.available() != 0) {
            throw new IOException("block access token: " + in.available() + " bytes after its last field");
        }
        checkIdentifier(identifier);
        Token<BlockTokenIdentifier> token = new Token<>(identifier, password, new Text(kind), new Text(service));
        return token;
    }

    /**
     * The block token identifier in {@code identifier} (a token's identifier bytes), its lengths
     * checked before Hadoop's reader allocates anything.
     *
     * @throws IOException naming what is malformed
     */
    public static BlockTokenIdentifier identifier(byte[] identifier) throws IOException {
        if (identifier.length == 0) {
            throw new IOException("block access token identifier: empty");
        }
        checkIdentifier(identifier);
        BlockTokenIdentifier id = new BlockTokenIdentifier();
        try {
            id.readFields(new DataInputStream(new ByteArrayInputStream(identifier)));
        } catch (RuntimeException e) { // protobuf's and the legacy reader's complaints about bad bytes
            throw new IOException("block access token identifier: " + e.getMessage(), e);
        }
        return id;
    }

    /** Whether {@code token} carries a password (block access tokens are on where it was issued). */
    public static boolean hasPassword(Token<BlockTokenIdentifier> token) {
        return token.getPassword().length > 0 && token.getIdentifier().length > 0;
    }

    /** A vint length and that many bytes; the length is checked against the bytes left first. */
    private static byte[] field(DataInputStream in, String name) throws IOException {
        int length = length(in, name);
        byte[] value = new byte[length];
        in.readFully(value);
        return value;
    }

    private static int length(DataInputStream in, String name) throws IOException {
        int length = WritableUtils.readVInt(in);
        if (length < 0 || length > in.available()) {
            throw new IOException("block access token: " + name + " announces " + length + " bytes, "
                    + in.available() + " follow");
        }
        return length;
    }

    /**
     * Walks the legacy layout of a block token identifier (the one Hadoop reads when the first byte
     * is not positive; a positive one is protobuf, whose reader is bounded by the bytes it has):
     * expiry, key id, user, pool, block, access modes, then optional storage types, storage ids and
     * handshake secret. Every string length and count must fit in the bytes left.
     */
    private static void checkIdentifier(byte[] identifier) throws IOException {
        if (identifier.length == 0 || identifier[0] > 0) {
            return; // empty: Hadoop refuses it; positive: protobuf
        }
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(identifier));
        WritableUtils.readVLong(in); // expiry
        WritableUtils.readVInt(in); // key id
        string(in, "user id");
        string(in, "block pool id");
        WritableUtils.readVLong(in); // block id
        int modes = length(in, "access modes");
        for (int i = 0; i < modes; i++) {
            skip(in, length(in, "access mode"));
        }
        // What follows is optional (older identifiers end here): the end of the bytes is fine, an
        // announced length beyond it is not.
        if (in.available() == 0) {
            return;
        }
        int storageTypes = length(in, "storage types");
        for (int i = 0; i < storageTypes; i++) {
            skip(in, length(in, "storage type"));
        }
        if (in.available() == 0) {
            return;
        }
        int storageIds = length(in, "storage ids");
        for (int i = 0; i < storageIds; i++) {
            string(in, "storage id");
        }
        if (in.available() == 0) {
            return;
        }
        skip(in, length(in, "handshake secret"));
    }

    /** A WritableUtils string: a 4-byte length (-1 for null) and the bytes. */
    private static void string(DataInputStream in, String name) throws IOException {
        int length = in.readInt();
        if (length == -1) {
            return;
        }
        if (length < 0 || length > in.available()) {
            throw new IOException("block access token identifier: " + name + " announces " + length + " bytes, "
                    + in.available() + " follow");
        }
        skip(in, length);
    }

    private static void skip(DataInputStream in, int length) throws IOException {
        in.skipNBytes(length);
    }
}

package io.rdmaplane.hdfs;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The control messages between the HDFS client accessor and the DataNode block service, in a
 * small versioned binary encoding (big-endian). The policy layer already frames, checksums,
 * retries and deduplicates them; this only says what is asked and answered.
 *
 * <pre>
 * request  v1: u8 version, u8 flags(bit0: send stored chunk checksums), u16 poolIdLength, poolId (UTF-8),
 *              i64 blockId, i64 generationStamp, i64 offset, i32 length, i32 capacity,
 *              i32 tokenLength, token (Hadoop Token.write bytes, as HDFS gives them to the accessor)
 * response v1: u8 version, u8 status; when OK:
 *              i64 rangeOffset, i32 rangeLength, i64 address, i32 rkey, i32 crc32c,
 *              u8 checksumType (Hadoop DataChecksum type id), i32 bytesPerChecksum, i32 checksumCount, checksums (4 bytes each)
 *              otherwise: u16 length, message (UTF-8, nothing about the replica when a token is refused)
 * </pre>
 * The served range starts at a chunk boundary at or before the asked offset and ends at a chunk
 * boundary (or the replica's end), so every chunk in it can be verified; it holds at most
 * {@code capacity} bytes and always includes the asked offset.
 */
public final class BlockProtocol {
    public static final int VERSION = 1;
    public static final int FLAG_CHECKSUMS = 1;

    /** Why a request was not served; the client reads over TCP for all of them. */
    public enum Status {
        OK, TOKEN_REFUSED, NOT_FOUND, NOT_FINALIZED, STALE_GENERATION, OUT_OF_RANGE, BUSY, ERROR;

        static Status of(int code) {
            Status[] all = values();
            return code >= 0 && code < all.length ? all[code] : ERROR;
        }
    }

    public record Request(int flags, String poolId, long blockId, long generationStamp, long offset, int length,
                          int capacity, byte[] token) {
        public boolean wantsChecksums() {
            return (flags & FLAG_CHECKSUMS) != 0;
        }

        public ByteBuffer encode() {
            byte[] pool = poolId.getBytes(StandardCharsets.UTF_8);
            ByteBuffer b = ByteBuffer.allocate(2 + 2 + pool.length + 8 * 3 + 4 * 3 + token.length);
            b.put((byte) VERSION).put((byte) flags).putShort((short) pool.length).put(pool).putLong(blockId)
                    .putLong(generationStamp).putLong(offset).putInt(length).putInt(capacity).putInt(token.length).put(token);
            return b.flip();
        }

        public static Request decode(ByteBuffer b) {
            try {
                int version = b.get() & 0xff;
                if (version != VERSION) {
                    throw new IllegalArgumentException("request version " + version + " is not supported (this side speaks " + VERSION + ")");
                }
                int flags = b.get() & 0xff;
                byte[] pool = new byte[b.getShort() & 0xffff];
                b.get(pool);
                long blockId = b.getLong();
                long gs = b.getLong();
                long offset = b.getLong();
                int length = b.getInt();
                int capacity = b.getInt();
                int tokenLength = b.getInt();
                if (tokenLength < 0 || tokenLength != b.remaining()) {
                    throw new IllegalArgumentException("malformed request: token of " + tokenLength + " bytes, " + b.remaining() + " left");
                }
                byte[] token = new byte[tokenLength];
                b.get(token);
                if (offset < 0 || length < 1 || capacity < 1) {
                    throw new IllegalArgumentException("malformed request: offset " + offset + ", length " + length + ", capacity " + capacity);
                }
                return new Request(flags, new String(pool, StandardCharsets.UTF_8), blockId, gs, offset, length, capacity, token);
            } catch (BufferUnderflowException e) {
                throw new IllegalArgumentException("truncated request", e);
            }
        }
    }

    public record Response(Status status, String message, long rangeOffset, int rangeLength, long address, int rkey,
                           int crc32c, int checksumType, int bytesPerChecksum, byte[] checksums) {
        public static Response refused(Status status, String message) {
            return new Response(status, message, 0, 0, 0, 0, 0, 0, 0, new byte[0]);
        }

        public ByteBuffer encode() {
            if (status != Status.OK) {
                byte[] m = message.getBytes(StandardCharsets.UTF_8);
                int n = Math.min(m.length, 1024);
                return ByteBuffer.allocate(4 + n).put((byte) VERSION).put((byte) status.ordinal()).putShort((short) n)
                        .put(m, 0, n).flip();
            }
            ByteBuffer b = ByteBuffer.allocate(2 + 8 + 4 + 8 + 4 + 4 + 1 + 4 + 4 + checksums.length);
            b.put((byte) VERSION).put((byte) 0).putLong(rangeOffset).putInt(rangeLength).putLong(address).putInt(rkey)
                    .putInt(crc32c).put((byte) checksumType).putInt(bytesPerChecksum).putInt(checksums.length / 4).put(checksums);
            return b.flip();
        }

        public static Response decode(ByteBuffer b) {
            try {
                int version = b.get() & 0xff;
                if (version != VERSION) {
                    throw new IllegalArgumentException("response version " + version + " is not supported");
                }
                Status status = Status.of(b.get() & 0xff);
                if (status != Status.OK) {
                    byte[] m = new byte[b.getShort() & 0xffff];
                    b.get(m);
                    return refused(status, new String(m, StandardCharsets.UTF_8));
                }
                long rangeOffset = b.getLong();
                int rangeLength = b.getInt();
                long address = b.getLong();
                int rkey = b.getInt();
                int crc = b.getInt();
                int type = b.get() & 0xff;
                int bpc = b.getInt();
                int count = b.getInt();
                if (count < 0 || count * 4L != b.remaining() || rangeLength < 1 || rangeOffset < 0) {
                    throw new IllegalArgumentException("malformed response: " + count + " checksums, " + b.remaining() + " bytes left");
                }
                byte[] sums = new byte[count * 4];
                b.get(sums);
                return new Response(Status.OK, "", rangeOffset, rangeLength, address, rkey, crc, type, bpc, sums);
            } catch (BufferUnderflowException e) {
                throw new IllegalArgumentException("truncated response", e);
            }
        }
    }

    private BlockProtocol() {
    }
}

package io.rdmaplane.hdfs;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.MessageReader;
import io.rdmaplane.rdma.codec.MessageWriter;
import io.rdmaplane.rdma.codec.Protocol;
import io.rdmaplane.rdma.codec.WireIds;
import io.rdmaplane.rdma.policy.RemoteBlock;
import java.nio.ByteBuffer;

/**
 * The control messages between the HDFS client accessor and the DataNode block service, in the
 * shared codec ({@code version:u8 type:u8} then the fields, big-endian). The policy layer
 * already frames, checksums, retries and deduplicates them; this only says what is asked and
 * answered.
 *
 * <pre>
 * BLOCK_REQUEST:  u8 flags (bit0: send stored chunk checksums), string poolId,
 *                 i64 blockId, i64 generationStamp, i64 offset, i32 length, i32 capacity,
 *                 bytes token (Hadoop Token.write bytes, as HDFS gives them to the accessor)
 * BLOCK_RESPONSE: u8 status; when OK:
 *                 i64 rangeOffset, remote block (i64 address, i32 rkey, i32 rangeLength, i32 crc32c),
 *                 u8 checksumType (Hadoop DataChecksum type id), i32 bytesPerChecksum, i32 checksumCount, checksums (4 bytes each)
 *                 otherwise: string message (nothing about the replica when a token is refused)
 * </pre>
 * A string is a u16 byte count and UTF-8, {@code bytes} an i32 byte count and the bytes, each
 * bounded. The served range starts at a chunk boundary at or before the asked offset and ends at
 * a chunk boundary (or the replica's end), so every chunk in it can be verified; it holds at most
 * {@code capacity} bytes and always includes the asked offset. Decoders throw
 * {@link MalformedMessageException} naming the field.
 */
public final class BlockProtocol {
    /** 2: the first on the shared codec (1 was the hand-written format). */
    public static final int VERSION = 2;
    public static final int FLAG_CHECKSUMS = 1;
    /** The longest block pool id a request carries. */
    public static final int MAX_POOL_ID_BYTES = 1024;
    /** The largest block access token a request carries (a Hadoop token is some 100 bytes). */
    public static final int MAX_TOKEN_BYTES = 64 << 10;
    /** The most chunk checksums a response carries: 32 MiB of 512-byte chunks, beyond the largest readahead. */
    public static final int MAX_CHECKSUMS = 1 << 16;
    /** The longest refusal message; a longer one is cut. */
    public static final int MAX_MESSAGE_BYTES = 1024;

    public enum Type {
        BLOCK_REQUEST(0x30),
        BLOCK_RESPONSE(0x31);

        private final int wireId;

        Type(int wireId) {
            this.wireId = wireId;
        }

        public int wireId() {
            return wireId;
        }
    }

    public static final Protocol<Type> PROTOCOL = Protocol.of("hdfs-block", VERSION, Type.class, Type::wireId);

    /** Why a request was not served; the client reads over TCP for all of them. */
    public enum Status {
        OK, TOKEN_REFUSED, NOT_FOUND, NOT_FINALIZED, STALE_GENERATION, OUT_OF_RANGE, BUSY, ERROR
    }

    static final WireIds<Status> STATUSES = WireIds.of(Status.class, "block status", s -> switch (s) {
        case OK -> 0;
        case TOKEN_REFUSED -> 1;
        case NOT_FOUND -> 2;
        case NOT_FINALIZED -> 3;
        case STALE_GENERATION -> 4;
        case OUT_OF_RANGE -> 5;
        case BUSY -> 6;
        case ERROR -> 7;
    });

    public record Request(int flags, String poolId, long blockId, long generationStamp, long offset, int length,
                          int capacity, byte[] token) {
        public boolean wantsChecksums() {
            return (flags & FLAG_CHECKSUMS) != 0;
        }

        public ByteBuffer encode() {
            return PROTOCOL.write(Type.BLOCK_REQUEST).u8(flags).string("poolId", poolId, MAX_POOL_ID_BYTES).i64(blockId)
                    .i64(generationStamp).i64(offset).i32(length).i32(capacity).bytes("token", token, MAX_TOKEN_BYTES).finish();
        }

        /** @throws MalformedMessageException naming the field that is malformed */
        public static Request decode(ByteBuffer b) {
            MessageReader<Type> r = PROTOCOL.read(b, Type.BLOCK_REQUEST);
            int flags = r.u8("flags");
            String poolId = r.string("poolId", MAX_POOL_ID_BYTES);
            long blockId = r.i64("blockId");
            long gs = r.i64("generationStamp");
            long offset = r.i64("offset");
            int length = r.i32("length");
            int capacity = r.i32("capacity");
            byte[] token = r.bytes("token", MAX_TOKEN_BYTES);
            r.end();
            if (offset < 0 || length < 1 || capacity < 1) {
                throw r.malformed("range", "offset " + offset + ", length " + length + ", capacity " + capacity);
            }
            return new Request(flags, poolId, blockId, gs, offset, length, capacity, token);
        }
    }

    public record Response(Status status, String message, long rangeOffset, int rangeLength, long address, int rkey,
                           int crc32c, int checksumType, int bytesPerChecksum, byte[] checksums) {
        public static Response refused(Status status, String message) {
            return new Response(status, message, 0, 0, 0, 0, 0, 0, 0, new byte[0]);
        }

        public ByteBuffer encode() {
            MessageWriter out = PROTOCOL.write(Type.BLOCK_RESPONSE).id(STATUSES, status);
            if (status != Status.OK) {
                return out.string("message", MessageWriter.truncated(message, MAX_MESSAGE_BYTES), MAX_MESSAGE_BYTES).finish();
            }
            return out.i64(rangeOffset).remoteBlock(address, rkey, rangeLength, crc32c).u8(checksumType).i32(bytesPerChecksum)
                    .i32(checksums.length / 4).fixed(checksums).finish();
        }

        /** @throws MalformedMessageException naming the field that is malformed */
        public static Response decode(ByteBuffer b) {
            MessageReader<Type> r = PROTOCOL.read(b, Type.BLOCK_RESPONSE);
            Status status = r.id("status", STATUSES);
            if (status != Status.OK) {
                Response refused = refused(status, r.string("message", MAX_MESSAGE_BYTES));
                r.end();
                return refused;
            }
            long rangeOffset = r.i64("rangeOffset");
            if (rangeOffset < 0) {
                throw r.malformed("rangeOffset", "must not be negative, was " + rangeOffset);
            }
            RemoteBlock range = r.remoteBlock("range", Integer.MAX_VALUE, RemoteBlock::new);
            int type = r.u8("checksumType");
            int bpc = r.i32("bytesPerChecksum");
            int count = r.count("checksumCount", 0, MAX_CHECKSUMS);
            byte[] sums = r.fixed("checksums", count * 4);
            r.end();
            return new Response(Status.OK, "", rangeOffset, range.length(), range.address(), range.rkey(), range.crc32c(), type,
                    bpc, sums);
        }
    }

    private BlockProtocol() {
    }
}

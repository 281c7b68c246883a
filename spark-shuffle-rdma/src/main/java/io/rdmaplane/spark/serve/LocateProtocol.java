package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.codec.MessageReader;
import io.rdmaplane.rdma.codec.MessageWriter;
import io.rdmaplane.rdma.codec.Protocol;
import io.rdmaplane.rdma.policy.RemoteBlock;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The LOCATE control messages, in the shared codec ({@code version:u8 type:u8} then the fields,
 * big-endian; the policy layer CRC32C-checks every frame).
 * <ul>
 * <li>LOCATE: {@code int shuffleId, int count, count × (long mapId, int reduceId)}.</li>
 * <li>LOCATED: {@code int count} (equal to the request's), then per block a {@code u8 kind} and:
 *     <ul>
 *     <li>0 NOT_SERVED (not served over RDMA here), 3 DEFERRED (no room left in this answer: ask
 *         again): nothing more;</li>
 *     <li>1 READ: {@code i32 length, header bytes} (at most {@value #MAX_HEADER_BYTES}), {@code i32
 *         length, trailer bytes} (at most {@value #MAX_TRAILER_BYTES}) and the payload's remote block
 *         {@code long address, int rkey, int length, int crc32c}: the reader puts header, READ
 *         payload and trailer back to back in one buffer, which then holds the Arrow block; one READ
 *         per block. The CRC32C covers the payload;</li>
 *     <li>2 INLINE: {@code i32 length} and the whole Arrow block (at most {@value #MAX_INLINE_BYTES}
 *         bytes): a small block travels in the answer, with no READ.</li>
 *     </ul></li>
 * </ul>
 * Every decoder checks the version, the type, every count and every length against its bound and
 * the bytes present before anything is allocated, and throws {@link MalformedMessageException}
 * naming the field on malformed input, never anything else.
 */
public final class LocateProtocol {
    /** 3: LOCATED carries each block's framing, or the whole block inline (2: pieces only). */
    public static final int VERSION = 3;

    public enum Type {
        LOCATE(0x10),
        LOCATED(0x11);

        private final int wireId;

        Type(int wireId) {
            this.wireId = wireId;
        }

        public int wireId() {
            return wireId;
        }
    }

    public static final Protocol<Type> PROTOCOL = Protocol.of("locate", VERSION, Type.class, Type::wireId);
    /** The most blocks one LOCATE carries. */
    public static final int MAX_BLOCKS = 512;
    /**
     * The most blocks a reader puts in one LOCATE: an answer of READ entries (about 600 bytes each
     * with Spark's block metadata, most of it the Arrow header) then takes about a third of
     * {@link #MAX_RESPONSE_BYTES}, leaving the rest for blocks inline. A reduce task with more blocks
     * on one executor sends several LOCATEs at once.
     */
    public static final int BLOCKS_PER_REQUEST = 32;
    /** The most bytes of one answer: within the default 64 KiB control message, the policy frame aside. */
    public static final int MAX_RESPONSE_BYTES = 60 << 10;
    /** The most bytes of a block's Arrow framing before its payload (schema and batch header). */
    public static final int MAX_HEADER_BYTES = 2048;
    /** The most bytes of a block's Arrow framing after its payload (padding and end of stream). */
    public static final int MAX_TRAILER_BYTES = 64;
    /** The most bytes of a block sent inline. */
    public static final int MAX_INLINE_BYTES = MAX_RESPONSE_BYTES;
    private static final int REQUEST_HEADER = Protocol.HEADER_BYTES + 4 + 4;
    private static final int REQUEST_ENTRY = 8 + 4;
    private static final int RESPONSE_HEADER = Protocol.HEADER_BYTES + 4;
    private static final int KIND_NOT_SERVED = 0;
    private static final int KIND_READ = 1;
    private static final int KIND_INLINE = 2;
    private static final int KIND_DEFERRED = 3;
    /** A block's header, payload and trailer land in one buffer: together they stay below what one buffer holds. */
    private static final long MAX_BLOCK_BYTES = Integer.MAX_VALUE - 4096;

    /** One block of a shuffle: the map output and the reduce partition. */
    public record BlockRef(long mapId, int reduceId) {
        public BlockRef {
            if (mapId < 0) {
                throw new IllegalArgumentException("mapId must not be negative, was " + mapId);
            }
            if (reduceId < 0) {
                throw new IllegalArgumentException("reduceId must not be negative, was " + reduceId);
            }
        }
    }

    /** A decoded LOCATE request. */
    public record Request(int shuffleId, List<BlockRef> blocks) {
        public Request {
            if (shuffleId < 0) {
                throw new IllegalArgumentException("shuffleId must not be negative, was " + shuffleId);
            }
            blocks = List.copyOf(blocks);
            if (blocks.size() < 1 || blocks.size() > MAX_BLOCKS) {
                throw new IllegalArgumentException("blocks: must be 1.." + MAX_BLOCKS + ", was " + blocks.size());
            }
        }
    }

    private LocateProtocol() {
    }

    /** Bytes of the request for {@code count} blocks. */
    public static int requestBytes(int count) {
        return REQUEST_HEADER + count * REQUEST_ENTRY;
    }

    /** What a LOCATE answer says of one block. */
    public sealed interface Location permits NotServed, Deferred, Read, Inline {
    }

    /** Not served over RDMA by that executor (not published there, e.g. over its cap). */
    public record NotServed() implements Location {
    }

    /** No room was left in the answer: LOCATE it again. */
    public record Deferred() implements Location {
    }

    /**
     * Served by one READ of {@code payload} between the block's framing: {@code header}, then the
     * READ bytes, then {@code trailer} are the Arrow block. The buffers' remaining bytes count.
     */
    public record Read(ByteBuffer header, RemoteBlock payload, ByteBuffer trailer) implements Location {
        public Read {
            Objects.requireNonNull(payload, "payload");
            if (header.remaining() > MAX_HEADER_BYTES || trailer.remaining() > MAX_TRAILER_BYTES) {
                throw new IllegalArgumentException("a block's framing is at most " + MAX_HEADER_BYTES + " + " + MAX_TRAILER_BYTES
                        + " bytes, not " + header.remaining() + " + " + trailer.remaining());
            }
            if ((long) header.remaining() + payload.length() + trailer.remaining() > MAX_BLOCK_BYTES) {
                throw new IllegalArgumentException("a block holds less than 2 GiB");
            }
        }

        /** Bytes of the whole Arrow block. */
        public int blockLength() {
            return header.remaining() + payload.length() + trailer.remaining();
        }
    }

    /** The whole Arrow block (its remaining bytes), carried in the answer. */
    public record Inline(ByteBuffer block) implements Location {
        public Inline {
            if (block.remaining() < 1 || block.remaining() > MAX_INLINE_BYTES) {
                throw new IllegalArgumentException("an inline block has 1.." + MAX_INLINE_BYTES + " bytes, not " + block.remaining());
            }
        }
    }

    public static final Location NOT_SERVED = new NotServed();
    public static final Location DEFERRED = new Deferred();

    /** Bytes {@code location} takes in an answer. */
    public static int entryBytes(Location location) {
        if (location instanceof Read read) {
            return 1 + 4 + read.header().remaining() + 4 + read.trailer().remaining() + MessageReader.REMOTE_BLOCK_BYTES;
        }
        if (location instanceof Inline inline) {
            return 1 + 4 + inline.block().remaining();
        }
        return 1;
    }

    /** Bytes of an answer with these entries. */
    public static int responseBytes(List<? extends Location> located) {
        int bytes = RESPONSE_HEADER;
        for (Location location : located) {
            bytes += entryBytes(location);
        }
        return bytes;
    }

    public static ByteBuffer encodeRequest(Request request) {
        MessageWriter out = PROTOCOL.write(Type.LOCATE).i32(request.shuffleId()).i32(request.blocks().size());
        for (BlockRef block : request.blocks()) {
            out.i64(block.mapId()).i32(block.reduceId());
        }
        return out.finish();
    }

    /**
     * Decodes a request from {@code in}'s remaining bytes (its position is not moved).
     *
     * @throws MalformedMessageException naming the field that is malformed
     */
    public static Request decodeRequest(ByteBuffer in) {
        MessageReader<Type> r = PROTOCOL.read(in, Type.LOCATE);
        int shuffleId = r.i32("shuffleId");
        if (shuffleId < 0) {
            throw r.malformed("shuffleId", "must not be negative, was " + shuffleId);
        }
        int count = r.count("count", 1, MAX_BLOCKS);
        if (r.remaining() != (long) count * REQUEST_ENTRY) {
            throw r.malformed("count", count + " blocks need " + (long) count * REQUEST_ENTRY + " bytes, " + r.remaining()
                    + " remain");
        }
        List<BlockRef> blocks = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            long mapId = r.i64("mapId of block " + i);
            int reduceId = r.i32("reduceId of block " + i);
            if (mapId < 0) {
                throw r.malformed("mapId of block " + i, "must not be negative, was " + mapId);
            }
            if (reduceId < 0) {
                throw r.malformed("reduceId of block " + i, "must not be negative, was " + reduceId);
            }
            blocks.add(new BlockRef(mapId, reduceId));
        }
        r.end();
        return new Request(shuffleId, blocks);
    }

    /** Encodes a response, one location per block of the request, in its order. */
    public static ByteBuffer encodeResponse(List<? extends Location> located) {
        if (located.size() < 1 || located.size() > MAX_BLOCKS) {
            throw new IllegalArgumentException("count: must be 1.." + MAX_BLOCKS + ", was " + located.size());
        }
        MessageWriter out = PROTOCOL.write(Type.LOCATED).i32(located.size());
        for (Location location : located) {
            if (location instanceof Read read) {
                RemoteBlock p = read.payload();
                out.u8(KIND_READ).i32(read.header().remaining()).rest(read.header()).i32(read.trailer().remaining())
                        .rest(read.trailer()).remoteBlock(p.address(), p.rkey(), p.length(), p.crc32c());
            } else if (location instanceof Inline inline) {
                out.u8(KIND_INLINE).i32(inline.block().remaining()).rest(inline.block());
            } else {
                out.u8(location instanceof Deferred ? KIND_DEFERRED : KIND_NOT_SERVED);
            }
        }
        return out.finish();
    }

    /**
     * Decodes a response to a request of {@code expectedCount} blocks (its position is not
     * moved): element i says where block i is.
     *
     * @throws MalformedMessageException naming the field that is malformed
     */
    public static List<Location> decodeResponse(ByteBuffer in, int expectedCount) {
        Objects.requireNonNull(in, "in");
        MessageReader<Type> r = PROTOCOL.read(in, Type.LOCATED);
        int count = r.count("count", 1, MAX_BLOCKS);
        if (count != expectedCount) {
            throw r.malformed("count", "the response has " + count + " blocks, the request had " + expectedCount);
        }
        r.need("count", count); // at least one byte per block, before anything is allocated for them
        List<Location> located = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int kind = r.u8("kind of block " + i);
            switch (kind) {
                case KIND_NOT_SERVED -> located.add(NOT_SERVED);
                case KIND_DEFERRED -> located.add(DEFERRED);
                case KIND_READ -> {
                    ByteBuffer header = ByteBuffer.wrap(r.bytes("header of block " + i, MAX_HEADER_BYTES));
                    ByteBuffer trailer = ByteBuffer.wrap(r.bytes("trailer of block " + i, MAX_TRAILER_BYTES));
                    RemoteBlock payload = r.remoteBlock("payload of block " + i, Integer.MAX_VALUE, RemoteBlock::new);
                    if ((long) header.remaining() + payload.length() + trailer.remaining() > MAX_BLOCK_BYTES) {
                        throw r.malformed("length of block " + i, "header, payload and trailer add up to more than one"
                                + " buffer holds");
                    }
                    located.add(new Read(header, payload, trailer));
                }
                case KIND_INLINE -> {
                    byte[] block = r.bytes("inline block " + i, MAX_INLINE_BYTES);
                    if (block.length == 0) {
                        throw r.malformed("inline block " + i, "is empty");
                    }
                    located.add(new Inline(ByteBuffer.wrap(block)));
                }
                default -> throw r.malformed("kind of block " + i, "expected 0..3, was " + kind);
            }
        }
        if (r.remaining() > 0) {
            throw r.malformed("count", r.remaining() + " bytes follow the last of " + count + " blocks");
        }
        return located;
    }
}

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
 * <li>LOCATED: {@code int count} (equal to the request's), then per block {@code u8 pieces}
 *     (0 = not served over RDMA, else 1..{@value #MAX_PIECES}) and that many remote blocks
 *     {@code long address, int rkey, int length, int crc32c}: the pieces a reader READs, in order,
 *     into one buffer, which then holds the Arrow block (one piece for a copied segment; framing,
 *     payload and framing for one served from the data file's mapping). Each CRC32C covers its piece.</li>
 * </ul>
 * Every decoder checks the version, the type, every count and every length against the bytes
 * present and throws {@link MalformedMessageException} naming the field on malformed input,
 * never anything else.
 */
public final class LocateProtocol {
    /** 2: the first on the shared codec. */
    public static final int VERSION = 2;

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
    /**
     * The most blocks one LOCATE carries: its response (6 + 61 bytes per block at most, about
     * 31 KiB) then fits the default 64 KiB control message with room to spare. A reduce task with more
     * blocks on one executor sends several LOCATEs at once.
     */
    public static final int MAX_BLOCKS = 512;
    /** The most pieces one block is gathered from. */
    public static final int MAX_PIECES = 3;
    private static final int REQUEST_HEADER = Protocol.HEADER_BYTES + 4 + 4;
    private static final int REQUEST_ENTRY = 8 + 4;
    private static final int PIECE = MessageReader.REMOTE_BLOCK_BYTES;
    /** A block's pieces land in one buffer: together they stay below what one buffer holds. */
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

    /** Bytes of the response for {@code count} blocks when all are served (the largest it can be). */
    public static int maxResponseBytes(int count) {
        return Protocol.HEADER_BYTES + 4 + count * (1 + MAX_PIECES * PIECE);
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

    /** Encodes a response; {@code located[i]} (block i's pieces) is null when block i is not served over RDMA. */
    public static ByteBuffer encodeResponse(RemoteBlock[][] located) {
        if (located.length < 1 || located.length > MAX_BLOCKS) {
            throw new IllegalArgumentException("count: must be 1.." + MAX_BLOCKS + ", was " + located.length);
        }
        MessageWriter out = PROTOCOL.write(Type.LOCATED).i32(located.length);
        for (RemoteBlock[] pieces : located) {
            if (pieces != null && (pieces.length < 1 || pieces.length > MAX_PIECES)) {
                throw new IllegalArgumentException("a block has 1.." + MAX_PIECES + " pieces, not " + pieces.length);
            }
            out.u8(pieces == null ? 0 : pieces.length);
            if (pieces != null) {
                for (RemoteBlock piece : pieces) {
                    out.remoteBlock(piece.address(), piece.rkey(), piece.length(), piece.crc32c());
                }
            }
        }
        return out.finish();
    }

    /**
     * Decodes a response to a request of {@code expectedCount} blocks (its position is not
     * moved). Element i is block i's pieces, or null when it is not served over RDMA.
     *
     * @throws MalformedMessageException naming the field that is malformed
     */
    public static RemoteBlock[][] decodeResponse(ByteBuffer in, int expectedCount) {
        Objects.requireNonNull(in, "in");
        MessageReader<Type> r = PROTOCOL.read(in, Type.LOCATED);
        int count = r.count("count", 1, MAX_BLOCKS);
        if (count != expectedCount) {
            throw r.malformed("count", "the response has " + count + " blocks, the request had " + expectedCount);
        }
        r.need("count", count); // at least one byte per block, before anything is allocated for them
        RemoteBlock[][] located = new RemoteBlock[count][];
        for (int i = 0; i < count; i++) {
            int pieces = r.u8("pieces of block " + i);
            if (pieces == 0) {
                continue;
            }
            if (pieces > MAX_PIECES) {
                throw r.malformed("pieces of block " + i, "expected 0.." + MAX_PIECES + ", was " + pieces);
            }
            r.need("location of block " + i, (long) pieces * PIECE);
            located[i] = new RemoteBlock[pieces];
            long total = 0;
            for (int p = 0; p < pieces; p++) {
                located[i][p] = r.remoteBlock("piece " + p + " of block " + i, Integer.MAX_VALUE, RemoteBlock::new);
                total += located[i][p].length();
            }
            if (total > MAX_BLOCK_BYTES) {
                throw r.malformed("length of block " + i, "its pieces add up to " + total + " bytes, more than one buffer holds");
            }
        }
        if (r.remaining() > 0) {
            throw r.malformed("count", r.remaining() + " bytes follow the last of " + count + " blocks");
        }
        return located;
    }
}

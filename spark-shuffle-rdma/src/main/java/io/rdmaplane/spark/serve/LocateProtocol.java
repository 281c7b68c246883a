package io.rdmaplane.spark.serve;

import io.rdmaplane.rdma.policy.RemoteBlock;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The LOCATE control messages (big-endian; the policy layer CRC32C-checks every frame).
 * <ul>
 * <li>Request: {@code byte type (3), int shuffleId, int count, count × (long mapId, int reduceId)}.</li>
 * <li>Response: {@code int count} (equal to the request's), then per block {@code byte pieces}
 *     (0 = not served over RDMA, else 1..{@value #MAX_PIECES}) and that many {@code long address,
 *     int rkey, int length, int crc32c}: the pieces a reader READs, in order, into one buffer,
 *     which then holds the Arrow block (one piece for a copied segment; framing, payload and
 *     framing for one served from the data file's mapping). Each CRC32C covers its piece.</li>
 * </ul>
 * Every decoder checks the type, every count and every length against the bytes present and
 * throws {@link IllegalArgumentException} naming the field on malformed input, never anything else.
 */
public final class LocateProtocol {
    public static final byte TYPE_LOCATE = 3;
    /**
     * The most blocks one LOCATE carries: its response (4 + 61 bytes per block at most, about
     * 31 KiB) then fits the default 64 KiB control message with room to spare. A reduce task with more
     * blocks on one executor sends several LOCATEs at once.
     */
    public static final int MAX_BLOCKS = 512;
    /** The most pieces one block is gathered from. */
    public static final int MAX_PIECES = 3;
    private static final int REQUEST_HEADER = 1 + 4 + 4;
    private static final int REQUEST_ENTRY = 8 + 4;
    private static final int PIECE = 8 + 4 + 4 + 4;

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
            checkCount("blocks", blocks.size());
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
        return 4 + count * (1 + MAX_PIECES * PIECE);
    }

    public static ByteBuffer encodeRequest(Request request) {
        ByteBuffer out = ByteBuffer.allocate(requestBytes(request.blocks().size()));
        out.put(TYPE_LOCATE).putInt(request.shuffleId()).putInt(request.blocks().size());
        for (BlockRef block : request.blocks()) {
            out.putLong(block.mapId()).putInt(block.reduceId());
        }
        return out.flip();
    }

    /**
     * Decodes a request from {@code in}'s remaining bytes (its position is not moved).
     *
     * @throws IllegalArgumentException naming the field that is malformed
     */
    public static Request decodeRequest(ByteBuffer in) {
        ByteBuffer b = in.duplicate().order(java.nio.ByteOrder.BIG_ENDIAN);
        need(b, 1, "type");
        byte type = b.get();
        if (type != TYPE_LOCATE) {
            throw new IllegalArgumentException("type: expected " + TYPE_LOCATE + " (LOCATE), was " + type);
        }
        need(b, 4, "shuffleId");
        int shuffleId = b.getInt();
        if (shuffleId < 0) {
            throw new IllegalArgumentException("shuffleId: must not be negative, was " + shuffleId);
        }
        need(b, 4, "count");
        int count = b.getInt();
        checkCount("count", count);
        if (b.remaining() != (long) count * REQUEST_ENTRY) {
            throw new IllegalArgumentException("count: " + count + " blocks need " + (long) count * REQUEST_ENTRY
                    + " bytes, " + b.remaining() + " remain");
        }
        List<BlockRef> blocks = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            long mapId = b.getLong();
            int reduceId = b.getInt();
            if (mapId < 0) {
                throw new IllegalArgumentException("mapId of block " + i + ": must not be negative, was " + mapId);
            }
            if (reduceId < 0) {
                throw new IllegalArgumentException("reduceId of block " + i + ": must not be negative, was " + reduceId);
            }
            blocks.add(new BlockRef(mapId, reduceId));
        }
        return new Request(shuffleId, blocks);
    }

    /** Encodes a response; {@code located[i]} (block i's pieces) is null when block i is not served over RDMA. */
    public static ByteBuffer encodeResponse(RemoteBlock[][] located) {
        checkCount("count", located.length);
        int size = 4;
        for (RemoteBlock[] pieces : located) {
            if (pieces != null && (pieces.length < 1 || pieces.length > MAX_PIECES)) {
                throw new IllegalArgumentException("a block has 1.." + MAX_PIECES + " pieces, not " + pieces.length);
            }
            size += 1 + (pieces == null ? 0 : pieces.length * PIECE);
        }
        ByteBuffer out = ByteBuffer.allocate(size).putInt(located.length);
        for (RemoteBlock[] pieces : located) {
            out.put((byte) (pieces == null ? 0 : pieces.length));
            if (pieces != null) {
                for (RemoteBlock piece : pieces) {
                    out.putLong(piece.address()).putInt(piece.rkey()).putInt(piece.length()).putInt(piece.crc32c());
                }
            }
        }
        return out.flip();
    }

    /**
     * Decodes a response to a request of {@code expectedCount} blocks (its position is not
     * moved). Element i is block i's pieces, or null when it is not served over RDMA.
     *
     * @throws IllegalArgumentException naming the field that is malformed
     */
    public static RemoteBlock[][] decodeResponse(ByteBuffer in, int expectedCount) {
        Objects.requireNonNull(in, "in");
        ByteBuffer b = in.duplicate().order(java.nio.ByteOrder.BIG_ENDIAN);
        need(b, 4, "count");
        int count = b.getInt();
        checkCount("count", count);
        if (count != expectedCount) {
            throw new IllegalArgumentException("count: the response has " + count + " blocks, the request had " + expectedCount);
        }
        if (b.remaining() < count) {
            throw new IllegalArgumentException("count: " + count + " blocks need at least " + count + " bytes, "
                    + b.remaining() + " remain");
        }
        RemoteBlock[][] located = new RemoteBlock[count][];
        for (int i = 0; i < count; i++) {
            need(b, 1, "pieces of block " + i);
            byte pieces = b.get();
            if (pieces == 0) {
                continue;
            }
            if (pieces < 0 || pieces > MAX_PIECES) {
                throw new IllegalArgumentException("pieces of block " + i + ": expected 0.." + MAX_PIECES + ", was " + pieces);
            }
            need(b, pieces * PIECE, "location of block " + i);
            located[i] = new RemoteBlock[pieces];
            long total = 0;
            for (int p = 0; p < pieces; p++) {
                long address = b.getLong();
                int rkey = b.getInt();
                int length = b.getInt();
                int crc = b.getInt();
                if (length < 1) {
                    throw new IllegalArgumentException("length of piece " + p + " of block " + i + ": must be at least 1, was "
                            + length);
                }
                total += length;
                located[i][p] = new RemoteBlock(address, rkey, length, crc);
            }
            if (total > Integer.MAX_VALUE - 4096) {
                throw new IllegalArgumentException("length of block " + i + ": its pieces add up to " + total
                        + " bytes, more than one buffer holds");
            }
        }
        if (b.hasRemaining()) {
            throw new IllegalArgumentException("count: " + b.remaining() + " bytes follow the last of " + count + " blocks");
        }
        return located;
    }

    private static void checkCount(String field, int count) {
        if (count < 1 || count > MAX_BLOCKS) {
            throw new IllegalArgumentException(field + ": must be 1.." + MAX_BLOCKS + ", was " + count);
        }
    }

    private static void need(ByteBuffer b, int bytes, String field) {
        if (b.remaining() < bytes) {
            throw new IllegalArgumentException(field + ": needs " + bytes + " bytes, " + b.remaining() + " remain");
        }
    }
}

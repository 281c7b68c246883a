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
 * <li>Response: {@code int count} (equal to the request's), then per block {@code byte status}
 *     (0 = not served over RDMA, 1 = served) and, if served, {@code long address, int rkey,
 *     int length, int crc32c} (CRC32C of the whole framed segment).</li>
 * </ul>
 * Every decoder checks the type, every count and every length against the bytes present and
 * throws {@link IllegalArgumentException} naming the field on malformed input, never anything else.
 */
public final class LocateProtocol {
    public static final byte TYPE_LOCATE = 3;
    /**
     * The most blocks one LOCATE carries: its response (4 + 21 bytes per block, about 21 KiB)
     * then fits the default 64 KiB control message with room to spare. A reduce task with more
     * blocks on one executor sends several LOCATEs at once.
     */
    public static final int MAX_BLOCKS = 1024;
    private static final int REQUEST_HEADER = 1 + 4 + 4;
    private static final int REQUEST_ENTRY = 8 + 4;
    private static final int RESPONSE_ENTRY = 1 + 8 + 4 + 4 + 4;

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
        return 4 + count * RESPONSE_ENTRY;
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

    /** Encodes a response; {@code located[i]} is null when block i is not served over RDMA. */
    public static ByteBuffer encodeResponse(RemoteBlock[] located) {
        checkCount("count", located.length);
        int size = 4;
        for (RemoteBlock block : located) {
            size += block == null ? 1 : RESPONSE_ENTRY;
        }
        ByteBuffer out = ByteBuffer.allocate(size).putInt(located.length);
        for (RemoteBlock block : located) {
            if (block == null) {
                out.put((byte) 0);
            } else {
                out.put((byte) 1).putLong(block.address()).putInt(block.rkey()).putInt(block.length()).putInt(block.crc32c());
            }
        }
        return out.flip();
    }

    /**
     * Decodes a response to a request of {@code expectedCount} blocks (its position is not
     * moved). Element i is null when block i is not served over RDMA.
     *
     * @throws IllegalArgumentException naming the field that is malformed
     */
    public static RemoteBlock[] decodeResponse(ByteBuffer in, int expectedCount) {
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
        RemoteBlock[] located = new RemoteBlock[count];
        for (int i = 0; i < count; i++) {
            need(b, 1, "status of block " + i);
            byte status = b.get();
            if (status == 0) {
                continue;
            }
            if (status != 1) {
                throw new IllegalArgumentException("status of block " + i + ": expected 0 or 1, was " + status);
            }
            need(b, RESPONSE_ENTRY - 1, "location of block " + i);
            long address = b.getLong();
            int rkey = b.getInt();
            int length = b.getInt();
            int crc = b.getInt();
            if (length < 1) {
                throw new IllegalArgumentException("length of block " + i + ": must be at least 1, was " + length);
            }
            located[i] = new RemoteBlock(address, rkey, length, crc);
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

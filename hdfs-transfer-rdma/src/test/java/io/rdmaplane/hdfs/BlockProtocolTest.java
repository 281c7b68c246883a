package io.rdmaplane.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.hdfs.BlockProtocol.Request;
import io.rdmaplane.hdfs.BlockProtocol.Response;
import io.rdmaplane.hdfs.BlockProtocol.Status;
import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.jupiter.api.Test;

class BlockProtocolTest {
    private static final Request REQUEST = new Request(BlockProtocol.FLAG_CHECKSUMS, "BP-1-127.0.0.1-42", 1073741825L, 1001,
            512, 4 << 20, 4 << 20, new byte[] {1, 2, 3, 4, 5});
    private static final Response RESPONSE = new Response(Status.OK, "", 512, 8192, 0x7f00_0000_1000L, 77, 0xcafe, 2, 512,
            new byte[64]);

    @Test
    void requestRoundTrips() {
        Request back = Request.decode(REQUEST.encode());
        assertEquals(REQUEST.poolId(), back.poolId());
        assertEquals(REQUEST.blockId(), back.blockId());
        assertEquals(REQUEST.generationStamp(), back.generationStamp());
        assertEquals(REQUEST.offset(), back.offset());
        assertEquals(REQUEST.length(), back.length());
        assertEquals(REQUEST.capacity(), back.capacity());
        assertArrayEquals(REQUEST.token(), back.token());
        assertEquals(true, back.wantsChecksums());
    }

    @Test
    void responsesRoundTrip() {
        Response back = Response.decode(RESPONSE.encode());
        assertEquals(RESPONSE.rangeOffset(), back.rangeOffset());
        assertEquals(RESPONSE.rangeLength(), back.rangeLength());
        assertEquals(RESPONSE.address(), back.address());
        assertEquals(RESPONSE.rkey(), back.rkey());
        assertEquals(RESPONSE.crc32c(), back.crc32c());
        assertEquals(RESPONSE.checksumType(), back.checksumType());
        assertEquals(RESPONSE.bytesPerChecksum(), back.bytesPerChecksum());
        assertArrayEquals(RESPONSE.checksums(), back.checksums());
        Response refused = Response.decode(Response.refused(Status.TOKEN_REFUSED, "block access token refused").encode());
        assertEquals(Status.TOKEN_REFUSED, refused.status());
        assertEquals("block access token refused", refused.message());
    }

    @Test
    void anotherVersionIsRefusedByName() {
        ByteBuffer b = REQUEST.encode();
        b.put(0, (byte) (BlockProtocol.VERSION + 1));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Request.decode(b));
        assertEquals("version: unsupported hdfs-block version 3, this build speaks 2", e.getMessage());
    }

    /** Statuses go by their explicit ids; an id this build does not know is an error, not a guess. */
    @Test
    void statusesHaveExplicitIdsAndAnUnknownOneIsRefused() {
        ByteBuffer busy = Response.refused(Status.BUSY, "cap reached").encode();
        assertEquals(6, busy.get(2), "BUSY's wire id");
        busy.put(2, (byte) 99);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Response.decode(busy));
        assertTrue(e.getMessage().startsWith("status: unknown block status id 99"), e.getMessage());
        ByteBuffer request = REQUEST.encode();
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Response.decode(request)).getMessage()
                .startsWith("type: expected a hdfs-block BLOCK_RESPONSE message, was BLOCK_REQUEST"));
    }

    @Test
    void lengthsFromTheWireAreBoundedBeforeAllocation() {
        ByteBuffer request = REQUEST.encode();
        // The token's length field sits right before its 5 bytes, at the end.
        request.putInt(request.limit() - 5 - 4, Integer.MAX_VALUE);
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Request.decode(request)).getMessage()
                .startsWith("token: 2147483647 bytes is more than the " + BlockProtocol.MAX_TOKEN_BYTES + "-byte bound"));
        ByteBuffer response = RESPONSE.encode();
        response.putInt(response.limit() - 64 - 4, BlockProtocol.MAX_CHECKSUMS + 1);
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Response.decode(response)).getMessage()
                .startsWith("checksumCount: must be 0.." + BlockProtocol.MAX_CHECKSUMS));
        String longMessage = "x".repeat(5000);
        assertEquals(BlockProtocol.MAX_MESSAGE_BYTES,
                Response.decode(Response.refused(Status.ERROR, longMessage).encode()).message().length(), "a long message is cut");
    }

    /** Every truncation and random corruption ends in IllegalArgumentException (the server answers ERROR), nothing else. */
    @Test
    void truncatedOrCorruptMessagesFailCleanly() {
        ByteBuffer request = REQUEST.encode();
        ByteBuffer response = RESPONSE.encode();
        for (int n = 0; n < request.limit(); n++) {
            int cut = n;
            assertThrows(IllegalArgumentException.class, () -> Request.decode(request.duplicate().limit(cut)));
        }
        for (int n = 0; n < response.limit(); n++) {
            int cut = n;
            assertThrows(IllegalArgumentException.class, () -> Response.decode(response.duplicate().limit(cut)));
        }
        Random random = new Random(3);
        for (int i = 0; i < 20_000; i++) {
            ByteBuffer b = (random.nextBoolean() ? REQUEST : null) != null ? REQUEST.encode() : RESPONSE.encode();
            byte[] bytes = new byte[b.remaining()];
            b.get(bytes);
            bytes[random.nextInt(bytes.length)] ^= (byte) (1 + random.nextInt(255));
            ByteBuffer corrupt = ByteBuffer.wrap(bytes, 0, random.nextInt(bytes.length + 1));
            try {
                Request.decode(corrupt.duplicate());
            } catch (IllegalArgumentException expected) {
                // fine
            }
            try {
                Response.decode(corrupt.duplicate());
            } catch (IllegalArgumentException expected) {
                // fine
            }
        }
    }
}

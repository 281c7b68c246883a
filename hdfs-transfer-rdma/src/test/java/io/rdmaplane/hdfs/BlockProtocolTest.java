package io.rdmaplane.hdfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

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
        b.put(0, (byte) 2);
        assertThrows(IllegalArgumentException.class, () -> Request.decode(b));
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

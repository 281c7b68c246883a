package io.rdmaplane.rdma.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import io.rdmaplane.rdma.provider.Channel;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The doctor's DESCRIBE and DESCRIPTOR on the shared codec. */
class PeerCheckMessagesTest {
    private static final PeerCheck.Descriptor DESCRIPTOR = new PeerCheck.Descriptor(0x7f00_1234_5000L, 0xBEEF, PeerCheck.REGION_BYTES,
            -42, 0x1234_5678, "verbs");

    @Test
    void messagesRoundTrip() {
        assertEquals(DESCRIPTOR, PeerCheck.Descriptor.decode(DESCRIPTOR.encode()));
        PeerCheck.checkRequest(PeerCheck.request());
    }

    @Test
    void whatIsNotADoctorMessageIsRefusedNamingTheField() {
        assertMalformed("type: expected a doctor DESCRIPTOR message, was DESCRIBE", () -> PeerCheck.Descriptor.decode(PeerCheck.request()));
        assertMalformed("type: expected a doctor DESCRIBE message, was DESCRIPTOR", () -> PeerCheck.checkRequest(DESCRIPTOR.encode()));
        ByteBuffer tooLarge = new PeerCheck.Descriptor(1, 2, Channel.MAX_READ_BYTES + 1, 3, 4, "tcp").encode();
        assertMalformed("length of region: must be 1.." + Channel.MAX_READ_BYTES, () -> PeerCheck.Descriptor.decode(tooLarge));
        ByteBuffer flipped = DESCRIPTOR.encode();
        flipped.put(10, (byte) (flipped.get(10) ^ 4));
        assertMalformed("crc32c: mismatch", () -> PeerCheck.Descriptor.decode(flipped));
        assertMalformed("crc32c:", () -> PeerCheck.checkRequest(ByteBuffer.wrap("GET / HTTP/1.1\r\n".getBytes())));
    }

    @Test
    void fuzzedMessagesOnlyEverThrowMalformedMessageException() {
        Random random = new Random(20250612);
        List<ByteBuffer> seeds = List.of(DESCRIPTOR.encode(), PeerCheck.request());
        for (int round = 0; round < 5_000; round++) {
            ByteBuffer seed = seeds.get(random.nextInt(seeds.size()));
            byte[] bytes = new byte[seed.remaining()];
            seed.duplicate().get(bytes);
            if (round % 2 == 0) {
                bytes = java.util.Arrays.copyOf(bytes, random.nextInt(bytes.length)); // strictly shorter
            } else {
                bytes[random.nextInt(bytes.length)] ^= (byte) (1 + random.nextInt(255));
            }
            ByteBuffer input = ByteBuffer.wrap(bytes);
            for (Runnable decode : List.<Runnable>of(() -> PeerCheck.Descriptor.decode(input), () -> PeerCheck.checkRequest(input))) {
                try {
                    decode.run();
                    fail("a truncated or flipped message decoded: its CRC32C should have caught it");
                } catch (MalformedMessageException expected) {
                    // the one error a decoder may throw
                } catch (RuntimeException e) {
                    fail("a decoder threw " + e + " instead of MalformedMessageException", e);
                }
            }
        }
    }

    private static void assertMalformed(String prefix, Runnable decode) {
        MalformedMessageException e = assertThrows(MalformedMessageException.class, decode::run);
        assertTrue(e.getMessage().startsWith(prefix), "'" + e.getMessage() + "' should start with '" + prefix + "'");
    }
}

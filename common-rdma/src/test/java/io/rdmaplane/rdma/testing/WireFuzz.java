package io.rdmaplane.rdma.testing;

import static org.junit.jupiter.api.Assertions.fail;

import io.rdmaplane.rdma.codec.MalformedMessageException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * Fuzzing a wire decoder: inputs made from valid messages (truncated, one byte flipped) or from
 * random bytes, and the check that a decoder given any of them either decodes or throws the codec's
 * {@link MalformedMessageException}, never anything else. Fixed seeds and bounded rounds, so a failure
 * repeats.
 */
public final class WireFuzz {
    private WireFuzz() {
    }

    /**
     * Round {@code round}'s input: a copy of one of the seeds cut short (round % 3 == 0) or with one
     * byte changed (1), or up to {@code maxRandomBytes} random bytes (2).
     */
    public static ByteBuffer mutation(Random random, List<ByteBuffer> seeds, int round, int maxRandomBytes) {
        ByteBuffer seed = seeds.get(random.nextInt(seeds.size()));
        byte[] bytes = new byte[seed.remaining()];
        seed.duplicate().get(bytes);
        switch (round % 3) {
            case 0 -> bytes = Arrays.copyOf(bytes, random.nextInt(bytes.length + 1));
            case 1 -> bytes[random.nextInt(bytes.length)] ^= (byte) (1 + random.nextInt(255));
            default -> {
                bytes = new byte[random.nextInt(maxRandomBytes)];
                random.nextBytes(bytes);
            }
        }
        return ByteBuffer.wrap(bytes);
    }

    /**
     * Runs one decode: 1 if it decoded, 0 if it threw {@link MalformedMessageException}; any other
     * exception fails the test.
     */
    public static int decodes(Runnable decode) {
        try {
            decode.run();
            return 1;
        } catch (MalformedMessageException expected) {
            return 0;
        } catch (RuntimeException e) {
            fail("a decoder threw " + e + " instead of MalformedMessageException", e);
            return 0;
        }
    }
}

package io.rdmaplane.spark.serve;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.rdmaplane.rdma.codec.MalformedMessageException;
import java.nio.ByteBuffer;

/**
 * Coverage-guided fuzzing of the LOCATE decoders (request, and response for the block count the
 * input's first byte says): any bytes either decode or throw {@link MalformedMessageException}.
 * Stored inputs (LocateProtocolFuzzTestInputs) run in every build; JAZZER_FUZZ=1 fuzzes (CI's fuzz step).
 */
class LocateProtocolFuzzTest {
    @FuzzTest(maxDuration = "20s")
    void decodersThrowOnlyMalformedMessageException(byte[] input) {
        int expected = input.length == 0 ? 1 : input[0] & 0xFF;
        ByteBuffer rest = ByteBuffer.wrap(input, Math.min(1, input.length), Math.max(0, input.length - 1)).slice();
        try {
            LocateProtocol.decodeRequest(rest.duplicate());
        } catch (MalformedMessageException expectedError) {
            // the documented error
        }
        try {
            LocateProtocol.decodeResponse(rest.duplicate(), expected);
        } catch (MalformedMessageException expectedError) {
            // the documented error
        }
    }
}

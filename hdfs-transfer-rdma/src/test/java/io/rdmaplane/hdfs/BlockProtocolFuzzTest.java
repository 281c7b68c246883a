package io.rdmaplane.hdfs;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.rdmaplane.rdma.codec.MalformedMessageException;
import java.nio.ByteBuffer;

/**
 * Coverage-guided fuzzing of the HDFS block protocol decoders: any bytes either decode or throw
 * {@link MalformedMessageException}. Stored inputs (BlockProtocolFuzzTestInputs) run in every build;
 * JAZZER_FUZZ=1 fuzzes (CI's fuzz step).
 */
class BlockProtocolFuzzTest {
    @FuzzTest(maxDuration = "20s")
    void decodersThrowOnlyMalformedMessageException(byte[] input) {
        try {
            BlockProtocol.Request.decode(ByteBuffer.wrap(input));
        } catch (MalformedMessageException expected) {
            // the documented error
        }
        try {
            BlockProtocol.Response.decode(ByteBuffer.wrap(input));
        } catch (MalformedMessageException expected) {
            // the documented error
        }
    }
}

package io.rdmaplane.rdma.format;

import com.code_intelligence.jazzer.junit.FuzzTest;
import java.nio.ByteBuffer;

/**
 * Coverage-guided fuzzing of the Arrow block framing decoder: any segment either decodes or throws
 * {@link CorruptBlockException}, with and without the CRC check. Stored inputs
 * (ArrowBlockFuzzTestInputs) run in every build; JAZZER_FUZZ=1 fuzzes (CI's fuzz step).
 */
class ArrowBlockFuzzTest {
    @FuzzTest(maxDuration = "20s")
    void readThrowsOnlyCorruptBlockException(byte[] input) {
        for (boolean verify : new boolean[] {false, true}) {
            ByteBuffer segment = ByteBuffer.allocateDirect(input.length).put(input).flip();
            try {
                ArrowBlock.Block block = ArrowBlock.read(segment, verify);
                block.payload().forEach(ByteBuffer::remaining);
            } catch (CorruptBlockException expected) {
                // the documented error
            }
        }
    }
}

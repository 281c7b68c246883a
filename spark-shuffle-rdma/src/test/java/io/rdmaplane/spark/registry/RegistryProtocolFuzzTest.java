package io.rdmaplane.spark.registry;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.rdmaplane.rdma.codec.MalformedMessageException;
import java.nio.ByteBuffer;

/**
 * Coverage-guided fuzzing of the registry decoders: any bytes either decode or throw
 * {@link MalformedMessageException} (and a well-formed REFUSED its {@link RegistrationRefusedException}).
 * Stored inputs (RegistryProtocolFuzzTestInputs) run in every build; JAZZER_FUZZ=1 fuzzes (CI's fuzz step).
 */
class RegistryProtocolFuzzTest {
    @FuzzTest(maxDuration = "20s")
    void decodersThrowOnlyTheirDocumentedErrors(byte[] input) {
        try {
            RegistryProtocol.decodeRequest(ByteBuffer.wrap(input));
        } catch (MalformedMessageException expected) {
            // the documented error
        }
        try {
            RegistryProtocol.decodeLookupAnswer(ByteBuffer.wrap(input));
        } catch (MalformedMessageException expected) {
            // the documented error
        }
        try {
            RegistryProtocol.decodeRegistered(ByteBuffer.wrap(input));
        } catch (MalformedMessageException | RegistrationRefusedException expected) {
            // the documented errors
        }
    }
}

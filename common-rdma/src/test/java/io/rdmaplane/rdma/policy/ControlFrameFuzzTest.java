package io.rdmaplane.rdma.policy;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.rdmaplane.rdma.codec.MalformedMessageException;
import java.nio.ByteBuffer;

/**
 * Coverage-guided fuzzing of the control frame decoder and of the handshake messages a frame
 * carries: any bytes either decode or throw the codec's {@link MalformedMessageException}. Stored
 * inputs (ControlFrameFuzzTestInputs) run in every build; JAZZER_FUZZ=1 fuzzes (CI's fuzz step).
 */
class ControlFrameFuzzTest {
    @FuzzTest(maxDuration = "20s")
    void decodersThrowOnlyMalformedMessageException(byte[] input) {
        try {
            ControlFrame frame = ControlFrame.decode(ByteBuffer.wrap(input));
            switch (frame.type()) {
                case HELLO -> Handshake.Hello.decode(frame.payload().duplicate());
                case CHALLENGE -> Handshake.Challenge.decode(frame.payload().duplicate());
                case PROOF -> Handshake.Proof.decode(frame.payload().duplicate());
                case REJECT, ERROR -> frame.reason();
                default -> { }
            }
        } catch (MalformedMessageException expected) {
            // the documented error
        }
        // The payloads alone, as a handler sees them once the frame's CRC passed.
        for (int kind = 0; kind < 4; kind++) {
            try {
                ByteBuffer payload = ByteBuffer.wrap(input);
                switch (kind) {
                    case 0 -> Handshake.Hello.decode(payload);
                    case 1 -> Handshake.Challenge.decode(payload);
                    case 2 -> Handshake.Proof.decode(payload);
                    default -> new ControlFrame(ControlFrame.Type.ERROR, 1, payload).reason();
                }
            } catch (MalformedMessageException expected) {
                // the documented error
            }
        }
    }
}

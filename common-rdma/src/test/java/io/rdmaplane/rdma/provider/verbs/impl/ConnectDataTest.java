package io.rdmaplane.rdma.provider.verbs.impl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.ConnectRequest;
import io.rdmaplane.rdma.provider.Lane;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The lane rides ahead of the caller's connect data, which the acceptor gets back byte for byte. */
class ConnectDataTest {
    @Test
    void theLaneAndTheCallersDataSurviveRoCEsPadding() {
        byte[] proof = new byte[ConnectRequest.MAX_DATA];
        Arrays.fill(proof, (byte) 7);
        for (Lane lane : Lane.values()) {
            for (byte[] data : new byte[][] {new byte[0], {1, 2, 3}, proof}) {
                byte[] wire = ConnectData.encode(lane, data);
                assertTrue(wire.length <= 56, "fits RDMA-CM's private data: " + wire.length);
                ByteBuffer padded = ByteBuffer.allocate(56).put(wire).flip().limit(56); // RoCE pads with zeros
                ConnectData decoded = ConnectData.decode(padded);
                assertEquals(lane, decoded.lane());
                byte[] back = new byte[decoded.data().remaining()];
                decoded.data().duplicate().get(back);
                assertArrayEquals(data, back);
            }
        }
    }

    @Test
    void aRequestWithoutAKnownLaneOrWithALengthPastItsBytesIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> ConnectData.decode(ByteBuffer.allocate(1)));
        IllegalArgumentException lane = assertThrows(IllegalArgumentException.class,
                () -> ConnectData.decode(ByteBuffer.wrap(new byte[] {9, 0})));
        assertTrue(lane.getMessage().contains("unknown lane 9"), lane.getMessage());
        IllegalArgumentException length = assertThrows(IllegalArgumentException.class,
                () -> ConnectData.decode(ByteBuffer.wrap(new byte[] {1, 5, 0, 0})));
        assertTrue(length.getMessage().contains("5 bytes"), length.getMessage());
        assertThrows(IllegalArgumentException.class, () -> ConnectData.encode(Lane.BULK, new byte[ConnectRequest.MAX_DATA + 1]));
    }
}

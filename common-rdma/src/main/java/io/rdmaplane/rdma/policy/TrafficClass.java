package io.rdmaplane.rdma.policy;

import io.rdmaplane.rdma.provider.Lane;

/**
 * The two channels kept per peer: each its own connection (QP) with its own queue, in its own
 * provider {@link Lane} (thread, completion queue), so a control message never waits behind bulk READs.
 */
public enum TrafficClass {
    /** Small queue: requests, responses, probes. */
    CONTROL,
    /** Large queue: one-sided READs of block data. */
    DATA;

    /** The provider path this class's channels take. */
    public Lane lane() {
        return this == CONTROL ? Lane.CONTROL : Lane.BULK;
    }
}

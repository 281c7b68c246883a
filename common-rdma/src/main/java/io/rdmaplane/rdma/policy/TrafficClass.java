package io.rdmaplane.rdma.policy;

/**
 * The two channels kept per peer: each its own connection (QP) with its own queue, so a control
 * message never waits behind bulk READs.
 */
public enum TrafficClass {
    /** Small queue: requests, responses, probes. */
    CONTROL,
    /** Large queue: one-sided READs of block data. */
    DATA
}

package io.rdmaplane.rdma.provider;

/**
 * Which of a node's transport paths a channel's work takes. A {@link #CONTROL} channel never
 * shares a thread or a completion queue with {@link #BULK} channels, so its small messages are
 * never held up by megabytes of READ data being moved or completed. The connecting side picks
 * the lane; the accepting side puts its end of the channel in the same lane.
 */
public enum Lane {
    /** Small, latency-bound messages: requests, answers, probes. */
    CONTROL,
    /** READs and everything else: the default. */
    BULK
}

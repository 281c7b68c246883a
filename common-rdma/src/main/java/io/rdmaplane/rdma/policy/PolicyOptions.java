package io.rdmaplane.rdma.policy;

import java.time.Duration;
import java.util.Objects;

/**
 * Settings of the policy layer (read from configuration by {@code PolicyKeys.policyOptions}).
 *
 * @param controlQueueDepth       queue depth of each peer's control channel
 * @param dataQueueDepth          queue depth of each peer's data channel
 * @param detectionWindow         work outstanding with no progress this long makes a channel suspect
 * @param reconnectBase           first reconnect delay; it doubles per attempt up to {@code reconnectCap}
 * @param reconnectJitter         uniform random 0..jitter added to every reconnect delay
 * @param reconnectCap            largest reconnect delay before jitter
 * @param reconnectMaxAttempts    reconnect attempts before the channel fails and callers fall back
 * @param handshakeTimeout        longest wait for a server's READY (it registers its regions first)
 * @param requestTimeout          a control request unanswered this long is sent again (same id)
 * @param requestMaxAttempts      sends of one control request before it fails
 * @param maxBytesInFlightPerPeer READ bytes outstanding per peer
 * @param maxBytesInFlight        READ bytes outstanding in total
 * @param checksumSampleRate      fraction of blocks whose CRC32C is verified (always on retries and a peer's first block)
 * @param rampInitialWindow       operations a channel may have outstanding right after a (re)connect; grows by one per completion
 * @param secret                  shared secret for mutual authentication, or null for none
 * @param peerOverrides           detection and reconnect settings of particular peers ({@link #forPeer})
 */
public record PolicyOptions(int controlQueueDepth, int dataQueueDepth, Duration detectionWindow, Duration reconnectBase,
                            Duration reconnectJitter, Duration reconnectCap, int reconnectMaxAttempts,
                            Duration handshakeTimeout, Duration requestTimeout, int requestMaxAttempts,
                            long maxBytesInFlightPerPeer, long maxBytesInFlight, double checksumSampleRate,
                            int rampInitialWindow, byte[] secret, java.util.List<PeerOverride> peerOverrides) {
    public PolicyOptions {
        peerOverrides = java.util.List.copyOf(peerOverrides);
        Objects.requireNonNull(detectionWindow, "detectionWindow");
        Objects.requireNonNull(reconnectBase, "reconnectBase");
        Objects.requireNonNull(reconnectJitter, "reconnectJitter");
        Objects.requireNonNull(reconnectCap, "reconnectCap");
        Objects.requireNonNull(handshakeTimeout, "handshakeTimeout");
        Objects.requireNonNull(requestTimeout, "requestTimeout");
        positive("controlQueueDepth", controlQueueDepth);
        positive("dataQueueDepth", dataQueueDepth);
        positive("reconnectMaxAttempts", reconnectMaxAttempts);
        positive("requestMaxAttempts", requestMaxAttempts);
        positive("rampInitialWindow", rampInitialWindow);
        if (maxBytesInFlightPerPeer < 1 || maxBytesInFlight < 1) {
            throw new IllegalArgumentException("in-flight byte limits must be positive");
        }
        if (!(checksumSampleRate >= 0 && checksumSampleRate <= 1)) {
            throw new IllegalArgumentException("checksumSampleRate must be within 0..1, was " + checksumSampleRate);
        }
        secret = secret == null ? null : secret.clone();
    }

    private static void positive(String name, int value) {
        if (value < 1) {
            throw new IllegalArgumentException(name + " must be at least 1, was " + value);
        }
    }

    /** The documented defaults, no authentication. */
    public static PolicyOptions defaults() {
        return new PolicyOptions(16, 256, Duration.ofMillis(200), Duration.ofMillis(100), Duration.ofMillis(50),
                Duration.ofSeconds(5), 8, Duration.ofSeconds(10), Duration.ofSeconds(1), 5, 64L << 20, 256L << 20,
                1.0 / 16, 4, null, java.util.List.of());
    }

    public PolicyOptions withSecret(byte[] newSecret) {
        return new PolicyOptions(controlQueueDepth, dataQueueDepth, detectionWindow, reconnectBase, reconnectJitter,
                reconnectCap, reconnectMaxAttempts, handshakeTimeout, requestTimeout, requestMaxAttempts,
                maxBytesInFlightPerPeer, maxBytesInFlight, checksumSampleRate, rampInitialWindow, newSecret, peerOverrides);
    }

    public PolicyOptions withChecksumSampleRate(double rate) {
        return new PolicyOptions(controlQueueDepth, dataQueueDepth, detectionWindow, reconnectBase, reconnectJitter,
                reconnectCap, reconnectMaxAttempts, handshakeTimeout, requestTimeout, requestMaxAttempts,
                maxBytesInFlightPerPeer, maxBytesInFlight, rate, rampInitialWindow, secret, peerOverrides);
    }

    public PolicyOptions withReconnect(Duration base, Duration jitter, Duration cap, int maxAttempts) {
        return new PolicyOptions(controlQueueDepth, dataQueueDepth, detectionWindow, base, jitter, cap, maxAttempts,
                handshakeTimeout, requestTimeout, requestMaxAttempts, maxBytesInFlightPerPeer, maxBytesInFlight,
                checksumSampleRate, rampInitialWindow, secret, peerOverrides);
    }

    public PolicyOptions withBytesInFlight(long perPeer, long total) {
        return new PolicyOptions(controlQueueDepth, dataQueueDepth, detectionWindow, reconnectBase, reconnectJitter,
                reconnectCap, reconnectMaxAttempts, handshakeTimeout, requestTimeout, requestMaxAttempts, perPeer, total,
                checksumSampleRate, rampInitialWindow, secret, peerOverrides);
    }

    public PolicyOptions withTimeouts(Duration detection, Duration handshake, Duration request) {
        return new PolicyOptions(controlQueueDepth, dataQueueDepth, detection, reconnectBase, reconnectJitter,
                reconnectCap, reconnectMaxAttempts, handshake, request, requestMaxAttempts, maxBytesInFlightPerPeer,
                maxBytesInFlight, checksumSampleRate, rampInitialWindow, secret, peerOverrides);
    }

    public PolicyOptions withPeerOverrides(java.util.List<PeerOverride> overrides) {
        return new PolicyOptions(controlQueueDepth, dataQueueDepth, detectionWindow, reconnectBase, reconnectJitter,
                reconnectCap, reconnectMaxAttempts, handshakeTimeout, requestTimeout, requestMaxAttempts, maxBytesInFlightPerPeer,
                maxBytesInFlight, checksumSampleRate, rampInitialWindow, secret, overrides);
    }

    /**
     * These options as they apply to {@code peer}: the detection window and reconnect settings of the
     * override that matches it (host and port before host only), field by field; the others unchanged.
     */
    public PolicyOptions forPeer(java.net.InetSocketAddress peer) {
        PeerOverride host = null;
        PeerOverride hostAndPort = null;
        for (PeerOverride o : peerOverrides) {
            if (o.matches(peer)) {
                if (o.specific()) {
                    hostAndPort = hostAndPort == null ? o : hostAndPort;
                } else {
                    host = host == null ? o : host;
                }
            }
        }
        PolicyOptions out = this;
        for (PeerOverride o : new PeerOverride[] {host, hostAndPort}) { // the specific one last, so it wins
            if (o != null) {
                out = new PolicyOptions(controlQueueDepth, dataQueueDepth, or(o.detectionWindow(), out.detectionWindow),
                        or(o.reconnectBase(), out.reconnectBase), or(o.reconnectJitter(), out.reconnectJitter),
                        or(o.reconnectCap(), out.reconnectCap), or(o.reconnectMaxAttempts(), out.reconnectMaxAttempts),
                        handshakeTimeout, requestTimeout, requestMaxAttempts, maxBytesInFlightPerPeer, maxBytesInFlight,
                        checksumSampleRate, rampInitialWindow, secret, peerOverrides);
            }
        }
        return out;
    }

    /** The shortest detection window of any peer: how often the client must look. */
    Duration shortestDetectionWindow() {
        Duration shortest = detectionWindow;
        for (PeerOverride o : peerOverrides) {
            if (o.detectionWindow() != null && o.detectionWindow().compareTo(shortest) < 0) {
                shortest = o.detectionWindow();
            }
        }
        return shortest;
    }

    private static <T> T or(T value, T otherwise) {
        return value != null ? value : otherwise;
    }

    /** Delay before reconnect attempt {@code attempt} (1-based): base·2^(attempt−1), capped, plus jitter. */
    long backoffNanos(int attempt, double random01) {
        long base = reconnectBase.toNanos();
        long grown = attempt >= 31 ? Long.MAX_VALUE : base << Math.max(0, attempt - 1);
        long capped = grown < 0 || grown > reconnectCap.toNanos() ? reconnectCap.toNanos() : grown;
        return capped + (long) (random01 * reconnectJitter.toNanos());
    }
}

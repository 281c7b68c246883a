package io.rdmaplane.rdma.policy;

import java.time.Duration;
import java.util.Objects;

/**
 * What a {@link PolicyServer} keeps for its clients at most, so that no client, authenticated or
 * not, makes it hold unbounded connections or memory (read from configuration by
 * {@code PolicyKeys.serverLimits}).
 *
 * @param maxUnauthenticated           channels accepted and not yet authenticated, in total; more are refused
 * @param maxUnauthenticatedPerAddress of those, from one peer address
 * @param authTimeout                  a channel not authenticated this long after it was accepted is closed
 * @param answersKeptPerPeer           answers kept per peer process for re-sent requests (the oldest goes
 *                                     first); all of them go when the peer's last channel closes
 */
public record ServerLimits(int maxUnauthenticated, int maxUnauthenticatedPerAddress, Duration authTimeout,
                           int answersKeptPerPeer) {
    public ServerLimits {
        Objects.requireNonNull(authTimeout, "authTimeout");
        if (maxUnauthenticated < 1 || maxUnauthenticatedPerAddress < 1 || answersKeptPerPeer < 1) {
            throw new IllegalArgumentException("server limits must be at least 1, were " + maxUnauthenticated + ", "
                    + maxUnauthenticatedPerAddress + ", " + answersKeptPerPeer);
        }
        if (authTimeout.isNegative() || authTimeout.isZero()) {
            throw new IllegalArgumentException("authTimeout must be positive, was " + authTimeout);
        }
    }

    /** The documented defaults: 1024 unauthenticated channels, 128 per address, 5 s to authenticate, 1024 answers per peer. */
    public static ServerLimits defaults() {
        return new ServerLimits(1024, 128, Duration.ofSeconds(5), 1024);
    }

    public ServerLimits withUnauthenticated(int total, int perAddress) {
        return new ServerLimits(total, perAddress, authTimeout, answersKeptPerPeer);
    }

    public ServerLimits withAuthTimeout(Duration timeout) {
        return new ServerLimits(maxUnauthenticated, maxUnauthenticatedPerAddress, timeout, answersKeptPerPeer);
    }

    public ServerLimits withAnswersKeptPerPeer(int answers) {
        return new ServerLimits(maxUnauthenticated, maxUnauthenticatedPerAddress, authTimeout, answers);
    }
}

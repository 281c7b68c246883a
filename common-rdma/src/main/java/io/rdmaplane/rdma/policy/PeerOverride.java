package io.rdmaplane.rdma.policy;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Objects;

/**
 * Detection and reconnect settings for the peers at one host (and port), where they differ from the
 * process's: e.g. a longer detection window towards a host across a slower link, or fewer attempts
 * towards one known to be replaced rather than restarted. A null field keeps the process's value.
 *
 * @param host the peer's host, as configured (an address or a name)
 * @param port the peer's port, or -1 for every port of the host
 */
public record PeerOverride(String host, int port, Duration detectionWindow, Duration reconnectBase, Duration reconnectJitter,
                           Duration reconnectCap, Integer reconnectMaxAttempts) {
    public PeerOverride {
        Objects.requireNonNull(host, "host");
        if (port < -1 || port > 65535) {
            throw new IllegalArgumentException("port must be -1 (any) or 0..65535, was " + port);
        }
        if (reconnectMaxAttempts != null && reconnectMaxAttempts < 1) {
            throw new IllegalArgumentException("reconnectMaxAttempts must be at least 1, was " + reconnectMaxAttempts);
        }
    }

    /** Whether {@code peer} is at this override's host (by name or address) and port. */
    boolean matches(InetSocketAddress peer) {
        if (port >= 0 && port != peer.getPort()) {
            return false;
        }
        if (host.equalsIgnoreCase(peer.getHostString())) {
            return true;
        }
        InetAddress literal = literal(host);
        return peer.getAddress() != null && literal != null && literal.equals(peer.getAddress());
    }

    /** The address {@code host} spells when it is an IP literal (parsed without any lookup), else null. */
    private static InetAddress literal(String host) {
        if (!host.contains(":") && !host.matches("[0-9]{1,3}(\\.[0-9]{1,3}){3}")) {
            return null; // a name: compared as written
        }
        try {
            return InetAddress.getByName(host);
        } catch (UnknownHostException e) {
            return null;
        }
    }

    /** A host and port override is more specific than a host one. */
    boolean specific() {
        return port >= 0;
    }
}

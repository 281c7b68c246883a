package io.rdmaplane.rdma.config;

import io.rdmaplane.rdma.policy.PeerOverride;
import io.rdmaplane.rdma.policy.PolicyOptions;
import io.rdmaplane.rdma.policy.ServerLimits;
import java.time.Duration;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/** The policy-layer settings every product shares, under the product's own prefix. */
public final class PolicyKeys {
    public static final ConfigKey<Integer> CONTROL_QUEUE_DEPTH = ConfigKey.intKey("control.queueDepth", 16, 1, 1024,
            "Queue depth of each peer's control channel (requests, probes).");
    public static final ConfigKey<Integer> DATA_QUEUE_DEPTH = ConfigKey.intKey("data.queueDepth", 256, 1, 16384,
            "Queue depth of each peer's data channel (READs).");
    public static final ConfigKey<Duration> DETECTION_WINDOW = ConfigKey.durationKey("detectionWindow", "200ms", "10ms", "1m",
            "Work outstanding with no progress this long makes a channel suspect: it is probed, then rebuilt.");
    public static final ConfigKey<Duration> RECONNECT_BASE = ConfigKey.durationKey("reconnect.base", "100ms", "1ms", "1m",
            "First reconnect delay; it doubles per attempt up to reconnect.cap.");
    public static final ConfigKey<Duration> RECONNECT_JITTER = ConfigKey.durationKey("reconnect.jitter", "50ms", "0ms", "1m",
            "Uniform random 0..jitter added to every reconnect delay, so peers do not reconnect in lockstep.");
    public static final ConfigKey<Duration> RECONNECT_CAP = ConfigKey.durationKey("reconnect.cap", "5s", "1ms", "10m",
            "Largest reconnect delay before jitter.");
    public static final ConfigKey<Integer> RECONNECT_MAX_ATTEMPTS = ConfigKey.intKey("reconnect.maxAttempts", 8, 1, 1000,
            "Reconnect attempts before a peer is given up and callers fall back.");
    public static final ConfigKey<Duration> HANDSHAKE_TIMEOUT = ConfigKey.durationKey("handshakeTimeout", "10s", "100ms", "10m",
            "Longest wait for a server's READY (it registers its memory first) before the attempt counts as failed.");
    public static final ConfigKey<Duration> REQUEST_TIMEOUT = ConfigKey.durationKey("request.timeout", "1s", "10ms", "10m",
            "A control request unanswered this long is sent again with the same id (answered once).");
    public static final ConfigKey<Integer> REQUEST_MAX_ATTEMPTS = ConfigKey.intKey("request.maxAttempts", 5, 1, 100,
            "Sends of one control request before it fails and the caller falls back.");
    public static final ConfigKey<Long> MAX_BYTES_IN_FLIGHT_PER_PEER = ConfigKey.byteSizeKey("maxBytesInFlightPerPeer", "64m",
            "64k", "1t", "READ bytes outstanding per peer (one READ may always go alone).");
    public static final ConfigKey<Long> MAX_BYTES_IN_FLIGHT = ConfigKey.byteSizeKey("maxBytesInFlight", "256m", "64k", "1t",
            "READ bytes outstanding in total.");
    public static final ConfigKey<Double> CHECKSUM_SAMPLE_RATE = ConfigKey.doubleKey("checksum.sampleRate", 0.0625, 0, 1,
            "Fraction of blocks whose CRC32C is verified after READ (always on a retry and a peer's first block; 1 = all).");
    public static final ConfigKey<Integer> RAMP_INITIAL_WINDOW = ConfigKey.intKey("rampUp.initialWindow", 4, 1, 16384,
            "Operations a channel may have outstanding right after a reconnect; grows by one per completion.");

    /** The settings a {@link #PEER_OVERRIDES} entry may set, by the name an entry gives them. */
    static final List<ConfigKey<?>> PER_PEER = List.of(DETECTION_WINDOW, RECONNECT_BASE, RECONNECT_JITTER, RECONNECT_CAP,
            RECONNECT_MAX_ATTEMPTS);
    public static final ConfigKey<String> PEER_OVERRIDES = ConfigKey.stringKey("peer.overrides", "",
            Pattern.compile("[^;]*\\S=\\S[^;]*(;[^;]*\\S=\\S[^;]*)*;?"),
            "entries `HOST[:PORT] KEY=VALUE ...` separated by `;`",
            "Detection window and reconnect settings of particular peers, where they differ from this process's: entries"
                    + " separated by `;`, each a host (address or name; IPv6 in brackets), optionally `:port`, then one or more"
                    + " `KEY=VALUE` of detectionWindow, reconnect.base, reconnect.jitter, reconnect.cap, reconnect.maxAttempts"
                    + " (each within that key's bounds), e.g. `10.0.0.7 detectionWindow=1s reconnect.maxAttempts=3; 10.0.0.8:7000"
                    + " reconnect.base=50ms`. A host:port entry wins over a host entry.");

    public static final ConfigKey<Integer> SERVER_MAX_UNAUTHENTICATED = ConfigKey.intKey("server.maxUnauthenticated", 1024, 1,
            1 << 20, "Channels a server holds that are not yet authenticated, in total; more are refused at once.");
    public static final ConfigKey<Integer> SERVER_MAX_UNAUTHENTICATED_PER_ADDRESS = ConfigKey.intKey(
            "server.maxUnauthenticatedPerAddress", 128, 1, 1 << 20,
            "Of those, channels from one peer address; more from it are refused at once.");
    public static final ConfigKey<Duration> SERVER_AUTH_TIMEOUT = ConfigKey.durationKey("server.authTimeout", "5s", "100ms",
            "10m", "A server closes a channel that has not authenticated this long after it was accepted.");
    public static final ConfigKey<Integer> SERVER_ANSWERS_KEPT_PER_PEER = ConfigKey.intKey("server.answersKeptPerPeer", 1024, 1,
            1 << 20, "Answers a server keeps per peer process, so a re-sent request is answered, not run again; "
                    + "the oldest goes first, and all go when the peer's last channel closes.");

    public static final List<ConfigKey<?>> ALL = List.of(CONTROL_QUEUE_DEPTH, DATA_QUEUE_DEPTH, DETECTION_WINDOW,
            RECONNECT_BASE, RECONNECT_JITTER, RECONNECT_CAP, RECONNECT_MAX_ATTEMPTS, HANDSHAKE_TIMEOUT, REQUEST_TIMEOUT,
            REQUEST_MAX_ATTEMPTS, MAX_BYTES_IN_FLIGHT_PER_PEER, MAX_BYTES_IN_FLIGHT, CHECKSUM_SAMPLE_RATE, RAMP_INITIAL_WINDOW,
            PEER_OVERRIDES, SERVER_MAX_UNAUTHENTICATED, SERVER_MAX_UNAUTHENTICATED_PER_ADDRESS, SERVER_AUTH_TIMEOUT,
            SERVER_ANSWERS_KEPT_PER_PEER);

    /** Transport and policy keys: what every product's registry holds before its own keys. */
    public static final List<ConfigKey<?>> SHARED = Stream.concat(TransportKeys.ALL.stream(), ALL.stream()).toList();

    private PolicyKeys() {
    }

    /** What a policy server keeps for its clients at most, from {@code conf}. */
    public static ServerLimits serverLimits(Conf conf) {
        return new ServerLimits(conf.get(SERVER_MAX_UNAUTHENTICATED), conf.get(SERVER_MAX_UNAUTHENTICATED_PER_ADDRESS),
                conf.get(SERVER_AUTH_TIMEOUT), conf.get(SERVER_ANSWERS_KEPT_PER_PEER));
    }

    /**
     * Policy settings from {@code conf}, with the product's authentication secret (null for none).
     */
    public static PolicyOptions policyOptions(Conf conf, byte[] secret) {
        return new PolicyOptions(conf.get(CONTROL_QUEUE_DEPTH), conf.get(DATA_QUEUE_DEPTH), conf.get(DETECTION_WINDOW),
                conf.get(RECONNECT_BASE), conf.get(RECONNECT_JITTER), conf.get(RECONNECT_CAP), conf.get(RECONNECT_MAX_ATTEMPTS),
                conf.get(HANDSHAKE_TIMEOUT), conf.get(REQUEST_TIMEOUT), conf.get(REQUEST_MAX_ATTEMPTS),
                conf.get(MAX_BYTES_IN_FLIGHT_PER_PEER), conf.get(MAX_BYTES_IN_FLIGHT), conf.get(CHECKSUM_SAMPLE_RATE),
                conf.get(RAMP_INITIAL_WINDOW), secret, peerOverrides(conf));
    }

    /**
     * The entries of {@link #PEER_OVERRIDES}.
     *
     * @throws ConfigException naming the key, the entry and what is wrong with it
     */
    public static List<PeerOverride> peerOverrides(Conf conf) {
        String name = conf.name(PEER_OVERRIDES);
        List<PeerOverride> out = new java.util.ArrayList<>();
        for (String entry : conf.get(PEER_OVERRIDES).split(";")) {
            String[] words = entry.strip().split("\\s+");
            if (words.length == 1 && words[0].isEmpty()) {
                continue;
            }
            String where = name + " entry '" + entry.strip() + "'";
            if (words.length < 2 || words[0].contains("=")) {
                throw new ConfigException(where + ": expected a host (optionally :port) followed by KEY=VALUE settings");
            }
            String host = words[0];
            String portText = null;
            if (host.startsWith("[") && host.contains("]")) { // [IPv6] or [IPv6]:port
                int close = host.indexOf(']');
                portText = host.length() > close + 1 && host.charAt(close + 1) == ':' ? host.substring(close + 2) : null;
                host = host.substring(1, close);
            } else if (host.indexOf(':') > 0 && host.indexOf(':') == host.lastIndexOf(':')) { // host:port
                portText = host.substring(host.indexOf(':') + 1);
                host = host.substring(0, host.indexOf(':'));
            }
            int port = -1;
            if (portText != null) {
                if (!portText.matches("[0-9]{1,5}") || Integer.parseInt(portText) > 65535) {
                    throw new ConfigException(where + ": port '" + portText + "' is not 0..65535");
                }
                port = Integer.parseInt(portText);
            }
            java.util.Map<String, Object> values = new java.util.HashMap<>();
            for (int i = 1; i < words.length; i++) {
                int eq = words[i].indexOf('=');
                String suffix = eq < 0 ? words[i] : words[i].substring(0, eq);
                ConfigKey<?> key = PER_PEER.stream().filter(k -> k.suffix().equals(suffix)).findFirst().orElseThrow(() ->
                        new ConfigException(where + ": '" + suffix + "' is not a per-peer setting (one of "
                                + PER_PEER.stream().map(ConfigKey::suffix).toList() + ")"));
                if (eq < 0) {
                    throw new ConfigException(where + ": '" + suffix + "' has no =VALUE");
                }
                if (values.put(suffix, key.parse(where + " " + suffix, words[i].substring(eq + 1))) != null) {
                    throw new ConfigException(where + ": '" + suffix + "' is set twice");
                }
            }
            out.add(new PeerOverride(host, port, (Duration) values.get(DETECTION_WINDOW.suffix()),
                    (Duration) values.get(RECONNECT_BASE.suffix()), (Duration) values.get(RECONNECT_JITTER.suffix()),
                    (Duration) values.get(RECONNECT_CAP.suffix()), (Integer) values.get(RECONNECT_MAX_ATTEMPTS.suffix())));
        }
        return List.copyOf(out);
    }
}

package io.rdmaplane.spark;

import io.rdmaplane.rdma.policy.PolicyClient;
import io.rdmaplane.rdma.policy.TrafficClass;
import java.net.InetSocketAddress;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * The executor's last {@value #KEPT} reconnect attempts (of its shuffle {@link PolicyClient}), each with the wall-clock
 * time it started and the delay the backoff planned for it (base, growth and jitter), for the executor report
 * ({@link #REPORT_KEY}): what an operator, or the fault ring, reads to see a reconnect storm across processes. The
 * time is the epoch's, in microseconds, so processes on one machine (or with synchronised clocks) compare.
 */
final class ReconnectLog implements PolicyClient.Listener {
    /** The executor report's key: {@code EPOCH_MICROS:ATTEMPT:PLANNED_DELAY_MICROS:PEER:CLASS}, space-separated, oldest first. */
    static final String REPORT_KEY = "rdma.reconnect.attempts";
    static final int KEPT = 64;

    private final ArrayDeque<String> attempts = new ArrayDeque<>();
    /** The delay planned for each pending attempt, by peer, class and attempt number. */
    private final Map<String, Long> planned = new ConcurrentHashMap<>();

    @Override
    public void reconnectScheduled(InetSocketAddress peer, TrafficClass trafficClass, int attempt, long delayNanos) {
        planned.put(key(peer, trafficClass, attempt), delayNanos);
    }

    @Override
    public void reconnectAttempted(InetSocketAddress peer, TrafficClass trafficClass, int attempt) {
        Instant now = Instant.now();
        long micros = TimeUnit.SECONDS.toMicros(now.getEpochSecond()) + now.getNano() / 1_000;
        Long delay = planned.remove(key(peer, trafficClass, attempt));
        String entry = String.format(Locale.ROOT, "%d:%d:%d:%s:%s", micros, attempt, delay == null ? -1 : delay / 1_000,
                peer.getHostString() + "/" + peer.getPort(), trafficClass.name().toLowerCase(Locale.ROOT));
        synchronized (attempts) {
            if (attempts.size() == KEPT) {
                attempts.removeFirst();
            }
            attempts.addLast(entry);
        }
    }

    /** The report's value: the kept attempts, oldest first, or "" when there were none. */
    String text() {
        synchronized (attempts) {
            return attempts.stream().collect(Collectors.joining(" "));
        }
    }

    private static String key(InetSocketAddress peer, TrafficClass trafficClass, int attempt) {
        return peer + "/" + trafficClass + "/" + attempt;
    }
}

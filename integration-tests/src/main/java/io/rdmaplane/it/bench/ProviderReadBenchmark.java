package io.rdmaplane.it.bench;

import io.rdmaplane.it.Args;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.rdma.provider.VerbsOptions;
import java.net.InetSocketAddress;

/**
 * READ bandwidth or latency of any provider between two addresses, printed in perftest's units
 * so a script can set it beside {@code ib_read_bw} / {@code ib_read_lat} run on the same
 * devices (the Soft-RoCE VM does: integration-tests/vm). One measurement per run.
 *
 * <p>Arguments: {@code mode=bw|lat provider=auto server=ADDR client=ADDR size=65536|64
 * outstanding=64 seconds=5 rounds=1000 completion=event|poll} (completion: how verbs nodes wait
 * for completions, {@link VerbsOptions#busyPollCompletions()}).
 */
public final class ProviderReadBenchmark {
    public static void main(String[] args) throws Exception {
        String completion = Args.get(args, "completion", "event");
        if (!completion.equals("event") && !completion.equals("poll")) {
            throw new IllegalArgumentException("completion must be event or poll, was " + completion);
        }
        boolean busyPoll = completion.equals("poll");
        NodeOptions server = options(Args.get(args, "server", "127.0.0.1"), busyPoll);
        NodeOptions client = options(Args.get(args, "client", "127.0.0.1"), busyPoll);
        TransportProvider provider = Providers.select(Args.get(args, "provider", "auto"), server);
        String mode = Args.get(args, "mode", "bw");
        if (mode.equals("bw")) {
            int size = Integer.parseInt(Args.get(args, "size", "65536"));
            int outstanding = Integer.parseInt(Args.get(args, "outstanding", "64"));
            long nanos = (long) (Double.parseDouble(Args.get(args, "seconds", "5")) * 1e9);
            double mibs = ReadLoad.throughput(provider, server, client, size, nanos, outstanding);
            // perftest's "MB/sec" is MiB/s (2^20 bytes), as here.
            System.out.printf("%s READ bw: size %d outstanding %d: %.2f MB/sec%n", provider.name(), size, outstanding, mibs);
        } else if (mode.equals("lat")) {
            int size = Integer.parseInt(Args.get(args, "size", "64"));
            int rounds = Integer.parseInt(Args.get(args, "rounds", "1000"));
            long[] p = ReadLoad.latency(provider, server, client, size, rounds);
            System.out.printf("%s READ lat: size %d rounds %d: typical %.2f usec p99 %.2f usec%n", provider.name(), size,
                    rounds, p[0] / 1e3, p[1] / 1e3);
        } else {
            throw new IllegalArgumentException("mode must be bw or lat, was " + mode);
        }
    }

    static NodeOptions options(String host, boolean busyPoll) {
        NodeOptions loopback = NodeOptions.loopback();
        return new NodeOptions(new InetSocketAddress(host, 0), loopback.maxMessageSize(),
                java.time.Duration.ofSeconds(30), loopback.acceptQueueDepth(),
                VerbsOptions.defaults().withBusyPollCompletions(busyPoll));
    }
}

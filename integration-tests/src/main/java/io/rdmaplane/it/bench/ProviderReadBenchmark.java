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
 * outstanding=64 seconds=5 rounds=1000 completion=event|poll|hybrid spinMicros=50 hybridSpinMicros=100 waited=false}
 * (completion: how verbs nodes wait for completions, {@link VerbsOptions#completion()}; spinMicros: how
 * long an event-driven completion thread polls before it sleeps, {@link VerbsOptions#completionSpinMicros()};
 * hybridSpinMicros: how long a thread waiting for a READ polls, {@link VerbsOptions#hybridSpinMicros()}).
 * READs complete in callbacks (which hybrid leaves to the completion thread), except the latency mode's
 * with {@code waited=true}: each READ is posted and waited for ({@code get}) on one thread, as
 * {@code ib_read_lat} posts and polls. The latency mode also prints the CPU both nodes' threads (and
 * the waiting thread) spent per READ, the mean, and the busiest threads of the process.
 */
public final class ProviderReadBenchmark {
    public static void main(String[] args) throws Exception {
        VerbsOptions.Completion completion = completion(Args.get(args, "completion", "event"));
        NodeOptions server = options(Args.get(args, "server", "127.0.0.1"), completion, args);
        NodeOptions client = options(Args.get(args, "client", "127.0.0.1"), completion, args);
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
            ReadLoad.LatencyRun run = Boolean.parseBoolean(Args.get(args, "waited", "false"))
                    ? ReadLoad.waitedLatencyRun(provider, server, client, size, Math.max(100, rounds / 10), rounds)
                    : ReadLoad.latencyRun(provider, server, client, size, rounds);
            long[] p = run.percentiles();
            System.out.printf("%s READ lat: size %d rounds %d: typical %.2f usec p99 %.2f usec, cpu %.2f usec per READ%n",
                    provider.name(), size, rounds, p[0] / 1e3, p[1] / 1e3, run.cpuNanos() / 1e3 / rounds);
            System.out.printf("%s READ lat: mean %.2f usec; busiest threads, cpu usec per READ: %s%n", provider.name(),
                    run.wallNanos() / 1e3 / rounds, run.busiest());
        } else {
            throw new IllegalArgumentException("mode must be bw or lat, was " + mode);
        }
    }

    /** A {@code completion=} argument: event, poll or hybrid. */
    static VerbsOptions.Completion completion(String name) {
        for (VerbsOptions.Completion mode : VerbsOptions.Completion.values()) {
            if (mode.name().equalsIgnoreCase(name)) {
                return mode;
            }
        }
        throw new IllegalArgumentException("completion must be event, poll or hybrid, was " + name);
    }

    /** A node at {@code host} with {@code completion} and the {@code spinMicros=} and {@code hybridSpinMicros=} of {@code args}. */
    static NodeOptions options(String host, VerbsOptions.Completion completion, String[] args) {
        NodeOptions loopback = NodeOptions.loopback();
        int spin = Integer.parseInt(Args.get(args, "spinMicros", String.valueOf(VerbsOptions.DEFAULT_COMPLETION_SPIN_MICROS)));
        int hybridSpin = Integer.parseInt(Args.get(args, "hybridSpinMicros", String.valueOf(VerbsOptions.DEFAULT_HYBRID_SPIN_MICROS)));
        return new NodeOptions(new InetSocketAddress(host, 0), loopback.maxMessageSize(),
                java.time.Duration.ofSeconds(30), loopback.acceptQueueDepth(),
                VerbsOptions.defaults().withCompletion(completion).withCompletionSpinMicros(spin).withHybridSpinMicros(hybridSpin));
    }
}

package io.rdmaplane.rdma.provider.verbs;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * One host's process of {@link VerbsClusterTest}, started by it inside a host's network namespace
 * of the VM's cluster (run.sh --hosts N). Its stdout is its report, one line per fact.
 * <ul>
 * <li>{@code serve BIND SEED SIZE}: a verbs node on BIND exposes SIZE bytes of {@code Random(SEED)}
 * (REMOTE_READ), prints {@code READY <port> <address> <rkey>} and serves until stdin closes.
 * <li>{@code read BIND PEER PORT ADDRESS RKEY SIZE SEED}: a verbs node on BIND connects to PEER:PORT,
 * READs the region, compares every byte with {@code Random(SEED)}, prints {@code READ-OK <bytes>}
 * and exits 0; or prints {@code READ-WRONG <first differing offset>} and exits 3.
 * </ul>
 * Any failure (e.g. "no RDMA device serves" the bind address) prints {@code ERROR <message>} and exits 2.
 */
public final class ClusterPeer {
    private static final long WAIT_SECONDS = 120;
    /**
     * Operations (the first handshake included) get a minute: a cold JVM under TCG on a busy host
     * answered its first connection after more than the conformance suite's 10 s.
     */
    private static final Duration OPERATION_TIMEOUT = Duration.ofSeconds(60);

    private ClusterPeer() {
    }

    public static void main(String[] args) {
        try {
            switch (args[0]) {
                case "serve" -> serve(args[1], Long.parseLong(args[2]), Integer.parseInt(args[3]));
                case "read" -> System.exit(read(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]),
                        Integer.parseInt(args[5]), Integer.parseInt(args[6]), Long.parseLong(args[7])));
                default -> throw new IllegalArgumentException("unknown mode '" + args[0] + "' (serve or read)");
            }
        } catch (Throwable e) {
            System.out.println("ERROR " + e);
            System.out.flush();
            System.exit(2);
        }
        System.exit(0);
    }

    private static NodeOptions options(String bind) {
        return new NodeOptions(new InetSocketAddress(bind, 0), 64 << 10, OPERATION_TIMEOUT, 256);
    }

    static byte[] content(long seed, int size) {
        byte[] content = new byte[size];
        new Random(seed).nextBytes(content);
        return content;
    }

    private static void serve(String bind, long seed, int size) throws Exception {
        try (Node node = VerbsProvider.INSTANCE.createNode(options(bind))) {
            node.listen(channel -> new ChannelHandler() { });
            MemoryRegion exposed = node.register(ByteBuffer.allocateDirect(size).put(content(seed, size)).flip());
            System.out.println("READY " + node.localAddress().getPort() + " " + exposed.address() + " " + exposed.rkey());
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            while (in.readLine() != null) {
                // serves until the test closes stdin
            }
        }
    }

    private static int read(String bind, String peer, int port, long address, int rkey, int size, long seed)
            throws Exception {
        try (Node node = VerbsProvider.INSTANCE.createNode(options(bind))) {
            MemoryRegion landing = node.register(ByteBuffer.allocateDirect(size), EnumSet.of(Access.LOCAL_WRITE));
            Channel channel = node.connect(new InetSocketAddress(peer, port), 8, new ChannelHandler() { })
                    .get(WAIT_SECONDS, TimeUnit.SECONDS);
            channel.read(address, rkey, size, landing, 0).get(WAIT_SECONDS, TimeUnit.SECONDS);
            byte[] got = new byte[size];
            landing.buffer().get(got);
            int wrong = Arrays.mismatch(got, content(seed, size));
            System.out.println(wrong < 0 ? "READ-OK " + size : "READ-WRONG " + wrong);
            System.out.flush();
            return wrong < 0 ? 0 : 3;
        }
    }
}

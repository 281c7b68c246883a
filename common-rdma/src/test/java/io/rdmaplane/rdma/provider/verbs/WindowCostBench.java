package io.rdmaplane.rdma.provider.verbs;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.PeerKey;
import io.rdmaplane.rdma.provider.TransportException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * What a key bound per peer costs on verbs, and what it prevents, in the Soft-RoCE VM:
 * <ol>
 * <li>the cross-peer READ at the provider level: a second channel of another process READs with the
 * key handed to the first (the MR's own rkey of a plainly registered region, then a type 2 window
 * bound to the first channel's QP);
 * <li>the price: allocate + bind + deallocate one window per grant against ibv_reg_mr + ibv_dereg_mr
 * of the same region per grant (the other way to give each peer its own key), measured in the same
 * run. Prints {@code mw-bind: bind+inval/reg_mr = X.XXx (goal <= 1.00)}.
 * </ol>
 * Usage (in the VM): {@code java -cp ... WindowCostBench [iterations] [regionBytes]}.
 */
public final class WindowCostBench {
    private static final int WAIT = 30;

    private WindowCostBench() {
    }

    public static void main(String[] args) throws Exception {
        int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        int bytes = args.length > 1 ? Integer.parseInt(args[1]) : 1 << 20;
        String a = System.getenv("RDMA_VM_ADDR_A");
        String b = System.getenv("RDMA_VM_ADDR_B");
        if (a == null || b == null) {
            System.err.println("mw-bind: SKIPPED: needs the Soft-RoCE VM (RDMA_VM_ADDR_A/B)");
            System.exit(2);
        }
        BlockingQueue<Channel> accepted = new LinkedBlockingQueue<>();
        try (Node server = node(a); Node client = node(b)) {
            System.out.println("mw-bind: server keys are bound " + server.keyBinding());
            server.listen(channel -> {
                accepted.add(channel);
                return new ChannelHandler() { };
            });
            InetSocketAddress at = server.localAddress();
            Channel first = client.connect(at, 16, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
            Channel firstAtServer = accepted.poll(WAIT, TimeUnit.SECONDS);
            MemoryRegion landing = client.register(ByteBuffer.allocateDirect(bytes), Set.of(Access.LOCAL_WRITE));

            MemoryRegion plain = server.register(seeded(bytes));
            Channel other = client.connect(at, 16, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
            System.out.println("mw-bind: cross-peer READ with the MR's own rkey (per region): "
                    + verdict(other, plain, plain.rkey(), landing));

            MemoryRegion windowed = server.registerForGrants(seeded(bytes));
            PeerKey key = server.peerKey(windowed, windowed.address(), windowed.length());
            key.bindTo(firstAtServer).get(WAIT, TimeUnit.SECONDS);
            System.out.println("mw-bind: READ with a window bound to the peer's QP, by that peer: "
                    + verdict(first, windowed, key.rkey(), landing));
            Channel intruder = client.connect(at, 16, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
            System.out.println("mw-bind: cross-peer READ with that window's rkey: " + verdict(intruder, windowed, key.rkey(), landing));
            Channel intruder2 = client.connect(at, 16, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
            System.out.println("mw-bind: cross-peer READ with the windowed MR's own rkey: "
                    + verdict(intruder2, windowed, windowed.rkey(), landing));
            key.revoke();
            if (!key.boundToPeer()) {
                System.out.println("mw-bind: no memory windows on this device: nothing to measure");
                return;
            }

            revokeAfterDisconnect(server, client, accepted, windowed);
            ByteBuffer memory = seeded(bytes);
            for (int round = 0; round < 2; round++) { // round 0 warms up
                int n = round == 0 ? Math.max(10, iterations / 10) : iterations;
                long t0 = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    PeerKey k = server.peerKey(windowed, windowed.address(), windowed.length());
                    k.bindTo(firstAtServer).get(WAIT, TimeUnit.SECONDS);
                    k.revoke();
                }
                long mw = System.nanoTime() - t0;
                long t1 = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    server.register(memory).deregister();
                }
                long mr = System.nanoTime() - t1;
                if (round == 1) {
                    System.out.printf(Locale.ROOT, "mw-bind: %d grants of %d B: alloc+bind+dealloc %.1f us each, reg_mr+dereg_mr %.1f us each%n",
                            n, bytes, mw / 1e3 / n, mr / 1e3 / n);
                    System.out.printf(Locale.ROOT, "mw-bind: bind+inval/reg_mr = %.2fx (goal <= 1.00)%n", (double) mw / mr);
                }
            }
        }
    }

    /** How long revoking a window takes once its QP's peer disconnected (a peer's session ending). */
    static void revokeAfterDisconnect(Node server, Node client, BlockingQueue<Channel> accepted, MemoryRegion windowed)
            throws Exception {
        Channel mine = client.connect(server.localAddress(), 16, new ChannelHandler() { }).get(WAIT, TimeUnit.SECONDS);
        Channel atServer = accepted.poll(WAIT, TimeUnit.SECONDS);
        PeerKey key = server.peerKey(windowed, windowed.address(), windowed.length());
        key.bindTo(atServer).get(WAIT, TimeUnit.SECONDS);
        mine.close();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT);
        while (atServer.isOpen() && System.nanoTime() < deadline) {
            Thread.sleep(10); // a diagnostic, not a test
        }
        long t0 = System.nanoTime();
        Thread revoker = new Thread(key::revoke, "revoker");
        revoker.setDaemon(true);
        revoker.start();
        revoker.join(TimeUnit.SECONDS.toMillis(WAIT));
        System.out.printf(Locale.ROOT, "mw-bind: revoke after the peer disconnected (server channel open: %s): %s%n", atServer.isOpen(),
                revoker.isAlive() ? "STUCK for " + WAIT + " s" : String.format(Locale.ROOT, "%.1f ms", (System.nanoTime() - t0) / 1e6));
        if (revoker.isAlive()) {
            for (StackTraceElement e : revoker.getStackTrace()) {
                System.out.println("mw-bind:     at " + e);
            }
        }
    }

    private static Node node(String address) throws TransportException {
        return VerbsProvider.INSTANCE.createNode(new NodeOptions(new InetSocketAddress(address, 0), 64 << 10, Duration.ofSeconds(10), 256));
    }

    private static ByteBuffer seeded(int bytes) {
        ByteBuffer memory = ByteBuffer.allocateDirect(bytes);
        for (int i = 0; i < bytes; i++) {
            memory.put(i, (byte) (i * 31 + 7));
        }
        return memory;
    }

    /** READs the whole region through {@code channel} with {@code rkey}: what came back, or how it was refused. */
    private static String verdict(Channel channel, MemoryRegion region, int rkey, MemoryRegion landing) throws InterruptedException {
        landing.buffer().put(new byte[landing.length()]);
        try {
            channel.read(region.address(), rkey, Math.min(region.length(), landing.length()), landing, 0).get(WAIT, TimeUnit.SECONDS);
            boolean same = landing.buffer().equals(region.buffer());
            return same ? "DATA READ (every byte of the region)" : "completed, but the bytes differ";
        } catch (ExecutionException e) {
            boolean zero = landing.buffer().equals(ByteBuffer.allocate(landing.length()));
            return "refused (" + e.getCause() + ")" + (zero ? ", no byte arrived" : ", SOME BYTES ARRIVED");
        } catch (java.util.concurrent.TimeoutException e) {
            return "no completion within " + WAIT + " s";
        }
    }
}

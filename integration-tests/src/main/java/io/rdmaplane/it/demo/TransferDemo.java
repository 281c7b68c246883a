package io.rdmaplane.it.demo;

import io.rdmaplane.rdma.provider.Access;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Providers;
import io.rdmaplane.rdma.provider.TransportProvider;
import io.rdmaplane.it.Args;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

/**
 * The main job until the Spark shuffle lands: one node exposes a block of memory, another asks
 * for its descriptor with a two-sided message and pulls it with one-sided READs of at most
 * 8 MiB, then checks every byte against the source's CRC32C. Prints what moved and how fast.
 *
 * <p>Arguments (optional): {@code mib=256 outstanding=8 provider=auto}.
 */
public final class TransferDemo {
    private static final int CHUNK = 8 << 20;

    public static void main(String[] args) throws Exception {
        int mib = Integer.parseInt(Args.get(args, "mib", "256"));
        int outstanding = Integer.parseInt(Args.get(args, "outstanding", "8"));
        TransportProvider provider = Providers.select(Args.get(args, "provider", "auto"));
        long size = (long) mib << 20;
        if (mib < 8 || mib % 8 != 0 || size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("mib must be a multiple of 8 between 8 and 2040, was " + mib);
        }
        int chunks = (int) (size / CHUNK);

        try (Node mapper = provider.createNode(NodeOptions.loopback());
             Node reducer = provider.createNode(NodeOptions.loopback())) {
            ByteBuffer data = ByteBuffer.allocateDirect((int) size);
            SplittableRandom random = new SplittableRandom(2026);
            while (data.hasRemaining()) {
                data.putLong(random.nextLong());
            }
            MemoryRegion exposed = mapper.register(data.flip()); // remote read only
            long[] sourceCrcs = new long[chunks];
            for (int i = 0; i < chunks; i++) {
                sourceCrcs[i] = crc(exposed.buffer().slice(i * CHUNK, CHUNK));
            }
            // The mapper answers a descriptor request with (address, rkey, length): the only
            // application code on its side. The READs that follow never reach it.
            mapper.listen(channel -> new ChannelHandler() {
                @Override
                public void onMessage(Channel ch, ByteBuffer request) {
                    ch.send(ByteBuffer.allocate(16).putLong(exposed.address()).putInt(exposed.rkey())
                            .putInt(exposed.length()).flip());
                }
            });

            CompletableFuture<ByteBuffer> descriptor = new CompletableFuture<>();
            Channel channel = reducer.connect(mapper.localAddress(), outstanding + 1, new ChannelHandler() {
                @Override
                public void onMessage(Channel ch, ByteBuffer message) {
                    descriptor.complete(ByteBuffer.allocate(16).put(message).flip());
                }
            }).get(30, TimeUnit.SECONDS);
            long start = System.nanoTime();
            channel.send(ByteBuffer.wrap("DESCRIBE".getBytes()));
            ByteBuffer d = descriptor.get(30, TimeUnit.SECONDS);
            long address = d.getLong();
            int rkey = d.getInt();
            int length = d.getInt();

            MemoryRegion landing = reducer.register(ByteBuffer.allocateDirect(outstanding * CHUNK), EnumSet.of(Access.LOCAL_WRITE));
            int verified = 0;
            List<CompletableFuture<Void>> window = new ArrayList<>();
            for (int next = 0, done = 0; done < chunks; ) {
                while (next < chunks && next - done < outstanding) {
                    int slot = next % outstanding;
                    window.add(channel.read(address + (long) next * CHUNK, rkey, CHUNK, landing, slot * CHUNK));
                    next++;
                }
                window.remove(0).get(30, TimeUnit.SECONDS); // the oldest READ: its slot is reused next
                if (crc(landing.buffer().slice((done % outstanding) * CHUNK, CHUNK)) != sourceCrcs[done]) {
                    throw new IllegalStateException("block " + done + " arrived corrupted");
                }
                verified++;
                done++;
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("provider %s: moved %d MiB from the node at %s to another in %d READs of %d MiB (%d outstanding)%n",
                    provider.name(), length >> 20, mapper.localAddress(), chunks, CHUNK >> 20, outstanding);
            System.out.printf("%.3f s, %.1f MiB/s; %d/%d blocks verified with CRC32C, 0 lost, 0 corrupted%n",
                    seconds, (length >> 20) / seconds, verified, chunks);
            System.out.printf("registrations: mapper %d, reducer %d (memory is registered once, not per READ)%n",
                    mapper.registrationCount(), reducer.registrationCount());
        }
    }

    private static long crc(ByteBuffer bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes);
        return crc.getValue();
    }
}

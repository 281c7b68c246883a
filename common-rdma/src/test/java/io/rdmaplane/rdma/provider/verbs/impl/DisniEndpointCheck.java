package io.rdmaplane.rdma.provider.verbs.impl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.ibm.disni.RdmaActiveEndpoint;
import com.ibm.disni.RdmaActiveEndpointGroup;
import com.ibm.disni.RdmaServerEndpoint;
import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaCmId;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * DiSNI's own endpoint layer on the project's native library: its CM processor thread
 * (_getCmEvent with timeouts), its CQ processor thread (NativeAffinity, _reqNotifyCQ,
 * _getCqEvent with timeouts, _ackCqEvent, _pollCQ), accept/connect, an RDMA READ and close.
 * Loaded through {@code DisniRuntime.loader()}, called from {@code DisniRealVerbsTest}.
 */
public final class DisniEndpointCheck {

    static final int LENGTH = 256 * 1024;

    private DisniEndpointCheck() {
    }

    /** An endpoint that queues its completions. */
    static final class Endpoint extends RdmaActiveEndpoint {
        final LinkedBlockingQueue<IbvWC> completions = new LinkedBlockingQueue<>();

        Endpoint(RdmaActiveEndpointGroup<Endpoint> group, RdmaCmId id, boolean serverSide) throws IOException {
            super(group, id, serverSide);
        }

        @Override
        public void dispatchCqEvent(IbvWC wc) {
            completions.add(wc.clone());
        }
    }

    public static String run(String serverAddress) throws Exception {
        int port = 20000 + ThreadLocalRandom.current().nextInt(20000);
        InetSocketAddress address = new InetSocketAddress(serverAddress, port);
        // blocking CQ processing (completion channel), 1 s CM/CQ timeouts
        RdmaActiveEndpointGroup<Endpoint> group = new RdmaActiveEndpointGroup<>(1000, false, 16, 2, 64);
        group.init((id, serverSide) -> new Endpoint(group, id, serverSide));
        try {
            RdmaServerEndpoint<Endpoint> server = group.createServerEndpoint();
            server.bind(address, 8);
            CompletableFuture<Endpoint> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return server.accept();
                } catch (IOException e) {
                    throw new IllegalStateException(e);
                }
            });
            Endpoint client = group.createEndpoint();
            client.connect(address, 60_000);
            Endpoint serverSide = accepted.get(DisniReadCheck.TIMEOUT_MS, TimeUnit.MILLISECONDS);
            assertNotNull(serverSide);
            assertTrue(client.isConnected());

            byte[] pattern = new byte[LENGTH];
            ThreadLocalRandom.current().nextBytes(pattern);
            ByteBuffer source = ByteBuffer.allocateDirect(LENGTH);
            source.put(pattern).clear();
            IbvMr sourceMr = serverSide.registerMemory(source).execute().free().getMr();
            ByteBuffer sink = ByteBuffer.allocateDirect(LENGTH);
            IbvMr sinkMr = client.registerMemory(sink).execute().free().getMr();

            IbvSendWR read = DisniReadCheck.read(7L, sourceMr.getAddr(), sourceMr.getRkey(),
                    DisniReadCheck.sge(sinkMr, 0, LENGTH));
            client.postSend(List.of(read)).execute().free();
            IbvWC wc = client.completions.poll(DisniReadCheck.TIMEOUT_MS, TimeUnit.MILLISECONDS);
            assertNotNull(wc, "the CQ processor delivered the READ's completion");
            assertEquals(7L, wc.getWr_id());
            assertEquals(IbvWC.IbvWcStatus.IBV_WC_SUCCESS.ordinal(), wc.getStatus());
            byte[] copy = new byte[LENGTH];
            sink.get(copy);
            assertArrayEquals(pattern, copy);

            String report = "endpoint " + client.getSrcAddr() + " -> " + client.getDstAddr() + " read " + LENGTH
                    + " bytes through DiSNI's CQ processor";
            client.deregisterMemory(sinkMr);
            serverSide.deregisterMemory(sourceMr);
            client.close();
            serverSide.close();
            server.close();
            return report;
        } finally {
            group.close();
        }
    }
}

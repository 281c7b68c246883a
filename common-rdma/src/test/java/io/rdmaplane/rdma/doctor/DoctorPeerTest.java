package io.rdmaplane.rdma.doctor;

import static io.rdmaplane.rdma.doctor.DoctorChecksTest.run;
import static io.rdmaplane.rdma.doctor.DoctorChecksTest.wellFormed;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.doctor.DoctorChecksTest.Run;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.ChannelHandler;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.tcp.TcpProvider;
import io.rdmaplane.rdma.testing.Polling;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code --serve} and {@code --peer} over loopback with the tcp provider, and how the peer check sets the exit code. */
@Timeout(120)
class DoctorPeerTest {
    @TempDir
    Path root;

    /** A host without RDMA device whose providers are the build's (tcp). */
    private Doctor.Environment noDevice() {
        return new FakeHost(root).env();
    }

    @Test
    void serveAndPeerOverLoopbackPassAndKeepTheNoDeviceCode() throws Exception {
        ByteArrayOutputStream served = new ByteArrayOutputStream();
        PrintStream serveOut = new PrintStream(served, true, StandardCharsets.UTF_8);
        CountDownLatch stop = new CountDownLatch(1);
        AtomicInteger serveCode = new AtomicInteger(-1);
        Doctor serving = new Doctor(noDevice());
        Doctor.Options serveOptions = Doctor.parse(new String[] {"--serve", "--bind", "127.0.0.1", "--port", "0"});
        Thread server = new Thread(() -> serveCode.set(serving.serve(serveOptions, serveOut, stop)), "doctor-serve-test");
        server.start();
        int port = awaitPort(served);
        try {
            Run run = run(noDevice(), "--peer", "127.0.0.1:" + port);
            wellFormed(run);
            assertTrue(run.line("OK     peer       connected to 127.0.0.1:" + port + " via tcp in ").endsWith(" ms"), run.out());
            assertTrue(run.line("OK     peer       descriptor in ").contains("65536 B at 0x"), run.out());
            assertTrue(run.line("OK     peer       descriptor in ").endsWith("served by tcp"), run.out());
            assertTrue(run.line("OK     peer       READ 65536 B: first in ").contains(" ms, median of the next 9 ")
                    && run.line("OK     peer       READ 65536 B: first in ").contains("every byte verified, CRC32C 0x"), run.out());
            // No RDMA device: the tcp peer check passes, and the code still says "no RDMA device".
            assertEquals(Doctor.EXIT_NO_DEVICE, run.code());
            assertEquals("RESULT exit 1     no RDMA device: tcp provider will be used; peer check over tcp passed",
                    run.line("RESULT"));
        } finally {
            stop.countDown();
            server.join(10_000);
        }
        assertEquals(Doctor.EXIT_OK, serveCode.get());
        String out = served.toString(StandardCharsets.UTF_8);
        assertTrue(out.contains("SERVE  peer       descriptor sent to /127.0.0.1:"), out);
        assertTrue(out.contains("SERVE  peer       stopped after 1 descriptor(s)"), out);
    }

    @Test
    void aHealthyDeviceAndAPassingPeerCheckExitZero() throws Exception {
        FakeHost host = new FakeHost(root).rxe("rxe0", "veth0", "4: ACTIVE", "5: LinkUp", "up", DoctorChecksTest.GID_A);
        host.providers.add(FakeHost.verbs(null)); // stands in for verbs, moves bytes like tcp
        try (PeerCheck.Server server = Doctor.startServer(TcpProvider.INSTANCE, new InetSocketAddress("127.0.0.1", 0))) {
            Run run = run(host.env(), "--peer", "127.0.0.1:" + server.address().getPort());
            wellFormed(run);
            assertEquals(Doctor.EXIT_OK, run.code());
            assertTrue(run.has("OK     peer       connected to 127.0.0.1:" + server.address().getPort() + " via verbs"), run.out());
            assertEquals("RESULT exit 0     RDMA is usable; peer check passed", run.line("RESULT"));
            assertEquals(1, server.served());
        }
    }

    @Test
    void nobodyListeningFailsWithCodeThreeAndSaysToStartTheServer() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort(); // free once closed
        }
        Run run = run(noDevice(), "--peer", "127.0.0.1:" + port, "--timeout", "5s");
        wellFormed(run);
        assertEquals(Doctor.EXIT_PEER, run.code());
        assertTrue(run.line("FAIL   peer       cannot connect to 127.0.0.1:" + port + " via tcp: ").length() > 0, run.out());
        assertTrue(run.line("FIX    peer").contains("run `Doctor --serve --port " + port + "` on 127.0.0.1"), run.out());
        assertTrue(run.line("RESULT").startsWith("RESULT exit 3     peer check failed: cannot connect"), run.out());
    }

    @Test
    void aListenerThatIsNotADoctorTimesOut() throws Exception {
        try (Node silent = TcpProvider.INSTANCE.createNode(NodeOptions.loopback())) {
            silent.listen(ch -> new ChannelHandler() {
            });
            Run run = run(noDevice(), "--peer", "127.0.0.1:" + silent.localAddress().getPort(), "--timeout", "500ms");
            wellFormed(run);
            assertEquals(Doctor.EXIT_PEER, run.code());
            assertTrue(run.line("FAIL   peer       no descriptor from").contains("no answer within the timeout"), run.out());
            assertTrue(run.line("FIX    peer").contains("is not `Doctor --serve`"), run.out());
        }
    }

    @Test
    void wrongBytesAreCaught() throws Exception {
        // A server whose descriptor promises another pattern than its memory holds.
        try (Node node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback())) {
            ByteBuffer memory = ByteBuffer.allocateDirect(PeerCheck.REGION_BYTES);
            PeerCheck.fill(memory, PeerCheck.REGION_BYTES, 42);
            memory.put(1000, (byte) (memory.get(1000) ^ 1));
            MemoryRegion region = node.register(memory);
            PeerCheck.Descriptor lie = new PeerCheck.Descriptor(region.address(), region.rkey(), PeerCheck.REGION_BYTES, 42,
                    0x1234, "tcp");
            node.listen(ch -> new ChannelHandler() {
                @Override
                public void onMessage(Channel c, ByteBuffer m) {
                    c.send(lie.encode());
                }
            });
            Run run = run(noDevice(), "--peer", "127.0.0.1:" + node.localAddress().getPort());
            wellFormed(run);
            assertEquals(Doctor.EXIT_PEER, run.code());
            assertTrue(run.line("FAIL   peer       READ 1/10 of 65536 B").contains("first difference at offset 1000"), run.out());
            assertTrue(run.line("FIX    peer").contains("data corrupted"), run.out());
        }
    }

    @Test
    void aRevokedRkeyIsReported() throws Exception {
        try (Node node = TcpProvider.INSTANCE.createNode(NodeOptions.loopback())) {
            ByteBuffer memory = ByteBuffer.allocateDirect(PeerCheck.REGION_BYTES);
            MemoryRegion region = node.register(memory);
            PeerCheck.Descriptor d = new PeerCheck.Descriptor(region.address(), region.rkey(), PeerCheck.REGION_BYTES, 1,
                    0, "tcp");
            region.deregister();
            node.listen(ch -> new ChannelHandler() {
                @Override
                public void onMessage(Channel c, ByteBuffer m) {
                    c.send(d.encode());
                }
            });
            Run run = run(noDevice(), "--peer", "127.0.0.1:" + node.localAddress().getPort());
            wellFormed(run);
            assertEquals(Doctor.EXIT_PEER, run.code());
            assertTrue(run.line("FAIL   peer       READ 1/10 of 65536 B").contains("REMOTE_ACCESS_ERROR"), run.out());
            assertTrue(run.line("FIX    peer").contains("refused the rkey"), run.out());
        }
    }

    @Test
    void serveOnABusyPortFailsWithCodeThree() throws Exception {
        try (ServerSocket busy = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            int code = Doctor.run(new String[] {"--serve", "--bind", "127.0.0.1", "--port", Integer.toString(busy.getLocalPort())},
                    noDevice(), new PrintStream(out, true, StandardCharsets.UTF_8), System.err);
            String text = out.toString(StandardCharsets.UTF_8);
            assertEquals(Doctor.EXIT_PEER, code, text);
            assertTrue(text.startsWith("FAIL   peer       cannot serve on "), text);
            assertTrue(text.contains("FIX    peer       pick a free --port"), text);
        }
    }

    @Test
    void serveForStopsByItself() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int code = Doctor.run(new String[] {"--serve", "--bind", "127.0.0.1", "--port", "0", "--serve-for", "200ms"},
                noDevice(), new PrintStream(out, true, StandardCharsets.UTF_8), System.err);
        String text = out.toString(StandardCharsets.UTF_8);
        assertEquals(Doctor.EXIT_OK, code, text);
        assertTrue(text.contains("via tcp: region 65536 B") && text.contains("serving for 200 ms"), text);
        assertTrue(text.contains("stopped after 0 descriptor(s)"), text);
    }

    private static final Pattern LISTENING = Pattern.compile("listening on [^ ]+:(\\d+) via ");

    private static int awaitPort(ByteArrayOutputStream served) {
        return Polling.waitFor(() -> {
            Matcher m = LISTENING.matcher(served.toString(StandardCharsets.UTF_8));
            return m.find() ? Integer.parseInt(m.group(1)) : null;
        }, Duration.ofSeconds(30), () -> "the server printing its port: " + served.toString(StandardCharsets.UTF_8));
    }
}

package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.Node;
import io.rdmaplane.rdma.provider.PeerKey;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.tcp.TcpNode;
import io.rdmaplane.rdma.testing.TestNodes;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

class ReadGrantsTest {
    @Test
    void aGrantAllowsOnlyItsRkeyAndOnlyUntilItExpires() {
        ReadGrants grants = new ReadGrants();
        long now = System.currentTimeMillis();
        grants.grant(7);
        grants.grant(8, now + 60_000);
        grants.grant(9, now - 1);
        assertTrue(grants.allows(7), "for as long as the region lives");
        assertTrue(grants.allows(8), "before its expiry");
        assertFalse(grants.allows(9), "after its expiry");
        assertFalse(grants.allows(10), "never granted");
        assertEquals(2, grants.size(), "the expired grant was dropped when it was refused");
    }

    @Test
    void aShorterGrantNeverCutsALongerOneShort() {
        ReadGrants grants = new ReadGrants();
        long now = System.currentTimeMillis();
        grants.grant(5, now + 60_000);
        grants.grant(5, now - 1); // a second, already expired token for the same region
        assertTrue(grants.allows(5));
        grants.grant(6, now - 1);
        grants.grant(6, now + 60_000); // a fresh token renews the grant
        assertTrue(grants.allows(6));
    }

    @Test
    void aGrantMadeWithItsRegionGoesWhenTheRegionIsDeregisteredHoweverOftenItWasGranted() throws Exception {
        try (TcpNode node = TestNodes.tcp()) {
            MemoryRegion kept = node.register(ByteBuffer.allocateDirect(64));
            MemoryRegion dropped = node.register(ByteBuffer.allocateDirect(64));
            ReadGrants grants = new ReadGrants();
            long until = System.currentTimeMillis() + 60_000;
            for (int i = 0; i < 1000; i++) { // e.g. one grant per block token handed out for it
                grants.grant(dropped, until + i);
            }
            grants.grant(kept, until);
            assertEquals(2, grants.size());
            dropped.deregister();
            assertEquals(1, grants.size(), "the deregistered region's grant is dropped at once, not when a READ asks");
            assertFalse(grants.allows(dropped.rkey()));
            assertTrue(grants.allows(kept.rkey()));

            MemoryRegion late = node.register(ByteBuffer.allocateDirect(64));
            late.deregister();
            grants.grant(late, until); // handed out as it was being deregistered
            assertEquals(1, grants.size(), "a region already deregistered leaves no grant behind");
        }
    }

    /** A key bound per peer, as a memory window is: bound once to a channel, revoked by hand. */
    private static class WindowLikeKey implements PeerKey {
        final int rkey;
        final CompletableFuture<Void> bind = new CompletableFuture<>();
        volatile Channel boundTo;
        volatile boolean revoked;

        WindowLikeKey(int rkey) {
            this.rkey = rkey;
        }

        @Override
        public int rkey() {
            return rkey;
        }

        @Override
        public boolean boundToPeer() {
            return true;
        }

        @Override
        public CompletableFuture<Void> bindTo(Channel channel) {
            boundTo = channel;
            return bind;
        }

        @Override
        public void revoke() {
            revoked = true;
        }
    }

    @Test
    void keysBoundPerPeerAreBoundToItsDataChannelAnsweredOnlyOnceBoundAndRevokedWhenThatChannelCloses() throws Exception {
        List<WindowLikeKey> made = new ArrayList<>();
        Node windows = proxy(Node.class, (method, args) -> {
            if (!method.getName().equals("peerKey")) {
                throw new UnsupportedOperationException(method.getName());
            }
            WindowLikeKey key = new WindowLikeKey(0x100 + made.size());
            made.add(key);
            return key;
        });
        Channel data = proxy(Channel.class, (method, args) -> {
            throw new UnsupportedOperationException(method.getName());
        });
        try (TcpNode node = TestNodes.tcp()) {
            MemoryRegion early = node.register(ByteBuffer.allocateDirect(64));
            MemoryRegion late = node.register(ByteBuffer.allocateDirect(64));
            ReadGrants grants = new ReadGrants(windows);
            int earlyKey = grants.grant(early, Long.MAX_VALUE);
            assertEquals(0x100, earlyKey, "the key handed out is the peer's own, not the region's");
            assertEquals(earlyKey, grants.grant(early, Long.MAX_VALUE), "granted again: the same key");
            assertTrue(ReadGrants.takeUnsettled().isDone(), "no data channel yet: nothing to wait for");
            assertNull(made.get(0).boundTo);

            CompletableFuture<Void> attached = grants.attach(data);
            assertSame(data, made.get(0).boundTo, "bound when the peer's data channel is authenticated");
            assertFalse(attached.isDone(), "READY waits for the bind");
            made.get(0).bind.complete(null);
            assertTrue(attached.isDone());

            int lateKey = grants.grant(late, Long.MAX_VALUE);
            assertSame(data, made.get(1).boundTo, "a grant with the data channel there binds at once");
            CompletableFuture<Void> answer = ReadGrants.takeUnsettled();
            assertFalse(answer.isDone(), "the answer handing out the key waits for its bind");
            made.get(1).bind.complete(null);
            assertTrue(answer.isDone());
            assertTrue(grants.allows(lateKey));

            late.deregister();
            assertTrue(made.get(1).revoked, "a region's deregistration revokes its keys");
            grants.detach(data);
            assertTrue(made.get(0).revoked, "the data channel closed: the keys bound to it are revoked");
            assertEquals(0, grants.size());
            assertFalse(grants.allows(earlyKey));
        }
    }

    private interface Answer {
        Object answer(Method method, Object[] args) throws Exception;
    }

    /** A key that outlives its channel (as on tcp): binding it to a closed channel fails, as TcpKey's does. */
    private static final class RebindableKey extends WindowLikeKey {
        RebindableKey(int rkey) {
            super(rkey);
        }

        @Override
        public boolean rebindable() {
            return true;
        }

        @Override
        public CompletableFuture<Void> bindTo(Channel channel) {
            if (!channel.isOpen()) {
                return CompletableFuture.failedFuture(new TransportException(Status.FLUSHED, channel + " is closed"));
            }
            boundTo = channel;
            return CompletableFuture.completedFuture(null);
        }
    }

    /** A data channel whose {@code isOpen} says what {@code open} holds; nothing else is asked of it. */
    private static Channel channel(AtomicBoolean open) {
        return proxy(Channel.class, (method, args) -> {
            if (method.getName().equals("isOpen")) {
                return open.get();
            }
            throw new UnsupportedOperationException(method.getName());
        });
    }

    @Test
    void aGrantMadeAsTheDataChannelClosesIsAnsweredAndItsKeyGoesToTheNextChannelOrIsRevoked() throws Exception {
        List<PeerKey> made = new ArrayList<>();
        AtomicBoolean rebindable = new AtomicBoolean(true);
        Node keys = proxy(Node.class, (method, args) -> {
            if (!method.getName().equals("peerKey")) {
                throw new UnsupportedOperationException(method.getName());
            }
            PeerKey key = rebindable.get() ? new RebindableKey(0x200 + made.size()) : new WindowLikeKey(0x200 + made.size());
            if (key instanceof WindowLikeKey window) {
                window.bind.completeExceptionally(new TransportException(Status.FLUSHED, "the QP is gone"));
            }
            made.add(key);
            return key;
        });
        AtomicBoolean firstOpen = new AtomicBoolean(true);
        Channel first = channel(firstOpen);
        Channel second = channel(new AtomicBoolean(true));
        try (TcpNode node = TestNodes.tcp()) {
            MemoryRegion region = node.register(ByteBuffer.allocateDirect(64));
            MemoryRegion other = node.register(ByteBuffer.allocateDirect(64));
            ReadGrants grants = new ReadGrants(keys);
            assertTrue(grants.attach(first).isDone());
            firstOpen.set(false); // the data channel closed (a refused READ closes it); its detach has not run yet

            grants.grant(region, Long.MAX_VALUE);
            CompletableFuture<Void> answer = ReadGrants.takeUnsettled();
            assertTrue(answer.isDone() && !answer.isCompletedExceptionally(), "the grant is answered: " + answer);
            rebindable.set(false); // a window: it goes with its QP
            grants.grant(other, Long.MAX_VALUE);
            answer = ReadGrants.takeUnsettled();
            assertTrue(answer.isDone() && !answer.isCompletedExceptionally(), "the window's grant is answered: " + answer);

            grants.detach(first);
            assertTrue(grants.attach(second).isDone());
            RebindableKey onTcp = (RebindableKey) made.get(0);
            assertSame(second, onTcp.boundTo, "the key that outlives its channel READs on the next one");
            assertFalse(onTcp.revoked);
            assertTrue(((WindowLikeKey) made.get(1)).revoked, "the window went with its channel: its READs are refused");
        }
    }

    private static <T> T proxy(Class<T> type, Answer answer) {
        return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (self, method, args) -> {
            if (method.getDeclaringClass() == Object.class) {
                return switch (method.getName()) {
                    case "hashCode" -> System.identityHashCode(self);
                    case "equals" -> self == args[0];
                    default -> type.getSimpleName() + " proxy";
                };
            }
            return answer.answer(method, args);
        }));
    }
}


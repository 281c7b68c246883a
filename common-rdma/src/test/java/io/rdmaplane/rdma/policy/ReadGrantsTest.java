package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.MemoryRegion;
import io.rdmaplane.rdma.provider.tcp.TcpNode;
import io.rdmaplane.rdma.testing.TestNodes;
import java.nio.ByteBuffer;
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
}

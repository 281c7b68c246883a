package io.rdmaplane.rdma.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
}

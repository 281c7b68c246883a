package io.rdmaplane.rdma.provider.verbs.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.ibm.disni.verbs.IbvMr;
import io.rdmaplane.rdma.provider.Access;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The ibv_reg_mr flags of every access set. Never On-Demand Paging: on rxe (Linux 7.2) an ODP
 * region registers, but at RoCE MTU 1024 three quarters of READ data came back wrong with a
 * successful completion (issue 12's table). Never remote write. Exposed memory, file mappings
 * included, is REMOTE_READ alone: a read-only shared file mapping refuses LOCAL_WRITE pinning on
 * every kernel measured (6.1, 6.12, 7.2).
 */
class VerbsAccessFlagsTest {
    @Test
    void everyAccessSetMapsToItsOwnFlagsAndNeverToOnDemandPaging() {
        for (Set<Access> access : Set.of(EnumSet.noneOf(Access.class), EnumSet.of(Access.LOCAL_WRITE),
                EnumSet.of(Access.REMOTE_READ), EnumSet.allOf(Access.class))) {
            int expected = (access.contains(Access.LOCAL_WRITE) ? IbvMr.IBV_ACCESS_LOCAL_WRITE : 0)
                    | (access.contains(Access.REMOTE_READ) ? IbvMr.IBV_ACCESS_REMOTE_READ : 0);
            int flags = Verbs.accessFlags(access);
            assertEquals(expected, flags, () -> "flags of " + access);
            assertEquals(0, flags & IbvMr.IBV_ACCESS_ON_DEMAND, () -> access + " asks for On-Demand Paging");
        }
        assertEquals(IbvMr.IBV_ACCESS_REMOTE_READ, Verbs.accessFlags(Set.of(Access.REMOTE_READ)),
                "exposed memory (file mappings) is registered REMOTE_READ only");
    }

    /**
     * Memory registered for grants (Node.registerForGrants) is READ through type 2 memory windows, one
     * per peer, each bound with REMOTE_READ alone (mw.c). The MR itself needs MW_BIND to carry windows,
     * and has no remote access of its own, so that its rkey READs nothing and only a window's key does.
     * MW_BIND pins for write in the kernel (ib_access_writable), so read-only file mappings are never
     * registered this way (VerbsNode falls back to REMOTE_READ for them).
     */
    @Test
    void memoryForGrantsCarriesWindowsAndNoRemoteAccessOfItsOwn() {
        int flags = Verbs.windowedAccessFlags();
        assertEquals(IbvMr.IBV_ACCESS_MW_BIND, flags);
        assertEquals(0, flags & (IbvMr.IBV_ACCESS_REMOTE_READ | IbvMr.IBV_ACCESS_REMOTE_WRITE | IbvMr.IBV_ACCESS_REMOTE_ATOMIC),
                "the region's own rkey must READ nothing remotely");
        assertEquals(0, flags & (IbvMr.IBV_ACCESS_ON_DEMAND | IbvMr.IBV_ACCESS_LOCAL_WRITE));
    }

    /** Every registration of the provider goes through Verbs.register, which refuses ODP before any verbs call. */
    @Test
    void theRegistrationPathRefusesOnDemandPaging() {
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                () -> Verbs.register(null, 4096, 4096, IbvMr.IBV_ACCESS_REMOTE_READ | IbvMr.IBV_ACCESS_ON_DEMAND));
        assertTrue(refused.getMessage().contains("On-Demand Paging"), refused.getMessage());
    }

    /** ...and nothing else in the provider calls DiSNI's regMr (which passes any flag to ibv_reg_mr). */
    @Test
    void onlyVerbsRegisterCallsRegMr() throws java.io.IOException {
        java.nio.file.Path impl = java.nio.file.Path.of("src/main/java/io/rdmaplane/rdma/provider/verbs/impl");
        java.util.List<String> callers;
        try (var files = java.nio.file.Files.list(impl)) {
            callers = files.filter(f -> {
                try {
                    return java.nio.file.Files.readString(f).contains(".regMr(");
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }).map(f -> f.getFileName().toString()).toList();
        }
        assertEquals(java.util.List.of("Verbs.java"), callers, "calls of IbvPd.regMr outside Verbs.register");
    }
}

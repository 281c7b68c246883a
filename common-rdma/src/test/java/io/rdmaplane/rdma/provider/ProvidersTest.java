package io.rdmaplane.rdma.provider;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.faulty.FaultyProvider;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** Providers are found through their META-INF/services files, in order of preference; auto never picks a test-only one. */
class ProvidersTest {
    @Test
    void theBuildsProvidersAreFoundInOrderOfPreference() {
        assertEquals(List.of("verbs", "tcp"), Providers.all().stream().map(TransportProvider::name).collect(Collectors.toList()));
        assertEquals(List.of("auto", "verbs", "tcp"), Providers.names());
    }

    @Test
    void theTestOnlyProviderIsSelectedOnlyByName() throws Exception {
        assertTrue(Providers.isKnown(" FAULTY "), "common-rdma's test jar registers it");
        assertTrue(Providers.select("faulty") instanceof FaultyProvider);
        assertNotEquals("faulty", Providers.select(Providers.AUTO).name());
        assertTrue(Providers.all().stream().noneMatch(p -> p.name().equals("faulty")));
    }

    @Test
    void anUnknownNameIsRejectedWithTheChoices() {
        assertTrue(Providers.isKnown("auto"));
        assertFalse(Providers.isKnown("ucx"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Providers.select("ucx"));
        assertEquals("unknown transport provider 'ucx'; allowed: [auto, verbs, tcp]", e.getMessage());
    }
}

package io.rdmaplane.rdma.provider.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.provider.NodeOptions;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.testing.Skip;
import org.junit.jupiter.api.Test;

/** Host-side checks of the verbs provider: they run everywhere, RDMA device or not. */
class VerbsProviderTest {

    @Test
    void isNamedVerbs() {
        assertEquals("verbs", VerbsProvider.INSTANCE.name());
    }

    @Test
    void withoutAnRdmaDeviceItIsUnavailableAndSaysHowToGetOne() {
        Skip.unless(RdmaDevices.ports().isEmpty(), "this machine has RDMA devices: " + RdmaDevices.ports());
        assertFalse(VerbsProvider.INSTANCE.isAvailable());
        Throwable cause = VerbsProvider.INSTANCE.unavailabilityCause();
        assertNotNull(cause);
        String message = cause.getMessage();
        assertTrue(message.startsWith("verbs provider unavailable: "), message);
        assertTrue(message.contains("rdma link add"), "names Soft-RoCE's way to get a device: " + message);
        assertTrue(message.contains("RDMA driver of the NIC"), "names the NIC driver: " + message);
        assertTrue(message.contains("no RDMA device"), message);
    }

    @Test
    void theProbeRunsOnceAndCreatingANodeWhileUnavailableNamesTheCause() {
        Skip.unless(!VerbsProvider.INSTANCE.isAvailable(), "verbs is available here");
        assertSame(VerbsProvider.INSTANCE.unavailabilityCause(), VerbsProvider.INSTANCE.unavailabilityCause());
        TransportException e = assertThrows(TransportException.class,
                () -> VerbsProvider.INSTANCE.createNode(NodeOptions.loopback()));
        assertEquals(Status.UNAVAILABLE, e.status());
        assertTrue(e.getMessage().contains(VerbsProvider.INSTANCE.unavailabilityCause().getMessage()), e.getMessage());
        assertSame(VerbsProvider.INSTANCE.unavailabilityCause(), e.getCause());
    }
}

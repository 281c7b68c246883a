package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvMr;
import com.ibm.disni.verbs.SVCRegMr;
import io.rdmaplane.rdma.provider.Node;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * What a verbs registration does to memory, seen from inside DisniRuntime's loader (called through
 * {@code DisniTestSupport.call}): the refusal of On-Demand Paging on the provider's path, a test-only
 * ODP registration around it (to show what rxe READs from such a region), and the huge-page advice
 * a private file mapping gets before it is registered.
 */
public final class RegistrationChecks {
    private static final List<IbvMr> ON_DEMAND = new ArrayList<>();

    private RegistrationChecks() {
    }

    /** The device's RC On-Demand Paging capability bits, -1 when it has no ODP. */
    public static int onDemandSupport(Node node) throws Exception {
        return ((VerbsNode) node).context().queryOdpSupport();
    }

    /**
     * Test only, around the provider: registers the buffer with IBV_ACCESS_ON_DEMAND on the node's
     * protection domain through DiSNI directly. Returns {address, rkey}; deregister with {@link #deregisterOnDemand}.
     */
    public static long[] registerOnDemand(Node node, ByteBuffer buffer, boolean localWrite) throws Exception {
        int flags = IbvMr.IBV_ACCESS_REMOTE_READ | IbvMr.IBV_ACCESS_ON_DEMAND | (localWrite ? IbvMr.IBV_ACCESS_LOCAL_WRITE : 0);
        SVCRegMr call = ((VerbsNode) node).pd().regMr(Verbs.address(buffer), buffer.capacity(), flags);
        try {
            IbvMr mr = call.execute().getMr();
            if (mr == null) {
                throw new IOException("ibv_reg_mr returned no region");
            }
            ON_DEMAND.add(mr);
            return new long[] {mr.getAddr(), mr.getRkey()};
        } finally {
            call.free();
        }
    }

    public static void deregisterOnDemand() throws Exception {
        for (IbvMr mr : ON_DEMAND) {
            Verbs.deregister(mr);
        }
        ON_DEMAND.clear();
    }

    /** The provider's registration path asked for On-Demand Paging: the refusal's message, or null when it registered. */
    public static String providerRefusesOnDemand(Node node, ByteBuffer buffer) throws Exception {
        try {
            Verbs.deregister(Verbs.register(((VerbsNode) node).pd(), Verbs.address(buffer), buffer.capacity(),
                    IbvMr.IBV_ACCESS_REMOTE_READ | IbvMr.IBV_ACCESS_ON_DEMAND));
            return null;
        } catch (IllegalArgumentException refused) {
            return refused.getMessage();
        }
    }

    /** Whether the buffer lies in a private file mapping, as VerbsNode sees it. */
    public static boolean inPrivateFileMapping(ByteBuffer buffer) throws IOException {
        return PrivateFileMappings.overlaps(Verbs.address(buffer), buffer.capacity());
    }

    /** What VerbsNode does before registering the buffer, then {@link #vmFlags} of its mapping. */
    public static String adviseAsBeforeRegistering(ByteBuffer buffer) throws IOException {
        VerbsNode.avoidHugePagesOfPrivateFileMappings(Verbs.address(buffer), buffer.capacity());
        return vmFlags(buffer);
    }

    /** The VmFlags of the mapping holding the buffer's first byte (/proc/self/smaps; "nh": advised MADV_NOHUGEPAGE). */
    public static String vmFlags(ByteBuffer buffer) throws IOException {
        long address = Verbs.address(buffer);
        boolean inside = false;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"), StandardCharsets.ISO_8859_1)) {
            int dash = line.indexOf('-');
            int space = line.indexOf(' ');
            if (dash > 0 && space > dash && line.substring(0, dash).matches("[0-9a-f]+")) {
                long from = Long.parseUnsignedLong(line.substring(0, dash), 16);
                long to = Long.parseUnsignedLong(line.substring(dash + 1, space), 16);
                inside = Long.compareUnsigned(from, address) <= 0 && Long.compareUnsigned(address, to) < 0;
            } else if (inside && line.startsWith("VmFlags:")) {
                return line.substring("VmFlags:".length()).trim();
            }
        }
        throw new IOException("no mapping holds 0x" + Long.toHexString(address) + " in /proc/self/smaps");
    }
}

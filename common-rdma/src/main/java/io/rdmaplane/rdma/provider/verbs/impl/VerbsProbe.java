package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.RdmaCm;
import com.ibm.disni.verbs.RdmaCmId;
import com.ibm.disni.verbs.RdmaEventChannel;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;

/**
 * The native half of the provider's probe, run once through DisniRuntime's loader: RDMA-CM
 * opens an event channel, and an id bound to an IPv4 address of an active RDMA port's network
 * device gets a verbs context (so rdma_bind_addr/rdma_create_qp will work there).
 */
public final class VerbsProbe {
    private VerbsProbe() {
    }

    /**
     * @param netdevs network devices under the active RDMA ports (from sysfs)
     * @return null when usable, else the precise reason
     */
    public static String probe(List<String> netdevs) throws IOException {
        RdmaEventChannel channel = RdmaEventChannel.createEventChannel();
        if (channel == null) {
            return "rdma_create_event_channel failed: /dev/infiniband/rdma_cm is missing or not accessible "
                    + "(load rdma_ucm, or run with access to /dev/infiniband)";
        }
        try {
            List<String> tried = new ArrayList<>();
            List<InetAddress> candidates = new ArrayList<>();
            for (String netdev : netdevs) {
                List<InetAddress> mine = ipv4Of(netdev);
                if (mine.isEmpty()) {
                    tried.add(netdev + " has no IPv4 address");
                }
                candidates.addAll(mine);
            }
            if (netdevs.isEmpty()) {
                candidates.addAll(allIpv4()); // ports without a netdev (InfiniBand): try IPoIB and the rest
            }
            for (InetAddress address : candidates) {
                RdmaCmId id = channel.createId(RdmaCm.RDMA_PS_TCP);
                if (id == null) {
                    return "rdma_create_id failed";
                }
                try {
                    id.bindAddr(new InetSocketAddress(address, 0));
                    if (Verbs.contextOf(id) != null) {
                        return null;
                    }
                    tried.add(address.getHostAddress() + " is not served by an RDMA device");
                } catch (IOException e) {
                    tried.add("rdma_bind_addr(" + address.getHostAddress() + ") failed: " + e.getMessage());
                } finally {
                    id.destroyId();
                }
            }
            return "no IPv4 address of an active RDMA port binds with RDMA-CM (" + (tried.isEmpty() ? "no candidate address"
                    : String.join("; ", tried)) + "); give the port's network device an IPv4 address";
        } finally {
            channel.destroyEventChannel();
        }
    }

    static List<InetAddress> ipv4Of(String netdev) {
        List<InetAddress> out = new ArrayList<>();
        try {
            NetworkInterface nic = NetworkInterface.getByName(netdev);
            if (nic != null) {
                for (Enumeration<InetAddress> e = nic.getInetAddresses(); e.hasMoreElements(); ) {
                    InetAddress a = e.nextElement();
                    if (a instanceof Inet4Address) {
                        out.add(a);
                    }
                }
            }
        } catch (SocketException e) {
            // no such device: empty
        }
        return out;
    }

    /** Every non-loopback IPv4 address of this machine, in interface order. */
    static List<InetAddress> allIpv4() {
        List<InetAddress> out = new ArrayList<>();
        try {
            for (Enumeration<NetworkInterface> nics = NetworkInterface.getNetworkInterfaces(); nics.hasMoreElements(); ) {
                NetworkInterface nic = nics.nextElement();
                for (Enumeration<InetAddress> e = nic.getInetAddresses(); e.hasMoreElements(); ) {
                    InetAddress a = e.nextElement();
                    if (a instanceof Inet4Address && !a.isLoopbackAddress()) {
                        out.add(a);
                    }
                }
            }
        } catch (SocketException e) {
            // none
        }
        return out;
    }
}

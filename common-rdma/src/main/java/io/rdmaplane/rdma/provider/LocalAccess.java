package io.rdmaplane.rdma.provider;

/** The local-buffer rules every provider applies before a READ lands (verbs: a local protection error). */
public final class LocalAccess {
    private LocalAccess() {
    }

    /**
     * Why {@code region} cannot receive {@code length} bytes at {@code offset}, or null if it can.
     * {@code ours} says whether it is a region of the posting channel's node.
     */
    public static String problem(MemoryRegion region, boolean ours, int offset, int length) {
        if (!ours) {
            return "the local buffer is not a region of this node: " + region;
        }
        if (!region.isValid()) {
            return "the local region is deregistered: " + region;
        }
        if (!region.access().contains(Access.LOCAL_WRITE)) {
            return "the local region lacks LOCAL_WRITE access: " + region;
        }
        if (offset < 0 || offset > region.length() - length) {
            return "local range [" + offset + ", +" + length + ") is outside " + region;
        }
        return null;
    }
}

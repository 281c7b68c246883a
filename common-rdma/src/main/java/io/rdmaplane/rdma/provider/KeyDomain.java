package io.rdmaplane.rdma.provider;

/**
 * The keys one peer READs with, and the channels it READs through ({@link Node#openKeyDomain}): a key made
 * for a domain ({@link Node#peerKey(MemoryRegion, long, int, KeyDomain)}) READs its range through the
 * domain's channels only, and those channels READ with no other key of the node. On verbs it is a
 * protection domain: the channels a listener puts in it ({@link ChannelAcceptor#keyDomain}) have their QPs
 * there, and each key is a memory registration of exactly its range there, so the device itself refuses
 * any other peer's QP, whatever memory the range is (read-only file mappings included).
 */
public interface KeyDomain extends AutoCloseable {
    /** Revokes every key made for the domain; its channels READ nothing of this node from now on. Idempotent. */
    @Override
    void close();
}

package io.rdmaplane.rdma.policy;

/**
 * Where a block lives on a peer and what its bytes must hash to: the metadata a reader learns
 * (over a checksummed control message) before it READs.
 *
 * @param address remote address of the first byte
 * @param rkey    the region's remote key
 * @param length  bytes; blocks over 8 MiB are read in 8 MiB pieces
 * @param crc32c  CRC32C of the block's bytes, as the writer computed it
 */
public record RemoteBlock(long address, int rkey, int length, int crc32c) {
    public RemoteBlock {
        if (length < 1) {
            throw new IllegalArgumentException("a block has at least one byte, was " + length);
        }
    }
}

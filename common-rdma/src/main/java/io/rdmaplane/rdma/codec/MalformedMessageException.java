package io.rdmaplane.rdma.codec;

/**
 * A received message that cannot be decoded: too short, a length over its bound, an unknown
 * message id, another protocol version, a CRC32C mismatch. The text starts with the field at
 * fault ({@code "count: must be 1..512, was 0"}). It is an {@link IllegalArgumentException}
 * because that is what the callers of the protocols already handle: a bad message fails its
 * request or channel, never the node.
 */
public class MalformedMessageException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public MalformedMessageException(String message) {
        super(message);
    }
}

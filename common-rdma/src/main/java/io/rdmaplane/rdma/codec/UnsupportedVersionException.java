package io.rdmaplane.rdma.codec;

/**
 * An intact message from a peer that speaks another version of the protocol (another build):
 * not corruption, so a retry cannot help. Callers that can say so to the peer do (the policy
 * server rejects the channel); the others treat it like any malformed message.
 */
public final class UnsupportedVersionException extends MalformedMessageException {
    private static final long serialVersionUID = 1L;

    UnsupportedVersionException(String protocol, int version, int expected) {
        super("version: unsupported " + protocol + " version " + version + ", this build speaks " + expected);
    }
}

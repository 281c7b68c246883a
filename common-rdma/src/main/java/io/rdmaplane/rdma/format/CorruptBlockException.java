package io.rdmaplane.rdma.format;

import java.io.IOException;

/** Bytes that are not a well-formed block, or whose payload fails its CRC32C: never handed up. */
public class CorruptBlockException extends IOException {
    public CorruptBlockException(String message) {
        super(message);
    }

    public CorruptBlockException(String message, Throwable cause) {
        super(message, cause);
    }
}

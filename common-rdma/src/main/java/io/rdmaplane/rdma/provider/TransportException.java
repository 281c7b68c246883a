package io.rdmaplane.rdma.provider;

import java.io.IOException;

/** A failed transport operation, with the typed {@link Status} that says why. */
public class TransportException extends IOException {
    private final Status status;

    public TransportException(Status status, String message) {
        super(status + ": " + message);
        this.status = status;
    }

    public TransportException(Status status, String message, Throwable cause) {
        super(status + ": " + message, cause);
        this.status = status;
    }

    public Status status() {
        return status;
    }
}

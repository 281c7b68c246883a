package io.rdmaplane.hdfs.client;

import io.rdmaplane.rdma.config.ConfigException;
import java.nio.ByteBuffer;
import org.apache.hadoop.hdfs.ReplicaAccessor;

/**
 * What the builder returns while the client's {@code dfs.rdma.*} settings are bad: every read
 * throws the {@link ConfigException} naming the key, so the application's read fails with it.
 * HDFS catches whatever {@code build()} throws, logs a WARN and reads over TCP, which would leave
 * a typo silently turning RDMA off; an unchecked exception from a read reaches the caller
 * (DFSInputStream retries other DataNodes only on IOException).
 */
final class MisconfiguredReplicaAccessor extends ReplicaAccessor {
    private final String message;

    MisconfiguredReplicaAccessor(ConfigException error) {
        this.message = error.getMessage();
    }

    @Override
    public int read(long pos, byte[] buf, int off, int len) {
        throw error();
    }

    @Override
    public int read(long pos, ByteBuffer buf) {
        throw error();
    }

    /** A fresh exception per read: one shared instance would collect every caller's suppressed exceptions. */
    private ConfigException error() {
        return new ConfigException(message);
    }

    @Override
    public void close() {
    }

    @Override
    public boolean isLocal() {
        return false;
    }

    @Override
    public boolean isShortCircuit() {
        return false;
    }
}

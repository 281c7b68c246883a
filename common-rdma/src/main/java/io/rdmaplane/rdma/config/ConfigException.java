package io.rdmaplane.rdma.config;

/**
 * A configuration value that cannot be used: unparseable, out of bounds, not an allowed
 * choice, or an unknown key under a registry's prefix. The message names the full key,
 * the offending value and what is allowed.
 */
public class ConfigException extends IllegalArgumentException {
    public ConfigException(String message) {
        super(message);
    }
}

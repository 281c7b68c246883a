package io.rdmaplane.spark;

import io.rdmaplane.rdma.config.ConfigRegistry;
import io.rdmaplane.rdma.config.PolicyKeys;

/** The settings of the Spark shuffle plug-in, read from SparkConf. */
public final class SparkRdmaConfig {
    public static final ConfigRegistry REGISTRY = new ConfigRegistry("Spark shuffle", "spark.shuffle.rdma.", PolicyKeys.SHARED);

    private SparkRdmaConfig() {
    }
}

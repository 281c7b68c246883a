package io.rdmaplane.spark;

import com.codahale.metrics.MetricRegistry;
import org.apache.spark.metrics.source.Source;

/** The plug-in's metrics (policy layer and shuffle counters) as a Spark metrics source named {@code rdmaShuffle}. */
final class RdmaMetricsSource implements Source {
    static final String NAME = "rdmaShuffle";
    private final MetricRegistry registry;

    RdmaMetricsSource(MetricRegistry registry) {
        this.registry = registry;
    }

    @Override
    public String sourceName() {
        return NAME;
    }

    @Override
    public MetricRegistry metricRegistry() {
        return registry;
    }
}

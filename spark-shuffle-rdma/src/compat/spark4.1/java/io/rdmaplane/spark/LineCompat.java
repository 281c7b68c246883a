package io.rdmaplane.spark;

import org.apache.spark.Aggregator;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.shuffle.checksum.RowBasedChecksum;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Option;
import scala.math.Ordering;

/** {@link SparkLine} for Spark 4.1 and 4.2. */
final class LineCompat implements SparkLine {
    @Override
    public boolean managerCreatedAfterEnv() {
        return true;
    }

    @Override
    public <K, V, C> ExternalSorter<K, V, C> sorter(TaskContext context, Option<Aggregator<K, V, C>> aggregator,
                                                    Option<Ordering<K>> ordering, Serializer serializer) {
        return new ExternalSorter<>(context, aggregator, Option.empty(), ordering, serializer, new RowBasedChecksum[0]);
    }
}

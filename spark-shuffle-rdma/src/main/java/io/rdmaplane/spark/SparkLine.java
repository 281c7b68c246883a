package io.rdmaplane.spark;

import org.apache.spark.Aggregator;
import org.apache.spark.TaskContext;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.util.collection.ExternalSorter;
import scala.Option;
import scala.math.Ordering;

/**
 * What differs between the Spark lines this tree builds for, behind one interface. Each line's build
 * compiles exactly one implementation, {@code LineCompat}, from its own source folder
 * ({@code src/compat/<spark.compat>/java}: spark3.5, spark4.0 or spark4.1, chosen by the build profile; see
 * docs/README.md, "Spark lines"), so the rest of the code is the same for every line and nothing is looked
 * up by reflection.
 */
interface SparkLine {
    /** The implementation compiled into this jar. */
    SparkLine CURRENT = new LineCompat();

    /**
     * Whether Spark creates an executor's shuffle manager once the executor's {@code SparkEnv} is set
     * (4.0 and later: {@code SparkEnv.initializeShuffleManager}, after the application's jars are fetched).
     * Spark 3.5 creates it while it builds the {@code SparkEnv}, so nothing of the environment is there yet.
     */
    boolean managerCreatedAfterEnv();

    /**
     * The reader's sorter, without a partitioner (one reduce partition). Spark 4.1 added a last constructor
     * argument, the row checksums of a map-side writer, which a reader leaves empty.
     */
    <K, V, C> ExternalSorter<K, V, C> sorter(TaskContext context, Option<Aggregator<K, V, C>> aggregator,
                                             Option<Ordering<K>> ordering, Serializer serializer);
}

package io.rdmaplane.spark;

import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/** {@link SparkLine} for Spark 4.0, 4.1 and 4.2 (Scala 2.13). */
final class LineCompat implements SparkLine {
    @Override
    public boolean managerCreatedAfterEnv() {
        return true;
    }

    @Override
    public <T> Iterator<T> asScala(java.util.Iterator<T> it) {
        return CollectionConverters.asScala(it);
    }
}

package io.rdmaplane.spark;

import scala.collection.Iterator;

/** {@link SparkLine} for Spark 3.5 on Scala 2.12. */
final class LineCompat implements SparkLine {
    @Override
    public boolean managerCreatedAfterEnv() {
        return false;
    }

    @Override
    public <T> Iterator<T> asScala(java.util.Iterator<T> it) {
        return scala.collection.JavaConverters.asScalaIterator(it);
    }
}

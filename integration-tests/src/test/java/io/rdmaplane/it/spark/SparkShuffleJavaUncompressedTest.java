package io.rdmaplane.it.spark;

import org.apache.spark.SparkConf;

/** The shuffle catalogue with Java serialization and uncompressed shuffle blocks. */
class SparkShuffleJavaUncompressedTest extends AbstractShuffleCatalogueTest {
    @Override
    String name() {
        return "shuffle-java-uncompressed";
    }

    @Override
    SparkConf settings(SparkConf conf) {
        return conf.set("spark.serializer", "org.apache.spark.serializer.JavaSerializer")
                .set("spark.shuffle.compress", "false");
    }
}

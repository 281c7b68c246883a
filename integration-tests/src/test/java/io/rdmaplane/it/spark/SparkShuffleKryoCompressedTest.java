package io.rdmaplane.it.spark;

import org.apache.spark.SparkConf;

/**
 * The shuffle catalogue with Kryo and compressed shuffle blocks (lz4), and spills forced every 5000
 * records: the serialized writer then merges spill files, the sorters on both sides spill and merge.
 */
class SparkShuffleKryoCompressedTest extends AbstractShuffleCatalogueTest {
    @Override
    String name() {
        return "shuffle-kryo-compressed";
    }

    @Override
    SparkConf settings(SparkConf conf) {
        return conf.set("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
                .set("spark.shuffle.compress", "true")
                .set("spark.shuffle.spill.numElementsForceSpillThreshold", "5000");
    }
}

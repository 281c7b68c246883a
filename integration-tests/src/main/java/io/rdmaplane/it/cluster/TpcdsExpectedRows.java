package io.rdmaplane.it.cluster;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * The rows TPC-DS queries give over the tables {@link TpcdsTables#main} wrote, from a local Spark on the host with the
 * ring applications' SQL settings: {@link VerbsTpcdsRing}'s baseline when it runs without its sort-shuffle application
 * ({@code tpcds-verbs.sh} with {@code TPCDS_VERBS_BASELINE=host}, as CI runs it: in the emulated guest that
 * application took as long as the RDMA one, and the host computes the same rows in seconds).
 *
 * <p>{@code TpcdsExpectedRows TABLES_DIR QUERIES OUT_DIR}: writes {@code OUT_DIR/NAME.rows} per query (its rows as
 * {@link Row#toString}, sorted, one per line) and prints {@code tpcds-expected: NAME rows=N hash=H millis=M}.
 */
public final class TpcdsExpectedRows {
    private TpcdsExpectedRows() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 3) {
            System.err.println("usage: TpcdsExpectedRows TABLES_DIR QUERIES OUT_DIR");
            System.exit(2);
        }
        Path tables = Path.of(args[0]).toAbsolutePath();
        List<String> queries = List.of(args[1].split(","));
        Path out = Files.createDirectories(Path.of(args[2]).toAbsolutePath());
        SparkSession.Builder builder = TpcdsTables.localSpark("tpcds-expected");
        RingCluster.SQL_OVER_HDFS.forEach(builder::config);
        VerbsTpcdsRing.SQL.forEach(builder::config); // after: the application's own settings win, as in RingCluster.submitArgs
        SparkSession spark = builder.getOrCreate();
        try {
            TpcdsTables.registerViews(spark, tables.toUri().toString().replaceAll("/$", ""), TpcdsTables.TABLES);
            for (String q : queries) {
                long t0 = System.nanoTime();
                List<String> rows = spark.sql(TpcdsTables.query(q)).collectAsList().stream().map(Row::toString).sorted().toList();
                Files.write(out.resolve(q + ".rows"), rows);
                System.out.printf("tpcds-expected: %s rows=%d hash=%s millis=%d%n", q, rows.size(), RingTpcds.hash(rows),
                        (System.nanoTime() - t0) / 1_000_000);
            }
        } finally {
            spark.stop();
        }
    }

    /** What {@link #main} wrote for query {@code q} under {@code dir}, as the result of a successful run. */
    static RingDriver.QueryResult read(Path dir, String q) throws IOException {
        List<String> rows = Files.readAllLines(dir.resolve(q + ".rows"));
        return new RingDriver.QueryResult(q, false, null, rows.size(), RingTpcds.hash(rows), rows, 0, 0, 0, 0, "host");
    }
}

package io.rdmaplane.it.cluster;

import io.trino.tpcds.Results;
import io.trino.tpcds.Session;
import io.trino.tpcds.Table;
import io.trino.tpcds.column.Column;
import io.trino.tpcds.column.ColumnType;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * TPC-DS tables generated in-process by {@code io.trino.tpcds} (the dsdgen port), with Spark schemas derived
 * from the generator's own column metadata, and Spark's own query texts ({@code tpcds/q*.sql} in the
 * spark-sql tests jar). Used by the local-cluster TPC-DS test and by the ring's Spark application
 * ({@link RingTpcds}: the same tables in HDFS across the Soft-RoCE VM's hosts).
 */
public final class TpcdsTables {
    /** The smallest scale the generator accepts (Trino's "tiny"): store_sales ~120k rows, date_dim 73k. */
    public static final double SCALE = 0.01;
    /**
     * The queries the local-cluster TPC-DS run compares; the Soft-RoCE VM's ring runs these and five more on the same
     * tables (tpcds-verbs.sh).
     */
    public static final List<String> QUERIES = List.of("q3", "q19", "q42", "q52", "q55");
    /** The tables of {@link #QUERIES} (q7 is left out: customer_demographics has 1.9M rows at any scale). */
    public static final List<String> TABLES = List.of("store_sales", "date_dim", "item", "customer", "customer_address", "store");

    private TpcdsTables() {
    }

    /**
     * Writes {@link #TABLES} as Parquet under {@code args[0]} with a local Spark (no cluster), then the file
     * {@code COMPLETE} there: the tables the Soft-RoCE VM's ring puts into its HDFS, generated on the host because the
     * emulated guest would take longer than its whole CI budget.
     */
    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: TpcdsTables OUT_DIR");
            System.exit(2);
        }
        java.nio.file.Path out = java.nio.file.Path.of(args[0]).toAbsolutePath();
        long t0 = System.nanoTime();
        SparkSession spark = localSpark("tpcds-tables").getOrCreate();
        try {
            writeParquet(spark, out.toUri().toString(), TABLES);
        } finally {
            spark.stop();
        }
        java.nio.file.Files.writeString(out.resolve("COMPLETE"), TABLES + " at scale " + SCALE + "\n");
        System.out.printf("tpcds-tables: %s at scale %s written as Parquet under %s in %.1f s%n", TABLES, SCALE, out,
                (System.nanoTime() - t0) / 1e9);
    }

    /** A local Spark on the host (no cluster, no UI, on loopback), for what the ring's tables and rows need there. */
    static SparkSession.Builder localSpark(String appName) {
        return SparkSession.builder().master("local[2]").appName(appName).config("spark.ui.enabled", "false")
                .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1");
    }

    /** The Spark type of a generator column type. */
    static DataType sparkType(ColumnType type) {
        switch (type.getBase()) {
            case INTEGER:
                return DataTypes.IntegerType;
            case IDENTIFIER:
                return DataTypes.LongType;
            case DATE:
                return DataTypes.DateType;
            case DECIMAL:
                return DataTypes.createDecimalType(type.getPrecision().orElseThrow(), type.getScale().orElseThrow());
            case CHAR:
            case VARCHAR:
            case TIME:
                return DataTypes.StringType;
            default:
                throw new IllegalArgumentException("unknown TPC-DS column type " + type.getBase());
        }
    }

    static StructType schema(Table table) {
        List<StructField> fields = new ArrayList<>();
        for (Column c : table.getColumns()) {
            fields.add(new StructField(c.getName(), sparkType(c.getType()), true, Metadata.empty()));
        }
        return new StructType(fields.toArray(new StructField[0]));
    }

    static Object value(String text, DataType type) {
        if (text == null) {
            return null;
        }
        if (type == DataTypes.IntegerType) {
            return Integer.parseInt(text);
        }
        if (type == DataTypes.LongType) {
            return Long.parseLong(text);
        }
        if (type == DataTypes.DateType) {
            return java.sql.Date.valueOf(text);
        }
        if (type instanceof org.apache.spark.sql.types.DecimalType) {
            return new BigDecimal(text);
        }
        return text;
    }

    /**
     * Every row of a table at {@link #SCALE} (a parent table's own rows, not its child's), with the columns of
     * {@code keep} (indexes into the table's columns, in order).
     */
    static List<Row> rows(Table table, int[] keep) {
        StructType schema = schema(table);
        Session session = Session.getDefaultSession().withScale(SCALE).withTable(table);
        List<Row> rows = new ArrayList<>();
        for (List<List<String>> generated : Results.constructResults(table, session)) {
            List<String> values = generated.get(0);
            Object[] row = new Object[keep.length];
            for (int i = 0; i < row.length; i++) {
                row[i] = value(values.get(keep[i]), schema.fields()[keep[i]].dataType());
            }
            rows.add(RowFactory.create(row));
        }
        return rows;
    }

    /** Generates the tables and writes them as Parquet under {@code dir}/name (shared by both sessions). */
    public static void writeParquet(SparkSession spark, String dir, List<String> tables) {
        writeParquet(spark, dir, tables, null);
    }

    /**
     * As {@link #writeParquet(SparkSession, String, List)}, each table with only its columns named in {@code columns}
     * (all when null): what a query reads of Parquet files is its columns, so a run of a few queries need not generate
     * and write the rest (the ring's session writes its tables on 2 cores, under its time budget).
     */
    public static void writeParquet(SparkSession spark, String dir, List<String> tables, java.util.Set<String> columns) {
        JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        for (String name : tables) {
            Table table = Table.getTable(name);
            StructType all = schema(table);
            int[] keep = java.util.stream.IntStream.range(0, all.fields().length)
                    .filter(i -> columns == null || columns.contains(all.fields()[i].name())).toArray();
            if (keep.length == 0) {
                throw new IllegalArgumentException("TPC-DS table " + name + " has none of the columns " + columns);
            }
            StructType schema = new StructType(java.util.Arrays.stream(keep).mapToObj(i -> all.fields()[i]).toArray(StructField[]::new));
            List<Row> rows = rows(table, keep);
            Dataset<Row> df = spark.createDataFrame(sc.parallelize(rows, Math.max(1, rows.size() / 30_000)), schema);
            df.write().mode("overwrite").parquet(dir + "/" + name);
        }
    }

    /**
     * Views of the tables under {@code dir}, read with the generator's schema: given, it spares the job per table that
     * reads Parquet footers to infer it (in the emulated guest 1-14 s each); a column a file was written without
     * ({@link #writeParquet(SparkSession, String, List, java.util.Set)}) reads as null.
     */
    public static void registerViews(SparkSession spark, String dir, List<String> tables) {
        for (String name : tables) {
            spark.read().schema(schema(Table.getTable(name))).parquet(dir + "/" + name).createOrReplaceTempView(name);
        }
    }

    /** Spark's text of a TPC-DS query, e.g. {@code q3}, from the spark-sql tests jar. */
    public static String query(String name) {
        String resource = "tpcds/" + name + ".sql";
        try (InputStream in = TpcdsTables.class.getClassLoader().getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException(resource + " is not on the test class path (spark-sql tests jar)");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}

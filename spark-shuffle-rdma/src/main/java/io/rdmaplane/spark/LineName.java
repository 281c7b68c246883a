package io.rdmaplane.spark;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/** The Spark line this jar was built for (e.g. {@code spark3.5_2.12}), written by the build into spark-line.properties. */
final class LineName {
    static final String VALUE = load();

    private LineName() {
    }

    private static String load() {
        try (InputStream in = LineName.class.getResourceAsStream("spark-line.properties")) {
            if (in == null) {
                throw new IllegalStateException("spark-line.properties is missing next to " + LineName.class.getName());
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("line");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}

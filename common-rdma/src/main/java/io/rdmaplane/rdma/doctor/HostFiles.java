package io.rdmaplane.rdma.doctor;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/** Reading the host's files under the doctor's root ({@code proc/}, {@code etc/}) without ever throwing. */
final class HostFiles {
    private HostFiles() {
    }

    /** The file's text, trimmed; null if it does not exist or cannot be read. */
    static String read(Path file) {
        try {
            return new String(Files.readAllBytes(file), StandardCharsets.UTF_8).trim();
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** The entries of a folder sorted by name; empty if it does not exist. */
    static List<Path> list(Path dir) {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.sorted(Comparator.comparing(p -> p.getFileName().toString().toLowerCase(Locale.ROOT))).toList();
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
    }
}

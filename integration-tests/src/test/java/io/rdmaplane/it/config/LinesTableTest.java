package io.rdmaplane.it.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.opentest4j.AssertionFailedError;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * The README's tables of Spark and Hadoop lines say what the poms build: one row per line (the default one
 * first, then the profiles in the root pom's order) with its Spark, Scala, Java or Hadoop version, its plug-in
 * jar's file name (as the module's shade execution names it) and where that jar goes (Spark 3.5, whose compat
 * folder is not spark4.*, creates its shuffle manager before --jars arrive: extraClassPath). Every line is also
 * one that integration-tests/lines/ci.sh tests by default. The checks take the tree's root as a parameter, and
 * the second and third tests change each README cell, and each pom value the table shows, in a copy, and
 * see the check fail.
 */
class LinesTableTest {
    private static final Path ROOT = Path.of("").toAbsolutePath().getParent();
    private static final List<String> FILES = List.of("pom.xml", "spark-shuffle-rdma/pom.xml",
            "hdfs-transfer-rdma/pom.xml", "README.md", "integration-tests/lines/ci.sh");

    @Test
    void readmeTablesMatchThePomsLines() throws Exception {
        check(ROOT);
    }

    @Test
    void everyCellOfTheReadmeTablesIsChecked(@TempDir Path copy) throws Exception {
        copyTree(copy);
        Path readme = copy.resolve("README.md");
        List<String> original = Files.readAllLines(readme);
        int rows = 0;
        for (int i = 0; i < original.size(); i++) {
            if (!isLineRow(original.get(i))) {
                continue;
            }
            rows++;
            String[] cells = original.get(i).split("\\|", -1);
            for (int c = 1; c < cells.length - 1; c++) {
                String[] changed = cells.clone();
                changed[c] = changed[c].stripTrailing() + "x ";
                expectMismatch(copy, readme, original, i, String.join("|", changed));
            }
            expectMismatch(copy, readme, original, i, null);
        }
        assertTrue(rows >= 7, "the README's tables have a row per line: " + rows);
    }

    @Test
    void everyPomValueTheTablesShowIsChecked(@TempDir Path copy) throws Exception {
        copyTree(copy);
        String[][] changes = {
            {"pom.xml", "<spark.version>4.2.0</spark.version>", "<spark.version>4.2.1</spark.version>"},
            {"pom.xml", "<spark.version>4.0.4</spark.version>", "<spark.version>4.0.5</spark.version>"},
            {"pom.xml", "<scala.binary.version>2.12</scala.binary.version>", "<scala.binary.version>2.13</scala.binary.version>"},
            {"pom.xml", "<maven.compiler.release>17</maven.compiler.release>", "<maven.compiler.release>21</maven.compiler.release>"},
            {"pom.xml", "<hadoop.version>3.3.6</hadoop.version>", "<hadoop.version>3.3.5</hadoop.version>"},
            {"pom.xml", "<spark.compat>spark3.5</spark.compat>", "<spark.compat>spark4.1</spark.compat>"},
            {"pom.xml", "<spark.line>spark4.1_2.13</spark.line>", "<spark.line>spark4.1_2.12</spark.line>"},
            {"spark-shuffle-rdma/pom.xml", "-${spark.line}</shadedArtifactId>", "-${spark.version}</shadedArtifactId>"},
            {"hdfs-transfer-rdma/pom.xml", "<shadedClassifierName>plugin</shadedClassifierName>",
                "<shadedClassifierName>hdfs</shadedClassifierName>"},
            {"integration-tests/lines/ci.sh", "spark4.2_2.13 hadoop3.3)", "spark4.2_2.13)"},
        };
        for (String[] change : changes) {
            Path file = copy.resolve(change[0]);
            String original = Files.readString(file);
            String changed = original.replaceFirst(Pattern.quote(change[1]), Matcher.quoteReplacement(change[2]));
            assertNotEquals(original, changed, change[0] + " has " + change[1]);
            Files.writeString(file, changed);
            assertThrows(AssertionFailedError.class, () -> check(copy), "the check misses " + change[0] + ": " + change[2]);
            Files.writeString(file, original);
        }
        check(copy);
    }

    /** Fails when the README's tables and the poms (or lines/ci.sh's default lines) under root disagree. */
    static void check(Path root) throws Exception {
        Element project = pom(root.resolve("pom.xml"));
        String sparkJar = jarName(root.resolve("spark-shuffle-rdma/pom.xml"));
        String hdfsJar = jarName(root.resolve("hdfs-transfer-rdma/pom.xml"));
        Map<String, String> defaults = properties(child(project, "properties"));
        List<String> spark = new ArrayList<>();
        List<String> hadoop = new ArrayList<>();
        spark.add(sparkRow(root, defaults, sparkJar, true));
        hadoop.add(hadoopRow(defaults, hdfsJar, true));
        List<String> profiles = new ArrayList<>();
        for (Element profile : children(child(project, "profiles"), "profile")) {
            String id = text(child(profile, "id"));
            profiles.add(id);
            Map<String, String> p = properties(child(profile, "properties"));
            Map<String, String> line = new LinkedHashMap<>(defaults);
            line.putAll(p);
            assertEquals(id, p.getOrDefault("spark.line", p.get("hadoop.line")), "a profile is named for the line it builds");
            assertEquals("target/lines/" + id, p.get("rdma.target"), "a line builds into target/lines/<line>");
            if (p.containsKey("spark.line")) {
                spark.add(sparkRow(root, line, sparkJar, false));
            } else {
                hadoop.add(hadoopRow(line, hdfsJar, false));
            }
        }
        String readme = Files.readString(root.resolve("README.md"));
        assertEquals(String.join("\n", spark), rows(readme, "| `spark"), "README's Spark lines");
        assertEquals(String.join("\n", hadoop), rows(readme, "| `hadoop"), "README's Hadoop lines");
        assertEquals(profiles, ciLines(root.resolve("integration-tests/lines/ci.sh")),
                "lines/ci.sh tests every profile's line by default, in the pom's order");
    }

    private static String sparkRow(Path root, Map<String, String> line, String jar, boolean isDefault) {
        String name = line.get("spark.line");
        String compat = line.get("spark.compat");
        assertTrue(Files.isDirectory(root.resolve("spark-shuffle-rdma/src/compat/" + compat + "/java")),
                name + "'s compat folder spark-shuffle-rdma/src/compat/" + compat + "/java");
        String where = compat.startsWith("spark4") ? "`--jars` (or extraClassPath)"
                : "`spark.driver.extraClassPath`, `spark.executor.extraClassPath`";
        return "| `" + name + "`" + (isDefault ? " (default)" : "") + " | " + line.get("spark.version") + " | "
                + line.get("scala.binary.version") + " | " + line.get("maven.compiler.release")
                + " | `" + jar.replace("${spark.line}", name) + "` | " + where + " |";
    }

    private static String hadoopRow(Map<String, String> line, String jar, boolean isDefault) {
        String name = line.get("hadoop.line");
        return "| `" + name + "`" + (isDefault ? " (default)" : "") + " | " + line.get("hadoop.version")
                + " | `" + jar.replace("${hadoop.line}", name) + "` |";
    }

    /** The plug-in jar's file name as the module's shade execution makes it, the line left as ${...}. */
    private static String jarName(Path modulePom) throws Exception {
        Element project = pom(modulePom);
        String artifactId = text(child(project, "artifactId"));
        NodeList configs = project.getElementsByTagName("shadedArtifactId");
        assertEquals(1, configs.getLength(), "one shaded jar in " + modulePom);
        Element config = (Element) configs.item(0).getParentNode();
        return text(child(config, "shadedArtifactId")).replace("${project.artifactId}", artifactId)
                + "-<version>-" + text(child(config, "shadedClassifierName")) + ".jar";
    }

    /** The lines lines/ci.sh tests when given none. */
    private static List<String> ciLines(Path script) throws IOException {
        Matcher m = Pattern.compile("\\|\\| lines=\\(([^)]*)\\)").matcher(Files.readString(script));
        assertTrue(m.find(), script + " sets its default lines with `|| lines=(...)`");
        return List.of(m.group(1).trim().split("\\s+"));
    }

    private static void copyTree(Path copy) throws IOException {
        for (String f : FILES) {
            Files.createDirectories(copy.resolve(f).getParent());
            Files.copy(ROOT.resolve(f), copy.resolve(f));
        }
        try (var folders = Files.list(ROOT.resolve("spark-shuffle-rdma/src/compat"))) {
            for (Path folder : folders.toList()) {
                Files.createDirectories(copy.resolve("spark-shuffle-rdma/src/compat/" + folder.getFileName() + "/java"));
            }
        }
    }

    /** Writes the README with row i replaced (null: removed), sees the check fail, and puts it back. */
    private static void expectMismatch(Path copy, Path readme, List<String> original, int i, String row)
            throws IOException {
        List<String> changed = new ArrayList<>(original);
        if (row == null) {
            changed.remove(i);
        } else {
            changed.set(i, row);
        }
        Files.write(readme, changed);
        assertThrows(AssertionFailedError.class, () -> check(copy),
                "the check misses README line " + (i + 1) + (row == null ? " removed" : " changed to " + row));
        Files.write(readme, original);
    }

    private static boolean isLineRow(String l) {
        return l.startsWith("| `spark") || l.startsWith("| `hadoop");
    }

    private static String rows(String readme, String prefix) {
        return readme.lines().filter(l -> l.startsWith(prefix)).collect(Collectors.joining("\n"));
    }

    private static Element pom(Path file) throws Exception {
        Document doc = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile());
        return doc.getDocumentElement();
    }

    private static Map<String, String> properties(Element properties) {
        Map<String, String> out = new LinkedHashMap<>();
        NodeList nodes = properties.getChildNodes();
        for (int i = 0; i < nodes.getLength(); i++) {
            if (nodes.item(i) instanceof Element e) {
                out.put(e.getTagName(), text(e));
            }
        }
        return out;
    }

    private static Element child(Element parent, String name) {
        List<Element> found = children(parent, name);
        assertEquals(1, found.size(), "one <" + name + "> in <" + parent.getTagName() + ">");
        return found.get(0);
    }

    private static List<Element> children(Element parent, String name) {
        List<Element> out = new ArrayList<>();
        for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element e && e.getTagName().equals(name)) {
                out.add(e);
            }
        }
        return out;
    }

    private static String text(Element e) {
        return e.getTextContent().trim();
    }
}

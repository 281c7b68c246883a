package io.rdmaplane.it.config;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * The README's tables of Spark and Hadoop lines say what the root pom's properties and profiles build: one row
 * per line (the default one first, then the profiles in the pom's order) with its versions, its jar's name and
 * where that jar goes (Spark 3.5, whose compat folder is not spark4.*, creates its shuffle manager before --jars
 * arrive: extraClassPath).
 */
class LinesTableTest {
    private static final Path ROOT = Path.of("").toAbsolutePath().getParent();

    @Test
    void readmeTablesMatchThePomsLines() throws Exception {
        Document pom = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(ROOT.resolve("pom.xml").toFile());
        Element project = pom.getDocumentElement();
        Map<String, String> defaults = properties(child(project, "properties"));
        List<String> spark = new ArrayList<>();
        List<String> hadoop = new ArrayList<>();
        spark.add(sparkRow(defaults, defaults, true));
        hadoop.add(hadoopRow(defaults, true));
        for (Element profile : children(child(project, "profiles"), "profile")) {
            Map<String, String> p = properties(child(profile, "properties"));
            Map<String, String> line = new LinkedHashMap<>(defaults);
            line.putAll(p);
            assertEquals(text(child(profile, "id")), p.getOrDefault("spark.line", p.get("hadoop.line")),
                    "a profile is named for the line it builds");
            assertEquals("target/lines/" + text(child(profile, "id")), p.get("rdma.target"), "a line builds into target/lines/<line>");
            if (p.containsKey("spark.line")) {
                spark.add(sparkRow(line, defaults, false));
            } else {
                hadoop.add(hadoopRow(line, false));
            }
        }
        String readme = Files.readString(ROOT.resolve("README.md"));
        assertEquals(String.join("\n", spark), rows(readme, "| `spark"), "README's Spark lines");
        assertEquals(String.join("\n", hadoop), rows(readme, "| `hadoop"), "README's Hadoop lines");
    }

    private static String sparkRow(Map<String, String> line, Map<String, String> defaults, boolean isDefault) {
        String name = line.get("spark.line");
        String where = line.get("spark.compat").startsWith("spark4") ? "`--jars` (or extraClassPath)"
                : "`spark.driver.extraClassPath`, `spark.executor.extraClassPath`";
        return "| `" + name + "`" + (isDefault ? " (default)" : "") + " | " + line.get("spark.version") + " | "
                + line.get("scala.binary.version") + " | " + defaults.get("maven.compiler.release")
                + " | `spark-shuffle-rdma-" + name + "-<version>-plugin.jar` | " + where + " |";
    }

    private static String hadoopRow(Map<String, String> line, boolean isDefault) {
        String name = line.get("hadoop.line");
        return "| `" + name + "`" + (isDefault ? " (default)" : "") + " | " + line.get("hadoop.version")
                + " | `hdfs-transfer-rdma-" + name + "-<version>-plugin.jar` |";
    }

    private static String rows(String readme, String prefix) {
        return readme.lines().filter(l -> l.startsWith(prefix)).collect(Collectors.joining("\n"));
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

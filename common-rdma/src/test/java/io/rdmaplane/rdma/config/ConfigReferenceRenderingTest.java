package io.rdmaplane.rdma.config;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class ConfigReferenceRenderingTest {
    private static final ConfigKey<Integer> DEPTH = ConfigKey.intKey("queueDepth", 256, 1, 16384, "Per channel.");
    private static final ConfigKey<String> MODE = ConfigKey.choiceKey("mode", "a", List.of("a", "b"), "Either a | b.");

    @Test
    void rendersHeaderGrammarsAndOneTablePerRegistry() {
        String md = ConfigReference.render(List.of(
                new ConfigRegistry("First", "one.", List.of(DEPTH)),
                new ConfigRegistry("Second", "two.", List.of(DEPTH, MODE))), "make docs");
        assertTrue(md.startsWith("# Configuration reference\n"), md);
        assertTrue(md.contains("```\nmake docs\n```\n"), md);
        assertTrue(md.contains("- **byte size**: " + ConfigKey.BYTE_SIZE_GRAMMAR + "\n"), md);
        assertTrue(md.contains("- **duration**: " + ConfigKey.DURATION_GRAMMAR + "\n"), md);
        assertTrue(md.contains("\n## First (`one.`)\n\n| Key | Type | Default | Allowed | Description |\n|---|---|---|---|---|\n"
                + "| `one.queueDepth` | int | `256` | 1 .. 16384 | Per channel. |\n"), md);
        // A pipe in a doc must not split the table cell.
        assertTrue(md.endsWith("\n## Second (`two.`)\n\n| Key | Type | Default | Allowed | Description |\n|---|---|---|---|---|\n"
                + "| `two.queueDepth` | int | `256` | 1 .. 16384 | Per channel. |\n"
                + "| `two.mode` | choice | `a` | a, b | Either a \\| b. |\n"), md);
    }
}

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

    @Test
    void internalKeysAreListedApartAfterTheUserKeys() {
        ConfigKey<Integer> hook = ConfigKey.intKey("test.hook", 0, 0, 9, "Set by tests.").internal();
        String md = ConfigReference.render(List.of(new ConfigRegistry("Third", "three.", List.of(hook, DEPTH))), "make docs");
        assertTrue(md.endsWith("\n## Third (`three.`)\n\n| Key | Type | Default | Allowed | Description |\n|---|---|---|---|---|\n"
                + "| `three.queueDepth` | int | `256` | 1 .. 16384 | Per channel. |\n"
                + "\nInternal: set by the plug-in itself or by tests, never by users; validated like the keys above.\n\n"
                + "| Key | Type | Default | Allowed | Description |\n|---|---|---|---|---|\n"
                + "| `three.test.hook` | int | `0` | 0 .. 9 | Set by tests. |\n"), md);
    }
}

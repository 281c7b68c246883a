package io.rdmaplane.rdma.config;

import java.util.List;

/** Renders the Markdown reference of registries, committed as conf/configuration.md. */
public final class ConfigReference {
    private ConfigReference() {
    }

    /** @param regenerateCommand the command that rewrites the committed file, quoted in its header */
    public static String render(List<ConfigRegistry> registries, String regenerateCommand) {
        StringBuilder out = new StringBuilder();
        out.append("# Configuration reference\n\n")
                .append("Generated from the config registries by `io.rdmaplane.rdma.config.ConfigReference`; do not edit.\n")
                .append("A test fails when this file is stale. Regenerate it from the repository root with:\n\n")
                .append("```\n").append(regenerateCommand).append("\n```\n\n")
                .append("A value that does not parse or is out of range is an error naming the key; it is never")
                .append(" replaced by the default. An unset key takes its default. Surrounding whitespace is ignored.\n\n")
                .append("- **byte size**: ").append(ConfigKey.BYTE_SIZE_GRAMMAR).append('\n')
                .append("- **duration**: ").append(ConfigKey.DURATION_GRAMMAR).append('\n')
                .append("- **choice**: one of the listed values, case-insensitive.\n");
        for (ConfigRegistry registry : registries) {
            out.append("\n## ").append(registry.title()).append(" (`").append(registry.prefix()).append("`)\n\n")
                    .append("| Key | Type | Default | Allowed | Description |\n")
                    .append("|---|---|---|---|---|\n");
            for (ConfigKey<?> key : registry.keys()) {
                out.append("| `").append(registry.fullName(key)).append("` | ").append(key.type())
                        .append(" | ").append(key.defaultText().isEmpty() ? "(unset)" : "`" + key.defaultText() + "`")
                        .append(" | ").append(cell(key.allowed()))
                        .append(" | ").append(cell(key.doc())).append(" |\n");
            }
        }
        return out.toString();
    }

    /** A pipe would end the table cell. */
    private static String cell(String text) {
        return text.replace("|", "\\|");
    }
}

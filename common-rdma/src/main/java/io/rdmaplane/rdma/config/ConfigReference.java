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
                .append("Every product checks all of its settings before it uses them (the Spark driver and executors and")
                .append(" the DataNode when they start, the HDFS client when it opens a block): a value that does not parse")
                .append(" or is out of range is an error naming the key, the value and what is allowed; it is never")
                .append(" replaced by the default. A name under a product's prefix that is not listed")
                .append(" here is an error too, naming the closest listed key. An unset key takes its default.")
                .append(" Surrounding whitespace is ignored.\n\n")
                .append("- **byte size**: ").append(ConfigKey.BYTE_SIZE_GRAMMAR).append('\n')
                .append("- **duration**: ").append(ConfigKey.DURATION_GRAMMAR).append('\n')
                .append("- **choice**: one of the listed values, case-insensitive.\n");
        for (ConfigRegistry registry : registries) {
            out.append("\n## ").append(registry.title()).append(" (`").append(registry.prefix()).append("`)\n\n");
            table(out, registry, ConfigKey.Visibility.USER);
            // Listed, not hidden: the plug-in's own keys show up in logs and in Spark's environment page,
            // and a hand-set bad value of one is an error naming it like any other.
            if (registry.keys().stream().anyMatch(k -> k.visibility() == ConfigKey.Visibility.INTERNAL)) {
                out.append("\nInternal: set by the plug-in itself or by tests, never by users; validated like the keys above.\n\n");
                table(out, registry, ConfigKey.Visibility.INTERNAL);
            }
        }
        return out.toString();
    }

    private static void table(StringBuilder out, ConfigRegistry registry, ConfigKey.Visibility visibility) {
        out.append("| Key | Type | Default | Allowed | Description |\n")
                .append("|---|---|---|---|---|\n");
        for (ConfigKey<?> key : registry.keys()) {
            if (key.visibility() != visibility) {
                continue;
            }
            out.append("| `").append(registry.fullName(key)).append("` | ").append(key.type())
                    .append(" | ").append(key.defaultText().isEmpty() ? "(unset)" : "`" + key.defaultText() + "`")
                    .append(" | ").append(cell(key.allowed()))
                    .append(" | ").append(cell(key.doc())).append(" |\n");
        }
    }

    /** A pipe would end the table cell. */
    private static String cell(String text) {
        return text.replace("|", "\\|");
    }
}

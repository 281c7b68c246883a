package io.rdmaplane.it.layers;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.Location;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.library.Architectures;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The layers of code of {@code design.md} ("Layers of code": each one a package, arrows only point
 * down) as rules over the compiled main classes of every module, which this module's class path
 * holds: any new dependency against them fails the build, naming the class, the line and the rule.
 * Every io.rdmaplane package must belong to a layer, so a new package has to be placed here first.
 */
class LayersTest {
    static final String WHY = "design.md, Layers of code: arrows only point down; choosing a provider is configuration";

    /** Main classes only: not this module's tests, nor the published test jar (its tests may name anything). */
    static final JavaClasses MAIN = new ClassFileImporter()
            .withImportOption(LayersTest::isMainClass)
            .importPackages("io.rdmaplane");

    static boolean isMainClass(Location location) {
        return !location.contains("/test-classes/") && !location.contains("-tests.jar");
    }

    static final ArchRule LAYERS = Architectures.layeredArchitecture()
            .consideringOnlyDependenciesInLayers()
            .ensureAllClassesAreContainedInArchitecture()
            // integration-tests' main code: the demos and benchmarks on top of everything
            .layer("Tools").definedBy("io.rdmaplane.it..")
            // the adapters
            .layer("Spark").definedBy("io.rdmaplane.spark..")
            .layer("HDFS").definedBy("io.rdmaplane.hdfs..")
            // common-rdma
            .layer("Doctor").definedBy("io.rdmaplane.rdma.doctor..")
            .layer("Config").definedBy("io.rdmaplane.rdma.config..")
            .layer("Policy").definedBy("io.rdmaplane.rdma.policy..")
            .layer("Format").definedBy("io.rdmaplane.rdma.format..")
            .layer("Memory").definedBy("io.rdmaplane.rdma.memory..")
            .layer("Codec").definedBy("io.rdmaplane.rdma.codec..")
            .layer("SPI").definedBy("io.rdmaplane.rdma.provider")
            .layer("Tcp").definedBy("io.rdmaplane.rdma.provider.tcp..")
            .layer("Verbs").definedBy("io.rdmaplane.rdma.provider.verbs..")

            .whereLayer("Tools").mayNotBeAccessedByAnyLayer()
            // Adapters never name a concrete provider; HDFS has no Arrow blocks (its plug-in jar leaves format out).
            .whereLayer("Spark").mayOnlyAccessLayers("Config", "Policy", "Format", "Memory", "Codec", "SPI")
            .whereLayer("HDFS").mayOnlyAccessLayers("Config", "Policy", "Memory", "Codec", "SPI")
            // The node check reports on the verbs runtime itself (its native library, its devices).
            .whereLayer("Doctor").mayOnlyAccessLayers("Config", "Policy", "Memory", "Codec", "SPI", "Verbs")
            // Each product's registry turns its keys into the options of the layers below.
            .whereLayer("Config").mayOnlyAccessLayers("Policy", "Memory", "SPI")
            .whereLayer("Policy").mayOnlyAccessLayers("Memory", "Codec", "SPI")
            .whereLayer("Format").mayOnlyAccessLayers("Memory", "SPI")
            .whereLayer("Memory").mayOnlyAccessLayers("SPI")
            .whereLayer("Codec").mayNotAccessAnyLayer()
            // The SPI finds providers through ServiceLoader and names none of them.
            .whereLayer("SPI").mayNotAccessAnyLayer()
            .whereLayer("Tcp").mayOnlyAccessLayers("SPI")
            .whereLayer("Verbs").mayOnlyAccessLayers("SPI")
            .because(WHY);

    static final ArchRule DISNI_ONLY_IN_VERBS = noClasses()
            .that().resideOutsideOfPackage("io.rdmaplane.rdma.provider.verbs..")
            .should().dependOnClassesThat().resideInAPackage("com.ibm.disni..")
            .because("design.md: upper layers never see DiSNI; only the verbs provider uses it");

    @Test
    void theMainClassesOfEveryModuleAreRead() {
        for (String name : List.of("io.rdmaplane.rdma.provider.Providers", "io.rdmaplane.rdma.provider.tcp.TcpProvider",
                "io.rdmaplane.rdma.provider.verbs.impl.VerbsNode", "io.rdmaplane.rdma.policy.PolicyClient",
                "io.rdmaplane.rdma.doctor.Doctor", "io.rdmaplane.spark.RdmaShuffleManager",
                "io.rdmaplane.hdfs.datanode.RdmaDataNodePlugin", "io.rdmaplane.it.demo.SparkShuffleDemo")) {
            assertTrue(MAIN.contain(name), name + " among the classes checked");
        }
        assertTrue(MAIN.stream().noneMatch(c -> c.getName().endsWith("Test")), "no test class is checked");
    }

    @Test
    void dependenciesPointDownTheLayers() {
        LAYERS.check(MAIN);
    }

    @Test
    void onlyTheVerbsProviderUsesDisni() {
        DISNI_ONLY_IN_VERBS.check(MAIN);
    }
}

package io.rdmaplane.rdma.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.opentest4j.TestAbortedException;

class SkipTest {
    private final ByteArrayOutputStream err = new ByteArrayOutputStream();
    private PrintStream original;

    @BeforeEach
    void captureStderr() {
        original = System.err;
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    }

    @AfterEach
    void restoreStderr() {
        System.setErr(original);
    }

    private String printed() {
        return err.toString(StandardCharsets.UTF_8);
    }

    @Test
    void aMissingResourceAbortsTheTestAndSaysSoNamingIt() {
        TestAbortedException e = assertThrows(TestAbortedException.class, () -> Skip.unless(false, "no RDMA device here"));
        assertEquals("no RDMA device here", e.getMessage());
        assertEquals("SKIPPED SkipTest.aMissingResourceAbortsTheTestAndSaysSoNamingIt: no RDMA device here" + System.lineSeparator(),
                printed());
    }

    @Test
    void aPresentResourceLetsTheTestRunQuietly() {
        Skip.unless(true, "never printed");
        assertEquals("", printed());
    }

    @Test
    void anExtensionNamesTheTestItself() {
        assertThrows(TestAbortedException.class, () -> Skip.skip("VerbsOnRxeTest", "needs the VM"));
        assertEquals("SKIPPED VerbsOnRxeTest: needs the VM" + System.lineSeparator(), printed());
    }
}

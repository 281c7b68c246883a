package io.rdmaplane.rdma.testing;

import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Assumptions;

/**
 * The one way a test skips itself when a resource it needs is missing here (an RDMA device, the
 * Soft-RoCE VM, a native tool, a packaged jar): it prints {@code SKIPPED <test>: <reason>} to
 * stderr, where every build log shows it, and aborts the test through JUnit's Assumptions, so
 * the report counts it as skipped, not passed. Never a silent early {@code return}.
 */
public final class Skip {
    /** Frames of these packages call test methods; the test code's outermost frame sits just above them. */
    private static final Set<String> CALLER_PACKAGES = Set.of("java.lang.reflect.", "jdk.internal.reflect.", "org.junit.");

    private Skip() {
    }

    /** Skips the calling test unless {@code available}. */
    public static void unless(boolean available, String reason) {
        if (!available) {
            skip(callingTest(), reason);
        }
    }

    /** Skips the calling test. */
    public static void now(String reason) {
        skip(callingTest(), reason);
    }

    /** Skips {@code test} (for extensions, which know the test by name). */
    public static void skip(String test, String reason) {
        System.err.println("SKIPPED " + test + ": " + reason);
        System.err.flush();
        Assumptions.abort(reason);
    }

    /** The test method (or lifecycle method) that called: Class.method of the frame JUnit called. */
    private static String callingTest() {
        Optional<String> test = StackWalker.getInstance().walk(frames -> {
            StackWalker.StackFrame[] last = new StackWalker.StackFrame[1];
            return frames.filter(f -> !f.getClassName().equals(Skip.class.getName()))
                    .dropWhile(f -> {
                        boolean testCode = CALLER_PACKAGES.stream().noneMatch(f.getClassName()::startsWith);
                        if (testCode) {
                            last[0] = f;
                        }
                        return testCode;
                    })
                    .findFirst()
                    .map(junit -> name(last[0]));
        });
        return test.orElse("a test");
    }

    private static String name(StackWalker.StackFrame frame) {
        if (frame == null) {
            return "a test";
        }
        String type = frame.getClassName();
        String method = frame.getMethodName();
        if (method.startsWith("lambda$")) { // lambda$testName$0: a test's lambda that JUnit called
            method = method.substring("lambda$".length(), Math.max("lambda$".length(), method.lastIndexOf('$')));
        }
        return type.substring(type.lastIndexOf('.') + 1) + "." + method;
    }
}

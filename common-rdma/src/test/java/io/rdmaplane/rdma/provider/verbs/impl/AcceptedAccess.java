package io.rdmaplane.rdma.provider.verbs.impl;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * What tests see of a passive end's QPs at the earliest moment a peer could READ them: the access
 * flags each accepted QP has right after rdma_accept (through {@link CmEventLoop#acceptedForTest}),
 * before the provider does anything else with it. Called inside DisniRuntime's loader
 * ({@code DisniTestSupport.call}); one recording at a time.
 */
public final class AcceptedAccess {
    private static final List<Integer> FLAGS = new CopyOnWriteArrayList<>();
    private static final List<IOException> FAILURES = new CopyOnWriteArrayList<>();

    private AcceptedAccess() {
    }

    public static void start() {
        FLAGS.clear();
        FAILURES.clear();
        CmEventLoop.acceptedForTest = id -> {
            try {
                FLAGS.add(NativeCm.remoteAccessFlags(id));
            } catch (IOException e) {
                FAILURES.add(e);
            }
        };
    }

    /** The access flags of each QP accepted since {@link #start}, in order; throws if one could not be queried. */
    public static List<Integer> flags() throws IOException {
        if (!FAILURES.isEmpty()) {
            throw FAILURES.get(0);
        }
        return List.copyOf(FLAGS);
    }

    public static void stop() {
        CmEventLoop.acceptedForTest = null;
    }
}

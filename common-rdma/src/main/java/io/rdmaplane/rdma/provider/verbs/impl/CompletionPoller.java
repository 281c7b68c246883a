package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvCQ;
import com.ibm.disni.verbs.IbvCompChannel;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.SVCPollCq;
import com.ibm.disni.verbs.SVCReqNotify;
import io.rdmaplane.rdma.provider.Status;
import io.rdmaplane.rdma.provider.TransportException;
import io.rdmaplane.rdma.provider.VerbsOptions;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One of a verbs node's completion threads: polls one lane's CQ and hands every work completion
 * to its channel (the channel id is in the wr_id), draining every available completion per turn in
 * batches of {@value #POLL_BATCH}. Three modes ({@link VerbsOptions.Completion}):
 * <ul>
 * <li>event: it sleeps on the completion channel (ibv_req_notify_cq + ibv_get_cq_event) and drains
 * the CQ on each event, then keeps polling for {@link VerbsOptions#completionSpinMicros()} after the
 * last completion before it arms the channel and sleeps again;
 * <li>poll: it busy-polls, trading a core for latency;
 * <li>hybrid: threads waiting for a READ poll the CQ themselves and this thread only sleeps, drains
 * and arms, handing the CQ over through {@link CqPolling}, which also guards every poll.
 * </ul>
 * It stops once the node is closed; if it fails (or a waiter's poll fails), it closes the node.
 */
final class CompletionPoller {
    private static final Logger LOG = LoggerFactory.getLogger(CompletionPoller.class);
    private static final int POLL_BATCH = 32;

    private final VerbsNode node;
    private final IbvCQ cq;
    private final IbvCompChannel completionChannel;
    private final VerbsOptions.Completion mode;
    private final long spinNanos;
    private final IbvWC[] wcs = new IbvWC[POLL_BATCH];
    private final SVCPollCq poll;
    private final SVCReqNotify arm;
    /** Who polls the CQ; in hybrid mode waiting callers take turns with this thread. */
    final CqPolling polling;
    private final Thread thread;
    /** The channel of the last completion: most completions in a row are one channel's, found without a map look-up. */
    private VerbsChannel lastChannel;

    CompletionPoller(VerbsNode node, IbvCQ cq, IbvCompChannel completionChannel, VerbsOptions.Completion mode,
                     VerbsOptions options, String suffix) throws IOException {
        this.node = node;
        this.cq = cq;
        this.completionChannel = completionChannel;
        this.mode = mode;
        this.spinNanos = CqPolling.micros(options.completionSpinMicros());
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new IbvWC();
        }
        SVCPollCq pollCall = cq.poll(wcs, wcs.length);
        SVCReqNotify armCall;
        try {
            armCall = cq.reqNotification(false);
        } catch (IOException | RuntimeException e) {
            pollCall.free();
            throw e;
        }
        this.poll = pollCall;
        this.arm = armCall;
        this.polling = new CqPolling(new CqPolling.Cq() {
            @Override
            public int drain() throws IOException {
                return CompletionPoller.this.drain();
            }

            @Override
            public void arm() throws IOException {
                arm.execute();
            }
        }, CqPolling.micros(options.hybridSpinMicros()), System::nanoTime);
        this.thread = new Thread(this::run, node.name() + suffix);
        thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    Thread thread() {
        return thread;
    }

    /** Whether waiting callers poll this CQ themselves. */
    boolean hybrid() {
        return mode == VerbsOptions.Completion.HYBRID;
    }

    /**
     * Frees the stateful verb calls, once this thread has stopped: first no waiter polls any more
     * ({@link CqPolling#shutdown()}, which waits for one that is delivering).
     */
    void free() {
        polling.shutdown();
        poll.free();
        arm.free();
    }

    private void run() {
        int unacked = 0;
        try {
            if (mode == VerbsOptions.Completion.POLL) {
                while (!node.isClosed()) {
                    if (drain() == 0) {
                        Thread.onSpinWait();
                    }
                }
            } else if (mode == VerbsOptions.Completion.HYBRID) {
                int waitMs = polling.completionTurn(false);
                while (!node.isClosed()) {
                    boolean event = completionChannel.getCqEvent(cq, waitMs);
                    if (event && ++unacked >= 256) {
                        cq.ackEvents(unacked);
                        unacked = 0;
                    }
                    if (!node.isClosed()) {
                        waitMs = polling.completionTurn(event);
                    }
                }
            } else {
                settle();
                while (!node.isClosed()) {
                    if (!completionChannel.getCqEvent(cq, CqPolling.ARMED_WAKE_MS)) {
                        continue; // timeout: look at the closed flag again
                    }
                    if (++unacked >= 256) {
                        cq.ackEvents(unacked);
                        unacked = 0;
                    }
                    settle();
                }
            }
        } catch (Throwable t) {
            failed(t);
        } finally {
            try {
                if (unacked > 0) {
                    cq.ackEvents(unacked);
                }
            } catch (IOException | RuntimeException e) {
                LOG.debug("ibv_ack_cq_events failed", e);
            }
        }
    }

    /** The CQ broke (a poll or an arm failed, on this thread or a waiter's): the node closes. */
    void failed(Throwable t) {
        if (!node.isClosed()) {
            LOG.error("{}: polling the completion queue failed; closing the node", node.name(), t);
            node.failed(t);
            Thread closer = new Thread(node::close, node.name() + "-closer");
            closer.setDaemon(true);
            closer.start();
        }
    }

    /**
     * Drains the CQ and keeps polling until it stayed empty for the spin, then arms the completion
     * channel; a completion that came between the last poll and the arm is drained (and spun after)
     * too, so none waits for an event that will not come.
     */
    private void settle() throws IOException {
        do {
            long idleSince = System.nanoTime();
            while (true) {
                int n = drain();
                long now = System.nanoTime();
                if (n > 0) {
                    idleSince = now;
                } else if (now - idleSince >= spinNanos || node.isClosed()) {
                    break;
                } else {
                    Thread.onSpinWait();
                }
            }
            arm.execute();
        } while (drain() > 0 && !node.isClosed());
    }

    /** Polls until the CQ is empty; returns the number of completions handled. One thread at a time (see CqPolling). */
    private int drain() throws IOException {
        int total = 0;
        while (true) {
            int n = poll.execute().getPolls();
            for (int i = 0; i < n; i++) {
                IbvWC wc = wcs[i];
                long wrId = wc.getWr_id();
                int id = VerbsChannel.channelOf(wrId);
                VerbsChannel channel = lastChannel;
                if (channel == null || channel.id != id || channel.forgotten) {
                    channel = node.channel(id);
                    if (channel == null) {
                        continue; // a completion of a QP already destroyed
                    }
                    lastChannel = channel;
                }
                try {
                    channel.onCompletion(wrId, wc.getStatus(), wc.getByte_len());
                } catch (Throwable e) { // an Error too: that channel goes, the completion thread stays
                    LOG.error("{}: completion handling failed on {}; closing that channel", node.name(), channel, e);
                    channel.terminate(new TransportException(Status.FLUSHED, "internal error: " + e, e), null, Status.FLUSHED);
                }
            }
            total += n;
            if (n < wcs.length) {
                return total;
            }
        }
    }
}

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
 * to its channel (the channel id is in the wr_id). Event-driven by default: it sleeps on the
 * completion channel (ibv_req_notify_cq + ibv_get_cq_event) and drains the CQ on each event,
 * then keeps polling for {@link VerbsOptions#completionSpinMicros()} after the last completion
 * before it arms the channel and sleeps again: a READ posted from a completion callback (or by
 * a caller waiting on the one before) completes within the spin and pays no event wake-up, the
 * seeds' "busy-poll on the latency path, events when idle". Busy-polling instead trades a core
 * for latency. It stops once the node is closed; if it fails, it closes the node.
 */
final class CompletionPoller {
    private static final Logger LOG = LoggerFactory.getLogger(CompletionPoller.class);
    /** Longest sleep on the completion channel before the closed flag is looked at again. */
    private static final int CQ_WAIT_MS = 100;
    private static final int POLL_BATCH = 32;

    private final VerbsNode node;
    private final IbvCQ cq;
    private final IbvCompChannel completionChannel;
    private final boolean busyPoll;
    private final long spinNanos;
    private final Thread thread;

    CompletionPoller(VerbsNode node, IbvCQ cq, IbvCompChannel completionChannel, boolean busyPoll, int spinMicros,
                     String suffix) {
        this.node = node;
        this.cq = cq;
        this.completionChannel = completionChannel;
        this.busyPoll = busyPoll;
        this.spinNanos = spinMicros * 1000L;
        this.thread = new Thread(this::run, node.name() + suffix);
        thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    Thread thread() {
        return thread;
    }

    private void run() {
        IbvWC[] wcs = new IbvWC[POLL_BATCH];
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new IbvWC();
        }
        SVCPollCq poll = null;
        SVCReqNotify arm = null;
        int unacked = 0;
        try {
            poll = cq.poll(wcs, wcs.length);
            if (busyPoll) {
                while (!node.isClosed()) {
                    if (drain(poll, wcs) == 0) {
                        Thread.onSpinWait();
                    }
                }
            } else {
                arm = cq.reqNotification(false);
                settle(poll, wcs, arm);
                while (!node.isClosed()) {
                    if (!completionChannel.getCqEvent(cq, CQ_WAIT_MS)) {
                        continue; // timeout: look at the closed flag again
                    }
                    if (++unacked >= 256) {
                        cq.ackEvents(unacked);
                        unacked = 0;
                    }
                    settle(poll, wcs, arm);
                }
            }
        } catch (Throwable t) {
            if (!node.isClosed()) {
                LOG.error("{}: completion thread failed; closing the node", node.name(), t);
                node.failed(t);
                Thread closer = new Thread(node::close, node.name() + "-closer");
                closer.setDaemon(true);
                closer.start();
            }
        } finally {
            try {
                if (unacked > 0) {
                    cq.ackEvents(unacked);
                }
            } catch (IOException | RuntimeException e) {
                LOG.debug("ibv_ack_cq_events failed", e);
            }
            if (poll != null) {
                poll.free();
            }
            if (arm != null) {
                arm.free();
            }
        }
    }

    /**
     * Drains the CQ and keeps polling until it stayed empty for the spin, then arms the completion
     * channel; a completion that came between the last poll and the arm is drained (and spun after)
     * too, so none waits for an event that will not come.
     */
    private void settle(SVCPollCq poll, IbvWC[] wcs, SVCReqNotify arm) throws IOException {
        do {
            long idleSince = System.nanoTime();
            while (true) {
                int n = drain(poll, wcs);
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
        } while (drain(poll, wcs) > 0 && !node.isClosed());
    }

    /** Polls until the CQ is empty; returns the number of completions handled. */
    private int drain(SVCPollCq poll, IbvWC[] wcs) throws IOException {
        int total = 0;
        while (true) {
            int n = poll.execute().getPolls();
            for (int i = 0; i < n; i++) {
                IbvWC wc = wcs[i];
                long wrId = wc.getWr_id();
                VerbsChannel channel = node.channel(VerbsChannel.channelOf(wrId));
                if (channel == null) {
                    continue; // a completion of a QP already destroyed
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

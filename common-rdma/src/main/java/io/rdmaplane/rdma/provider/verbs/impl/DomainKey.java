package io.rdmaplane.rdma.provider.verbs.impl;

import com.ibm.disni.verbs.IbvMr;
import io.rdmaplane.rdma.provider.Channel;
import io.rdmaplane.rdma.provider.PeerKey;
import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A key of a {@link VerbsDomain}: a registration of exactly its range in the domain's protection domain. It
 * READs through the domain's channels, whichever of them (so it outlives a data-channel reconnect of its
 * peer), and nowhere else; ibv_dereg_mr revokes it.
 */
final class DomainKey implements PeerKey {
    private static final Logger LOG = LoggerFactory.getLogger(DomainKey.class);

    private final VerbsDomain domain;
    private final VerbsRegion region;
    private final IbvMr mr;
    private final int rkey;
    private final long address;
    private final int length;
    private boolean revoked; // guarded by this

    DomainKey(VerbsDomain domain, VerbsRegion region, IbvMr mr, long address, int length) {
        this.domain = domain;
        this.region = region;
        this.mr = mr;
        this.rkey = mr.getRkey();
        this.address = address;
        this.length = length;
    }

    @Override
    public int rkey() {
        return rkey;
    }

    @Override
    public boolean boundToPeer() {
        return true;
    }

    /** Nothing to post: the channel's QP is in the key's protection domain or it is not (then this fails). */
    @Override
    public CompletableFuture<Void> bindTo(Channel channel) {
        if (channel.transport() instanceof VerbsChannel verbs && verbs.domain() == domain) {
            return CompletableFuture.completedFuture(null);
        }
        return CompletableFuture.failedFuture(new IllegalArgumentException(channel + " is no channel of " + domain
                + ", which " + this + " READs through only"));
    }

    /** Any channel of its domain READs with it, the next data channel of the peer as well. */
    @Override
    public boolean rebindable() {
        return true;
    }

    @Override
    public void revoke() {
        synchronized (this) {
            if (revoked) {
                return;
            }
            revoked = true;
            try {
                Verbs.deregister(mr);
            } catch (IOException | RuntimeException e) {
                LOG.warn("ibv_dereg_mr of {} failed: {}", this, e.toString());
            }
        }
        domain.forget(this);
        region.forget(this);
    }

    @Override
    public String toString() {
        return "domain key " + Integer.toUnsignedString(rkey, 16) + " over [0x" + Long.toHexString(address) + ", +" + length
                + ") of " + region;
    }
}

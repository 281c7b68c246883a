package io.rdmaplane.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rdmaplane.rdma.testing.Skip;
import io.rdmaplane.spark.ShuffleMetrics;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * The host ring (README of integration-tests): Spark standalone and HDFS as separate JVMs in their own network
 * namespaces, deployed as users deploy the plug-ins, then section 2's faults of the fault-ring issue on real
 * (virtual) links and real processes, each ending with the baseline's result. Skips, saying why, without root or
 * network namespaces, or when the plug-in jars are not built (mvn test without the package phase).
 *
 * <p>Tagged {@value #TAG}, which the module's default build leaves out: the test command runs it in its own step
 * ({@code integration-tests/ci.sh}), beside the Spark lines' builds. Its ring waits on faults and settles most of the
 * time (28% of a 2-core host on average in a CI run), so the two together take little longer than either alone. Its
 * ring's names are its own ({@link RingSession#RING_PREFIX}): LineDeploymentTest's rings come and go beside it.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Tag(HostRingTest.TAG)
class HostRingTest {
    static final String TAG = "host-ring";

    private static RingSession session;

    @BeforeAll
    static void start() {
        String cause = HostRing.unavailableCause();
        Skip.unless(cause == null, "no host ring here: " + cause);
        RingLines lines;
        try {
            lines = RingLines.fromTestClassPath();
        } catch (IllegalArgumentException e) {
            Skip.now("no host ring: " + e.getMessage());
            return;
        }
        // every process of the ring is killed at this limit: the whole class, with its q3 settles, takes 25 min on a loaded 2-core machine
        session = RingSession.start(lines, Path.of("target/ring"), Duration.ofMinutes(45));
    }

    private static final List<RingSession.Row> ROWS = new ArrayList<>();

    @AfterAll
    static void stop() {
        if (session != null) {
            System.out.println("host ring faults:\n" + RingSession.Row.header());
            ROWS.forEach(r -> System.out.println(r.line()));
            session.close();
        }
    }

    /**
     * Runs {@code fault}; its output equals the baseline's, nothing lost or duplicated, the job did not fail, and once
     * settled every executor and DataNode that lived through it holds no more open descriptors, rdma-* threads and
     * registered bytes than before it. Then the same fault hits the TPC-DS query over HDFS: its rows equal the
     * baseline's (sort shuffle, stock HDFS reader), none lost or duplicated, the query did not fail, its RDMA block
     * count is explained (remote blocks went over RDMA or fell back, or there were none), and the same settle holds
     * after it.
     */
    private static RingSession.Row assertRecovers(RingSession.Fault fault) {
        RingSession.Row row = session.run(fault);
        ROWS.add(row);
        System.out.println("host ring fault:\n" + RingSession.Row.header() + "\n" + row.line());
        assertEquals(0, row.lost(), row.line());
        assertEquals(0, row.duplicated(), row.line());
        assertTrue(row.ok(), row.line() + "\n" + session.cluster.tails());
        assertEquals("", row.leaks(), "resources did not return to their baseline within " + RingSession.SETTLE.toSeconds() + " s:\n" + row.line());
        if (fault.waitsForReads()) {
            assertTrue(row.detail().contains(RingSession.WHILE_READING), "the fault came while every reduce task READ: " + row.line());
        }
        if (RingSession.hitsTheQuery(fault)) {
            assertEquals(RingSession.QUERY, row.query().query(), row.line());
            assertEquals(0, row.query().lost(), row.line());
            assertEquals(0, row.query().duplicated(), row.line());
            assertTrue(row.query().ok(), row.line() + "\n" + session.cluster.tails());
            assertTrue(!row.query().rdmaBlocksNote().startsWith("UNEXPLAINED"), row.line());
            assertEquals("", row.query().leaks(), "resources did not return to their baseline within " + RingSession.SETTLE.toSeconds()
                    + " s after the query:\n" + row.line());
        }
        return row;
    }

    @Test
    @Order(1)
    void everyProcessBindsAndAdvertisesItsOwnHostsAddress() {
        session.assertAddresses();
    }

    @Test
    @Order(2)
    void standaloneShuffleThroughSparkSubmitEqualsSortShuffleOverRdma() {
        DeploymentChecks.assertShuffleEqualsSortOverRdma(session.cluster.workers, session.sortBaseline, session.rdmaBaseline,
                session.reportsAfterBaseline);
    }

    @Test
    @Order(3)
    void hdfsShellCatAndGetReadThroughTheClientPluginBytesEqual() throws Exception {
        session.cluster.hdfsCatAndGet();
    }

    /**
     * The TPC-DS query over tables in the ring's HDFS: under RDMA shuffle with the HDFS client plug-in its rows equal
     * those under sort shuffle with the stock HDFS reader, and the executors fetched its shuffle blocks over RDMA and
     * read its HDFS bytes over RDMA, with no fallback.
     */
    @Test
    @Order(4)
    void tpcdsQueryOverHdfsEqualsSortShuffleAndStockHdfsOverRdma() {
        RingDriver.QueryResult sort = session.sortQuery;
        RingDriver.QueryResult rdma = session.rdmaQuery;
        assertTrue(!sort.failed() && sort.rows() > 0, "baseline " + sort);
        assertTrue(rdma.equalsBaseline(sort), "rdma " + rdma + " against the baseline " + sort);
        RingDriver.Reports before = session.reportsAfterBaseline;
        RingDriver.Reports after = session.reportsAfterQuery;
        assertEquals(before.executors().keySet(), after.executors().keySet(), "the same executors ran the shuffle and the query");
        long blocks = after.sum(ShuffleMetrics.FETCH_RDMA_BLOCKS) - before.sum(ShuffleMetrics.FETCH_RDMA_BLOCKS);
        long hdfsBytes = after.sum("hdfs.client.rdma.bytes") - before.sum("hdfs.client.rdma.bytes");
        System.out.println("ring: " + RingSession.QUERY + " over RDMA: " + blocks + " shuffle blocks READ, " + hdfsBytes + " HDFS bytes READ by "
                + after.executors().size() + " executors (" + rdma.remoteBlocks() + " remote blocks in Spark's task metrics)");
        assertTrue(blocks > 0, "the query's shuffle blocks went over RDMA: " + after);
        assertTrue(hdfsBytes > 0, "the query's HDFS reads went over RDMA: " + after);
        assertEquals(0, after.sum(ShuffleMetrics.FALLBACK_FETCH) - before.sum(ShuffleMetrics.FALLBACK_FETCH), after.toString());
        assertEquals(0, after.sum("hdfs.client.fallbacks") - before.sum("hdfs.client.fallbacks"), after.toString());
    }

    /**
     * Besides recovering, with READs going on in both reduce tasks: nothing fell back to Netty. (Reconnects are only
     * reported: on tcp the data channel heard nothing, and the probe no answer, for longer than the window after the
     * cut, since TCP re-sends what a cut lost only after its retransmission timeout; local runs rebuilt one data
     * channel per executor.)
     */
    @Test
    @Order(10)
    void linkDown150msMidShuffle() {
        RingSession.Row row = assertRecovers(RingSession.Fault.LINK_DOWN_150MS);
        assertEquals(0, row.fallbackFetch(), "a 150 ms cut is ridden out without Netty: " + row.line());
    }

    /** Besides recovering, with READs going on: the silence was seen (a channel went SUSPECT), and reconnecting sufficed. */
    @Test
    @Order(11)
    void linkDown2sMidShuffle() {
        RingSession.Row row = assertRecovers(RingSession.Fault.LINK_DOWN_2S);
        assertTrue(row.suspected() > 0, "a 2 s cut under READs is detected: " + row.line());
        assertEquals(0, row.fallbackFetch(), "a 2 s cut is within the reconnect attempts (about 16 s of backoff): " + row.line());
    }

    @Test
    @Order(12)
    void killExecutorMidRead() {
        assertRecovers(RingSession.Fault.KILL_EXECUTOR);
    }

    @Test
    @Order(13)
    void killDataNodeMidRead() {
        assertRecovers(RingSession.Fault.KILL_DATANODE);
    }

    /**
     * Besides recovering: the links were cut while READs went on in every reduce task, every executor reconnected or
     * fell back, and the reconnect storm shows the jitter applied: at least 2 processes reconnected, their first attempts
     * after the cut did not all start at the same instant, and the delays their backoff planned differ. This is not a
     * timing assertion: no duration is compared with a limit. Without jitter every process plans exactly the backoff's
     * base for its first attempt, whatever the machine's speed; with it, two equal draws (to the microsecond) are a one
     * in tens of thousands chance. So the check holds on any machine, fast or loaded, and fails only when the jitter is
     * not applied (or the flap reached fewer than 2 processes), or when the cut did not meet READs going on in every
     * reduce task.
     */
    @Test
    @Order(14)
    void allLinksFlap1s() {
        RingSession.Row row = assertRecovers(RingSession.Fault.ALL_LINKS_FLAP_1S);
        String storm = row.staleReads();
        assertTrue(storm.contains("neither reconnected nor fell back: []"), "every executor reconnected or fell back: " + row.line());
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(\\d+) process\\(es\\) reconnected").matcher(storm);
        assertTrue(m.find(), storm);
        assertTrue(Integer.parseInt(m.group(1)) >= 2, "at least 2 processes reconnected: " + row.line());
        assertTrue(storm.endsWith("jitter applied: true"), "the reconnect attempts show the jitter: " + row.line());
    }

    @Test
    @Order(15)
    void stopExecutor3s() {
        assertRecovers(RingSession.Fault.STOP_EXECUTOR_3S);
    }

    /**
     * Besides recovering: READs with descriptors the replaced executor handed out, sent to its replacement at the same
     * address and port, each end with an explicit remote access error (the rkey is gone), none delivers bytes, and a
     * new LOCATE of those blocks there serves none of them (they were the old executor's).
     */
    @Test
    @Order(16)
    void executorReplacedAtTheSameAddressAndPort() {
        String stale = assertRecovers(RingSession.Fault.REPLACE_EXECUTOR).staleReads();
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("blocks=(\\d+) reads=(\\d+) delivered=(\\d+) outcomes=\\{([^}]*)} relocated=\\{([^}]*)}")
                .matcher(stale);
        assertTrue(m.find(), stale);
        int reads = Integer.parseInt(m.group(2));
        assertTrue(reads > 0, "the stale reader kept no READ descriptor: " + stale);
        assertEquals(0, Integer.parseInt(m.group(3)), "READs with the old descriptors delivered bytes: " + stale);
        assertEquals("REMOTE_ACCESS_ERROR=" + reads, m.group(4), "every READ with an old descriptor ends with a remote access error: " + stale);
        assertEquals("NotServed=" + m.group(1), m.group(5), "the replacement serves none of the old executor's blocks: " + stale);
    }

    /** Besides recovering, with READs going on: the silence was seen, and past the reconnect attempts blocks went over Netty. */
    @Test
    @Order(17)
    void linkDown30sMidShuffle() {
        RingSession.Row row = assertRecovers(RingSession.Fault.LINK_DOWN_30S);
        assertTrue(row.suspected() > 0, "a 30 s cut under READs is detected: " + row.line());
        assertTrue(row.fallbackFetch() > 0, "past the reconnect attempts, blocks go over Netty: " + row.line());
    }

    /**
     * Besides recovering: a reader's READs of real map outputs pass through a relay process that flips a bit in READ
     * payloads (above TCP's checksum). Bits were flipped, every flip was caught (the tcp wire's CRC32C, or the policy
     * layer's block CRC32C), no READ delivered a block other than what its writer checksummed, and every READ ended
     * with the right bytes (re-issued on a new channel).
     */
    @Test
    @Order(18)
    void bitsFlippedInReadPayloadsAreCaughtAndNeverDelivered() {
        String flips = assertRecovers(RingSession.Fault.FLIP_READ_PAYLOAD).staleReads();
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("flipped=(\\d+).* reads=(\\d+) intact=(\\d+) wrong=(\\d+) failed=\\{([^}]*)} "
                + "caughtByWire=(\\d+) caughtByBlockCrc=(\\d+)").matcher(flips);
        assertTrue(m.find(), flips);
        long flipped = Long.parseLong(m.group(1));
        assertTrue(flipped > 0, "the relay flipped no bit: " + flips);
        assertEquals(0, Integer.parseInt(m.group(4)), "READs delivered wrong blocks: " + flips);
        assertEquals(flipped, Long.parseLong(m.group(6)) + Long.parseLong(m.group(7)), "every flip is caught: " + flips);
        assertEquals("", m.group(5), "every READ ends with the right bytes: " + flips);
        assertEquals(Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3)), flips);
    }

    /**
     * CI's short soak: three rounds of faults drawn (fixed seed, so CI sees the same three: REPLACE_EXECUTOR,
     * LINK_DOWN_150MS, STOP_EXECUTOR_3S) from every fault but the 30 s cut, one after the other on the ring the cases
     * above left, each on the shuffle and on q3, as the soak command runs them: nothing lost or duplicated, no failed job,
     * no round leaked.
     */
    @Test
    @Order(19)
    void aShortSoakOfRandomFaultsLosesNothing() {
        List<RingSession.Fault> faults = java.util.Arrays.stream(RingSession.Fault.values()).filter(f -> f != RingSession.Fault.LINK_DOWN_30S).toList();
        Soak.Summary summary = Soak.rounds(session, faults, 3, Duration.ofMinutes(8), new java.util.Random(1));
        System.out.println("soak: " + summary);
        assertEquals(3, summary.rounds(), summary.toString());
        assertTrue(summary.clean(), summary.toString());
    }
}

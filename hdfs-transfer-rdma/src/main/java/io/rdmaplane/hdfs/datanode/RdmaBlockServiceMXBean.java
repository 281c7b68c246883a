package io.rdmaplane.hdfs.datanode;

/**
 * The RDMA block service of one DataNode as the DataNode's {@code /jmx} shows it, under
 * {@code Hadoop:service=DataNode,name=RdmaBlockService-<xferPort>}. Clients read {@code Port}
 * and {@code State} there to find the service; operators read the rest.
 */
public interface RdmaBlockServiceMXBean {
    /** STARTING, RUNNING, DISABLED, FAILED or STOPPED. */
    String getState();

    /** Why the service failed (to start, or later: its transport died), or empty. */
    String getError();

    /** The port clients connect to; 0 unless RUNNING. */
    int getPort();

    String getProvider();

    long getRequests();

    long getServed();

    long getRefused();

    long getTokenRefused();

    long getRegisteredBytes();

    int getRegions();

    long getRegionsReleased();
}

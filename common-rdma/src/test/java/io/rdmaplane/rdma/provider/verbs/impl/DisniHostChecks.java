package io.rdmaplane.rdma.provider.verbs.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.ibm.disni.util.MemBuf;
import com.ibm.disni.util.NativeAffinity;
import com.ibm.disni.verbs.IbvQP;
import com.ibm.disni.verbs.IbvSendWR;
import com.ibm.disni.verbs.IbvSge;
import com.ibm.disni.verbs.IbvWC;
import com.ibm.disni.verbs.RdmaEventChannel;
import com.ibm.disni.verbs.SVCPostSend;
import com.ibm.disni.verbs.impl.NatIbvQP;
import com.ibm.disni.verbs.impl.NatIbvRecvWR;
import com.ibm.disni.verbs.impl.NatIbvSendWR;
import com.ibm.disni.verbs.impl.NatIbvSge;
import com.ibm.disni.verbs.impl.NativeDispatcher;
import com.ibm.disni.verbs.impl.SockAddrIn;
import java.io.IOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Checks of the native library that need no RDMA device. Loaded and run through
 * {@code DisniRuntime.loader()} (this package is defined by that loader), called from
 * {@code DisniRuntimeTest}. rdma-core's x86_64/aarch64 (LP64) layouts are written out here from
 * {@code <infiniband/verbs.h>}, independently of the library's answers.
 */
public final class DisniHostChecks {

    // struct ibv_send_wr (rdma-core 44, LP64)
    static final int SEND_WR_SIZE = 128;
    static final int SEND_NEXT = 8;
    static final int SEND_SG_LIST = 16;
    static final int SEND_NUM_SGE = 24;
    static final int SEND_OPCODE = 28;
    static final int SEND_FLAGS = 32;
    static final int SEND_REMOTE_ADDR = 40;
    static final int SEND_RKEY = 48;

    private DisniHostChecks() {
    }

    static NativeDispatcher dispatcher() throws Exception {
        Constructor<NativeDispatcher> constructor = NativeDispatcher.class.getDeclaredConstructor();
        constructor.setAccessible(true);
        return constructor.newInstance(); // throws unless _getVersion() == 32
    }

    /** The runtime's loader defines DiSNI and this package; the rest comes from the parent. */
    public static void definedByTheRuntimeLoader(ClassLoader runtimeLoader) {
        assertSame(runtimeLoader, DisniHostChecks.class.getClassLoader());
        assertSame(runtimeLoader, NativeDispatcher.class.getClassLoader());
        assertSame(runtimeLoader, NativeAffinity.class.getClassLoader());
        assertNotEquals(runtimeLoader, org.slf4j.Logger.class.getClassLoader());
        assertSame(runtimeLoader.getParent(), org.slf4j.Logger.class.getClassLoader());
    }

    public static void nativeDispatcherInitialises() throws Exception {
        NativeDispatcher nd = dispatcher();
        assertEquals(32, nd._getVersion());
    }

    /** The probes report rdma-core's real layouts, and DiSNI adopted them. */
    public static void layoutProbesReportRealLayouts() throws Exception {
        NativeDispatcher nd = dispatcher();
        assertEquals(SEND_WR_SIZE, nd._getIbvSendWRSize(), "sizeof(struct ibv_send_wr)");
        assertEquals(32, nd._getIbvRecvWRSize(), "sizeof(struct ibv_recv_wr)");
        assertEquals(16, nd._getIbvSgeSize(), "sizeof(struct ibv_sge)");
        assertEquals(48, nd._getIbvWCSize(), "sizeof(struct ibv_wc)");
        assertEquals(SEND_REMOTE_ADDR, nd._getRemoteAddressOffset(), "offsetof(ibv_send_wr, wr.rdma.remote_addr)");
        assertEquals(SEND_RKEY, nd._getRKeyOffset(), "offsetof(ibv_send_wr, wr.rdma.rkey)");
        assertEquals(16, nd._getSockAddrInSize(), "sizeof(struct sockaddr_in)");

        assertEquals(SEND_WR_SIZE, NatIbvSendWR.CSIZE);
        assertEquals(32, NatIbvRecvWR.CSIZE);
        assertEquals(16, NatIbvSge.CSIZE);
        assertEquals(48, IbvWC.CSIZE);
        assertEquals(SEND_REMOTE_ADDR, NatIbvSendWR.REMOTEADDR_OFFSET);
        assertEquals(SEND_RKEY, NatIbvSendWR.RKEY_OFFSET);
        assertEquals(16, SockAddrIn.CSIZE);
    }

    /**
     * Every native method of NativeDispatcher is linked and answers handle 0 with an
     * IOException or a negative result, never a crash.
     */
    public static int everyNativeMethodRejectsZeroHandles() throws Exception {
        NativeDispatcher nd = dispatcher();
        int called = 0;
        List<String> failures = new ArrayList<>();
        for (Method method : NativeDispatcher.class.getDeclaredMethods()) {
            if (!Modifier.isNative(method.getModifiers())) {
                continue;
            }
            String name = method.getName();
            if (method.getParameterCount() == 0) {
                continue; // the version/layout probes and _createEventChannel, checked elsewhere
            }
            Object[] args = zeros(method.getParameterTypes());
            called++;
            try {
                Object result = method.invoke(nd, args);
                if (name.equals("_ackCmEvent")) {
                    assertEquals(0, result, name); // events are acknowledged in _getCmEvent
                } else if (result instanceof Number) {
                    if (((Number) result).longValue() >= 0) {
                        failures.add(name + " returned " + result + " for handle 0");
                    }
                } else {
                    failures.add(name + " returned normally for handle 0");
                }
            } catch (InvocationTargetException e) {
                if (!(e.getCause() instanceof IOException)) {
                    failures.add(name + " threw " + e.getCause());
                } else if (!e.getCause().getMessage().contains("invalid handle 0")
                        && !e.getCause().getMessage().contains("errno")) {
                    failures.add(name + " threw an unclear message: " + e.getCause().getMessage());
                }
            }
        }
        assertTrue(failures.isEmpty(), String.join("\n", failures));
        return called;
    }

    private static Object[] zeros(Class<?>[] types) {
        Object[] args = new Object[types.length];
        for (int i = 0; i < types.length; i++) {
            Class<?> t = types[i];
            args[i] = t == long.class ? (Object) 0L : t == int.class ? (Object) 0 : t == short.class
                    ? (Object) (short) 0 : t == byte.class ? (Object) (byte) 0 : null;
        }
        return args;
    }

    /**
     * Without RDMA devices, opening an rdma_cm event channel fails with an IOException naming
     * the call; with devices (inside the Soft-RoCE VM) it works and is closed again.
     */
    public static String eventChannelWithoutDevices(boolean devicesPresent) throws Exception {
        if (devicesPresent) {
            RdmaEventChannel channel = RdmaEventChannel.createEventChannel();
            assertNotNull(channel);
            assertEquals(0, channel.destroyEventChannel());
            return "opened and closed an event channel";
        }
        IOException e = assertThrows(IOException.class, RdmaEventChannel::createEventChannel);
        assertTrue(e.getMessage().contains("rdma_create_event_channel failed"), e.getMessage());
        return e.getMessage();
    }

    /**
     * What NatPostSendCall hands to _postSend is a linked list of real struct ibv_send_wr
     * (absolute next and sg_list pointers, fields at rdma-core's offsets), followed by the
     * struct ibv_sge entries; posting it on QP handle 0 is refused with an IOException.
     */
    public static void postSendSerialisesRealWorkRequests() throws Exception {
        dispatcher(); // adopt the layouts, as DiSNI's provider does before any call is built
        IbvQP qp = new NatIbvQP(0, dispatcher());

        List<IbvSendWR> wrs = new ArrayList<>();
        wrs.add(readWr(11L, 0x1000_0000L, 0x1234, new long[] {0x7000_0000L}, new int[] {4096}, new int[] {0x55}));
        wrs.add(readWr(22L, 0x2000_0000L, 0x4321, new long[] {0x7100_0000L, 0x7200_0000L},
                new int[] {100, 200}, new int[] {0x66, 0x77}));
        SVCPostSend call = qp.postSend(wrs, null);
        try {
            Field cmdField = call.getClass().getDeclaredField("cmd");
            cmdField.setAccessible(true);
            MemBuf cmd = (MemBuf) cmdField.get(call);
            long base = cmd.address();
            ByteBuffer buf = cmd.getBuffer().duplicate().order(ByteOrder.nativeOrder());

            long sges = base + 2L * SEND_WR_SIZE;
            checkWr(buf, 0, 11L, base + SEND_WR_SIZE, sges, 1, 0x1000_0000L, 0x1234);
            checkWr(buf, SEND_WR_SIZE, 22L, 0L, sges + 16, 2, 0x2000_0000L, 0x4321);
            int sge0 = 2 * SEND_WR_SIZE;
            checkSge(buf, sge0, 0x7000_0000L, 4096, 0x55);
            checkSge(buf, sge0 + 16, 0x7100_0000L, 100, 0x66);
            checkSge(buf, sge0 + 32, 0x7200_0000L, 200, 0x77);

            // In-place modification (DiSNI's SendWRMod) patches the same native structure.
            call.getWrMod(1).setWr_id(99L);
            call.getWrMod(1).getRdmaMod().setRkey(0xabcd);
            assertEquals(99L, buf.getLong(SEND_WR_SIZE));
            assertEquals(0xabcd, buf.getInt(SEND_WR_SIZE + SEND_RKEY));

            IOException e = assertThrows(IOException.class, call::execute);
            assertTrue(e.getMessage().contains("ibv_post_send: invalid handle 0"), e.getMessage());
        } finally {
            call.free();
        }
    }

    private static IbvSendWR readWr(long id, long remoteAddr, int rkey, long[] addrs, int[] lengths, int[] lkeys) {
        IbvSendWR wr = new IbvSendWR();
        wr.setWr_id(id);
        wr.setOpcode(IbvSendWR.IbvWrOcode.IBV_WR_RDMA_READ.ordinal());
        wr.setSend_flags(IbvSendWR.IBV_SEND_SIGNALED);
        wr.getRdma().setRemote_addr(remoteAddr);
        wr.getRdma().setRkey(rkey);
        for (int i = 0; i < addrs.length; i++) {
            IbvSge sge = new IbvSge();
            sge.setAddr(addrs[i]);
            sge.setLength(lengths[i]);
            sge.setLkey(lkeys[i]);
            wr.getSg_list().add(sge);
        }
        wr.setNum_sge(addrs.length);
        return wr;
    }

    private static void checkWr(ByteBuffer buf, int at, long id, long next, long sgList, int numSge, long remoteAddr,
                                int rkey) {
        assertEquals(id, buf.getLong(at), "wr_id");
        assertEquals(next, buf.getLong(at + SEND_NEXT), "next");
        assertEquals(sgList, buf.getLong(at + SEND_SG_LIST), "sg_list");
        assertEquals(numSge, buf.getInt(at + SEND_NUM_SGE), "num_sge");
        assertEquals(4 /* IBV_WR_RDMA_READ */, buf.getInt(at + SEND_OPCODE), "opcode");
        assertEquals(2 /* IBV_SEND_SIGNALED */, buf.getInt(at + SEND_FLAGS), "send_flags");
        assertEquals(remoteAddr, buf.getLong(at + SEND_REMOTE_ADDR), "wr.rdma.remote_addr");
        assertEquals(rkey, buf.getInt(at + SEND_RKEY), "wr.rdma.rkey");
    }

    private static void checkSge(ByteBuffer buf, int at, long addr, int length, int lkey) {
        assertEquals(addr, buf.getLong(at), "sge.addr");
        assertEquals(length, buf.getInt(at + 8), "sge.length");
        assertEquals(lkey, buf.getInt(at + 12), "sge.lkey");
    }

    /** NativeAffinity reads and sets the calling thread's CPU mask (in a thread of its own). */
    public static void nativeAffinityWorks() throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread thread = new Thread(() -> {
            try {
                long mask = NativeAffinity.getAffinity();
                assertNotEquals(0L, mask, "the thread runs on some CPU");
                long lowest = Long.lowestOneBit(mask);
                NativeAffinity.setAffinity(lowest);
                assertEquals(lowest, NativeAffinity.getAffinity());
                if (Runtime.getRuntime().availableProcessors() < 62) {
                    NativeAffinity.setAffinity(1L << 62); // no such CPU: left unchanged, no exception
                    assertEquals(lowest, NativeAffinity.getAffinity());
                }
                NativeAffinity.setAffinity(mask);
                assertEquals(mask, NativeAffinity.getAffinity());
            } catch (Throwable t) {
                failure.set(t);
            }
        }, "affinity-check");
        thread.setDaemon(true);
        thread.start();
        thread.join(30_000);
        assertFalse(thread.isAlive(), "affinity check did not finish");
        if (failure.get() != null) {
            if (failure.get() instanceof Exception) {
                throw (Exception) failure.get();
            }
            fail(failure.get());
        }
    }
}

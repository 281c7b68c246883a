/*
 * com.ibm.disni.util.NativeAffinity: the CPU affinity of the calling thread as a 64-bit
 * mask (bit i = CPU i). DiSNI's CQ processor threads pin themselves with it.
 */
#define _GNU_SOURCE
#include <sched.h>

#include "disni_native.h"

/* Affinity is a performance hint: a mask naming no usable CPU leaves the thread as it
 * was rather than throwing into a CQ processing thread (the Java method has no way to
 * report a failure and is called at the top of that thread's run()). */
JNIEXPORT void JNICALL Java_com_ibm_disni_util_NativeAffinity__1setAffinity(JNIEnv *env, jclass cls,
                                                                           jlong mask) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu = 0; cpu < 64; cpu++) {
        if (((uint64_t) mask >> cpu) & 1u) {
            CPU_SET(cpu, &set);
        }
    }
    if (CPU_COUNT(&set) > 0) {
        (void) sched_setaffinity(0, sizeof set, &set); /* 0 = the calling thread */
    }
}

/* Returns the calling thread's mask over CPUs 0..63, or 0 if it cannot be read. */
JNIEXPORT jlong JNICALL Java_com_ibm_disni_util_NativeAffinity__1getAffinity(JNIEnv *env, jclass cls) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        return 0;
    }
    uint64_t mask = 0;
    for (int cpu = 0; cpu < 64; cpu++) {
        if (CPU_ISSET(cpu, &set)) {
            mask |= (uint64_t) 1 << cpu;
        }
    }
    return (jlong) mask;
}

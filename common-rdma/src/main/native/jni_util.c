/* Helpers shared by the cm, verbs, layout and affinity parts. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "disni_native.h"

void rp_throw_io(JNIEnv *env, const char *what, int err) {
    if ((*env)->ExceptionCheck(env)) {
        return; /* keep the first exception: it is the more precise one */
    }
    jclass cls = (*env)->FindClass(env, "java/io/IOException");
    if (cls == NULL) {
        return; /* FindClass left NoClassDefFoundError/OutOfMemoryError pending */
    }
    char buf[128];
    char msg[256];
    /* GNU strerror_r: returns a pointer to the message (maybe not into buf). */
    const char *text = strerror_r(err, buf, sizeof buf);
    snprintf(msg, sizeof msg, "%s failed: %s (errno %d)", what, text, err);
    (*env)->ThrowNew(env, cls, msg);
    (*env)->DeleteLocalRef(env, cls);
}

void rp_throw_bad_handle(JNIEnv *env, const char *what) {
    if ((*env)->ExceptionCheck(env)) {
        return;
    }
    jclass cls = (*env)->FindClass(env, "java/io/IOException");
    if (cls == NULL) {
        return;
    }
    char msg[160];
    snprintf(msg, sizeof msg, "%s: invalid handle 0", what);
    (*env)->ThrowNew(env, cls, msg);
    (*env)->DeleteLocalRef(env, cls);
}

int rp_wait_readable(int fd, int timeout_ms) {
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    int n = poll(&pfd, 1, timeout_ms < 0 ? -1 : timeout_ms);
    if (n < 0) {
        return -rp_errno();
    }
    if (n == 0) {
        return -ETIMEDOUT;
    }
    if (pfd.revents & POLLNVAL) {
        return -EBADF; /* the channel was destroyed under us */
    }
    return 0; /* POLLIN, or POLLERR/POLLHUP that the following read will report */
}

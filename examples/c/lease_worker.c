/*
 * A lock-file lease worker written independently of leasequake, in C, and
 * built static (examples/c/build.sh): no C library is loaded at run time,
 * so no preloaded library can move its clock; only a clock moved in its
 * vDSO reaches it. The algorithm is examples/python/lease_worker.py's (the
 * blog's, with atomic acquisition): a lock file holding
 * {"processId": P, "leaseUntil": T}, T compared exactly with the wall
 * clock (clock_gettime(CLOCK_REALTIME)).
 *
 * It speaks leasequake's event protocol (docs/worker-protocol.md): one
 * JSON object per line on file descriptor 3 ($LEASEQUAKE_EVENTS_FD),
 * stamped with CLOCK_MONOTONIC, which the harness shares.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *events;
static volatile sig_atomic_t stopping;

static long long mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* One event: `detail` a JSON object's members, or NULL. */
static void emit_at(long long t_ns, const char *event, const char *fmt, ...) {
    char detail[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    if (fmt)
        fprintf(events, "{\"t_ns\": %lld, \"event\": \"%s\", \"detail\": {%s}}\n", t_ns, event, detail);
    else
        fprintf(events, "{\"t_ns\": %lld, \"event\": \"%s\"}\n", t_ns, event);
    if (fflush(events) != 0)
        exit(1);
}
#define emit(...) emit_at(mono_ns(), __VA_ARGS__)

/* 1 with the lease read, 0 if there is none, -1 if it cannot be read. */
static int read_lease(const char *path, long *holder, double *until) {
    char buf[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *p = strstr(buf, "\"processId\":"), *u = strstr(buf, "\"leaseUntil\":");
    if (!p || !u)
        return -1;
    *holder = strtol(p + 12, NULL, 10);
    *until = strtod(u + 13, NULL);
    return 1;
}

static void write_tmp(const char *tmp, double until) {
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "{\"processId\": %d, \"leaseUntil\": %.6f}", getpid(), until) < 0 || fclose(f) != 0) {
        perror(tmp);
        exit(1);
    }
}

static int try_create(const char *path, const char *tmp, double until) {
    write_tmp(tmp, until);
    int ok = link(tmp, path) == 0;
    unlink(tmp);
    return ok;
}

static void on_stop(int sig) {
    (void)sig;
    stopping = 1;
}

/* Sleep until the monotonic `deadline_ns`, or a stop. */
static void sleep_until(long long deadline_ns) {
    struct timespec t = {deadline_ns / 1000000000LL, deadline_ns % 1000000000LL};
    while (!stopping && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
    }
}

int main(int argc, char **argv) {
    const char *lock = NULL;
    double lease_ms = 9000, renew_ms = 3000, watch_ms = 3000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--lock"))
            lock = argv[i + 1];
        else if (!strcmp(argv[i], "--lease-ms"))
            lease_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--renew-ms"))
            renew_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--watch-ms"))
            watch_ms = atof(argv[i + 1]);
    }
    if (!lock) {
        fprintf(stderr, "usage: lease_worker --lock PATH [--lease-ms N] [--renew-ms N] [--watch-ms N]\n");
        return 2;
    }
    const char *fd = getenv("LEASEQUAKE_EVENTS_FD");
    events = fdopen(fd ? atoi(fd) : 3, "w");
    if (!events)
        return 1;
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", lock, getpid());
    int pid = getpid();
    double lease_s = lease_ms / 1000;

    /* Started: wait for the release, EOF on stdin. */
    emit("ready", NULL);
    char sink[4096];
    while (read(0, sink, sizeof sink) > 0) {
    }

    double until = wall() + lease_s;
    int leading = try_create(lock, tmp, until);
    if (leading)
        emit("acquired", "\"how\": \"start\", \"holder\": %d, \"lease_until\": %.6f, \"expires_in_ms\": %.1f", pid, until,
             lease_ms);
    else
        emit("not_acquired", NULL);
    long long next = mono_ns() + (long long)((leading ? renew_ms : watch_ms) * 1e6);
    while (!stopping) {
        sleep_until(next);
        if (stopping)
            break;
        int was = leading;
        long holder = 0;
        double seen = 0;
        int got = read_lease(lock, &holder, &seen);
        if (leading) {
            if (got == 1 && holder == pid) {
                until = wall() + lease_s;
                write_tmp(tmp, until);
                rename(tmp, lock);
                emit("renewed", "\"holder\": %d, \"lease_until\": %.6f, \"expires_in_ms\": %.1f", pid, until, lease_ms);
            } else {
                emit("renew_failed", "\"error\": \"the lease is held by %ld\"", got == 1 ? holder : 0L);
                leading = 0;
                if (got == 1)
                    emit("stepped_down", "\"reason\": \"other-holder\", \"holder\": %ld", holder);
                else
                    emit("stepped_down", "\"reason\": \"other-holder\"");
            }
        } else if (got == 0) {
            until = wall() + lease_s;
            leading = try_create(lock, tmp, until);
            if (leading)
                emit("acquired", "\"how\": \"retry\", \"holder\": %d, \"lease_until\": %.6f, \"expires_in_ms\": %.1f", pid,
                     until, lease_ms);
            else
                emit("not_acquired", NULL);
        } else if (got < 0) {
            emit("unreadable", "\"error\": \"cannot parse the lease\"");
        } else if (seen < wall()) {
            emit("expired_seen", "\"holder\": %ld", holder);
            unlink(lock);
            until = wall() + lease_s;
            leading = try_create(lock, tmp, until);
            if (leading)
                emit("acquired", "\"how\": \"takeover\", \"holder\": %d, \"lease_until\": %.6f, \"expires_in_ms\": %.1f",
                     pid, until, lease_ms);
            else
                emit("takeover_lost", NULL);
        } else {
            emit("held_by", "\"holder\": %ld, \"lease_until\": %.6f", holder, seen);
        }
        long long now = mono_ns(), step = (long long)((leading ? renew_ms : watch_ms) * 1e6);
        if (was != leading) {
            next = now + step;
        } else {
            next += step;
            while (next <= now) /* ticks missed while stopped are dropped */
                next += step;
        }
    }
    if (leading) {
        /* Leadership ends when the release begins. */
        long long began = mono_ns();
        long holder = 0;
        double seen = 0;
        if (read_lease(lock, &holder, &seen) == 1 && holder == pid)
            unlink(lock);
        emit_at(began, "released", NULL);
    }
    emit("exiting", "\"code\": 0");
    return 0;
}

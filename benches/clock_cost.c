/*
 * What a clock read costs a program (scripts/clock-cost.sh): ns a call of
 * clock_gettime (CLOCK_REALTIME, CLOCK_MONOTONIC), gettimeofday, time and
 * the clock_gettime system call itself, each the least of 7 rounds of
 * 1,000,000 calls. Run as a program under test, it waits for its release
 * (EOF on stdin) before it measures, and for SIGTERM after; it prints
 * "cost NAME NS" lines on stdout.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CALLS 1000000
#define ROUNDS 7

static long long mono(void) {
    struct timespec t;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static volatile long sink;

#define MEASURE(name, call)                                                                                            \
    do {                                                                                                               \
        double best = 1e18;                                                                                            \
        for (int r = 0; r < ROUNDS; r++) {                                                                             \
            long long t0 = mono();                                                                                     \
            for (int i = 0; i < CALLS; i++) {                                                                          \
                call;                                                                                                  \
            }                                                                                                          \
            double ns = (double)(mono() - t0) / CALLS;                                                                 \
            if (ns < best)                                                                                             \
                best = ns;                                                                                             \
        }                                                                                                              \
        printf("cost %s %.1f\n", name, best);                                                                          \
    } while (0)

int main(void) {
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {
    }
    struct timespec ts;
    struct timeval tv;
    MEASURE("clock_gettime_realtime", (clock_gettime(CLOCK_REALTIME, &ts), sink += ts.tv_nsec));
    MEASURE("clock_gettime_monotonic", (clock_gettime(CLOCK_MONOTONIC, &ts), sink += ts.tv_nsec));
    MEASURE("gettimeofday", (gettimeofday(&tv, 0), sink += tv.tv_usec));
    MEASURE("time", (sink += time(0)));
    MEASURE("system_call", (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts), sink += ts.tv_nsec));
    fflush(stdout);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, 0);
    int sig;
    sigwait(&term, &sig);
    return 0;
}

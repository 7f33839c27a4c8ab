/*
 * leasequake's clock shim, preloaded (LD_PRELOAD) into a program under test
 * whose clock the experiment moves. It moves the wall clock only
 * (CLOCK_REALTIME and its variants, gettimeofday, time, timespec_get):
 * the monotonic clock, and with it every sleep and timeout, stays true, as
 * it does on a real machine whose clock is off. libfaketime would do more,
 * and Debian's 0.9.10 breaks Python 3.11 either way: with the monotonic
 * clock left alone time.sleep fails with EINVAL, with it faked threading
 * waits hang.
 *
 * The harness hands the program a control file (LEASEQUAKE_CLOCK) of four
 * 64-bit words: a sequence number, the offset (ns), the anchor (the true
 * wall time, ns, from which the rate applies) and the rate (a double). It
 * rewrites the offset in place when a skew fault jumps the clock, the
 * sequence odd while it writes (a seqlock): a reader retries a torn read.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct control {
    uint64_t seq;
    int64_t offset_ns;
    int64_t anchor_ns;
    double rate;
};

/* The mapping, or (void *)-1 where there is none to be had. */
static struct control *control;
static int (*real_clock_gettime)(clockid_t, struct timespec *);

static struct control *get_control(void) {
    struct control *c = __atomic_load_n(&control, __ATOMIC_ACQUIRE);
    if (c)
        return c == (void *)-1 ? NULL : c;
    const char *path = getenv("LEASEQUAKE_CLOCK");
    void *m = (void *)-1;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        m = mmap(NULL, sizeof(struct control), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            m = (void *)-1;
    }
    /* Two threads racing here map the file twice: harmless. */
    __atomic_store_n(&control, (struct control *)m, __ATOMIC_RELEASE);
    return m == (void *)-1 ? NULL : (struct control *)m;
}

static int true_time(clockid_t clk, struct timespec *ts) {
    if (!real_clock_gettime) {
        int (*f)(clockid_t, struct timespec *) = dlsym(RTLD_NEXT, "clock_gettime");
        if (f)
            __atomic_store_n(&real_clock_gettime, f, __ATOMIC_RELEASE);
        else
            return (int)syscall(SYS_clock_gettime, clk, ts);
    }
    return real_clock_gettime(clk, ts);
}

/* The last settings read whole, for a read that keeps meeting a write
 * (a writer preempted between its words): the clock then keeps its last
 * offset rather than falling back to the true time. */
static int64_t last_offset, last_anchor;
static double last_rate = 1.0;

/* The program's wall time for the true wall time `ns`. */
static int64_t moved(int64_t ns) {
    struct control *c = get_control();
    if (!c)
        return ns;
    int64_t offset = __atomic_load_n(&last_offset, __ATOMIC_RELAXED);
    int64_t anchor = __atomic_load_n(&last_anchor, __ATOMIC_RELAXED);
    double rate = last_rate;
    for (int tries = 0; tries < 100; tries++) {
        uint64_t before = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
        if (before & 1) {
            sched_yield();
            continue;
        }
        int64_t o = __atomic_load_n(&c->offset_ns, __ATOMIC_RELAXED);
        int64_t a = __atomic_load_n(&c->anchor_ns, __ATOMIC_RELAXED);
        double r = c->rate;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&c->seq, __ATOMIC_RELAXED) != before)
            continue;
        offset = o, anchor = a, rate = r;
        __atomic_store_n(&last_offset, o, __ATOMIC_RELAXED);
        __atomic_store_n(&last_anchor, a, __ATOMIC_RELAXED);
        last_rate = r;
        break;
    }
    if (rate != 1.0 && rate > 0.0)
        ns = anchor + (int64_t)((double)(ns - anchor) * rate);
    return ns + offset;
}

static void shift(struct timespec *ts) {
    int64_t ns = moved((int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec);
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000;
        ts->tv_sec -= 1;
    }
}

static int is_wall(clockid_t clk) {
    return clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE || clk == CLOCK_TAI;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    int r = true_time(clk, ts);
    if (r == 0 && is_wall(clk))
        shift(ts);
    return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    if (true_time(CLOCK_REALTIME, &ts) != 0)
        return -1;
    shift(&ts);
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *t) {
    struct timespec ts;
    if (true_time(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    shift(&ts);
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC || true_time(CLOCK_REALTIME, ts) != 0)
        return 0;
    shift(ts);
    return base;
}

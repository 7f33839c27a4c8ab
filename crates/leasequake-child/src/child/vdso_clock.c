/*
 * leasequake's vDSO clock: code the harness writes into a program's vDSO
 * (x86_64) at the moment the program is exec'd, before its first
 * instruction, for programs that read the clock without the C library
 * (Go, static binaries): the vDSO's clock_gettime, gettimeofday and time
 * then jump here. It moves the wall clock exactly as the preloaded shim
 * does (clock_shim.c): CLOCK_REALTIME and its variants by an offset and a
 * rate about an anchor; every other clock stays true.
 *
 * It is built as one flat piece (no loader will relocate it): the head
 * below at offset 0, then the code, all addressed relative to itself. Its
 * data lives in the vDSO's own page, which the program cannot write: the
 * harness writes it through /proc/PID/mem, under the same seqlock as the
 * shim's control file (the sequence odd while it writes).
 *
 * The head, at fixed offsets the harness relies on (vdso.rs):
 *   0  "LQCLOCK1", which marks a process whose vDSO was moved;
 *   8, 16, 24  the entries the vDSO's clock_gettime, gettimeofday and time
 *      jump to;
 *   32 the true clock_gettime (32 bytes): a system call as built; the
 *      harness puts there the vDSO function's first instructions and a
 *      jump back past them, which keeps the vDSO's speed;
 *   64 the settings: sequence, offset (ns), anchor (ns), rate (a double).
 */
#include <stdint.h>

struct ts {
    int64_t sec;
    int64_t nsec;
};

struct tv {
    int64_t sec;
    int64_t usec;
};

struct settings {
    uint64_t seq;
    int64_t offset_ns;
    int64_t anchor_ns;
    double rate;
};

#define HIDDEN __attribute__((visibility("hidden")))

extern volatile struct settings lq_settings HIDDEN;
extern int lq_true_clock(int clk, struct ts *t) HIDDEN;
int lq_clock_gettime(int clk, struct ts *t) HIDDEN;
int lq_gettimeofday(struct tv *tv, void *tz) HIDDEN;
int64_t lq_time(int64_t *t) HIDDEN;

__asm__(".section .text.head,\"ax\",@progbits\n"
        "lq_head:\n"
        "  .ascii \"LQCLOCK1\"\n"
        "  .byte 0xe9\n"
        "  .long lq_clock_gettime - . - 4\n"
        "  .balign 8, 0xcc\n"
        "  .byte 0xe9\n"
        "  .long lq_gettimeofday - . - 4\n"
        "  .balign 8, 0xcc\n"
        "  .byte 0xe9\n"
        "  .long lq_time - . - 4\n"
        "  .balign 8, 0xcc\n"
        "lq_true_clock:\n"
        "  mov $228, %eax\n" /* SYS_clock_gettime */
        "  syscall\n"
        "  ret\n"
        "  .balign 32, 0xcc\n"
        "lq_settings:\n"
        "  .quad 0, 0, 0\n"
        "  .double 1.0\n"
        ".text\n");

enum { REALTIME = 0, REALTIME_COARSE = 5, TAI = 11 };

static int is_wall(int clk) {
    return clk == REALTIME || clk == REALTIME_COARSE || clk == TAI;
}

/* The program's wall time for the true wall time `ns`. A read that keeps
 * meeting a write (the harness preempted between its words) takes what
 * it last read. */
static int64_t moved(int64_t ns) {
    int64_t offset = 0, anchor = 0;
    double rate = 1.0;
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t before = __atomic_load_n(&lq_settings.seq, __ATOMIC_ACQUIRE);
        offset = lq_settings.offset_ns;
        anchor = lq_settings.anchor_ns;
        rate = lq_settings.rate;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (!(before & 1) && __atomic_load_n(&lq_settings.seq, __ATOMIC_RELAXED) == before)
            break;
        __builtin_ia32_pause();
    }
    if (rate != 1.0 && rate > 0.0)
        ns = anchor + (int64_t)((double)(ns - anchor) * rate);
    return ns + offset;
}

static void shift(struct ts *t) {
    int64_t ns = moved(t->sec * 1000000000 + t->nsec);
    t->sec = ns / 1000000000;
    t->nsec = ns % 1000000000;
    if (t->nsec < 0) {
        t->nsec += 1000000000;
        t->sec -= 1;
    }
}

int lq_clock_gettime(int clk, struct ts *t) {
    int r = lq_true_clock(clk, t);
    if (r == 0 && is_wall(clk))
        shift(t);
    return r;
}

int lq_gettimeofday(struct tv *tv, void *tz) {
    struct ts t;
    int r = lq_true_clock(REALTIME, &t);
    if (r != 0)
        return r;
    shift(&t);
    if (tv) {
        tv->sec = t.sec;
        tv->usec = t.nsec / 1000;
    }
    if (tz) {
        /* The kernel's time zone is UTC with no DST here, as the vDSO's
         * own answer is unless someone set it with settimeofday. */
        ((int32_t *)tz)[0] = 0;
        ((int32_t *)tz)[1] = 0;
    }
    return 0;
}

int64_t lq_time(int64_t *out) {
    struct ts t;
    if (lq_true_clock(REALTIME, &t) != 0)
        return -1;
    shift(&t);
    if (out)
        *out = t.sec;
    return t.sec;
}

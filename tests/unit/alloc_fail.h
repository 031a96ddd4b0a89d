/*
 * A test allocator that fails on demand, as Lua's ltests.c does: a count of
 * allocations and a limit, and the allocation that reaches the limit
 * returns NULL. Prefix af_.
 *
 * alloc_fail.c defines malloc, calloc, realloc, reallocarray, free, strdup,
 * strndup, posix_memalign and aligned_alloc in the test program itself, so
 * they stand in for the C library's (or ASan's) everywhere in the process:
 * libweft (linked in statically), json-c and the C library's own callers
 * (duplocale, vasprintf ...) reach them; Lua states reach them through
 * their allocator's realloc. Each calls the next definition
 * (dlsym(RTLD_NEXT)), so the same test runs in the plain build, under
 * valgrind and under ASan/UBSan.
 *
 * Only allocations made while armed (af_arm) count towards the limit, so
 * cmocka and the test's own set-up never fail; all are counted as live
 * until freed, which is how af_run tells a leak.
 */
#ifndef WEFT_TEST_ALLOC_FAIL_H
#define WEFT_TEST_ALLOC_FAIL_H

#include <stddef.h>

/* Count allocations from now on; the fail_at-th one (1-based) returns NULL,
 * and only that one (0: none fails). */
void af_arm(long fail_at);

/* Stop counting. Returns how many allocations were asked for while armed
 * (the failed one included). */
long af_disarm(void);

/* Whether the allocation af_arm named was reached (and failed). */
int af_failed(void);

/* Allocations made and not yet freed, armed or not. */
long af_live(void);

/* Whether every allocation from the failing one on fails (WEFT_AF_STICKY):
 * then nothing made after it can be kept, not even a note of why. */
int af_sticky(void);

/*
 * One call swept by af_run. setup and teardown run unarmed, around every
 * run; call runs armed and returns the call's code; check runs unarmed
 * after it, with that code and whether an allocation failed, and asserts
 * what must hold: with WEFT_ENOMEM, the state setup made (nothing
 * half-applied); with the code of a run where nothing failed, that run's
 * outcome (the failure was absorbed: it returns 1), or another the module
 * allows, a clear failure of what the call was about (it returns 0).
 * setup, check and teardown may be NULL.
 */
typedef struct af_case {
    const char *name;
    void (*setup)(void *ud);
    int (*call)(void *ud);
    int (*check)(void *ud, int rc, int failed);
    void (*teardown)(void *ud);
    /* Optional: called in the first run, where nothing fails, after call
     * and before check, to record the outcome the other runs compare with. */
    void (*baseline)(void *ud, int rc);
} af_case;

/*
 * Run c with nothing failing, then with the n-th allocation failing for
 * n = 1, 2, ... until a run reaches no failing allocation (or n passes the
 * cap: WEFT_AF_MAX in the environment, 0 or unset = none). After every run
 * the code must be the code of the run where nothing failed (0, or the
 * error a call that is refused gives) or WEFT_ENOMEM, check must hold, and
 * after teardown as many allocations must be live as before setup. Returns
 * the number of allocation points tried; prints "af: <name>: <points>
 * allocation points: <n> the same outcome, <n> WEFT_ENOMEM, <n> failed
 * otherwise".
 */
long af_run(const af_case *c, void *ud);

/*
 * For a test's teardown: when an af_run was cut short (an assertion of its
 * check failed, or its call crashed), disarm and print which case and which
 * allocation, so the run can be repeated (WEFT_AF_TRACE=1 prints every
 * allocation point as it is tried).
 */
void af_stopped(void);

#endif

/*
 * The failing allocator of alloc_fail.h. Defining malloc and its kin in
 * the executable makes them the process's: the dynamic linker looks in the
 * executable first, before the C library and before libasan, whose
 * interceptors (strdup's among them) would otherwise allocate without
 * coming here. The real ones are found with dlsym(RTLD_NEXT), which may
 * itself allocate: until they are known, allocations come from a small
 * static arena.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "weft/plugin.h"

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

static _Alignas(max_align_t) char arena[8192];
static size_t arena_used;

static struct {
    int armed;
    int sticky; /* WEFT_AF_STICKY: every allocation from the limit on fails */
    long count; /* allocations asked for while armed */
    long fail_at;
    int failed;
    long live;
} A;

#define AF_RAW __attribute__((no_sanitize("address", "undefined")))

static AF_RAW void *arena_alloc(size_t n)
{
    size_t at = (arena_used + 15) & ~(size_t)15;
    if (n > sizeof arena - at) return NULL;
    arena_used = at + n;
    return arena + at;
}

static AF_RAW int in_arena(const void *p)
{
    return (const char *)p >= arena && (const char *)p < arena + sizeof arena;
}

/* The program is built with -fvisibility=hidden: these must be exported,
 * else the shared libraries (json-c, Lua, the C library) bind to the next
 * allocator and never come here. They are called before ASan has mapped
 * its shadow memory (its own start-up allocates): not instrumented. */
#define AF_EXPORT __attribute__((visibility("default"))) AF_RAW

static AF_RAW int resolve(void)
{
    static int resolving;
    if (real_free) return 1;
    if (resolving) return 0;
    resolving = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    resolving = 0;
    if (!real_malloc || !real_calloc || !real_realloc || !real_free) {
        static const char msg[] = "alloc_fail: the real allocator was not found\n";
        fwrite(msg, 1, sizeof msg - 1, stderr);
        abort();
    }
    return 1;
}

/* Whether this allocation is to fail (counting it when armed). */
static AF_RAW int fails(void)
{
    if (!A.armed) return 0;
    A.count++;
    if (A.fail_at > 0 && (A.count == A.fail_at || (A.sticky && A.count > A.fail_at))) {
        A.failed = 1;
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

static AF_RAW void *counted(void *p)
{
    if (p) __atomic_add_fetch(&A.live, 1, __ATOMIC_RELAXED);
    return p;
}

AF_EXPORT void *malloc(size_t n)
{
    if (!resolve()) return arena_alloc(n);
    if (fails()) return NULL;
    return counted(real_malloc(n));
}

AF_EXPORT void *calloc(size_t n, size_t size)
{
    if (!resolve()) {
        void *p = size && n > SIZE_MAX / size ? NULL : arena_alloc(n * size);
        if (p) memset(p, 0, n * size);
        return p;
    }
    if (fails()) return NULL;
    return counted(real_calloc(n, size));
}

AF_EXPORT void free(void *p)
{
    if (!p || in_arena(p)) return;
    __atomic_sub_fetch(&A.live, 1, __ATOMIC_RELAXED);
    real_free(p);
}

AF_EXPORT void *realloc(void *p, size_t n)
{
    void *r;
    if (!p) return malloc(n);
    if (in_arena(p)) {
        /* only the C library's start-up could own one: move it out */
        if (!(r = malloc(n))) return NULL;
        memcpy(r, p,
               n < (size_t)(arena + sizeof arena - (char *)p)
                   ? n
                   : (size_t)(arena + sizeof arena - (char *)p));
        return r;
    }
    if (n == 0) {
        r = real_realloc(p, 0);
        if (!r) __atomic_sub_fetch(&A.live, 1, __ATOMIC_RELAXED);
        return r;
    }
    if (fails()) return NULL;
    return real_realloc(p, n);
}

AF_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n * size);
}

AF_EXPORT char *strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

AF_EXPORT char *strndup(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

AF_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    int rc;
    resolve();
    if (fails()) return ENOMEM;
    rc = real_posix_memalign(out, align, n);
    if (!rc) counted(*out);
    return rc;
}

AF_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    resolve();
    if (fails()) return NULL;
    return counted(real_aligned_alloc(align, n));
}

void af_arm(long fail_at)
{
    const char *sticky = getenv("WEFT_AF_STICKY");
    A.sticky = sticky && *sticky && strcmp(sticky, "0");
    A.count = 0;
    A.fail_at = fail_at;
    A.failed = 0;
    A.armed = 1;
}

long af_disarm(void)
{
    A.armed = 0;
    return A.count;
}

int af_failed(void)
{
    return A.failed;
}

int af_sticky(void)
{
    return A.sticky;
}

long af_live(void)
{
    return __atomic_load_n(&A.live, __ATOMIC_RELAXED);
}

/* the run under way, for af_stopped */
static struct {
    const char *name;
    long fail_at;
    int rc;
    const char *stage;
} R;

void af_stopped(void)
{
    af_disarm();
    if (R.name)
        fprintf(stderr, "af: %s stopped in its %s with allocation %ld failing (code %d)\n", R.name,
                R.stage, R.fail_at, R.rc);
    R.name = NULL;
}

static long env_long(const char *name)
{
    const char *s = getenv(name);
    return s ? strtol(s, NULL, 10) : 0;
}

/* One run of c with the fail_at-th allocation failing; its code, which must
 * be want (the code of a run where nothing fails; ANY_CODE: not known yet)
 * or WEFT_ENOMEM. *same: whether the outcome was that of a run where
 * nothing failed. */
#define ANY_CODE INT_MIN

static int run_once(const af_case *c, void *ud, long fail_at, int want, int leaks_checked,
                    int *same)
{
    long live = af_live(), n;
    int rc, failed;
    R.name = c->name;
    R.fail_at = fail_at;
    R.rc = 0;
    R.stage = "setup";
    if (c->setup) c->setup(ud);
    R.stage = "call";
    af_arm(fail_at);
    rc = c->call(ud);
    n = af_disarm();
    R.rc = rc;
    failed = af_failed();
    if (want != ANY_CODE && rc != want && !(rc == WEFT_ENOMEM && failed)) {
        R.name = NULL;
        fail_msg("%s: allocation %ld failing (%ld made): code %d, want %d%s", c->name, fail_at, n,
                 rc, want, failed ? " or WEFT_ENOMEM (-2)" : "");
    }
    R.stage = "check";
    if (want == ANY_CODE && c->baseline) c->baseline(ud, rc);
    *same = want == ANY_CODE || rc == want;
    if (c->check && !c->check(ud, rc, failed)) *same = 0;
    R.stage = "teardown";
    if (c->teardown) c->teardown(ud);
    R.name = NULL;
    if (leaks_checked && af_live() != live)
        fail_msg("%s: allocation %ld failing (code %d): %ld blocks leaked", c->name, fail_at, rc,
                 af_live() - live);
    return rc;
}

/* Whether the process's malloc is this file's: valgrind, unless told
 * --soname-synonyms=somalloc=nouserintercepts, puts its own in its place,
 * and a sweep would then pass having failed nothing. */
static int in_effect(void)
{
    void *(*volatile alloc)(size_t) = malloc;
    void *p;
    af_arm(0);
    p = alloc(1);
    free(p);
    return af_disarm() == 1;
}

long af_run(const af_case *c, void *ud)
{
    long max = env_long("WEFT_AF_MAX"), n, same = 0, enomem = 0;
    int trace = env_long("WEFT_AF_TRACE") != 0, want, is_same;
    if (!in_effect())
        fail_msg("%s: the failing allocator is not in effect (under valgrind, run with "
                 "--soname-synonyms=somalloc=nouserintercepts)",
                 c->name);
    /* the first run may make what lives on (a host table, a cache) */
    want = run_once(c, ud, 0, ANY_CODE, 0, &is_same);
    if (want == WEFT_ENOMEM) fail_msg("%s: WEFT_ENOMEM with no allocation failing", c->name);
    run_once(c, ud, 0, want, 1, &is_same);
    if (!is_same) fail_msg("%s: its check does not hold with no allocation failing", c->name);
    for (n = 1; max <= 0 || n <= max; n++) {
        int rc;
        if (trace) fprintf(stderr, "af: %s: allocation %ld fails\n", c->name, n);
        rc = run_once(c, ud, n, want, 1, &is_same);
        if (!af_failed()) break;
        same += is_same;
        enomem += rc == WEFT_ENOMEM;
    }
    n--;
    print_message("af: %s: %ld allocation points: %ld the same outcome, %ld WEFT_ENOMEM, %ld "
                  "failed otherwise\n",
                  c->name, n, same, enomem, n - same - enomem);
    return n;
}

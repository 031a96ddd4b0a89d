/*
 * Tests of ops.c against a real redis-server (skipped when redis-server is
 * not installed): the proof DESIGN.md section 8 asks for, concurrent
 * deciders never corrupt state (fencing), with any lock module, and a lock
 * that cannot be had in time. The lock tests load the lock plugins of the
 * build tree (skipped without WEFT_TOP_BUILDDIR). The fixture is in
 * ops_fixture.h.
 *
 * The proofs: two threads, each with its own connection and op_env, each
 * run op_update 200 times on one execution with a change that reads a
 * counter from the variables, sleeps 100 us and writes counter + 1.
 *   - no lock, fencing on: nothing is lost (400), the races were real;
 *   - no lock, fencing off: updates are lost (the race is real);
 *   - no lock, fencing on, 2 ms changes: still 400 (nobody gives up);
 *   - lock redis / local, fencing on and off: 400, never two changes at
 *     once; lock none, fencing on: 400;
 *   - lock redis expiring under a change (a stale holder): fencing keeps
 *     400, without it updates are lost.
 * Thread bodies assert nothing (cmocka is not thread-safe): they count,
 * and the main thread asserts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "ops_fixture.h"

#define PER_THREAD 200
#define THREADS 2

static pl_registry *R; /* lock plugins; NULL without WEFT_TOP_BUILDDIR */

/* ---- the proofs: concurrent updates of one execution ---- */

typedef struct race {
    const char *id;
    const weft_lock_provider *lock;
    void *handles[THREADS]; /* one per thread (or the same one twice) */
    int unfenced;
    int64_t ttl_ms;      /* lock TTL; 0 = the fixture's (10 s) */
    long hold_ns;        /* how long a change sleeps between read and write */
    atomic_int inside;   /* threads inside the change right now */
    atomic_int overlaps; /* changes that found another one inside */
    atomic_int calls;    /* changes run, redone ones included */
    atomic_int errors;
    char first_error[WEFT_ERROR_MAX];
    pthread_mutex_t mu;
} race;

typedef struct racer {
    race *r;
    int index;
} racer;

static int bump(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud, weft_error *err)
{
    race *r = ud;
    json_object *v;
    int64_t n = 0;
    struct timespec ts = {0, r->hold_ns};
    if (atomic_fetch_add(&r->inside, 1) != 0) atomic_fetch_add(&r->overlaps, 1);
    atomic_fetch_add(&r->calls, 1);
    if (json_object_object_get_ex(x->variables, "counter", &v)) n = json_object_get_int64(v);
    nanosleep(&ts, NULL); /* widen the window between read and write */
    json_object_object_add(x->variables, "counter", json_object_new_int64(n + 1));
    atomic_fetch_sub(&r->inside, 1);
    return 0;
}

static void *racer_main(void *arg)
{
    racer *me = arg;
    race *r = me->r;
    op_env e;
    st_store *conn = open_rs();
    int i;
    if (!conn) {
        atomic_fetch_add(&r->errors, PER_THREAD);
        return NULL;
    }
    env_init(&e, conn);
    e.lock = r->lock;
    e.lock_handle = r->handles[me->index];
    e.unfenced = r->unfenced;
    if (r->ttl_ms) e.lock_ttl_ms = r->ttl_ms;
    for (i = 0; i < PER_THREAD; i++) {
        weft_error err = {0};
        if (op_update(&e, r->id, bump, r, &err)) {
            pthread_mutex_lock(&r->mu);
            if (atomic_fetch_add(&r->errors, 1) == 0)
                snprintf(r->first_error, sizeof r->first_error, "%s", err.msg);
            pthread_mutex_unlock(&r->mu);
        }
    }
    st_free(conn);
    return NULL;
}

typedef struct race_result {
    int64_t counter;
    int calls, overlaps, errors;
    double seconds;
    char first_error[WEFT_ERROR_MAX];
} race_result;

/* Every update counted: none lost silently, none refused. */
static void assert_all_counted(const race_result *r)
{
    if (r->counter != THREADS * PER_THREAD - r->errors)
        fail_msg("%lld updates lost silently (counter %lld, %d refused)",
                 (long long)(THREADS * PER_THREAD - r->errors - r->counter), (long long)r->counter,
                 r->errors);
    if (r->errors)
        fail_msg("op_update gave up on %d of %d updates; first: %s", r->errors,
                 THREADS * PER_THREAD, r->first_error);
    assert_int_equal(r->counter, THREADS * PER_THREAD);
}

/* Run the race on a new execution; the final counter and what happened. */
static race_result run_race_ttl(const weft_lock_provider *lock, void *h0, void *h1, int unfenced,
                                int64_t ttl_ms, long hold_ns, const char *label)
{
    race r;
    racer rc[THREADS];
    pthread_t th[THREADS];
    race_result out;
    char id[64];
    xc_exec *x;
    json_object *v;
    int64_t t0 = wu_mono_ms();
    int i;

    start(NULL, NULL, id);
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    r.id = id;
    r.lock = lock;
    r.handles[0] = h0;
    r.handles[1] = h1;
    r.unfenced = unfenced;
    r.ttl_ms = ttl_ms;
    r.hold_ns = hold_ns;
    for (i = 0; i < THREADS; i++) {
        rc[i].r = &r;
        rc[i].index = i;
        assert_int_equal(pthread_create(&th[i], NULL, racer_main, &rc[i]), 0);
    }
    for (i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&r.mu);

    x = load(id, NULL);
    out.counter =
        json_object_object_get_ex(x->variables, "counter", &v) ? json_object_get_int64(v) : 0;
    assert_int_equal(x->status, WEFT_WF_RUNNING);
    xc_free(x);
    out.calls = atomic_load(&r.calls);
    out.overlaps = atomic_load(&r.overlaps);
    out.errors = atomic_load(&r.errors);
    out.seconds = (double)(wu_mono_ms() - t0) / 1000.0;
    print_message("%-30s counter %lld/%d, changes run %d (redone %d), overlapping %d, "
                  "errors %d, %.2f s\n",
                  label, (long long)out.counter, THREADS * PER_THREAD, out.calls,
                  out.calls - THREADS * PER_THREAD, out.overlaps, out.errors, out.seconds);
    snprintf(out.first_error, sizeof out.first_error, "%s", r.first_error);
    return out;
}

static race_result run_race(const weft_lock_provider *lock, void *h0, void *h1, int unfenced,
                            const char *label)
{
    return run_race_ttl(lock, h0, h1, unfenced, 0, 100000, label);
}

/* (a) No lock, fencing on: no update is lost; the races happened and were redone. */
static void test_race_fenced_no_lock(void **state)
{
    race_result r = run_race(NULL, NULL, NULL, 0, "no lock, fenced:");
    assert_all_counted(&r);
    /* the threads did run changes at the same time: the fence, not luck, kept them apart */
    assert_true(r.overlaps > 0);
    assert_true(r.calls > THREADS * PER_THREAD);
}

/*
 * Fencing alone with slower changes (2 ms, e.g. a decider running Lua):
 * the loser of a race redoes its change; it must not give up while the
 * other keeps winning.
 */
static void test_race_fenced_slow_changes(void **state)
{
    race_result r = run_race_ttl(NULL, NULL, NULL, 0, 0, 2000000, "no lock, fenced, 2 ms changes:");
    assert_all_counted(&r);
}

/* (a') No lock, fencing off: updates are lost. The race is real. */
static void test_race_unfenced_no_lock(void **state)
{
    int attempt;
    for (attempt = 0; attempt < 5; attempt++) {
        race_result r = run_race(NULL, NULL, NULL, 1, "no lock, unfenced:");
        assert_int_equal(r.errors, 0);
        assert_int_equal(r.calls, THREADS * PER_THREAD); /* nothing is ever redone */
        assert_true(r.counter <= THREADS * PER_THREAD);
        if (r.counter < THREADS * PER_THREAD) return;
    }
    fail_msg("5 runs without a lock or fence lost no update: the race was not exercised");
}

static const weft_lock_provider *lock_or_skip(const char *name)
{
    const weft_lock_provider *p = R ? pl_find_lock(R, name) : NULL;
    if (!p) {
        print_message("lock %s not loaded (WEFT_TOP_BUILDDIR unset?): skipped\n", name);
        skip();
    }
    return p;
}

static void *open_lock(const weft_lock_provider *p, const char *config)
{
    weft_error err = {0};
    json_object *cfg = config ? json_tokener_parse(config) : NULL;
    void *h = p->open(host_table(), cfg, &err);
    json_object_put(cfg);
    if (!h) fail_msg("lock %s: open: %s", p->name, err.msg);
    return h;
}

/* A lock alone protects (fencing off), and with fencing on as well. */
static void check_locked(const weft_lock_provider *p, void *h0, void *h1, const char *label)
{
    char l[64];
    int unfenced;
    for (unfenced = 0; unfenced <= 1; unfenced++) {
        race_result r;
        snprintf(l, sizeof l, "lock %s, %s:", label, unfenced ? "unfenced" : "fenced");
        r = run_race(p, h0, h1, unfenced, l);
        assert_int_equal(r.overlaps, 0);
        assert_all_counted(&r);
        /* under the lock nobody else saves in between: nothing is redone */
        assert_int_equal(r.calls, THREADS * PER_THREAD);
    }
}

/* (b) Lock redis: each thread its own handle, as two processes would. */
static void test_race_lock_redis(void **state)
{
    const weft_lock_provider *p = lock_or_skip("redis");
    char cfg[256];
    void *h0, *h1;
    redisReply *x;
    snprintf(cfg, sizeof cfg, "{\"url\":\"%s\",\"prefix\":\"%s\"}", srv.url, PREFIX);
    h0 = open_lock(p, cfg);
    h1 = open_lock(p, cfg);
    check_locked(p, h0, h1, "redis");
    p->close(h0);
    p->close(h1);
    /* every lock was released */
    x = qc("KEYS " PREFIX "lock:*");
    assert_int_equal(x->elements, 0);
    freeReplyObject(x);
}

/*
 * A stale holder: the redis lock expires (TTL 1 ms) while a change still
 * runs (2 ms), so the other thread gets it too, as after a process pause.
 * Fencing keeps every update; without it updates are lost.
 */
static void test_race_lock_redis_expired(void **state)
{
    const weft_lock_provider *p = lock_or_skip("redis");
    char cfg[256];
    void *h0, *h1;
    race_result fenced, unfenced[3];
    int attempt, lost = 0;
    snprintf(cfg, sizeof cfg, "{\"url\":\"%s\",\"prefix\":\"%s\"}", srv.url, PREFIX);
    h0 = open_lock(p, cfg);
    h1 = open_lock(p, cfg);
    fenced = run_race_ttl(p, h0, h1, 0, 1, 2000000, "lock redis expiring, fenced:");
    for (attempt = 0; attempt < 3 && !lost; attempt++) {
        unfenced[attempt] =
            run_race_ttl(p, h0, h1, 1, 1, 2000000, "lock redis expiring, unfenced:");
        lost = unfenced[attempt].counter < THREADS * PER_THREAD;
    }
    p->close(h0);
    p->close(h1);
    assert_true(fenced.overlaps > 0); /* the lock did not keep them apart: the fence did */
    assert_all_counted(&fenced);
    if (!lost) fail_msg("an expiring lock without a fence lost no update in 3 runs");
}

/* (c) Lock local: threads of one process share one lock space. */
static void test_race_lock_local(void **state)
{
    const weft_lock_provider *p = lock_or_skip("local");
    void *h = open_lock(p, NULL);
    check_locked(p, h, h, "local");
    p->close(h);
}

/* Lock none: no exclusion, fencing alone keeps every update. */
static void test_race_lock_none(void **state)
{
    const weft_lock_provider *p = lock_or_skip("none");
    void *h = open_lock(p, NULL);
    race_result r = run_race(p, h, h, 0, "lock none, fenced:");
    p->close(h);
    assert_all_counted(&r);
}

/* A lock that cannot be had within lock_wait_ms: WEFT_ETIMEOUT, no change. */
static void test_lock_timeout(void **state)
{
    const weft_lock_provider *p = lock_or_skip("local");
    void *h = open_lock(p, NULL);
    char id[64], token[64];
    change c = {0, 0, "x"};
    weft_error err = {0};
    uint64_t fence = 0;
    start(NULL, NULL, id);
    assert_int_equal(p->acquire(h, id, 10000, 0, token, sizeof token, &err), 0);
    F.env.lock = p;
    F.env.lock_handle = h;
    F.env.lock_wait_ms = 50;
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), WEFT_ETIMEOUT);
    assert_int_equal(c.calls, 0);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 1);
    assert_int_equal(p->release(h, id, token, &err), 0);
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), 0);
    assert_int_equal(c.calls, 1);
    /* op_update let go of it */
    assert_int_equal(p->acquire(h, id, 10000, 0, token, sizeof token, &err), 0);
    assert_int_equal(p->release(h, id, token, &err), 0);
    F.env.lock = NULL;
    p->close(h);
}

static int load_plugins(void)
{
    const char *top = getenv("WEFT_TOP_BUILDDIR");
    const char *files[] = {"plugins/lock_local/lock_local.la", "plugins/lock_redis/lock_redis.la"};
    char path[4096];
    weft_error err = {0};
    size_t i;
    if (!top || !*top) {
        fprintf(stderr, "WEFT_TOP_BUILDDIR is not set: the lock tests are skipped\n");
        return 0;
    }
    if (!(R = pl_new(host_table()))) return -1;
    for (i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", top, files[i]);
        if (pl_load_file(R, path, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_race_fenced_no_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_fenced_slow_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_unfenced_no_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_lock_redis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_lock_redis_expired, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_lock_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_lock_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_timeout, setup, teardown),
    };
    int rc = opf_start();
    if (rc) return rc;
    if (load_plugins()) {
        pl_free(R);
        opf_stop();
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    pl_free(R);
    opf_stop();
    return rc;
}

/*
 * The store contract (store/store.h), each case written once against st_store *
 * and run for every backend in BACKENDS. A backend's open function gives a
 * fresh, empty store; a row that needs Redis gets the URL of a
 * redis-server this test starts (redis_fixture.h), and is skipped when
 * none is installed. Cases that only hold for one backend say so first.
 *
 * WEFT_STORE_BENCH=1 makes test_bench time 1,000,000 tasks (it prints
 * ns per task; nothing is asserted on the time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc_fail.h"
#include "redis_fixture.h"
#include "fake_redis.h"
#include "core/exec.h"
#include "plugin/host.h"
#include "store/memory.h"
#include "store/redis/backend.h"
#include "store/store.h"

typedef struct backend {
    const char *name;
    /* a fresh, empty store; url: the test's redis-server (NULL when the
     * row does not need one) */
    int (*open)(const char *url, st_store **out, weft_error *err);
    int needs_redis;
} backend;

static int open_memory(const char *url, st_store **out, weft_error *err)
{
    (void)url;
    return st_memory_open(NULL, out, err);
}

static def_env ENV; /* compiles the definitions a store reads back */

/* A redis store on the test's redis-server, emptied (FLUSHALL). */
static int open_redis(const char *url, st_store **out, weft_error *err)
{
    st_redis_opts o = {0};
    int rc;
    o.rs.url = url;
    o.defs = &ENV;
    if ((rc = st_redis_open(&o, out, err)) != 0) return rc;
    return rs_command(st_redis_conn(*out), err, "FLUSHALL");
}

/* A row per backend: every case runs against each. */
static const backend BACKENDS[] = {
    {"memory", open_memory, 0},
    {"redis", open_redis, 1},
};

static const backend *cur;
static const char *cur_url;
static def_workflow *WF;
static st_store *S;

static weft_error e_;

/* executions a case made: freed by the teardown, also after a failure */
static xc_exec *made[400];
static size_t nmade;

#define OK(call)                                                                                   \
    do {                                                                                           \
        int rc_;                                                                                   \
        memset(&e_, 0, sizeof e_);                                                                 \
        if ((rc_ = (call)) < 0) fail_msg("%s: %d %s", #call, rc_, e_.msg);                         \
    } while (0)
/* the call with a fresh error named e_, which the macro's user reads */
#define RC(call) ((void)memset(&e_, 0, sizeof e_), (call))

static void assert_has(const char *s, const char *part)
{
    if (!s || !strstr(s, part)) fail_msg("\"%s\" does not contain \"%s\"", s ? s : "", part);
}

static int setup(void **state)
{
    weft_error err = {0};
    (void)state;
    if (cur->open(cur_url, &S, &err)) fail_msg("open %s: %s", cur->name, err.msg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (state) af_stopped();
    while (nmade)
        xc_free(made[--nmade]);
    st_free(S);
    S = NULL;
    return 0;
}

static int is_memory(void)
{
    return !strcmp(S->ops->name, "memory");
}

static xc_exec *new_exec(const char *id)
{
    weft_error err = {0};
    xc_exec *x = NULL;
    if (xc_new(WF, NULL, id, &x, &err)) fail_msg("xc_new: %s", err.msg);
    assert_true(nmade < sizeof made / sizeof made[0]);
    return made[nmade++] = x;
}

/* Create x (with steps/events, optional); returns c.rc. */
static int create(xc_exec *x, const st_step *steps, size_t nsteps, const char *const *ev,
                  size_t nev)
{
    st_create c;
    memset(&c, 0, sizeof c);
    c.x = x;
    c.steps = steps;
    c.nsteps = nsteps;
    c.events = ev;
    c.nevents = nev;
    OK(ST(S, exec_create_many, &c, 1, &e_));
    return c.rc;
}

static xc_exec *created(const char *id)
{
    xc_exec *x = new_exec(id);
    assert_int_equal(create(x, NULL, 0, NULL, 0), 0);
    return x;
}

/* Load id (the reference is the teardown's to drop). */
static xc_exec *load(const char *id)
{
    xc_exec *x = NULL;
    OK(ST(S, exec_load, id, &x, NULL, &e_));
    assert_true(nmade < sizeof made / sizeof made[0]);
    return made[nmade++] = x;
}

/* Save x at fence with steps/events; returns sv.rc, *fence_out the new fence
 * (x->fence too: a backend need not set it). */
static int save(xc_exec *x, uint64_t fence, const st_step *steps, size_t nsteps,
                const char *const *ev, size_t nev, uint64_t *fence_out)
{
    st_save sv;
    memset(&sv, 0, sizeof sv);
    sv.x = x;
    sv.fence = fence;
    sv.loaded_fence = x->fence;
    sv.steps = steps;
    sv.nsteps = nsteps;
    sv.events = ev;
    sv.nevents = nev;
    OK(ST(S, exec_save_many, &sv, 1, &e_));
    if (fence_out) *fence_out = sv.new_fence;
    if (sv.rc == 0) x->fence = sv.new_fence; /* the saver's copy is current again */
    snprintf(e_.msg, sizeof e_.msg, "%s", sv.why);
    return sv.rc;
}

static st_step push(const char *type, const char *task, int64_t at)
{
    st_step s = {.kind = ST_PUSH, .type = type, .task_id = task, .at = at};
    return s;
}

/* A new execution id, loaded, saved once with steps[0..n): the loaded copy. */
static xc_exec *queued(const char *id, const st_step *steps, size_t n)
{
    xc_exec *x;
    created(id);
    x = load(id);
    if (save(x, x->fence, steps, n, NULL, 0, NULL)) fail_msg("save %s: %s", id, e_.msg);
    return x;
}

static int claim(const char *type, int max, int64_t lease_ms, st_lease *out)
{
    const char *types[1] = {type};
    int n = ST(S, due_claim, 0, 0, 0, NULL, NULL, types, 1, max, lease_ms, out, &e_);
    if (n < 0) fail_msg("claim %s: %s", type, e_.msg);
    return n;
}

static int due(int max, int64_t hold_ms, char (*ids)[64])
{
    int n = -1, rc = ST(S, due_claim, 0, max, hold_ms, ids, &n, NULL, 0, 0, 0, NULL, &e_);
    if (rc < 0) fail_msg("due: %s", e_.msg);
    return n;
}

static void free_list(char **v, size_t n)
{
    while (n)
        free(v[--n]);
    free(v);
}

static void nap(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- executions ---- */

static void test_create_load(void **state)
{
    xc_exec *x = new_exec("wf-1"), *y;
    const char *ids[3] = {"wf-1", "nope", "a|b"};
    int exists[3] = {-1, -1, -1}, rcs[2];
    const char *two[2] = {"wf-1", "nope"};
    xc_exec *got[2] = {NULL, NULL};
    uint64_t fence = 0;
    st_doc d = {0};
    (void)state;
    assert_int_equal(create(x, NULL, 0, NULL, 0), 0);
    assert_int_equal(create(new_exec("wf-1"), NULL, 0, NULL, 0), WEFT_EEXIST);
    OK(ST(S, exec_load, "wf-1", &y, &fence, &e_));
    made[nmade++] = y;
    assert_int_equal(fence, 1);
    assert_int_equal(y->fence, 1);
    assert_string_equal(y->id, "wf-1");
    assert_int_equal(y->status, WEFT_WF_RUNNING);
    assert_null(y->cmd);
    assert_int_equal(RC(ST(S, exec_load, "nope", &y, NULL, &e_)), WEFT_ENOTFOUND);
    assert_int_equal(RC(ST(S, exec_load, "a|b", &y, NULL, &e_)), WEFT_EINVAL);
    OK(ST(S, exec_exists_many, ids, 3, exists, &e_));
    assert_int_equal(exists[0], 1);
    assert_int_equal(exists[1], 0);
    assert_int_equal(exists[2], 0);
    OK(ST(S, exec_load_many, two, 2, got, rcs, &e_));
    assert_int_equal(rcs[0], 0);
    assert_int_equal(rcs[1], WEFT_ENOTFOUND);
    assert_string_equal(got[0]->id, "wf-1");
    xc_free(got[0]);
    OK(ST(S, exec_read, "wf-1", &d, &e_));
    assert_has(d.doc, "\"wf-1\"");
    assert_string_equal(d.status, "RUNNING");
    assert_int_equal(d.fence, 1);
    st_doc_clear(&d);
    assert_int_equal(RC(ST(S, exec_read, "nope", &d, &e_)), WEFT_ENOTFOUND);
    assert_int_equal(ST(S, exec_flush, "wf-1", &e_) >= 0, 1);
}

/* A value as deep as a LAMBDA may return (lua/json.c: 200 levels), as a
 * task's output and the workflow's: the execution reads back, and what
 * readers see of it (its status) too. */
static void test_deep_values(void **state)
{
    xc_exec *x, *y;
    xc_task *t;
    json_object *v = json_object_new_int(1);
    st_doc d = {0};
    int i;
    (void)state;
    for (i = 0; i < 200; i++) {
        json_object *a = json_object_new_array();
        json_object_array_add(a, v);
        v = a;
    }
    created("wf-deep");
    x = load("wf-deep");
    assert_non_null(t = xc_add_task(x, WF->root.tasks[0], 0, 0));
    t->status = WEFT_TASK_COMPLETED;
    t->output = json_object_get(v);
    json_object_put(x->output);
    x->output = v;
    x->status = WEFT_WF_COMPLETED;
    assert_int_equal(save(x, x->fence, NULL, 0, NULL, 0, NULL), 0);
    y = load("wf-deep");
    assert_true(json_object_equal(y->output, v));
    assert_non_null(t = xc_find_ref(y, WF->root.tasks[0]->ref));
    assert_true(json_object_equal(t->output, v));
    OK(ST(S, exec_read, "wf-deep", &d, &e_));
    assert_string_equal(d.status, "COMPLETED");
    st_doc_clear(&d);
}

/* A redis store on a stand-in Redis that answers the first connect, then
 * then (len bytes of RESP), then nothing (a command waits 200 ms). */
static st_store *open_fake(fake_redis *f, const char *then, size_t len)
{
    st_redis_opts o;
    st_store *st = NULL;
    if (fr_start_greeted(f, then, len)) fail_msg("fr_start_greeted");
    memset(&o, 0, sizeof o);
    o.rs.url = f->url;
    o.rs.timeout_ms = 200;
    o.defs = &ENV;
    OK(st_redis_open(&o, &st, &e_));
    return st;
}

/* Redis stops answering between an execution's document and its
 * definition (a restart, a failover): the load fails as Redis did, not as
 * an execution that cannot be read, which would fail the workflow
 * (op_update's exec_fail). Redis only: a stand-in that answers the
 * greeting, the layout and the document, then nothing. */
static void test_def_unanswered(void **state)
{
    static const char doc[] = /* HMGET doc defkey status fence cmd */
        "*5\r\n$2\r\n{}\r\n$2\r\nk1\r\n$7\r\nRUNNING\r\n$1\r\n3\r\n$-1\r\n";
    fake_redis f;
    st_store *st;
    xc_exec *x = NULL;
    uint64_t fence = 0;
    (void)state;
    if (is_memory()) skip();
    st = open_fake(&f, doc, sizeof doc - 1);
    assert_int_equal(RC(ST(st, exec_load, "wf-1", &x, &fence, &e_)), WEFT_EIO);
    assert_int_equal(e_.code, WEFT_EIO);
    assert_has(e_.msg, "stored definition");
    assert_null(x);
    st_free(st);
    fr_stop(&f);
}

/* A search of runs not ended, over a decider queue holding members that
 * are no workflow ids (an integer, an empty string: keys weft did not
 * write): those are passed over, the runs found. Redis only. */
static void test_search_odd_members(void **state)
{
    static const char replies[] =
        "*4\r\n$4\r\nwf-1\r\n:5\r\n$0\r\n\r\n$4\r\nwf-2\r\n" /* ZRANGE of the decider queue */
        "*2\r\n$7\r\nRUNNING\r\n$14\r\n1700:1:5:order\r\n"   /* HMGET status ix of each */
        "*2\r\n$6\r\nPAUSED\r\n$14\r\n1800:1:5:order\r\n";
    static const char *const open[] = {"RUNNING", "PAUSED"};
    fake_redis f;
    st_store *st;
    st_query q;
    st_hit *hits = NULL;
    size_t n = 0;
    long long total = 0;
    (void)state;
    if (is_memory()) skip();
    st = open_fake(&f, replies, sizeof replies - 1);
    memset(&q, 0, sizeof q);
    q.statuses = open;
    q.nstatuses = 2;
    q.size = 10;
    OK(ST(st, search, &q, &total, &hits, &n, &e_));
    assert_int_equal(total, 2);
    assert_int_equal(n, 2);
    assert_string_equal(hits[0].id, "wf-2"); /* the newest first */
    assert_string_equal(hits[1].id, "wf-1");
    free(hits);
    st_free(st);
    fr_stop(&f);
}

static void test_save_fence(void **state)
{
    xc_exec *x;
    uint64_t f = 0;
    st_doc d = {0};
    (void)state;
    created("wf-s");
    x = load("wf-s");
    x->status = WEFT_WF_PAUSED;
    assert_int_equal(save(x, 1, NULL, 0, NULL, 0, &f), 0);
    assert_int_equal(f, 2);
    OK(ST(S, exec_read, "wf-s", &d, &e_));
    assert_string_equal(d.status, "PAUSED");
    assert_int_equal(d.fence, 2);
    st_doc_clear(&d);
    /* a save at the old fence lost the race */
    assert_int_equal(save(x, 1, NULL, 0, NULL, 0, &f), WEFT_ESTATE);
    assert_has(e_.msg, "fence");
    /* unfenced: the last writer wins */
    assert_int_equal(save(x, 0, NULL, 0, NULL, 0, &f), 0);
    assert_int_equal(f, 3);
    assert_int_equal(save(new_exec("nope"), 1, NULL, 0, NULL, 0, &f), WEFT_ENOTFOUND);
}

static void test_command(void **state)
{
    char *pending = NULL, status[32];
    xc_exec *x, *old;
    uint64_t f = 0;
    (void)state;
    created("wf-c");
    old = load("wf-c");
    assert_int_equal(ST(S, exec_command, "wf-c", "t1|pause|why", "pause", &pending, status, &e_),
                     ST_CMD_RECORDED);
    assert_int_equal(ST(S, exec_command, "wf-c", "t2|pause|", "pause", &pending, status, &e_),
                     ST_CMD_SAME);
    assert_string_equal(pending, "t1|pause|why");
    free(pending);
    assert_int_equal(ST(S, exec_command, "wf-c", "t3|resume|", "resume", &pending, status, &e_),
                     ST_CMD_OTHER);
    assert_string_equal(pending, "t1|pause|why");
    free(pending);
    /* terminate overrides a waiting pause */
    assert_int_equal(
        ST(S, exec_command, "wf-c", "t4|terminate|stop", "terminate", &pending, status, &e_),
        ST_CMD_RECORDED);
    assert_null(pending);
    /* a save that did not apply it is refused, fenced or not */
    free(old->cmd);
    old->cmd = NULL;
    assert_int_equal(save(old, 1, NULL, 0, NULL, 0, &f), WEFT_ESTATE);
    assert_has(e_.msg, "operator command");
    assert_int_equal(save(old, 0, NULL, 0, NULL, 0, &f), WEFT_ESTATE);
    {
        st_doc d = {0};
        OK(ST(S, exec_read, "wf-c", &d, &e_));
        assert_string_equal(d.cmd, "t4|terminate|stop");
        st_doc_clear(&d);
    }
    x = load("wf-c");
    assert_string_equal(x->cmd, "t4|terminate|stop");
    x->status = WEFT_WF_TERMINATED;
    assert_int_equal(save(x, 1, NULL, 0, NULL, 0, &f), 0);
    /* an unfenced copy loaded before the command was applied is refused too */
    {
        st_save sv;
        memset(&sv, 0, sizeof sv);
        sv.x = x;
        sv.loaded_fence = 1;
        free(x->cmd);
        x->cmd = NULL;
        OK(ST(S, exec_save_many, &sv, 1, &e_));
        assert_int_equal(sv.rc, WEFT_ESTATE);
        sv.loaded_fence = f;
        OK(ST(S, exec_save_many, &sv, 1, &e_));
        assert_int_equal(sv.rc, 0);
    }
    assert_int_equal(
        RC(ST(S, exec_command, "wf-c", "t5|terminate|", "terminate", &pending, status, &e_)),
        WEFT_ESTATE);
    assert_string_equal(status, "TERMINATED");
    created("wf-r");
    assert_int_equal(RC(ST(S, exec_command, "wf-r", "t6|resume|", "resume", &pending, status, &e_)),
                     WEFT_ESTATE);
    assert_string_equal(status, "RUNNING");
    assert_int_equal(RC(ST(S, exec_command, "nope", "t7|pause|", "pause", &pending, status, &e_)),
                     WEFT_ENOTFOUND);
}

static void test_exec_fail(void **state)
{
    char ids[4][64];
    st_doc d = {0};
    (void)state;
    created("wf-f");
    assert_int_equal(RC(ST(S, exec_fail, "wf-f", 7, "broken", &e_)), WEFT_ESTATE);
    OK(ST(S, exec_fail, "wf-f", 1, "broken document", &e_));
    OK(ST(S, exec_read, "wf-f", &d, &e_));
    assert_string_equal(d.status, "FAILED");
    assert_int_equal(d.fence, 2);
    assert_has(d.doc, "broken document");
    st_doc_clear(&d);
    /* nothing waits on it: off the decider queue */
    assert_int_equal(due(4, 60000, ids), 0);
    assert_int_equal(RC(ST(S, exec_fail, "nope", 0, "x", &e_)) < 0, 1);
    /* refused before anything is written: nothing it made is left (LSan) */
    assert_int_equal(RC(ST(S, exec_fail, "a|b", 1, "x", &e_)), WEFT_EINVAL);
}

/* ---- the execution index ---- */

/* A run made for the index: created at start ms with a correlation id. */
static xc_exec *run_at(const char *id, int64_t start, const char *corr)
{
    xc_exec *x = new_exec(id);
    x->created_ms = start;
    x->correlation_id = corr ? strdup(corr) : NULL;
    assert_int_equal(create(x, NULL, 0, NULL, 0), 0);
    return x;
}

/* x ended with status st at end ms, saved. */
static void end_run(xc_exec *x, weft_wf_status st, int64_t end)
{
    x->status = st;
    x->ended_ms = end;
    assert_int_equal(save(x, x->fence, NULL, 0, NULL, 0, NULL), 0);
}

/* The ids q finds, space-separated, into buf; returns the total. */
static long long found(st_query *q, char *buf, size_t cap)
{
    st_hit *h = NULL;
    size_t n = 0, i;
    long long total = -1;
    OK(ST(S, search, q, &total, &h, &n, &e_));
    buf[0] = 0;
    for (i = 0; i < n; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? " " : "", h[i].id);
    free(h);
    return total;
}

static void test_search(void **state)
{
    int64_t t = wu_now_ms() - 60000;
    const char *failed[] = {"FAILED"}, *done[] = {"COMPLETED", "FAILED"}, *running[] = {"RUNNING"};
    const char *names[] = {"order"}, *other[] = {"nothing"};
    char ids[256];
    st_query q;
    xc_exec *a, *b;
    (void)state;
    a = run_at("wf-a", t + 1000, "corr-1");
    b = run_at("wf-b", t + 2000, "corr-2");
    run_at("wf-c", t + 3000, "corr-1");
    run_at("wf-d", t + 4000, NULL);
    end_run(a, WEFT_WF_COMPLETED, t + 5000);
    end_run(b, WEFT_WF_FAILED, t + 4500);

    memset(&q, 0, sizeof q);
    q.size = 10;
    assert_int_equal(found(&q, ids, sizeof ids), 4);
    assert_string_equal(ids, "wf-d wf-c wf-b wf-a"); /* newest first */
    q.asc = 1;
    q.start = 1;
    q.size = 2;
    assert_int_equal(found(&q, ids, sizeof ids), 4);
    assert_string_equal(ids, "wf-b wf-c"); /* a page */
    q.start = 0;
    q.size = 0;
    assert_int_equal(found(&q, ids, sizeof ids), 4);
    assert_string_equal(ids, "");

    memset(&q, 0, sizeof q);
    q.size = 10;
    q.statuses = failed;
    q.nstatuses = 1;
    assert_int_equal(found(&q, ids, sizeof ids), 1);
    assert_string_equal(ids, "wf-b");
    q.statuses = running;
    assert_int_equal(found(&q, ids, sizeof ids), 2);
    assert_string_equal(ids, "wf-d wf-c");
    q.names = names; /* both filters: each record read */
    q.nnames = 1;
    assert_int_equal(found(&q, ids, sizeof ids), 2);
    q.names = other;
    assert_int_equal(found(&q, ids, sizeof ids), 0);

    memset(&q, 0, sizeof q);
    q.size = 10;
    q.correlation_id = "corr-1";
    assert_int_equal(found(&q, ids, sizeof ids), 2);
    assert_string_equal(ids, "wf-c wf-a");
    q.correlation_id = NULL;
    q.free_text = "wf-b";
    assert_int_equal(found(&q, ids, sizeof ids), 1);
    q.free_text = "corr-2";
    assert_int_equal(found(&q, ids, sizeof ids), 1);
    assert_string_equal(ids, "wf-b");
    q.free_text = "corr";
    assert_int_equal(found(&q, ids, sizeof ids), 0); /* exact, not a prefix */

    memset(&q, 0, sizeof q);
    q.size = 10;
    q.start_after = t + 1000; /* exclusive */
    q.start_before = t + 4000;
    assert_int_equal(found(&q, ids, sizeof ids), 2);
    assert_string_equal(ids, "wf-c wf-b");
    q.start_after = q.start_before = 0;
    q.version = 2;
    assert_int_equal(found(&q, ids, sizeof ids), 0);
    q.version = 1;
    assert_int_equal(found(&q, ids, sizeof ids), 4);

    /* by end time: the ended ones, in the order they ended */
    memset(&q, 0, sizeof q);
    q.size = 10;
    q.statuses = done;
    q.nstatuses = 2;
    q.by_end = 1;
    q.asc = 1;
    assert_int_equal(found(&q, ids, sizeof ids), 2);
    assert_string_equal(ids, "wf-b wf-a");

    /* made to run again: RUNNING in the index, FAILED no more */
    b->status = WEFT_WF_RUNNING;
    b->ended_ms = 0;
    b->revived = 1;
    assert_int_equal(save(b, b->fence, NULL, 0, NULL, 0, NULL), 0);
    b->revived = 0;
    memset(&q, 0, sizeof q);
    q.size = 10;
    q.statuses = failed;
    q.nstatuses = 1;
    assert_int_equal(found(&q, ids, sizeof ids), 0);
    q.statuses = running;
    assert_int_equal(found(&q, ids, sizeof ids), 3);

    /* a page past the limit */
    memset(&q, 0, sizeof q);
    q.start = ST_SEARCH_MAX;
    q.size = 1;
    {
        st_hit *h = NULL;
        size_t n = 0;
        long long total;
        assert_int_equal(RC(ST(S, search, &q, &total, &h, &n, &e_)), WEFT_EINVAL);
        assert_has(e_.msg, "at most 10000");
    }
}

/* A run not ended whose correlation id is long (here 3000 bytes) is found by
 * it, as an ended one is. */
static void test_search_long_correlation(void **state)
{
    char corr[3001], ids[64];
    st_query q;
    (void)state;
    memset(corr, 'c', sizeof corr - 1);
    corr[sizeof corr - 1] = 0;
    run_at("wf-lc", wu_now_ms() - 1000, corr);
    memset(&q, 0, sizeof q);
    q.size = 10;
    q.correlation_id = corr;
    assert_int_equal(found(&q, ids, sizeof ids), 1);
    assert_string_equal(ids, "wf-lc");
}

/* A run whose document could not be read is failed: its index entry keeps
 * what the create gave it. */
static void test_search_failed_unread(void **state)
{
    const char *failed[] = {"FAILED"};
    char ids[64];
    st_query q;
    (void)state;
    run_at("wf-u", wu_now_ms() - 1000, "corr-u");
    OK(ST(S, exec_fail, "wf-u", 1, "broken", &e_));
    memset(&q, 0, sizeof q);
    q.size = 10;
    q.statuses = failed;
    q.nstatuses = 1;
    q.correlation_id = "corr-u";
    assert_int_equal(found(&q, ids, sizeof ids), 1);
    assert_string_equal(ids, "wf-u");
}

/* The runs of status a search finds (a page of 10 into ids); the total. */
static long long of_status(const char *status, char *ids, size_t cap)
{
    const char *one[1] = {status};
    st_query q;
    memset(&q, 0, sizeof q);
    q.size = 10;
    q.statuses = one;
    q.nstatuses = 1;
    return found(&q, ids, cap);
}

/* Redis: x's index entry of status (end ms; 0: made to run again) at fence 1
 * put in its outbox, as if left there, and applied. */
static void step_late(const xc_exec *x, const char *status, long long end)
{
    OK(rs_command(st_redis_conn(S), &e_, "ZADD weft:{%s}:out 1 1|index|%s||%lld|%lld:1:5:order",
                  x->id, status, end, (long long)x->created_ms));
    assert_int_equal(RC(ST(S, exec_flush, x->id, &e_)), 1);
}

/* Redis: an index step applied late (an older fence, from an outbox a
 * sweep applies after a newer save's steps) changes nothing. */
static void test_search_stale_step(void **state)
{
    char ids[64];
    xc_exec *x;
    (void)state;
    if (is_memory()) skip();
    x = run_at("wf-s", wu_now_ms() - 1000, NULL);
    end_run(x, WEFT_WF_COMPLETED, wu_now_ms());
    step_late(x, "RUNNING", 0); /* the create's entry again, as if left in the outbox */
    assert_int_equal(of_status("RUNNING", ids, sizeof ids), 0);
}

/* Redis: an end step applied after its run's time is up (its keys gone) is
 * not indexed, though an end still in its time heads the index's list of
 * ends (it would be trimmed only after that one). */
static void test_search_late_end(void **state)
{
    char ids[64];
    xc_exec *x;
    (void)state;
    if (is_memory()) skip();
    x = run_at("wf-live", wu_now_ms() - 1000, NULL);
    end_run(x, WEFT_WF_COMPLETED, wu_now_ms());
    x = run_at("wf-late", wu_now_ms() - 1000, NULL);
    step_late(x, "COMPLETED", 1000); /* its end at 1970-01-01T00:00:01Z, applied now */
    assert_int_equal(of_status("COMPLETED", ids, sizeof ids), 1);
    assert_string_equal(ids, "wf-live");
}

/* Redis: a run's index step refused as it ends (here the index key holds
 * another type) is kept and the run made due again, though its DONE took
 * it off the decider queue: the sweep that comes applies it (found by
 * helper-23: the entry stayed RUNNING for good). */
static void test_search_step_refused(void **state)
{
    const char *running[] = {"RUNNING"}, *completed[] = {"COMPLETED"};
    char ids[4][64], found_ids[64];
    st_step done = {.kind = ST_DONE};
    st_query q;
    xc_exec *x;
    (void)state;
    if (is_memory()) skip();
    x = run_at("wf-r", wu_now_ms() - 1000, NULL);
    assert_int_equal(due(4, 60000, ids), 1); /* taken, and held a minute */
    /* the index's log another type: the step's RPUSH is refused */
    OK(rs_command(st_redis_conn(S), &e_, "SET weft:{dq}:ix:log not-a-list"));
    x->status = WEFT_WF_COMPLETED;
    x->ended_ms = wu_now_ms();
    assert_int_equal(save(x, x->fence, &done, 1, NULL, 0, NULL), 0);
    /* due again at once, for its outbox */
    assert_int_equal(due(4, 60000, ids), 1);
    assert_string_equal(ids[0], "wf-r");
    OK(rs_command(st_redis_conn(S), &e_, "DEL weft:{dq}:ix:log"));
    assert_true(RC(ST(S, exec_flush, "wf-r", &e_)) >= 1);
    memset(&q, 0, sizeof q);
    q.size = 10;
    q.statuses = completed;
    q.nstatuses = 1;
    assert_int_equal(found(&q, found_ids, sizeof found_ids), 1);
    q.statuses = running;
    assert_int_equal(found(&q, found_ids, sizeof found_ids), 0);
}

/* n runs "<prefix><i>" started and COMPLETED a second ago (Redis: each end
 * one entry on the index's log). */
static void ended_runs(const char *prefix, int n)
{
    char id[64];
    int i;
    for (i = 0; i < n; i++) {
        xc_exec *x;
        snprintf(id, sizeof id, "%s%d", prefix, i);
        x = run_at(id, wu_now_ms() - 1000, i % 2 ? "corr-f" : NULL);
        end_run(x, WEFT_WF_COMPLETED, wu_now_ms());
    }
}

static long long completed_runs(void)
{
    char ids[1024];
    return of_status("COMPLETED", ids, sizeof ids);
}

/* The newest (or oldest) of several sets, by start: 60 COMPLETED runs newer
 * than 5 TERMINATED, newer than 20 FAILED; pages of 45 and 30 come out in
 * order though one set holds most of a page (Redis reads a few of each set
 * first, then more of the sets that could hold more). */
static void test_search_merge(void **state)
{
    static const struct {
        const char *prefix;
        weft_wf_status st;
        int n, at;
    } runs[3] = {{"c", WEFT_WF_COMPLETED, 60, 1000},
                 {"x", WEFT_WF_TERMINATED, 5, 500},
                 {"f", WEFT_WF_FAILED, 20, 0}};
    int64_t t = wu_now_ms() - 60000;
    char ids[2048], want[2048] = "", id[32];
    st_query q;
    int i, k;
    (void)state;
    for (k = 0; k < 3; k++)
        for (i = 0; i < runs[k].n; i++) {
            xc_exec *x;
            snprintf(id, sizeof id, "%s%02d", runs[k].prefix, i);
            x = run_at(id, t + runs[k].at + i, NULL);
            end_run(x, runs[k].st, t + 2000);
        }
    memset(&q, 0, sizeof q);
    q.size = 45;
    assert_int_equal(found(&q, ids, sizeof ids), 85);
    for (i = 59; i >= 15; i--)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%sc%02d", i < 59 ? " " : "", i);
    assert_string_equal(ids, want);
    q.size = 30;
    q.asc = 1;
    assert_int_equal(found(&q, ids, sizeof ids), 85);
    want[0] = 0;
    for (i = 0; i < 30; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s%02d", i ? " " : "",
                 i < 20   ? "f"
                 : i < 25 ? "x"
                          : "c",
                 i < 20   ? i
                 : i < 25 ? i - 20
                          : i - 25);
    assert_string_equal(ids, want);
}

/* What one decider's poll folded into the index: the runs a search finds
 * once the log it left is gone (a search would fold the rest). */
static long long folded_by_a_poll(void)
{
    char ids[4][64];
    due(4, 0, ids);
    OK(rs_command(st_redis_conn(S), &e_, "DEL weft:{dq}:ix:log"));
    return completed_runs();
}

/* Redis: a decider's poll folds the index's log into the index once 64 ends
 * wait there (fewer wait for a search): with the log gone after the poll,
 * the index still has the 64; the 10 of a log below that are lost with it. */
static void test_search_folded_by_due(void **state)
{
    (void)state;
    if (is_memory()) skip();
    ended_runs("wf-few", 10);
    assert_int_equal(folded_by_a_poll(), 0);
    ended_runs("wf-fold", 64);
    assert_int_equal(folded_by_a_poll(), 64);
}

/* 70 runs ended, a poll's fold of their index entries failed (a key of the
 * index another type; the poll still answers), the key mended. */
static void fold_broken(void)
{
    char ids[4][64];
    ended_runs("wf-fb", 70);
    OK(rs_command(st_redis_conn(S), &e_, "SET weft:{dq}:ix:sets not-a-set"));
    assert_int_equal(due(4, 0, ids), 4); /* (ended, but no DONE step saved) */
    OK(rs_command(st_redis_conn(S), &e_, "DEL weft:{dq}:ix:sets"));
}

/* Redis: a poll folds at most 256 ends (a fold blocks Redis while it runs):
 * with the log gone after one poll, the index has 256 of 300. */
static void test_search_fold_capped(void **state)
{
    (void)state;
    if (is_memory()) skip();
    ended_runs("wf-cap", 300);
    assert_int_equal(folded_by_a_poll(), 256);
}

/* Redis: after a fold failed, the polls of the next minute fold nothing
 * (each would redo the work and fail again): the log gone after one, the
 * index has none of the 70. */
static void test_search_fold_backs_off(void **state)
{
    (void)state;
    if (is_memory()) skip();
    fold_broken();
    /* the failure kept for a minute (an error reply fails the command) */
    OK(rs_command(st_redis_conn(S), &e_, "EVAL %s 1 weft:{dq}:ix:fold_error",
                  "local t = redis.call('PTTL', KEYS[1]) "
                  "if t > 55000 and t <= 60000 then return 1 end "
                  "return redis.error_reply('fold_error PTTL ' .. t)"));
    assert_int_equal(folded_by_a_poll(), 0);
}

/* Redis: a fold that fails (a key of the index another type) neither stops
 * the deciders' polls (due.lua would fail with it) nor loses the ends
 * waiting: the search after the key is mended finds every one. */
static void test_search_fold_fails(void **state)
{
    (void)state;
    if (is_memory()) skip();
    fold_broken();
    assert_int_equal(completed_runs(), 70);
}

static void test_task_log(void **state)
{
    const char *lines[3] = {"{\"log\":\"one\"}", "{\"log\":\"two\"}", "{\"log\":\"three\"}"};
    char *got = NULL;
    int i;
    (void)state;
    created("wf-l");
    OK(ST(S, task_log, "wf-l", "t1", &got, &e_));
    assert_string_equal(got, "");
    free(got);
    OK(ST(S, task_log_add, "wf-l", "t1", lines, 2, &e_));
    OK(ST(S, task_log_add, "wf-l", "t1", lines + 2, 1, &e_));
    OK(ST(S, task_log, "wf-l", "t1", &got, &e_));
    assert_string_equal(got, "{\"log\":\"one\"}\n{\"log\":\"two\"}\n{\"log\":\"three\"}");
    free(got);
    OK(ST(S, task_log, "wf-l", "t2", &got, &e_)); /* another task's: none */
    assert_string_equal(got, "");
    free(got);
    for (i = 0; i < ST_LOG_LINES_MAX; i++)
        OK(ST(S, task_log_add, "wf-l", "t1", lines + 1, 1, &e_));
    OK(ST(S, task_log, "wf-l", "t1", &got, &e_));
    assert_null(strstr(got, "one")); /* the oldest went */
    assert_null(strstr(got, "three"));
    free(got);
    assert_int_equal(RC(ST(S, task_log_add, "nope", "t1", lines, 1, &e_)), WEFT_ENOTFOUND);
    assert_int_equal(RC(ST(S, task_log_add, "wf-l", "t1", (const char *[]){"a\nb"}, 1, &e_)),
                     WEFT_EINVAL);
}

/* ---- work queues ---- */

static void test_claim_order(void **state)
{
    int64_t now = wu_now_ms();
    st_step sp[3] = {push("T1", "a", now - 100), push("T1", "b", now - 300),
                     push("T1", "c", now + 60000)};
    st_lease l[4];
    long long ready = -1, leased = -1;
    (void)state;
    queued("wf-q", sp, 3);
    OK(ST(S, queue_sizes, "T1", &ready, &leased, &e_));
    assert_int_equal(ready, 3);
    assert_int_equal(leased, 0);
    assert_int_equal(claim("T1", 4, 60000, l), 2);
    assert_string_equal(l[0].task_id, "b");
    assert_string_equal(l[1].task_id, "a");
    assert_string_equal(l[0].workflow_id, "wf-q");
    assert_string_equal(l[0].type, "T1");
    assert_true(l[0].lease[0] && strcmp(l[0].lease, l[1].lease));
    OK(ST(S, queue_sizes, "T1", &ready, &leased, &e_));
    assert_int_equal(ready, 1);
    assert_int_equal(leased, 2);
    assert_int_equal(ST(S, queue_has, "T1", "wf-q", "a", &e_), 1);
    assert_int_equal(ST(S, queue_has, "T1", "wf-q", "c", &e_), 1);
    assert_int_equal(ST(S, queue_has, "T1", "wf-q", "zz", &e_), 0);
    assert_int_equal(ST(S, queue_has, "T2", "wf-q", "a", &e_), 0);
    assert_int_equal(claim("T1", 4, 60000, l), 0);
    OK(ST(S, queue_sizes, "none", &ready, &leased, &e_));
    assert_int_equal(ready + leased, 0);
}

/* A push with queue controls (store.h). */
static st_step ctl_push(const char *type, const char *task, int64_t at, int prio, const char *name,
                        const def_qlimit *lim)
{
    st_step s = push(type, task, at);
    s.priority = prio;
    s.limit_name = name;
    s.limit = lim;
    return s;
}

static void assert_sizes(const char *type, long long want_ready, long long want_leased)
{
    long long ready = -1, leased = -1;
    OK(ST(S, queue_sizes, type, &ready, &leased, &e_));
    if (ready != want_ready || leased != want_leased)
        fail_msg("%s: %lld ready, %lld leased; want %lld, %lld", type, ready, leased, want_ready,
                 want_leased);
}

/* Priority: among visible members the higher first, FIFO within one; a
 * member not yet visible waits whatever its priority. */
static void test_priority_order(void **state)
{
    int64_t now = wu_now_ms();
    st_step sp[6] = {ctl_push("P", "a", now - 50, 0, NULL, NULL),
                     ctl_push("P", "b", now - 40, 0, NULL, NULL),
                     ctl_push("P", "c", now - 30, 99, NULL, NULL),
                     ctl_push("P", "d", now - 20, 5, NULL, NULL),
                     ctl_push("P", "f", now - 25, 5, NULL, NULL),
                     ctl_push("P", "e", now + 60000, 99, NULL, NULL)};
    st_lease l[8];
    const char *want[5] = {"c", "f", "d", "a", "b"};
    int i;
    (void)state;
    queued("wf-pri", sp, 6);
    assert_int_equal(claim("P", 8, 60000, l), 5);
    for (i = 0; i < 5; i++)
        if (strcmp(l[i].task_id, want[i]))
            fail_msg("claim %d: %s, want %s", i, l[i].task_id, want[i]);
    assert_int_equal(l[0].controlled, 1);
    assert_int_equal(l[3].controlled, 0);
    assert_sizes("P", 1, 5);
    assert_int_equal(ST(S, queue_has, "P", "wf-pri", "e", &e_), 1);
    OK(ST(S, ack, &l[0], &e_));
    assert_int_equal(ST(S, queue_has, "P", "wf-pri", "c", &e_), 0);
    OK(ST(S, ack, &l[3], &e_));
    assert_sizes("P", 1, 3);
}

/* Priorities are strict: under constant load of a higher priority a lower
 * one waits, however long it has been due (no aging); it is claimed once
 * the higher ones are gone. */
static void test_priority_strict(void **state)
{
    int64_t now = wu_now_ms();
    st_step low = ctl_push("PS", "low", now - 60000, 1, NULL, NULL);
    st_lease l[2];
    xc_exec *x;
    int i;
    (void)state;
    x = queued("wf-ps", &low, 1);
    for (i = 0; i < 20; i++) {
        char id[16];
        st_step high;
        snprintf(id, sizeof id, "h%d", i);
        high = ctl_push("PS", id, wu_now_ms(), 50, NULL, NULL);
        assert_int_equal(save(x, x->fence, &high, 1, NULL, 0, NULL), 0);
        assert_int_equal(claim("PS", 1, 60000, l), 1);
        if (strcmp(l[0].task_id, id))
            fail_msg("round %d: claimed %s, want %s", i, l[0].task_id, id);
        OK(ST(S, ack, &l[0], &e_));
    }
    assert_int_equal(claim("PS", 1, 60000, l), 1);
    assert_string_equal(l[0].task_id, "low");
}

/* Sleep until the next window of w ms begins (plus a little). */
static void next_window(int64_t w)
{
    int64_t now = wu_now_ms();
    nap((int)(w - now % w) + 5);
}

/* Rate: at most count claims per fixed window; the rest stay queued (not
 * failed) and come back, in their order, when a window allows. */
static void test_rate_limit(void **state)
{
    static const def_qlimit lim = {.rate_count = 2, .rate_per_ms = 400};
    int64_t now = wu_now_ms();
    st_step sp[5];
    st_step un = {.kind = ST_UNQUEUE, .type = "R", .task_id = "m4"};
    char names[5][4];
    st_lease l[8];
    xc_exec *x;
    int i;
    (void)state;
    for (i = 0; i < 5; i++) {
        snprintf(names[i], sizeof names[i], "m%d", i);
        sp[i] = ctl_push("R", names[i], now - 100 + i, 0, "r", &lim);
    }
    next_window(400);
    x = queued("wf-rate", sp, 5);
    assert_int_equal(claim("R", 8, 60000, l), 2);
    assert_string_equal(l[0].task_id, "m0");
    assert_string_equal(l[1].task_id, "m1");
    assert_int_equal(l[0].controlled, 1);
    assert_int_equal(claim("R", 8, 60000, l + 2), 0);
    assert_sizes("R", 3, 2); /* waiting on the window: still queued */
    assert_int_equal(ST(S, queue_has, "R", "wf-rate", "m3", &e_), 1);
    /* a waiting member can be taken off */
    assert_int_equal(save(x, x->fence, &un, 1, NULL, 0, NULL), 0);
    assert_int_equal(ST(S, queue_has, "R", "wf-rate", "m4", &e_), 0);
    assert_sizes("R", 2, 2);
    next_window(400);
    assert_int_equal(claim("R", 8, 60000, l + 2), 2);
    assert_string_equal(l[2].task_id, "m2");
    assert_string_equal(l[3].task_id, "m3");
    assert_int_equal(claim("R", 8, 60000, l + 4), 0);
    assert_sizes("R", 0, 4);
    for (i = 0; i < 4; i++)
        OK(ST(S, ack, &l[i], &e_));
    assert_sizes("R", 0, 0);
}

/* Concurrency: at most c leased at once; a slot given back (ack, unqueue,
 * an expired lease reaped) lets one waiting member back, exactly once. */
static void test_concurrency_limit(void **state)
{
    static const def_qlimit lim = {.concurrency = 2};
    int64_t now = wu_now_ms();
    st_step sp[4] = {
        ctl_push("K", "a", now - 40, 0, "k", &lim), ctl_push("K", "b", now - 30, 0, "k", &lim),
        ctl_push("K", "c", now - 20, 0, "k", &lim), ctl_push("K", "d", now - 10, 0, "k", &lim)};
    st_step un = {.kind = ST_UNQUEUE, .type = "K", .task_id = "b"};
    st_lease l[8];
    char **ex = NULL;
    size_t nex = 0;
    xc_exec *x;
    (void)state;
    x = queued("wf-conc", sp, 4);
    assert_int_equal(claim("K", 8, 60000, l), 2);
    assert_string_equal(l[0].task_id, "a");
    assert_string_equal(l[1].task_id, "b");
    assert_int_equal(claim("K", 8, 60000, l + 2), 0);
    assert_sizes("K", 2, 2);
    /* an ack frees a slot once: a stale repeat frees nothing */
    OK(ST(S, ack, &l[0], &e_));
    assert_int_equal(RC(ST(S, ack, &l[0], &e_)), WEFT_ESTATE);
    assert_int_equal(claim("K", 8, 60000, l + 2), 1);
    assert_string_equal(l[2].task_id, "c");
    assert_int_equal(claim("K", 8, 60000, l + 3), 0);
    /* an unqueue of a leased member frees its slot */
    assert_int_equal(save(x, x->fence, &un, 1, NULL, 0, NULL), 0);
    assert_int_equal(claim("K", 8, 1, l + 3), 1);
    assert_string_equal(l[3].task_id, "d");
    assert_int_equal(claim("K", 8, 60000, l + 4), 0);
    /* d's lease expires: the reap frees its slot and d is back */
    nap(10);
    assert_int_equal(ST(S, reap, "K", 5, &ex, &nex, &e_), 1);
    free_list(ex, nex);
    assert_int_equal(claim("K", 8, 60000, l + 4), 1);
    assert_string_equal(l[4].task_id, "d");
    assert_int_equal(claim("K", 8, 60000, l + 5), 0);
    assert_sizes("K", 0, 2);
    OK(ST(S, ack, &l[2], &e_));
    OK(ST(S, ack, &l[4], &e_));
    assert_sizes("K", 0, 0);
    /* slots all free again: two at once */
    {
        st_step more[3] = {ctl_push("K", "e", now, 0, "k", &lim),
                           ctl_push("K", "f", now, 0, "k", &lim),
                           ctl_push("K", "g", now, 0, "k", &lim)};
        assert_int_equal(save(x, x->fence, more, 3, NULL, 0, NULL), 0);
        assert_int_equal(claim("K", 8, 60000, l), 2);
    }
}

/* review 12: a member a slot release brought back to due, then taken off
 * (task canceled) before any claim, takes the wake-up with it: the next
 * waiting member stays parked while the slot is free. */
static void test_conc_unqueue_woken(void **state)
{
    static const def_qlimit lim = {.concurrency = 1};
    int64_t now = wu_now_ms();
    st_step sp[3] = {ctl_push("KU", "h", now - 30, 0, "ku", &lim),
                     ctl_push("KU", "a", now - 20, 0, "ku", &lim),
                     ctl_push("KU", "b", now - 10, 0, "ku", &lim)};
    st_step un = {.kind = ST_UNQUEUE, .type = "KU", .task_id = "a"};
    st_lease l[4];
    xc_exec *x;
    (void)state;
    x = queued("wf-cu", sp, 3);
    assert_int_equal(claim("KU", 8, 60000, l), 1);
    assert_string_equal(l[0].task_id, "h");
    assert_int_equal(claim("KU", 8, 60000, l + 1), 0); /* a, b wait */
    OK(ST(S, ack, &l[0], &e_));                        /* a back to due */
    assert_int_equal(save(x, x->fence, &un, 1, NULL, 0, NULL), 0);
    assert_sizes("KU", 1, 0);
    /* no slot is held: b must be claimable */
    assert_int_equal(claim("KU", 8, 60000, l + 1), 1);
    assert_string_equal(l[1].task_id, "b");
}

/* review 12: a push of a member that is still leased (an outbox entry
 * replayed by the sweeper after a process died between its push and the
 * trim; or a claim slipping between a save's re-push and its ack): the
 * second claim of the same member counts a second slot that only one
 * release ever gives back. */
static void test_conc_repush_leased(void **state)
{
    static const def_qlimit lim = {.concurrency = 2};
    int64_t now = wu_now_ms();
    st_step sp = ctl_push("KR", "m", now - 10, 0, "kr", &lim);
    st_step more[2] = {ctl_push("KR", "p", now, 0, "kr", &lim),
                       ctl_push("KR", "q", now, 0, "kr", &lim)};
    st_lease l[4];
    xc_exec *x;
    (void)state;
    x = queued("wf-cr", &sp, 1);
    assert_int_equal(claim("KR", 8, 60000, l), 1);
    assert_int_equal(save(x, x->fence, &sp, 1, NULL, 0, NULL), 0); /* m again */
    assert_int_equal(claim("KR", 8, 60000, l + 1), 1);
    assert_string_equal(l[1].task_id, "m");
    OK(ST(S, ack, &l[1], &e_));
    (void)RC(ST(S, ack, &l[0], &e_)); /* stale: its token was replaced */
    assert_sizes("KR", 0, 0);
    /* nothing is leased: both slots must be free */
    assert_int_equal(save(x, x->fence, more, 2, NULL, 0, NULL), 0);
    assert_int_equal(claim("KR", 8, 60000, l + 2), 2);
}

/* review 12: a push of a member already waiting on a rate window (an
 * outbox replay): the claim parks it a second time and counts it twice;
 * queue_sizes then reports a ready member that is not there, for ever. */
static void test_rate_repush_parked(void **state)
{
    static const def_qlimit lim = {.rate_count = 1, .rate_per_ms = 400};
    int64_t now = wu_now_ms();
    st_step sp[2] = {ctl_push("RP", "a", now - 20, 0, "rp", &lim),
                     ctl_push("RP", "m", now - 10, 0, "rp", &lim)};
    st_lease l[4];
    xc_exec *x;
    (void)state;
    next_window(400);
    x = queued("wf-rp", sp, 2);
    assert_int_equal(claim("RP", 8, 60000, l), 1);
    assert_int_equal(claim("RP", 8, 60000, l + 1), 0); /* m waits */
    assert_int_equal(save(x, x->fence, &sp[1], 1, NULL, 0, NULL), 0);
    assert_int_equal(claim("RP", 8, 60000, l + 1), 0);
    assert_sizes("RP", 1, 1);
    next_window(400);
    assert_int_equal(claim("RP", 8, 60000, l + 1), 1);
    assert_string_equal(l[1].task_id, "m");
    assert_int_equal(claim("RP", 8, 60000, l + 2), 0);
    assert_sizes("RP", 0, 2);
}

/* review 12: the ack of a leased member that was pushed again and is now
 * waiting in its park behind another member: ack.lua's q_forget looks in
 * ready and due only, so the waiting member's controls are deleted
 * (redis); it is then claimed as uncontrolled, outside its limit, and
 * queue_has says it is not queued while it waits. */
static void test_conc_forget_parked(void **state)
{
    static const def_qlimit lim = {.concurrency = 1};
    int64_t now = wu_now_ms();
    st_step sp[2] = {ctl_push("KF", "m", now - 100, 0, "kf", &lim),
                     ctl_push("KF", "x", now - 50, 0, "kf", &lim)};
    st_step again = ctl_push("KF", "m", now - 10, 0, "kf", &lim);
    st_lease l[4];
    xc_exec *x;
    (void)state;
    x = queued("wf-kf", sp, 2);
    assert_int_equal(claim("KF", 8, 60000, l), 1);
    assert_string_equal(l[0].task_id, "m");
    assert_int_equal(save(x, x->fence, &again, 1, NULL, 0, NULL), 0);
    assert_int_equal(claim("KF", 8, 60000, l + 1), 0); /* x, then m, wait */
    OK(ST(S, ack, &l[0], &e_));                        /* x back to due; m waits */
    assert_int_equal(ST(S, queue_has, "KF", "wf-kf", "m", &e_), 1);
    assert_int_equal(claim("KF", 8, 60000, l + 1), 1);
    assert_string_equal(l[1].task_id, "x");
    OK(ST(S, ack, &l[1], &e_));
    assert_int_equal(claim("KF", 8, 60000, l + 2), 1);
    assert_string_equal(l[2].task_id, "m");
    assert_int_equal(l[2].controlled, 1);
}

/* review 12 (sound, kept as a guard): a save that re-pushes a leased
 * member for later (IN_PROGRESS with callbackAfterSeconds) and acks it
 * frees its slot once and keeps its controls. */
static void test_conc_repush_with_ack(void **state)
{
    static const def_qlimit lim = {.concurrency = 1};
    int64_t now = wu_now_ms();
    st_step sp[2] = {ctl_push("KA", "m", now - 20, 7, "ka", &lim),
                     ctl_push("KA", "n", now - 10, 0, "ka", &lim)};
    st_step later = ctl_push("KA", "m", now + 150, 7, "ka", &lim);
    st_lease l[4];
    st_save sv;
    xc_exec *x;
    (void)state;
    x = queued("wf-ka", sp, 2);
    assert_int_equal(claim("KA", 8, 60000, l), 1);
    assert_string_equal(l[0].task_id, "m");
    memset(&sv, 0, sizeof sv);
    sv.x = x;
    sv.fence = x->fence;
    sv.loaded_fence = x->fence;
    sv.steps = &later;
    sv.nsteps = 1;
    sv.acks = &l[0];
    sv.nacks = 1;
    OK(ST(S, exec_save_many, &sv, 1, &e_));
    assert_int_equal(sv.rc, 0);
    x->fence = sv.new_fence;
    assert_int_equal(claim("KA", 8, 60000, l + 1), 1);
    assert_string_equal(l[1].task_id, "n");
    assert_sizes("KA", 1, 1);
    OK(ST(S, ack, &l[1], &e_));
    nap(200);
    assert_int_equal(claim("KA", 8, 60000, l + 2), 1);
    assert_string_equal(l[2].task_id, "m");
    assert_int_equal(l[2].controlled, 1);
    assert_int_equal(claim("KA", 8, 60000, l + 3), 0);
    assert_sizes("KA", 0, 1);
}

/* review 12: a claim over several types takes up to max from each and
 * gives the extra back (rs_claim_release -> ack.lua "back"); the given-back
 * member's rate-window claim is not refunded (redis), so the window is
 * spent on a claim nobody ran. The memory store never over-claims. */
static void test_rate_giveback_spends_window(void **state)
{
    static const def_qlimit lim = {.rate_count = 1, .rate_per_ms = 1000};
    int64_t now = wu_now_ms();
    st_step sp[2] = {push("GA", "a", now - 20), ctl_push("GB", "b", now - 10, 0, "gb", &lim)};
    const char *types[2] = {"GA", "GB"};
    st_lease l[4];
    int n;
    (void)state;
    next_window(1000);
    queued("wf-gb", sp, 2);
    n = ST(S, due_claim, 0, 0, 0, NULL, NULL, types, 2, 1, 60000, l, &e_);
    assert_int_equal(n, 1);
    assert_string_equal(l[0].task_id, "a");
    /* b was not run in this window: it may start now */
    assert_int_equal(claim("GB", 8, 60000, l + 1), 1);
    assert_string_equal(l[1].task_id, "b");
}

static void test_renew_ack(void **state)
{
    st_step sp = push("T1", "a", 0);
    st_lease l, bad;
    int ok[2] = {-1, -1};
    (void)state;
    queued("wf-r", &sp, 1);
    assert_int_equal(claim("T1", 1, 60000, &l), 1);
    bad = l;
    snprintf(bad.lease, sizeof bad.lease, "stale");
    {
        st_lease two[2] = {l, bad};
        OK(ST(S, renew_many, two, 2, 60000, ok, &e_));
    }
    assert_int_equal(ok[0], 1);
    assert_int_equal(ok[1], 0);
    assert_int_equal(RC(ST(S, ack, &bad, &e_)), WEFT_ESTATE);
    OK(ST(S, ack, &l, &e_));
    assert_int_equal(RC(ST(S, ack, &l, &e_)), WEFT_ESTATE);
    assert_has(e_.msg, "stale lease");
    OK(ST(S, renew_many, &l, 1, 60000, ok, &e_));
    assert_int_equal(ok[0], 0);
    assert_int_equal(ST(S, queue_has, "T1", "wf-r", "a", &e_), 0);
    /* bad claims */
    bad.lease[0] = 0;
    assert_int_equal(RC(ST(S, ack, &bad, &e_)), WEFT_EINVAL);
    snprintf(bad.type, sizeof bad.type, "a|b");
    snprintf(bad.lease, sizeof bad.lease, "x");
    assert_int_equal(RC(ST(S, ack, &bad, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, renew_many, &l, 1, 0, ok, &e_)), WEFT_EINVAL);
}

static void test_reap(void **state)
{
    st_step sp[2] = {push("T1", "a", 0), push("T1", "b", 0)};
    st_lease l[2];
    char **ex = NULL;
    size_t nex = 0;
    xc_exec *x;
    (void)state;
    x = queued("wf-p", sp, 2);
    assert_int_equal(claim("T1", 2, 1, l), 2);
    nap(10);
    assert_int_equal(ST(S, reap, "T1", 1, &ex, &nex, &e_), 2);
    assert_int_equal(nex, 0);
    free_list(ex, nex);
    /* a reaped lease is stale */
    assert_int_equal(RC(ST(S, ack, &l[0], &e_)), WEFT_ESTATE);
    /* b is acked this time: its count is cleared */
    assert_int_equal(claim("T1", 2, 1, l), 2);
    OK(ST(S, ack, &l[1], &e_));
    nap(10);
    assert_int_equal(ST(S, reap, "T1", 1, &ex, &nex, &e_), 0);
    assert_int_equal(nex, 1);
    assert_string_equal(ex[0], "wf-p|a");
    free_list(ex, nex);
    assert_int_equal(ST(S, queue_has, "T1", "wf-p", "a", &e_), 0);
    assert_int_equal(save(x, x->fence, &sp[1], 1, NULL, 0, NULL), 0);
    assert_int_equal(claim("T1", 2, 1, l), 1);
    nap(10);
    assert_int_equal(ST(S, reap, "T1", 1, &ex, &nex, &e_), 1);
    free_list(ex, nex);
    assert_int_equal(ST(S, reap, "unknown", 1, &ex, &nex, &e_), 0);
    free_list(ex, nex);
    assert_int_equal(RC(ST(S, reap, "T1", -1, &ex, &nex, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, reap, "a|b", 1, &ex, &nex, &e_)), WEFT_EINVAL);
}

static void test_poll_extend(void **state)
{
    st_step sp[2] = {push("Q", "a", 0), push("Q", "b", wu_now_ms() + 60000)};
    st_lease l[2];
    char **ex = NULL;
    size_t nex = 0;
    int reaped = -1;
    (void)state;
    queued("wf-e", sp, 2);
    assert_int_equal(ST(S, poll, "Q", 2, 60000, 3, l, &reaped, &ex, &nex, &e_), 1);
    assert_int_equal(reaped, 0);
    assert_string_equal(l[0].task_id, "a");
    assert_string_equal(l[0].type, "Q");
    free_list(ex, nex);
    /* whoever holds it: the lease now ends at once */
    OK(ST(S, lease_extend, "Q", "wf-e", "a", 1, &e_));
    OK(ST(S, lease_extend, "Q", "wf-e", "b", 1, &e_)); /* not leased: nothing */
    nap(10);
    assert_int_equal(ST(S, poll, "Q", 2, 60000, 3, l, &reaped, &ex, &nex, &e_), 1);
    assert_int_equal(reaped, 1);
    assert_string_equal(l[0].task_id, "a");
    free_list(ex, nex);
    assert_int_equal(ST(S, queue_has, "Q", "wf-e", "b", &e_), 1);
    assert_int_equal(ST(S, poll, "Q", 0, 60000, 3, l, &reaped, &ex, &nex, &e_), 0);
    assert_int_equal(RC(ST(S, poll, "Q", 1, 0, 3, l, &reaped, &ex, &nex, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, poll, "Q|x", 1, 10, 3, l, &reaped, &ex, &nex, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, lease_extend, "Q", "wf|e", "a", 10, &e_)), WEFT_EINVAL);
}

static void test_unqueue_and_acks(void **state)
{
    st_step sp[2] = {push("T1", "a", 0), push("T1", "b", 0)};
    st_step un = {.kind = ST_UNQUEUE, .type = "T1", .task_id = "a"};
    st_lease l[2];
    st_save sv;
    xc_exec *x;
    (void)state;
    x = queued("wf-u", sp, 2);
    assert_int_equal(claim("T1", 2, 60000, l), 2);
    assert_int_equal(save(x, x->fence, &un, 1, NULL, 0, NULL), 0);
    assert_int_equal(ST(S, queue_has, "T1", "wf-u", "a", &e_), 0);
    assert_int_equal(RC(ST(S, ack, &l[0], &e_)), WEFT_ESTATE);
    /* one member's token does not ack another */
    {
        st_lease swapped = l[1];
        memcpy(swapped.lease, l[0].lease, sizeof swapped.lease);
        assert_int_equal(RC(ST(S, ack, &swapped, &e_)), WEFT_ESTATE);
        assert_int_equal(ST(S, queue_has, "T1", "wf-u", "b", &e_), 1);
    }
    /* a save's acks drop its claims once committed */
    memset(&sv, 0, sizeof sv);
    sv.x = x;
    sv.fence = x->fence;
    sv.acks = &l[1];
    sv.nacks = 1;
    OK(ST(S, exec_save_many, &sv, 1, &e_));
    assert_int_equal(sv.rc, 0);
    assert_int_equal(ST(S, queue_has, "T1", "wf-u", "b", &e_), 0);
}

static void test_eager_lease(void **state)
{
    st_step sp = push("T1", "a", 0);
    st_lease l;
    xc_exec *x;
    long long ready = -1, leased = -1;
    (void)state;
    created("wf-g");
    x = load("wf-g");
    sp.lease = "mine-1";
    sp.lease_until = wu_now_ms() + 60000;
    assert_int_equal(save(x, x->fence, &sp, 1, NULL, 0, NULL), 0);
    OK(ST(S, queue_sizes, "T1", &ready, &leased, &e_));
    assert_int_equal(ready, 0);
    assert_int_equal(leased, 1);
    assert_int_equal(claim("T1", 1, 60000, &l), 0);
    memset(&l, 0, sizeof l);
    snprintf(l.workflow_id, sizeof l.workflow_id, "wf-g");
    snprintf(l.task_id, sizeof l.task_id, "a");
    snprintf(l.type, sizeof l.type, "T1");
    snprintf(l.lease, sizeof l.lease, "mine-1");
    l.never_reaped = 1;
    OK(ST(S, ack, &l, &e_));
}

/* The queue named name in q[0..n), or NULL. */
static const st_qinfo *listed(const st_qinfo *q, size_t n, const char *name)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (!strcmp(q[i].name, name)) return &q[i];
    return NULL;
}

/* queue_list: every queue that holds tasks (ready, not visible yet, or only
 * leased), whoever pushed them and whether anyone polls it, with its sizes
 * and last poll; one that holds none is not listed. A claim, even of an
 * empty queue, is a poll (queue_polled). */
static void test_queue_list(void **state)
{
    int64_t later = wu_now_ms() + 60000, t0, t1, ms = -1;
    st_step sp[4] = {push("greet", "a", 0), push("greet", "b", later), push("blue:greet", "c", 0),
                     push("eager", "d", 0)};
    st_step un = {.kind = ST_UNQUEUE, .type = "greet", .task_id = "b"};
    st_lease l;
    st_qinfo *q = NULL;
    const st_qinfo *g;
    size_t n = 9;
    xc_exec *x;
    (void)state;
    OK(ST(S, queue_list, &q, &n, &e_));
    assert_int_equal(n, 0);
    free(q);
    sp[3].lease = "mine-1";
    sp[3].lease_until = later;
    x = queued("wf-q", sp, 4);
    if (!is_memory()) /* names no push makes, in the set of queues: passed over */
        OK(rs_command(st_redis_conn(S), &e_, "SADD weft:queues a|b %0200d", 7));
    OK(ST(S, queue_list, &q, &n, &e_));
    assert_int_equal(n, 3);
    assert_non_null(g = listed(q, n, "greet"));
    assert_int_equal(g->ready, 2);
    assert_int_equal(g->leased, 0);
    assert_int_equal(g->polled_ms, 0);
    assert_non_null(g = listed(q, n, "blue:greet"));
    assert_int_equal(g->ready, 1);
    assert_non_null(g = listed(q, n, "eager"));
    assert_int_equal(g->ready, 0);
    assert_int_equal(g->leased, 1);
    free(q);
    /* polls: of greet (one task is visible), and of a queue that holds none */
    t0 = wu_now_ms();
    assert_int_equal(claim("greet", 2, 60000, &l), 1);
    assert_int_equal(claim("idle", 1, 60000, &l), 0);
    t1 = wu_now_ms();
    OK(ST(S, queue_polled, "idle", &ms, &e_));
    assert_true(ms >= t0 && ms <= t1);
    OK(ST(S, queue_polled, "blue:greet", &ms, &e_));
    assert_int_equal(ms, 0);
    OK(ST(S, queue_list, &q, &n, &e_));
    assert_int_equal(n, 3);
    assert_null(listed(q, n, "idle"));
    assert_non_null(g = listed(q, n, "greet"));
    assert_int_equal(g->ready, 1);
    assert_int_equal(g->leased, 1);
    assert_true(g->polled_ms >= t0 && g->polled_ms <= t1);
    free(q);
    /* emptied: not listed */
    OK(ST(S, ack, &l, &e_));
    assert_int_equal(save(x, x->fence, &un, 1, NULL, 0, NULL), 0);
    OK(ST(S, queue_list, &q, &n, &e_));
    assert_int_equal(n, 2);
    assert_null(listed(q, n, "greet"));
    free(q);
}

/* ---- the decider queue ---- */

static void test_due_wake_forget(void **state)
{
    char ids[4][64];
    int64_t t0;
    long long left = -1;
    (void)state;
    OK(ST(S, unfinished, &left, &e_));
    assert_int_equal(left, 0);
    created("wf-d");
    OK(ST(S, unfinished, &left, &e_)); /* not ended: on the decider queue */
    assert_int_equal(left, 1);
    assert_int_equal(due(4, 60000, ids), 1);
    assert_string_equal(ids[0], "wf-d");
    assert_int_equal(due(4, 60000, ids), 0); /* held */
    OK(ST(S, wake, "wf-d", wu_now_ms(), 1, &e_));
    assert_int_equal(due(4, 60000, ids), 1);
    /* only_earlier keeps an earlier time; without it the time moves */
    OK(ST(S, wake, "wf-d", 0, 0, &e_));
    OK(ST(S, wake, "wf-d", wu_now_ms() + 60000, 1, &e_));
    assert_int_equal(due(4, 0, ids), 1);
    OK(ST(S, wake, "wf-d", wu_now_ms() + 60000, 0, &e_));
    assert_int_equal(due(4, 0, ids), 0);
    OK(ST(S, forget, "wf-d", 0, &e_));
    OK(ST(S, unfinished, &left, &e_)); /* ended: off it */
    assert_int_equal(left, 0);
    OK(ST(S, wake, "wf-d", wu_now_ms() + 60000, 1, &e_));
    assert_int_equal(due(4, 0, ids), 0);
    OK(ST(S, forget, "wf-d", 0, &e_));
    OK(ST(S, wake, "wf-d", 0, 1, &e_)); /* gone: only_earlier adds it */
    assert_int_equal(due(4, 0, ids), 1);
    OK(ST(S, forget, "wf-d", 0, &e_));
    assert_int_equal(due(4, 0, ids), 0);
    /* a wait ends when something comes due (redis's may end sooner, on
     * an older wake-up token: then the next wait) */
    OK(ST(S, wake, "wf-d", wu_now_ms() + 50, 0, &e_));
    t0 = wu_mono_ms();
    {
        int n = 0, k;
        for (k = 0; k < 3 && n != 1; k++)
            OK(ST(S, due_claim, 2000, 4, 60000, ids, &n, NULL, 0, 0, 0, NULL, &e_));
        assert_int_equal(n, 1);
        if (is_memory()) assert_int_equal(k, 1); /* it sleeps until then, once */
    }
    assert_true(wu_mono_ms() - t0 >= 40);
    assert_true(wu_mono_ms() - t0 < 6000);
    /* a wake of an id with no execution is kept: the decider finds nothing */
    {
        const char *ghost[1] = {"ghost"};
        int ex = -1;
        xc_exec *y = NULL;
        OK(ST(S, wake, "ghost", 0, 0, &e_));
        assert_int_equal(due(4, 60000, ids), 1);
        assert_string_equal(ids[0], "ghost");
        OK(ST(S, exec_exists_many, ghost, 1, &ex, &e_));
        assert_int_equal(ex, 0);
        assert_int_equal(RC(ST(S, exec_load, "ghost", &y, NULL, &e_)), WEFT_ENOTFOUND);
    }
    assert_int_equal(RC(ST(S, wake, "a|b", 0, 0, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, forget, "", 0, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, forget, "", 1, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, due_claim, 0, 1, -1, ids, NULL, NULL, 0, 0, 0, NULL, &e_)),
                     WEFT_EINVAL);
}

/* Redis: a decider that finds a due execution missing keeps its entry. On
 * a cluster a create's steps (its entry, due now) can land before its
 * create.lua, which a reshard's ASK or TRYAGAIN sent again: a decider that
 * dropped the entry then left the execution, created a moment later, with
 * none, and nothing looked at it again. The entry comes due again a second
 * later, and leaves once the execution has been missing for 10 s. */
static void test_due_forget_missing(void **state)
{
    /* Lua run on the partition (KEYS: its due, its gone marks; now in ms by
     * Redis's clock) that fails with a message, or returns 1 */
#define NOW_MS "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) "
#define ON_DQ(lua)                                                                                 \
    OK(rs_command(st_redis_conn(S), &e_, "EVAL %s 2 weft:{dq}:due weft:{dq}:gone", NOW_MS lua))
    char ids[4][64];
    (void)state;
    if (is_memory()) skip();
    OK(ST(S, wake, "soon", 0, 0, &e_)); /* its create's step, run first */
    assert_int_equal(due(4, 60000, ids), 1);
    OK(ST(S, forget, "soon", 1, &e_)); /* nothing there yet */
    assert_int_equal(due(4, 0, ids), 0);
    /* due again a second later; its mark "<first>:<last>", kept 100 s */
    ON_DQ("local s = tonumber(redis.call('ZSCORE', KEYS[1], 'soon')) "
          "if not s or s < now + 800 or s > now + 1000 then "
          "return redis.error_reply('score ' .. tostring(s) .. ' at ' .. now) end "
          "local m = redis.call('HGET', KEYS[2], 'soon') or 'none' "
          "local f, l = string.match(m, '^(%d+):(%d+)$') "
          "if not f or f ~= l or tonumber(f) > now or tonumber(f) < now - 200 then "
          "return redis.error_reply('mark ' .. m .. ' at ' .. now) end "
          "local ttl = redis.call('PTTL', KEYS[2]) "
          "if ttl <= 90000 or ttl > 100000 then "
          "return redis.error_reply('gone PTTL ' .. ttl) end "
          "return 1");
    /* found missing again within the 10 s: kept, its first time kept */
    ON_DQ("redis.call('HSET', KEYS[2], 'soon', (now - 9000) .. ':' .. (now - 1000)) return 1");
    OK(ST(S, forget, "soon", 1, &e_));
    ON_DQ("if not redis.call('ZSCORE', KEYS[1], 'soon') then return redis.error_reply('left') end "
          "local f = tonumber(string.match(redis.call('HGET', KEYS[2], 'soon'), '^(%d+):')) "
          "if f > now - 9000 then return redis.error_reply('first moved') end return 1");
    /* a mark not renewed for 10 s is of an earlier time: a new one */
    ON_DQ("redis.call('HSET', KEYS[2], 'soon', (now - 60000) .. ':' .. (now - 11000)) return 1");
    OK(ST(S, forget, "soon", 1, &e_));
    ON_DQ("if not redis.call('ZSCORE', KEYS[1], 'soon') then return redis.error_reply('left') end "
          "local f = tonumber(string.match(redis.call('HGET', KEYS[2], 'soon'), '^(%d+):')) "
          "if f < now - 200 then return redis.error_reply('first kept') end return 1");
    /* missing since 10 s ago, seen a second ago: it leaves, with its mark */
    ON_DQ("redis.call('HSET', KEYS[2], 'soon', (now - 10000) .. ':' .. (now - 1000)) return 1");
    OK(ST(S, forget, "soon", 1, &e_));
    ON_DQ("if redis.call('ZSCORE', KEYS[1], 'soon') or redis.call('HEXISTS', KEYS[2], 'soon') == 1 "
          "then return redis.error_reply('still there') end return 1");
    /* an entry that left meanwhile is not made again */
    OK(ST(S, forget, "never", 1, &e_));
    ON_DQ("if redis.call('ZSCORE', KEYS[1], 'never') then return redis.error_reply('made') end "
          "return 1");
    /* an ended execution's entry leaves at once */
    OK(ST(S, wake, "ended", 0, 0, &e_));
    OK(ST(S, forget, "ended", 0, &e_));
    assert_int_equal(due(4, 60000, ids), 0);
#undef ON_DQ
#undef NOW_MS
}

static void test_due_and_claims(void **state)
{
    int64_t now = wu_now_ms();
    st_step sp[2] = {push("A", "a", now - 10), push("B", "b", now - 10)};
    const char *types[2] = {"A", "B"};
    char ids[4][64];
    st_lease l[4];
    int n = -1, got;
    (void)state;
    queued("wf-dc", sp, 2);
    got = ST(S, due_claim, 0, 4, 60000, ids, &n, types, 2, 1, 60000, l, &e_);
    assert_int_equal(got, 1);
    assert_int_equal(n, 1);
    assert_string_equal(ids[0], "wf-dc");
    got = ST(S, due_claim, 0, 4, 60000, ids, &n, types, 2, 4, 60000, l, &e_);
    assert_int_equal(got, 1);
    assert_int_equal(n, 0);
    assert_int_equal(RC(ST(S, due_claim, 0, 0, 0, NULL, NULL, types, 2, 1, 0, l, &e_)),
                     WEFT_EINVAL);
}

/* ---- definitions, task definitions, idempotency, daemons, secrets ---- */

static void test_defs(void **state)
{
    char *j = NULL;
    int v = 0;
    (void)state;
    OK(ST(S, def_register, "order", 1, "{\"name\":\"order\",\"version\":1}", &e_));
    OK(ST(S, def_register, "order", 2, "{\"name\":\"order\",\"version\":2}", &e_));
    OK(ST(S, def_register, "other", 1, "{\"name\":\"other\",\"version\":1}", &e_));
    OK(ST(S, def_get, "order", 0, &j, &v, &e_));
    assert_int_equal(v, 2);
    assert_has(j, "\"version\":2");
    free(j);
    OK(ST(S, def_get, "order", 1, &j, &v, &e_));
    assert_int_equal(v, 1);
    free(j);
    assert_int_equal(RC(ST(S, def_get, "order", 3, &j, &v, &e_)), WEFT_ENOTFOUND);
    assert_int_equal(RC(ST(S, def_get, "nope", 0, &j, &v, &e_)), WEFT_ENOTFOUND);
    OK(ST(S, def_list, &j, &e_));
    assert_string_equal(j, "[{\"name\":\"order\",\"version\":1},{\"name\":\"order\",\"version\":2},"
                           "{\"name\":\"other\",\"version\":1}]");
    free(j);
    assert_int_equal(RC(ST(S, def_register, "order", 0, "{}", &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, def_register, "", 1, "{}", &e_)), WEFT_EINVAL);
}

static void test_taskdefs(void **state)
{
    const char *names[2] = {"a", "zz"};
    char *j = NULL, *js[2];
    (void)state;
    OK(ST(S, taskdef_put, "b", "{\"name\":\"b\"}", &e_));
    OK(ST(S, taskdef_put, "a", "{\"name\":\"a\",\"retryCount\":1}", &e_));
    OK(ST(S, taskdef_get, "a", &j, &e_));
    assert_has(j, "retryCount");
    free(j);
    assert_int_equal(RC(ST(S, taskdef_get, "c", &j, &e_)), WEFT_ENOTFOUND);
    OK(ST(S, taskdef_list, &j, &e_));
    assert_string_equal(j, "[{\"name\":\"a\",\"retryCount\":1},{\"name\":\"b\"}]");
    free(j);
    OK(ST(S, taskdefs_get, names, 2, js, &e_));
    assert_has(js[0], "retryCount");
    assert_null(js[1]);
    free(js[0]);
}

static void test_idempotency(void **state)
{
    char existing[64];
    (void)state;
    OK(ST(S, idem_claim, "k1", "wf-1", existing, &e_));
    OK(ST(S, idem_claim, "k1", "wf-1", existing, &e_));
    assert_int_equal(RC(ST(S, idem_claim, "k1", "wf-2", existing, &e_)), WEFT_EEXIST);
    assert_string_equal(existing, "wf-1");
    OK(ST(S, idem_claim, "k2", "wf-2", NULL, &e_));
    assert_int_equal(RC(ST(S, idem_claim, "", "wf-2", existing, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, idem_claim, "k3", "a|b", existing, &e_)), WEFT_EINVAL);
}

static void test_secrets(void **state)
{
    char *v = NULL, **names = NULL;
    size_t n = 0, i;
    int seen = 0;
    (void)state;
    OK(ST(S, secret_set, "B", "two", &e_));
    OK(ST(S, secret_set, "A", "one", &e_));
    OK(ST(S, secret_set, "A", "uno", &e_));
    OK(ST(S, secret_get, "A", &v, &e_));
    assert_string_equal(v, "uno");
    free(v);
    OK(ST(S, secret_names, &names, &n, &e_));
    assert_int_equal(n, 2);
    for (i = 0; i < n; i++)
        seen |= !strcmp(names[i], "A") ? 1 : !strcmp(names[i], "B") ? 2 : 4;
    assert_int_equal(seen, 3);
    free_list(names, n);
    OK(ST(S, secret_delete, "A", &e_));
    assert_int_equal(RC(ST(S, secret_delete, "A", &e_)), WEFT_ENOTFOUND);
    assert_int_equal(RC(ST(S, secret_get, "A", &v, &e_)), WEFT_ENOTFOUND);
    assert_has(e_.msg, "not set");
    OK(ST(S, secret_names, &names, &n, &e_));
    assert_int_equal(n, 1);
    free_list(names, n);
    assert_int_equal(RC(ST(S, secret_set, "C", NULL, &e_)), WEFT_EINVAL);
}

static void test_daemons(void **state)
{
    char *j = NULL;
    json_object *all, *d1, *v;
    (void)state;
    OK(ST(S, daemon_beat, "d1", "{\"types\":[\"T\"]}", &e_));
    OK(ST(S, daemon_beat, "d2", NULL, &e_));
    OK(ST(S, daemons, &j, &e_));
    all = json_tokener_parse(j);
    free(j);
    assert_non_null(all);
    assert_true(json_object_object_get_ex(all, "d1", &d1));
    assert_true(json_object_object_get_ex(d1, "types", &v));
    assert_true(json_object_object_get_ex(d1, "seen", &v));
    assert_true(json_object_get_int64(v) > 0);
    assert_true(json_object_object_get_ex(all, "d2", &v));
    json_object_put(all);
    assert_int_equal(RC(ST(S, daemon_beat, "d3", "[1]", &e_)), WEFT_EINVAL);

    /* daemons long gone are forgotten; those heard of since stay */
    {
        size_t n = 99;
        OK(ST(S, daemons_forget, wu_now_ms() - 60000, &n, &e_));
        assert_int_equal(n, 0);
        OK(ST(S, daemons, &j, &e_));
        assert_has(j, "\"d1\"");
        free(j);
        OK(ST(S, daemons_forget, wu_now_ms() + 60000, &n, &e_));
        assert_int_equal(n, 2);
        OK(ST(S, daemons, &j, &e_));
        assert_string_equal(j, "{}");
        free(j);
        OK(ST(S, daemons_forget, wu_now_ms(), NULL, &e_)); /* none: nothing to do */
    }
}

/* ---- the status lane ---- */

typedef struct seen_ev {
    char ids[8][ST_EVENT_ID_MAX + 24];
    char json[8][256];
    int n, stop_at;
} seen_ev;

static int on_event(void *ud, const char *id, const char *json)
{
    seen_ev *s = ud;
    if (s->n < 8) {
        snprintf(s->ids[s->n], sizeof s->ids[0], "%s", id);
        snprintf(s->json[s->n], sizeof s->json[0], "%s", json);
    }
    s->n++;
    return s->stop_at && s->n >= s->stop_at;
}

static void test_events(void **state)
{
    const char *e0[1] = {"{\"n\":0}"}, *e12[2] = {"{\"n\":1}", "{\"n\":2}"}, *e3[1] = {"{}"};
    char next[ST_EVENT_ID_MAX], entry[ST_EVENT_ID_MAX];
    long long idx;
    seen_ev s;
    xc_exec *x = new_exec("wf-v");
    (void)state;
    assert_int_equal(create(x, NULL, 0, e0, 1), 0);
    x = load("wf-v");
    assert_int_equal(save(x, x->fence, NULL, 0, e12, 2, NULL), 0);
    assert_int_equal(save(x, x->fence, NULL, 0, e3, 1, NULL), 0);
    memset(&s, 0, sizeof s);
    assert_int_equal(ST(S, events, "wf-v", "0", next, 0, on_event, &s, &e_), 4);
    assert_has(s.json[0], "\"workflowId\":\"wf-v\"");
    assert_has(s.json[0], "\"time\":");
    assert_has(s.json[0], "\"n\":0");
    assert_has(s.json[2], "\"n\":2");
    assert_true(!strncmp(s.json[3], "{\"workflowId\":\"wf-v\",\"time\":", 28));
    OK(st_event_id_parse(s.ids[2], entry, &idx, &e_));
    assert_int_equal(idx, 1);
    OK(st_event_id_parse(s.ids[3], entry, &idx, &e_));
    assert_string_equal(next, entry);
    /* after the first event of the second entry: the second, then the third entry */
    memset(&s, 0, sizeof s);
    {
        char after[ST_EVENT_ID_MAX + 24];
        seen_ev t;
        snprintf(after, sizeof after, "%s", "");
        memset(&t, 0, sizeof t);
        assert_int_equal(ST(S, events, "wf-v", "0", NULL, 0, on_event, &t, &e_), 4);
        snprintf(after, sizeof after, "%s", t.ids[1]);
        assert_int_equal(ST(S, events, "wf-v", after, next, 0, on_event, &s, &e_), 2);
        assert_has(s.json[0], "\"n\":2");
        assert_string_equal(s.ids[0], t.ids[2]);
        assert_string_equal(s.ids[1], t.ids[3]);
        /* a plain entry id: after that whole entry */
        OK(st_event_id_parse(t.ids[1], entry, &idx, &e_));
        memset(&s, 0, sizeof s);
        assert_int_equal(ST(S, events, "wf-v", entry, next, 0, on_event, &s, &e_), 1);
        assert_string_equal(s.ids[0], t.ids[3]);
        /* a stop takes effect after the rest of its entry */
        memset(&s, 0, sizeof s);
        s.stop_at = 2;
        assert_int_equal(ST(S, events, "wf-v", "0", next, 0, on_event, &s, &e_), 3);
        OK(st_event_id_parse(t.ids[2], entry, &idx, &e_));
        assert_string_equal(next, entry);
    }
    /* resumed where the stop left off: the rest; then nothing */
    memset(&s, 0, sizeof s);
    assert_int_equal(ST(S, events, "wf-v", next, next, 0, on_event, &s, &e_), 1);
    assert_int_equal(ST(S, events, "wf-v", next, next, 0, on_event, &s, &e_), 0);
    assert_int_equal(ST(S, events, "nope", "0", next, 0, on_event, &s, &e_), 0);
    assert_string_equal(next, "0");
    assert_int_equal(RC(ST(S, events, "wf-v", "x-y", next, 0, on_event, &s, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, events, "a|b", "0", next, 0, on_event, &s, &e_)), WEFT_EINVAL);
}

/* ---- bad inputs ---- */

static void test_bad_inputs(void **state)
{
    st_step bad = push("T1", "a|b", 0), badtype = push("T|1", "a", 0);
    const char *nl[1] = {"{\"a\":1}\n{}"};
    long long r, l;
    xc_exec *x;
    uint64_t f = 0;
    st_ops older;
    (void)state;
    /* a backend's table is checked: its own passes, one from an older
     * interface (shorter) is refused */
    OK(st_check(S->ops, &e_));
    older = *S->ops;
    older.size = offsetof(st_ops, events);
    assert_int_equal(st_check(&older, &e_), WEFT_EABI);
    assert_non_null(strstr(e_.msg, S->ops->name));
    assert_int_equal(create(new_exec("a|b"), NULL, 0, NULL, 0), WEFT_EINVAL);
    created("wf-b");
    x = load("wf-b");
    assert_int_equal(save(x, 1, &bad, 1, NULL, 0, &f), WEFT_EINVAL);
    assert_has(e_.msg, "'|'");
    assert_int_equal(save(x, 1, &badtype, 1, NULL, 0, &f), WEFT_EINVAL);
    assert_int_equal(save(x, 1, NULL, 0, nl, 1, &f), WEFT_EINVAL);
    /* nothing was committed */
    assert_int_equal(save(x, 1, NULL, 0, NULL, 0, &f), 0);
    assert_int_equal(f, 2);
    assert_int_equal(RC(ST(S, queue_sizes, "a|b", &r, &l, &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, queue_has, "T1", "wf-b", "a|b", &e_)), WEFT_EINVAL);
    assert_int_equal(RC(ST(S, exec_flush, "a|b", &e_)), WEFT_EINVAL);
}

/* ---- the memory backend's own ---- */

static void test_memory_objects(void **state)
{
    xc_exec *x, *y, *other;
    def_task *dt = WF->root.tasks[0];
    xc_task *t;
    st_step sp;
    st_lease l;
    st_doc d = {0};
    st_store *quiet = NULL;
    st_memory_opts o = {0};
    const char *ev[1] = {"{}"};
    seen_ev s;
    (void)state;
    if (!is_memory()) skip();
    {
        const char *types[1] = {"T1"};
        int64_t later = wu_now_ms() + 60000;
        st_step p = push("T1", "n", later);
        assert_int_equal(st_memory_next(S, types, 1), 0); /* nothing queued */
        x = queued("wf-n", &p, 1);
        assert_true(st_memory_next(S, types, 1) <= wu_now_ms()); /* due since its create */
        OK(ST(S, forget, "wf-n", 0, &e_));
        assert_int_equal(st_memory_next(S, types, 1), later);
        assert_int_equal(st_memory_next(S, NULL, 0), 0);
    }
    x = created("wf-m");
    y = load("wf-m");
    assert_ptr_equal(x, y);
    /* a change to a loaded execution is visible at once, saved or not */
    y->status = WEFT_WF_PAUSED;
    OK(ST(S, exec_read, "wf-m", &d, &e_));
    assert_string_equal(d.status, "PAUSED");
    st_doc_clear(&d);
    /* the push carries its task: the claim hands out the objects */
    t = xc_add_task(x, dt, 0, 0);
    assert_non_null(t);
    sp = push("T1", t->id, 0);
    sp.task = t;
    assert_int_equal(save(x, x->fence, &sp, 1, NULL, 0, NULL), 0);
    assert_int_equal(claim("T1", 1, 60000, &l), 1);
    assert_ptr_equal(l.x, x);
    assert_ptr_equal(l.t, t);
    OK(ST(S, ack, &l, &e_));
    /* without the task object: found by id */
    sp.task = NULL;
    assert_int_equal(save(x, x->fence, &sp, 1, NULL, 0, NULL), 0);
    assert_int_equal(claim("T1", 1, 60000, &l), 1);
    assert_ptr_equal(l.t, t);
    /* a save of another object replaces the stored one */
    other = new_exec("wf-m");
    assert_int_equal(save(other, x->fence, NULL, 0, NULL, 0, NULL), 0);
    y = load("wf-m");
    assert_ptr_equal(y, other);
    assert_int_equal(ST(S, exec_flush, "wf-m", &e_), 0);
    /* keep_events 0: no status lane */
    OK(st_memory_open(&o, &quiet, &e_));
    {
        st_create c;
        memset(&c, 0, sizeof c);
        c.x = new_exec("wf-q");
        c.events = ev;
        c.nevents = 1;
        OK(ST(quiet, exec_create_many, &c, 1, &e_));
        assert_int_equal(c.rc, 0);
    }
    memset(&s, 0, sizeof s);
    assert_int_equal(ST(quiet, events, "wf-q", "0", NULL, 0, on_event, &s, &e_), 0);
    st_free(quiet);
    /* nothing else can add events while this thread waits: no wait */
    {
        int64_t t0 = wu_mono_ms();
        assert_int_equal(ST(S, events, "wf-m", "0", NULL, 5000, on_event, &s, &e_), 0);
        assert_true(wu_mono_ms() - t0 < 1000);
    }
    /* an eager lease is recorded as leased; with unrecorded_eager (the
     * engine's) it leaves no record, and its ack finds nothing to drop */
    {
        int u;
        for (u = 0; u < 2; u++) {
            st_store *st = NULL;
            st_create c;
            st_save sv;
            st_step ep = push("T9", "e1", 0);
            st_lease ack;
            long long ready = -1, leased = -1;
            o.keep_events = 1;
            o.unrecorded_eager = u;
            OK(st_memory_open(&o, &st, &e_));
            memset(&c, 0, sizeof c);
            c.x = new_exec("wf-e");
            OK(ST(st, exec_create_many, &c, 1, &e_));
            assert_int_equal(c.rc, 0);
            ep.lease = "me:e1";
            ep.lease_until = wu_now_ms() + 60000;
            memset(&sv, 0, sizeof sv);
            sv.x = c.x;
            sv.fence = c.x->fence;
            sv.steps = &ep;
            sv.nsteps = 1;
            OK(ST(st, exec_save_many, &sv, 1, &e_));
            assert_int_equal(sv.rc, 0);
            OK(ST(st, queue_sizes, "T9", &ready, &leased, &e_));
            assert_int_equal(ready, 0);
            assert_int_equal(leased, u ? 0 : 1);
            memset(&ack, 0, sizeof ack);
            strcpy(ack.workflow_id, "wf-e");
            strcpy(ack.task_id, "e1");
            strcpy(ack.lease, "me:e1");
            strcpy(ack.type, "T9");
            ack.never_reaped = 1;
            memset(&sv, 0, sizeof sv);
            sv.x = c.x;
            sv.fence = c.x->fence;
            sv.acks = &ack;
            sv.nacks = 1;
            OK(ST(st, exec_save_many, &sv, 1, &e_));
            assert_int_equal(sv.rc, 0);
            OK(ST(st, queue_sizes, "T9", &ready, &leased, &e_));
            assert_int_equal(leased, 0);
            st_free(st);
        }
    }
}

/* CPU time in ns (the machine may be busy with other work). */
static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* push -> claim -> ack through the interface, one task at a time (the
 * embedded engine's path); prints ns of CPU per task. */
static void test_bench(void **state)
{
    const char *env = getenv("WEFT_STORE_BENCH");
    long n = env && *env ? 1000000 : 20000, i;
    enum { NT = 1000 };
    xc_task *ts[NT];
    xc_exec *x;
    double t0;
    (void)state;
    if (!is_memory()) skip();
    x = created("wf-bench");
    for (i = 0; i < NT; i++)
        assert_non_null(ts[i] = xc_add_task(x, WF->root.tasks[0], 0, 0));
    t0 = cpu_ns();
    for (i = 0; i < n; i++) {
        st_step sp = push("T1", ts[i % NT]->id, 0);
        st_lease l;
        st_save sv;
        sp.task = ts[i % NT];
        memset(&sv, 0, sizeof sv);
        sv.x = x;
        sv.steps = &sp;
        sv.nsteps = 1;
        ST(S, exec_save_many, &sv, 1, &e_);
        if (sv.rc || claim("T1", 1, 60000, &l) != 1 || l.t != ts[i % NT] || ST(S, ack, &l, &e_))
            fail_msg("task %ld: %s", i, sv.why[0] ? sv.why : e_.msg);
    }
    fprintf(stderr, "bench %s: save(push) -> claim -> ack: %ld tasks, %.0f ns (CPU) per task\n",
            S->ops->name, n, (cpu_ns() - t0) / (double)n);
}

/* ---- allocation failures (the memory backend; alloc_fail.h) ----
 *
 * Every allocation of a store operation fails in turn. The operation gives
 * WEFT_ENOMEM (the whole call, or each item of a batch) and the store is as
 * it was, or it gives what it gives when nothing fails and the store ends
 * the same. The store is seen through the interface: the runs' documents,
 * fences, commands and events, every member of the queues the cases use,
 * the decider queue's next time, the definitions, task definitions,
 * secrets and daemons.
 */

static const char *const AF_IDS[] = {"wf-1", "wf-2"};
static const char *const AF_TYPES[] = {"T", "U", "blue:T"};
static const char *const AF_TASKS[] = {"t0", "t1", "t2", "t3"};

/* digit runs of epoch milliseconds, and the lease tokens' counters, as "T" */
static void af_norm(wu_buf *b, const char *s)
{
    while (*s) {
        size_t n = strspn(s, "0123456789");
        if (n >= 12) {
            assert_int_equal(wu_buf_add(b, "T", 1), 0);
        } else {
            if (!n) n = 1;
            assert_int_equal(wu_buf_add(b, s, n), 0);
        }
        s += n;
    }
}

static int af_event(void *ud, const char *id, const char *json)
{
    af_norm(ud, json);
    return wu_buf_add(ud, "\n", 1);
}

/* The store as its callers see it, as text (caller frees). */
static char *af_store_state(void)
{
    wu_buf b = {0};
    char line[512], next[ST_EVENT_ID_MAX];
    size_t i, k, t;
    char *json = NULL, **names = NULL;
    size_t nnames = 0;
    weft_error err = {0};
    for (i = 0; i < sizeof AF_IDS / sizeof AF_IDS[0]; i++) {
        st_doc d = {0};
        int rc = ST(S, exec_read, AF_IDS[i], &d, &err);
        snprintf(line, sizeof line, "%s: %d fence %llu %s cmd %s\n", AF_IDS[i], rc,
                 (unsigned long long)d.fence, d.status ? d.status : "-", d.cmd ? d.cmd : "-");
        af_norm(&b, line);
        if (d.doc) af_norm(&b, d.doc);
        st_doc_clear(&d);
        assert_int_equal(wu_buf_add(&b, "\nevents:\n", 9), 0);
        assert_true(ST(S, events, AF_IDS[i], "0", next, 0, af_event, &b, &err) >= 0);
    }
    for (t = 0; t < sizeof AF_TYPES / sizeof AF_TYPES[0]; t++) {
        long long ready = -1, leased = -1;
        ST(S, queue_sizes, AF_TYPES[t], &ready, &leased, &err);
        snprintf(line, sizeof line, "queue %s: %lld ready, %lld leased\n", AF_TYPES[t], ready,
                 leased);
        af_norm(&b, line);
        for (i = 0; i < sizeof AF_IDS / sizeof AF_IDS[0]; i++)
            for (k = 0; k < sizeof AF_TASKS / sizeof AF_TASKS[0]; k++) {
                st_qmember m;
                memset(&m, 0, sizeof m);
                assert_int_equal(ST(S, queue_member, AF_TYPES[t], AF_IDS[i], AF_TASKS[k], &m, &err),
                                 0);
                if (m.state == ST_Q_NONE) continue;
                snprintf(line, sizeof line,
                         "  %s|%s: %d visible %lld name %s limit %d/%lld/%d held %d window "
                         "%lld/%d\n",
                         AF_IDS[i], AF_TASKS[k], (int)m.state, (long long)m.visible, m.name,
                         m.limit.rate_count, (long long)m.limit.rate_per_ms, m.limit.concurrency,
                         m.held, (long long)m.window_start, m.window_claims);
                af_norm(&b, line);
            }
    }
    snprintf(line, sizeof line, "next %lld\n",
             (long long)st_memory_next(S, AF_TYPES, sizeof AF_TYPES / sizeof AF_TYPES[0]));
    af_norm(&b, line);
    OK(ST(S, def_list, &json, &e_));
    af_norm(&b, json);
    free(json);
    OK(ST(S, taskdef_list, &json, &e_));
    af_norm(&b, json);
    free(json);
    OK(ST(S, daemons, &json, &e_));
    af_norm(&b, json);
    free(json);
    OK(ST(S, secret_names, &names, &nnames, &e_));
    for (i = 0; i < nnames; i++) {
        char *v = NULL;
        OK(ST(S, secret_get, names[i], &v, &e_));
        snprintf(line, sizeof line, "\nsecret %s=%s", names[i], v);
        af_norm(&b, line);
        free(v);
    }
    free_list(names, nnames);
    return b.data;
}

/* One store case: the state before it (built unarmed, on a fresh store),
 * the operation (armed), and what else it gives besides the store. */
typedef struct af_store_case {
    const char *name;
    void (*before)(void);
    int (*call)(void);
    char *(*result)(void); /* what the call gave (caller frees), or NULL */
} af_store_case;

static struct {
    const af_store_case *c;
    char *before, *want, *before_result, *want_result;
    /* what cases pass the call and read back */
    xc_exec *x;
    st_lease leases[8];
    int nleases;
    char due_ids[4][64];
    int ndue;
    st_create cr[1];
    st_save sv[1];
} AS;

static void af_store_setup(void *ud)
{
    weft_error err = {0};
    if (st_memory_open(NULL, &S, &err)) fail_msg("open: %s", err.msg);
    memset(AS.leases, 0, sizeof AS.leases);
    AS.nleases = AS.ndue = 0;
    memset(AS.cr, 0, sizeof AS.cr);
    memset(AS.sv, 0, sizeof AS.sv);
    AS.x = NULL;
    AS.c->before();
    AS.before = af_store_state();
    AS.before_result = AS.c->result ? AS.c->result() : NULL;
}

static int af_store_call(void *ud)
{
    return AS.c->call();
}

static int af_store_check(void *ud, int rc, int failed)
{
    char *got = af_store_state(), *res = AS.c->result ? AS.c->result() : NULL;
    int same;
    if (rc == WEFT_ENOMEM) {
        assert_string_equal(got, AS.before);
        if (res) assert_string_equal(res, AS.before_result);
        same = 0;
    } else {
        assert_string_equal(got, AS.want);
        if (res) assert_string_equal(res, AS.want_result);
        same = 1;
    }
    free(got);
    free(res);
    return same;
}

static void af_store_teardown(void *ud)
{
    free(AS.before);
    free(AS.before_result);
    AS.before = AS.before_result = NULL;
    teardown(NULL);
}

static void af_store_baseline(void *ud, int rc)
{
    assert_int_equal(rc, 0);
    AS.want = af_store_state();
    AS.want_result = AS.c->result ? AS.c->result() : NULL;
}

static void af_store_sweep(const af_store_case *c)
{
    af_case ac = {c->name,        af_store_setup,    af_store_call,
                  af_store_check, af_store_teardown, af_store_baseline};
    AS.c = c;
    af_run(&ac, NULL);
    free(AS.want);
    free(AS.want_result);
    AS.want = AS.want_result = NULL;
}

/* The code of a batch of one: the call's, else its item's. A failed
 * call must have set the item's code too (STYLE 15). */
static int af_item(int call_rc, int item_rc)
{
    if (call_rc) assert_int_not_equal(item_rc, 0);
    return call_rc ? call_rc : item_rc;
}

/* wf-1 with a task in each queue, one of them claimed */
static void af_two_queued(void)
{
    int64_t now = wu_now_ms();
    st_step sp[3] = {push("T", "t0", now - 10), push("T", "t1", now - 10),
                     push("U", "t2", now + 60000)};
    AS.x = queued("wf-1", sp, 3);
    assert_int_equal(claim("T", 1, 60000, AS.leases), 1);
    AS.nleases = 1;
}

static const char *const AF_EVENTS[2] = {"{\"status\":\"RUNNING\"}", "{\"taskId\":\"t1\"}"};

/* an execution to create (a batch of one: each item of a batch is a
 * create of its own) */
static void af_new(void)
{
    AS.cr[0].x = new_exec("wf-1");
}

static int af_create_call(void)
{
    int64_t now = wu_now_ms();
    static st_step sp[4];
    int rc;
    sp[0] = push("T", "t0", now);
    sp[1] = push("U", "t1", now + 5000);
    sp[2] = push("blue:T", "t2", now);
    sp[3].kind = ST_WAKE;
    sp[3].at = now + 1000;
    AS.cr[0].steps = sp;
    AS.cr[0].nsteps = 4;
    AS.cr[0].events = AF_EVENTS;
    AS.cr[0].nevents = 2;
    rc = ST(S, exec_create_many, AS.cr, 1, &e_);
    return af_item(rc, AS.cr[0].rc);
}

static int af_save_call(void)
{
    int64_t now = wu_now_ms();
    static st_step sp[5];
    int rc;
    sp[0].kind = ST_UNQUEUE;
    sp[0].type = "T";
    sp[0].task_id = "t0";
    sp[1] = push("T", "t3", now);
    sp[2] = push("blue:T", "t2", now);
    sp[2].lease = "tok-1";
    sp[2].lease_until = now + 60000;
    sp[3] = push("U", "t1", now);
    sp[3].priority = 5;
    sp[4].kind = ST_WAKE;
    sp[4].at = now + 2000;
    AS.x->status = WEFT_WF_RUNNING;
    AS.sv[0].x = AS.x;
    AS.sv[0].fence = AS.x->fence;
    AS.sv[0].loaded_fence = AS.x->fence;
    AS.sv[0].steps = sp;
    AS.sv[0].nsteps = 5;
    AS.sv[0].events = AF_EVENTS;
    AS.sv[0].nevents = 2;
    AS.sv[0].acks = AS.leases;
    AS.sv[0].nacks = 1;
    rc = ST(S, exec_save_many, AS.sv, 1, &e_);
    return af_item(rc, AS.sv[0].rc);
}

static int af_claim_call(void)
{
    const char *types[2] = {"T", "U"};
    int n = ST(S, due_claim, 0, 4, 60000, AS.due_ids, &AS.ndue, types, 2, 4, 60000,
               AS.leases + AS.nleases, &e_);
    if (n < 0) return n;
    AS.nleases += n;
    return 0;
}

static char *af_claim_result(void)
{
    wu_buf b = {0};
    char line[256];
    int i;
    for (i = 0; i < AS.ndue; i++) {
        snprintf(line, sizeof line, "due %s\n", AS.due_ids[i]);
        af_norm(&b, line);
    }
    for (i = 0; i < AS.nleases; i++) {
        snprintf(line, sizeof line, "lease %s|%s %s %s\n", AS.leases[i].workflow_id,
                 AS.leases[i].task_id, AS.leases[i].type, AS.leases[i].lease);
        af_norm(&b, line);
    }
    return b.data ? b.data : strdup("");
}

static int af_renew_call(void)
{
    int ok = -1, rc = ST(S, renew_many, AS.leases, 1, 30000, &ok, &e_);
    return rc < 0 ? rc : ok == 1 ? 0 : WEFT_ESTATE;
}

static int af_ack_call(void)
{
    return ST(S, ack, &AS.leases[0], &e_) < 0 ? e_.code : 0;
}

static int af_fail_call(void)
{
    return ST(S, exec_fail, "wf-1", 0, "cannot be read", &e_);
}

static int af_command_call(void)
{
    char *pending = NULL, status[32];
    int rc = ST(S, exec_command, "wf-1", "tok|pause|by me", "pause", &pending, status, &e_);
    free(pending);
    return rc == ST_CMD_RECORDED ? 0 : rc;
}

static int af_def_call(void)
{
    return ST(S, def_register, "order", 2, "{\"name\":\"order\",\"version\":2}", &e_);
}

static int af_taskdef_call(void)
{
    return ST(S, taskdef_put, "T", "{\"name\":\"T\",\"retryCount\":2}", &e_);
}

static int af_secret_call(void)
{
    return ST(S, secret_set, "KEY", "s3cret", &e_);
}

static int af_log_call(void)
{
    const char *lines[2] = {"{\"log\":\"one\"}", "{\"log\":\"two\"}"};
    return ST(S, task_log_add, "wf-1", "t0", lines, 2, &e_);
}

static char *af_log_result(void)
{
    char *lines = NULL;
    OK(ST(S, task_log, "wf-1", "t0", &lines, &e_));
    return lines;
}

/* (info without keys: json-c 0.16's parser crashes when a key's copy
 * cannot be made, strlen(NULL) in json_object_object_add_ex) */
static int af_daemon_call(void)
{
    return ST(S, daemon_beat, "d-1", "{}", &e_);
}

static int af_idem_call(void)
{
    char existing[64];
    int rc = ST(S, idem_claim, "key-1", "wf-1", existing, &e_);
    return rc < 0 ? rc : 0;
}

static void af_created(void)
{
    AS.x = queued("wf-1", NULL, 0);
}

/* wf-1 due, with tasks ready in two queues, one with queue controls */
static void af_ready(void)
{
    int64_t now = wu_now_ms();
    st_step sp[3] = {push("T", "t0", now - 10), push("T", "t1", now - 10),
                     push("U", "t2", now - 10)};
    sp[2].priority = 3;
    AS.x = queued("wf-1", sp, 3);
}

/* Every allocation of each memory store operation fails in turn. */
static void test_alloc_failures(void **state)
{
    static const af_store_case cases[] = {
        {"exec_create_many", af_new, af_create_call, NULL},
        {"exec_save_many", af_two_queued, af_save_call, NULL},
        {"due_claim", af_ready, af_claim_call, af_claim_result},
        {"renew_many", af_two_queued, af_renew_call, NULL},
        {"ack", af_two_queued, af_ack_call, NULL},
        {"exec_fail", af_two_queued, af_fail_call, NULL},
        {"exec_command", af_two_queued, af_command_call, NULL},
        {"def_register", af_created, af_def_call, NULL},
        {"taskdef_put", af_created, af_taskdef_call, NULL},
        {"secret_set", af_created, af_secret_call, NULL},
        {"daemon_beat", af_created, af_daemon_call, NULL},
        {"task_log_add", af_created, af_log_call, af_log_result},
        {"idem_claim", af_created, af_idem_call, NULL},
    };
    size_t i;
    if (!is_memory()) skip();
    st_free(S); /* each run opens its own */
    S = NULL;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        af_store_sweep(&cases[i]);
}

/* ---- the run ---- */

static const weft_task_type type_t = {.name = "T"};

static const weft_task_type *find_type(void *ud, const char *name)
{
    (void)ud;
    return !strcmp(name, "T") ? &type_t : NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_def_unanswered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_odd_members, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_fence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_failed_unread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_long_correlation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_stale_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_step_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_folded_by_due, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_fold_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_fold_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_fold_backs_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search_late_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_priority_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_priority_strict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrency_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conc_unqueue_woken, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conc_repush_leased, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_repush_parked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conc_forget_parked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conc_repush_with_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_giveback_spends_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_renew_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poll_extend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unqueue_and_acks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eager_lease, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_wake_forget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_forget_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_and_claims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_taskdefs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotency, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secrets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemons, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_inputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bench, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    json_object *def = json_tokener_parse(
        "{\"name\":\"order\",\"version\":1,\"tasks\":[{\"name\":\"a\",\"taskReferenceName\":\"a\","
        "\"type\":\"T\"}]}");
    weft_error err = {0};
    rf_server srv;
    int have_redis = 0, fails = 0;
    size_t b;

    ENV.find_type = find_type;
    ENV.searched = "/test/plugins";
    ENV.host = host_table();
    if (def_compile(&ENV, def, "test", NULL, &WF, &err)) {
        fprintf(stderr, "definition: %s\n", err.msg);
        return 1;
    }
    json_object_put(def);
    for (b = 0; b < sizeof BACKENDS / sizeof BACKENDS[0]; b++)
        if (BACKENDS[b].needs_redis && !have_redis) {
            int rc = rf_start(&srv);
            if (rc != 0 && rc != RF_SKIP) {
                fprintf(stderr, "could not start redis-server\n");
                return 1;
            }
            have_redis = rc == 0 ? 1 : -1;
        }
    for (b = 0; b < sizeof BACKENDS / sizeof BACKENDS[0]; b++) {
        cur = &BACKENDS[b];
        if (cur->needs_redis && have_redis < 0) {
            fprintf(stderr, "%s: redis-server is not installed: skipped\n", cur->name);
            continue;
        }
        cur_url = cur->needs_redis ? srv.url : NULL;
        fails += cmocka_run_group_tests_name(cur->name, tests, NULL, NULL);
    }
    if (have_redis > 0) rf_stop(&srv);
    def_unref(WF);
    return fails ? 1 : 0;
}

/*
 * Tests of ops.c against a real redis-server (started here on a free
 * loopback port; skipped when redis-server is not installed): start, load,
 * idempotent start, update, corrupt stored state, and the proof DESIGN.md
 * section 8 asks for: concurrent deciders never corrupt state (fencing),
 * with any lock module. The lock tests load the lock plugins of the build
 * tree (skipped without WEFT_TOP_BUILDDIR).
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
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <hiredis/hiredis.h>

#include "core/codec.h"
#include "plugin/host.h"
#include "core/ops.h"
#include "store/redis/backend.h"
#include "plugin/loader.h"
#include "redis_fixture.h"
#include "redis_inspect.h"

#define PREFIX "t:"
#define PER_THREAD 200
#define THREADS 2

static rf_server srv;
static pl_registry *R; /* lock plugins; NULL without WEFT_TOP_BUILDDIR */

/* ---- definitions: one queued type, defined here ---- */

static int q_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type Q_TYPE = {.name = "Q", .execute = q_execute};

/* An inline type: its map ends it at once */
static int m_map(weft_ctx *ctx, json_object *task, json_object *out_tasks, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type M_TYPE = {.name = "M", .map = m_map};

static const weft_task_type *find_type(void *ud, const char *name)
{
    return !strcmp(name, "Q") ? &Q_TYPE : !strcmp(name, "M") ? &M_TYPE : NULL;
}

static def_env DEFS = {find_type, NULL, "/test/plugins", NULL, 0, NULL};
static const dec_env DEC = {&DEFS, NULL, wu_now_ms, NULL, NULL};

static const char *DEF_JSON =
    "{\"name\":\"ops_w\",\"version\":2,\"tasks\":[{\"taskReferenceName\":"
    "\"a\",\"type\":\"Q\"},{\"taskReferenceName\":\"b\",\"type\":\"Q\"}]}";

/* ---- the fixture: a cache, one env on the main thread, the definition ---- */

static struct {
    op_cache *cache;
    op_env env;
    def_workflow *def;
} F;

static void assert_has(const char *msg, const char *part)
{
    if (!msg) fail_msg("NULL does not contain \"%s\"", part);
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

/* HGET of an execution's hash field into buf ("(nil)" when missing). */
static const char *hget(const char *id, const char *field, char *buf, size_t n)
{
    return qstr(buf, n, "HGET " PREFIX "{%s} %s", id, field);
}

static long long count_keys(const char *pattern)
{
    redisReply *x = qc("KEYS %s", pattern);
    long long n = x->type == REDIS_REPLY_ARRAY ? (long long)x->elements : -1;
    freeReplyObject(x);
    return n;
}

static void env_init(op_env *e, st_store *s)
{
    memset(e, 0, sizeof *e);
    e->st = s;
    e->defs = &DEFS;
    e->dec = &DEC;
    e->cache = F.cache;
    e->lock_ttl_ms = 10000;
    e->lock_wait_ms = 15000;
    e->sweep_ms = 60000;
}

/* A store over the test server, with cache (NULL: none). */
static st_store *open_store_with(dc_cache *cache)
{
    st_redis_opts o = {0};
    st_store *s = NULL;
    weft_error err = {0};
    o.rs.url = srv.url;
    o.rs.prefix = PREFIX;
    o.defs = &DEFS;
    o.cache = cache;
    if (st_redis_open(&o, &s, &err)) {
        st_free(s);
        return NULL;
    }
    return s;
}

/* A store over the test server, with the fixture's cache. */
static st_store *open_rs(void)
{
    return open_store_with(F.cache);
}

/* The fixture's connection, for what the tests check directly in Redis. */
#define RC (st_redis_conn(F.env.st))

static int setup(void **state)
{
    weft_error err = {0};
    redisReply *x;
    memset(&F, 0, sizeof F);
    DEFS.host = host_table();
    if (!q || q->err) {
        if (q) redisFree(q);
        q = redisConnect("127.0.0.1", srv.port);
        if (!q || q->err) return -1;
    }
    x = redisCommand(q, "FLUSHALL");
    freeReplyObject(x);
    F.cache = op_cache_new();
    env_init(&F.env, open_rs());
    if (!F.cache || !F.env.st) return -1;
    if (op_def(&F.env, DEF_JSON, "test.json", &F.def, &err)) {
        print_error("op_def: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    def_unref(F.def);
    st_free(F.env.st);
    op_cache_free(F.cache);
    memset(&F, 0, sizeof F);
    return 0;
}

/* Start an execution of F.def, leaving its first decision to a decider (as
 * a starter without a decider does); its id into id. */
static void start(const char *input_json, const char *idem, char id[64])
{
    op_start_args a = {0};
    weft_error err = {0};
    json_object *in = input_json ? json_tokener_parse(input_json) : NULL;
    op_env undecided = F.env;
    int rc;
    a.def = F.def;
    a.input = in;
    a.idempotency_key = idem;
    undecided.dec = NULL;
    rc = op_start(&undecided, &a, id, &err);
    json_object_put(in);
    if (rc) fail_msg("op_start: %s", err.msg);
}

static xc_exec *load(const char *id, uint64_t *fence)
{
    xc_exec *x = NULL;
    weft_error err = {0};
    if (op_load(&F.env, id, &x, fence, &err)) fail_msg("op_load %s: %s", id, err.msg);
    return x;
}

/* ---- start, load ---- */

static void test_start_load(void **state)
{
    char id[64], id2[64], buf[64];
    op_start_args a = {0};
    weft_error err = {0};
    json_object *in = json_tokener_parse("{\"k\":[1,2],\"s\":\"x\"}");
    xc_exec *x;
    uint64_t fence = 0;
    char due[8][64];
    int n, i, seen = 0;

    op_env undecided = F.env;
    undecided.dec = NULL; /* a starter without a decider */
    a.def = F.def;
    a.input = in;
    a.correlation_id = "corr-9";
    assert_int_equal(op_start(&undecided, &a, id, &err), 0);
    assert_int_equal(strlen(id), 36);
    x = load(id, &fence);
    assert_string_equal(x->id, id);
    assert_int_equal(x->status, WEFT_WF_RUNNING);
    assert_true(json_object_equal(x->input, in));
    assert_string_equal(x->correlation_id, "corr-9");
    assert_string_equal(x->def->name, "ops_w");
    assert_int_equal(x->def->version, 2);
    assert_int_equal(x->tasks.len, 0);
    assert_int_equal(fence, 1);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "RUNNING");
    xc_free(x);

    /* due for a decider now */
    n = rs_due(RC, 8, 1000, due, &err);
    assert_true(n >= 1);
    for (i = 0; i < n; i++)
        seen += !strcmp(due[i], id);
    assert_int_equal(seen, 1);

    /* a chosen id; the same id again is refused */
    a.id = "wf-chosen";
    a.correlation_id = NULL;
    assert_int_equal(op_start(&F.env, &a, id2, &err), 0);
    assert_string_equal(id2, "wf-chosen");
    assert_int_equal(op_start(&F.env, &a, id2, &err), WEFT_EEXIST);
    x = load("wf-chosen", NULL);
    assert_null(x->correlation_id);
    xc_free(x);

    /* input must be an object */
    json_object_put(in);
    a.id = NULL;
    a.input = in = json_object_new_array();
    assert_int_equal(op_start(&F.env, &a, id2, &err), WEFT_EINVAL);
    json_object_put(in);

    /* unknown ids */
    assert_int_equal(op_load(&F.env, "no-such-wf", &x, NULL, &err), WEFT_ENOTFOUND);
    assert_null(x);
    assert_has(err.msg, "no-such-wf");
    assert_int_equal(count_keys(PREFIX "{*}"), 2);
}

/* A process that never saw the definition compiles it from the stored text. */
static void test_load_without_cache(void **state)
{
    char id[64];
    op_env e;
    xc_exec *x = NULL;
    weft_error err = {0};
    start(NULL, NULL, id);
    env_init(&e, open_store_with(NULL)); /* the definition cache is the store's */
    e.cache = NULL;
    assert_int_equal(op_load(&e, id, &x, NULL, &err), 0);
    assert_ptr_not_equal(x->def, F.def);
    assert_string_equal(x->def->name, "ops_w");
    assert_non_null(wu_map_get(x->def->by_ref, "b"));
    xc_free(x);
    st_free(e.st);
}

/* The execution op_load returns carries the stored fence (DESIGN 2: the
 * fence is part of an execution; xc_to_json shows it). */
static void test_load_fence(void **state)
{
    char id[64], buf[32];
    xc_exec *x;
    uint64_t fence = 0, in_exec;
    int64_t in_json;
    json_object *j;
    weft_error err = {0};
    start(NULL, NULL, id);
    assert_int_equal(op_update(&F.env, id, op_fn_pause, NULL, &err), 0);
    x = load(id, &fence);
    j = xc_to_json(x);
    in_exec = x->fence;
    in_json = json_object_get_int64(json_object_object_get(j, "fence"));
    json_object_put(j);
    xc_free(x);
    assert_int_equal(fence, 2);
    assert_string_equal(hget(id, "fence", buf, sizeof buf), "2");
    assert_int_equal(in_exec, 2);
    assert_int_equal(in_json, 2);
}

/* A starter with a decider makes the first decision when the first task is
 * queued: created with it scheduled and pushed, its event on the status
 * lane, and due for a decider only after sweep_ms. */
static void test_start_decides(void **state)
{
    char id[64], id2[64];
    op_start_args a = {0};
    weft_error err = {0};
    xc_exec *x;
    uint64_t fence = 0;
    int64_t t0 = wu_now_ms();
    char member[128];
    redisReply *ev;
    def_workflow *inl = NULL;

    a.def = F.def;
    assert_int_equal(op_start(&F.env, &a, id, &err), 0);
    x = load(id, &fence);
    assert_int_equal(fence, 1);
    assert_int_equal(x->tasks.len, 1);
    {
        xc_task *t = x->tasks.items[0];
        assert_string_equal(t->ref, "a");
        assert_int_equal(t->status, WEFT_TASK_SCHEDULED);
        snprintf(member, sizeof member, "%s|%s", id, t->id);
    }
    xc_free(x);
    ev = qc("ZSCORE " PREFIX "{q:Q}:ready %s", member);
    assert_int_equal(ev->type, REDIS_REPLY_STRING);
    freeReplyObject(ev);
    ev = qc("ZSCORE " PREFIX "{dq}:due %s", id);
    assert_int_equal(ev->type, REDIS_REPLY_STRING);
    assert_true(atoll(ev->str) >= t0 + F.env.sweep_ms);
    freeReplyObject(ev);
    assert_int_equal(count_keys(PREFIX "{*}:out"), 0);
    ev = qc("XRANGE " PREFIX "{%s}:ev - +", id);
    assert_int_equal(ev->type, REDIS_REPLY_ARRAY);
    assert_int_equal(ev->elements, 1);
    assert_has(ev->element[0]->element[1]->element[1]->str, "\"status\":\"SCHEDULED\"");
    freeReplyObject(ev);

    /* the decider takes it from there: a claim runs it */
    {
        const char *types[] = {"Q"};
        rs_lease c;
        assert_int_equal(rs_claim(RC, types, 1, 1, 60000, &c, &err), 1);
        assert_string_equal(c.workflow_id, id);
    }

    /* a first task that is inline (its plugin's map runs) is left to a decider */
    assert_int_equal(op_def(&F.env,
                            "{\"name\":\"inl\",\"tasks\":[{\"taskReferenceName\":\"m\","
                            "\"type\":\"M\"},{\"taskReferenceName\":\"b\",\"type\":\"Q\"}]}",
                            "inl.json", &inl, &err),
                     0);
    a.def = inl;
    t0 = wu_now_ms();
    assert_int_equal(op_start(&F.env, &a, id2, &err), 0);
    x = load(id2, &fence);
    assert_int_equal(x->tasks.len, 0);
    xc_free(x);
    ev = qc("ZSCORE " PREFIX "{dq}:due %s", id2);
    assert_int_equal(ev->type, REDIS_REPLY_STRING);
    assert_true(atoll(ev->str) <= wu_now_ms());
    freeReplyObject(ev);
    def_unref(inl);
}

static void test_idempotent_start(void **state)
{
    char id1[64], id2[64], id3[64];
    start("{\"n\":1}", "order-17", id1);
    start("{\"n\":1}", "order-17", id2);
    assert_string_equal(id1, id2);
    assert_int_equal(count_keys(PREFIX "{*}"), 1);
    start(NULL, "order-18", id3);
    assert_string_not_equal(id1, id3);
    assert_int_equal(count_keys(PREFIX "{*}"), 2);
    /* the repeat did not reset the first one */
    {
        uint64_t fence = 0;
        xc_exec *x = load(id1, &fence);
        assert_int_equal(fence, 1);
        xc_free(x);
    }
}

/* ---- update ---- */

typedef struct change {
    int calls;
    int rc;
    const char *key;
} change;

static int set_var(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    change *c = ud;
    c->calls++;
    if (c->rc < 0) return wu_err(err, c->rc, "change refused");
    if (c->rc == OP_NOCHANGE) return OP_NOCHANGE;
    json_object_object_add(x->variables, c->key, json_object_new_int(c->calls));
    return 0;
}

static int on_event(void *ud, const char *id, const char *json)
{
    char *seen = ud;
    size_t n = strlen(seen);
    snprintf(seen + n, 1024 - n, "%s\n", json);
    return 0;
}

static void test_update(void **state)
{
    char id[64], buf[64], seen[1024] = "";
    change c = {0, 0, "x"};
    weft_error err = {0};
    xc_exec *x;
    uint64_t fence = 0;

    start(NULL, NULL, id);
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), 0);
    assert_int_equal(c.calls, 1);
    x = load(id, &fence);
    assert_int_equal(fence, 2);
    assert_int_equal(json_object_get_int(json_object_object_get(x->variables, "x")), 1);
    xc_free(x);

    /* nothing changed: nothing saved */
    c.rc = OP_NOCHANGE;
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), 0);
    assert_int_equal(c.calls, 2);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 2);

    /* the change's error is returned, nothing saved */
    c.rc = WEFT_ESTATE;
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), WEFT_ESTATE);
    assert_has(err.msg, "change refused");
    xc_free(load(id, &fence));
    assert_int_equal(fence, 2);

    /* ready-made changes; terminating twice is refused */
    assert_int_equal(op_update(&F.env, id, op_fn_terminate, "by test", &err), 0);
    x = load(id, &fence);
    assert_int_equal(x->status, WEFT_WF_TERMINATED);
    assert_string_equal(x->reason, "by test");
    assert_int_equal(fence, 3);
    xc_free(x);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "TERMINATED");
    assert_int_equal(op_update(&F.env, id, op_fn_terminate, NULL, &err), WEFT_ESTATE);
    assert_has(err.msg, "TERMINATED");
    assert_null(strstr(err.msg, "gave up")); /* a change's own refusal is final, not a race */
    /* the status lane got the workflow's end */
    assert_true(rs_events(RC, id, "0", NULL, 0, on_event, seen, &err) >= 1);
    assert_has(seen, "\"status\":\"TERMINATED\"");
    assert_has(seen, "by test");
}

/*
 * Operator commands win over a decider that holds an older copy: the
 * command waits in the execution, the stale save is refused, and the redo
 * applies the command first, then the decider's own change.
 */
static void test_command(void **state)
{
    change c = {0, 0, "x"};
    weft_error err = {0};
    char id[64], id2[64], buf[256], *pending = NULL, st[32];
    uint64_t fence;
    xc_exec *x;

    start(NULL, NULL, id);
    x = load(id, &fence); /* a decider's copy, from before the command */
    assert_int_equal(rs_exec_command(RC, id, "tok1|pause|", "pause", &pending, st, &err),
                     RS_CMD_RECORDED);
    assert_int_equal(rs_exec_command(RC, id, "tok2|pause|", "pause", &pending, st, &err),
                     RS_CMD_SAME);
    assert_string_equal(pending, "tok1|pause|");
    free(pending);
    assert_int_equal(rs_exec_command(RC, id, "tok3|resume|", "resume", &pending, st, &err),
                     RS_CMD_OTHER);
    free(pending);
    assert_int_equal(op_update_from(&F.env, id, x, set_var, &c, &err), 0);
    x = load(id, &fence);
    assert_int_equal(x->status, WEFT_WF_PAUSED);
    /* set on the stale copy (refused), then again on the reloaded one */
    assert_int_equal(c.calls, 2);
    assert_int_equal(json_object_get_int(json_object_object_get(x->variables, "x")), 2);
    assert_null(x->cmd);
    xc_free(x);
    assert_string_equal(hget(id, "cmd", buf, sizeof buf), "(nil)");

    /* the operator's side */
    assert_int_equal(op_command(&F.env, id, OP_PAUSE, NULL, &err), WEFT_ESTATE);
    assert_has(err.msg, "only RUNNING workflows can be paused");
    assert_int_equal(op_command(&F.env, id, OP_RESUME, NULL, &err), 0);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "RUNNING");
    assert_int_equal(op_command(&F.env, id, OP_RESUME, NULL, &err), WEFT_ESTATE);
    assert_has(err.msg, "only PAUSED workflows can be resumed");
    assert_int_equal(op_command(&F.env, id, OP_TERMINATE, "by an operator", &err), 0);
    x = load(id, &fence);
    assert_int_equal(x->status, WEFT_WF_TERMINATED);
    assert_string_equal(x->reason, "by an operator");
    xc_free(x);
    assert_int_equal(op_command(&F.env, id, OP_TERMINATE, NULL, &err), WEFT_ESTATE);
    assert_has(err.msg, "already TERMINATED");
    assert_int_equal(op_command(&F.env, "no-such-wf", OP_TERMINATE, NULL, &err), WEFT_ENOTFOUND);
    assert_has(err.msg, "no-such-wf");

    /* a terminate overrides a waiting pause; a change that fails after the
     * command was applied still saves the command, and says its error */
    start(NULL, NULL, id2);
    assert_int_equal(rs_exec_command(RC, id2, "t1|pause|", "pause", &pending, st, &err),
                     RS_CMD_RECORDED);
    assert_int_equal(rs_exec_command(RC, id2, "t2|terminate|stop", "terminate", &pending, st, &err),
                     RS_CMD_RECORDED);
    c.rc = WEFT_ESTATE;
    assert_int_equal(op_update(&F.env, id2, set_var, &c, &err), WEFT_ESTATE);
    assert_has(err.msg, "change refused");
    assert_string_equal(hget(id2, "status", buf, sizeof buf), "TERMINATED");
    assert_string_equal(hget(id2, "cmd", buf, sizeof buf), "(nil)");
}

/* A lock some decider holds for good: acquire always times out. */
static int held_acquire(void *lock, const char *key, int64_t ttl_ms, int64_t wait_ms, char *token,
                        size_t token_size, weft_error *err)
{
    return wu_err(err, WEFT_ETIMEOUT, "lock %s is held", key);
}

static int held_release(void *lock, const char *key, const char *token, weft_error *err)
{
    return 0;
}

/* A command nobody can apply in time says so after command_wait_ms, and
 * stays recorded: the next save of any decider lands it. */
static void test_command_wait(void **state)
{
    static const weft_lock_provider held = {
        .name = "held", .acquire = held_acquire, .release = held_release};
    op_env e = F.env;
    change c = {0, 0, "x"};
    weft_error err = {0};
    char id[64], buf[256];
    int64_t t0;

    start(NULL, NULL, id);
    e.lock = &held;
    e.command_wait_ms = 300;
    t0 = wu_mono_ms();
    assert_int_equal(op_command(&e, id, OP_PAUSE, NULL, &err), WEFT_ETIMEOUT);
    assert_true(wu_mono_ms() - t0 >= 250);
    assert_has(err.msg, id);
    assert_has(err.msg, "no decider applied it within 300 ms");
    assert_string_equal(hget(id, "status", buf, sizeof buf), "RUNNING");
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), 0);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "PAUSED");
    assert_string_equal(hget(id, "cmd", buf, sizeof buf), "(nil)");
}

static void test_update_unknown(void **state)
{
    change c = {0, 0, "x"};
    weft_error err = {0};
    assert_int_equal(op_update(&F.env, "no-such-wf", set_var, &c, &err), WEFT_ENOTFOUND);
    assert_has(err.msg, "no-such-wf");
    assert_int_equal(c.calls, 0);
    assert_int_equal(count_keys("*"), 0); /* nothing created on the way */
}

/*
 * Stored state that cannot be read (doc_fmt, with %s for the id): the
 * workflow fails with the reason, the call returns an error naming the
 * workflow, and later updates see a FAILED workflow.
 */
static void check_corrupt(const char *doc_fmt, const char *why)
{
    char id[64], buf[64], doc[512];
    change c = {0, 0, "x"};
    weft_error err = {0};
    xc_exec *x;
    uint64_t fence = 0;

    start(NULL, NULL, id);
    snprintf(doc, sizeof doc, doc_fmt, id);
    assert_int_equal(rs_command(RC, &err, "HSET " PREFIX "{%s} doc %s", id, doc), 0);
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), WEFT_EINVAL);
    assert_int_equal(c.calls, 0);
    assert_has(err.msg, id);
    assert_has(err.msg, "corrupt");
    assert_has(err.msg, why);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "FAILED");

    x = load(id, &fence);
    assert_string_equal(x->id, id);
    assert_int_equal(x->status, WEFT_WF_FAILED);
    assert_has(x->reason, "corrupt");
    assert_has(x->reason, why);
    assert_true(x->ended_ms > 0);
    assert_int_equal(fence, 2);
    xc_free(x);
    /* off the decider queue: nothing will look at it again */
    {
        redisReply *r = qc("ZSCORE " PREFIX "{dq}:due %s", id);
        assert_int_equal(r->type, REDIS_REPLY_NIL);
        freeReplyObject(r);
    }
    /* the next change sees a failed workflow, and may act on it */
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), 0);
    assert_int_equal(c.calls, 1);
    assert_int_equal(op_update(&F.env, id, op_fn_terminate, NULL, &err), WEFT_ESTATE);
}

static void test_corrupt_doc(void **state)
{
    check_corrupt("garbage{%s", "");
    check_corrupt("{\"id\":\"%s\",\"status\":\"SLEEPING\"}", "bad status");
    check_corrupt("{\"id\":\"%s\",\"status\":\"RUNNING\",\"tasks\":[{\"id\":\"t\","
                  "\"ref\":\"zz\",\"def\":\"zz\",\"status\":\"SCHEDULED\"}]}",
                  "'zz' is not in the definition");
}

/* A document without an id: the message still names the workflow it is stored as. */
static void test_corrupt_doc_without_id(void **state)
{
    check_corrupt("{\"status\":\"RUNNING\"}%.0s", "no id");
}

/* A document of another workflow stored under this id is not taken for this one. */
static void test_corrupt_doc_other_id(void **state)
{
    check_corrupt("{\"id\":\"someone-else\",\"status\":\"RUNNING\"}%.0s", "someone-else");
}

/* ---- several updates at once (op_update_many), eager dispatch ---- */

/* Eager dispatch says yes to type Q while *ud (an int) is non-zero. */
static int eager_q(void *ud, const xc_task *t)
{
    const int *accept = ud;
    return *accept && !strcmp(t->def->queue, "Q");
}

static int accept_eager = 1;

static void eager_on(void)
{
    accept_eager = 1;
    F.env.eager = eager_q;
    F.env.eager_ud = &accept_eager;
    F.env.lease_ms = 30000;
}

/* The decider's step: schedules what comes next (the first task of a fresh run). */
static int fn_decide(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                     weft_error *err)
{
    int *calls = ud;
    if (calls) (*calls)++;
    dec_decide(dec, x, o);
    return 0;
}

/* Task ref ran and ended with status; the decider follows. */
static int task_ended(const dec_env *dec, xc_exec *x, dec_out *o, const char *ref,
                      weft_task_status status, weft_error *err)
{
    xc_task *t = xc_find_ref(x, ref);
    int rc;
    if (!t) return wu_err(err, WEFT_ENOTFOUND, "no task %s", ref);
    dec_start(dec, x, t);
    if ((rc = dec_complete(dec, x, t, status, NULL, xc_task_ok(status) ? NULL : "broken", o, err)))
        return rc;
    dec_decide(dec, x, o);
    return 0;
}

/* Task ud (a ref) ran and completed; the decider follows. */
static int fn_done(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    return task_ended(dec, x, o, ud, WEFT_TASK_COMPLETED, err);
}

/* The lease token stored for member id|task of queue Q, into buf. */
static const char *lease_of(const char *id, const char *task, char *buf, size_t n)
{
    return qstr(buf, n, "HGET " PREFIX "{q:Q}:lease %s|%s", id, task);
}

static void item_init(op_item *it, const char *id, xc_exec *x, op_fn fn, void *ud)
{
    memset(it, 0, sizeof *it);
    it->id = id;
    it->x = x;
    it->fn = fn;
    it->ud = ud;
}

static void item_clear(op_item *it)
{
    free(it->eager);
    it->eager = NULL;
    xc_free(it->x);
    it->x = NULL;
}

/* Push id's first task to the Q queue (no eager) and claim it: the claim. */
static rs_lease claimed_first_task(const char *id)
{
    const char *types[] = {"Q"};
    weft_error err = {0};
    rs_lease c;
    op_item it;
    item_init(&it, id, NULL, fn_decide, NULL);
    op_update_many(&F.env, &it, 1, NULL);
    if (it.rc) fail_msg("%s", it.err.msg);
    item_clear(&it);
    if (rs_claim(RC, types, 1, 1, 60000, &c, &err) != 1) fail_msg("claim: %s", err.msg);
    return c;
}

/* Task ud (a ref) ran and failed for good; the decider follows. */
static int fn_fail(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    return task_ended(dec, x, o, ud, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR, err);
}

/* What op_hooks.note heard: "<level> <msg>" lines. */
static void hear_note(void *ud, int level, const char *msg)
{
    char *seen = ud;
    size_t n = strlen(seen);
    snprintf(seen + n, 2048 - n, "%d %s\n", level, msg);
}

/* Failures and ends are told to the note hook once saved, successes not;
 * a change that is not saved tells nothing. */
static void test_notes(void **state)
{
    char id[64], seen[2048] = "", want[512];
    op_hooks hooks = {0};
    change c = {0, WEFT_ESTATE, "x"};
    weft_error err = {0};
    hooks.ud = seen;
    hooks.note = hear_note;
    F.env.hooks = &hooks;
    start(NULL, NULL, id);
    assert_int_equal(op_update(&F.env, id, fn_decide, NULL, &err), 0);
    assert_int_equal(op_update(&F.env, id, fn_done, "a", &err), 0);
    assert_string_equal(seen, "");
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), WEFT_ESTATE);
    assert_string_equal(seen, "");
    assert_int_equal(op_update(&F.env, id, fn_fail, "b", &err), 0);
    snprintf(want, sizeof want,
             "%d workflow %s: task 'b' (Q) FAILED_WITH_TERMINAL_ERROR: broken\n"
             "%d workflow %s (ops_w) FAILED: task 'b' (Q) failed: broken\n",
             WEFT_LOG_WARN, id, WEFT_LOG_WARN, id);
    assert_string_equal(seen, want);
    F.env.hooks = NULL;
}

/*
 * The decider-queue entry: a running execution keeps one due within
 * sweep_ms (saves that want it no sooner write no wake), an ended one has
 * none, and a retry (revival) puts it back and keeps the keys again.
 */
static void test_due_entry(void **state)
{
    char id[64];
    op_start_args a = {0};
    weft_error err = {0};
    int64_t t0 = wu_now_ms();
    long long due;
    a.def = F.def;
    assert_int_equal(op_start(&F.env, &a, id, &err), 0);
    due = qint("ZSCORE " PREFIX "{dq}:due %s", id);
    assert_true(due >= t0 + F.env.sweep_ms && due <= wu_now_ms() + F.env.sweep_ms);
    assert_int_equal(op_update(&F.env, id, fn_done, "a", &err), 0);
    assert_int_equal(qint("ZSCORE " PREFIX "{dq}:due %s", id), due);
    assert_int_equal(op_update(&F.env, id, fn_fail, "b", &err), 0);
    assert_int_equal(qint("ZSCORE " PREFIX "{dq}:due %s", id), -999);
    assert_true(qint("PTTL " PREFIX "{%s}", id) > 0);
    t0 = wu_now_ms();
    assert_int_equal(op_update(&F.env, id, op_fn_retry, NULL, &err), 0);
    due = qint("ZSCORE " PREFIX "{dq}:due %s", id);
    assert_true(due >= t0 && due <= wu_now_ms() + F.env.sweep_ms);
    assert_int_equal(qint("PTTL " PREFIX "{%s}", id), -1);
}

/*
 * Eager dispatch over a chain of two queued tasks: each save leases the next
 * task to the caller (not ready for anyone else) and hands back the
 * execution; the next round's save drops the previous lease (acks).
 */
static void test_update_many_eager(void **state)
{
    char id[64], buf[64], member[128];
    op_item it;
    size_t room = 4;
    int calls = 0;
    int64_t t0, t1;
    xc_task *a, *b;
    weft_error err = {0};
    rs_lease la;
    uint64_t fence = 0;

    start(NULL, NULL, id);
    eager_on();
    item_init(&it, id, NULL, fn_decide, &calls); /* not loaded: op_update_many loads it */
    t0 = wu_now_ms();
    op_update_many(&F.env, &it, 1, &room);
    t1 = wu_now_ms();
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.saved, 1);
    assert_int_equal(calls, 1);
    assert_int_equal(room, 3);
    assert_int_equal(it.neager, 1);
    assert_non_null(it.eager);
    /* the execution comes back (its eager task runs on it), fence advanced */
    assert_non_null(it.x);
    assert_int_equal(it.x->fence, 2);
    assert_string_equal(hget(id, "fence", buf, sizeof buf), "2");
    a = xc_find_ref(it.x, "a");
    assert_non_null(a);
    assert_string_equal(it.eager[0].workflow_id, id);
    assert_string_equal(it.eager[0].task_id, a->id);
    assert_string_equal(it.eager[0].type, "Q");
    assert_true(strlen(it.eager[0].lease) > 3);
    /* leased to us: in the leases zset with our token, not ready */
    snprintf(member, sizeof member, "%s|%s", id, a->id);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 0);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 1);
    assert_true(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member) >= t0 + 30000);
    assert_true(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member) <= t1 + 30000);
    assert_string_equal(lease_of(id, a->id, buf, sizeof buf), it.eager[0].lease);
    assert_int_equal(rs_check_lease(RC, &it.eager[0], &err), 0);
    assert_int_equal(qint("EXISTS " PREFIX "{%s}:out", id), 0);

    /* next round: a ran on the execution we hold; b is leased to us, a's lease dropped */
    la = it.eager[0];
    free(it.eager);
    item_init(&it, id, it.x, fn_done, "a");
    it.acks = &la;
    it.nacks = 1;
    it.keep = 1;
    op_update_many(&F.env, &it, 1, &room);
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.saved, 1);
    assert_int_equal(room, 2);
    assert_int_equal(it.neager, 1);
    assert_non_null(it.x);
    assert_int_equal(it.x->fence, 3);
    b = xc_find_ref(it.x, "b");
    assert_non_null(b);
    assert_string_equal(it.eager[0].task_id, b->id);
    assert_int_equal(xc_find_ref(it.x, "a")->status, WEFT_TASK_COMPLETED);
    assert_int_equal(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member), -999);
    assert_int_equal(qint("HEXISTS " PREFIX "{q:Q}:lease %s", member), 0);
    assert_int_equal(rs_check_lease(RC, &la, &err), WEFT_ESTATE);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 0);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 1);
    assert_string_equal(lease_of(id, b->id, buf, sizeof buf), it.eager[0].lease);

    /* the last one: the workflow completes, nothing more to lease */
    la = it.eager[0];
    free(it.eager);
    item_init(&it, id, it.x, fn_done, "b");
    it.acks = &la;
    it.nacks = 1;
    op_update_many(&F.env, &it, 1, &room);
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.neager, 0); /* it.eager may be an empty array: freed all the same */
    assert_null(it.x);              /* not kept */
    assert_int_equal(room, 2);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 0);
    assert_int_equal(qint("HLEN " PREFIX "{q:Q}:lease"), 0);
    item_clear(&it);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 4);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "COMPLETED");
}

/* Room limits how many tasks are leased eagerly; the rest are queued as usual. */
static void test_update_many_room(void **state)
{
    char id[3][64], member[128];
    op_item it[3];
    size_t room = 1, i;
    xc_task *t;

    for (i = 0; i < 3; i++)
        start(NULL, NULL, id[i]);
    eager_on();
    for (i = 0; i < 3; i++)
        item_init(&it[i], id[i], load(id[i], NULL), fn_decide, NULL);
    op_update_many(&F.env, it, 3, &room);
    assert_int_equal(room, 0);
    /* the first gets the one lease, the others are ready for anyone */
    assert_int_equal(it[0].rc, 0);
    assert_int_equal(it[0].neager, 1);
    for (i = 1; i < 3; i++) {
        assert_int_equal(it[i].rc, 0);
        assert_int_equal(it[i].saved, 1);
        assert_int_equal(it[i].neager, 0);
        assert_null(it[i].eager);
        assert_null(it[i].x);
    }
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 1);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 2);
    snprintf(member, sizeof member, "%s|%s", id[0], it[0].eager[0].task_id);
    assert_true(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member) > 0);
    for (i = 1; i < 3; i++) {
        xc_exec *x = load(id[i], NULL);
        t = xc_find_ref(x, "a");
        assert_non_null(t);
        snprintf(member, sizeof member, "%s|%s", id[i], t->id);
        assert_true(qint("ZSCORE " PREFIX "{q:Q}:ready %s", member) >= 0);
        xc_free(x);
    }
    for (i = 0; i < 3; i++)
        item_clear(&it[i]);

    /* room 0, no room at all, or eager saying no: queued as usual */
    {
        char id2[64];
        size_t zero = 0;
        int k;
        for (k = 0; k < 3; k++) {
            start(NULL, NULL, id2);
            item_init(&it[0], id2, NULL, fn_decide, NULL);
            accept_eager = k != 2;
            op_update_many(&F.env, it, 1, k == 1 ? NULL : &zero);
            if (k == 2) assert_int_equal(zero, 0);
            assert_int_equal(it[0].rc, 0);
            assert_int_equal(it[0].saved, 1);
            assert_int_equal(it[0].neager, 0);
            assert_null(it[0].eager);
            assert_null(it[0].x);
            item_clear(&it[0]);
            assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 3 + k);
            assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 1);
        }
        /* eager saying no leaves the room untouched */
        zero = 5;
        start(NULL, NULL, id2);
        item_init(&it[0], id2, NULL, fn_decide, NULL);
        op_update_many(&F.env, it, 1, &zero);
        assert_int_equal(zero, 5);
        assert_int_equal(it[0].neager, 0);
        item_clear(&it[0]);
    }
}

/*
 * Someone saved since the caller loaded: the batched save loses the fence
 * race, and the item is redone alone on fresh state: saved, no eager
 * lease (the task is queued for anyone), the room given back, its acks
 * dropped, and the other change kept.
 */
static void test_update_many_fence_race(void **state)
{
    char id[64], other[64], buf[64], member[128];
    change c = {0, 0, "x"};
    weft_error err = {0};
    xc_exec *stale, *x;
    op_item it;
    size_t room = 4;
    int calls = 0;
    uint64_t fence = 0;
    rs_lease claim;
    xc_task *a;

    start(NULL, NULL, other);
    claim = claimed_first_task(other); /* a claim this change consumes */
    start(NULL, NULL, id);
    eager_on();
    stale = load(id, NULL);
    assert_int_equal(stale->fence, 1);
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), 0); /* fence 2 */

    item_init(&it, id, stale, fn_decide, &calls);
    it.acks = &claim;
    it.nacks = 1;
    op_update_many(&F.env, &it, 1, &room);
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.saved, 1);
    assert_int_equal(calls, 2); /* once on the stale copy, once on fresh state */
    assert_int_equal(it.neager, 0);
    assert_null(it.eager);
    assert_int_equal(room, 4);
    xc_free(it.x);

    x = load(id, &fence);
    assert_int_equal(fence, 3);
    assert_int_equal(json_object_get_int(json_object_object_get(x->variables, "x")), 1);
    a = xc_find_ref(x, "a");
    assert_non_null(a);
    snprintf(member, sizeof member, "%s|%s", id, a->id);
    assert_true(qint("ZSCORE " PREFIX "{q:Q}:ready %s", member) >= 0);
    assert_int_equal(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member), -999);
    assert_string_equal(lease_of(id, a->id, buf, sizeof buf), "(nil)");
    xc_free(x);
    /* the claim it consumed is gone */
    assert_int_equal(rs_check_lease(RC, &claim, &err), WEFT_ESTATE);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 0);
}

/* A change that changes nothing: no save, its claims dropped; keep hands the execution back. */
/* Fencing off, and a decider saving a copy it held from before an
 * operator's pause (eager dispatch keeps one): the pause is not undone. */
static void test_command_unfenced(void **state)
{
    op_env unfenced = F.env;
    change c = {0, 0, "x"};
    weft_error err = {0};
    op_item it;
    char id[64], buf[256];
    uint64_t fence;
    xc_exec *x;

    start(NULL, NULL, id);
    x = load(id, &fence);
    assert_int_equal(op_command(&F.env, id, OP_PAUSE, NULL, &err), 0);
    unfenced.unfenced = 1;
    item_init(&it, id, x, set_var, &c);
    op_update_many(&unfenced, &it, 1, NULL);
    assert_int_equal(it.rc, 0);
    item_clear(&it);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "PAUSED");
    x = load(id, &fence);
    assert_int_equal(json_object_get_int(json_object_object_get(x->variables, "x")), c.calls);
    xc_free(x);
}

static void test_update_many_nochange(void **state)
{
    char id[64];
    change c = {0, OP_NOCHANGE, "x"};
    weft_error err = {0};
    op_item it;
    size_t room = 4;
    uint64_t fence = 0;
    rs_lease claim;

    start(NULL, NULL, id);
    claim = claimed_first_task(id); /* fence 2 */
    eager_on();
    item_init(&it, id, NULL, set_var, &c);
    it.acks = &claim;
    it.nacks = 1;
    it.keep = 1;
    op_update_many(&F.env, &it, 1, &room);
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.saved, 0);
    assert_int_equal(c.calls, 1);
    assert_int_equal(it.neager, 0);
    assert_int_equal(room, 4);
    assert_non_null(it.x);
    assert_int_equal(it.x->fence, 2);
    item_clear(&it);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 2);
    assert_int_equal(rs_check_lease(RC, &claim, &err), WEFT_ESTATE);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 0);
    assert_int_equal(qint("HLEN " PREFIX "{q:Q}:lease"), 0);
}

/*
 * Items of one batch fail alone: a change's error (nothing saved, its claim
 * kept), an unknown id, next to one that saves.
 */
static void test_update_many_errors(void **state)
{
    char id[64], id2[64], buf[64];
    change refuse = {0, WEFT_EINVAL, "x"};
    weft_error err = {0};
    op_item it[3];
    size_t room = 4;
    uint64_t fence = 0;
    rs_lease claim;
    size_t i;

    start(NULL, NULL, id);
    claim = claimed_first_task(id); /* fence 2 */
    start(NULL, NULL, id2);
    eager_on();
    item_init(&it[0], id, load(id, NULL), set_var, &refuse);
    it[0].acks = &claim;
    it[0].nacks = 1;
    it[0].keep = 1;
    item_init(&it[1], "no-such-wf", NULL, fn_decide, NULL);
    it[1].acks = &claim;
    it[1].nacks = 1;
    item_init(&it[2], id2, NULL, fn_decide, NULL);
    op_update_many(&F.env, it, 3, &room);

    assert_int_equal(it[0].rc, WEFT_EINVAL);
    assert_has(it[0].err.msg, "change refused");
    assert_int_equal(it[0].saved, 0);
    assert_int_equal(it[0].neager, 0);
    assert_null(it[0].x);
    assert_int_equal(refuse.calls, 1);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 2);
    assert_string_equal(hget(id, "fence", buf, sizeof buf), "2");

    assert_int_equal(it[1].rc, WEFT_ENOTFOUND);
    assert_has(it[1].err.msg, "no-such-wf");
    assert_int_equal(it[1].saved, 0);
    assert_int_equal(count_keys(PREFIX "{no-such-wf}*"), 0);

    /* neither dropped the claim */
    assert_int_equal(rs_check_lease(RC, &claim, &err), 0);

    assert_int_equal(it[2].rc, 0);
    assert_int_equal(it[2].saved, 1);
    assert_int_equal(it[2].neager, 1);
    assert_int_equal(room, 3);
    for (i = 0; i < 3; i++)
        item_clear(&it[i]);
}

/*
 * A child can end before the worker that started it saves its parent (the
 * parent's task does not know its child yet): the child's notice completes
 * the task, and the starter's late save loses the fence race. A notice from
 * another child of a task that knows its own is still dropped.
 */
static void test_complete_before_child_known(void **state)
{
    char id[64];
    rs_lease c;
    op_complete done = {0};
    weft_error err = {0};
    json_object *out = json_object_new_object();
    xc_exec *x;
    xc_task *a;
    uint64_t fence = 0;

    start(NULL, NULL, id);
    c = claimed_first_task(id);
    json_object_object_add(out, "v", json_object_new_int(7));
    done.task_id = c.task_id;
    done.child_id = "child-1";
    done.status = WEFT_TASK_COMPLETED;
    done.output = out;
    assert_int_equal(op_update(&F.env, id, op_fn_complete, &done, &err), 0);
    x = load(id, &fence);
    a = xc_find_id(x, c.task_id);
    assert_non_null(a);
    assert_int_equal(a->status, WEFT_TASK_COMPLETED);
    assert_string_equal(a->child_id, "child-1");
    assert_int_equal(json_object_get_int(json_object_object_get(a->output, "v")), 7);
    xc_free(x);

    /* another child of a task that knows its own: dropped, nothing saved */
    done.child_id = "child-2";
    assert_int_equal(op_update(&F.env, id, op_fn_complete, &done, &err), 0);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 3);
    json_object_put(out);
}

static void test_load_many(void **state)
{
    char id[64], id2[64];
    const char *ids[3];
    xc_exec *out[3];
    int rcs[3];
    weft_error err = {0};
    change c = {0, 0, "x"};

    start(NULL, NULL, id);
    start(NULL, NULL, id2);
    assert_int_equal(op_update(&F.env, id2, set_var, &c, &err), 0);
    ids[0] = id;
    ids[1] = "no-such-wf";
    ids[2] = id2;
    assert_int_equal(op_load_many(&F.env, ids, 3, out, rcs, &err), 0);
    assert_int_equal(rcs[0], 0);
    assert_non_null(out[0]);
    assert_string_equal(out[0]->id, id);
    assert_int_equal(out[0]->fence, 1);
    assert_int_equal(rcs[1], WEFT_ENOTFOUND);
    assert_null(out[1]);
    assert_int_equal(rcs[2], 0);
    assert_int_equal(out[2]->fence, 2);
    assert_int_equal(json_object_get_int(json_object_object_get(out[2]->variables, "x")), 1);
    xc_free(out[0]);
    xc_free(out[2]);
}

/* Redis not there: every load and every item fails with WEFT_EIO. */
static void test_many_unreachable(void **state)
{
    char id[64], url[64];
    st_redis_opts o = {0};
    st_store *r = NULL;
    op_env e;
    weft_error err = {0};
    const char *ids[2];
    xc_exec *out[2];
    int rcs[2] = {12345, 12345};
    op_item it[2];
    size_t room = 4;
    int port = srv.port == 65000 ? 65001 : 65000;

    start(NULL, NULL, id);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    o.rs.url = url;
    o.rs.prefix = PREFIX;
    o.rs.timeout_ms = 500;
    o.defs = &DEFS;
    o.cache = F.cache;
    assert_int_equal(st_redis_open(&o, &r, &err), WEFT_EIO);
    assert_non_null(r);
    env_init(&e, r);
    e.eager = eager_q;
    e.eager_ud = &accept_eager;
    e.lease_ms = 30000;
    ids[0] = id;
    ids[1] = "other";
    assert_int_equal(op_load_many(&e, ids, 2, out, rcs, &err), WEFT_EIO);
    assert_int_equal(rcs[0], WEFT_EIO);
    assert_int_equal(rcs[1], WEFT_EIO);
    assert_null(out[0]);
    assert_null(out[1]);

    /* one to load, one given loaded (from the live server) */
    item_init(&it[0], id, NULL, fn_decide, NULL);
    item_init(&it[1], id, load(id, NULL), fn_decide, NULL);
    op_update_many(&e, it, 2, &room);
    assert_int_equal(it[0].rc, WEFT_EIO);
    assert_has(it[0].err.msg, "refused");
    assert_int_equal(it[1].rc, WEFT_EIO);
    assert_has(it[1].err.msg, "refused");
    assert_int_equal(it[0].saved + it[1].saved, 0);
    assert_int_equal(it[1].neager, 0);
    assert_null(it[1].eager);
    assert_int_equal(room, 4); /* the lease it would have taken is given back */
    item_clear(&it[0]);
    item_clear(&it[1]);
    st_free(r);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 0);
}

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
        cmocka_unit_test_setup_teardown(test_start_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_without_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_fence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_decides, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotent_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_unfenced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_doc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_doc_without_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_doc_other_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_eager, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_fence_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_nochange, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_before_child_known, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_fenced_no_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_fenced_slow_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_unfenced_no_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_lock_redis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_lock_redis_expired, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_lock_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_race_lock_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_timeout, setup, teardown),
    };
    int rc = rf_start(&srv);
    if (rc == RF_SKIP) {
        fprintf(stderr, "redis-server is not installed: skipped\n");
        return 77;
    }
    if (rc != 0) {
        fprintf(stderr, "could not start redis-server\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    if (load_plugins()) {
        pl_free(R);
        rf_stop(&srv);
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (q) redisFree(q);
    pl_free(R);
    rf_stop(&srv);
    return rc;
}

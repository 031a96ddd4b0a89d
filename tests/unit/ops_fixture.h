/*
 * What the tests of ops.c (test_ops*.c) share: a redis-server of their own
 * (srv, redis_fixture.h), the inspecting connection q (redis_inspect.h), the
 * fixture F each test gets from setup (a cache, one env on the main thread,
 * the definition ops_w with two tasks of the queued type Q), helpers that
 * start and load executions, and the changes op_update runs (set_var, the
 * decider's steps). Header-only (static functions); include it after
 * <cmocka.h>. main() runs its tests between opf_start() and opf_stop().
 */
#ifndef WEFT_TEST_OPS_FIXTURE_H
#define WEFT_TEST_OPS_FIXTURE_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>

#include "core/codec.h"
#include "plugin/host.h"
#include "core/ops.h"
#include "store/redis/backend.h"
#include "plugin/loader.h"
#include "redis_fixture.h"
#include "redis_inspect.h"

/* a test may use only some of these */
#define OPF_FN static __attribute__((unused))

#define PREFIX "t:"

static rf_server srv;

/* ---- definitions: one queued type, defined here ---- */

OPF_FN int q_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type Q_TYPE = {.name = "Q", .execute = q_execute};

/* An inline type: its map ends it at once */
OPF_FN int m_map(weft_ctx *ctx, json_object *task, json_object *out_tasks, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type M_TYPE = {.name = "M", .map = m_map};

OPF_FN const weft_task_type *find_type(void *ud, const char *name)
{
    return !strcmp(name, "Q") ? &Q_TYPE : !strcmp(name, "M") ? &M_TYPE : NULL;
}

static def_env DEFS = {find_type, NULL, "/test/plugins", NULL, 0, NULL, NULL};
static const dec_env DEC = {.defs = &DEFS, .now = wu_now_ms};

static const char *DEF_JSON =
    "{\"name\":\"ops_w\",\"version\":2,\"tasks\":[{\"taskReferenceName\":"
    "\"a\",\"type\":\"Q\"},{\"taskReferenceName\":\"b\",\"type\":\"Q\"}]}";

/* ---- the fixture: a cache, one env on the main thread, the definition ---- */

static struct {
    dc_cache *cache;
    op_env env;
    def_workflow *def;
} F;

OPF_FN void assert_has(const char *msg, const char *part)
{
    if (!msg) fail_msg("NULL does not contain \"%s\"", part);
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

/* HGET of an execution's hash field into buf ("(nil)" when missing). */
OPF_FN const char *hget(const char *id, const char *field, char *buf, size_t n)
{
    return qstr(buf, n, "HGET " PREFIX "{%s} %s", id, field);
}

OPF_FN long long count_keys(const char *pattern)
{
    redisReply *x = qc("KEYS %s", pattern);
    long long n = x->type == REDIS_REPLY_ARRAY ? (long long)x->elements : -1;
    freeReplyObject(x);
    return n;
}

OPF_FN void env_init(op_env *e, st_store *s)
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
OPF_FN st_store *open_store_with(dc_cache *cache)
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
OPF_FN st_store *open_rs(void)
{
    return open_store_with(F.cache);
}

/* The fixture's connection, for what the tests check directly in Redis. */
#define RC (st_redis_conn(F.env.st))

OPF_FN int setup(void **state)
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
    F.cache = dc_new();
    env_init(&F.env, open_rs());
    if (!F.cache || !F.env.st) return -1;
    if (op_def(&F.env, DEF_JSON, "test.json", &F.def, &err)) {
        print_error("op_def: %s\n", err.msg);
        return -1;
    }
    return 0;
}

OPF_FN int teardown(void **state)
{
    def_unref(F.def);
    st_free(F.env.st);
    dc_free(F.cache);
    memset(&F, 0, sizeof F);
    return 0;
}

/* Start an execution of F.def, leaving its first decision to a decider (as
 * a starter without a decider does); its id into id. */
OPF_FN void start(const char *input_json, const char *idem, char id[64])
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

OPF_FN xc_exec *load(const char *id, uint64_t *fence)
{
    xc_exec *x = NULL;
    weft_error err = {0};
    if (op_load(&F.env, id, &x, fence, &err)) fail_msg("op_load %s: %s", id, err.msg);
    return x;
}

typedef struct change {
    int calls;
    int rc;
    const char *key;
} change;

OPF_FN int set_var(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    change *c = ud;
    c->calls++;
    if (c->rc < 0) return wu_err(err, c->rc, "change refused");
    if (c->rc == OP_NOCHANGE) return OP_NOCHANGE;
    json_object_object_add(x->variables, c->key, json_object_new_int(c->calls));
    return 0;
}

/* The decider's step: schedules what comes next (the first task of a fresh run). */
OPF_FN int fn_decide(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                     weft_error *err)
{
    int *calls = ud;
    if (calls) (*calls)++;
    dec_decide(dec, x, o);
    return 0;
}

/* Task ref ran and ended with status; the decider follows. */
OPF_FN int task_ended(const dec_env *dec, xc_exec *x, dec_out *o, const char *ref,
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
OPF_FN int fn_done(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    return task_ended(dec, x, o, ud, WEFT_TASK_COMPLETED, err);
}

/* Task ud (a ref) ran and failed for good; the decider follows. */
OPF_FN int fn_fail(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    return task_ended(dec, x, o, ud, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR, err);
}

/* Starts the test server and ignores SIGPIPE. Returns 0, 77 (skip: no
 * redis-server) or 1, having said why on stderr. */
OPF_FN int opf_start(void)
{
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
    return 0;
}

/* Closes the inspecting connection and stops the test server. */
OPF_FN void opf_stop(void)
{
    if (q) redisFree(q);
    rf_stop(&srv);
}

#endif

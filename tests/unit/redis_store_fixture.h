/*
 * What the tests of the Redis store (test_redis_*.c) share: a redis-server of
 * their own (srv, redis_fixture.h), the inspecting connection q
 * (redis_inspect.h), the store handle r each test gets from setup, and
 * helpers that create, save and queue executions. Header-only (static
 * functions); include it after <cmocka.h>. main() runs its tests between
 * rsf_start() and rsf_stop().
 */
#ifndef WEFT_TEST_REDIS_STORE_FIXTURE_H
#define WEFT_TEST_REDIS_STORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_fixture.h"
#include "redis_inspect.h"
#include "store/redis/redis.h"
#include "base/util.h"

/* a test may use only some of these */
#define RSF_FN static __attribute__((unused))

static rf_server srv;
static rs *r;

#define DOC "{\"workflowId\":\"wf1\",\"status\":\"RUNNING\",\"tasks\":[]}"
#define DEF "{\"name\":\"order\",\"version\":1,\"tasks\":[]}"

RSF_FN void assert_has(const char *msg, const char *part)
{
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

RSF_FN void assert_lacks(const char *msg, const char *part)
{
    if (strstr(msg, part)) fail_msg("\"%s\" contains \"%s\"", msg, part);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        weft_error e_ = {0};                                                                       \
        int rc_ = (call);                                                                          \
        if (rc_ < 0) fail_msg("%s: %d %s", #call, rc_, e_.msg);                                    \
    } while (0)

/* ---- the inspecting connection ---- */

RSF_FN void q_connect(void)
{
    struct timeval tv = {5, 0};
    if (q) redisFree(q);
    q = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
    assert_non_null(q);
    assert_int_equal(q->err, 0);
}

RSF_FN rs *open_rs(const char *url, int timeout_ms)
{
    rs_opts o = {0};
    rs *x = NULL;
    weft_error err = {0};
    o.url = url ? url : srv.url;
    o.timeout_ms = timeout_ms;
    if (rs_open(&o, &x, &err) != 0) fail_msg("rs_open %s: %s", o.url, err.msg);
    return x;
}

RSF_FN int setup(void **state)
{
    if (!q || q->err) q_connect();
    freeReplyObject(qc("FLUSHALL"));
    r = open_rs(NULL, 0);
    return 0;
}

RSF_FN int teardown(void **state)
{
    rs_free(r);
    r = NULL;
    return 0;
}

/* Due far in the future, so that a wake's ZADD LT shows the time it sets. */
#define LATE 4000000000000LL

RSF_FN void create(const char *id, int64_t due)
{
    weft_error err = {0};
    if (rs_exec_create(r, id, DOC, DEF, "k1", due, &err) != 0)
        fail_msg("create %s: %s", id, err.msg);
}

RSF_FN uint64_t save(const char *id, uint64_t fence, const rs_step *steps, size_t n)
{
    weft_error err = {0};
    uint64_t nf = 0;
    if (rs_exec_save(r, id, fence, DOC, "RUNNING", 0, steps, n, NULL, 0, &nf, &err) != 0)
        fail_msg("save %s: %s", id, err.msg);
    return nf;
}

/* A handle on prefix with this layout (0, NULL: what Redis holds); rs_open's
 * return in *rc. */
RSF_FN rs *open_layout(const char *prefix, int parts, const char *shards, int *rc, weft_error *err)
{
    rs_opts o = {0};
    rs *x = NULL;
    o.url = srv.url;
    o.prefix = prefix;
    o.partitions = parts;
    o.queue_shards = shards;
    *rc = rs_open(&o, &x, err);
    return x;
}

/* A handle on a port nobody listens on (url: its URL): opened, not connected. */
RSF_FN rs *open_unreachable(char url[64], weft_error *err)
{
    rs_opts o = {0};
    rs *x = NULL;
    snprintf(url, 64, "redis://127.0.0.1:%d", srv.port == 65000 ? 65001 : 65000);
    o.url = url;
    o.timeout_ms = 500;
    assert_int_equal(rs_open(&o, &x, err), WEFT_EIO);
    assert_non_null(x);
    return x;
}

RSF_FN void push(const char *id, const char *type, const char *task, int64_t at)
{
    rs_exec e;
    weft_error err = {0};
    rs_step s = {.kind = RS_PUSH, .type = type, .task_id = task, .at = at};
    if (rs_exec_load(r, id, 0, &e, &err) != 0) fail_msg("%s", err.msg);
    save(id, e.fence, &s, 1);
    rs_exec_clear(&e);
}

/* Start the test's redis-server (srv): 0, 77 when redis-server is not
 * installed (the test is skipped), 1 when it cannot start. */
RSF_FN int rsf_start(void)
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
    return 0;
}

/* Close the inspecting connection and stop the server. */
RSF_FN void rsf_stop(void)
{
    if (q) redisFree(q);
    q = NULL;
    rf_stop(&srv);
}

#endif

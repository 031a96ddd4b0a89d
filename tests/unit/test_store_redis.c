/*
 * The Redis store against a real redis-server the test starts itself
 * (redis_fixture.h); exits 77 when redis-server is not installed. A second,
 * plain hiredis connection (q) looks at what the store wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_fixture.h"
#include "redis_inspect.h"
#include "store/redis/redis.h"
#include "base/util.h"

extern const char *const rs_script_name[];
extern const char *const rs_script_src[];
extern const size_t rs_script_count;

static rf_server srv;
static rs *r;

#define DOC "{\"workflowId\":\"wf1\",\"status\":\"RUNNING\",\"tasks\":[]}"
#define DEF "{\"name\":\"order\",\"version\":1,\"tasks\":[]}"

static void assert_has(const char *msg, const char *part)
{
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

static void assert_lacks(const char *msg, const char *part)
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

static void q_connect(void)
{
    struct timeval tv = {5, 0};
    if (q) redisFree(q);
    q = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
    assert_non_null(q);
    assert_int_equal(q->err, 0);
}

static rs *open_rs(const char *url, int timeout_ms)
{
    rs_opts o = {0};
    rs *x = NULL;
    weft_error err = {0};
    o.url = url ? url : srv.url;
    o.timeout_ms = timeout_ms;
    if (rs_open(&o, &x, &err) != 0) fail_msg("rs_open %s: %s", o.url, err.msg);
    return x;
}

static int setup(void **state)
{
    if (!q || q->err) q_connect();
    freeReplyObject(qc("FLUSHALL"));
    r = open_rs(NULL, 0);
    return 0;
}

static int teardown(void **state)
{
    rs_free(r);
    r = NULL;
    return 0;
}

/* Due far in the future, so that a wake's ZADD LT shows the time it sets. */
#define LATE 4000000000000LL

static void create(const char *id, int64_t due)
{
    weft_error err = {0};
    if (rs_exec_create(r, id, DOC, DEF, "k1", due, &err) != 0)
        fail_msg("create %s: %s", id, err.msg);
}

static uint64_t save(const char *id, uint64_t fence, const rs_step *steps, size_t n)
{
    weft_error err = {0};
    uint64_t nf = 0;
    if (rs_exec_save(r, id, fence, DOC, "RUNNING", 0, steps, n, NULL, 0, &nf, &err) != 0)
        fail_msg("save %s: %s", id, err.msg);
    return nf;
}

/* ---- connecting ---- */

static void test_bad_urls(void **state)
{
    static const char *bad[] = {
        "http://127.0.0.1:6379", "redis://",          "redis://host:0", "redis://host:99999",
        "redis://host:abc",      "redis://host/x",    "unix://",        "unix://relative/path",
        "redis://[::1",          "unix:///tmp/s?x=1",
    };
    rs_opts o = {0};
    rs *x = (rs *)1;
    weft_error err = {0};
    size_t i;
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        o.url = bad[i];
        assert_int_equal(rs_open(&o, &x, &err), WEFT_EINVAL);
        assert_null(x);
        assert_has(err.msg, "Redis URL");
    }
    /* a password in a bad URL is never repeated */
    o.url = "redis://:hunter2@host:notaport";
    assert_int_equal(rs_open(&o, &x, &err), WEFT_EINVAL);
    assert_lacks(err.msg, "hunter2");
    o.url = "redis:/:hunter2@host";
    assert_int_equal(rs_open(&o, &x, &err), WEFT_EINVAL);
    assert_lacks(err.msg, "hunter2");
    /* the parser shared with lock_redis (base/redis_url.c) says why rediss:// fails */
    o.url = "rediss://127.0.0.1:6379";
    assert_int_equal(rs_open(&o, &x, &err), WEFT_EINVAL);
    assert_has(err.msg, "TLS is not supported");
    /* a prefix with a hash tag of its own would put everything in one slot */
    o.url = srv.url;
    o.prefix = "we{ft}:";
    assert_int_equal(rs_open(&o, &x, &err), WEFT_EINVAL);
    assert_has(err.msg, "prefix");
}

/* A handle on a port nobody listens on (url: its URL): opened, not connected. */
static rs *open_unreachable(char url[64], weft_error *err)
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

/* A handle with early_steps. */
static rs *open_early(void)
{
    rs_opts o = {0};
    rs *x = NULL;
    weft_error err = {0};
    o.url = srv.url;
    o.early_steps = 1;
    if (rs_open(&o, &x, &err) != 0) fail_msg("rs_open %s: %s", o.url, err.msg);
    return x;
}

static void test_unreachable(void **state)
{
    rs_exec e;
    weft_error err = {0};
    char url[64];
    rs *x = open_unreachable(url, &err);
    assert_has(err.msg, url);
    assert_has(err.msg, "refused");
    assert_int_equal(rs_broken(x), 1);
    /* every later call tries to connect again, and fails the same way */
    assert_int_equal(rs_exec_load(x, "wf1", 0, &e, &err), WEFT_EIO);
    assert_has(err.msg, url);
    assert_int_equal(rs_broken(x), 1);
    assert_string_equal(rs_url(x), url);
    rs_free(x);
}

static void test_env_defaults(void **state)
{
    rs *x = NULL;
    weft_error err = {0};
    char buf[64];
    setenv("WEFT_REDIS_URL", srv.url, 1);
    setenv("WEFT_KEY_PREFIX", "other:", 1);
    assert_int_equal(rs_open(NULL, &x, &err), 0);
    unsetenv("WEFT_REDIS_URL");
    unsetenv("WEFT_KEY_PREFIX");
    assert_string_equal(rs_url(x), srv.url);
    assert_string_equal(rs_prefix(x), "other:");
    assert_int_equal(rs_def_put(x, "order", 1, DEF, &err), 0);
    assert_string_equal(qstr(buf, sizeof buf, "HGET other:def:order 1"), DEF);
    rs_free(x);
    /* the default prefix */
    assert_string_equal(rs_prefix(r), "weft:");
}

static void test_auth_and_db(void **state)
{
    rs *x = NULL;
    rs_opts o = {0};
    weft_error err = {0};
    char url[128], shown[128], buf[64];
    redisReply *rep;

    freeReplyObject(qc("CONFIG SET requirepass s3cr%%t"));
    /* the inspecting connection stays authenticated; others must AUTH */
    snprintf(url, sizeof url, "redis://:s3cr%%25t@127.0.0.1:%d/3", srv.port);
    snprintf(shown, sizeof shown, "redis://:***@127.0.0.1:%d/3", srv.port);
    o.url = url;
    assert_int_equal(rs_open(&o, &x, &err), 0);
    assert_string_equal(rs_url(x), shown);
    assert_int_equal(rs_def_put(x, "order", 2, DEF, &err), 0);
    rs_free(x);
    freeReplyObject(qc("SELECT 3"));
    assert_string_equal(qstr(buf, sizeof buf, "HGET weft:def:order 2"), DEF);
    freeReplyObject(qc("SELECT 0"));
    assert_int_equal(qint("EXISTS weft:def:order"), 0);

    /* user:password form (ACL default user) */
    snprintf(url, sizeof url, "redis://default:s3cr%%25t@127.0.0.1:%d", srv.port);
    assert_int_equal(rs_open(&o, &x, &err), 0);
    rs_free(x);

    /* a wrong password: EIO naming the URL, never the password */
    snprintf(url, sizeof url, "redis://:wrongpass@127.0.0.1:%d", srv.port);
    x = NULL;
    assert_int_equal(rs_open(&o, &x, &err), WEFT_EIO);
    assert_non_null(x);
    assert_has(err.msg, "AUTH");
    assert_has(err.msg, ":***@127.0.0.1");
    assert_lacks(err.msg, "wrongpass");
    rs_free(x);

    /* no password at all */
    x = NULL;
    o.url = srv.url;
    assert_int_equal(rs_open(&o, &x, &err), WEFT_EIO);
    rs_free(x);

    rep = qc("CONFIG SET requirepass %s", "");
    assert_int_equal(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

static void test_unix_socket(void **state)
{
    rs *x = open_rs(srv.unix_url, 0);
    weft_error err = {0};
    char url[160], buf[64];
    assert_int_equal(rs_def_put(x, "order", 1, DEF, &err), 0);
    rs_free(x);
    assert_string_equal(qstr(buf, sizeof buf, "HGET weft:def:order 1"), DEF);
    snprintf(url, sizeof url, "%s?db=2", srv.unix_url);
    x = open_rs(url, 0);
    assert_int_equal(rs_def_put(x, "other", 1, DEF, &err), 0);
    rs_free(x);
    assert_int_equal(qint("EXISTS weft:def:other"), 0);
}

/* ---- executions ---- */

static void test_create_load(void **state)
{
    rs_exec e;
    weft_error err = {0};
    char *def = NULL;
    char buf[128];
    int64_t due = wu_now_ms() + 5000;

    assert_int_equal(rs_exec_create(r, "wf1", DOC, DEF, "k1", due, &err), 0);
    assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), 0);
    assert_string_equal(e.doc, DOC);
    assert_null(e.def);
    assert_string_equal(e.defkey, "k1");
    assert_string_equal(e.status, "RUNNING");
    assert_int_equal(e.fence, 1);
    rs_exec_clear(&e);
    assert_int_equal(rs_exec_load(r, "wf1", 1, &e, &err), 0);
    assert_string_equal(e.def, DEF);
    rs_exec_clear(&e);
    assert_int_equal(rs_exec_def(r, "wf1", &def, &err), 0);
    assert_string_equal(def, DEF);
    free(def);

    /* on the decider queue at due, outbox applied and trimmed */
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), due);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);

    /* the id is taken: nothing changes, and the due time only gets earlier */
    assert_int_equal(rs_exec_create(r, "wf1", "{}", "{}", "k2", due + 1000, &err), WEFT_EEXIST);
    assert_has(err.msg, "wf1");
    assert_string_equal(qstr(buf, sizeof buf, "HGET weft:{wf1} defkey"), "k1");
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), due);

    /* status comes from the document */
    assert_int_equal(rs_exec_create(r, "wf2", "{\"status\":\"PAUSED\"}", DEF, "k1", due, &err), 0);
    assert_string_equal(qstr(buf, sizeof buf, "HGET weft:{wf2} status"), "PAUSED");
}

static void test_unknown_id(void **state)
{
    rs_exec e;
    weft_error err = {0};
    char *def = (char *)1;
    assert_int_equal(rs_exec_load(r, "nope", 0, &e, &err), WEFT_ENOTFOUND);
    assert_string_equal(err.msg, "no workflow nope");
    assert_null(e.doc);
    assert_int_equal(rs_exec_def(r, "nope", &def, &err), WEFT_ENOTFOUND);
    assert_null(def);
    assert_has(err.msg, "no workflow nope");
    assert_int_equal(rs_exec_save(r, "nope", 1, DOC, "RUNNING", 0, NULL, 0, NULL, 0, NULL, &err),
                     WEFT_ENOTFOUND);
    assert_has(err.msg, "no workflow nope");
    assert_int_equal(qint("EXISTS weft:{nope}"), 0);
    assert_int_equal(rs_exec_flush(r, "nope", &err), 0);
}

static void test_bad_args(void **state)
{
    weft_error err = {0};
    rs_exec e;
    char long_id[100];
    rs_step bad = {RS_PUSH, "HTTP", "t|1", 0, NULL, 0};
    rs_step notype = {RS_UNQUEUE, NULL, "t1", 0, NULL, 0};
    memset(long_id, 'a', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = 0;
    assert_int_equal(rs_exec_create(r, "a|b", DOC, DEF, "k", 0, &err), WEFT_EINVAL);
    assert_has(err.msg, "'|'");
    assert_int_equal(rs_exec_create(r, long_id, DOC, DEF, "k", 0, &err), WEFT_EINVAL);
    assert_has(err.msg, "longer");
    assert_int_equal(rs_exec_create(r, "", DOC, DEF, "k", 0, &err), WEFT_EINVAL);
    assert_int_equal(rs_exec_create(r, "wf1", NULL, DEF, "k", 0, &err), WEFT_EINVAL);
    assert_int_equal(rs_exec_load(r, NULL, 0, &e, &err), WEFT_EINVAL);
    create("wf1", 0);
    assert_int_equal(rs_exec_save(r, "wf1", 1, DOC, "RUNNING", 0, &bad, 1, NULL, 0, NULL, &err),
                     WEFT_EINVAL);
    assert_has(err.msg, "task id");
    assert_int_equal(rs_exec_save(r, "wf1", 1, DOC, "RUNNING", 0, &notype, 1, NULL, 0, NULL, &err),
                     WEFT_EINVAL);
    assert_has(err.msg, "task type");
    /* nothing was saved */
    assert_int_equal(qint("HGET weft:{wf1} fence"), 1);
}

static void test_save_and_stale_fence(void **state)
{
    rs_exec e;
    weft_error err = {0};
    uint64_t nf = 0;
    rs_step push = {RS_PUSH, "HTTP", "t1", 0, NULL, 0};
    const char *ev[] = {"{\"event\":1}"};

    create("wf1", 0);
    assert_int_equal(
        rs_exec_save(r, "wf1", 1, "{\"v\":2}", "RUNNING", 0, NULL, 0, NULL, 0, &nf, &err), 0);
    assert_int_equal(nf, 2);
    assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), 0);
    assert_string_equal(e.doc, "{\"v\":2}");
    assert_int_equal(e.fence, 2);
    rs_exec_clear(&e);

    /* a decider that still holds fence 1 writes nothing at all */
    assert_int_equal(
        rs_exec_save(r, "wf1", 1, "{\"v\":3}", "FAILED", 1, &push, 1, ev, 1, &nf, &err),
        WEFT_ESTATE);
    assert_string_equal(err.msg, "execution wf1 was changed by someone else (fence 2, expected 1)");
    assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), 0);
    assert_string_equal(e.doc, "{\"v\":2}");
    assert_string_equal(e.status, "RUNNING");
    assert_int_equal(e.fence, 2);
    rs_exec_clear(&e);
    assert_int_equal(qint("EXISTS weft:{wf1}:ev"), 0);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
    assert_int_equal(qint("EXISTS weft:{q:HTTP}:ready"), 0);
    assert_int_equal(qint("PTTL weft:{wf1}"), -1);

    /* the current fence works; new_fence is optional */
    assert_int_equal(
        rs_exec_save(r, "wf1", 2, "{\"v\":3}", "RUNNING", 0, NULL, 0, NULL, 0, NULL, &err), 0);
    assert_int_equal(qint("HGET weft:{wf1} fence"), 3);
}

static void test_save_steps(void **state)
{
    weft_error err = {0};
    int64_t at = wu_now_ms() + 60000;
    rs_step s1[] = {
        {RS_PUSH, "HTTP", "t1", 100, NULL, 0},
        {RS_PUSH, "LAMBDA", "t2", 200, NULL, 0},
        {RS_WAKE, NULL, NULL, at, NULL, 0},
    };
    rs_step s2[] = {
        {RS_UNQUEUE, "HTTP", "t1", 0, NULL, 0},
        {RS_DONE, NULL, NULL, 0, NULL, 0},
    };
    uint64_t f;

    create("wf1", LATE); /* a wake is ZADD LT: it only moves earlier */
    f = save("wf1", 1, s1, 3);
    assert_int_equal(f, 2);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf1|t1"), 100);
    assert_int_equal(qint("ZSCORE weft:{q:LAMBDA}:ready wf1|t2"), 200);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), at);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t1", &err), 1);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t2", &err), 0);

    /* a push is idempotent: the same member once */
    f = save("wf1", f, s1, 1);
    assert_int_equal(qint("ZCARD weft:{q:HTTP}:ready"), 1);

    f = save("wf1", f, s2, 2);
    assert_int_equal(f, 4);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t1", &err), 0);
    assert_int_equal(qint("ZCARD weft:{q:HTTP}:ready"), 0);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), -999);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
    /* the other queue is untouched */
    assert_int_equal(rs_queue_has(r, "LAMBDA", "wf1", "t2", &err), 1);
}

static void test_unqueue_leased(void **state)
{
    weft_error err = {0};
    rs_step push = {RS_PUSH, "HTTP", "t1", 0, NULL, 0}, unq = {RS_UNQUEUE, "HTTP", "t1", 0, NULL, 0};
    const char *types[] = {"HTTP"};
    rs_lease c;
    long long ready, leased;
    uint64_t f;
    create("wf1", 0);
    f = save("wf1", 1, &push, 1);
    assert_int_equal(rs_claim(r, types, 1, 1, 60000, &c, &err), 1);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t1", &err), 1);
    save("wf1", f, &unq, 1);
    assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
    assert_int_equal(ready, 0);
    assert_int_equal(leased, 0);
    assert_int_equal(qint("HEXISTS weft:{q:HTTP}:lease wf1|t1"), 0);
    /* the worker's result for it is discarded */
    assert_int_equal(rs_ack(r, &c, &err), WEFT_ESTATE);
}

static void test_flush_leftover(void **state)
{
    weft_error err = {0};
    int64_t at = wu_now_ms() + 1000;
    create("wf1", 0);
    /* what a process that died right after save.lua leaves behind */
    OK(rs_command(r, &e_, "ZADD weft:{wf1}:out 5 %s", "5|push|HTTP|t9|42"));
    OK(rs_command(r, &e_, "ZADD weft:{wf1}:out 5 %s", "5|done|||0"));
    OK(rs_command(r, &e_, "ZADD weft:{wf1}:out 6 %s", "6|garbage"));
    OK(rs_command(r, &e_, "ZADD weft:{wf1}:out 7 7|wake|||%lld", (long long)at));
    assert_int_equal(rs_exec_flush(r, "wf1", &err), 3);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf1|t9"), 42);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), at); /* done, then wake */
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);     /* malformed entries go too */
    /* nothing left: nothing to do, one round trip */
    assert_int_equal(rs_exec_flush(r, "wf1", &err), 0);
}

static void test_save_applies_leftovers(void **state)
{
    weft_error err = {0};
    redisReply *x;
    size_t i;
    const char *src = NULL;
    rs_step wake = {RS_WAKE, NULL, NULL, 777, NULL, 0};
    create("wf1", LATE); /* a wake is ZADD LT: it only moves earlier */
    for (i = 0; i < rs_script_count; i++)
        if (!strcmp(rs_script_name[i], "save")) src = rs_script_src[i];
    assert_non_null(src);
    /* save.lua ran, the follow-up pipeline never did */
    x = qc("EVAL %s 3 weft:{wf1} weft:{wf1}:out weft:{wf1}:ev 1 {} RUNNING 0 1000 1000 "
           "weft:{wf1}:ev 1 %s push|HTTP|t1|5",
           src, "");
    assert_int_equal(x->type, REDIS_REPLY_ARRAY);
    assert_int_equal(x->element[1]->integer, 2);
    freeReplyObject(x);
    assert_int_equal(qint("ZCARD weft:{wf1}:out"), 1);
    assert_int_equal(qint("EXISTS weft:{q:HTTP}:ready"), 0);
    /* the next save applies it along with its own steps */
    assert_int_equal(save("wf1", 2, &wake, 1), 3);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf1|t1"), 5);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), 777);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);

    /* or the sweeper applies it */
    create("wf2", 0);
    x = qc("EVAL %s 3 weft:{wf2} weft:{wf2}:out weft:{wf2}:ev 1 {} RUNNING 0 1000 1000 "
           "weft:{wf2}:ev 2 %s unqueue|HTTP|t1|0 push|HTTP|t2|6",
           src, "");
    assert_int_equal(x->type, REDIS_REPLY_ARRAY);
    freeReplyObject(x);
    freeReplyObject(qc("ZADD weft:{q:HTTP}:ready 0 wf2|t1"));
    assert_int_equal(rs_exec_flush(r, "wf2", &err), 2);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf2", "t1", &err), 0);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf2|t2"), 6);
    assert_int_equal(qint("EXISTS weft:{wf2}:out"), 0);
}

static void test_terminal_ttl(void **state)
{
    weft_error err = {0};
    rs_opts o = {0};
    rs *x = NULL;
    rs_step done = {RS_DONE, NULL, NULL, 0, NULL, 0};
    const char *ev[] = {"{\"status\":\"COMPLETED\"}"};
    long long ttl;

    o.url = srv.url;
    o.retention_ms = 3600 * 1000;
    assert_int_equal(rs_open(&o, &x, &err), 0);
    assert_int_equal(rs_exec_create(x, "wf1", DOC, DEF, "k", 0, &err), 0);
    assert_int_equal(rs_exec_save(x, "wf1", 1, DOC, "COMPLETED", 1, &done, 1, ev, 1, NULL, &err),
                     0);
    ttl = qint("PTTL weft:{wf1}");
    assert_true(ttl > 3500 * 1000 && ttl <= 3600 * 1000);
    ttl = qint("PTTL weft:{wf1}:ev");
    assert_true(ttl > 3500 * 1000 && ttl <= 3600 * 1000);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), -999);
    /* a plain save leaves the expiry alone ... */
    assert_int_equal(rs_exec_save(x, "wf1", 2, DOC, "COMPLETED", 0, NULL, 0, ev, 1, NULL, &err), 0);
    assert_true(qint("PTTL weft:{wf1}") > 0);
    /* ... a revived (retried, restarted) execution is kept again */
    {
        rs_save s;
        memset(&s, 0, sizeof s);
        s.id = "wf1";
        s.fence = 3;
        s.doc = DOC;
        s.status = "RUNNING";
        s.events = ev;
        s.nevents = 1;
        s.revive = 1;
        assert_int_equal(rs_exec_save_many(x, &s, 1, &err), 0);
        assert_int_equal(s.rc, 0);
    }
    assert_int_equal(qint("PTTL weft:{wf1}"), -1);
    assert_int_equal(qint("PTTL weft:{wf1}:ev"), -1);
    rs_free(x);
}

/* An operator command waits in the execution: every save that has not
 * applied it is refused, fenced or not; the one that has removes it. */
static void test_command_store(void **state)
{
    weft_error err = {0};
    rs_save sv;
    rs_exec e;
    char st[32], *pending = NULL;

    create("wf1", 0);
    assert_int_equal(rs_exec_command(r, "wf1", "tk|pause|", "pause", &pending, st, &err),
                     RS_CMD_RECORDED);
    assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), 0);
    assert_string_equal(e.cmd, "tk|pause|");
    rs_exec_clear(&e);
    memset(&sv, 0, sizeof sv);
    sv.id = "wf1";
    sv.doc = DOC;
    sv.status = "PAUSED";
    sv.fence = 1;
    assert_int_equal(rs_exec_save_many(r, &sv, 1, &err), 0);
    assert_int_equal(sv.rc, WEFT_ESTATE);
    assert_non_null(strstr(sv.why, "operator command"));
    sv.fence = 0; /* unfenced */
    assert_int_equal(rs_exec_save_many(r, &sv, 1, &err), 0);
    assert_int_equal(sv.rc, WEFT_ESTATE);
    sv.cmd = "tk|other|";
    assert_int_equal(rs_exec_save_many(r, &sv, 1, &err), 0);
    assert_int_equal(sv.rc, WEFT_ESTATE);
    sv.fence = 1;
    sv.cmd = "tk|pause|";
    assert_int_equal(rs_exec_save_many(r, &sv, 1, &err), 0);
    assert_int_equal(sv.rc, 0);
    assert_int_equal(qint("HEXISTS weft:{wf1} cmd"), 0);
    /* fencing off, the last writer wins, but not a copy loaded before the
     * command landed (at fence 2) */
    sv.cmd = NULL;
    sv.fence = 0;
    sv.loaded_fence = 1;
    assert_int_equal(rs_exec_save_many(r, &sv, 1, &err), 0);
    assert_int_equal(sv.rc, WEFT_ESTATE);
    sv.loaded_fence = 2;
    assert_int_equal(rs_exec_save_many(r, &sv, 1, &err), 0);
    assert_int_equal(sv.rc, 0);
    /* the status decides what may be recorded */
    assert_int_equal(rs_exec_command(r, "wf1", "t2|pause|", "pause", &pending, st, &err),
                     WEFT_ESTATE);
    assert_string_equal(st, "PAUSED");
    assert_int_equal(rs_exec_command(r, "wf1", "t3|resume|", "resume", &pending, st, &err),
                     RS_CMD_RECORDED);
    assert_int_equal(rs_exec_command(r, "nope", "t4|terminate|", "terminate", &pending, st, &err),
                     WEFT_ENOTFOUND);
    assert_non_null(strstr(err.msg, "nope"));
    /* a save that overrides (a corrupt document failed) drops it */
    assert_int_equal(rs_exec_save(r, "wf1", 3, DOC, "FAILED", 1, NULL, 0, NULL, 0, NULL, &err), 0);
    assert_int_equal(qint("HEXISTS weft:{wf1} cmd"), 0);
    assert_int_equal(rs_exec_command(r, "wf1", "t5|terminate|", "terminate", &pending, st, &err),
                     WEFT_ESTATE);
    assert_string_equal(st, "FAILED");
}

/* ---- the status lane ---- */

typedef struct seen {
    int n, stop_after;
    char last_id[64];
    char json[4][128];
    char ids[4][64];
} seen;

/* Events come with the workflow's id and their entry's time in front:
 * what is after them is recorded, as "{...}". */
static int on_event(void *ud, const char *id, const char *json)
{
    seen *s = ud;
    const char *head = "{\"workflowId\":\"wf1\",\"time\":", *p = json + strlen(head);
    if (strncmp(json, head, strlen(head))) fail_msg("event without its head: %s", json);
    /* 7: the older entry below brings its own */
    if (strtoll(p, NULL, 10) != strtoll(id, NULL, 10) && strtoll(p, NULL, 10) != 7) fail_msg("event time is not its entry's: %s", json);
    while (*p >= '0' && *p <= '9') p++;
    if (*p == ',') p++;
    if (s->n < 4) snprintf(s->json[s->n], sizeof s->json[0], "{%s", p);
    if (s->n < 4) snprintf(s->ids[s->n], sizeof s->ids[0], "%s", id);
    snprintf(s->last_id, sizeof s->last_id, "%s", id);
    s->n++;
    return s->stop_after && s->n >= s->stop_after;
}

static void *late_saver(void *arg)
{
    rs *x = open_rs(NULL, 0);
    const char *ev[] = {"{\"live\":true}"};
    weft_error err = {0};
    rs_exec e;
    rf_sleep_ms(300);
    if (rs_exec_load(x, "wf1", 0, &e, &err) != 0 ||
        rs_exec_save(x, "wf1", e.fence, DOC, "RUNNING", 0, NULL, 0, ev, 1, NULL, &err) != 0)
        fprintf(stderr, "late save: %s\n", err.msg);
    rs_exec_clear(&e);
    rs_free(x);
    return arg;
}

/* Every event has its own id, the events of one save (one stream entry)
 * too: a reader that resumes after any of them gets exactly the rest. */
static void test_event_ids(void **state)
{
    weft_error err = {0};
    const char *ev[] = {"{\"n\":1}", "{\"n\":2}", "{\"n\":3}", "{\"n\":4}"};
    char after[64];
    seen all, s;
    int i, j;
    int64_t t0;

    create("wf1", 0);
    assert_int_equal(rs_exec_save(r, "wf1", 1, DOC, "RUNNING", 0, NULL, 0, ev, 3, NULL, &err), 0);
    assert_int_equal(rs_exec_save(r, "wf1", 2, DOC, "RUNNING", 0, NULL, 0, ev + 3, 1, NULL, &err),
                     0);
    memset(&all, 0, sizeof all);
    assert_int_equal(rs_events(r, "wf1", "0", NULL, 0, on_event, &all, &err), 4);
    for (i = 0; i < 4; i++)
        for (j = 0; j < i; j++)
            if (!strcmp(all.ids[i], all.ids[j]))
                fail_msg("events %d and %d share the id %s", j + 1, i + 1, all.ids[i]);
    for (i = 0; i < 4; i++) {
        memset(&s, 0, sizeof s);
        snprintf(after, sizeof after, "%s", all.ids[i]);
        if (rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err) != 3 - i)
            fail_msg("after event %d (%s): %d events, wanted %d", i + 1, all.ids[i], s.n, 3 - i);
        for (j = 0; j < 3 - i; j++) {
            assert_string_equal(s.json[j], all.json[i + 1 + j]);
            assert_string_equal(s.ids[j], all.ids[i + 1 + j]);
        }
    }
    /* where a reader resumes next (its own buffer will do): the entry read last */
    memset(&s, 0, sizeof s);
    snprintf(after, sizeof after, "%s", all.ids[0]);
    assert_int_equal(rs_events(r, "wf1", after, after, 0, on_event, &s, &err), 3);
    assert_int_equal(strncmp(after, all.ids[3], strlen(after)), 0);
    assert_string_equal(all.ids[3] + strlen(after), "-0");
    /* resumed after the last event: a wait waits (it does not return at
     * once with the entry that event came from) */
    memset(&s, 0, sizeof s);
    snprintf(after, sizeof after, "%s", all.ids[3]);
    t0 = wu_mono_ms();
    assert_int_equal(rs_events(r, "wf1", after, NULL, 300, on_event, &s, &err), 0);
    assert_true(wu_mono_ms() - t0 >= 250);
    /* a plain stream id (what older servers sent) is after its whole entry */
    memset(&s, 0, sizeof s);
    snprintf(after, sizeof after, "%.*s", (int)(strrchr(all.ids[0], '-') - all.ids[0]), all.ids[0]);
    if (strchr(after, '-') == strrchr(after, '-')) {
        /* all.ids[0] had the entry-index form: "<ms>-<seq>" is its entry */
        assert_int_equal(rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err), 1);
        assert_string_equal(s.json[0], "{\"n\":4}");
    }
    /* malformed ids are refused, naming the id */
    memset(&s, 0, sizeof s);
    assert_true(rs_events(r, "wf1", "12-x-3", NULL, 0, on_event, &s, &err) < 0);
    assert_non_null(strstr(err.msg, "12-x-3"));
}

static void test_events(void **state)
{
    weft_error err = {0};
    const char *ev[] = {"{\"n\":1}", "{\"n\":2}", "{\"n\":3}"};
    seen s;
    pthread_t t;
    redisReply *sub, *msg;
    redisContext *watcher;
    struct timeval tv = {5, 0};
    int64_t t0;

    create("wf1", 0);
    /* a Pub/Sub watcher sees them live */
    watcher = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
    assert_non_null(watcher);
    sub = redisCommand(watcher, "SUBSCRIBE weft:{wf1}:ev");
    assert_non_null(sub);
    freeReplyObject(sub);

    assert_int_equal(save("wf1", 0 + 1, NULL, 0), 2); /* no events: nothing appended */
    assert_int_equal(qint("EXISTS weft:{wf1}:ev"), 0);
    /* one entry and one message per save, however many events it has */
    assert_int_equal(rs_exec_save(r, "wf1", 2, DOC, "RUNNING", 0, NULL, 0, ev, 2, NULL, &err), 0);
    assert_int_equal(rs_exec_save(r, "wf1", 3, DOC, "RUNNING", 0, NULL, 0, ev + 2, 1, NULL, &err),
                     0);
    assert_int_equal(qint("XLEN weft:{wf1}:ev"), 2);
    assert_int_equal(redisGetReply(watcher, (void **)&msg), REDIS_OK);
    assert_int_equal(msg->type, REDIS_REPLY_ARRAY);
    assert_string_equal(msg->element[2]->str, "{\"n\":1}\n{\"n\":2}");
    freeReplyObject(msg);
    assert_int_equal(redisGetReply(watcher, (void **)&msg), REDIS_OK);
    assert_string_equal(msg->element[2]->str, "{\"n\":3}");
    freeReplyObject(msg);
    redisFree(watcher);

    /* history */
    memset(&s, 0, sizeof s);
    assert_int_equal(rs_events(r, "wf1", "0", NULL, 0, on_event, &s, &err), 3);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.json[0], "{\"n\":1}");
    assert_string_equal(s.json[2], "{\"n\":3}");
    /* stop early */
    memset(&s, 0, sizeof s);
    s.stop_after = 2;
    assert_int_equal(rs_events(r, "wf1", NULL, NULL, 0, on_event, &s, &err), 2);
    assert_string_equal(s.json[1], "{\"n\":2}");
    /* after the second: only the third */
    {
        char after[64];
        snprintf(after, sizeof after, "%s", s.last_id);
        memset(&s, 0, sizeof s);
        assert_int_equal(rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err), 1);
        assert_string_equal(s.json[0], "{\"n\":3}");
    }
    /* nothing new, no wait */
    {
        char after[64];
        snprintf(after, sizeof after, "%s", s.last_id);
        memset(&s, 0, sizeof s);
        assert_int_equal(rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err), 0);
        /* a short wait that times out is not an error */
        t0 = wu_mono_ms();
        assert_int_equal(rs_events(r, "wf1", after, NULL, 200, on_event, &s, &err), 0);
        assert_true(wu_mono_ms() - t0 >= 150);
        assert_int_equal(rs_broken(r), 0);

        /* live: another connection saves while we wait (longer than the command timeout) */
        rs_free(r);
        r = open_rs(NULL, 200);
        assert_int_equal(pthread_create(&t, NULL, late_saver, NULL), 0);
        memset(&s, 0, sizeof s);
        t0 = wu_mono_ms();
        assert_int_equal(rs_events(r, "wf1", after, NULL, 5000, on_event, &s, &err), 1);
        assert_true(wu_mono_ms() - t0 < 4000);
        assert_string_equal(s.json[0], "{\"live\":true}");
        pthread_join(t, NULL);
    }
    /* an empty event, and one that carries its head already (older entries) */
    freeReplyObject(qc("XADD weft:{wf1}:ev 9999999999999-0 json %s", "{}\n{\"workflowId\":\"wf1\",\"time\":7,\"x\":1}"));
    {
        char after[64];
        snprintf(after, sizeof after, "%s", s.last_id);
        memset(&s, 0, sizeof s);
        assert_int_equal(rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err), 2);
        assert_string_equal(s.json[0], "{}");
        assert_string_equal(s.json[1], "{\"x\":1}");
    }
    /* unknown execution: no events */
    memset(&s, 0, sizeof s);
    assert_int_equal(rs_events(r, "nope", "0", NULL, 0, on_event, &s, &err), 0);
}

/* ---- work queues ---- */

static void push(const char *id, const char *type, const char *task, int64_t at)
{
    rs_exec e;
    weft_error err = {0};
    rs_step s = {RS_PUSH, type, task, at, NULL, 0};
    if (rs_exec_load(r, id, 0, &e, &err) != 0) fail_msg("%s", err.msg);
    save(id, e.fence, &s, 1);
    rs_exec_clear(&e);
}

static void test_claim_renew_ack(void **state)
{
    weft_error err = {0};
    const char *types[] = {"HTTP"};
    rs_lease c[4], stale;
    long long ready, leased, exp;
    int64_t now = wu_now_ms();

    create("wf1", 0);
    push("wf1", "HTTP", "t1", 0);
    push("wf1", "HTTP", "t2", now + 60000); /* not visible yet */
    assert_int_equal(rs_claim(r, types, 1, 4, 30000, c, &err), 1);
    assert_string_equal(c[0].workflow_id, "wf1");
    assert_string_equal(c[0].task_id, "t1");
    assert_string_equal(c[0].type, "HTTP");
    assert_true(strlen(c[0].lease) > 10);
    exp = qint("ZSCORE weft:{q:HTTP}:leases wf1|t1");
    assert_true(exp >= now + 30000 && exp < now + 40000);
    assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
    assert_int_equal(ready, 1);
    assert_int_equal(leased, 1);
    /* nothing else visible */
    assert_int_equal(rs_claim(r, types, 1, 4, 30000, c + 1, &err), 0);

    assert_int_equal(rs_check_lease(r, &c[0], &err), 0);
    assert_int_equal(rs_renew(r, &c[0], 90000, &err), 0);
    assert_true(qint("ZSCORE weft:{q:HTTP}:leases wf1|t1") >= now + 90000);

    stale = c[0];
    stale.lease[0] = stale.lease[0] == 'x' ? 'y' : 'x';
    assert_int_equal(rs_check_lease(r, &stale, &err), WEFT_ESTATE);
    assert_has(err.msg, "stale lease for wf1|t1");
    assert_int_equal(rs_renew(r, &stale, 1000, &err), WEFT_ESTATE);
    assert_int_equal(rs_ack(r, &stale, &err), WEFT_ESTATE);
    assert_string_equal(err.msg, "stale lease for wf1|t1: result discarded");
    assert_int_equal(qint("ZCARD weft:{q:HTTP}:leases"), 1);

    assert_int_equal(rs_ack(r, &c[0], &err), 0);
    assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
    assert_int_equal(leased, 0);
    assert_int_equal(qint("HLEN weft:{q:HTTP}:lease"), 0);
    /* acked twice: the second is stale */
    assert_int_equal(rs_ack(r, &c[0], &err), WEFT_ESTATE);
    assert_int_equal(rs_renew(r, &c[0], 1000, &err), WEFT_ESTATE);
    assert_int_equal(rs_check_lease(r, &c[0], &err), WEFT_ESTATE);

    /* bad arguments */
    assert_int_equal(rs_claim(r, types, 1, 0, 1000, c, &err), 0);
    assert_int_equal(rs_claim(r, types, 1, 1, 0, c, &err), WEFT_EINVAL);
    stale.type[0] = 0;
    assert_int_equal(rs_ack(r, &stale, &err), WEFT_EINVAL);
}

static void test_claim_many_types(void **state)
{
    weft_error err = {0};
    const char *types[] = {"A", "B", "C"};
    rs_lease c[8];
    long long ready, leased, total_ready = 0, total_leased = 0;
    int i, n;
    create("wf1", 0);
    for (i = 0; i < 3; i++) {
        char task[8];
        snprintf(task, sizeof task, "t%d", i);
        push("wf1", types[i], task, 0);
        snprintf(task, sizeof task, "u%d", i);
        push("wf1", types[i], task, 0);
    }
    /* 6 visible over 3 types, room for 4: four claimed, two given back */
    n = rs_claim(r, types, 3, 4, 30000, c, &err);
    assert_int_equal(n, 4);
    for (i = 0; i < 3; i++) {
        assert_int_equal(rs_queue_sizes(r, types[i], &ready, &leased, &err), 0);
        total_ready += ready;
        total_leased += leased;
    }
    assert_int_equal(total_ready, 2);
    assert_int_equal(total_leased, 4);
    for (i = 0; i < n; i++)
        assert_int_equal(rs_check_lease(r, &c[i], &err), 0);
    /* the rest */
    assert_int_equal(rs_claim(r, types, 3, 8, 30000, c + 4, &err), 2);
    for (i = 0; i < 6; i++)
        assert_int_equal(rs_ack(r, &c[i], &err), 0);
    assert_int_equal(rs_claim(r, types, 3, 8, 30000, c, &err), 0);
}

static void test_reap(void **state)
{
    weft_error err = {0};
    const char *types[] = {"HTTP"};
    rs_lease c, c2;
    char **ex = NULL;
    size_t nex = 99;
    int i;

    create("wf1", 0);
    push("wf1", "HTTP", "t1", 0);
    /* nothing expired */
    assert_int_equal(rs_claim(r, types, 1, 1, 60000, &c, &err), 1);
    assert_int_equal(rs_reap(r, "HTTP", 2, &ex, &nex, &err), 0);
    assert_int_equal(nex, 0);
    assert_null(ex);
    assert_int_equal(rs_ack(r, &c, &err), 0);

    push("wf1", "HTTP", "t2", 0);
    /* max_reaps 2: put back twice, reported exhausted the third time */
    for (i = 0; i < 2; i++) {
        assert_int_equal(rs_claim(r, types, 1, 1, 1, &c, &err), 1);
        rf_sleep_ms(5);
        assert_int_equal(rs_reap(r, "HTTP", 2, &ex, &nex, &err), 1);
        assert_int_equal(nex, 0);
        assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t2", &err), 1);
        assert_int_equal(qint("HGET weft:{q:HTTP}:reaped wf1|t2"), i + 1);
        /* the reaped claim's result is discarded */
        assert_int_equal(rs_ack(r, &c, &err), WEFT_ESTATE);
    }
    assert_int_equal(rs_claim(r, types, 1, 1, 1, &c2, &err), 1);
    assert_string_not_equal(c2.lease, c.lease);
    rf_sleep_ms(5);
    assert_int_equal(rs_reap(r, "HTTP", 2, &ex, &nex, &err), 0);
    assert_int_equal(nex, 1);
    assert_string_equal(ex[0], "wf1|t2");
    free(ex[0]);
    free(ex);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t2", &err), 0);
    assert_int_equal(qint("HEXISTS weft:{q:HTTP}:reaped wf1|t2"), 0);

    /* an ack clears the count */
    push("wf1", "HTTP", "t3", 0);
    assert_int_equal(rs_claim(r, types, 1, 1, 1, &c, &err), 1);
    rf_sleep_ms(5);
    assert_int_equal(rs_reap(r, "HTTP", 5, &ex, &nex, &err), 1);
    assert_int_equal(rs_claim(r, types, 1, 1, 60000, &c, &err), 1);
    assert_int_equal(rs_ack(r, &c, &err), 0);
    assert_int_equal(qint("HEXISTS weft:{q:HTTP}:reaped wf1|t3"), 0);

    assert_int_equal(rs_reap(r, "HTTP", -1, &ex, &nex, &err), WEFT_EINVAL);
}

/* ---- several saves and loads at once ---- */

/* The claim of workflow id among c[0..n). */
static const rs_lease *claim_of(const rs_lease *c, int n, const char *id)
{
    int i;
    for (i = 0; i < n; i++)
        if (!strcmp(c[i].workflow_id, id)) return &c[i];
    fail_msg("no claim of %s", id);
    return NULL;
}

static void save_init(rs_save *s, const char *id, uint64_t fence, const rs_step *steps,
                      size_t nsteps, const rs_lease *acks, size_t nacks)
{
    memset(s, 0, sizeof *s);
    s->id = id;
    s->fence = fence;
    s->doc = DOC;
    s->status = "RUNNING";
    s->steps = steps;
    s->nsteps = nsteps;
    s->acks = acks;
    s->nacks = nacks;
    s->rc = 12345; /* outputs are always set */
    s->new_fence = 777;
    snprintf(s->why, sizeof s->why, "junk");
}

/*
 * Three saves in one call: a stale fence (WEFT_ESTATE: nothing of it, its
 * acks kept), an unknown id (WEFT_ENOTFOUND), and one that commits: its
 * steps applied (an eager push held as a lease by the saver), its outbox
 * trimmed, its ack dropped.
 */
static void test_save_many(void **state)
{
    weft_error err = {0};
    const char *types[] = {"HTTP"};
    rs_lease c[2], eager;
    const rs_lease *c1, *c2;
    int64_t until = wu_now_ms() + 60000;
    rs_step stale_steps[] = {{RS_PUSH, "HTTP", "s1", 0, NULL, 0},
                             {RS_PUSH, "HTTP", "s2", 0, "tok-s2", 0}};
    rs_step ok_steps[] = {{RS_PUSH, "HTTP", "t2", 0, "tok-2", 0},
                          {RS_PUSH, "LAMBDA", "t3", 7, NULL, 0}};
    rs_step unknown_steps[] = {{RS_PUSH, "HTTP", "u1", 0, NULL, 0}};
    rs_save s[3];
    rs_exec e;
    char buf[64];
    long long ready, leased;

    ok_steps[0].lease_until = until;
    stale_steps[1].lease_until = until;
    create("wf1", 0);
    create("wf2", 0);
    push("wf1", "HTTP", "c1", 0); /* fence 2 each */
    push("wf2", "HTTP", "c2", 0);
    assert_int_equal(rs_claim(r, types, 1, 2, 60000, c, &err), 2);
    c1 = claim_of(c, 2, "wf1");
    c2 = claim_of(c, 2, "wf2");

    /* the stale and the unknown save both carry wf1's claim: neither drops it */
    save_init(&s[0], "wf1", 1, stale_steps, 2, c1, 1);
    save_init(&s[1], "nope", 2, unknown_steps, 1, c1, 1);
    save_init(&s[2], "wf2", 2, ok_steps, 2, c2, 1);
    s[0].doc = "{\"stale\":true}";
    assert_int_equal(rs_exec_save_many(r, s, 3, &err), 0);

    assert_int_equal(s[0].rc, WEFT_ESTATE);
    assert_int_equal(s[0].new_fence, 0);
    assert_string_equal(s[0].why,
                        "execution wf1 was changed by someone else (fence 2, expected 1)");
    assert_int_equal(s[1].rc, WEFT_ENOTFOUND);
    assert_int_equal(s[1].new_fence, 0);
    assert_string_equal(s[1].why, "no workflow nope");
    assert_int_equal(s[2].rc, 0);
    assert_int_equal(s[2].new_fence, 3);
    assert_string_equal(s[2].why, "");

    /* the stale save wrote nothing, applied nothing, dropped nothing */
    assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), 0);
    assert_int_equal(e.fence, 2);
    assert_string_equal(e.doc, DOC);
    rs_exec_clear(&e);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "s1", &err), 0);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "s2", &err), 0);
    assert_int_equal(qint("HEXISTS weft:{q:HTTP}:lease wf1|s2"), 0);
    assert_int_equal(rs_check_lease(r, c1, &err), 0);
    assert_string_equal(qstr(buf, sizeof buf, "HGET weft:{q:HTTP}:lease wf1|c1"), c1->lease);
    assert_true(qint("ZSCORE weft:{q:HTTP}:leases wf1|c1") > 0);
    /* nor did the unknown one create anything */
    assert_int_equal(qint("EXISTS weft:{nope}"), 0);
    assert_int_equal(qint("EXISTS weft:{nope}:out"), 0);
    assert_int_equal(rs_queue_has(r, "HTTP", "nope", "u1", &err), 0);

    /* the good one: saved, its claim dropped ... */
    assert_int_equal(qint("HGET weft:{wf2} fence"), 3);
    assert_int_equal(qint("HEXISTS weft:{q:HTTP}:lease wf2|c2"), 0);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:leases wf2|c2"), -999);
    assert_int_equal(rs_ack(r, c2, &err), WEFT_ESTATE);
    /* ... the eager push held by the saver, not ready for anyone else ... */
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:leases wf2|t2"), until);
    assert_string_equal(qstr(buf, sizeof buf, "HGET weft:{q:HTTP}:lease wf2|t2"), "tok-2");
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf2|t2"), -999);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf2", "t2", &err), 1);
    /* ... the plain push ready, and the outbox trimmed */
    assert_int_equal(qint("ZSCORE weft:{q:LAMBDA}:ready wf2|t3"), 7);
    assert_int_equal(qint("EXISTS weft:{wf2}:out"), 0);
    assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
    assert_int_equal(ready, 0);
    assert_int_equal(leased, 2); /* wf1|c1 and wf2|t2 */
    /* nobody else can claim the eager task; the saver's token is a real lease */
    assert_int_equal(rs_claim(r, types, 1, 4, 60000, c, &err), 0);
    memset(&eager, 0, sizeof eager);
    snprintf(eager.workflow_id, sizeof eager.workflow_id, "wf2");
    snprintf(eager.task_id, sizeof eager.task_id, "t2");
    snprintf(eager.lease, sizeof eager.lease, "tok-2");
    snprintf(eager.type, sizeof eager.type, "HTTP");
    assert_int_equal(rs_check_lease(r, &eager, &err), 0);
    assert_int_equal(rs_renew(r, &eager, 1000, &err), 0);
    assert_int_equal(rs_ack(r, &eager, &err), 0);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf2", "t2", &err), 0);

    /* nothing to do */
    assert_int_equal(rs_exec_save_many(r, s, 0, &err), 0);
}

/* A save with a bad step (or bad arguments) fails alone, before anything is sent. */
static void test_save_many_bad_step(void **state)
{
    weft_error err = {0};
    rs_step bad[] = {{RS_PUSH, "HT|TP", "t1", 0, NULL, 0}};
    rs_step badtask[] = {{RS_UNQUEUE, "HTTP", "t|1", 0, NULL, 0}};
    rs_step good[] = {{RS_PUSH, "HTTP", "t2", 0, NULL, 0}};
    rs_save s[4];
    create("wf1", 0);
    create("wf2", 0);
    create("wf3", 0);
    save_init(&s[0], "wf1", 1, bad, 1, NULL, 0);
    save_init(&s[1], "wf2", 1, good, 1, NULL, 0);
    save_init(&s[2], "wf3", 1, badtask, 1, NULL, 0);
    save_init(&s[3], "wf3", 1, good, 1, NULL, 0);
    s[3].status = NULL;
    assert_int_equal(rs_exec_save_many(r, s, 4, &err), 0);
    assert_int_equal(s[0].rc, WEFT_EINVAL);
    assert_has(s[0].why, "wf1");
    assert_has(s[0].why, "task type");
    assert_has(s[0].why, "'|'");
    assert_int_equal(s[0].new_fence, 0);
    assert_int_equal(s[2].rc, WEFT_EINVAL);
    assert_has(s[2].why, "wf3");
    assert_has(s[2].why, "task id");
    assert_int_equal(s[3].rc, WEFT_EINVAL);
    assert_has(s[3].why, "wf3");
    /* the others are saved nevertheless */
    assert_int_equal(s[1].rc, 0);
    assert_int_equal(s[1].new_fence, 2);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf2", "t2", &err), 1);
    /* the failed ones: not saved, no queue step */
    assert_int_equal(qint("HGET weft:{wf1} fence"), 1);
    assert_int_equal(qint("HGET weft:{wf3} fence"), 1);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
    assert_int_equal(qint("EXISTS weft:{wf3}:out"), 0);
    assert_int_equal(qint("ZCARD weft:{q:HTTP}:ready"), 1);
    /* all of them bad: nothing sent, the call itself succeeds */
    assert_int_equal(rs_exec_save_many(r, s, 1, &err), 0);
    assert_int_equal(s[0].rc, WEFT_EINVAL);
}

/*
 * An eager push whose step did not apply stays in the outbox as a plain
 * push (no token): replayed by the sweeper, it becomes ready, not leased.
 */
static void test_save_many_lease_leftover(void **state)
{
    weft_error err = {0};
    int64_t until = wu_now_ms() + 60000;
    rs_step st[] = {{RS_PUSH, "HTTP", "t1", 0, "tok-1", 0}};
    rs_save s;
    redisReply *x;
    st[0].lease_until = until;
    create("wf1", 0);
    freeReplyObject(qc("SET weft:{q:HTTP}:leases x")); /* the lease cannot be written */
    save_init(&s, "wf1", 1, st, 1, NULL, 0);
    assert_int_equal(rs_exec_save_many(r, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0); /* committed all the same */
    assert_int_equal(s.new_fence, 2);
    x = qc("ZRANGE weft:{wf1}:out 0 -1");
    assert_int_equal(x->type, REDIS_REPLY_ARRAY);
    assert_int_equal(x->elements, 1);
    assert_string_equal(x->element[0]->str, "2|push|HTTP|t1|0");
    freeReplyObject(x);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf1|t1"), -999);

    freeReplyObject(qc("DEL weft:{q:HTTP}:leases"));
    assert_int_equal(rs_exec_flush(r, "wf1", &err), 1);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf1|t1"), 0);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:leases wf1|t1"), -999);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);

    /* the same for an entry a dead saver left behind */
    create("wf2", 0);
    OK(rs_command(r, &e_, "ZADD weft:{wf2}:out 3 %s", "3|push|HTTP|t9|42"));
    assert_int_equal(rs_exec_flush(r, "wf2", &err), 1);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf2|t9"), 42);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:leases wf2|t9"), -999);
    assert_int_equal(qint("HEXISTS weft:{q:HTTP}:lease wf2|t9"), 0);
}

/* Leftovers of an earlier save are applied by the next batched save as plain pushes. */
static void test_save_many_applies_leftovers(void **state)
{
    weft_error err = {0};
    int64_t until = wu_now_ms() + 60000;
    rs_step st[] = {{RS_PUSH, "HTTP", "t2", 0, "tok-2", 0}};
    rs_save s;
    st[0].lease_until = until;
    create("wf1", 0);
    OK(rs_command(r, &e_, "ZADD weft:{wf1}:out 1 %s", "1|push|HTTP|t1|5"));
    save_init(&s, "wf1", 1, st, 1, NULL, 0);
    assert_int_equal(rs_exec_save_many(r, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf1|t1"), 5);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:leases wf1|t2"), until);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
}

/* early_steps: the steps pipeline is written at once and its replies read
 * at the start of the next round trip on the handle, or by rs_free. */
static void test_early_steps(void **state)
{
    weft_error err = {0};
    rs *e = NULL;
    int64_t until = wu_now_ms() + 60000;
    rs_step st[] = {{RS_PUSH, "HTTP", "t1", 0, NULL, 0}, {RS_PUSH, "HTTP", "t2", 0, "tok-2", 0}};
    rs_save s;
    st[1].lease_until = until;
    e = open_early();
    create("wf1", LATE);
    freeReplyObject(qc("DEL weft:wake"));
    save_init(&s, "wf1", 1, st, 2, NULL, 0);
    assert_int_equal(rs_exec_save_many(e, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0);
    assert_int_equal(s.new_fence, 2);
    /* the next round trip on the handle reads the steps' replies first */
    OK(rs_command(e, &e_, "PING"));
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf1|t1"), 0);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:leases wf1|t2"), until);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
    /* work visible now woke idle workers, on the right key */
    assert_int_equal(qint("LLEN weft:wake"), 1);

    /* a step Redis refuses goes back to the outbox when its reply is read:
     * by the next call on the handle ... */
    freeReplyObject(qc("SET weft:{q:LAMBDA}:ready x"));
    st[0].type = "LAMBDA";
    save_init(&s, "wf1", 2, st, 1, NULL, 0);
    assert_int_equal(rs_exec_save_many(e, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0);
    assert_int_equal(rs_queue_has(e, "HTTP", "wf1", "t1", &err), 1);
    assert_int_equal(qint("ZSCORE weft:{wf1}:out %s", "3|push|LAMBDA|t1|0"), 3);
    /* ... or by rs_free */
    save_init(&s, "wf1", 3, st, 1, NULL, 0);
    assert_int_equal(rs_exec_save_many(e, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0);
    rs_free(e);
    assert_int_equal(qint("ZSCORE weft:{wf1}:out %s", "4|push|LAMBDA|t1|0"), 4);
}

/* A connection lost with steps in flight: the handle reconnects and goes on,
 * and what was not applied waits in the outbox for the sweeper. */
static void test_early_steps_lost(void **state)
{
    weft_error err = {0};
    rs *e = NULL;
    rs_step st[] = {{RS_PUSH, "HTTP", "t1", 0, NULL, 0}};
    rs_save s;
    e = open_early();
    create("wf1", 0);
    freeReplyObject(qc("SET weft:{q:HTTP}:ready x"));
    save_init(&s, "wf1", 1, st, 1, NULL, 0);
    assert_int_equal(rs_exec_save_many(e, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0);
    freeReplyObject(qc("CLIENT KILL TYPE normal SKIPME yes"));
    OK(rs_command(e, &e_, "PING"));
    freeReplyObject(qc("DEL weft:{q:HTTP}:ready"));
    save_init(&s, "wf1", 2, st, 1, NULL, 0);
    assert_int_equal(rs_exec_save_many(e, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0);
    rs_free(e);
    assert_int_equal(qint("ZSCORE weft:{q:HTTP}:ready wf1|t1"), 0);
    rs_command(r, &err, "PING"); /* the fixture's handle was killed too: it reconnects */
    if (rs_exec_flush(r, "wf1", &err) < 0) fail_msg("flush: %s", err.msg);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
}

/* A step refused in flight is recorded again, and a later save of the same
 * execution (whose trim was built before that) does not remove it; the
 * caller's step strings may be gone by the time the flight lands. */
static void test_early_refused_kept(void **state)
{
    weft_error err = {0};
    rs *e = NULL;
    rs_step a[] = {{RS_PUSH, NULL, NULL, 0, NULL, 0}};
    rs_step b[] = {{RS_WAKE, NULL, NULL, LATE, NULL, 0}};
    rs_save s;
    char *type = strdup("LAMBDA"), *task = strdup("t1");
    e = open_early();
    create("wf1", LATE);
    freeReplyObject(qc("SET weft:{q:LAMBDA}:ready x"));
    a[0].type = type;
    a[0].task_id = task;
    save_init(&s, "wf1", 1, a, 1, NULL, 0);
    assert_int_equal(rs_exec_save_many(e, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0);
    free(type); /* the caller's strings go (a worker frees its execution) */
    free(task);
    save_init(&s, "wf1", 2, b, 1, NULL, 0);
    assert_int_equal(rs_exec_save_many(e, &s, 1, &err), 0);
    assert_int_equal(s.rc, 0);
    rs_free(e);
    assert_int_equal(qint("ZSCORE weft:{wf1}:out %s", "2|push|LAMBDA|t1|0"), 2);
    /* once the queue is fixed, the next save applies it */
    freeReplyObject(qc("DEL weft:{q:LAMBDA}:ready"));
    assert_int_equal(save("wf1", 3, NULL, 0), 4);
    assert_int_equal(qint("ZSCORE weft:{q:LAMBDA}:ready wf1|t1"), 0);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
}

/* A finished execution's refused step waits in an outbox that expires with it. */
static void test_refused_after_end_expires(void **state)
{
    weft_error err = {0};
    rs_step st[] = {{RS_UNQUEUE, "HTTP", "t1", 0, NULL, 0}, {RS_DONE, NULL, NULL, 0, NULL, 0}};
    long long ttl;
    create("wf1", LATE);
    freeReplyObject(qc("SET weft:{q:HTTP}:ready x"));
    assert_int_equal(rs_exec_save(r, "wf1", 1, DOC, "TERMINATED", 1, st, 2, NULL, 0, NULL, &err), 0);
    assert_int_equal(qint("ZCARD weft:{wf1}:out"), 1);
    ttl = qint("PTTL weft:{wf1}:out");
    assert_true(ttl > 0);
    assert_true(qint("PTTL weft:{wf1}") > 0);
}

/* A create of a taken id leaves that execution's outbox alone. */
static void test_create_taken_outbox(void **state)
{
    weft_error err = {0};
    rs_step st[] = {{RS_PUSH, "HTTP", "other", 0, NULL, 0}, {RS_WAKE, NULL, NULL, LATE, NULL, 0}};
    rs_create c;
    create("wf1", LATE);
    OK(rs_command(r, &e_, "ZADD weft:{wf1}:out 1 %s", "1|push|HTTP|pending|0"));
    memset(&c, 0, sizeof c);
    c.id = "wf1";
    c.doc = DOC;
    c.def = DEF;
    c.defkey = "k2";
    c.steps = st;
    c.nsteps = 2;
    assert_int_equal(rs_exec_create_many(r, &c, 1, &err), 0);
    assert_int_equal(c.rc, WEFT_EEXIST);
    assert_int_equal(qint("ZSCORE weft:{wf1}:out %s", "1|push|HTTP|pending|0"), 1);
}

/* Work made visible during a waiting poll's wait is what it takes. */
static void *late_pusher(void *arg)
{
    rs *x = open_rs(NULL, 0);
    rs_step st[] = {{RS_PUSH, "HTTP", "t5", 0, NULL, 0}};
    weft_error err = {0};
    rf_sleep_ms(200);
    st[0].at = wu_now_ms();
    if (rs_exec_save(x, "wf3", 1, DOC, "RUNNING", 0, st, 1, NULL, 0, NULL, &err) != 0)
        fprintf(stderr, "late push: %s\n", err.msg);
    rs_free(x);
    return arg;
}

/* The decider queue and the task queues polled in one call. */
static void test_due_claim(void **state)
{
    weft_error err = {0};
    const char *types[] = {"HTTP", "LAMBDA"};
    rs_step st[] = {{RS_PUSH, "HTTP", "t1", 0, NULL, 0}, {RS_PUSH, "LAMBDA", "t2", 0, NULL, 0}};
    rs_lease c[4];
    char ids[4][64];
    int nd = -1;
    create("wf1", 0);
    create("wf2", LATE);
    save("wf2", 1, st, 2);
    assert_int_equal(rs_due_claim(r, 0, 4, 1000, ids, &nd, types, 2, 4, 60000, c, &err), 2);
    assert_int_equal(nd, 1);
    assert_string_equal(ids[0], "wf1");
    assert_string_equal(c[0].workflow_id, "wf2");
    assert_string_equal(c[1].workflow_id, "wf2");
    /* either part alone */
    assert_int_equal(rs_wake(r, "wf1", 0, 0, &err), 0);
    assert_int_equal(rs_due_claim(r, 0, 4, 1000, ids, &nd, types, 2, 0, 60000, c, &err), 0);
    assert_int_equal(nd, 1);
    assert_int_equal(rs_due_claim(r, 0, 0, 1000, ids, &nd, types, 2, 4, 60000, c, &err), 0);
    assert_int_equal(nd, 0);
    /* bad arguments */
    assert_int_equal(rs_due_claim(r, 0, 4, -1, ids, &nd, NULL, 0, 0, 0, NULL, &err), WEFT_EINVAL);
    assert_int_equal(rs_due_claim(r, 0, 0, 0, NULL, &nd, types, 2, 4, 0, c, &err), WEFT_EINVAL);
    /* an idle worker's poll: it waits for a token, then polls ... */
    {
        int64_t t0;
        freeReplyObject(qc("DEL weft:wake"));
        t0 = wu_now_ms();
        assert_int_equal(rs_due_claim(r, 300, 4, 1000, ids, &nd, types, 2, 4, 60000, c, &err), 0);
        assert_int_equal(nd, 0);
        assert_true(wu_now_ms() - t0 >= 250);
        /* ... which a save making work visible pushes: no wait then */
        save("wf2", 1 + 1, st, 1); /* HTTP t1 again, ready now: a token */
        assert_true(qint("LLEN weft:wake") >= 1);
        t0 = wu_now_ms();
        assert_int_equal(rs_due_claim(r, 3000, 4, 1000, ids, &nd, types, 2, 4, 60000, c, &err), 1);
        assert_true(wu_now_ms() - t0 < 1000);
        assert_string_equal(c[0].task_id, "t1");
        /* work that comes during the wait, visible only after the poll was sent */
        {
            pthread_t th;
            create("wf3", LATE);
            freeReplyObject(qc("DEL weft:wake"));
            pthread_create(&th, NULL, late_pusher, NULL);
            t0 = wu_now_ms();
            assert_int_equal(rs_due_claim(r, 3000, 4, 1000, ids, &nd, types, 2, 4, 60000, c, &err),
                             1);
            assert_true(wu_now_ms() - t0 < 2000);
            assert_string_equal(c[0].task_id, "t5");
            pthread_join(th, NULL);
        }
        /* a wait longer than the command timeout does not time the connection out */
        {
            rs *sh = open_rs(NULL, 200);
            t0 = wu_now_ms();
            assert_int_equal(rs_due_claim(sh, 400, 4, 1000, ids, &nd, types, 2, 4, 60000, c, &err), 0);
            assert_true(wu_now_ms() - t0 >= 350);
            rs_free(sh);
        }
    }
    /* a broken queue: nothing is taken, the due execution comes due again */
    assert_int_equal(rs_wake(r, "wf1", 0, 0, &err), 0);
    save("wf2", 3, st, 1);
    freeReplyObject(qc("SET weft:{q:LAMBDA}:ready x"));
    assert_true(rs_due_claim(r, 0, 4, 300, ids, &nd, types, 2, 4, 60000, c, &err) < 0);
    assert_int_equal(nd, 0);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf2", "t1", &err), 1);
}

static void test_load_many(void **state)
{
    weft_error err = {0};
    const char *ids[] = {"wf1", "nope", "nofence", "wf2", "bad|id", "wrong"};
    rs_exec out[6];
    int rcs[6];
    size_t i;
    create("wf1", 0);
    create("wf2", 0);
    push("wf2", "HTTP", "t1", 0); /* fence 2 */
    freeReplyObject(qc("HSET weft:{nofence} doc {} defkey k status RUNNING"));
    freeReplyObject(qc("SET weft:{wrong} x"));
    for (i = 0; i < 6; i++)
        rcs[i] = 12345;
    assert_int_equal(rs_exec_load_many(r, ids, 6, out, rcs, &err), 0);
    assert_int_equal(rcs[0], 0);
    assert_string_equal(out[0].doc, DOC);
    assert_string_equal(out[0].defkey, "k1");
    assert_string_equal(out[0].status, "RUNNING");
    assert_null(out[0].def);
    assert_int_equal(out[0].fence, 1);
    assert_int_equal(rcs[1], WEFT_ENOTFOUND);
    assert_null(out[1].doc);
    assert_int_equal(rcs[2], WEFT_EINVAL);
    assert_null(out[2].doc);
    assert_int_equal(rcs[3], 0);
    assert_int_equal(out[3].fence, 2);
    assert_string_equal(out[3].doc, DOC);
    assert_int_equal(rcs[4], WEFT_EINVAL);
    assert_null(out[4].doc);
    assert_int_equal(rcs[5], WEFT_EINVAL);
    assert_null(out[5].doc);
    for (i = 0; i < 6; i++)
        rs_exec_clear(&out[i]);
    assert_int_equal(rs_exec_load_many(r, ids, 0, out, rcs, &err), 0);
}

/* The payload sweep's question: which executions are still stored. */
static void test_exists_many(void **state)
{
    weft_error err = {0};
    const char *ids[] = {"wf1", "nope", "wf2", "bad|id"};
    int exists[4] = {7, 7, 7, 7};
    char url[64];
    rs *x;
    create("wf1", 0);
    create("wf2", 0);
    freeReplyObject(qc("SET weft:{bad|id} x"));
    assert_int_equal(rs_exec_exists_many(r, ids, 4, exists, &err), 0);
    assert_int_equal(exists[0], 1);
    assert_int_equal(exists[1], 0);
    assert_int_equal(exists[2], 1);
    assert_int_equal(exists[3], 0); /* cannot be an execution's id */
    freeReplyObject(qc("DEL weft:{wf2}"));
    assert_int_equal(rs_exec_exists_many(r, ids, 3, exists, &err), 0);
    assert_int_equal(exists[2], 0);
    assert_int_equal(rs_exec_exists_many(r, ids, 0, exists, &err), 0);
    /* no answer: an error, never "gone" */
    x = open_unreachable(url, &err);
    memset(&err, 0, sizeof err);
    assert_int_equal(rs_exec_exists_many(x, ids, 2, exists, &err), WEFT_EIO);
    assert_has(err.msg, "refused");
    rs_free(x);
}

/* Redis not there: the call fails with WEFT_EIO, and so does every save in it. */
static void test_many_unreachable(void **state)
{
    weft_error err = {0};
    char url[64];
    rs_step st[] = {{RS_PUSH, "HTTP", "t1", 0, "tok", 1}};
    rs_step bad[] = {{RS_PUSH, "HT|TP", "t1", 0, NULL, 0}};
    rs_save s[3];
    rs_exec out[2];
    const char *ids[] = {"wf1", "wf2"};
    int rcs[2];
    rs *x = open_unreachable(url, &err);

    save_init(&s[0], "wf1", 1, st, 1, NULL, 0);
    save_init(&s[1], "wf2", 0, NULL, 0, NULL, 0);
    save_init(&s[2], "wf3", 1, bad, 1, NULL, 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(rs_exec_save_many(x, s, 3, &err), WEFT_EIO);
    assert_has(err.msg, url);
    assert_has(err.msg, "refused");
    assert_int_equal(s[0].rc, WEFT_EIO);
    assert_has(s[0].why, "refused");
    assert_int_equal(s[0].new_fence, 0);
    assert_int_equal(s[1].rc, WEFT_EIO);
    assert_has(s[1].why, url);
    assert_int_equal(s[2].rc, WEFT_EINVAL); /* refused before anything was sent */
    assert_int_equal(rs_broken(x), 1);

    /* the call fails; rcs[] are not filled in then (see the report) */
    memset(&err, 0, sizeof err);
    assert_int_equal(rs_exec_load_many(x, ids, 2, out, rcs, &err), WEFT_EIO);
    assert_has(err.msg, "refused");
    assert_null(out[0].doc);
    assert_null(out[1].doc);
    assert_int_equal(rs_broken(x), 1);
    rs_free(x);
}

/* ---- decider queue ---- */

static void test_due_hold(void **state)
{
    weft_error err = {0};
    char ids[4][64];
    int64_t now = wu_now_ms();
    create("wf1", now - 10);
    create("wf2", now + 60000);
    assert_int_equal(rs_due(r, 4, 300, ids, &err), 1);
    assert_string_equal(ids[0], "wf1");
    assert_true(qint("ZSCORE weft:{dq}:due wf1") >= now + 300);
    /* held: other deciders skip it */
    assert_int_equal(rs_due(r, 4, 300, ids, &err), 0);
    rf_sleep_ms(400);
    assert_int_equal(rs_due(r, 4, 300, ids, &err), 1);
    assert_string_equal(ids[0], "wf1");
    /* max */
    assert_int_equal(rs_wake(r, "wf2", now - 5, 0, &err), 0);
    assert_int_equal(rs_wake(r, "wf1", now - 5, 0, &err), 0);
    assert_int_equal(rs_due(r, 1, 1000, ids, &err), 1);
    assert_int_equal(rs_due(r, 1, 1000, ids, &err), 1);
    assert_int_equal(rs_due(r, 1, 1000, ids, &err), 0);
    assert_int_equal(rs_due(r, 0, 1000, ids, &err), 0);
}

static void test_wake(void **state)
{
    weft_error err = {0};
    assert_int_equal(rs_wake(r, "wf1", 5000, 0, &err), 0);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), 5000);
    /* only_earlier keeps an earlier time ... */
    assert_int_equal(rs_wake(r, "wf1", 9000, 1, &err), 0);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), 5000);
    /* ... takes an earlier one ... */
    assert_int_equal(rs_wake(r, "wf1", 3000, 1, &err), 0);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), 3000);
    /* ... and adds a missing id */
    assert_int_equal(rs_wake(r, "wf9", 9000, 1, &err), 0);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf9"), 9000);
    /* without it, the time is set as given */
    assert_int_equal(rs_wake(r, "wf1", 8000, 0, &err), 0);
    assert_int_equal(qint("ZSCORE weft:{dq}:due wf1"), 8000);
}

/* ---- definitions, idempotency, daemons ---- */

static void test_defs(void **state)
{
    weft_error err = {0};
    char *json = NULL;
    int v = 0;
    assert_int_equal(rs_def_get(r, "order", 0, &json, &v, &err), WEFT_ENOTFOUND);
    assert_string_equal(err.msg, "no definition order");
    assert_int_equal(rs_def_put(r, "order", 2, "{\"v\":2}", &err), 0);
    assert_int_equal(rs_def_put(r, "order", 10, "{\"v\":10}", &err), 0);
    assert_int_equal(rs_def_put(r, "order", 9, "{\"v\":9}", &err), 0);
    assert_int_equal(rs_def_get(r, "order", 0, &json, &v, &err), 0);
    assert_int_equal(v, 10); /* numerically highest, not the last written */
    assert_string_equal(json, "{\"v\":10}");
    free(json);
    assert_int_equal(rs_def_get(r, "order", 2, &json, &v, &err), 0);
    assert_int_equal(v, 2);
    assert_string_equal(json, "{\"v\":2}");
    free(json);
    assert_int_equal(rs_def_put(r, "order", 2, "{\"v\":22}", &err), 0);
    assert_int_equal(rs_def_get(r, "order", 2, &json, NULL, &err), 0);
    assert_string_equal(json, "{\"v\":22}");
    free(json);
    json = (char *)1;
    assert_int_equal(rs_def_get(r, "order", 3, &json, &v, &err), WEFT_ENOTFOUND);
    assert_string_equal(err.msg, "no definition order version 3");
    assert_null(json);
    assert_int_equal(rs_def_put(r, "order", 0, "{}", &err), WEFT_EINVAL);
    assert_int_equal(rs_def_put(r, "", 1, "{}", &err), WEFT_EINVAL);
}

static void test_idempotency(void **state)
{
    weft_error err = {0};
    char existing[64] = "junk";
    long long ttl;
    assert_int_equal(rs_idem_claim(r, "order-77", "wf1", existing, &err), 0);
    assert_string_equal(existing, "");
    ttl = qint("PTTL weft:idem:order-77");
    assert_true(ttl > 0);
    assert_int_equal(rs_idem_claim(r, "order-77", "wf2", existing, &err), WEFT_EEXIST);
    assert_string_equal(existing, "wf1");
    assert_has(err.msg, "wf1");
    /* the same id again is not a conflict */
    assert_int_equal(rs_idem_claim(r, "order-77", "wf1", existing, &err), 0);
    assert_int_equal(rs_idem_claim(r, "order-78", "wf2", NULL, &err), 0);
}

static void test_daemons(void **state)
{
    weft_error err = {0};
    char *json = NULL;
    json_object *all, *d, *v;
    int64_t now = wu_now_ms();
    assert_int_equal(rs_daemons(r, &json, &err), 0);
    assert_string_equal(json, "{}");
    free(json);
    assert_int_equal(rs_daemon_beat(r, "d1", "{\"types\":[\"HTTP\"],\"pid\":42}", &err), 0);
    assert_int_equal(rs_daemon_beat(r, "d2", NULL, &err), 0);
    assert_int_equal(rs_daemon_beat(r, "d3", "[1]", &err), WEFT_EINVAL);
    assert_int_equal(rs_daemons(r, &json, &err), 0);
    all = json_tokener_parse(json);
    free(json);
    assert_non_null(all);
    assert_true(json_object_object_get_ex(all, "d1", &d));
    assert_true(json_object_object_get_ex(d, "pid", &v));
    assert_int_equal(json_object_get_int(v), 42);
    assert_true(json_object_object_get_ex(d, "seen", &v));
    assert_true(json_object_get_int64(v) >= now);
    assert_true(json_object_object_get_ex(all, "d2", &d));
    assert_false(json_object_object_get_ex(all, "d3", &d));
    json_object_put(all);
}

/* ---- failures ---- */

static void test_wrong_type(void **state)
{
    weft_error err = {0};
    rs_exec e;
    const char *types[] = {"HTTP"};
    rs_lease c;
    char **ex;
    size_t nex;
    char ids[2][64];
    freeReplyObject(qc("SET weft:{abc} x"));
    assert_int_equal(rs_exec_load(r, "abc", 0, &e, &err), WEFT_EINVAL);
    assert_has(err.msg, "weft:{abc}: holds the wrong kind of value (WRONGTYPE");
    assert_has(err.msg, srv.url);
    assert_int_equal(rs_exec_save(r, "abc", 1, DOC, "RUNNING", 0, NULL, 0, NULL, 0, NULL, &err),
                     WEFT_EINVAL);
    assert_has(err.msg, "weft:{abc}: holds the wrong kind of value");
    assert_lacks(err.msg, "user_script");
    assert_int_equal(rs_exec_create(r, "abc", DOC, DEF, "k", 0, &err), WEFT_EEXIST);

    freeReplyObject(qc("SET weft:{q:HTTP}:ready x"));
    assert_int_equal(rs_claim(r, types, 1, 1, 1000, &c, &err), WEFT_EINVAL);
    assert_has(err.msg, "weft:{q:HTTP}:ready");
    freeReplyObject(qc("SET weft:{q:HTTP}:leases x"));
    assert_int_equal(rs_reap(r, "HTTP", 1, &ex, &nex, &err), WEFT_EINVAL);
    assert_has(err.msg, "weft:{q:HTTP}:leases");
    freeReplyObject(qc("SET weft:{dq}:due x"));
    assert_int_equal(rs_due(r, 1, 1000, ids, &err), WEFT_EINVAL);
    assert_has(err.msg, "weft:{dq}:due");
    assert_int_equal(rs_broken(r), 0);
}

static void test_step_refused(void **state)
{
    weft_error err = {0};
    rs_step s[] = {{RS_PUSH, "HTTP", "t1", 0, NULL, 0}, {RS_PUSH, "LAMBDA", "t2", 0, NULL, 0}};
    create("wf1", 0);
    /* the HTTP queue is broken: the save still commits, the step stays in the outbox */
    freeReplyObject(qc("SET weft:{q:HTTP}:ready x"));
    assert_int_equal(save("wf1", 1, s, 2), 2);
    assert_int_equal(rs_queue_has(r, "LAMBDA", "wf1", "t2", &err), 1);
    assert_int_equal(qint("ZCARD weft:{wf1}:out"), 1);
    assert_int_equal(qint("ZSCORE weft:{wf1}:out %s", "2|push|HTTP|t1|0"), 2);
    /* the sweeper reports it until the queue is repaired */
    assert_int_equal(rs_exec_flush(r, "wf1", &err), WEFT_EINVAL);
    assert_has(err.msg, "weft:{q:HTTP}:ready");
    assert_int_equal(qint("ZCARD weft:{wf1}:out"), 1);
    freeReplyObject(qc("DEL weft:{q:HTTP}:ready"));
    assert_int_equal(rs_exec_flush(r, "wf1", &err), 1);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t1", &err), 1);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
}

static void test_noscript(void **state)
{
    weft_error err = {0};
    const char *types[] = {"HTTP"};
    rs_lease c;
    char ids[2][64];
    rs_step s[] = {{RS_PUSH, "HTTP", "t1", 0, NULL, 0}, {RS_UNQUEUE, "HTTP", "t0", 0, NULL, 0}};
    create("wf1", 0);
    OK(rs_command(r, &e_, "SCRIPT FLUSH"));
    assert_int_equal(save("wf1", 1, s, 2), 2);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t1", &err), 1);
    OK(rs_command(r, &e_, "SCRIPT FLUSH"));
    assert_int_equal(rs_claim(r, types, 1, 1, 60000, &c, &err), 1);
    OK(rs_command(r, &e_, "SCRIPT FLUSH"));
    assert_int_equal(rs_ack(r, &c, &err), 0);
    OK(rs_command(r, &e_, "SCRIPT FLUSH"));
    assert_int_equal(rs_due(r, 2, 1000, ids, &err), 1);
    /* the follow-up pipeline's unqueue.lua, alone */
    freeReplyObject(qc("SCRIPT FLUSH"));
    s[0].kind = RS_UNQUEUE;
    assert_int_equal(save("wf1", 2, s, 1), 3);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "t1", &err), 0);
    assert_int_equal(qint("EXISTS weft:{wf1}:out"), 0);
    OK(rs_command(r, &e_, "SCRIPT FLUSH"));
    assert_int_equal(rs_exec_create(r, "wf2", DOC, DEF, "k", 0, &err), 0);
}

static void test_redis_goes_away(void **state)
{
    weft_error err = {0};
    rs_exec e;
    const char *types[] = {"HTTP"};
    rs_lease c;

    create("wf1", 0);
    rf_kill(&srv);
    assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), WEFT_EIO);
    assert_has(err.msg, srv.url);
    assert_int_equal(rs_broken(r), 1);
    /* still down: reconnecting fails */
    assert_int_equal(rs_claim(r, types, 1, 1, 1000, &c, &err), WEFT_EIO);
    assert_has(err.msg, "refused");
    assert_int_equal(rs_broken(r), 1);
    assert_int_equal(rs_command(r, &err, "PING"), WEFT_EIO);

    assert_int_equal(rf_restart(&srv), 0);
    q_connect();
    /* a fresh server (no data, no scripts): the next call reconnects and works */
    assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), WEFT_ENOTFOUND);
    assert_int_equal(rs_broken(r), 0);
    create("wf1", 0);
    push("wf1", "HTTP", "t1", 0);
    assert_int_equal(rs_claim(r, types, 1, 1, 1000, &c, &err), 1);

    /* the server dies between two calls on a live connection */
    rf_kill(&srv);
    assert_int_equal(rs_ack(r, &c, &err), WEFT_EIO);
    assert_int_equal(rs_broken(r), 1);
    assert_int_equal(rf_restart(&srv), 0);
    q_connect();
    assert_int_equal(rs_wake(r, "wf1", 1, 0, &err), 0);
    assert_int_equal(rs_broken(r), 0);
}

static void test_command_timeout(void **state)
{
    weft_error err = {0};
    rs *x = open_rs(NULL, 200);
    char *json = NULL;
    int64_t t0;
    freeReplyObject(qc("CLIENT PAUSE 1000 ALL"));
    t0 = wu_mono_ms();
    assert_int_equal(rs_def_get(x, "order", 1, &json, NULL, &err), WEFT_EIO);
    assert_true(wu_mono_ms() - t0 < 900);
    assert_has(err.msg, "no answer within 200 ms");
    assert_int_equal(rs_broken(x), 1);
    freeReplyObject(qc("CLIENT UNPAUSE"));
    assert_int_equal(rs_def_get(x, "order", 1, &json, NULL, &err), WEFT_ENOTFOUND);
    assert_int_equal(rs_broken(x), 0);
    rs_free(x);
}

static void test_command(void **state)
{
    weft_error err = {0};
    assert_int_equal(rs_command(r, &err, "SET %s %s", "k", "a b"), 0);
    assert_int_equal(qint("STRLEN k"), 3);
    assert_int_equal(rs_command(r, &err, "NOSUCHCOMMAND"), WEFT_EIO);
    assert_has(err.msg, "unknown command");
    assert_int_equal(rs_command(r, &err, "HSET %s a b", "k"), WEFT_EINVAL);
    assert_int_equal(rs_broken(r), 0);
}

/* ---- the store's epoch, a connection Redis closed ---- */

typedef struct losses {
    int n;
    rs_loss last;
} losses;

static void on_loss(void *ud, const rs_loss *l)
{
    losses *x = ud;
    x->n++;
    x->last = *l;
}

static rs *open_epoch(rs_epoch *e)
{
    rs_opts o = {0};
    rs *x = NULL;
    weft_error err = {0};
    o.url = srv.url;
    o.epoch = e;
    if (rs_open(&o, &x, &err) != 0) fail_msg("rs_open: %s", err.msg);
    return x;
}

static void test_epoch(void **state)
{
    losses got = {0};
    rs_epoch *e = rs_epoch_new(on_loss, &got);
    rs *a, *b;
    rs_loss l;
    redisReply *x;
    char key[128], first[40];
    weft_error err = {0};
    assert_non_null(e);
    a = open_epoch(e);
    b = open_epoch(e);
    snprintf(key, sizeof key, "%sepoch", rs_prefix(a));
    /* written at first use, read again by the second connection: no loss */
    x = qc("GET %s", key);
    assert_int_equal(x->type, REDIS_REPLY_STRING);
    snprintf(first, sizeof first, "%s", x->str);
    freeReplyObject(x);
    assert_int_equal(rs_daemon_beat(a, "d1", NULL, &err), 0);
    assert_int_equal(got.n, 0);
    rs_epoch_last(e, &l);
    assert_int_equal(l.count, 0);

    /* flushed: the heartbeat finds it gone, with the workflows it saw before */
    create("wf1", 0);
    create("wf2", 0);
    assert_int_equal(rs_daemon_beat(a, "d1", NULL, &err), 0);
    freeReplyObject(qc("FLUSHALL"));
    assert_int_equal(rs_daemon_beat(a, "d1", NULL, &err), 0);
    assert_int_equal(got.n, 1);
    assert_int_equal(got.last.gone, 1);
    assert_int_equal(got.last.count, 1);
    assert_int_equal(got.last.unfinished, 2);
    assert_string_equal(got.last.was, first);
    assert_string_equal(got.last.key, key);
    assert_string_not_equal(got.last.now, first);
    x = qc("GET %s", key);
    assert_int_equal(x->type, REDIS_REPLY_STRING);
    assert_string_equal(x->str, got.last.now);
    freeReplyObject(x);
    /* the other connection of the same process sees the new epoch: one loss */
    assert_int_equal(rs_daemon_beat(b, "d1", NULL, &err), 0);
    assert_int_equal(got.n, 1);

    /* another server's epoch (or one re-made by another process): a loss too */
    freeReplyObject(qc("SET %s other-epoch", key));
    assert_int_equal(rs_daemon_beat(b, "d1", NULL, &err), 0);
    assert_int_equal(got.n, 2);
    assert_int_equal(got.last.gone, 0);
    assert_string_equal(got.last.now, "other-epoch");
    rs_epoch_last(e, &l);
    assert_int_equal(l.count, 2);

    /* a reconnect finds it gone (Redis restarted empty) */
    freeReplyObject(qc("DEL %s", key));
    freeReplyObject(qc("CLIENT KILL TYPE normal SKIPME yes"));
    rf_sleep_ms(50);
    rs_revive(a);
    assert_int_equal(rs_command(a, &err, "PING"), 0);
    assert_int_equal(got.n, 3);
    rs_free(a);
    rs_free(b);
    rs_epoch_free(e);
}

static void test_revive(void **state)
{
    weft_error err = {0};
    /* Redis closed the connection (a restart does): the first call fails ... */
    assert_int_equal(rs_command(r, &err, "PING"), 0);
    freeReplyObject(qc("CLIENT KILL TYPE normal SKIPME yes"));
    rf_sleep_ms(50);
    assert_int_equal(rs_command(r, &err, "PING"), WEFT_EIO);
    /* ... unless rs_revive saw the closed socket first; a live one is kept */
    assert_int_equal(rs_command(r, &err, "PING"), 0);
    freeReplyObject(qc("CLIENT KILL TYPE normal SKIPME yes"));
    rf_sleep_ms(50);
    rs_revive(r);
    assert_int_equal(rs_command(r, &err, "PING"), 0);
    rs_revive(r);
    assert_int_equal(rs_broken(r), 0);
    assert_int_equal(rs_command(r, &err, "PING"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_unreachable),
        cmocka_unit_test_setup_teardown(test_env_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_and_db, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_and_stale_fence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unqueue_leased, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_leftover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_applies_leftovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminal_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_renew_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_many_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_many_bad_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_many_lease_leftover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_many_applies_leftovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_steps_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_claim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_refused_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_taken_outbox, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_after_end_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exists_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotency, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemons, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_noscript, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_goes_away, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revive, setup, teardown),
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
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (q) redisFree(q);
    rf_stop(&srv);
    return rc;
}

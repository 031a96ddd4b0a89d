/*
 * The Redis store's connection (store/redis/conn.c, epoch.c): URLs, auth,
 * databases and unix sockets, a Redis that is not there, goes away, answers
 * wrong or slowly, and the epoch that tells every handle of a lost store.
 * Runs against a real redis-server the test starts itself
 * (redis_store_fixture.h); exits 77 when redis-server is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "redis_store_fixture.h"
#include "fake_redis.h"
#include "base/keyslot.h"

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

/* ---- failures ---- */

/* A SCRIPT LOAD answered with what is no SHA1 (a NUL, letters that are not
 * hex): the connect fails saying so, rather than send EVALSHA with it. */
static void test_bad_sha(void **state)
{
    static const char good[] = "$40\r\n1fc062685980c67e00d6ae1716d1c9167df54a56\r\n";
    static const char *const bad[] = {"$40\r\n1fc0626859\0000c67e00d6ae1716d1c9167df54a56\r\n",
                                      "$40\r\n1FC062685980C67E00D6AE1716D1C9167DF54A5Z\r\n"};
    static const char tail[] = "$19\r\ncluster_enabled:0\r\n\r\n"            /* INFO cluster */
                               "*3\r\n$1\r\n1\r\n$1\r\n1\r\n$4\r\nslot\r\n"; /* the layout */
    size_t k;
    (void)state;
    for (k = 0; k < sizeof bad / sizeof *bad; k++) {
        char replies[4096];
        size_t n = 0, i;
        fake_redis f;
        rs_opts o = {0};
        rs *x = NULL;
        weft_error err = {0};
        for (i = 0; i < 14; i++) { /* the scripts, the fourth one's SHA1 broken */
            const char *one = i == 3 ? bad[k] : good;
            size_t len = i == 3 ? 47 : sizeof good - 1;
            memcpy(replies + n, one, len);
            n += len;
        }
        memcpy(replies + n, tail, sizeof tail - 1);
        n += sizeof tail - 1;
        assert_int_equal(fr_start(&f, replies, n), 0);
        o.url = f.url;
        assert_int_equal(rs_open(&o, &x, &err), WEFT_EIO);
        assert_has(err.msg, "SCRIPT LOAD: unexpected reply");
        rs_free(x);
        fr_stop(&f);
    }
}

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
    rs_step s[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t1"},
                   {.kind = RS_PUSH, .type = "LAMBDA", .task_id = "t2"}};
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
    rs_step s[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t1"},
                   {.kind = RS_UNQUEUE, .type = "HTTP", .task_id = "t0"}};
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

/* ---- the key prefix's layout ---- */

static rs *open_parts(const char *prefix, int parts, int *rc, weft_error *err)
{
    return open_layout(prefix, parts, NULL, rc, err);
}

static void test_layout(void **state)
{
    weft_error err = {0};
    char ids[40][64];
    rs *a, *b;
    int rc, i, n, seen = 0;
    (void)state;
    /* the first use writes it; a single Redis gets one partition */
    b = open_parts("one:", 0, &rc, &err);
    assert_int_equal(rc, 0);
    assert_int_equal(qint("HGET one:layout partitions"), 1);
    assert_int_equal(rs_wake(b, "w1", 1, 0, &err), 0);
    assert_int_equal(qint("ZCARD one:{dq}:due"), 1); /* the key of old */
    rs_free(b);
    /* four partitions: each workflow's entry goes to its own */
    a = open_parts("four:", 4, &rc, &err);
    assert_int_equal(rc, 0);
    assert_int_equal(qint("HGET four:layout partitions"), 4);
    for (i = 0; i < 40; i++) {
        snprintf(ids[i], sizeof ids[i], "wf-%d", i);
        assert_int_equal(rs_wake(a, ids[i], 1, 0, &err), 0);
    }
    for (i = 0; i < 4; i++) {
        char tag[RC_TAG_MAX], cmd[128];
        rc_part_tag("dq", i, 4, tag);
        snprintf(cmd, sizeof cmd, "ZCARD four:{%s}:due", tag);
        n = qint(cmd);
        assert_true(n > 0 && n < 40);
        seen += n;
    }
    assert_int_equal(seen, 40);
    assert_int_equal(qint("EXISTS four:{dq}:due"), 0);
    /* a poll finds them all, a few at a time (never more than asked) */
    for (seen = 0, i = 0; i < 20 && seen < 40; i++) {
        char due[8][64];
        n = rs_due(a, 8, 60000, due, &err);
        assert_true(n >= 0 && n <= 8);
        seen += n;
    }
    assert_int_equal(seen, 40);
    /* a later process adopts the stored number; one configured otherwise is refused */
    b = open_parts("four:", 0, &rc, &err);
    assert_int_equal(rc, 0);
    rs_free(b);
    b = open_parts("four:", 8, &rc, &err);
    assert_int_equal(rc, WEFT_EINVAL);
    assert_has(err.msg, "first used with partitions=4 (kept in four:layout)");
    assert_has(err.msg, "configured with partitions=8");
    rs_free(b);
    b = open_parts("five:", 2000, &rc, &err);
    assert_int_equal(rc, WEFT_EINVAL);
    assert_has(err.msg, "partitions must be 1 to 1024");
    rs_free(b);
    /* a layout from before queue shards and partitions by slot range keeps
     * what its keys were made with: one queue each, partitions by CRC16 */
    freeReplyObject(qc("HSET old:layout partitions 4"));
    b = open_parts("old:", 0, &rc, &err);
    assert_int_equal(rc, 0);
    {
        char tag[RC_TAG_MAX], buf[64];
        assert_string_equal(qstr(buf, sizeof buf, "HGET old:layout queue_shards"), "1");
        assert_int_equal(qint("HEXISTS old:layout parts_by"), 0);
        for (i = 0; i < 8; i++) {
            snprintf(ids[i], sizeof ids[i], "old-%d", i);
            assert_int_equal(rs_wake(b, ids[i], 1, 0, &err), 0);
            rc_part_tag("dq", rc_part_of_crc(ids[i], 4), 4, tag);
            assert_true(qint("ZSCORE old:{%s}:due %s", tag, ids[i]) == 1);
        }
    }
    rs_free(b);
    b = open_layout("old:", 0, "4", &rc, &err);
    assert_int_equal(rc, WEFT_EINVAL);
    assert_has(err.msg, "first used with queue_shards=1 (kept in old:layout)");
    rs_free(b);
    /* a new one says it is by slot range */
    assert_int_equal(qint("HEXISTS four:layout parts_by"), 1);
    /* a layout that is not a number is named */
    freeReplyObject(qc("HSET six:layout partitions lots"));
    b = open_parts("six:", 0, &rc, &err);
    assert_int_equal(rc, WEFT_EINVAL);
    assert_has(err.msg, "six:layout: field partitions is not a number");
    rs_free(b);
    rs_free(a);
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
        cmocka_unit_test(test_bad_sha),
        cmocka_unit_test_setup_teardown(test_wrong_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_noscript, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_goes_away, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revive, setup, teardown),
    };
    int rc = rsf_start();
    if (rc != 0) return rc;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    rsf_stop();
    return rc;
}

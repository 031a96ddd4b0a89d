/*
 * The Redis store's queues (store/redis/queue.c, due.c): claiming, renewing,
 * acknowledging and reaping task leases, and the decider queue's due times,
 * holds and wakes, polled together with the task queues. Runs against a
 * real redis-server the test starts itself (redis_store_fixture.h); exits 77
 * when redis-server is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "redis_store_fixture.h"
#include "fake_redis.h"
#include "base/keyslot.h"

/* ---- work queues ---- */

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

/* A handle on a stand-in Redis that answers the first connect, then then
 * (len bytes of RESP). */
static rs *open_fake(fake_redis *f, const char *then, size_t len)
{
    rs_opts o = {0};
    rs *x = NULL;
    weft_error err = {0};
    if (fr_start_greeted(f, then, len)) fail_msg("fr_start_greeted");
    o.url = f->url;
    if (rs_open(&o, &x, &err)) fail_msg("rs_open %s: %s", o.url, err.msg);
    return x;
}

/* A claim's reply holding members that are not "<workflow id>|<task id>",
 * or without a lease token (a key someone else wrote, a broken server):
 * those are no claims, the good ones around them are. */
static void test_claim_malformed(void **state)
{
    static const char claims[] = /* claim.lua: member, token, controlled */
        "*18\r\n"
        "$7\r\nwf-1|t1\r\n$2\r\nk1\r\n:0\r\n"
        "$5\r\nnobar\r\n$2\r\nk2\r\n:0\r\n"
        "$5\r\n|t-no\r\n$2\r\nk3\r\n:0\r\n"
        "$6\r\nwf-no|\r\n$2\r\nk4\r\n:0\r\n"
        "$7\r\nwf-5|t5\r\n$0\r\n\r\n:0\r\n"
        "$7\r\nwf-6|t6\r\n$2\r\nk6\r\n:1\r\n";
    static const char *const types[] = {"task_a"};
    fake_redis f;
    rs *x = open_fake(&f, claims, sizeof claims - 1);
    rs_lease got[8];
    weft_error err = {0};
    (void)state;
    assert_int_equal(rs_claim(x, types, 1, 8, 30000, got, &err), 2);
    assert_string_equal(got[0].workflow_id, "wf-1");
    assert_string_equal(got[0].task_id, "t1");
    assert_string_equal(got[0].lease, "k1");
    assert_string_equal(got[1].workflow_id, "wf-6");
    assert_string_equal(got[1].lease, "k6");
    assert_int_equal(got[1].controlled, 1);
    rs_free(x);
    fr_stop(&f);
}

/* Entries of the decider queue that are no workflow id weft writes (empty,
 * past 63 bytes: it would be cut to another id, a NUL inside) are not
 * handed to a decider; the good ones are. */
static void test_due_malformed(void **state)
{
    static const char due[] = /* due.lua: the ids taken */
        "*5\r\n$4\r\nwf-1\r\n$0\r\n\r\n"
        "$70\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n"
        "$5\r\nwf\000-2\r\n$4\r\nwf-3\r\n";
    char ids[8][64];
    fake_redis f;
    rs *x = open_fake(&f, due, sizeof due - 1);
    weft_error err = {0};
    (void)state;
    assert_int_equal(rs_due(x, 8, 1000, ids, &err), 2);
    assert_string_equal(ids[0], "wf-1");
    assert_string_equal(ids[1], "wf-3");
    rs_free(x);
    fr_stop(&f);
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

/* Work made visible during a waiting poll's wait is what it takes. */
static void *late_pusher(void *arg)
{
    rs *x = open_rs(NULL, 0);
    rs_step st[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t5"}};
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
    rs_step st[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t1"},
                    {.kind = RS_PUSH, .type = "LAMBDA", .task_id = "t2"}};
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
            assert_int_equal(rs_due_claim(sh, 400, 4, 1000, ids, &nd, types, 2, 4, 60000, c, &err),
                             0);
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

/* ---- queue shards ---- */

static rs *open_shards(const char *prefix, const char *shards, int *rc, weft_error *err)
{
    return open_layout(prefix, 0, shards, rc, err);
}

/* The key of shard s (1..n) of type under prefix "sh:". */
static void shard_key(const char *type, int s, int n, const char *which, char *key, size_t cap)
{
    char base[160], tag[200];
    snprintf(base, sizeof base, "q:%s|", type);
    rc_range_tag(tag, sizeof tag, base, s, s - 1, n);
    snprintf(key, cap, "sh:{%s}:%s", tag, which);
}

static long long shard_card(const char *type, int s, int n, const char *which)
{
    char key[256];
    shard_key(type, s, n, which, key, sizeof key);
    return qint("ZCARD %s", key);
}

static void test_queue_shards(void **state)
{
    weft_error err = {0};
    const char *http[] = {"HTTP"}, *solo[] = {"SOLO"};
    rs_lease c[64], one;
    rs_step st;
    rs *keep = r, *b;
    long long ready, leased, in_shards = 0;
    char tid[16], seen[48] = {0}, **ex = NULL, key[256], buf[64];
    size_t nex = 0;
    int i, k, n, rc, got;
    st_qmember m;
    (void)state;

    r = open_shards("sh:", "4,SOLO=1", &rc, &err);
    assert_int_equal(rc, 0);
    assert_string_equal(qstr(buf, sizeof buf, "HGET sh:layout queue_shards"), "4,SOLO=1");
    /* members without controls spread over the 4 shards by workflow; the
     * base queue keeps the ones with controls; SOLO has one queue, the base */
    for (i = 0; i < 40; i++) {
        char wid[16];
        snprintf(wid, sizeof wid, "wf%d", i + 100);
        snprintf(tid, sizeof tid, "t%d", i);
        create(wid, LATE);
        push(wid, "HTTP", tid, 0);
    }
    create("wf1", LATE);
    assert_int_equal(qint("EXISTS sh:{q:HTTP}:ready"), 0);
    for (k = 1; k <= 4; k++) {
        n = (int)shard_card("HTTP", k, 4, "ready");
        assert_true(n > 0 && n < 40);
        in_shards += n;
    }
    assert_int_equal(in_shards, 40);
    memset(&st, 0, sizeof st);
    st.kind = RS_PUSH;
    st.type = "HTTP";
    st.task_id = "prio";
    st.priority = 7;
    {
        rs_exec e;
        assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), 0);
        save("wf1", e.fence, &st, 1);
        rs_exec_clear(&e);
    }
    assert_int_equal(qint("ZCARD sh:{q:HTTP}:ready"), 1);
    push("wf1", "SOLO", "s1", 0);
    assert_int_equal(qint("ZCARD sh:{q:SOLO}:ready"), 1);
    assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
    assert_int_equal(ready, 41);
    assert_int_equal(leased, 0);

    /* claims take from every queue, at most max a call, each member once */
    for (got = 0, k = 0; k < 20 && got < 41; k++) {
        n = rs_claim(r, http, 1, 8, 60000, c, &err);
        assert_true(n >= 0 && n <= 8);
        if (k == 0) assert_string_equal(c[0].task_id, "prio"); /* the base queue first */
        for (i = 0; i < n; i++) {
            if (!strcmp(c[i].task_id, "prio")) {
                assert_int_equal(c[i].controlled, 1);
                assert_false(seen[40]);
                seen[40] = 1;
            } else {
                int t = atoi(c[i].task_id + 1);
                assert_false(seen[t]);
                seen[t] = 1;
            }
            assert_int_equal(rs_check_lease(r, &c[i], &err), 0);
            assert_int_equal(rs_renew(r, &c[i], 90000, &err), 0);
            if (got == 0 && i == 0) {
                /* where it is, and a lease the API extends */
                assert_int_equal(rs_queue_has(r, "HTTP", c[i].workflow_id, c[i].task_id, &err), 1);
                assert_int_equal(
                    rs_queue_member(r, "HTTP", c[i].workflow_id, c[i].task_id, &m, &err), 0);
                assert_int_equal(m.state, ST_Q_LEASED);
                assert_int_equal(
                    rs_lease_extend(r, "HTTP", c[i].workflow_id, c[i].task_id, 500000, &err), 0);
            }
            assert_int_equal(rs_ack(r, &c[i], &err), 0);
            assert_int_equal(rs_ack(r, &c[i], &err), WEFT_ESTATE);
        }
        got += n;
    }
    assert_int_equal(got, 41);
    assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
    assert_int_equal(ready + leased, 0);
    for (k = 1; k <= 4; k++) {
        assert_int_equal(shard_card("HTTP", k, 4, "leases"), 0);
        shard_key("HTTP", k, 4, "lease", key, sizeof key);
        assert_int_equal(qint("HLEN %s", key), 0);
    }
    assert_int_equal(rs_claim(r, solo, 1, 1, 60000, c, &err), 1);
    assert_int_equal(rs_ack(r, &c[0], &err), 0);

    /* a workflow's tasks share one shard: the one whose slot range holds
     * the workflow's own slot */
    for (i = 0; i < 5; i++) {
        snprintf(tid, sizeof tid, "w%d", i);
        push("wf1", "HTTP", tid, 0);
    }
    k = 1 + rc_range_of("wf1", 3, 4);
    assert_int_equal(shard_card("HTTP", k, 4, "ready"), 5);
    /* a busy worker's claims of 8 (rs_claim) ask the shards found empty one
     * at a time, and the one that had more for more: all 5 in a few calls */
    for (got = 0, k = 0; k < 6 && got < 5; k++) {
        n = rs_claim(r, http, 1, 8, 60000, c + got, &err);
        assert_true(n >= 0 && n <= 5 - got);
        got += n;
    }
    assert_int_equal(got, 5);
    for (i = 0; i < 5; i++)
        assert_int_equal(rs_ack(r, &c[i], &err), 0);

    /* a REST poll of 1 asks every shard, every time: it never answers
     * nothing while a task waits (what comes over 1 goes back at once):
     * one task in one shard, five of another workflow in another */
    {
        char wa[16] = "", wb[16] = "";
        for (i = 300; i < 400 && !wb[0]; i++) {
            char w[16];
            snprintf(w, sizeof w, "wf%d", i);
            if (!wa[0])
                memcpy(wa, w, sizeof w);
            else if (rc_range_of(w, strlen(w), 4) != rc_range_of(wa, strlen(wa), 4))
                memcpy(wb, w, sizeof w);
        }
        create(wa, LATE);
        create(wb, LATE);
        push(wa, "HTTP", "p", 0);
        for (i = 0; i < 5; i++) {
            snprintf(tid, sizeof tid, "p%d", i);
            push(wb, "HTTP", tid, 0);
        }
    }
    for (k = 0; k < 6; k++) {
        int reaped = 0;
        assert_int_equal(rs_poll(r, "HTTP", 1, 60000, 3, &one, &reaped, &ex, &nex, &err), 1);
        free(ex);
        ex = NULL;
        assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
        assert_int_equal(ready, 5 - k);
        assert_int_equal(leased, 1);
        assert_int_equal(rs_ack(r, &one, &err), 0);
    }

    /* claims of 1 while every shard has work: one each, the extra ones
     * back at once (not left leased), none lost or taken twice */
    memset(seen, 0, sizeof seen);
    for (i = 0; i < 12; i++) {
        char wid[16];
        snprintf(wid, sizeof wid, "wf%d", i + 100);
        snprintf(tid, sizeof tid, "t%d", i);
        push(wid, "HTTP", tid, 0);
    }
    /* (a busy worker's claim of 1 asks one queue in turn: it may find that
     * one empty) */
    for (got = 0, k = 0; k < 40 && got < 12; k++) {
        n = rs_claim(r, http, 1, 1, 60000, &one, &err);
        assert_true(n == 0 || n == 1);
        assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
        assert_int_equal(leased, n);
        assert_int_equal(ready, 12 - got - n);
        if (!n) continue;
        assert_false(seen[atoi(one.task_id + 1)]);
        seen[atoi(one.task_id + 1)] = 1;
        assert_int_equal(rs_ack(r, &one, &err), 0);
        got++;
    }
    assert_int_equal(got, 12);
    assert_int_equal(rs_claim(r, http, 1, 1, 60000, &one, &err), 0);

    /* a claim of 1 still reaches every queue, in turn */
    push("wf1", "HTTP", "late", 0);
    for (got = 0, k = 0; k < 5 && !got; k++)
        got = rs_claim(r, http, 1, 1, 1, &one, &err);
    assert_int_equal(got, 1);
    /* its lease expires: the reap of its shard puts it back */
    rf_sleep_ms(5);
    assert_int_equal(rs_reap(r, "HTTP", 3, &ex, &nex, &err), 1);
    assert_int_equal(nex, 0);
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "late", &err), 1);
    assert_int_equal(rs_queue_member(r, "HTTP", "wf1", "late", &m, &err), 0);
    assert_int_equal(m.state, ST_Q_READY);
    /* and an unqueue takes it off, whichever queue it is in */
    memset(&st, 0, sizeof st);
    st.kind = RS_UNQUEUE;
    st.type = "HTTP";
    st.task_id = "late";
    {
        rs_exec e;
        assert_int_equal(rs_exec_load(r, "wf1", 0, &e, &err), 0);
        save("wf1", e.fence, &st, 1);
        rs_exec_clear(&e);
    }
    assert_int_equal(rs_queue_has(r, "HTTP", "wf1", "late", &err), 0);
    rs_free(r);
    r = keep;

    /* the layout is fixed: another text is refused, naming both */
    b = open_shards("sh:", "2", &rc, &err);
    assert_int_equal(rc, WEFT_EINVAL);
    assert_has(err.msg, "first used with queue_shards=4,SOLO=1 (kept in sh:layout)");
    assert_has(err.msg, "configured with queue_shards=2");
    rs_free(b);
    /* the same one written otherwise is the same */
    b = open_shards("sh2:", "3,B=2,A=1", &rc, &err);
    assert_int_equal(rc, 0);
    rs_free(b);
    b = open_shards("sh2:", "3,A=1,B=2", &rc, &err);
    assert_int_equal(rc, 0);
    rs_free(b);
    assert_string_equal(qstr(buf, sizeof buf, "HGET sh2:layout queue_shards"), "3,A=1,B=2");
    /* a process that names none takes what Redis holds */
    b = open_shards("sh:", NULL, &rc, &err);
    assert_int_equal(rc, 0);
    rs_free(b);
    /* bad texts */
    {
        static const char *const bad[] = {"0",   "65",      "4,", "4,X",  "4,X=0",  "4,A=1,A=2",
                                          "abc", "4,A|B=2", "=3", "4,=2", "4,X=999"};
        for (i = 0; i < (int)(sizeof bad / sizeof *bad); i++) {
            b = open_shards("sh3:", bad[i], &rc, &err);
            assert_int_equal(rc, WEFT_EINVAL);
            assert_has(err.msg, "queue_shards");
            rs_free(b);
        }
    }
    assert_int_equal(qint("EXISTS sh3:layout"), 0);
    /* a stored text that is not one is named */
    freeReplyObject(qc("HSET sh4:layout partitions 1 queue_shards 4,,"));
    b = open_shards("sh4:", NULL, &rc, &err);
    assert_int_equal(rc, WEFT_EINVAL);
    assert_has(err.msg, "sh4:layout: field queue_shards");
    rs_free(b);
}

/* What the review of the queue shards found, each a case. */
static void test_queue_shards_review(void **state)
{
    weft_error err = {0};
    const char *http[] = {"HTTP"};
    rs_lease c[8], one;
    rs_step st;
    rs *keep = r;
    long long ready, leased;
    char **ex = NULL, key[256], tid[16];
    size_t nex = 0;
    int i, k, n, rc, reaped = 0, got;
    (void)state;
    r = open_layout("sh:", 0, "4,ext=1", &rc, &err);
    assert_int_equal(rc, 0);

    /* a member without controls in the base queue (pushed before the queue
     * was sharded) is claimed, renewed and acked there, where it is */
    create("wfold", LATE);
    freeReplyObject(qc("ZADD sh:{q:HTTP}:ready 0 wfold|t0"));
    for (got = 0, k = 0; k < 4 && !got; k++)
        got = rs_claim(r, http, 1, 8, 60000, c, &err);
    assert_int_equal(got, 1);
    assert_string_equal(c[0].task_id, "t0");
    assert_int_equal(c[0].controlled, 0);
    assert_int_equal(rs_renew(r, &c[0], 90000, &err), 0);
    assert_int_equal(rs_ack(r, &c[0], &err), 0);
    assert_int_equal(qint("ZCARD sh:{q:HTTP}:leases"), 0);

    /* a REST poll of 1 asks the shards also when the base queue filled the
     * last one: three tasks with a priority, one without */
    create("wfp", LATE);
    memset(&st, 0, sizeof st);
    st.kind = RS_PUSH;
    st.type = "HTTP";
    st.priority = 5;
    for (i = 0; i < 3; i++) {
        rs_exec e;
        snprintf(tid, sizeof tid, "q%d", i);
        st.task_id = tid;
        assert_int_equal(rs_exec_load(r, "wfp", 0, &e, &err), 0);
        save("wfp", e.fence, &st, 1);
        rs_exec_clear(&e);
    }
    create("wfq", LATE);
    push("wfq", "HTTP", "plain", 0);
    for (k = 0; k < 4; k++) {
        assert_int_equal(rs_poll(r, "HTTP", 1, 60000, 3, &one, &reaped, &ex, &nex, &err), 1);
        free(ex);
        ex = NULL;
        assert_int_equal(rs_ack(r, &one, &err), 0);
    }
    assert_int_equal(rs_queue_sizes(r, "HTTP", &ready, &leased, &err), 0);
    assert_int_equal(ready + leased, 0);

    /* a claim given back unused (over a poll's count) keeps its place, first
     * in line, and its count of expired leases */
    for (i = 0, n = 0; n < 2 && i < 100; i++) {
        char w[16];
        int s;
        snprintf(w, sizeof w, "wr%d", i);
        s = 1 + rc_range_of(w, strlen(w), 4);
        if (n == 1 && s == k) continue;
        k = s;
        create(w, LATE);
        push(w, "HTTP", "r", 0);
        shard_key("HTTP", s, 4, "reaped", key, sizeof key);
        freeReplyObject(qc("HSET %s %s|r 2", key, w));
        n++;
    }
    assert_int_equal(rs_poll(r, "HTTP", 1, 60000, 3, &one, &reaped, &ex, &nex, &err), 1);
    free(ex);
    ex = NULL;
    for (n = 0, k = 1; k <= 4; k++) {
        char m[64];
        shard_key("HTTP", k, 4, "ready", key, sizeof key);
        if (qint("ZCARD %s", key) != 1) continue;
        n++;
        {
            redisReply *x = qc("ZRANGE %s 0 0 WITHSCORES", key);
            assert_int_equal(x->elements, 2);
            snprintf(m, sizeof m, "%s", x->element[0]->str);
            assert_string_equal(x->element[1]->str, "0");
            freeReplyObject(x);
        }
        shard_key("HTTP", k, 4, "reaped", key, sizeof key);
        assert_int_equal(qint("HGET %s %s", key, m), 2);
    }
    assert_int_equal(n, 1); /* the one given back */
    assert_int_equal(rs_ack(r, &one, &err), 0);

    /* a domain's queue "<domain>:<queue>" takes its queue's count: ext has
     * one queue, so blue:ext's tasks are in its base queue */
    create("wfd", LATE);
    push("wfd", "blue:ext", "d", 0);
    assert_int_equal(qint("ZCARD sh:{q:blue:ext}:ready"), 1);
    rs_free(r);
    r = keep;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_claim_renew_ack, setup, teardown),
        cmocka_unit_test(test_claim_malformed),
        cmocka_unit_test(test_due_malformed),
        cmocka_unit_test_setup_teardown(test_claim_many_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_claim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_shards, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_shards_review, setup, teardown),
    };
    int rc = rsf_start();
    if (rc != 0) return rc;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    rsf_stop();
    return rc;
}

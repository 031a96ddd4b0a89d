/*
 * The Redis store's executions (store/redis/exec.c, outbox.c): create, load,
 * save with its fence and steps, the outbox of steps Redis refused, operator
 * commands, and the batched saves and loads. Runs against a real
 * redis-server the test starts itself (redis_store_fixture.h); exits 77 when
 * redis-server is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "redis_store_fixture.h"

extern const char *const rs_script_name[];
extern const char *const rs_script_src[];
extern const size_t rs_script_count;

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
    rs_step bad = {.kind = RS_PUSH, .type = "HTTP", .task_id = "t|1"};
    rs_step notype = {.kind = RS_UNQUEUE, .task_id = "t1"};
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
    rs_step push = {.kind = RS_PUSH, .type = "HTTP", .task_id = "t1"};
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
        {.kind = RS_PUSH, .type = "HTTP", .task_id = "t1", .at = 100},
        {.kind = RS_PUSH, .type = "LAMBDA", .task_id = "t2", .at = 200},
        {.kind = RS_WAKE, .at = at},
    };
    rs_step s2[] = {
        {.kind = RS_UNQUEUE, .type = "HTTP", .task_id = "t1"},
        {.kind = RS_DONE},
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
    rs_step push = {.kind = RS_PUSH, .type = "HTTP", .task_id = "t1"},
            unq = {.kind = RS_UNQUEUE, .type = "HTTP", .task_id = "t1"};
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
    rs_step wake = {.kind = RS_WAKE, .at = 777};
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
    rs_step done = {.kind = RS_DONE};
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
    rs_step stale_steps[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "s1"},
                             {.kind = RS_PUSH, .type = "HTTP", .task_id = "s2", .lease = "tok-s2"}};
    rs_step ok_steps[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t2", .lease = "tok-2"},
                          {.kind = RS_PUSH, .type = "LAMBDA", .task_id = "t3", .at = 7}};
    rs_step unknown_steps[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "u1"}};
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
    rs_step bad[] = {{.kind = RS_PUSH, .type = "HT|TP", .task_id = "t1"}};
    rs_step badtask[] = {{.kind = RS_UNQUEUE, .type = "HTTP", .task_id = "t|1"}};
    rs_step good[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t2"}};
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
    rs_step st[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t1", .lease = "tok-1"}};
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
    rs_step st[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t2", .lease = "tok-2"}};
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
    rs_step st[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t1"},
                    {.kind = RS_PUSH, .type = "HTTP", .task_id = "t2", .lease = "tok-2"}};
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
    rs_step st[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "t1"}};
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
    rs_step a[] = {{.kind = RS_PUSH}};
    rs_step b[] = {{.kind = RS_WAKE, .at = LATE}};
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
    rs_step st[] = {{.kind = RS_UNQUEUE, .type = "HTTP", .task_id = "t1"}, {.kind = RS_DONE}};
    long long ttl;
    create("wf1", LATE);
    freeReplyObject(qc("SET weft:{q:HTTP}:ready x"));
    assert_int_equal(rs_exec_save(r, "wf1", 1, DOC, "TERMINATED", 1, st, 2, NULL, 0, NULL, &err),
                     0);
    assert_int_equal(qint("ZCARD weft:{wf1}:out"), 1);
    ttl = qint("PTTL weft:{wf1}:out");
    assert_true(ttl > 0);
    assert_true(qint("PTTL weft:{wf1}") > 0);
}

/* A create of a taken id leaves that execution's outbox alone. */
static void test_create_taken_outbox(void **state)
{
    weft_error err = {0};
    rs_step st[] = {{.kind = RS_PUSH, .type = "HTTP", .task_id = "other"},
                    {.kind = RS_WAKE, .at = LATE}};
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
    rs_step st[] = {
        {.kind = RS_PUSH, .type = "HTTP", .task_id = "t1", .lease = "tok", .lease_until = 1}};
    rs_step bad[] = {{.kind = RS_PUSH, .type = "HT|TP", .task_id = "t1"}};
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_and_stale_fence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unqueue_leased, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_leftover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_applies_leftovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminal_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_many_bad_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_many_lease_leftover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_many_applies_leftovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_steps_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_refused_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_taken_outbox, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_after_end_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exists_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_unreachable, setup, teardown),
    };
    int rc = rsf_start();
    if (rc != 0) return rc;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    rsf_stop();
    return rc;
}

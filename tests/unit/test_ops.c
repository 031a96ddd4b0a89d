/*
 * Tests of ops.c against a real redis-server (started here on a free
 * loopback port; skipped when redis-server is not installed): start, load,
 * the fence, idempotent start, update, commands, corrupt stored state, the
 * note hook and the decider-queue entry. test_ops_many.c tests
 * op_update_many and eager dispatch, test_ops_race.c the concurrent
 * deciders and the locks; ops_fixture.h is what they share.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops_fixture.h"

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

/*
 * A restart of a workflow with a terminate recorded but not yet applied
 * (what a terminate answered 503 leaves): the terminate lands first, with
 * the cancel of the running task, then the restart. Both are kept: the old
 * task leaves its queue, the new run's first task is the only one in it.
 * (The restart once reset the execution while the terminate's cancel still
 * pointed at its tasks: freed memory, and the old queue entry left behind.)
 */
static void test_restart_after_waiting_terminate(void **state)
{
    weft_error err = {0};
    char id[64], buf[256], *pending = NULL, st[32], old[160];
    uint64_t fence;
    xc_exec *x;

    start(NULL, NULL, id);
    assert_int_equal(op_update(&F.env, id, fn_decide, NULL, &err), 0);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 1);
    x = load(id, &fence);
    snprintf(old, sizeof old, "%s|%s", id, ((xc_task *)x->tasks.items[0])->id);
    xc_free(x);
    assert_string_not_equal(qstr(buf, sizeof buf, "ZSCORE " PREFIX "{q:Q}:ready %s", old), "(nil)");
    assert_int_equal(rs_exec_command(RC, id, "t1|terminate|stop", "terminate", &pending, st, &err),
                     RS_CMD_RECORDED);
    assert_int_equal(op_update(&F.env, id, op_fn_restart, NULL, &err), 0);
    x = load(id, &fence);
    assert_int_equal(x->status, WEFT_WF_RUNNING);
    assert_null(x->cmd);
    xc_free(x);
    assert_string_equal(hget(id, "cmd", buf, sizeof buf), "(nil)");
    /* the terminate's cancel took the old task out of its queue */
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 0);
    /* and the restarted run schedules its first task anew */
    assert_int_equal(op_update(&F.env, id, fn_decide, NULL, &err), 0);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 1);
    assert_string_equal(qstr(buf, sizeof buf, "ZSCORE " PREFIX "{q:Q}:ready %s", old), "(nil)");
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
    /* nothing created on the way (the key prefix's layout is written at connect) */
    assert_int_equal(count_keys("*"), 1);
    assert_int_equal(count_keys(PREFIX "layout"), 1);
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

/* ---- notes, the decider queue ---- */

/* What op_hooks.note heard: "<level> <msg>[ key=value ...]" lines. */
static void hear_note(void *ud, int level, const lg_field *fields, const char *msg)
{
    char *seen = ud;
    size_t n = strlen(seen);
    snprintf(seen + n, 2048 - n, "%d %s", level, msg);
    for (; fields && fields->key; fields++) {
        n = strlen(seen);
        snprintf(seen + n, 2048 - n, " %s=%s", fields->key, fields->value);
    }
    n = strlen(seen);
    snprintf(seen + n, 2048 - n, "\n");
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
    /* what it is about as fields, not inside the message */
    snprintf(want, sizeof want,
             "%d task FAILED_WITH_TERMINAL_ERROR workflow=%s name=ops_w task=b type=Q "
             "status=FAILED_WITH_TERMINAL_ERROR reason=broken\n"
             "%d workflow FAILED workflow=%s name=ops_w status=FAILED reason=task 'b' (Q) failed: "
             "broken\n",
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
        cmocka_unit_test_setup_teardown(test_restart_after_waiting_terminate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_doc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_doc_without_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_doc_other_id, setup, teardown),
    };
    int rc = opf_start();
    if (rc) return rc;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    opf_stop();
    return rc;
}

/*
 * Tests of decider.c, driven the way the engine drives it: dec_decide, look
 * at the actions, dec_start + dec_apply a result for a queued task, decide
 * again. No plugin is loaded: the task types are defined here, and the
 * clock is the test's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decider.h"

static const weft_host *H;

/* ---- the clock and the change log ---- */

static int64_t clock_ms;

static int64_t test_now(void)
{
    return clock_ms;
}

static char change_log[8192];

static void on_change(void *ud, const xc_exec *x, const xc_task *t)
{
    size_t n = strlen(change_log);
    snprintf(change_log + n, sizeof change_log - n, "%s%s:%s", n ? " " : "",
             t ? t->ref : "workflow",
             t ? weft_task_status_name(t->status) : weft_wf_status_name(x->status));
}

/* ---- task types ---- */

static const char *str_in(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

/* Queued: run by the test through dec_apply, never called. */
static int t_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/* PICK: schedules the list cases[input.case]; output { selected }. */
static int pick_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    const char *name = str_in(t->input, "case");
    json_object *cases, *list;
    if (name && json_object_object_get_ex(def, "cases", &cases) &&
        json_object_object_get_ex(cases, name, &list))
        json_object_array_add(out, json_object_get(json_object_array_get_idx(list, 0)));
    r->output = json_object_new_object();
    json_object_object_add(r->output, "selected", json_object_new_string(name ? name : ""));
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/*
 * LOOP: runs loopOver input.times times; output { iteration, last = the
 * output of the body's last task }.
 */
static int loop_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx), *last;
    json_object *body = json_object_object_get(def, "loopOver");
    int times = json_object_get_int(json_object_object_get(t->input, "times"));
    const char *last_ref = str_in(
        json_object_array_get_idx(body, json_object_array_length(body) - 1), "taskReferenceName");
    int n = t->status == WEFT_TASK_SCHEDULED ? 0 : t->iteration;

    r->output = json_object_new_object();
    if (n > 0 && (last = H->lookup(ctx, last_ref)) && last->output)
        json_object_object_add(r->output, "last", json_object_get(last->output));
    if (n < times) {
        json_object_array_add(out, json_object_get(json_object_array_get_idx(body, 0)));
        r->iteration = n + 1;
        r->status = WEFT_TASK_IN_PROGRESS;
        r->callback_after_ms = -1;
        json_object_object_add(r->output, "iteration", json_object_new_int(n + 1));
    } else {
        r->status = WEFT_TASK_COMPLETED;
        json_object_object_add(r->output, "iteration", json_object_new_int(n));
    }
    return 0;
}

/* DYN: schedules new copies of the WorkflowTasks in input.tasks. */
static int dyn_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *list = json_object_object_get(t->input, "tasks");
    size_t i, n = json_object_array_length(list);
    for (i = 0; i < n; i++) {
        json_object *copy = NULL;
        assert_int_equal(json_object_deep_copy(json_object_array_get_idx(list, i), &copy, NULL), 0);
        json_object_array_add(out, copy);
    }
    r->output = json_object_new_object();
    json_object_object_add(r->output, "forked", json_object_new_int((int)n));
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/* BADMAP: the map call fails. */
static int badmap_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    snprintf(r->reason, sizeof r->reason, "boom");
    return WEFT_EINVAL;
}

/* NOSTAT: reports no status. */
static int nostat_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    return 0;
}

/* FAILMAP: reports FAILED, yet appends its loopOver list. */
static int failmap_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    json_object *body = json_object_object_get(def, "loopOver");
    json_object_array_add(out, json_object_get(json_object_array_get_idx(body, 0)));
    snprintf(r->reason, sizeof r->reason, "nope");
    r->status = WEFT_TASK_FAILED;
    return 0;
}

/* TERM: ends the workflow with input.status. */
static int term_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    const char *s = str_in(t->input, "status");
    r->status = WEFT_TASK_COMPLETED;
    r->output = json_object_new_object();
    r->end_workflow = s && !strcmp(s, "FAILED") ? WEFT_WF_FAILED : WEFT_WF_COMPLETED;
    r->end_output = json_object_new_object();
    json_object_object_add(r->end_output, "by", json_object_new_string("term"));
    snprintf(r->reason, sizeof r->reason, "stopped");
    return 0;
}

/* POLL: IN_PROGRESS, re-evaluated after 500 ms; completes on its second call. */
static int poll_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    if (t->poll_count < 2) {
        r->status = WEFT_TASK_IN_PROGRESS;
        r->callback_after_ms = 500;
        return 0;
    }
    r->output = json_object_new_object();
    json_object_object_add(r->output, "polls", json_object_new_int(t->poll_count));
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type types[] = {
    {.name = "T", .execute = t_execute},     {.name = "PICK", .map = pick_map},
    {.name = "LOOP", .map = loop_map},       {.name = "DYN", .map = dyn_map},
    {.name = "BADMAP", .map = badmap_map},   {.name = "NOSTAT", .map = nostat_map},
    {.name = "FAILMAP", .map = failmap_map}, {.name = "TERM", .map = term_map},
    {.name = "POLL", .map = poll_map},
};

static const weft_task_type *find_type(void *ud, const char *name)
{
    size_t i;
    for (i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(types[i].name, name)) return &types[i];
    return NULL;
}

static def_env DEFS = {find_type, NULL, "/test/plugins", NULL, 0, NULL};
static const dec_env ENV = {&DEFS, NULL, test_now, on_change, NULL};

/* ---- the fixture: one execution, the last batch of actions ---- */

static struct {
    def_workflow *wf;
    xc_exec *x;
    dec_out o;
    json_object *js[64];
    size_t njs;
} F;

static int teardown(void **state)
{
    size_t i;
    dec_out_free(&F.o);
    xc_free(F.x);
    def_unref(F.wf);
    for (i = 0; i < F.njs; i++)
        json_object_put(F.js[i]);
    memset(&F, 0, sizeof F);
    change_log[0] = 0;
    return 0;
}

/* JSON from text written with ' for " (freed by the teardown). */
static json_object *J(const char *text)
{
    char *s = strdup(text), *p;
    json_object *j;
    assert_non_null(s);
    for (p = s; *p; p++)
        if (*p == '\'') *p = '"';
    j = json_tokener_parse(s);
    if (!j) fail_msg("test JSON does not parse: %s", s);
    free(s);
    assert_true(F.njs < sizeof F.js / sizeof F.js[0]);
    F.js[F.njs++] = j;
    return j;
}

static void assert_has(const char *msg, const char *part)
{
    if (!msg) fail_msg("NULL does not contain \"%s\"", part);
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

static void assert_json(json_object *got, const char *want_text)
{
    json_object *want = J(want_text);
    if (!json_object_equal(got, want))
        fail_msg("got %s, want %s", got ? json_object_to_json_string(got) : "NULL",
                 json_object_to_json_string(want));
}

/* Compile def_text, start an execution with input_text (may be NULL), no decide yet. */
static void start(const char *def_text, const char *input_text)
{
    weft_error err = {0};
    H = host_table();
    DEFS.host = H;
    if (def_compile(&DEFS, J(def_text), "test.json", NULL, &F.wf, &err))
        fail_msg("compile: %s", err.msg);
    assert_int_equal(xc_new(F.wf, input_text ? J(input_text) : NULL, "wf-1", &F.x, &err), 0);
    clock_ms = F.x->created_ms;
    change_log[0] = 0;
}

static void decide(void)
{
    F.o.n = 0;
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
}

static xc_task *task(const char *ref)
{
    xc_task *t = xc_find_ref(F.x, ref);
    if (!t) fail_msg("no task '%s'", ref);
    return t;
}

/* The action of kind for ref (NULL: any task / the workflow) in the last batch. */
static const dec_action *action(dec_kind kind, const char *ref)
{
    size_t i;
    for (i = 0; i < F.o.n; i++) {
        const dec_action *a = &F.o.a[i];
        if (a->kind == kind && (!ref || (a->task && !strcmp(a->task->ref, ref)))) return a;
    }
    return NULL;
}

static size_t count(dec_kind kind)
{
    size_t i, n = 0;
    for (i = 0; i < F.o.n; i++)
        n += F.o.a[i].kind == kind;
    return n;
}

/* The refs of the DEC_ENQUEUE actions of the last batch, space-separated. */
static const char *enqueued(void)
{
    static char buf[512];
    size_t i, n = 0;
    buf[0] = 0;
    for (i = 0; i < F.o.n; i++)
        if (F.o.a[i].kind == DEC_ENQUEUE)
            n +=
                (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? " " : "", F.o.a[i].task->ref);
    return buf;
}

/*
 * A worker runs the latest instance of ref: dec_start, then dec_apply of
 * (rc, status, output, reason), then dec_decide. The actions of both are
 * in F.o.
 */
static xc_task *run_rc(const char *ref, int rc, weft_task_status status, const char *output,
                       const char *reason)
{
    xc_task *t = task(ref);
    weft_result r;
    assert_true(t->queued);
    F.o.n = 0;
    dec_start(&ENV, F.x, t);
    assert_int_equal(t->status, WEFT_TASK_IN_PROGRESS);
    assert_false(t->queued);
    host_result_init(&r);
    r.status = status;
    if (output) r.output = json_object_get(J(output));
    if (reason) snprintf(r.reason, sizeof r.reason, "%s", reason);
    dec_apply(&ENV, F.x, t, rc, &r, &F.o);
    assert_null(r.output); /* taken */
    host_result_clear(&r);
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
    return t;
}

static xc_task *run(const char *ref, weft_task_status status, const char *output,
                    const char *reason)
{
    return run_rc(ref, 0, status, output, reason);
}

static xc_task *complete(const char *ref, const char *output)
{
    return run(ref, WEFT_TASK_COMPLETED, output, NULL);
}

#define T_(ref, extra) "{'taskReferenceName':'" ref "','type':'T'" extra "}"

/* ---- linear chains ---- */

static void test_chain(void **state)
{
    xc_task *a, *b, *c;
    start("{'name':'w','tasks':[" T_("a", ",'inputParameters':{'x':'${workflow.input.x}','k':'"
                                          "const'}") "," T_(
              "b",
              ",'inputParameters':{'v':'${a.output.n}','s':'n=${a.output.n}',"
              "'missing':'${a.output.nope}'}") "," T_("c", ",'inputParameters':{'all':'${b.output}'"
                                                           ",'id':'${workflow.workflowId}'}") "]}",
          "{'x':5}");
    decide();
    assert_string_equal(enqueued(), "a");
    assert_int_equal(F.o.n, 1);
    a = task("a");
    assert_int_equal(F.o.a[0].at, clock_ms);
    assert_int_equal(a->status, WEFT_TASK_SCHEDULED);
    assert_int_equal(a->seq, 1);
    assert_int_equal(a->retry_count, 0);
    assert_json(a->input, "{'x':5,'k':'const'}");
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);

    /* deciding again with nothing new does nothing */
    decide();
    assert_int_equal(F.o.n, 0);

    clock_ms += 10;
    complete("a", "{'n':6}");
    assert_string_equal(enqueued(), "b");
    b = task("b");
    assert_int_equal(b->seq, 2);
    assert_int_equal(a->status, WEFT_TASK_COMPLETED);
    assert_int_equal(a->started_ms, clock_ms);
    assert_int_equal(a->ended_ms, clock_ms);
    assert_int_equal(a->poll_count, 1);
    assert_json(b->input, "{'v':6,'s':'n=6','missing':null}");

    complete("b", "{'m':[1,2]}");
    assert_string_equal(enqueued(), "c");
    c = task("c");
    assert_json(c->input, "{'all':{'m':[1,2]},'id':'wf-1'}");
    assert_null(action(DEC_WF_ENDED, NULL));

    complete("c", "{'done':true}");
    assert_string_equal(enqueued(), "");
    assert_non_null(action(DEC_WF_ENDED, NULL));
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_null(F.x->reason);
    assert_json(F.x->output, "{'done':true}"); /* the last task's output */
    assert_int_equal(F.x->active, 0);
    assert_int_equal(F.x->tasks.len, 3);
    assert_int_equal(F.x->ended_ms, clock_ms);

    /* a finished workflow decides nothing more */
    decide();
    assert_int_equal(F.o.n, 0);
}

static void test_chain_output_parameters(void **state)
{
    start("{'name':'w','outputParameters':{'total':'${b.output.n}','first':'${a.output}',"
          "'id':'${workflow.workflowId}','in':'${workflow.input.x}','text':'t=${b.output.n}'},"
          "'tasks':[" T_("a", "") "," T_("b", "") "]}",
          "{'x':'X'}");
    decide();
    complete("a", "{'n':1}");
    complete("b", "{'n':2}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_json(F.x->output, "{'total':2,'first':{'n':1},'id':'wf-1','in':'X','text':'t=2'}");
}

static void test_output_not_an_object(void **state)
{
    start("{'name':'w','tasks':[" T_("a", "") "]}", NULL);
    decide();
    complete("a", "[1,2]");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_json(F.x->output, "{'result':[1,2]}");
    teardown(state);

    start("{'name':'w','tasks':[" T_("a", "") "]}", NULL);
    decide();
    complete("a", NULL);
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_json(F.x->output, "{}");
}

static void test_status_callbacks(void **state)
{
    start("{'name':'w','tasks':[" T_("a", "") "," T_("b", "") "]}", NULL);
    decide();
    complete("a", "{}");
    complete("b", "{}");
    assert_string_equal(change_log, "a:SCHEDULED a:IN_PROGRESS a:COMPLETED b:SCHEDULED "
                                    "b:IN_PROGRESS b:COMPLETED workflow:COMPLETED");
}

static void test_in_progress_results(void **state)
{
    xc_task *a;
    weft_result r;
    weft_error err = {0};
    start("{'name':'w','tasks':[" T_("a", "") "," T_("b", "") "]}", NULL);
    decide();
    a = task("a");

    /* IN_PROGRESS with a callback: queued again at now + delay */
    F.o.n = 0;
    dec_start(&ENV, F.x, a);
    host_result_init(&r);
    r.status = WEFT_TASK_IN_PROGRESS;
    r.callback_after_ms = 700;
    r.output = json_object_new_object();
    json_object_object_add(r.output, "partial", json_object_new_int(1));
    dec_apply(&ENV, F.x, a, 0, &r, &F.o);
    host_result_clear(&r);
    assert_int_equal(a->status, WEFT_TASK_IN_PROGRESS);
    assert_true(a->queued);
    assert_non_null(action(DEC_ENQUEUE, "a"));
    assert_int_equal(action(DEC_ENQUEUE, "a")->at, clock_ms + 700);
    assert_json(a->output, "{'partial':1}");
    decide();
    assert_int_equal(F.o.n, 0);

    /* IN_PROGRESS waiting for an outside completion: nothing queued */
    clock_ms += 700;
    F.o.n = 0;
    dec_start(&ENV, F.x, a);
    assert_int_equal(a->poll_count, 2);
    host_result_init(&r);
    r.status = WEFT_TASK_IN_PROGRESS;
    r.callback_after_ms = -1;
    dec_apply(&ENV, F.x, a, 0, &r, &F.o);
    host_result_clear(&r);
    assert_int_equal(F.o.n, 0);
    assert_false(a->queued);
    assert_int_equal(a->status, WEFT_TASK_IN_PROGRESS);

    /* completed from outside; the output is borrowed */
    F.o.n = 0;
    assert_int_equal(
        dec_complete(&ENV, F.x, a, WEFT_TASK_COMPLETED, J("{'signal':7}"), NULL, &F.o, &err), 0);
    assert_int_equal(a->status, WEFT_TASK_COMPLETED);
    assert_json(a->output, "{'signal':7}");
    decide();
    assert_string_equal(enqueued(), "b");
}

static void test_execute_reports_no_status(void **state)
{
    xc_task *a;
    start("{'name':'w','tasks':[" T_("a", "") "]}", NULL);
    decide();
    a = run("a", WEFT_TASK_SCHEDULED, NULL, NULL);
    assert_int_equal(a->status, WEFT_TASK_FAILED);
    assert_has(a->reason, "T execute reported no status");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
}

/* ---- retries ---- */

static void test_retry_fixed(void **state)
{
    xc_task *a1, *a2, *a3;
    const dec_action *e;
    start("{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'retryCount':2,"
                                          "'retryDelaySeconds':3}") "," T_("b", "") "]}",
          NULL);
    decide();
    a1 = run("a", WEFT_TASK_FAILED, NULL, "e1");
    assert_int_equal(a1->status, WEFT_TASK_FAILED);
    assert_string_equal(a1->reason, "e1");
    assert_true(a1->retried);
    e = action(DEC_ENQUEUE, "a");
    assert_non_null(e);
    a2 = e->task;
    assert_ptr_not_equal(a2, a1);
    assert_ptr_equal(task("a"), a2); /* the ref names the latest instance */
    assert_int_equal(a2->retry_count, 1);
    assert_int_equal(a2->status, WEFT_TASK_SCHEDULED);
    assert_int_equal(e->at, clock_ms + 3000);
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);
    assert_string_equal(enqueued(), "a");

    clock_ms += 3000;
    run("a", WEFT_TASK_FAILED, NULL, "e2");
    a3 = action(DEC_ENQUEUE, "a")->task;
    assert_int_equal(a3->retry_count, 2);
    assert_int_equal(action(DEC_ENQUEUE, "a")->at, clock_ms + 3000);

    clock_ms += 3000;
    run("a", WEFT_TASK_FAILED, NULL, "e3");
    assert_string_equal(enqueued(), "");
    assert_false(a3->retried);
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "task 'a'");
    assert_has(F.x->reason, "e3");
    assert_non_null(F.x->failed_task_id);
    assert_string_equal(F.x->failed_task_id, a3->id);
    assert_int_equal(F.x->tasks.len, 3);
    assert_null(xc_find_ref(F.x, "b"));
    assert_non_null(action(DEC_WF_ENDED, NULL));
}

/* Each retry is queued def_retry_delay(def, n) after the failure. */
static void check_backoff(const char *td, const int64_t *want, size_t n)
{
    char text[512];
    size_t i;
    snprintf(text, sizeof text,
             "{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
             "'taskDefinition':%s}]}",
             td);
    start(text, NULL);
    decide();
    for (i = 0; i < n; i++) {
        const dec_action *e;
        run("a", WEFT_TASK_FAILED, NULL, "again");
        e = action(DEC_ENQUEUE, "a");
        if (!e) fail_msg("%s: no retry %zu", td, i + 1);
        assert_int_equal(e->task->retry_count, (int)i + 1);
        assert_int_equal(e->at - clock_ms, want[i]);
        assert_int_equal(e->at - clock_ms, def_retry_delay(e->task->def, (int)i + 1));
        clock_ms = e->at;
    }
    run("a", WEFT_TASK_FAILED, NULL, "last");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    teardown(NULL);
}

static void test_retry_backoff(void **state)
{
    static const int64_t expo[] = {1000, 2000, 4000, 8000};
    static const int64_t capped[] = {1000, 2000, 3000, 3000};
    static const int64_t linear[] = {1000, 2000, 3000};
    static const int64_t scaled[] = {500, 1000, 1500};
    check_backoff("{'retryCount':4,'retryLogic':'EXPONENTIAL_BACKOFF','retryDelaySeconds':1}", expo,
                  4);
    check_backoff("{'retryCount':4,'retryLogic':'EXPONENTIAL_BACKOFF','retryDelaySeconds':1,"
                  "'maxRetryDelaySeconds':3}",
                  capped, 4);
    check_backoff("{'retryCount':3,'retryLogic':'LINEAR_BACKOFF','retryDelaySeconds':1}", linear,
                  3);
    check_backoff("{'retryCount':3,'retryLogic':'LINEAR_BACKOFF','retryDelaySeconds':'250ms',"
                  "'backoffScaleFactor':2}",
                  scaled, 3);
}

static void test_retry_jitter_bound(void **state)
{
    int i;
    start("{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'retryCount':50,"
                                          "'retryDelaySeconds':1,'backoffJitterMs':200}") "]}",
          NULL);
    decide();
    for (i = 0; i < 50; i++) {
        const dec_action *e;
        run("a", WEFT_TASK_FAILED, NULL, "x");
        e = action(DEC_ENQUEUE, "a");
        assert_non_null(e);
        assert_in_range(e->at - clock_ms, 1000, 1200);
    }
}

static void test_retry_on_execute_error(void **state)
{
    xc_task *a;
    start("{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'retryCount':1,"
                                          "'retryDelaySeconds':0}") "]}",
          NULL);
    decide();
    /* a non-zero rc fails the task whatever status it set */
    a = run_rc("a", WEFT_EIO, WEFT_TASK_COMPLETED, NULL, "connection refused");
    assert_int_equal(a->status, WEFT_TASK_FAILED);
    assert_string_equal(a->reason, "connection refused");
    assert_string_equal(enqueued(), "a");
    assert_int_equal(action(DEC_ENQUEUE, "a")->at, clock_ms);
    a = run_rc("a", WEFT_ESCRIPT, WEFT_TASK_SCHEDULED, NULL, NULL);
    assert_has(a->reason, "no reason given");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
}

static void test_terminal_error_not_retried(void **state)
{
    xc_task *a;
    start(
        "{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'retryCount':3}") "," T_("b", "") "]}",
        NULL);
    decide();
    a = run("a", WEFT_TASK_FAILED_WITH_TERMINAL_ERROR, NULL, "bad card");
    assert_int_equal(a->status, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_false(a->retried);
    assert_string_equal(enqueued(), "");
    assert_int_equal(F.x->tasks.len, 1);
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "task 'a'");
    assert_has(F.x->reason, "bad card");
}

/* ---- optional tasks ---- */

static void test_optional_failure(void **state)
{
    xc_task *a;
    start("{'name':'w','tasks':[" T_("a", ",'optional':true") "," T_("b", "") "]}", NULL);
    decide();
    a = run("a", WEFT_TASK_FAILED, NULL, "flaky");
    assert_int_equal(a->status, WEFT_TASK_COMPLETED_WITH_ERRORS);
    assert_string_equal(a->reason, "flaky");
    assert_string_equal(enqueued(), "b");
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);
    complete("b", "{'ok':1}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_json(F.x->output, "{'ok':1}");
}

static void test_optional_after_retries(void **state)
{
    start("{'name':'w','tasks':[" T_("a", ",'optional':true,'taskDefinition':{'retryCount':1,"
                                          "'retryDelaySeconds':0}") "," T_("b", "") "]}",
          NULL);
    decide();
    run("a", WEFT_TASK_FAILED, NULL, "one");
    assert_string_equal(enqueued(), "a");
    run("a", WEFT_TASK_FAILED, NULL, "two");
    assert_int_equal(task("a")->status, WEFT_TASK_COMPLETED_WITH_ERRORS);
    assert_string_equal(enqueued(), "b");
}

/* ---- map containers ---- */

static const char *PICK_DEF =
    "{'name':'w','tasks':[{'taskReferenceName':'pick','type':'PICK',"
    "'inputParameters':{'case':'${workflow.input.side}'},'cases':{"
    "'left':[" T_("l1", "") "," T_(
        "l2", ",'inputParameters':{'v':'${l1.output.v}'}") "],"
                                                           "'right':[" T_("r1", "") "]}}," T_(
                                                               "after", "") "]}";

static void test_pick_container(void **state)
{
    xc_task *pick, *l1;
    start(PICK_DEF, "{'side':'left'}");
    decide();
    pick = task("pick");
    assert_int_equal(pick->status, WEFT_TASK_COMPLETED);
    assert_int_equal(pick->poll_count, 1);
    assert_json(pick->output, "{'selected':'left'}");
    assert_json(pick->input, "{'case':'left'}");
    assert_string_equal(enqueued(), "l1");
    l1 = task("l1");
    assert_ptr_equal(l1->def->list->owner, pick->def);
    assert_int_equal(l1->scope, 0);

    complete("l1", "{'v':'L'}");
    assert_string_equal(enqueued(), "l2");
    assert_json(task("l2")->input, "{'v':'L'}");
    complete("l2", "{}");
    assert_string_equal(enqueued(), "after");
    complete("after", "{'end':1}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_null(xc_find_ref(F.x, "r1"));
    assert_int_equal(F.x->tasks.len, 4);
}

static void test_pick_nothing(void **state)
{
    start(PICK_DEF, "{'side':'up'}");
    decide();
    assert_json(task("pick")->output, "{'selected':'up'}");
    assert_string_equal(enqueued(), "after");
    complete("after", "{}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
}

static void test_pick_last(void **state)
{
    start("{'name':'w','tasks':[{'taskReferenceName':'pick','type':'PICK',"
          "'inputParameters':{'case':'a'},'cases':{'a':[" T_("a1", "") "]}}]}",
          NULL);
    decide();
    assert_string_equal(enqueued(), "a1");
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);
    complete("a1", "{}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
}

static void test_map_fails(void **state)
{
    xc_task *m;
    start("{'name':'w','tasks':[{'taskReferenceName':'m','type':'BADMAP'}," T_("after", "") "]}",
          NULL);
    decide();
    m = task("m");
    assert_int_equal(m->status, WEFT_TASK_FAILED);
    assert_string_equal(m->reason, "boom");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "task 'm' (BADMAP) failed: boom");
    assert_null(xc_find_ref(F.x, "after"));
    teardown(state);

    start("{'name':'w','tasks':[{'taskReferenceName':'m','type':'NOSTAT'}]}", NULL);
    decide();
    m = task("m");
    assert_int_equal(m->status, WEFT_TASK_FAILED);
    assert_has(m->reason, "NOSTAT map reported no valid status");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "task 'm'");
}

static void test_map_fails_retried(void **state)
{
    start("{'name':'w','tasks':[{'taskReferenceName':'m','type':'BADMAP',"
          "'taskDefinition':{'retryCount':1,'retryDelaySeconds':2}}]}",
          NULL);
    decide();
    /* an inline retry waits on a timer, then maps again */
    assert_non_null(action(DEC_TIMER, "m"));
    assert_int_equal(action(DEC_TIMER, "m")->at, clock_ms + 2000);
    assert_int_equal(task("m")->retry_count, 1);
    assert_int_equal(task("m")->status, WEFT_TASK_SCHEDULED);
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);
    clock_ms += 2000;
    F.o.n = 0;
    dec_remap(&ENV, F.x, task("m"), &F.o);
    decide();
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
}

/* A map that reports FAILED schedules nothing of what it appended. */
static void test_failed_map_spawns_nothing(void **state)
{
    start("{'name':'w','tasks':[{'taskReferenceName':'m','type':'FAILMAP','loopOver':[" T_(
              "child", "") "]}]}",
          NULL);
    decide();
    assert_int_equal(task("m")->status, WEFT_TASK_FAILED);
    assert_string_equal(task("m")->reason, "nope");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_string_equal(enqueued(), "");
    assert_null(xc_find_ref(F.x, "child"));
}

static void test_timer_remap(void **state)
{
    xc_task *p;
    start("{'name':'w','tasks':[{'taskReferenceName':'p','type':'POLL'}," T_("after", "") "]}",
          NULL);
    decide();
    p = task("p");
    assert_int_equal(p->status, WEFT_TASK_IN_PROGRESS);
    assert_non_null(action(DEC_TIMER, "p"));
    assert_int_equal(action(DEC_TIMER, "p")->at, clock_ms + 500);
    assert_string_equal(enqueued(), "");
    clock_ms += 500;
    F.o.n = 0;
    dec_remap(&ENV, F.x, p, &F.o);
    assert_int_equal(p->status, WEFT_TASK_COMPLETED);
    assert_json(p->output, "{'polls':2}");
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
    assert_string_equal(enqueued(), "after");
    /* a remap of a finished task does nothing */
    F.o.n = 0;
    dec_remap(&ENV, F.x, p, &F.o);
    assert_int_equal(F.o.n, 0);
    assert_int_equal(p->poll_count, 2);
}

static void test_terminate_map(void **state)
{
    start("{'name':'w','tasks':[{'taskReferenceName':'t','type':'TERM',"
          "'inputParameters':{'status':'FAILED'}}," T_("after", "") "]}",
          NULL);
    decide();
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_string_equal(F.x->reason, "stopped");
    assert_json(F.x->output, "{'by':'term'}");
    assert_int_equal(task("t")->status, WEFT_TASK_COMPLETED);
    assert_null(xc_find_ref(F.x, "after"));
    assert_non_null(action(DEC_WF_ENDED, NULL));
    teardown(state);

    start("{'name':'w','tasks':[{'taskReferenceName':'t','type':'TERM'}," T_("after", "") "]}",
          NULL);
    decide();
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_json(F.x->output, "{'by':'term'}");
    assert_null(xc_find_ref(F.x, "after"));
}

/* ---- loops ---- */

static void test_loop(void **state)
{
    xc_task *loop, *b1, *b2;
    start(
        "{'name':'w','tasks':[{'taskReferenceName':'loop','type':'LOOP',"
        "'inputParameters':{'times':2},'loopOver':[" T_("body", ",'inputParameters':{'it':'${loop."
                                                                "output.iteration}'}") "," T_(
            "body2",
            ",'inputParameters':{'prev':'${body.output.n}'}") "]}," T_("after",
                                                                       ",'inputParameters':{'l':'${"
                                                                       "loop.output}','b1':'${body_"
                                                                       "_1.output.n}'}") "]}",
        NULL);
    decide();
    loop = task("loop");
    assert_int_equal(loop->status, WEFT_TASK_IN_PROGRESS);
    assert_int_equal(loop->iteration, 1);
    assert_string_equal(enqueued(), "body__1");
    b1 = task("body__1");
    assert_int_equal(b1->iteration, 1);
    assert_ptr_equal(b1->def->list->owner, loop->def);
    assert_json(b1->input, "{'it':1}");

    complete("body__1", "{'n':1}");
    assert_string_equal(enqueued(), "body2__1");
    assert_json(task("body2__1")->input, "{'prev':1}");
    complete("body2__1", "{'m':'one'}");
    /* the body ended: the loop is re-evaluated and starts iteration 2 */
    assert_string_equal(enqueued(), "body__2");
    assert_int_equal(loop->status, WEFT_TASK_IN_PROGRESS);
    assert_int_equal(loop->iteration, 2);
    assert_int_equal(loop->poll_count, 2);
    b2 = task("body__2");
    assert_int_equal(b2->iteration, 2);
    assert_ptr_not_equal(b2, b1);
    assert_json(b2->input, "{'it':2}");
    assert_ptr_equal(task("body"), b2);    /* the def ref names the newest */
    assert_ptr_equal(task("body__1"), b1); /* the instance ref its own */

    complete("body__2", "{'n':2}");
    assert_string_equal(enqueued(), "body2__2");
    assert_json(task("body2__2")->input, "{'prev':2}");
    complete("body2__2", "{'m':'two'}");
    assert_int_equal(loop->status, WEFT_TASK_COMPLETED);
    assert_int_equal(loop->poll_count, 3);
    assert_json(loop->output, "{'iteration':2,'last':{'m':'two'}}");
    assert_string_equal(enqueued(), "after");
    assert_json(task("after")->input, "{'l':{'iteration':2,'last':{'m':'two'}},'b1':1}");
    complete("after", "{}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_int_equal(F.x->tasks.len, 6);
}

static void test_loop_body_failure(void **state)
{
    start("{'name':'w','tasks':[{'taskReferenceName':'loop','type':'LOOP',"
          "'inputParameters':{'times':3},'loopOver':[" T_("body", "") "]}]}",
          NULL);
    decide();
    complete("body__1", "{}");
    assert_string_equal(enqueued(), "body__2");
    run("body__2", WEFT_TASK_FAILED, NULL, "bad iteration");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "task 'body__2'");
    assert_has(F.x->reason, "bad iteration");
    assert_int_equal(task("loop")->status, WEFT_TASK_CANCELED);
}

/* ---- dynamic tasks ---- */

static const char *DYN_DEF =
    "{'name':'w','tasks':[{'taskReferenceName':'dyn','type':'DYN',"
    "'inputParameters':{'tasks':'${workflow.input.dyn}'}}," T_("after", "") "]}";

static void test_dynamic(void **state)
{
    xc_task *dyn, *d1, *d2;
    start(DYN_DEF, "{'k':'K','dyn':[{'taskReferenceName':'d1','type':'T','inputParameters':"
                   "{'v':'${workflow.input.k}'}},{'taskReferenceName':'d2','type':'T'}]}");
    decide();
    dyn = task("dyn");
    assert_int_equal(dyn->status, WEFT_TASK_COMPLETED);
    assert_json(dyn->output, "{'forked':2}");
    assert_string_equal(enqueued(), "d1 d2");
    d1 = task("d1");
    d2 = task("d2");
    assert_non_null(d1->dyn_json);
    assert_ptr_equal(def_of_json(d1->dyn_json), d1->def);
    assert_ptr_equal(d1->def->list->owner, dyn->def);
    assert_json(d1->input, "{'v':'K'}");
    /* the definition itself does not change */
    assert_null(wu_map_get(F.wf->by_ref, "d1"));

    /* the flow goes on after the container */
    complete("d1", "{'r':1}");
    assert_string_equal(enqueued(), "after");
    complete("d2", "{'r':2}");
    assert_string_equal(enqueued(), "");
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);
    complete("after", "{'fin':1}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    assert_int_equal(F.x->tasks.len, 4);
    assert_int_equal(d2->status, WEFT_TASK_COMPLETED);
}

static void test_dynamic_retry(void **state)
{
    xc_task *d1;
    start(DYN_DEF, "{'dyn':[{'taskReferenceName':'d1','type':'T',"
                   "'taskDefinition':{'retryCount':1,'retryDelaySeconds':0}}]}");
    decide();
    d1 = task("d1");
    run("d1", WEFT_TASK_FAILED, NULL, "x");
    assert_string_equal(enqueued(), "d1");
    assert_ptr_not_equal(task("d1"), d1);
    assert_ptr_equal(task("d1")->def, d1->def);
    assert_non_null(task("d1")->dyn_json);
    complete("d1", "{}");
    assert_string_equal(enqueued(), "after");
}

static void test_dynamic_bad_type(void **state)
{
    xc_task *dyn;
    start(DYN_DEF, "{'dyn':[{'taskReferenceName':'d1','type':'T'},"
                   "{'taskReferenceName':'d2','type':'NOPE'}]}");
    decide();
    dyn = task("dyn");
    assert_int_equal(dyn->status, WEFT_TASK_FAILED);
    assert_has(dyn->reason, "task 'd2': unknown task type NOPE");
    assert_has(dyn->reason, "/test/plugins");
    /* nothing of it ran, not even the good one */
    assert_string_equal(enqueued(), "");
    assert_null(xc_find_ref(F.x, "d1"));
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "task 'dyn'");
    assert_has(F.x->reason, "unknown task type NOPE");
}

static void test_dynamic_clash(void **state)
{
    start(DYN_DEF, "{'dyn':[{'taskReferenceName':'after','type':'T'}]}");
    decide();
    assert_int_equal(task("dyn")->status, WEFT_TASK_FAILED);
    assert_has(task("dyn")->reason, "duplicate taskReferenceName 'after'");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_string_equal(enqueued(), "");
}

/* ---- timeouts ---- */

static void test_task_timeout(void **state)
{
    xc_task *a;
    int64_t next = -1, s;
    weft_result r;
    start("{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'timeoutSeconds':2}") "]}", NULL);
    decide();
    a = task("a");
    /* not started yet: no deadline */
    F.o.n = 0;
    dec_timeouts(&ENV, F.x, clock_ms + 10000, &next, &F.o);
    assert_int_equal(next, 0);
    assert_int_equal(F.o.n, 0);

    clock_ms += 100;
    s = clock_ms;
    dec_start(&ENV, F.x, a);
    assert_int_equal(a->started_ms, s);
    clock_ms = s + 1999;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(next, s + 2000);
    assert_int_equal(F.o.n, 0);
    assert_int_equal(a->status, WEFT_TASK_IN_PROGRESS);

    clock_ms = s + 2000;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(a->status, WEFT_TASK_TIMED_OUT);
    assert_has(a->reason, "timed out after 2s");
    assert_int_equal(next, 0);
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
    assert_int_equal(F.x->status, WEFT_WF_TIMED_OUT);
    assert_has(F.x->reason, "task 'a'");
    assert_has(F.x->reason, "timed out");
    assert_string_equal(F.x->failed_task_id, a->id);
    assert_non_null(action(DEC_WF_ENDED, NULL));

    /* the worker's late result is dropped */
    F.o.n = 0;
    host_result_init(&r);
    r.status = WEFT_TASK_COMPLETED;
    r.output = json_object_new_object();
    dec_apply(&ENV, F.x, a, 0, &r, &F.o);
    host_result_clear(&r);
    assert_int_equal(a->status, WEFT_TASK_TIMED_OUT);
    assert_null(a->output);
    assert_int_equal(F.o.n, 0);
}

/* A task that times out while a worker runs it: the worker is told (DEC_CANCEL). */
static void test_task_timeout_cancels_running(void **state)
{
    xc_task *a;
    int64_t next;
    start("{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'timeoutSeconds':1}") "]}", NULL);
    decide();
    a = task("a");
    dec_start(&ENV, F.x, a);
    clock_ms += 1000;
    F.o.n = 0;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(a->status, WEFT_TASK_TIMED_OUT);
    assert_non_null(action(DEC_CANCEL, "a"));
}

/*
 * timeoutPolicy, as in Conductor: TIME_OUT_WF (the default) times the
 * workflow out at once, RETRY retries the task like a failure.
 */
static void test_task_timeout_policy(void **state)
{
    int64_t next;
    start("{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'timeoutSeconds':1,"
                                          "'retryCount':2,'retryDelaySeconds':0}") "]}",
          NULL);
    decide();
    dec_start(&ENV, F.x, task("a"));
    clock_ms += 1000;
    F.o.n = 0;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
    assert_string_equal(enqueued(), "");
    assert_int_equal(F.x->status, WEFT_WF_TIMED_OUT);
    teardown(state);

    start("{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'timeoutSeconds':1,"
                                          "'timeoutPolicy':'RETRY','retryCount':1,"
                                          "'retryDelaySeconds':0}") "]}",
          NULL);
    decide();
    dec_start(&ENV, F.x, task("a"));
    clock_ms += 1000;
    F.o.n = 0;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
    assert_string_equal(enqueued(), "a");
    assert_int_equal(task("a")->retry_count, 1);
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);
    /* the retry times out too: no retries left, the workflow times out */
    dec_start(&ENV, F.x, task("a"));
    clock_ms += 1000;
    F.o.n = 0;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
    assert_int_equal(F.x->status, WEFT_WF_TIMED_OUT);
}

/* responseTimeoutSeconds: a running task that reports nothing for that long times out. */
static void test_response_timeout(void **state)
{
    xc_task *a;
    int64_t next;
    start("{'name':'w','tasks':[" T_("a", ",'taskDefinition':{'timeoutSeconds':60,"
                                          "'responseTimeoutSeconds':5}") "]}",
          NULL);
    decide();
    a = task("a");
    dec_start(&ENV, F.x, a);
    F.o.n = 0;
    dec_timeouts(&ENV, F.x, clock_ms + 4999, &next, &F.o);
    assert_int_equal(a->status, WEFT_TASK_IN_PROGRESS);
    assert_int_equal(next, clock_ms + 5000);
    clock_ms += 5000;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(a->status, WEFT_TASK_TIMED_OUT);
}

static void test_workflow_timeout(void **state)
{
    int64_t next, created;
    start("{'name':'w','timeoutSeconds':5,'tasks':[" T_("a", "") "]}", NULL);
    created = F.x->created_ms;
    decide();
    F.o.n = 0;
    clock_ms = created + 4999;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(next, created + 5000);
    assert_int_equal(F.o.n, 0);
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);

    clock_ms = created + 5000;
    dec_timeouts(&ENV, F.x, clock_ms, &next, &F.o);
    assert_int_equal(F.x->status, WEFT_WF_TIMED_OUT);
    assert_string_equal(F.x->reason, "workflow timed out after 5s");
    assert_int_equal(task("a")->status, WEFT_TASK_CANCELED);
    assert_non_null(action(DEC_CANCEL, "a")); /* it waited in a queue */
    assert_non_null(action(DEC_WF_ENDED, NULL));
    assert_int_equal(F.x->active, 0);
    assert_int_equal(next, 0);
    teardown(state);

    /* ALERT_ONLY never ends the workflow */
    start("{'name':'w','timeoutSeconds':5,'timeoutPolicy':'ALERT_ONLY','tasks':[" T_("a", "") "]}",
          NULL);
    decide();
    F.o.n = 0;
    dec_timeouts(&ENV, F.x, F.x->created_ms + 60000, &next, &F.o);
    assert_int_equal(F.x->status, WEFT_WF_RUNNING);
    assert_int_equal(F.o.n, 0);
}

/* ---- ending, cancelling, late results ---- */

static const char *TWO_DEF = "{'name':'w','tasks':[{'taskReferenceName':'dyn','type':'DYN',"
                             "'inputParameters':{'tasks':[" T_("d1", "") "," T_("d2", "") "]}}]}";

static void test_end_cancels_queued(void **state)
{
    xc_task *d1, *d2;
    size_t i;
    start(TWO_DEF, NULL);
    decide();
    assert_string_equal(enqueued(), "d1 d2");
    d1 = task("d1");
    d2 = task("d2");
    dec_start(&ENV, F.x, d1);
    F.o.n = 0;
    change_log[0] = 0;
    dec_end(&ENV, F.x, WEFT_WF_TERMINATED, "by user", &F.o);
    assert_int_equal(F.x->status, WEFT_WF_TERMINATED);
    assert_string_equal(F.x->reason, "by user");
    assert_int_equal(d1->status, WEFT_TASK_CANCELED);
    assert_int_equal(d2->status, WEFT_TASK_CANCELED);
    assert_false(d2->queued);
    assert_int_equal(F.x->active, 0);
    assert_non_null(action(DEC_CANCEL, "d2"));
    /* the workflow's end is the last action */
    assert_int_equal(F.o.a[F.o.n - 1].kind, DEC_WF_ENDED);
    assert_null(F.o.a[F.o.n - 1].task);
    assert_int_equal(count(DEC_WF_ENDED), 1);
    assert_has(change_log, "d1:CANCELED");
    assert_has(change_log, "d2:CANCELED");
    assert_has(change_log, "workflow:TERMINATED");
    for (i = 0; i < F.o.n; i++)
        assert_int_not_equal(F.o.a[i].kind, DEC_ENQUEUE);

    /* ending again does nothing */
    F.o.n = 0;
    dec_end(&ENV, F.x, WEFT_WF_FAILED, "again", &F.o);
    assert_int_equal(F.o.n, 0);
    assert_int_equal(F.x->status, WEFT_WF_TERMINATED);
    assert_string_equal(F.x->reason, "by user");
    decide();
    assert_int_equal(F.o.n, 0);
}

/* A task a worker is running (dec_start) is canceled with DEC_CANCEL too. */
static void test_end_cancels_running(void **state)
{
    xc_task *d1;
    start(TWO_DEF, NULL);
    decide();
    d1 = task("d1");
    dec_start(&ENV, F.x, d1);
    F.o.n = 0;
    dec_end(&ENV, F.x, WEFT_WF_TERMINATED, "by user", &F.o);
    assert_int_equal(d1->status, WEFT_TASK_CANCELED);
    assert_non_null(action(DEC_CANCEL, "d1"));
}

static void test_late_apply_ignored(void **state)
{
    xc_task *d1;
    weft_result r;
    start(TWO_DEF, NULL);
    decide();
    d1 = task("d1");
    dec_start(&ENV, F.x, d1);
    F.o.n = 0;
    dec_end(&ENV, F.x, WEFT_WF_TERMINATED, NULL, &F.o);
    assert_null(F.x->reason);
    change_log[0] = 0;
    F.o.n = 0;
    host_result_init(&r);
    r.status = WEFT_TASK_COMPLETED;
    r.output = json_object_new_object();
    r.end_workflow = WEFT_WF_COMPLETED;
    dec_apply(&ENV, F.x, d1, 0, &r, &F.o);
    host_result_clear(&r);
    assert_int_equal(d1->status, WEFT_TASK_CANCELED);
    assert_null(d1->output);
    assert_int_equal(F.o.n, 0);
    assert_int_equal(F.x->status, WEFT_WF_TERMINATED);
    assert_string_equal(change_log, "");
    decide();
    assert_int_equal(F.o.n, 0);
}

static void test_complete_terminal(void **state)
{
    xc_task *a;
    weft_error err = {0};
    start("{'name':'w','tasks':[" T_("a", "") "," T_("b", "") "]}", NULL);
    decide();
    a = complete("a", "{'x':1}");
    F.o.n = 0;
    assert_int_equal(dec_complete(&ENV, F.x, a, WEFT_TASK_FAILED, NULL, "late", &F.o, &err),
                     WEFT_ESTATE);
    assert_int_equal(err.code, WEFT_ESTATE);
    assert_has(err.msg, "(a)");
    assert_has(err.msg, "COMPLETED");
    assert_int_equal(a->status, WEFT_TASK_COMPLETED);
    assert_null(a->reason);
    assert_int_equal(F.o.n, 0);

    /* failing from outside, with a reason */
    assert_int_equal(
        dec_complete(&ENV, F.x, task("b"), WEFT_TASK_FAILED, NULL, "worker lost", &F.o, &err), 0);
    assert_int_equal(task("b")->status, WEFT_TASK_FAILED);
    decide();
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "worker lost");
}

static void test_resolve(void **state)
{
    ex_tmpl *tm;
    json_object *v;
    weft_error err = {0};
    char want[256];
    start("{'name':'w','version':4,'tasks':[" T_("a", "") "]}", "{'x':[10,20]}");
    decide();
    complete("a", "{'n':{'deep':[1,2,3]}}");
    assert_int_equal(ex_compile(J("{'w':'${workflow.workflowType}','v':'${workflow.version}',"
                                  "'s':'${workflow.status}','x':'${workflow.input.x[1]}',"
                                  "'d':'${a.output.n.deep[2]}','st':'${a.status}',"
                                  "'id':'${a.taskId}','nope':'${zz.output}'}"),
                                &tm, &err),
                     0);
    v = dec_resolve(F.x, tm);
    ex_free(tm);
    snprintf(want, sizeof want,
             "{'w':'w','v':4,'s':'COMPLETED','x':20,'d':3,'st':'COMPLETED','id':'%s','nope':null}",
             task("a")->id);
    assert_json(v, want);
    json_object_put(v);
    assert_null(dec_resolve(F.x, NULL));
}

/* An input whose interpolation cannot be built (allocation failure) fails
 * its task with a reason; it never becomes null or {} and runs. */
static void test_input_alloc_failure(void **state)
{
    xc_task *a;
    start("{'name':'w','tasks':[" T_("a", ",'inputParameters':{'greeting':'hello, ${workflow.input.n"
                                          "ame}!','k':1}") "]}",
          "{'name':'weft'}");
    ex_test_fail_alloc(2); /* the input object is the 1st; the interpolated string the 2nd */
    decide();
    ex_test_fail_alloc(0);
    a = task("a");
    assert_int_equal(a->status, WEFT_TASK_FAILED);
    assert_has(a->reason, "input could not be built");
    assert_has(a->reason, "out of memory");
    assert_null(action(DEC_ENQUEUE, "a"));
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "task 'a'");
}

/* The same for the workflow's output: the workflow fails, never COMPLETED
 * with a null in its output. */
static void test_output_alloc_failure(void **state)
{
    start("{'name':'w','outputParameters':{'text':'t=${a.output.n}'},'tasks':[" T_("a", "") "]}",
          NULL);
    decide();
    ex_test_fail_alloc(2);
    complete("a", "{'n':1}");
    ex_test_fail_alloc(0);
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_has(F.x->reason, "output could not be built");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_chain, teardown),
        cmocka_unit_test_teardown(test_chain_output_parameters, teardown),
        cmocka_unit_test_teardown(test_output_not_an_object, teardown),
        cmocka_unit_test_teardown(test_input_alloc_failure, teardown),
        cmocka_unit_test_teardown(test_output_alloc_failure, teardown),
        cmocka_unit_test_teardown(test_status_callbacks, teardown),
        cmocka_unit_test_teardown(test_in_progress_results, teardown),
        cmocka_unit_test_teardown(test_execute_reports_no_status, teardown),
        cmocka_unit_test_teardown(test_retry_fixed, teardown),
        cmocka_unit_test_teardown(test_retry_backoff, teardown),
        cmocka_unit_test_teardown(test_retry_jitter_bound, teardown),
        cmocka_unit_test_teardown(test_retry_on_execute_error, teardown),
        cmocka_unit_test_teardown(test_terminal_error_not_retried, teardown),
        cmocka_unit_test_teardown(test_optional_failure, teardown),
        cmocka_unit_test_teardown(test_optional_after_retries, teardown),
        cmocka_unit_test_teardown(test_pick_container, teardown),
        cmocka_unit_test_teardown(test_pick_nothing, teardown),
        cmocka_unit_test_teardown(test_pick_last, teardown),
        cmocka_unit_test_teardown(test_map_fails, teardown),
        cmocka_unit_test_teardown(test_map_fails_retried, teardown),
        cmocka_unit_test_teardown(test_failed_map_spawns_nothing, teardown),
        cmocka_unit_test_teardown(test_timer_remap, teardown),
        cmocka_unit_test_teardown(test_terminate_map, teardown),
        cmocka_unit_test_teardown(test_loop, teardown),
        cmocka_unit_test_teardown(test_loop_body_failure, teardown),
        cmocka_unit_test_teardown(test_dynamic, teardown),
        cmocka_unit_test_teardown(test_dynamic_retry, teardown),
        cmocka_unit_test_teardown(test_dynamic_bad_type, teardown),
        cmocka_unit_test_teardown(test_dynamic_clash, teardown),
        cmocka_unit_test_teardown(test_task_timeout, teardown),
        cmocka_unit_test_teardown(test_task_timeout_cancels_running, teardown),
        cmocka_unit_test_teardown(test_task_timeout_policy, teardown),
        cmocka_unit_test_teardown(test_response_timeout, teardown),
        cmocka_unit_test_teardown(test_workflow_timeout, teardown),
        cmocka_unit_test_teardown(test_end_cancels_queued, teardown),
        cmocka_unit_test_teardown(test_end_cancels_running, teardown),
        cmocka_unit_test_teardown(test_late_apply_ignored, teardown),
        cmocka_unit_test_teardown(test_complete_terminal, teardown),
        cmocka_unit_test_teardown(test_resolve, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

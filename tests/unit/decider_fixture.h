/*
 * What the tests of decider.c (test_decider.c, test_decider_flow.c) share:
 * the test's clock and change log, task types defined here (T, PICK, LOOP,
 * DYN, BADMAP, NOSTAT, FAILMAP, TERM, POLL; no plugin is loaded), and a
 * fixture holding one execution and the last batch of actions, driven the
 * way the engine drives it: dec_decide, dec_start + dec_apply a result for a
 * queued task, decide again. Header-only (static functions); include it
 * after <cmocka.h>; the teardown frees what a test built.
 */
#ifndef WEFT_TEST_DECIDER_FIXTURE_H
#define WEFT_TEST_DECIDER_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "core/codec.h"
#include "core/decider.h"
#include "json_text.h"

/* a test may use only some of these */
#define DF_FN static __attribute__((unused))

static const weft_host *H;

/* ---- the clock and the change log ---- */

static int64_t clock_ms;

DF_FN int64_t test_now(void)
{
    return clock_ms;
}

static char change_log[8192];

DF_FN void on_change(void *ud, const xc_exec *x, const xc_task *t)
{
    size_t n = strlen(change_log);
    snprintf(change_log + n, sizeof change_log - n, "%s%s:%s", n ? " " : "",
             t ? t->ref : "workflow",
             t ? weft_task_status_name(t->status) : weft_wf_status_name(x->status));
}

/* ---- task types ---- */

DF_FN const char *str_in(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

/* Queued: run by the test through dec_apply, never called. */
DF_FN int t_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/*
 * The types below are plugins that mind their allocations, as a plugin
 * should (the allocation-failure sweeps fail them too): a value that could
 * not be made or added fails the call with WEFT_ENOMEM.
 */
DF_FN int oom(weft_result *r)
{
    snprintf(r->reason, sizeof r->reason, "out of memory");
    return WEFT_ENOMEM;
}

/* o[k] = v, taking v; v NULL (not made) or a failed add: WEFT_ENOMEM. */
DF_FN int add(json_object *o, const char *k, json_object *v)
{
    if (!o || !v || json_object_object_add(o, k, v)) {
        json_object_put(v);
        return WEFT_ENOMEM;
    }
    return 0;
}

/* a[] = v, taking v; the same. */
DF_FN int append(json_object *a, json_object *v)
{
    if (!v || json_object_array_add(a, v)) {
        json_object_put(v);
        return WEFT_ENOMEM;
    }
    return 0;
}

/* PICK: schedules the list cases[input.case]; output { selected }. */
DF_FN int pick_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    const char *name = str_in(t->input, "case");
    json_object *cases, *list;
    if (name && json_object_object_get_ex(def, "cases", &cases) &&
        json_object_object_get_ex(cases, name, &list) &&
        append(out, json_object_get(json_object_array_get_idx(list, 0))))
        return oom(r);
    r->output = json_object_new_object();
    if (add(r->output, "selected", json_object_new_string(name ? name : ""))) return oom(r);
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/*
 * LOOP: runs loopOver input.times times; output { iteration, last = the
 * output of the body's last task }.
 */
DF_FN int loop_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx), *last;
    json_object *body = json_object_object_get(def, "loopOver");
    int times = json_object_get_int(json_object_object_get(t->input, "times"));
    const char *last_ref = str_in(
        json_object_array_get_idx(body, json_object_array_length(body) - 1), "taskReferenceName");
    int n = t->status == WEFT_TASK_SCHEDULED ? 0 : t->iteration;

    if (!(r->output = json_object_new_object())) return oom(r);
    if (n > 0 && (last = H->lookup(ctx, last_ref)) && last->output &&
        add(r->output, "last", json_object_get(last->output)))
        return oom(r);
    if (n < times) {
        if (append(out, json_object_get(json_object_array_get_idx(body, 0)))) return oom(r);
        r->iteration = n + 1;
        r->status = WEFT_TASK_IN_PROGRESS;
        r->callback_after_ms = -1;
        if (add(r->output, "iteration", json_object_new_int(n + 1))) return oom(r);
    } else {
        r->status = WEFT_TASK_COMPLETED;
        if (add(r->output, "iteration", json_object_new_int(n))) return oom(r);
    }
    return 0;
}

/* DYN: schedules new copies of the WorkflowTasks in input.tasks. */
DF_FN int dyn_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *list = json_object_object_get(t->input, "tasks");
    size_t i, n = json_object_array_length(list);
    for (i = 0; i < n; i++) {
        json_object *copy = NULL;
        if (json_object_deep_copy(json_object_array_get_idx(list, i), &copy, NULL) ||
            append(out, copy))
            return oom(r);
    }
    r->output = json_object_new_object();
    if (add(r->output, "forked", json_object_new_int((int)n))) return oom(r);
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/* BADMAP: the map call fails. */
DF_FN int badmap_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    snprintf(r->reason, sizeof r->reason, "boom");
    return WEFT_EINVAL;
}

/* NOSTAT: reports no status. */
DF_FN int nostat_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    return 0;
}

/* FAILMAP: reports FAILED, yet appends its loopOver list. */
DF_FN int failmap_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    json_object *body = json_object_object_get(def, "loopOver");
    if (append(out, json_object_get(json_object_array_get_idx(body, 0)))) return oom(r);
    snprintf(r->reason, sizeof r->reason, "nope");
    r->status = WEFT_TASK_FAILED;
    return 0;
}

/* TERM: ends the workflow with input.status. */
DF_FN int term_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    const char *s = str_in(t->input, "status");
    r->status = WEFT_TASK_COMPLETED;
    r->output = json_object_new_object();
    r->end_workflow = s && !strcmp(s, "FAILED") ? WEFT_WF_FAILED : WEFT_WF_COMPLETED;
    r->end_output = json_object_new_object();
    if (!r->output || add(r->end_output, "by", json_object_new_string("term"))) return oom(r);
    snprintf(r->reason, sizeof r->reason, "stopped");
    return 0;
}

/* POLL: IN_PROGRESS, re-evaluated after 500 ms; completes on its second call. */
DF_FN int poll_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    if (t->poll_count < 2) {
        r->status = WEFT_TASK_IN_PROGRESS;
        r->callback_after_ms = 500;
        return 0;
    }
    r->output = json_object_new_object();
    if (add(r->output, "polls", json_object_new_int(t->poll_count))) return oom(r);
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

DF_FN const weft_task_type *find_type(void *ud, const char *name)
{
    size_t i;
    for (i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(types[i].name, name)) return &types[i];
    return NULL;
}

static def_env DEFS = {find_type, NULL, "/test/plugins", NULL, 0, NULL, NULL};
static const dec_env ENV = {.defs = &DEFS, .now = test_now, .on_change = on_change};

/* ---- the fixture: one execution, the last batch of actions ---- */

static struct {
    def_workflow *wf;
    xc_exec *x;
    dec_out o;
    json_object *js[64];
    size_t njs;
} F;

/* Free what a test built. */
DF_FN void free_fixture(void)
{
    size_t i;
    dec_out_free(&F.o);
    xc_free(F.x);
    def_unref(F.wf);
    for (i = 0; i < F.njs; i++)
        json_object_put(F.js[i]);
    memset(&F, 0, sizeof F);
    change_log[0] = 0;
}

DF_FN int teardown(void **state)
{
    af_stopped();
    free_fixture();
    return 0;
}

/* JSON from text written with ' for " (freed by the teardown). */
DF_FN json_object *J(const char *text)
{
    json_object *j = jt_parse(text);
    assert_true(F.njs < sizeof F.js / sizeof F.js[0]);
    F.js[F.njs++] = j;
    return j;
}

DF_FN void assert_has(const char *msg, const char *part)
{
    if (!msg) fail_msg("NULL does not contain \"%s\"", part);
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

DF_FN void assert_json(json_object *got, const char *want_text)
{
    json_object *want = J(want_text);
    if (!json_object_equal(got, want))
        fail_msg("got %s, want %s", got ? json_object_to_json_string(got) : "NULL",
                 json_object_to_json_string(want));
}

/* Compile def_text, start an execution with input_text (may be NULL), no decide yet. */
DF_FN void start(const char *def_text, const char *input_text)
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

DF_FN void decide(void)
{
    F.o.n = 0;
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
}

DF_FN xc_task *task(const char *ref)
{
    xc_task *t = xc_find_ref(F.x, ref);
    if (!t) fail_msg("no task '%s'", ref);
    return t;
}

/* The action of kind for ref (NULL: any task / the workflow) in the last batch. */
DF_FN const dec_action *action(dec_kind kind, const char *ref)
{
    size_t i;
    for (i = 0; i < F.o.n; i++) {
        const dec_action *a = &F.o.a[i];
        if (a->kind == kind && (!ref || (a->task && !strcmp(a->task->ref, ref)))) return a;
    }
    return NULL;
}

DF_FN size_t count(dec_kind kind)
{
    size_t i, n = 0;
    for (i = 0; i < F.o.n; i++)
        n += F.o.a[i].kind == kind;
    return n;
}

/* The refs of the DEC_ENQUEUE actions of the last batch, space-separated. */
DF_FN const char *enqueued(void)
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
DF_FN xc_task *run_rc(const char *ref, int rc, weft_task_status status, const char *output,
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

DF_FN xc_task *run(const char *ref, weft_task_status status, const char *output, const char *reason)
{
    return run_rc(ref, 0, status, output, reason);
}

DF_FN xc_task *complete(const char *ref, const char *output)
{
    return run(ref, WEFT_TASK_COMPLETED, output, NULL);
}

/* ---- allocation failures (alloc_fail.h) ----
 *
 * A step of the decider absorbs a failed allocation or ends in a clear
 * failure: its outcome is that of a run where nothing failed, or the
 * workflow is FAILED with a reason that says "out of memory", every task
 * ended and the workflow's end among the actions. Either way the execution
 * is whole: its bookkeeping adds up and it reads back from its document
 * the same. A step that returns WEFT_ENOMEM left the execution as it was.
 */

/* One step swept: the state before it (built unarmed), the step (armed). */
typedef struct df_step {
    const char *name;
    const char *def, *input;
    void (*before)(void); /* after start(); NULL: nothing more */
    int (*step)(void);    /* on F.x, its actions into F.o; its code */
} df_step;

static struct {
    const df_step *s;
    char *before;        /* df_state() before the step */
    char *want;          /* and after it, when nothing failed */
    json_object *output; /* a result's output, made before the step for df_report */
} DS;

/* A worker's result for the latest instance of ref (its output DS.output,
 * taken): dec_start, dec_apply, dec_decide, as run() does, with nothing
 * allocated by the test. */
DF_FN int df_report(const char *ref, weft_task_status status, const char *reason)
{
    xc_task *t = xc_find_ref(F.x, ref);
    weft_result r;
    dec_start(&ENV, F.x, t);
    host_result_init(&r);
    r.status = status;
    r.output = DS.output;
    DS.output = NULL;
    if (reason) snprintf(r.reason, sizeof r.reason, "%s", reason);
    dec_apply(&ENV, F.x, t, 0, &r, &F.o);
    host_result_clear(&r);
    return dec_decide(&ENV, F.x, &F.o);
}

DF_FN const char *df_kind(dec_kind k)
{
    static const char *const names[] = {"ENQUEUE",       "TIMER",           "CANCEL",
                                        "UNQUEUE",       "TERMINATE_CHILD", "NOTIFY_PARENT",
                                        "START_FAILURE", "WF_ENDED"};
    return names[k];
}

/* F.x's document without what differs from run to run (task ids, the
 * times taken from the wall clock), then F.o's actions, as text (caller
 * frees; NULL when there is no execution). */
DF_FN char *df_state(void)
{
    wu_buf b = {0};
    json_object *doc = NULL, *tasks, *v;
    weft_error err = {0};
    char line[256];
    size_t i;
    if (!F.x) return NULL;
    assert_int_equal(cd_doc_text(F.x, &b), 0);
    assert_int_equal(wu_parse_json("doc", b.data, &doc, &err), 0);
    b.len = 0;
    json_object_object_del(doc, "createTime");
    /* an ended workflow without output reads as {} everywhere (xc_to_json,
     * a parent's result): dec_end's {} is not made when memory is short */
    if (json_object_object_get_ex(doc, "output", &v) && json_object_is_type(v, json_type_object) &&
        !json_object_object_length(v))
        json_object_object_del(doc, "output");
    if (json_object_object_get_ex(doc, "failedTaskId", &v)) {
        xc_task *t = xc_find_id(F.x, json_object_get_string(v));
        assert_non_null(t);
        json_object_object_add(doc, "failedTaskId", json_object_new_string(t->ref));
    }
    tasks = json_object_object_get(doc, "tasks");
    for (i = 0; i < json_object_array_length(tasks); i++) {
        json_object *t = json_object_array_get_idx(tasks, i);
        json_object_object_del(t, "id");
        json_object_object_del(t, "scheduledTime");
        json_object_object_del(t, "updateTime");
    }
    v = json_object_new_string(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
    json_object_put(doc);
    assert_int_equal(wu_buf_add(&b, json_object_get_string(v), strlen(json_object_get_string(v))),
                     0);
    json_object_put(v);
    for (i = 0; i < F.o.n; i++) {
        const dec_action *a = &F.o.a[i];
        snprintf(line, sizeof line, "\n%s %s %lld", df_kind(a->kind), a->task ? a->task->ref : "-",
                 (long long)a->at);
        assert_int_equal(wu_buf_add(&b, line, strlen(line)), 0);
    }
    return b.data;
}

/* F.x's bookkeeping adds up, it reads back from its document the same,
 * and every action names one of its tasks. */
DF_FN void df_whole(void)
{
    wu_buf b = {0}, b2 = {0};
    json_object *doc = NULL;
    xc_exec *y = NULL;
    weft_error err = {0};
    int active = 0, fresh = 0, no_input = 0;
    size_t i, k;
    for (i = 0; i < F.x->tasks.len; i++) {
        xc_task *t = F.x->tasks.items[i];
        active += !xc_task_terminal(t->status);
        fresh += t->fresh;
        assert_int_equal(t->seq, (int)i + 1);
        /* a task that will run has its input (one that could not be
         * made ended the task) */
        assert_true(t->input || xc_task_terminal(t->status));
        no_input |= !t->input;
        /* the latest instance of a ref and of a node is found by it */
        for (k = i + 1; k < F.x->tasks.len; k++)
            if (!strcmp(((xc_task *)F.x->tasks.items[k])->ref, t->ref)) break;
        if (k == F.x->tasks.len) assert_ptr_equal(xc_find_ref(F.x, t->ref), t);
        for (k = i + 1; k < F.x->tasks.len; k++)
            if (((xc_task *)F.x->tasks.items[k])->def == t->def) break;
        if (k == F.x->tasks.len) assert_ptr_equal(xc_latest(F.x, t->def), t);
    }
    assert_int_equal(F.x->active, active);
    assert_int_equal(F.x->fresh, fresh);
    for (i = 0; i < F.o.n; i++) {
        if (!F.o.a[i].task) continue;
        for (k = 0; k < F.x->tasks.len && F.x->tasks.items[k] != F.o.a[i].task; k++)
            ;
        assert_true(k < F.x->tasks.len);
    }
    assert_int_equal(cd_doc_text(F.x, &b), 0);
    assert_int_equal(wu_parse_json("doc", b.data, &doc, &err), 0);
    if (cd_from_doc(doc, F.wf, &DEFS, &y, &err)) fail_msg("read back: %s", err.msg);
    assert_int_equal(cd_doc_text(y, &b2), 0);
    if (!no_input) assert_string_equal(b2.data, b.data); /* (no input reads back as {}) */
    xc_free(y);
    json_object_put(doc);
    wu_buf_free(&b);
    wu_buf_free(&b2);
}

static void df_setup(void *ud)
{
    start(DS.s->def, DS.s->input);
    /* the same times in every run */
    F.x->created_ms = F.x->updated_ms = clock_ms = 1700000000000;
    if (DS.s->before) DS.s->before();
    F.o.n = 0;
    change_log[0] = 0;
    DS.before = df_state();
}

static int df_call(void *ud)
{
    return DS.s->step();
}

/* Whether the step's outcome, not that of a run where nothing failed, is
 * a clear failure for want of memory: the workflow ended so (failed, or
 * ended as it would have with only "out of memory" for a reason), or a
 * task failed so (it is then retried, or the workflow fails, like any
 * failed task). */
static int df_failed_for_memory(void)
{
    size_t i;
    if (xc_wf_terminal(F.x->status)) {
        /* (with every allocation failing, not even the reason or the
         * actions can be kept: the save that follows fails too) */
        if (!(F.x->reason ? strstr(F.x->reason, "out of memory") != NULL : af_sticky())) return 0;
        for (i = 0; i < F.x->tasks.len; i++)
            assert_true(xc_task_terminal(((xc_task *)F.x->tasks.items[i])->status));
        assert_true(af_sticky() || (F.o.n > 0 && F.o.a[F.o.n - 1].kind == DEC_WF_ENDED));
        return 1;
    }
    for (i = 0; i < F.x->tasks.len; i++) {
        const xc_task *t = F.x->tasks.items[i];
        if (t->status == WEFT_TASK_FAILED && t->reason && strstr(t->reason, "out of memory"))
            return 1;
    }
    return 0;
}

static int df_check(void *ud, int rc, int failed)
{
    char *got = df_state();
    int same;
    if (rc == WEFT_ENOMEM) {
        /* nothing half-applied (the actions are dropped with the step) */
        F.o.n = 0;
        free(got);
        got = df_state();
        if (DS.before || got) assert_string_equal(got, DS.before);
        free(got);
        return 0;
    }
    df_whole();
    same = !strcmp(got, DS.want);
    if (!same && !df_failed_for_memory())
        fail_msg("%s: neither the outcome of a run where nothing failed:\n%s\nnor a failure "
                 "for want of memory:\n%s",
                 DS.s->name, DS.want, got);
    free(got);
    return same;
}

static void df_teardown(void *ud)
{
    free(DS.before);
    DS.before = NULL;
    json_object_put(DS.output);
    DS.output = NULL;
    free_fixture();
}

static void df_baseline(void *ud, int rc)
{
    assert_int_equal(rc, 0);
    DS.want = df_state();
}

/* Sweep step s (alloc_fail.h): every allocation it makes fails in turn. */
DF_FN void df_sweep(const df_step *s)
{
    af_case c = {s->name, df_setup, df_call, df_check, df_teardown, df_baseline};
    DS.s = s;
    af_run(&c, NULL);
    free(DS.want);
    memset(&DS, 0, sizeof DS);
}

#define T_(ref, extra) "{'taskReferenceName':'" ref "','type':'T'" extra "}"

#endif

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

/* PICK: schedules the list cases[input.case]; output { selected }. */
DF_FN int pick_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
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
DF_FN int loop_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
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
DF_FN int dyn_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
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
    json_object_array_add(out, json_object_get(json_object_array_get_idx(body, 0)));
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
    json_object_object_add(r->end_output, "by", json_object_new_string("term"));
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

DF_FN int teardown(void **state)
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

#define T_(ref, extra) "{'taskReferenceName':'" ref "','type':'T'" extra "}"

#endif

/*
 * Tests of codec.c: an execution written as its stored document, sent
 * through JSON text and read back is the same execution (same document,
 * same Conductor JSON, same bookkeeping), and it goes on deciding as the
 * original would. Corrupt documents are refused with WEFT_EINVAL naming the
 * workflow and what is wrong; each is first tried in a child process so a
 * crash fails its case instead of the whole program. No Redis, no plugin:
 * the task types are defined here, and the clock is the test's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_fail.h"
#include "core/codec.h"
#include "core/decider.h"

static const weft_host *H;

static int64_t clock_ms;

static int64_t test_now(void)
{
    return clock_ms;
}

/* ---- task types ---- */

static const char *str_in(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

/* Queued: the test reports its results through dec_apply. */
static int t_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/* LOOP: runs loopOver input.times times, each iteration in a new scope
 * (result.iteration); output { iteration, last = the body's last output }. */
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

/* DYN: schedules new WorkflowTask objects, copies of those in input.tasks. */
static int dyn_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *list = json_object_object_get(t->input, "tasks");
    size_t i, n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    for (i = 0; i < n; i++) {
        json_object *copy = NULL;
        if (json_object_deep_copy(json_object_array_get_idx(list, i), &copy, NULL)) {
            snprintf(r->reason, sizeof r->reason, "copy failed");
            return WEFT_ENOMEM;
        }
        json_object_array_add(out, copy);
    }
    r->output = json_object_new_object();
    json_object_object_add(r->output, "forked", json_object_new_int((int)n));
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type types[] = {
    {.name = "T", .execute = t_execute},
    {.name = "LOOP", .map = loop_map},
    {.name = "DYN", .map = dyn_map},
};

static const weft_task_type *find_type(void *ud, const char *name)
{
    size_t i;
    for (i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(types[i].name, name)) return &types[i];
    return NULL;
}

static def_env DEFS = {find_type, NULL, "/test/plugins", NULL, 0, NULL, NULL};
static const dec_env ENV = {.defs = &DEFS, .now = test_now};

/* ---- the fixture: one execution, the last batch of actions ---- */

static struct {
    def_workflow *wf;
    xc_exec *x, *old;
    dec_out o;
    json_object *js[128];
    size_t njs;
} F;

static int teardown(void **state)
{
    size_t i;
    af_stopped();
    dec_out_free(&F.o);
    xc_free(F.x);
    xc_free(F.old);
    def_unref(F.wf);
    for (i = 0; i < F.njs; i++)
        json_object_put(F.js[i]);
    memset(&F, 0, sizeof F);
    return 0;
}

/* Freed by the teardown, also when an assertion fails first. */
static json_object *keep(json_object *j)
{
    assert_true(F.njs < sizeof F.js / sizeof F.js[0]);
    F.js[F.njs++] = j;
    return j;
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
    if (!j && strcmp(s, "null")) fail_msg("test JSON does not parse: %s", s);
    free(s);
    return keep(j);
}

static void assert_has(const char *msg, const char *part)
{
    if (!msg) fail_msg("NULL does not contain \"%s\"", part);
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

static void assert_json_equal(json_object *got, json_object *want, const char *what)
{
    if (!json_object_equal(got, want))
        fail_msg("%s differ:\n got  %s\n want %s", what,
                 got ? json_object_to_json_string_ext(got, JSON_C_TO_STRING_PLAIN) : "NULL",
                 want ? json_object_to_json_string_ext(want, JSON_C_TO_STRING_PLAIN) : "NULL");
}

static void assert_json(json_object *got, const char *want_text)
{
    assert_json_equal(got, J(want_text), "JSON values");
}

static void start(const char *def_text, const char *input_text)
{
    weft_error err = {0};
    H = host_table();
    DEFS.host = H;
    if (def_compile(&DEFS, J(def_text), "test.json", NULL, &F.wf, &err))
        fail_msg("compile: %s", err.msg);
    assert_int_equal(xc_new(F.wf, input_text ? J(input_text) : NULL, "wf-1", &F.x, &err), 0);
    clock_ms = F.x->created_ms;
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

/* A worker picks up the latest instance of ref and reports; no decide yet. */
static xc_task *report(const char *ref, weft_task_status status, const char *output,
                       const char *reason)
{
    xc_task *t = task(ref);
    weft_result r;
    assert_true(t->queued);
    F.o.n = 0;
    clock_ms += 5;
    dec_start(&ENV, F.x, t);
    clock_ms += 5;
    host_result_init(&r);
    r.status = status;
    if (output) r.output = json_object_get(J(output));
    if (reason) snprintf(r.reason, sizeof r.reason, "%s", reason);
    dec_apply(&ENV, F.x, t, 0, &r, &F.o);
    host_result_clear(&r);
    return t;
}

static xc_task *run(const char *ref, weft_task_status status, const char *output,
                    const char *reason)
{
    xc_task *t = report(ref, status, output, reason);
    assert_int_equal(dec_decide(&ENV, F.x, &F.o), 0);
    return t;
}

static xc_task *complete(const char *ref, const char *output)
{
    return run(ref, WEFT_TASK_COMPLETED, output, NULL);
}

/* ---- the round trip ---- */

static size_t index_of(const xc_exec *x, const xc_task *t)
{
    size_t i;
    for (i = 0; i < x->tasks.len; i++)
        if (x->tasks.items[i] == t) return i;
    fail_msg("task %s is not in its execution", t->ref);
    return 0;
}

/* y is x read back: every part the document does not spell out matches too. */
static void assert_same_exec(const xc_exec *x, const xc_exec *y)
{
    size_t i, j;
    assert_string_equal(y->id, x->id);
    assert_ptr_equal(y->def, x->def);
    assert_int_equal(y->status, x->status);
    assert_int_equal(y->tasks.len, x->tasks.len);
    assert_int_equal(y->scopes.len, x->scopes.len);
    assert_int_equal(y->active, x->active);
    assert_int_equal(y->fresh, x->fresh);
    assert_int_equal(y->timed, x->timed);
    assert_int_equal(y->root_done, x->root_done);
    assert_int_equal(y->ended.len - y->ended_head, x->ended.len - x->ended_head);
    for (i = 0; i < x->ended.len - x->ended_head; i++)
        assert_int_equal(index_of(y, y->ended.items[y->ended_head + i]),
                         index_of(x, x->ended.items[x->ended_head + i]));
    for (i = 0; i < x->scopes.len; i++) {
        const xc_scope *a = x->scopes.items[i], *b = y->scopes.items[i];
        assert_int_equal(b->parent, a->parent);
        assert_int_equal(b->iteration, a->iteration);
        assert_string_equal(b->suffix, a->suffix);
    }
    for (i = 0; i < x->tasks.len; i++) {
        const xc_task *a = x->tasks.items[i], *b = y->tasks.items[i];
        assert_string_equal(b->id, a->id);
        assert_string_equal(b->ref, a->ref);
        assert_int_equal(b->seq, a->seq);
        assert_int_equal(b->scope, a->scope);
        assert_int_equal(b->followed, a->followed);
        assert_int_equal(b->spawned, a->spawned);
        assert_int_equal(b->retried, a->retried);
        assert_int_equal(b->queued, a->queued);
        assert_int_equal(b->fresh, a->fresh);
        assert_int_equal(b->callback_ms, a->callback_ms);
        assert_string_equal(b->def->ref, a->def->ref);
        assert_string_equal(b->def->type_name, a->def->type_name);
        assert_ptr_equal(b->def->type, a->def->type);
        if (a->dyn_json) {
            assert_non_null(b->dyn_json);
            assert_json_equal(b->dyn_json, a->dyn_json, "dynamic nodes");
            assert_ptr_equal(def_of_json(b->dyn_json), b->def);
            assert_string_equal(b->def->list->owner->ref, a->def->list->owner->ref);
        } else {
            assert_null(b->dyn_json);
            if (wu_map_get(x->def->by_ref, a->def->ref) == a->def) assert_ptr_equal(b->def, a->def);
        }
        /* lookups by instance ref and by def ref find the same instances */
        assert_string_equal(xc_find_ref(y, a->ref)->id, xc_find_ref(x, a->ref)->id);
        assert_string_equal(xc_find_ref(y, a->def->ref)->id, xc_find_ref(x, a->def->ref)->id);
        /* instances that share a node (retries, iterations) still share one */
        for (j = i + 1; j < x->tasks.len; j++) {
            const xc_task *c = x->tasks.items[j], *d = y->tasks.items[j];
            assert_int_equal(d->def == b->def, c->def == a->def);
        }
    }
}

/* x's document (cd_doc_text), parsed (caller puts). */
static json_object *doc_of(const xc_exec *x)
{
    wu_buf b = {0};
    json_object *doc = NULL;
    weft_error err = {0};
    assert_int_equal(cd_doc_text(x, &b), 0);
    if (wu_parse_json("doc", b.data, &doc, &err))
        fail_msg("the document does not parse: %s", err.msg);
    /* written as json-c writes it: json-c gives back the same bytes */
    assert_string_equal(b.data, json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
    wu_buf_free(&b);
    return doc;
}

/* The event of t (NULL: the workflow) now, parsed (caller puts). */
static json_object *event_of(const xc_exec *x, const xc_task *t)
{
    wu_buf b = {0};
    json_object *ev = NULL;
    weft_error err = {0};
    assert_int_equal(cd_event_text(x, t, &b), 0);
    if (wu_parse_json("event", b.data, &ev, &err))
        fail_msg("the event does not parse: %s", err.msg);
    wu_buf_free(&b);
    return ev;
}

/*
 * Write F.x as a document, as JSON text, parse it and read it back. The
 * copy must be equal in every way; it replaces F.x, so the test goes on
 * deciding with what was read back.
 */
static xc_exec *reload(void)
{
    weft_error err = {0};
    size_t mark = F.njs;
    json_object *doc = keep(doc_of(F.x)), *parsed = NULL;
    xc_exec *y = NULL;
    assert_non_null(doc);
    if (wu_parse_json("doc", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN), &parsed,
                      &err))
        fail_msg("the document does not parse back: %s", err.msg);
    keep(parsed);
    if (cd_from_doc(parsed, F.wf, &DEFS, &y, &err))
        fail_msg("cd_from_doc: %s\ndocument: %s", err.msg,
                 json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
    assert_non_null(y);
    /* the old one goes, the copy takes its place (the last batch of actions
     * points at the old tasks: forget it) */
    F.o.n = 0;
    F.old = F.x;
    F.x = y;

    assert_json_equal(keep(doc_of(y)), doc, "documents");
    assert_json_equal(keep(xc_to_json(y)), keep(xc_to_json(F.old)), "workflow JSON");
    assert_same_exec(F.old, y);
    xc_free(F.old);
    F.old = NULL;
    while (F.njs > mark)
        json_object_put(F.js[--F.njs]);
    return y;
}

#define T_(ref, extra) "{'taskReferenceName':'" ref "','type':'T'" extra "}"

/* ---- round trips ---- */

static void test_fresh(void **state)
{
    xc_exec *y;
    start("{'name':'w','version':3,'variables':{'v0':'init'},'tasks':[" T_("a", "") "]}",
          "{'k':[1,{'deep':true}],'s':'text'}");
    F.x->correlation_id = strdup("corr-1");
    F.x->parent_id = strdup("parent-wf");
    F.x->parent_task_id = strdup("parent-task");
    y = reload();
    assert_int_equal(y->status, WEFT_WF_RUNNING);
    assert_int_equal(y->tasks.len, 0);
    assert_json(y->input, "{'k':[1,{'deep':true}],'s':'text'}");
    assert_json(y->variables, "{'v0':'init'}");
    assert_null(y->output);
    assert_string_equal(y->correlation_id, "corr-1");
    assert_string_equal(y->parent_id, "parent-wf");
    assert_string_equal(y->parent_task_id, "parent-task");
    assert_int_equal(y->created_ms, clock_ms);
    /* and it starts like a new one */
    decide();
    assert_string_equal(enqueued(), "a");
}

/* Variables changed after the start win over the definition's initial ones. */
static void test_variables_kept(void **state)
{
    xc_exec *y;
    start("{'name':'w','variables':{'v0':'init'},'tasks':[" T_("a", "") "]}", NULL);
    json_object_object_add(F.x->variables, "v0", json_object_new_string("changed"));
    json_object_object_add(F.x->variables, "n", json_object_new_int(7));
    y = reload();
    assert_json(y->variables, "{'v0':'changed','n':7}");
    json_object_object_del(F.x->variables, "v0");
    y = reload();
    assert_json(y->variables, "{'n':7}");
}

/*
 * Client data shaped like a payload reference ({"$payload": path}) is data:
 * it reads back as it was, never as a reference. The runtime's own
 * references travel in fields of their own, inputRef/outputRef.
 */
static void test_payload_refs(void **state)
{
    static const char *const ref = "wf-1.0123456789abcdef0123456789abcdef0123456789abcdef"
                                   "0123456789abcdef.json";
    weft_error err = {0};
    json_object *doc, *v;
    xc_exec *y = NULL;
    xc_task *a;
    start("{'name':'w','tasks':[" T_("a", ",'inputParameters':{'$payload':'/etc/shadow'}") "]}",
          "{'$payload':'/etc/passwd'}");
    decide();
    complete("a", "{'$payload':'../../etc/hostname'}");
    y = reload();
    assert_null(y->input_ref);
    assert_json(y->input, "{'$payload':'/etc/passwd'}");
    a = task("a");
    assert_null(a->input_ref);
    assert_null(a->output_ref);
    assert_json(a->input, "{'$payload':'/etc/shadow'}");
    assert_json(a->output, "{'$payload':'../../etc/hostname'}");
    assert_json(y->output, "{'$payload':'../../etc/hostname'}");
    assert_null(y->output_ref);

    /* a value kept outside: its reference, not the value, in "<k>Ref" */
    F.x->input_ref = strdup(ref);
    a->output_ref = strdup(ref);
    doc = keep(doc_of(F.x));
    assert_false(json_object_object_get_ex(doc, "input", NULL));
    assert_true(json_object_object_get_ex(doc, "inputRef", &v));
    assert_string_equal(json_object_get_string(v), ref);
    v = json_object_array_get_idx(json_object_object_get(doc, "tasks"), 0);
    assert_false(json_object_object_get_ex(v, "output", NULL));
    assert_string_equal(json_object_get_string(json_object_object_get(v, "outputRef")), ref);
    assert_int_equal(cd_from_doc(doc, F.wf, &DEFS, &y, &err), 0);
    assert_null(y->input);
    assert_string_equal(y->input_ref, ref);
    a = xc_find_ref(y, "a");
    assert_null(a->output);
    assert_string_equal(a->output_ref, ref);
    assert_json(a->input, "{'$payload':'/etc/shadow'}");
    xc_free(y);
}

#define CHAIN_A T_("a", ",'inputParameters':{'x':'${workflow.input.x}'}")
#define CHAIN_B                                                                                    \
    T_("b", ",'taskDefinition':{'retryCount':1,'retryDelaySeconds':2},"                            \
            "'inputParameters':{'v':'${a.output.n}'}")

static void test_chain(void **state)
{
    xc_task *a, *b;
    xc_exec *y;
    start("{'name':'w','tasks':[" CHAIN_A "," CHAIN_B "," T_("c", "") "]}", "{'x':5}");
    decide();
    reload();
    assert_string_equal(task("a")->ref, "a");
    complete("a", "{'n':6}");
    assert_string_equal(enqueued(), "b");
    y = reload();
    a = task("a");
    assert_int_equal(a->status, WEFT_TASK_COMPLETED);
    assert_json(a->input, "{'x':5}");
    assert_json(a->output, "{'n':6}");
    assert_int_equal(a->poll_count, 1);
    assert_true(a->started_ms > 0 && a->ended_ms >= a->started_ms);
    assert_json(task("b")->input, "{'v':6}");
    assert_true(task("b")->queued);

    /* b fails once: reason, retried flag, the retry's retry count and due time */
    run("b", WEFT_TASK_FAILED, NULL, "flaky backend");
    assert_string_equal(enqueued(), "b");
    y = reload();
    assert_int_equal(y->tasks.len, 3);
    b = y->tasks.items[1];
    assert_int_equal(b->status, WEFT_TASK_FAILED);
    assert_string_equal(b->reason, "flaky backend");
    assert_true(b->retried);
    assert_int_equal(task("b")->retry_count, 1);
    assert_int_equal(task("b")->callback_ms, clock_ms + 2000);
    assert_ptr_not_equal(task("b"), b);

    clock_ms += 2000;
    complete("b", "{'m':1}");
    assert_string_equal(enqueued(), "c");
    reload();
    complete("c", "{'done':true}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    y = reload();
    assert_int_equal(y->status, WEFT_WF_COMPLETED);
    assert_json(y->output, "{'done':true}");
    assert_int_equal(y->ended_ms, clock_ms);
    assert_int_equal(y->active, 0);
    assert_true(y->root_done);
    /* nothing left to do for the copy either */
    decide();
    assert_int_equal(F.o.n, 0);
}

/* Failing: the workflow's reason and failed task survive. */
static void test_failed(void **state)
{
    xc_exec *y;
    start("{'name':'w','tasks':[" T_("a", "") "]}", NULL);
    decide();
    run("a", WEFT_TASK_FAILED_WITH_TERMINAL_ERROR, "{'partial':1}", "bad card");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    y = reload();
    assert_int_equal(y->status, WEFT_WF_FAILED);
    assert_has(y->reason, "bad card");
    assert_string_equal(y->failed_task_id, task("a")->id);
    assert_int_equal(task("a")->status, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_json(task("a")->output, "{'partial':1}");
}

/* Nested loops: refs body__1__1 ... body__2__2, the scopes that make them. */
#define NESTED_BODY T_("body", ",'inputParameters':{'it':'${inner.output.iteration}'}")
#define NESTED_AFTER T_("after", ",'inputParameters':{'o':'${outer.output}'}")
static const char *NESTED_DEF =
    "{'name':'w','tasks':[{'taskReferenceName':'outer','type':'LOOP',"
    "'inputParameters':{'times':2},'loopOver':[{'taskReferenceName':'inner','type':'LOOP',"
    "'inputParameters':{'times':2},'loopOver':[" NESTED_BODY "]}]}," NESTED_AFTER "]}";

static void test_nested_loops(void **state)
{
    xc_exec *y;
    const xc_scope *s;
    const char *order[] = {"body__1__1", "body__1__2", "body__2__1", "body__2__2"};
    size_t i;
    start(NESTED_DEF, NULL);
    decide();
    assert_string_equal(enqueued(), "body__1__1");
    for (i = 0; i < 4; i++) {
        /* read back before every step: the loops continue from the copy */
        y = reload();
        assert_string_equal(task(order[i])->ref, order[i]);
        if (i == 2) {
            s = y->scopes.items[task("body__2__1")->scope];
            assert_string_equal(s->suffix, "__2__1");
            assert_int_equal(s->iteration, 1);
            assert_string_equal(((xc_scope *)y->scopes.items[s->parent])->suffix, "__2");
            assert_int_equal(task("inner__2")->iteration, 1);
            assert_int_equal(task("outer")->iteration, 2);
            assert_int_equal(task("body__2__1")->iteration, 1);
            assert_int_equal(task("inner__1")->status, WEFT_TASK_COMPLETED);
            assert_json(task("inner__1")->output, "{'iteration':2,'last':{'n':1}}");
            assert_json(task("body__2__1")->input, "{'it':1}");
            /* by def ref, the newest instance */
            assert_ptr_equal(task("body"), task("body__2__1"));
        }
        complete(order[i], "{'n':1}");
        if (i < 3) assert_string_equal(enqueued(), order[i + 1]);
    }
    assert_string_equal(enqueued(), "after");
    y = reload();
    assert_int_equal(y->scopes.len, 7); /* top, __1, __1__1, __1__2, __2, __2__1, __2__2 */
    assert_json(task("after")->input,
                "{'o':{'iteration':2,'last':{'iteration':2,'last':{'n':1}}}}");
    complete("after", "{}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    reload();
}

/* Dynamic tasks, one of them failed and retried: the same node twice. */
static const char *DYN_DEF =
    "{'name':'w','tasks':[{'taskReferenceName':'dyn','type':'DYN',"
    "'inputParameters':{'tasks':'${workflow.input.dyn}'}}," T_("after", "") "]}";

static void test_dynamic(void **state)
{
    xc_exec *y;
    xc_task *first, *second;
    start(DYN_DEF, "{'k':'K','dyn':[{'taskReferenceName':'d1','type':'T','inputParameters':"
                   "{'v':'${workflow.input.k}'},'taskDefinition':{'retryCount':1,"
                   "'retryDelaySeconds':0}},{'taskReferenceName':'d2','type':'T'}]}");
    decide();
    assert_string_equal(enqueued(), "d1 d2");
    y = reload();
    assert_non_null(task("d1")->dyn_json);
    assert_null(wu_map_get(y->def->by_ref, "d1")); /* the definition is left alone */
    assert_json(task("d1")->input, "{'v':'K'}");

    run("d1", WEFT_TASK_FAILED, NULL, "first try");
    assert_string_equal(enqueued(), "d1");
    y = reload();
    assert_int_equal(y->tasks.len, 4);
    first = y->tasks.items[1];
    second = task("d1");
    assert_ptr_not_equal(first, second);
    assert_string_equal(first->ref, "d1");
    assert_true(first->retried);
    assert_string_equal(first->reason, "first try");
    assert_ptr_equal(second->def, first->def); /* one node, compiled once */
    assert_int_equal(second->retry_count, 1);
    assert_int_equal(y->dyn.tasks.len, 2); /* d1, d2 */
    assert_string_equal(second->def->list->owner->ref, "dyn");

    /* the copy goes on: the retry completes, then the flow after the container */
    complete("d1", "{'r':1}");
    assert_string_equal(enqueued(), "after"); /* DYN is no join: the flow goes on */
    reload();
    complete("d2", "{'r':2}");
    assert_string_equal(enqueued(), "");
    reload();
    complete("after", "{}");
    assert_int_equal(F.x->status, WEFT_WF_COMPLETED);
    reload();
}

/*
 * A dynamic container: a LOOP created at run time, whose body tasks are
 * nodes of the dynamic node rather than of the definition.
 */
static void test_dynamic_container(void **state)
{
    xc_exec *y;
    start(DYN_DEF, "{'dyn':[{'taskReferenceName':'dl','type':'LOOP','inputParameters':"
                   "{'times':2},'loopOver':[" T_("dbody", "") "]}]}");
    decide();
    assert_string_equal(enqueued(), "dbody__1");
    y = reload();
    assert_non_null(task("dl")->dyn_json);
    assert_null(task("dbody__1")->dyn_json);
    complete("dbody__1", "{'n':1}");
    assert_string_equal(enqueued(), "dbody__2");
    reload();
    complete("dbody__2", "{'n':2}");
    assert_string_equal(enqueued(), "after");
    y = reload();
    assert_json(task("dl")->output, "{'iteration':2,'last':{'n':2}}");
    assert_int_equal(y->tasks.len, 5);
}

/* A result applied but not decided yet: the ended queue is kept. */
static void test_ended_queue(void **state)
{
    xc_exec *y;
    start("{'name':'w','tasks':[" T_("a", "") "," T_("b", "") "]}", NULL);
    decide();
    report("a", WEFT_TASK_COMPLETED, "{'n':1}", NULL);
    assert_int_equal(F.x->ended.len - F.x->ended_head, 1);
    y = reload();
    assert_int_equal(y->ended.len - y->ended_head, 1);
    assert_ptr_equal(y->ended.items[y->ended_head], task("a"));
    decide();
    assert_string_equal(enqueued(), "b");
    assert_int_equal(y->ended.len - y->ended_head, 0);

    report("b", WEFT_TASK_COMPLETED, "{}", NULL);
    y = reload();
    decide();
    assert_int_equal(y->status, WEFT_WF_COMPLETED);
}

/* dec_retry creates fresh tasks, dispatched by the next decide. */
static void test_fresh_after_retry(void **state)
{
    xc_exec *y;
    struct dec_out o = {0};
    weft_error err = {0};
    start("{'name':'w','tasks':[" T_("a", "") "," T_("b", "") "]}", NULL);
    decide();
    complete("a", "{}");
    run("b", WEFT_TASK_FAILED, NULL, "boom");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_int_equal(dec_retry(&ENV, F.x, &o, &err), 0);
    dec_out_free(&o);
    assert_int_equal(F.x->fresh, 1);
    y = reload();
    assert_int_equal(y->status, WEFT_WF_RUNNING);
    assert_int_equal(y->fresh, 1);
    assert_true(task("b")->fresh);
    assert_int_equal(task("b")->retry_count, 1);
    assert_null(y->reason);
    decide();
    assert_string_equal(enqueued(), "b");
    assert_int_equal(y->fresh, 0);
    complete("b", "{'ok':1}");
    assert_int_equal(y->status, WEFT_WF_COMPLETED);
}

/* Every workflow status, task status and flag, times, child ids and reasons. */
/* Every kind of JSON value in a document: written as json-c writes it
 * (doc_of checks the bytes), and read back the same. */
static void test_json_values(void **state)
{
    start("{'name':'w','tasks':[" T_("a", "") "]}", NULL);
    F.x->output = json_object_new_array();
    json_object_array_add(F.x->output, json_object_new_double(1.5));
    json_object_array_add(F.x->output, NULL);
    json_object_array_add(F.x->output, json_object_new_boolean(1));
    json_object_array_add(F.x->output, json_object_new_boolean(0));
    json_object_array_add(F.x->output, json_object_new_int64(INT64_MAX));
    json_object_array_add(F.x->output, json_object_new_int64(INT64_MIN));
    json_object_array_add(F.x->output, json_object_new_int64(-42));
    json_object_array_add(F.x->output, json_object_new_double(-0.1));
    json_object_array_add(F.x->output, json_object_new_object());
    json_object_array_add(F.x->output, json_object_new_array());
    json_object_array_add(F.x->output, json_object_new_string_len("x\0y", 3));
    json_object_array_add(F.x->output,
                          json_tokener_parse("{\"k/\\\\\":[1e3,0.30000000000000004,{\"\":null}],"
                                             "\"\\u00e9\\t\":\"\\u0001x\"}"));
    json_object_put(doc_of(F.x));
    reload();
    assert_int_equal(json_object_array_length(F.x->output), 12);
    assert_int_equal(json_object_get_string_len(json_object_array_get_idx(F.x->output, 10)), 3);
}

static void test_fields(void **state)
{
    static const int64_t big = 1700000000123LL;
    xc_exec *y;
    xc_task *t;
    int s, f;
    start("{'name':'w','tasks':[" T_("a", "") "]}", NULL);
    F.x->created_ms = big;
    F.x->updated_ms = big + 1;
    F.x->ended_ms = big + 2;
    F.x->reason = strdup("why \"quoted\"\nnewline \xc3\xa9");
    F.x->failed_task_id = strdup("ftid");
    F.x->output = json_object_new_array();
    json_object_array_add(F.x->output, json_object_new_double(1.5));
    for (s = WEFT_TASK_SCHEDULED; s <= WEFT_TASK_SKIPPED; s++) {
        t = xc_add_task(F.x, wu_map_get(F.wf->by_ref, "a"), 0, s);
        assert_non_null(t);
        t->status = (weft_task_status)s;
        if (xc_task_terminal(t->status)) F.x->active--;
        t->input = json_object_new_object();
        json_object_object_add(t->input, "s", json_object_new_int(s));
        t->output = s % 2 ? json_object_new_string("out") : NULL;
        if (s % 3 == 0) xc_set_reason(&t->reason, "reason %d", s);
        t->retry_count = s;
        t->poll_count = s + 1;
        t->scheduled_ms = big + s;
        t->started_ms = big + 10 + s;
        t->ended_ms = big + 20 + s;
        t->updated_ms = big + 30 + s;
        t->callback_ms = big + 40 + s;
        if (s == WEFT_TASK_IN_PROGRESS) t->child_id = strdup("child-wf-1");
    }
    /* every combination of the five flags, on the last task */
    for (f = 0; f < 32; f++) {
        t = F.x->tasks.items[F.x->tasks.len - 1];
        if (t->fresh) F.x->fresh--;
        t->followed = (f & 1) != 0;
        t->spawned = (f & 2) != 0;
        t->retried = (f & 4) != 0;
        t->queued = (f & 8) != 0;
        t->fresh = (f & 16) != 0;
        if (t->fresh) F.x->fresh++;
        reload();
    }
    for (s = WEFT_WF_RUNNING; s <= WEFT_WF_PAUSED; s++) {
        F.x->status = (weft_wf_status)s;
        F.x->root_done = s % 2;
        y = reload();
        assert_int_equal(y->status, s);
    }
    y = F.x;
    assert_int_equal(y->created_ms, big);
    assert_int_equal(y->updated_ms, big + 1);
    assert_int_equal(y->ended_ms, big + 2);
    assert_string_equal(y->reason, "why \"quoted\"\nnewline \xc3\xa9");
    assert_string_equal(y->failed_task_id, "ftid");
    assert_json(y->output, "[1.5]");
    for (s = WEFT_TASK_SCHEDULED; s <= WEFT_TASK_SKIPPED; s++) {
        t = y->tasks.items[s];
        assert_int_equal(t->status, s);
        assert_int_equal(t->iteration, s);
        assert_int_equal(t->retry_count, s);
        assert_int_equal(t->poll_count, s + 1);
        assert_int_equal(t->scheduled_ms, big + s);
        assert_int_equal(t->started_ms, big + 10 + s);
        assert_int_equal(t->ended_ms, big + 20 + s);
        assert_int_equal(t->updated_ms, big + 30 + s);
        assert_int_equal(t->callback_ms, big + 40 + s);
        if (s % 3 == 0)
            assert_non_null(t->reason);
        else
            assert_null(t->reason);
        if (s % 2)
            assert_json(t->output, "'out'");
        else
            assert_null(t->output);
    }
    assert_string_equal(((xc_task *)y->tasks.items[WEFT_TASK_IN_PROGRESS])->child_id, "child-wf-1");
    assert_null(((xc_task *)y->tasks.items[0])->child_id);
    assert_int_equal(y->active, 2); /* SCHEDULED, IN_PROGRESS */
}

/* ---- corrupt documents ---- */

typedef struct bad_case {
    const char *doc;  /* ' for " */
    const char *what; /* part of the message; '|' separates alternatives */
} bad_case;

#define TASK_A "{'id':'t1','ref':'a','def':'a','status':'COMPLETED'}"

static const bad_case BAD[] = {
    {"{'status':'RUNNING','tasks':[]}", "no id"},
    {"{'id':5,'status':'RUNNING'}", "no id"},
    {"[1,2,3]", "no id"},
    {"'just a string'", "no id"},
    {"{'id':'wf-c'}", "bad status"},
    {"{'id':'wf-c','status':'SLEEPING'}", "bad status"},
    {"{'id':'wf-c','status':7}", "bad status"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'zz','def':'zz',"
     "'status':'SCHEDULED'}]}",
     "'zz' is not in the definition"},
    /* no "def": the ref is the def's, and must be in the definition */
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'zz','status':'SCHEDULED'}]}",
     "task 'zz' is not in the definition"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','status':'SCHEDULED'}]}",
     "task 1 has no id or ref"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'ref':'a','def':'a','status':'SCHEDULED'}]}",
     "task 1 has no id or ref"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[5]}", "task 1 has no id or ref"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[" TASK_A ",{'id':'t2','ref':'a','def':'a',"
     "'status':'DONE'}]}",
     "task 'a' has a bad status"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'a','def':'a',"
     "'status':'SCHEDULED','scope':1}]}",
     "task 'a' has a bad scope"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'a','def':'a',"
     "'status':'SCHEDULED','scope':-1}]}",
     "task 'a' has a bad scope"},
    {"{'id':'wf-c','status':'RUNNING','scopes':[[0,1]],'tasks':[{'id':'t1','ref':'a',"
     "'def':'a','status':'SCHEDULED','scope':2}]}",
     "task 'a' has a bad scope"},
    {"{'id':'wf-c','status':'RUNNING','scopes':[[1,1]]}", "bad loop scope 1"},
    {"{'id':'wf-c','status':'RUNNING','scopes':[[0,1],[-1,1]]}", "bad loop scope 2"},
    {"{'id':'wf-c','status':'RUNNING','scopes':[[0,1],[9,1]]}", "bad loop scope 2"},
    /* a scope that is not a [parent, iteration] pair */
    {"{'id':'wf-c','status':'RUNNING','scopes':[7]}", "bad loop scope 1"},
    {"{'id':'wf-c','status':'RUNNING','scopes':[{'parent':0}]}", "bad loop scope 1"},
    {"{'id':'wf-c','status':'RUNNING','scopes':['x']}", "bad loop scope 1"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[" TASK_A "],'ended':[1]}", "bad ended task 1"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[" TASK_A "],'ended':[-1]}", "bad ended task -1"},
    {"{'id':'wf-c','status':'RUNNING','ended':[0]}", "bad ended task 0"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'d1','def':'d1',"
     "'status':'SCHEDULED','dyn':{'taskReferenceName':'d1','type':'T'}}]}",
     "dynamic task 'd1' has no owner '(none)'"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'d1','def':'d1',"
     "'status':'SCHEDULED','owner':'nope','dyn':{'taskReferenceName':'d1','type':'T'}}]}",
     "dynamic task 'd1' has no owner 'nope'"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'d1','def':'d1',"
     "'status':'SCHEDULED','owner':'dyn','dyn':{'taskReferenceName':'d1','type':'NOPE'}}]}",
     "unknown task type NOPE"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'a2','def':'a2',"
     "'status':'SCHEDULED','owner':'dyn','dyn':{'taskReferenceName':'a','type':'T'}}]}",
     "'a'"},
    /* a dynamic node that is not a WorkflowTask object */
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'d1','def':'d1',"
     "'status':'SCHEDULED','owner':'dyn','dyn':5}]}",
     "'d1'|taskReferenceName"},
    {"{'id':'wf-c','status':'RUNNING','tasks':[{'id':'t1','ref':'d1','def':'d1',"
     "'status':'SCHEDULED','owner':'dyn','dyn':null}]}",
     "'d1'"},
};

/* Whether msg contains one of the '|'-separated parts of alts. */
static int has_any(const char *msg, const char *alts)
{
    char buf[256], *p, *save = NULL;
    snprintf(buf, sizeof buf, "%s", alts);
    for (p = strtok_r(buf, "|", &save); p; p = strtok_r(NULL, "|", &save))
        if (strstr(msg, p)) return 1;
    return 0;
}

/* cd_from_doc on doc text (' for "): the code, the message in err. */
static int from_text(const char *text, xc_exec **out, weft_error *err)
{
    json_object *doc = J(text);
    return cd_from_doc(doc, F.wf, &DEFS, out, err);
}

/* The case in a child process first: 0, or why it did not return WEFT_EINVAL. */
static int probe(const char *text, char *why, size_t n)
{
    int status;
    pid_t pid;
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        xc_exec *x = (xc_exec *)1;
        weft_error err = {0};
        int rc = from_text(text, &x, &err);
        _exit(rc == WEFT_EINVAL && x == NULL ? 0 : 3);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
        snprintf(why, n, "crashed with signal %d", WTERMSIG(status));
        return -1;
    }
    if (WEXITSTATUS(status) == 3) {
        snprintf(why, n, "did not fail with WEFT_EINVAL");
        return -1;
    }
    if (WEXITSTATUS(status) != 0) {
        snprintf(why, n, "exited with %d (a sanitizer report above?)", WEXITSTATUS(status));
        return -1;
    }
    return 0;
}

static void test_corrupt(void **state)
{
    size_t i, failures = 0;
    start("{'name':'w','tasks':[" T_("a", "") ",{'taskReferenceName':'dyn','type':'DYN'}]}", NULL);
    for (i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const bad_case *c = &BAD[i];
        weft_error err = {0};
        xc_exec *x = (xc_exec *)1;
        char why[128];
        int rc;
        if (probe(c->doc, why, sizeof why)) {
            print_error("case %zu %s: %s\n", i + 1, c->doc, why);
            failures++;
            continue;
        }
        rc = from_text(c->doc, &x, &err);
        assert_int_equal(rc, WEFT_EINVAL);
        assert_int_equal(err.code, WEFT_EINVAL);
        assert_null(x);
        if (!has_any(err.msg, c->what)) {
            print_error("case %zu %s: \"%s\" does not contain \"%s\"\n", i + 1, c->doc, err.msg,
                        c->what);
            failures++;
        }
        /* a document with an id is named in the message */
        if (strstr(c->doc, "'wf-c'") && !strstr(err.msg, "workflow wf-c")) {
            print_error("case %zu: \"%s\" does not name the workflow\n", i + 1, err.msg);
            failures++;
        }
    }
    if (failures)
        fail_msg("%zu of %zu corrupt documents handled badly", failures,
                 sizeof BAD / sizeof BAD[0]);
}

/* The document of one definition read with another: refused, nothing leaks. */
static void test_other_definition(void **state)
{
    weft_error err = {0};
    def_workflow *other = NULL;
    json_object *doc;
    xc_exec *y = (xc_exec *)1;
    start(DYN_DEF, "{'dyn':[" T_("d1", "") "]}");
    decide();
    complete("d1", "{}");
    doc = doc_of(F.x);
    assert_int_equal(def_compile(&DEFS, J("{'name':'v','tasks':[" T_("b", "") "]}"), "other.json",
                                 NULL, &other, &err),
                     0);
    assert_int_equal(cd_from_doc(doc, other, &DEFS, &y, &err), WEFT_EINVAL);
    assert_null(y);
    assert_has(err.msg, "workflow wf-1");
    assert_has(err.msg, "'dyn' is not in the definition");
    json_object_put(doc);
    def_unref(other);
}

/* Review 12b: a stored document whose taskToDomain or a task's domain has
 * the wrong type or is empty: read leniently as "none", not kept as is (a
 * string map makes every child start fail its check; "" queues the task in
 * ":<queue>", where nobody polls and the cancel's unqueue looks). */
static void test_domain_fields(void **state)
{
    weft_error err = {0};
    xc_exec *y = NULL;
    const xc_task *t;
    start("{'name':'w','tasks':[" T_("a", "") "]}", NULL);
    assert_int_equal(from_text("{'id':'wf-c','status':'RUNNING','taskToDomain':'blue','tasks':["
                               "{'id':'t1','ref':'a','def':'a','status':'SCHEDULED',"
                               "'domain':''}]}",
                               &y, &err),
                     0);
    t = y->tasks.items[0];
    if (y->task_to_domain && !json_object_is_type(y->task_to_domain, json_type_object))
        print_error("taskToDomain 'blue' kept as a %s\n",
                    json_type_to_name(json_object_get_type(y->task_to_domain)));
    if (t->domain) print_error("domain '' kept: the task's queue is '%s'\n", xc_task_queue(t));
    assert_true(!y->task_to_domain || json_object_is_type(y->task_to_domain, json_type_object));
    assert_null(t->domain);
    xc_free(y);
}

/* ---- definition keys, events ---- */

static void test_def_key(void **state)
{
    char k1[17], k2[17], k3[17], k4[17];
    size_t i;
    const char *text = "{\"name\":\"w\",\"tasks\":[]}";
    memset(k1, 'x', sizeof k1);
    cd_def_key(text, k1);
    cd_def_key(text, k2);
    assert_int_equal(strlen(k1), 16);
    for (i = 0; i < 16; i++)
        assert_non_null(strchr("0123456789abcdef", k1[i]));
    assert_string_equal(k1, k2);
    /* one byte more, one byte other, the order of fields */
    cd_def_key("{\"name\":\"w\",\"tasks\":[] }", k3);
    assert_string_not_equal(k1, k3);
    cd_def_key("{\"name\":\"v\",\"tasks\":[]}", k3);
    assert_string_not_equal(k1, k3);
    cd_def_key("{\"tasks\":[],\"name\":\"w\"}", k4);
    assert_string_not_equal(k1, k4);
    assert_string_not_equal(k3, k4);
    /* a function of the bytes only, not of where they are */
    {
        char copy[64];
        snprintf(copy, sizeof copy, "%s", text);
        cd_def_key(copy, k3);
        assert_string_equal(k3, k1);
    }
    cd_def_key("", k3);
    assert_int_equal(strlen(k3), 16);
    assert_string_not_equal(k3, k1);
}

static void assert_field(json_object *o, const char *k, const char *want)
{
    json_object *v;
    if (!json_object_object_get_ex(o, k, &v)) fail_msg("event has no '%s'", k);
    if (want) assert_string_equal(json_object_get_string(v), want);
}

static void assert_no_field(json_object *o, const char *k)
{
    if (json_object_object_get_ex(o, k, NULL))
        fail_msg("event has '%s': %s", k, json_object_to_json_string(o));
}

#define ODD "went wrong: \"q\" \\ a/b \b\f\n\r\t \x01\x1f \x7f caf\xc3\xa9 \xe2\x82\xac"

static void test_event(void **state)
{
    json_object *ev;
    xc_task *a;
    start("{'name':'w','tasks':[" T_("a", "") "," T_("b", "") "]}", NULL);
    decide();
    a = task("a");

    /* as stored: the stream's key and entry id tell the workflow and the time */
    ev = event_of(F.x, a);
    assert_no_field(ev, "workflowId");
    assert_no_field(ev, "time");
    assert_field(ev, "taskId", a->id);
    assert_field(ev, "referenceTaskName", "a");
    assert_field(ev, "taskType", "T");
    assert_field(ev, "status", "SCHEDULED");
    assert_no_field(ev, "reason");
    json_object_put(ev);

    /* every character JSON escapes, and some it need not: they come back */
    run("a", WEFT_TASK_FAILED, NULL, "went wrong");
    free(a->reason);
    a->reason = strdup(ODD);
    ev = event_of(F.x, a);
    assert_field(ev, "reason", ODD);
    json_object_put(ev);
    free(F.x->reason);
    F.x->reason = strdup(ODD);
    ev = event_of(F.x, NULL);
    assert_field(ev, "reason", ODD);
    json_object_put(ev);
    reload();
    a = task("a");
    assert_string_equal(a->reason, ODD);
    assert_string_equal(F.x->reason, ODD);
    free(a->reason);
    a->reason = strdup("went wrong");
    ev = event_of(F.x, a);
    assert_field(ev, "status", "FAILED");
    assert_field(ev, "reason", "went wrong");
    json_object_put(ev);

    /* the workflow: status and reason; the output once it ended */
    ev = event_of(F.x, NULL);
    assert_field(ev, "status", "FAILED");
    assert_has(json_object_get_string(json_object_object_get(ev, "reason")), "went wrong");
    assert_field(ev, "output", NULL);
    assert_no_field(ev, "taskId");
    json_object_put(ev);
    teardown(state);

    start("{'name':'w','tasks':[" T_("a", "") "]}", NULL);
    decide();
    ev = event_of(F.x, NULL);
    assert_field(ev, "status", "RUNNING");
    assert_no_field(ev, "output");
    assert_no_field(ev, "reason");
    json_object_put(ev);
    complete("a", "{'r':7}");
    ev = event_of(F.x, NULL);
    assert_field(ev, "status", "COMPLETED");
    assert_json(json_object_object_get(ev, "output"), "{'r':7}");
    json_object_put(ev);
    /* a task that ended well carries no reason */
    ev = event_of(F.x, task("a"));
    assert_field(ev, "status", "COMPLETED");
    assert_no_field(ev, "reason");
    json_object_put(ev);
}

/* ---- allocation failures ---- */

/* What a codec sweep works on: F.x, its document as text, one run's own. */
static struct {
    char *want;       /* F.x's document */
    json_object *doc; /* parsed want, for cd_from_doc */
    const xc_task *t; /* cd_event_text's task (NULL: the workflow) */
    char *want_event;
    wu_buf b;
    xc_exec *y;
    weft_error err;
} AF;

/* An execution with something in every part of its document: a loop, a
 * dynamic task retried, a reason, a domain, a child, a payload reference. */
static void af_build(void)
{
    xc_task *t;
    start("{'name':'w','tasks':[{'taskReferenceName':'dyn','type':'DYN','inputParameters':"
          "{'tasks':'${workflow.input.dyn}'}},{'taskReferenceName':'lp','type':'LOOP',"
          "'inputParameters':{'times':2},'loopOver':[" T_("body", "") "]}," T_("c", "") "]}",
          "{'dyn':[{'taskReferenceName':'d1','type':'T','taskDefinition':{'retryCount':1,"
          "'retryDelaySeconds':0}}]}");
    decide();
    run("d1", WEFT_TASK_FAILED, NULL, "first try");
    complete("d1", "{'r':[1,2.5,true,null,'s']}");
    complete("body__1", "{'n':1}");
    F.x->correlation_id = strdup("corr-1");
    F.x->parent_id = strdup("parent-wf");
    F.x->parent_task_id = strdup("parent-task");
    F.x->task_to_domain = json_object_new_object();
    json_object_object_add(F.x->task_to_domain, "T", json_object_new_string("blue"));
    json_object_object_add(F.x->variables, "v", json_object_new_string("x"));
    t = task("body__2");
    assert_int_equal(xc_task_set_domain(t, "blue"), 0);
    t->worker_id = strdup("worker-1");
    t->child_id = strdup("child-1");
    task("d1")->output_ref = strdup("wf-1.0123456789abcdef.json");
}

static int af_doc_call(void *ud)
{
    return cd_doc_text(F.x, &AF.b);
}

/* 0: the same text; WEFT_ENOMEM: b is the caller's to drop */
static int af_doc_check(void *ud, int rc, int failed)
{
    if (rc == 0) assert_string_equal(AF.b.data, AF.want);
    return 1;
}

static void af_buf_free(void *ud)
{
    wu_buf_free(&AF.b);
}

static int af_event_call(void *ud)
{
    return cd_event_text(F.x, AF.t, &AF.b);
}

static int af_event_check(void *ud, int rc, int failed)
{
    if (rc == 0) assert_string_equal(AF.b.data, AF.want_event);
    return 1;
}

static void af_load_setup(void *ud)
{
    weft_error err = {0};
    AF.y = (xc_exec *)1;
    wu_err_clear(&AF.err);
    assert_int_equal(wu_parse_json("doc", AF.want, &AF.doc, &err), 0);
}

static int af_load_call(void *ud)
{
    return cd_from_doc(AF.doc, F.wf, &DEFS, &AF.y, &AF.err);
}

/* 0: the same execution; WEFT_ENOMEM: none, and err says so */
static int af_load_check(void *ud, int rc, int failed)
{
    wu_buf b = {0};
    if (rc) {
        assert_null(AF.y);
        assert_int_equal(AF.err.code, WEFT_ENOMEM);
        return 0;
    }
    assert_non_null(AF.y);
    assert_int_equal(cd_doc_text(AF.y, &b), 0);
    assert_string_equal(b.data, AF.want);
    wu_buf_free(&b);
    assert_same_exec(F.x, AF.y);
    return 1;
}

static void af_load_teardown(void *ud)
{
    xc_free(AF.y);
    AF.y = NULL;
    json_object_put(AF.doc);
    AF.doc = NULL;
}

/* Every allocation of writing, reading back and eventing an execution
 * fails in turn: WEFT_ENOMEM and nothing made, or the same result. */
static void test_alloc_failures(void **state)
{
    static const af_case doc = {"cd_doc_text", NULL, af_doc_call, af_doc_check, af_buf_free, NULL};
    static const af_case load = {"cd_from_doc", af_load_setup,    af_load_call,
                                 af_load_check, af_load_teardown, NULL};
    static const af_case event = {"cd_event_text", NULL,        af_event_call,
                                  af_event_check,  af_buf_free, NULL};
    size_t i;
    af_build();
    assert_int_equal(cd_doc_text(F.x, &AF.b), 0);
    AF.want = AF.b.data;
    AF.b = (wu_buf){0};
    af_run(&doc, NULL);
    af_run(&load, NULL);
    for (i = 0; i <= F.x->tasks.len; i++) {
        AF.t = i < F.x->tasks.len ? F.x->tasks.items[i] : NULL;
        assert_int_equal(cd_event_text(F.x, AF.t, &AF.b), 0);
        AF.want_event = AF.b.data;
        AF.b = (wu_buf){0};
        af_run(&event, NULL);
        free(AF.want_event);
    }
    free(AF.want);
    memset(&AF, 0, sizeof AF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fresh, teardown),
        cmocka_unit_test_teardown(test_variables_kept, teardown),
        cmocka_unit_test_teardown(test_payload_refs, teardown),
        cmocka_unit_test_teardown(test_chain, teardown),
        cmocka_unit_test_teardown(test_failed, teardown),
        cmocka_unit_test_teardown(test_nested_loops, teardown),
        cmocka_unit_test_teardown(test_dynamic, teardown),
        cmocka_unit_test_teardown(test_dynamic_container, teardown),
        cmocka_unit_test_teardown(test_ended_queue, teardown),
        cmocka_unit_test_teardown(test_fresh_after_retry, teardown),
        cmocka_unit_test_teardown(test_json_values, teardown),
        cmocka_unit_test_teardown(test_fields, teardown),
        cmocka_unit_test_teardown(test_corrupt, teardown),
        cmocka_unit_test_teardown(test_other_definition, teardown),
        cmocka_unit_test_teardown(test_domain_fields, teardown),
        cmocka_unit_test_teardown(test_def_key, teardown),
        cmocka_unit_test_teardown(test_event, teardown),
        cmocka_unit_test_teardown(test_alloc_failures, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

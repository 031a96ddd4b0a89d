/*
 * Tests of exec.c: executions, task instances, loop scopes, lookups and the
 * Conductor-shaped Workflow / Task JSON. Task types are defined here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exec.h"
#include "plugin/host.h"

static int noop_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static int noop_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type type_t = {.name = "T", .execute = noop_execute};
static const weft_task_type type_loop = {.name = "LOOP", .map = noop_map};

static const weft_task_type *find_type(void *ud, const char *name)
{
    if (!strcmp(name, "T") || !strcmp(name, "SIMPLE")) return &type_t;
    if (!strcmp(name, "LOOP")) return &type_loop;
    return NULL;
}

static def_env DEFS = {.find_type = find_type, .searched = "/test/plugins"};

/* A workflow with a loop holding a loop, so scopes nest two deep. */
static const char *const WF_MAIN =
    "{'name':'orders','version':3,'variables':{'count':1,'deep':{'k':[1,2]}},"
    " 'tasks':["
    "  {'name':'fetch_order','taskReferenceName':'a','type':'T',"
    "   'inputParameters':{'id':'${workflow.input.id}'}},"
    "  {'taskReferenceName':'b'},"
    "  {'taskReferenceName':'outer','type':'LOOP','loopOver':["
    "    {'taskReferenceName':'body','type':'T'},"
    "    {'taskReferenceName':'inner','type':'LOOP','loopOver':["
    "      {'taskReferenceName':'leaf','type':'T'}]}]}]}";

/*
 * What a test allocates is tracked here and freed by the teardown, so a
 * failing assertion (which leaves the test early) leaks nothing.
 */
static struct {
    def_workflow *wf[8];
    size_t nwf;
    xc_exec *x[8];
    size_t nx;
    json_object *js[64];
    size_t njs;
} G;

static int teardown(void **state)
{
    size_t i;
    for (i = 0; i < G.nx; i++)
        xc_free(G.x[i]);
    for (i = 0; i < G.nwf; i++)
        def_unref(G.wf[i]);
    for (i = 0; i < G.njs; i++)
        json_object_put(G.js[i]);
    memset(&G, 0, sizeof G);
    return 0;
}

static json_object *track_js(json_object *j)
{
    assert_true(G.njs < sizeof G.js / sizeof G.js[0]);
    G.js[G.njs++] = j;
    return j;
}

/* JSON from text written with ' for " (keeps the definitions readable); tracked. */
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
    return track_js(j);
}

static void assert_json(json_object *got, const char *want_text)
{
    json_object *want = J(want_text);
    if (!json_object_equal(got, want))
        fail_msg("got %s, want %s", got ? json_object_to_json_string(got) : "NULL",
                 json_object_to_json_string(want));
}

static def_workflow *compile(const char *text)
{
    weft_error err = {0};
    def_workflow *wf = NULL;
    DEFS.host = host_table();
    if (def_compile(&DEFS, J(text), "test.json", NULL, &wf, &err)) fail_msg("compile: %s", err.msg);
    assert_true(G.nwf < sizeof G.wf / sizeof G.wf[0]);
    G.wf[G.nwf++] = wf;
    return wf;
}

static xc_exec *start(def_workflow *wf, json_object *input, const char *id)
{
    weft_error err = {0};
    xc_exec *x = (xc_exec *)1;
    if (xc_new(wf, input, id, &x, &err)) fail_msg("xc_new: %s", err.msg);
    assert_non_null(x);
    assert_true(G.nx < sizeof G.x / sizeof G.x[0]);
    G.x[G.nx++] = x;
    return x;
}

static def_task *def_by_ref(def_workflow *wf, const char *ref)
{
    def_task *d = wu_map_get(wf->by_ref, ref);
    if (!d) fail_msg("no task '%s' in the definition", ref);
    return d;
}

static xc_task *add(xc_exec *x, const char *ref, int scope, int iteration)
{
    xc_task *t = xc_add_task(x, def_by_ref(x->def, ref), scope, iteration);
    assert_non_null(t);
    return t;
}

static void assert_uuid(const char *s)
{
    size_t i;
    assert_int_equal(strlen(s), 36);
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            assert_int_equal(s[i], '-');
        else if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            fail_msg("'%s' is not a lower-case UUID (position %zu)", s, i);
    }
    assert_int_equal(s[14], '4');           /* version 4 */
    assert_non_null(strchr("89ab", s[19])); /* RFC 4122 variant */
}

/* A task id: its workflow's id, '.', 16 lower-case hex digits; and back. */
static void assert_task_id(const xc_exec *x, const char *s)
{
    char wf[WU_TASK_ID_MAX];
    weft_error err = {0};
    size_t i, n = strlen(x->id);
    assert_int_equal(strlen(s), n + 17);
    assert_memory_equal(s, x->id, n);
    assert_int_equal(s[n], '.');
    for (i = n + 1; i < n + 17; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            fail_msg("'%s' does not end in lower-case hex digits (position %zu)", s, i);
    assert_int_equal(wu_task_workflow(s, wf, &err), 0);
    assert_string_equal(wf, x->id);
}

static const char *str_field(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) fail_msg("no field '%s'", key);
    if (!json_object_is_type(v, json_type_string)) fail_msg("field '%s' is not a string", key);
    return json_object_get_string(v);
}

static int64_t int_field(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) fail_msg("no field '%s'", key);
    if (!json_object_is_type(v, json_type_int)) fail_msg("field '%s' is not an integer", key);
    return json_object_get_int64(v);
}

static void assert_absent(json_object *o, const char *key)
{
    if (json_object_object_get_ex(o, key, NULL))
        fail_msg("field '%s' should be absent in %s", key, json_object_to_json_string(o));
}

/* ---- xc_new ---- */

static void test_new_basics(void **state)
{
    def_workflow *wf = compile(WF_MAIN);
    json_object *in = J("{'id':42}");
    int64_t before = wu_now_ms(), after;
    xc_exec *x = start(wf, in, "wf-1");
    after = wu_now_ms();

    assert_string_equal(x->id, "wf-1");
    assert_ptr_equal(x->def, wf);
    assert_int_equal(wf->refs, 2); /* the execution holds its own reference */
    assert_int_equal(x->status, WEFT_WF_RUNNING);
    assert_null(x->output);
    assert_null(x->reason);
    assert_null(x->correlation_id);
    assert_null(x->parent_id);
    assert_int_equal(x->fence, 0);
    assert_int_equal(x->tasks.len, 0);
    assert_int_equal(x->active, 0);
    assert_true(x->created_ms >= before && x->created_ms <= after);
    assert_int_equal(x->updated_ms, x->created_ms);
    assert_int_equal(x->ended_ms, 0);
    /* the top-level scope: no suffix */
    assert_int_equal(x->scopes.len, 1);
    assert_string_equal(((xc_scope *)x->scopes.items[0])->suffix, "");
    /* the cached id string for ${workflow.workflowId} */
    assert_string_equal(json_object_get_string(x->j_id), "wf-1");
}

static void test_new_input_by_reference(void **state)
{
    def_workflow *wf = compile(WF_MAIN);
    json_object *in = json_object_new_object();
    xc_exec *x;
    json_object_object_add(in, "id", json_object_new_int(7));
    x = start(wf, in, NULL);
    assert_ptr_equal(x->input, in);
    /* the caller's reference can go: the execution keeps its own */
    json_object_put(in);
    assert_json(x->input, "{'id':7}");
}

static void test_new_null_input(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, NULL);
    assert_non_null(x->input);
    assert_json(x->input, "{}");
}

static void test_new_initial_variables(void **state)
{
    def_workflow *wf = compile(WF_MAIN);
    xc_exec *x = start(wf, NULL, NULL);
    json_object *defvars = json_object_object_get(wf->json, "variables");
    assert_json(x->variables, "{'count':1,'deep':{'k':[1,2]}}");
    /* the execution's variables are its own object: the shared definition
     * does not see what one execution sets */
    assert_ptr_not_equal(x->variables, defvars);
    json_object_object_add(x->variables, "count", json_object_new_int(99));
    json_object_object_add(x->variables, "extra", json_object_new_boolean(1));
    assert_json(defvars, "{'count':1,'deep':{'k':[1,2]}}");
    /* a second execution starts from the definition again */
    assert_json(start(wf, NULL, NULL)->variables, "{'count':1,'deep':{'k':[1,2]}}");
}

static void test_new_variables_absent_or_not_object(void **state)
{
    assert_json(
        start(compile("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'}]}"), NULL, NULL)
            ->variables,
        "{}");
    assert_json(start(compile("{'name':'w','variables':[1,2],'tasks':[{'taskReferenceName':'a'}]}"),
                      NULL, NULL)
                    ->variables,
                "{}");
    assert_json(start(compile("{'name':'w','variables':'x','tasks':[{'taskReferenceName':'a'}]}"),
                      NULL, NULL)
                    ->variables,
                "{}");
}

static void test_new_fresh_ids(void **state)
{
    def_workflow *wf = compile(WF_MAIN);
    char ids[64][37];
    size_t i, j;
    weft_error err;
    for (i = 0; i < 64; i++) {
        xc_exec *x;
        assert_int_equal(xc_new(wf, NULL, NULL, &x, &err), 0);
        assert_uuid(x->id);
        assert_string_equal(json_object_get_string(x->j_id), x->id);
        memcpy(ids[i], x->id, 37);
        xc_free(x);
    }
    for (i = 0; i < 64; i++)
        for (j = i + 1; j < 64; j++)
            if (!strcmp(ids[i], ids[j])) fail_msg("id %s given twice", ids[i]);
    /* every execution gave its reference back */
    assert_int_equal(wf->refs, 1);
}

static void test_free_null(void **state)
{
    xc_free(NULL);
}

/* ---- task instances ---- */

static void test_add_task_basics(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, "wf-1");
    int64_t before = wu_now_ms();
    xc_task *a = add(x, "a", 0, 0), *b = add(x, "b", 0, 0);
    int64_t after = wu_now_ms();

    assert_int_equal(x->tasks.len, 2);
    assert_ptr_equal(x->tasks.items[0], a);
    assert_ptr_equal(x->tasks.items[1], b);
    assert_int_equal(a->seq, 1);
    assert_int_equal(b->seq, 2);
    assert_int_equal(x->active, 2);
    assert_string_equal(a->ref, "a");
    assert_ptr_equal(a->def, def_by_ref(x->def, "a"));
    assert_int_equal(a->status, WEFT_TASK_SCHEDULED);
    assert_int_equal(a->scope, 0);
    assert_int_equal(a->iteration, 0);
    assert_int_equal(a->retry_count, 0);
    assert_int_equal(a->poll_count, 0);
    assert_null(a->input);
    assert_null(a->output);
    assert_null(a->reason);
    assert_null(a->dyn_json);
    assert_true(a->scheduled_ms >= before && a->scheduled_ms <= after);
    assert_int_equal(a->updated_ms, a->scheduled_ms);
    assert_int_equal(a->started_ms, 0);
    assert_task_id(x, a->id);
    assert_task_id(x, b->id);
    assert_string_not_equal(a->id, b->id);
}

static void test_scopes(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, NULL);
    int s2 = xc_new_scope(x, 0, 2);
    int s21 = xc_new_scope(x, s2, 1);
    int s3 = xc_new_scope(x, 0, 3);
    xc_scope *sc;

    assert_int_equal(s2, 1);
    assert_int_equal(s21, 2);
    assert_int_equal(s3, 3);
    sc = x->scopes.items[s2];
    assert_string_equal(sc->suffix, "__2");
    assert_int_equal(sc->parent, 0);
    assert_int_equal(sc->iteration, 2);
    sc = x->scopes.items[s21];
    assert_string_equal(sc->suffix, "__2__1");
    assert_int_equal(sc->parent, s2);
    assert_int_equal(sc->iteration, 1);
    assert_string_equal(((xc_scope *)x->scopes.items[s3])->suffix, "__3");

    assert_string_equal(add(x, "body", s2, 2)->ref, "body__2");
    assert_string_equal(add(x, "leaf", s21, 1)->ref, "leaf__2__1");
    assert_string_equal(add(x, "body", s3, 3)->ref, "body__3");
    /* a big iteration number fits the suffix */
    assert_string_equal(((xc_scope *)x->scopes.items[xc_new_scope(x, s21, 2147483647)])->suffix,
                        "__2__1__2147483647");
}

static void test_find_ref_latest(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, NULL);
    int s1 = xc_new_scope(x, 0, 1), s2 = xc_new_scope(x, 0, 2);
    xc_task *b1 = add(x, "body", s1, 1);
    xc_task *b2 = add(x, "body", s2, 2);
    xc_task *a = add(x, "a", 0, 0);

    /* instance refs find that instance */
    assert_ptr_equal(xc_find_ref(x, "body__1"), b1);
    assert_ptr_equal(xc_find_ref(x, "body__2"), b2);
    assert_ptr_equal(xc_find_ref(x, "a"), a);
    /* a definition ref finds the latest instance */
    assert_ptr_equal(xc_find_ref(x, "body"), b2);
    assert_ptr_equal(xc_latest(x, def_by_ref(x->def, "body")), b2);
    assert_ptr_equal(xc_latest(x, def_by_ref(x->def, "a")), a);
    /* nothing scheduled yet, or no such ref */
    assert_null(xc_find_ref(x, "leaf"));
    assert_null(xc_latest(x, def_by_ref(x->def, "leaf")));
    assert_null(xc_find_ref(x, "body__3"));
    assert_null(xc_find_ref(x, "nope"));
    assert_null(xc_find_ref(x, ""));
}

static void test_retry_instance_replaces_latest(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, NULL);
    xc_task *first = add(x, "a", 0, 0), *retry;
    first->status = WEFT_TASK_FAILED;
    first->retried = 1;
    retry = add(x, "a", 0, 0);
    retry->retry_count = 1;

    assert_string_equal(retry->ref, "a");
    assert_int_equal(retry->seq, 2);
    assert_ptr_equal(xc_find_ref(x, "a"), retry);
    assert_ptr_equal(xc_latest(x, first->def), retry);
    /* the replaced instance is still reachable by its id */
    assert_ptr_equal(xc_find_id(x, first->id), first);
    assert_ptr_equal(xc_find_id(x, retry->id), retry);
}

static void test_latest_checks_identity(void **state)
{
    /* Two definitions sharing a ref: a node of the other one is not "latest". */
    def_workflow *other =
        compile("{'name':'other','tasks':[{'taskReferenceName':'a','type':'T'}]}");
    xc_exec *x = start(compile(WF_MAIN), NULL, NULL);
    xc_task *a = add(x, "a", 0, 0);
    assert_ptr_equal(xc_latest(x, def_by_ref(x->def, "a")), a);
    assert_null(xc_latest(x, def_by_ref(other, "a")));
}

static void test_find_id(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, NULL);
    xc_task *a = add(x, "a", 0, 0), *b = add(x, "b", 0, 0);
    char other[37];
    assert_ptr_equal(xc_find_id(x, a->id), a);
    assert_ptr_equal(xc_find_id(x, b->id), b);
    wu_uuid(other);
    assert_null(xc_find_id(x, other));
    assert_null(xc_find_id(x, ""));
    assert_null(xc_find_id(x, "a"));
}

static void test_timed(void **state)
{
    xc_exec *x = start(compile("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'},"
                               " {'taskReferenceName':'slow','type':'T',"
                               "  'taskDefinition':{'timeoutSeconds':5}},"
                               " {'taskReferenceName':'quiet','type':'T',"
                               "  'taskDefinition':{'responseTimeoutSeconds':2}}]}"),
                       NULL, NULL);
    /* the timeout scan is only armed once a task with a timeout exists */
    add(x, "a", 0, 0);
    assert_false(x->timed);
    add(x, "slow", 0, 0);
    assert_true(x->timed);
    x = start(x->def, NULL, NULL);
    add(x, "quiet", 0, 0);
    assert_true(x->timed);
}

static void test_reset(void **state)
{
    json_object *in = J("{'id':1}");
    xc_exec *x = start(compile(WF_MAIN), in, "wf-r");
    int s = xc_new_scope(x, 0, 2);
    xc_task *a = add(x, "a", 0, 0), *t;
    add(x, "body", s, 2);
    json_object_object_add(x->variables, "count", json_object_new_int(50));
    json_object_object_add(x->variables, "extra", json_object_new_int(1));
    assert_int_equal(wu_vec_push(&x->ended, a), 0);
    x->ended_head = 1;

    assert_int_equal(xc_reset(x), 0);
    /* the same execution: id and input */
    assert_string_equal(x->id, "wf-r");
    assert_ptr_equal(x->input, in);
    assert_json(x->input, "{'id':1}");
    /* no tasks, scopes or lookups left */
    assert_int_equal(x->tasks.len, 0);
    assert_int_equal(x->scopes.len, 1);
    assert_int_equal(x->active, 0);
    assert_int_equal(x->ended.len, 0);
    assert_int_equal(x->ended_head, 0);
    assert_false(x->timed);
    assert_null(xc_find_ref(x, "a"));
    assert_null(xc_find_ref(x, "body"));
    assert_null(xc_find_ref(x, "body__2"));
    assert_null(xc_latest(x, def_by_ref(x->def, "a")));
    /* the definition's initial variables again */
    assert_json(x->variables, "{'count':1,'deep':{'k':[1,2]}}");
    /* and it starts over: seq 1, scope ids from 1 */
    t = add(x, "a", 0, 0);
    assert_int_equal(t->seq, 1);
    assert_ptr_equal(xc_find_ref(x, "a"), t);
    assert_int_equal(xc_new_scope(x, 0, 1), 1);
    assert_string_equal(add(x, "body", 1, 1)->ref, "body__1");
}

static void test_set_reason(void **state)
{
    char *slot = NULL, big[2000];
    xc_set_reason(&slot, "task %s failed %d times", "fetch", 3);
    assert_string_equal(slot, "task fetch failed 3 times");
    /* replacing frees the old one (the sanitizers watch) */
    xc_set_reason(&slot, "%s", "second");
    assert_string_equal(slot, "second");
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    xc_set_reason(&slot, "%s", big);
    assert_int_equal(strlen(slot), WEFT_ERROR_MAX - 1);
    free(slot);
}

static void test_status_helpers(void **state)
{
    assert_false(xc_task_terminal(WEFT_TASK_SCHEDULED));
    assert_false(xc_task_terminal(WEFT_TASK_IN_PROGRESS));
    assert_true(xc_task_terminal(WEFT_TASK_COMPLETED));
    assert_true(xc_task_terminal(WEFT_TASK_FAILED));
    assert_true(xc_task_terminal(WEFT_TASK_SKIPPED));
    assert_true(xc_task_ok(WEFT_TASK_COMPLETED));
    assert_true(xc_task_ok(WEFT_TASK_COMPLETED_WITH_ERRORS));
    assert_true(xc_task_ok(WEFT_TASK_SKIPPED));
    assert_false(xc_task_ok(WEFT_TASK_FAILED));
    assert_false(xc_task_ok(WEFT_TASK_CANCELED));
    assert_false(xc_task_ok(WEFT_TASK_IN_PROGRESS));
    assert_false(xc_wf_terminal(WEFT_WF_RUNNING));
    assert_false(xc_wf_terminal(WEFT_WF_PAUSED));
    assert_true(xc_wf_terminal(WEFT_WF_COMPLETED));
    assert_true(xc_wf_terminal(WEFT_WF_TERMINATED));
}

static void test_wf_status_parse(void **state)
{
    static const char *const names[] = {"RUNNING",   "COMPLETED",  "FAILED",
                                        "TIMED_OUT", "TERMINATED", "PAUSED"};
    static const char *const bad[] = {"running", "",      "UNKNOWN", "COMPLETED ",
                                      " FAILED", "PAUSE", "RUNNINGX"};
    weft_wf_status s;
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        s = (weft_wf_status)-1;
        assert_int_equal(xc_wf_status_parse(names[i], &s), 0);
        assert_int_equal(s, (weft_wf_status)i);
        assert_string_equal(weft_wf_status_name(s), names[i]);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = WEFT_WF_PAUSED;
        assert_int_equal(xc_wf_status_parse(bad[i], &s), WEFT_EINVAL);
        assert_int_equal(s, WEFT_WF_PAUSED); /* untouched */
    }
}

/* ---- JSON ---- */

static void test_task_json(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), J("{'id':42}"), "wf-1");
    xc_task *a = add(x, "a", 0, 0);
    json_object *j;

    a->status = WEFT_TASK_FAILED;
    a->input = json_object_new_object();
    json_object_object_add(a->input, "id", json_object_new_int(42));
    a->output = json_object_new_object();
    json_object_object_add(a->output, "r", json_object_new_string("x"));
    a->retry_count = 2;
    a->poll_count = 5;
    a->started_ms = 1000;
    a->ended_ms = 2000;
    a->updated_ms = 2001;
    a->retried = 1;
    xc_set_reason(&a->reason, "boom");
    a->child_id = strdup("child-1");

    j = track_js(xc_task_to_json(x, a));
    assert_string_equal(str_field(j, "taskId"), a->id);
    assert_string_equal(str_field(j, "taskType"), "T");
    assert_string_equal(str_field(j, "taskDefName"), "fetch_order");
    assert_string_equal(str_field(j, "referenceTaskName"), "a");
    assert_string_equal(str_field(j, "taskReferenceName"), "a");
    assert_string_equal(str_field(j, "status"), "FAILED");
    assert_json(json_object_object_get(j, "inputData"), "{'id':42}");
    assert_json(json_object_object_get(j, "outputData"), "{'r':'x'}");
    assert_int_equal(int_field(j, "retryCount"), 2);
    assert_int_equal(int_field(j, "seq"), 1);
    assert_int_equal(int_field(j, "pollCount"), 5);
    assert_string_equal(str_field(j, "reasonForIncompletion"), "boom");
    assert_string_equal(str_field(j, "workflowInstanceId"), "wf-1");
    assert_string_equal(str_field(j, "workflowType"), "orders");
    assert_string_equal(str_field(j, "subWorkflowId"), "child-1");
    assert_int_equal(int_field(j, "scheduledTime"), a->scheduled_ms);
    assert_int_equal(int_field(j, "startTime"), 1000);
    assert_int_equal(int_field(j, "endTime"), 2000);
    assert_int_equal(int_field(j, "updateTime"), 2001);
    assert_true(json_object_get_boolean(json_object_object_get(j, "retried")));
    assert_absent(j, "iteration");
    /* the WorkflowTask it runs, as in the definition */
    assert_json(json_object_object_get(j, "workflowTask"),
                "{'name':'fetch_order','taskReferenceName':'a','type':'T',"
                " 'inputParameters':{'id':'${workflow.input.id}'}}");
}

static void test_task_json_defaults(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, "wf-1");
    int s = xc_new_scope(x, 0, 4);
    xc_task *b = add(x, "b", 0, 0), *body = add(x, "body", s, 4);
    json_object *j = track_js(xc_task_to_json(x, b));

    /* no type given: Conductor's SIMPLE; no name: the ref */
    assert_string_equal(str_field(j, "taskType"), "SIMPLE");
    assert_string_equal(str_field(j, "taskDefName"), "b");
    assert_string_equal(str_field(j, "status"), "SCHEDULED");
    assert_json(json_object_object_get(j, "inputData"), "{}");
    assert_json(json_object_object_get(j, "outputData"), "{}");
    assert_int_equal(int_field(j, "retryCount"), 0);
    assert_int_equal(int_field(j, "seq"), 1);
    assert_int_equal(int_field(j, "startTime"), 0);
    assert_false(json_object_get_boolean(json_object_object_get(j, "retried")));
    assert_absent(j, "reasonForIncompletion");
    assert_absent(j, "subWorkflowId");
    assert_absent(j, "iteration");

    j = track_js(xc_task_to_json(x, body));
    assert_string_equal(str_field(j, "referenceTaskName"), "body__4");
    assert_string_equal(str_field(j, "taskReferenceName"), "body__4");
    assert_int_equal(int_field(j, "iteration"), 4);
    assert_int_equal(int_field(j, "seq"), 2);
    assert_string_equal(str_field(json_object_object_get(j, "workflowTask"), "taskReferenceName"),
                        "body");
}

static void test_task_json_dynamic(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, "wf-1");
    xc_task *a = add(x, "a", 0, 0);
    json_object *j;
    /* a dynamic task carries its own WorkflowTask */
    a->dyn_json = json_object_get(J("{'taskReferenceName':'a','type':'T','dyn':true}"));
    j = track_js(xc_task_to_json(x, a));
    assert_json(json_object_object_get(j, "workflowTask"),
                "{'taskReferenceName':'a','type':'T','dyn':true}");
}

static void test_workflow_json(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), J("{'id':42}"), "wf-1");
    xc_task *a = add(x, "a", 0, 0), *b = add(x, "b", 0, 0);
    json_object *j, *tasks;

    a->status = WEFT_TASK_COMPLETED;
    b->status = WEFT_TASK_FAILED;
    xc_set_reason(&b->reason, "b broke");
    x->status = WEFT_WF_FAILED;
    xc_set_reason(&x->reason, "task b failed");
    x->correlation_id = strdup("corr-9");
    x->parent_id = strdup("parent-1");
    x->parent_task_id = strdup("ptask-1");
    x->failed_task_id = strdup(b->id);
    x->output = json_object_new_object();
    json_object_object_add(x->output, "total", json_object_new_int(5));
    json_object_object_add(x->variables, "v", json_object_new_string("set"));
    x->fence = 12;
    x->ended_ms = x->created_ms + 5;
    x->updated_ms = x->created_ms + 4;

    j = track_js(xc_to_json(x));
    assert_string_equal(str_field(j, "workflowId"), "wf-1");
    assert_string_equal(str_field(j, "workflowName"), "orders");
    assert_string_equal(str_field(j, "workflowType"), "orders");
    assert_int_equal(int_field(j, "workflowVersion"), 3);
    assert_int_equal(int_field(j, "version"), 3);
    assert_string_equal(str_field(j, "status"), "FAILED");
    assert_string_equal(str_field(j, "correlationId"), "corr-9");
    assert_string_equal(str_field(j, "reasonForIncompletion"), "task b failed");
    assert_string_equal(str_field(j, "failedTaskId"), b->id);
    assert_string_equal(str_field(j, "parentWorkflowId"), "parent-1");
    assert_string_equal(str_field(j, "parentWorkflowTaskId"), "ptask-1");
    assert_json(json_object_object_get(j, "input"), "{'id':42}");
    assert_json(json_object_object_get(j, "output"), "{'total':5}");
    assert_json(json_object_object_get(j, "variables"), "{'count':1,'deep':{'k':[1,2]},'v':'set'}");
    assert_int_equal(int_field(j, "createTime"), x->created_ms);
    assert_int_equal(int_field(j, "updateTime"), x->created_ms + 4);
    assert_int_equal(int_field(j, "endTime"), x->created_ms + 5);
    assert_int_equal(int_field(j, "fence"), 12);
    assert_true(json_object_equal(json_object_object_get(j, "workflowDefinition"), x->def->json));

    tasks = json_object_object_get(j, "tasks");
    assert_true(json_object_is_type(tasks, json_type_array));
    assert_int_equal(json_object_array_length(tasks), 2);
    assert_string_equal(str_field(json_object_array_get_idx(tasks, 0), "taskId"), a->id);
    assert_string_equal(str_field(json_object_array_get_idx(tasks, 0), "status"), "COMPLETED");
    assert_int_equal(int_field(json_object_array_get_idx(tasks, 0), "seq"), 1);
    assert_string_equal(str_field(json_object_array_get_idx(tasks, 1), "referenceTaskName"), "b");
    assert_string_equal(str_field(json_object_array_get_idx(tasks, 1), "reasonForIncompletion"),
                        "b broke");
    assert_int_equal(int_field(json_object_array_get_idx(tasks, 1), "seq"), 2);
}

static void test_workflow_json_fresh(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), NULL, "wf-2");
    json_object *j = track_js(xc_to_json(x));
    assert_string_equal(str_field(j, "status"), "RUNNING");
    assert_json(json_object_object_get(j, "input"), "{}");
    assert_json(json_object_object_get(j, "output"), "{}");
    assert_json(json_object_object_get(j, "tasks"), "[]");
    assert_int_equal(int_field(j, "endTime"), 0);
    assert_int_equal(int_field(j, "fence"), 0);
    assert_absent(j, "correlationId");
    assert_absent(j, "reasonForIncompletion");
    assert_absent(j, "failedTaskId");
    assert_absent(j, "parentWorkflowId");
    assert_absent(j, "parentWorkflowTaskId");
}

static void test_child_result(void **state)
{
    def_workflow *wf = compile(WF_MAIN);
    xc_exec *child = start(wf, NULL, "child-1");
    weft_task_status st = WEFT_TASK_SCHEDULED;
    char reason[WEFT_ERROR_MAX] = "";
    json_object *out;

    child->status = WEFT_WF_COMPLETED;
    child->output = json_object_new_object();
    json_object_object_add(child->output, "total", json_object_new_int(6));
    out = track_js(xc_child_result(child, &st, reason, sizeof reason));
    assert_int_equal(st, WEFT_TASK_COMPLETED);
    assert_json(out, "{'total':6,'subWorkflowId':'child-1'}");
    /* a copy of the members: the child's output is not changed */
    assert_json(child->output, "{'total':6}");

    child->status = WEFT_WF_FAILED;
    xc_set_reason(&child->reason, "task 'x' failed: boom");
    out = track_js(xc_child_result(child, &st, reason, sizeof reason));
    assert_int_equal(st, WEFT_TASK_FAILED);
    assert_string_equal(reason, "sub-workflow child-1 FAILED: task 'x' failed: boom");
    assert_json(out, "{'total':6,'subWorkflowId':'child-1'}");

    /* every other end is a failure too; no output is no members */
    child->status = WEFT_WF_TERMINATED;
    free(child->reason);
    child->reason = NULL;
    json_object_put(child->output);
    child->output = NULL;
    out = track_js(xc_child_result(child, &st, reason, sizeof reason));
    assert_int_equal(st, WEFT_TASK_FAILED);
    assert_string_equal(reason, "sub-workflow child-1 TERMINATED");
    assert_json(out, "{'subWorkflowId':'child-1'}");
    child->status = WEFT_WF_TIMED_OUT;
    track_js(xc_child_result(child, &st, reason, sizeof reason));
    assert_int_equal(st, WEFT_TASK_FAILED);
    assert_string_equal(reason, "sub-workflow child-1 TIMED_OUT");

    /* an output that is not an object has no members to copy */
    child->status = WEFT_WF_COMPLETED;
    child->output = json_object_new_string("just text");
    out = track_js(xc_child_result(child, &st, reason, sizeof reason));
    assert_int_equal(st, WEFT_TASK_COMPLETED);
    assert_json(out, "{'subWorkflowId':'child-1'}");

    /* a small buffer is cut, not overrun */
    {
        char small[12];
        child->status = WEFT_WF_FAILED;
        track_js(xc_child_result(child, &st, small, sizeof small));
        assert_string_equal(small, "sub-workflo");
    }
}

static void test_failure_input(void **state)
{
    xc_exec *x = start(compile(WF_MAIN), J("{'id':42,'who':'me'}"), "wf-f");
    json_object *in;
    x->status = WEFT_WF_FAILED;
    xc_set_reason(&x->reason, "task b failed");
    x->failed_task_id = strdup("task-9");
    in = track_js(xc_failure_input(x));
    assert_json(in, "{'id':42,'who':'me','workflowId':'wf-f','reason':'task b failed',"
                    "'failureStatus':'FAILED','failureTaskId':'task-9'}");
    /* the execution's input is not changed */
    assert_json(x->input, "{'id':42,'who':'me'}");

    x = start(x->def, NULL, "wf-g");
    x->status = WEFT_WF_TIMED_OUT;
    assert_json(track_js(xc_failure_input(x)),
                "{'workflowId':'wf-g','reason':'','failureStatus':'TIMED_OUT'}");
}

/* The JSON holds its own references: it outlives the execution and its definition. */
static void test_workflow_json_outlives_execution(void **state)
{
    def_workflow *wf = compile(WF_MAIN);
    weft_error err;
    xc_exec *x;
    xc_task *a;
    json_object *j, *t0;
    assert_int_equal(xc_new(wf, J("{'id':1}"), "wf-3", &x, &err), 0);
    a = xc_add_task(x, def_by_ref(wf, "a"), 0, 0);
    assert_non_null(a);
    a->output = json_object_new_string("out");
    j = xc_to_json(x);
    xc_free(x);
    G.nwf = 0; /* drop the last reference on the definition now */
    def_unref(wf);
    track_js(j);
    assert_string_equal(str_field(j, "workflowId"), "wf-3");
    assert_json(json_object_object_get(j, "input"), "{'id':1}");
    t0 = json_object_array_get_idx(json_object_object_get(j, "tasks"), 0);
    assert_string_equal(json_object_get_string(json_object_object_get(t0, "outputData")), "out");
    assert_string_equal(str_field(json_object_object_get(t0, "workflowTask"), "taskReferenceName"),
                        "a");
    assert_string_equal(str_field(json_object_object_get(j, "workflowDefinition"), "name"),
                        "orders");
}

static void *churn(void *arg)
{
    /* thread-local: the test helpers keep global lists */
    char *text = strdup(arg), *p;
    json_object *j0;
    def_workflow *wf = NULL;
    weft_error cerr = {0};
    int i;
    for (p = text; *p; p++)
        if (*p == '\'') *p = '"';
    j0 = json_tokener_parse(text);
    free(text);
    if (!j0 || def_compile(&DEFS, j0, "test.json", NULL, &wf, &cerr)) {
        json_object_put(j0);
        return NULL;
    }
    json_object_put(j0);
    for (i = 0; i < 5000; i++) {
        weft_error err;
        xc_exec *x;
        json_object *j;
        if (xc_new(wf, NULL, NULL, &x, &err)) break;
        xc_add_task(x, wf->root.tasks[0], 0, 0);
        j = xc_to_json(x);
        json_object_put(j);
        xc_free(x);
    }
    /* nothing of this thread's definition leaked to, or from, the others */
    if (i < 5000 || wf->refs != 1 || strcmp(def_by_ref(wf, "a")->ref, "a")) {
        def_unref(wf);
        return NULL;
    }
    def_unref(wf);
    return arg;
}

/*
 * Debian's json-c counts references without atomics, and executions share
 * structure with their definition, so a compiled definition belongs to one
 * thread (weftd keeps a definition cache per thread). Threads that each
 * compile the same definition text run side by side without trouble.
 */
static void test_concurrent_executions(void **state)
{
    pthread_t th[4];
    DEFS.host = host_table();
    void *ret;
    size_t i;
    for (i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, churn, (void *)WF_MAIN), 0);
    for (i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_ptr_equal(ret, WF_MAIN);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_new_basics, teardown),
        cmocka_unit_test_teardown(test_new_input_by_reference, teardown),
        cmocka_unit_test_teardown(test_new_null_input, teardown),
        cmocka_unit_test_teardown(test_new_initial_variables, teardown),
        cmocka_unit_test_teardown(test_new_variables_absent_or_not_object, teardown),
        cmocka_unit_test_teardown(test_new_fresh_ids, teardown),
        cmocka_unit_test_teardown(test_free_null, teardown),
        cmocka_unit_test_teardown(test_add_task_basics, teardown),
        cmocka_unit_test_teardown(test_scopes, teardown),
        cmocka_unit_test_teardown(test_find_ref_latest, teardown),
        cmocka_unit_test_teardown(test_retry_instance_replaces_latest, teardown),
        cmocka_unit_test_teardown(test_latest_checks_identity, teardown),
        cmocka_unit_test_teardown(test_find_id, teardown),
        cmocka_unit_test_teardown(test_timed, teardown),
        cmocka_unit_test_teardown(test_reset, teardown),
        cmocka_unit_test_teardown(test_set_reason, teardown),
        cmocka_unit_test_teardown(test_status_helpers, teardown),
        cmocka_unit_test_teardown(test_wf_status_parse, teardown),
        cmocka_unit_test_teardown(test_task_json, teardown),
        cmocka_unit_test_teardown(test_task_json_defaults, teardown),
        cmocka_unit_test_teardown(test_task_json_dynamic, teardown),
        cmocka_unit_test_teardown(test_workflow_json, teardown),
        cmocka_unit_test_teardown(test_workflow_json_fresh, teardown),
        cmocka_unit_test_teardown(test_workflow_json_outlives_execution, teardown),
        cmocka_unit_test_teardown(test_child_result, teardown),
        cmocka_unit_test_teardown(test_failure_input, teardown),
        cmocka_unit_test_teardown(test_concurrent_executions, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

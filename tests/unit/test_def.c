/*
 * Tests of def.c: compiling Conductor WorkflowDef JSON into def_task trees.
 * Task types are defined here; no plugin is loaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_fail.h"
#include "core/def.h"
#include "plugin/host.h"

/* ---- fixtures ---- */

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

/* Rejects a task whose inputParameters.bad is set. */
static int picky_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *in;
    if (json_object_object_get_ex(def, "inputParameters", &in) &&
        json_object_object_get_ex(in, "bad", NULL))
        return host->error(err, WEFT_EINVAL, "field 'bad' is not allowed");
    return 0;
}

static const weft_task_type type_t = {.name = "T", .execute = noop_execute};
static const weft_task_type type_box = {.name = "BOX", .map = noop_map};
static const weft_task_type type_picky = {
    .name = "PICKY", .validate = picky_validate, .execute = noop_execute};

static const weft_task_type *find_type(void *ud, const char *name)
{
    if (!strcmp(name, "T") || !strcmp(name, "SIMPLE")) return &type_t;
    if (!strcmp(name, "BOX")) return &type_box;
    if (!strcmp(name, "PICKY")) return &type_picky;
    return NULL;
}

static def_env env = {find_type, NULL, "/opt/weft/plugins:/home/me/plugins", NULL, 0, NULL, NULL};

/*
 * What a test allocates is tracked here and freed by the teardown, so a
 * failing assertion (which leaves the test early) leaks nothing.
 */
static struct {
    def_workflow *wf[32];
    size_t nwf;
    json_object *js[64];
    size_t njs;
    def_dyn dyn;
} G;

static def_workflow *track_wf(def_workflow *wf)
{
    assert_true(G.nwf < sizeof G.wf / sizeof G.wf[0]);
    G.wf[G.nwf++] = wf;
    return wf;
}

static int teardown(void **state)
{
    size_t i;
    af_stopped();
    def_dynamic_free(&G.dyn); /* before the JSON its nodes are attached to */
    for (i = 0; i < G.njs; i++)
        json_object_put(G.js[i]);
    for (i = 0; i < G.nwf; i++)
        def_unref(G.wf[i]);
    memset(&G, 0, sizeof G);
    return 0;
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
    assert_true(G.njs < sizeof G.js / sizeof G.js[0]);
    G.js[G.njs++] = j;
    return j;
}

static void assert_has(const char *msg, const char *part)
{
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

/* Compile text; returns rc, the workflow in *out (may be NULL). */
static int compile_src(const char *text, const char *source, json_object *lines, def_workflow **out,
                       weft_error *err)
{
    json_object *j = J(text);
    int rc;
    env.host = host_table();
    memset(err, 0, sizeof *err);
    rc = def_compile(&env, j, source, lines, out, err);
    if (rc == 0) track_wf(*out);
    return rc;
}

static def_workflow *compile_ok(const char *text)
{
    def_workflow *wf = NULL;
    weft_error err;
    if (compile_src(text, NULL, NULL, &wf, &err) != 0) fail_msg("compile failed: %s", err.msg);
    assert_non_null(wf);
    return wf;
}

/* Expect def_compile to fail with WEFT_EINVAL and a message holding each part. */
static void compile_bad(const char *text, const char *source, json_object *lines, const char *part1,
                        const char *part2)
{
    def_workflow *wf = (def_workflow *)1;
    weft_error err;
    int rc = compile_src(text, source, lines, &wf, &err);
    if (rc == 0) fail_msg("compile of %s succeeded, expected an error with \"%s\"", text, part1);
    assert_int_equal(rc, WEFT_EINVAL);
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_null(wf);
    assert_has(err.msg, part1);
    if (part2) assert_has(err.msg, part2);
}

static def_task *by_ref(def_workflow *wf, const char *ref)
{
    def_task *t = wu_map_get(wf->by_ref, ref);
    if (!t) fail_msg("no task '%s'", ref);
    return t;
}

/*
 * Compile in a child process: a crash there is reported as a failure of
 * this test instead of ending the whole run. Returns 0 compiled, 1 rejected
 * with WEFT_EINVAL, 2 another error code, 3 crashed (signal or sanitizer exit).
 */
static int compile_in_child(const char *text, char *msg, size_t msg_size)
{
    int fds[2], status;
    ssize_t n;
    pid_t pid;
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        def_workflow *wf = NULL;
        weft_error err;
        int rc;
        close(fds[0]);
        /* cmocka's handlers would go on running the other tests in here */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        signal(SIGFPE, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        rc = compile_src(text, NULL, NULL, &wf, &err);
        if (rc) (void)!write(fds[1], err.msg, strlen(err.msg));
        _exit(rc == 0 ? 0 : rc == WEFT_EINVAL ? 40 : 41);
    }
    close(fds[1]);
    n = read(fds[0], msg, msg_size - 1);
    msg[n > 0 ? n : 0] = 0;
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status)) return 3;
    switch (WEXITSTATUS(status)) {
    case 0:
        return 0;
    case 40:
        return 1;
    case 41:
        return 2;
    default:
        return 3;
    }
}

/* ---- basic compile ---- */

static void test_minimal(void **state)
{
    def_workflow *wf = compile_ok("{'name':'w','tasks':[{'name':'a','taskReferenceName':'a',"
                                  "'type':'T'},{'taskReferenceName':'b'}]}");
    def_task *a, *b;
    assert_string_equal(wf->name, "w");
    assert_int_equal(wf->version, 1);
    assert_int_equal(wf->refs, 1);
    assert_string_equal(wf->source, "w"); /* no source: the name stands in */
    assert_null(wf->output);
    assert_int_equal(wf->root.n, 2);
    assert_null(wf->root.owner);
    a = wf->root.tasks[0];
    b = wf->root.tasks[1];
    assert_ptr_equal(by_ref(wf, "a"), a);
    assert_string_equal(a->ref, "a");
    assert_string_equal(a->type_name, "T");
    assert_ptr_equal(a->type, &type_t);
    assert_ptr_equal(a->list, &wf->root);
    assert_int_equal(a->index, 0);
    assert_ptr_equal(def_next(a), b);
    assert_null(def_next(b));
    /* no type: Conductor's SIMPLE; no name: the ref */
    assert_string_equal(b->type_name, "SIMPLE");
    assert_string_equal(b->name, "b");
    /* nodes point back at their def_task, in the workflow's own copy */
    assert_ptr_equal(def_of_json(a->json), a);
    assert_ptr_equal(
        def_of_json(json_object_array_get_idx(json_object_object_get(wf->json, "tasks"), 1)), b);
    assert_null(def_of_json(NULL));
    assert_null(def_of_json(wf->json));
    /* policy defaults */
    assert_int_equal(a->retry_count, 0);
    assert_int_equal(a->retry_logic, DEF_RETRY_FIXED);
    assert_int_equal(a->optional, 0);
    assert_int_equal(a->timeout_ms, 0);
    assert_int_equal(wf->all.len, 2);
}

static void test_input_is_copied(void **state)
{
    json_object *j = J("{'name':'w','version':3,'tasks':[{'taskReferenceName':'a','type':'T'}]}");
    def_workflow *wf;
    weft_error err = {0};
    env.host = host_table();
    assert_int_equal(def_compile(&env, j, "w.json", NULL, &wf, &err), 0);
    track_wf(wf);
    assert_int_equal(json_object_get_int(json_object_object_get(wf->json, "version")), 3);
    assert_int_equal(wf->version, 3);
    assert_string_equal(wf->source, "w.json");
    /* the caller's JSON carries no userdata and may be changed or freed */
    assert_null(def_of_json(json_object_array_get_idx(json_object_object_get(j, "tasks"), 0)));
    json_object_object_add(j, "name", json_object_new_string("changed"));
    json_object_array_put_idx(json_object_object_get(j, "tasks"), 0, json_object_new_int(1));
    assert_string_equal(wf->name, "w");
    assert_string_equal(wf->root.tasks[0]->ref, "a");
}

static void test_ref_unref(void **state)
{
    json_object *j = J("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'}]}");
    def_workflow *wf = NULL;
    weft_error err = {0};
    assert_int_equal(def_compile(&env, j, NULL, NULL, &wf, &err), 0);
    assert_ptr_equal(def_ref(wf), wf);
    assert_int_equal(wf->refs, 2);
    def_unref(wf);
    assert_int_equal(wf->refs, 1);
    assert_string_equal(wf->name, "w"); /* still alive */
    def_unref(wf);                      /* freed (ASan reports a use or a leak) */
    assert_null(def_ref(NULL));
    def_unref(NULL);
}

static void test_workflow_fields(void **state)
{
    def_workflow *wf = compile_ok(
        "{'name':'w','timeoutSeconds':'2m','restartable':false,'failureWorkflow':'cleanup',"
        "'outputParameters':{'r':'${a.output.x}'},'tasks':[{'taskReferenceName':'a','type':'T'}]}");
    assert_int_equal(wf->timeout_ms, 120000);
    assert_int_equal(wf->timeout_fails, 1);
    assert_int_equal(wf->restartable, 0);
    assert_non_null(wf->failure_workflow);
    assert_string_equal(json_object_get_string(wf->failure_workflow), "cleanup");
    assert_non_null(wf->output);

    wf = compile_ok("{'name':'w','timeoutSeconds':30,'timeoutPolicy':'ALERT_ONLY',"
                    "'outputParameters':{},'tasks':[{'taskReferenceName':'a','type':'T'}]}");
    assert_int_equal(wf->timeout_ms, 30000);
    assert_int_equal(wf->timeout_fails, 0);
    assert_int_equal(wf->restartable, 1);
    assert_null(wf->failure_workflow);
    assert_null(wf->output); /* empty mapping: the last task's output */
}

static void test_task_policy(void **state)
{
    def_workflow *wf = compile_ok(
        "{'name':'w','tasks':[{'taskReferenceName':'a','type':'T','optional':true,"
        "'taskDefinition':{'retryCount':3,'retryLogic':'EXPONENTIAL_BACKOFF',"
        "'retryDelaySeconds':2,'maxRetryDelaySeconds':'10s','backoffJitterMs':50,"
        "'timeoutSeconds':'1m','responseTimeoutSeconds':5,'timeoutPolicy':'RETRY'}},"
        "{'taskReferenceName':'b','type':'T','taskDefinition':{'retryLogic':'LINEAR_BACKOFF',"
        "'backoffScaleFactor':3,'retryDelaySeconds':'250ms'}}]}");
    def_task *a = by_ref(wf, "a"), *b = by_ref(wf, "b");
    assert_int_equal(a->optional, 1);
    assert_int_equal(a->retry_count, 3);
    assert_int_equal(a->retry_logic, DEF_RETRY_EXPONENTIAL);
    assert_int_equal(a->retry_delay_ms, 2000);
    assert_int_equal(a->max_retry_delay_ms, 10000);
    assert_int_equal(a->jitter_ms, 50);
    assert_int_equal(a->timeout_ms, 60000);
    assert_int_equal(a->response_timeout_ms, 5000);
    assert_int_equal(a->timeout_policy, DEF_TIMEOUT_RETRY);
    assert_int_equal(b->retry_logic, DEF_RETRY_LINEAR);
    assert_true(b->backoff_scale == 3.0);
    assert_int_equal(b->retry_delay_ms, 250);
    assert_int_equal(b->retry_count, 0);
    assert_int_equal(b->timeout_policy, DEF_TIMEOUT_WF);
}

/*
 * retryCount on the WorkflowTask overrides the task definition's (as the
 * comment in read_policy and Conductor say).
 */
static void test_task_retry_count_overrides(void **state)
{
    def_workflow *wf =
        compile_ok("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T','retryCount':5,"
                   "'taskDefinition':{'retryCount':1}},"
                   "{'taskReferenceName':'b','type':'T','retryCount':2}]}");
    assert_int_equal(by_ref(wf, "b")->retry_count, 2);
    assert_int_equal(by_ref(wf, "a")->retry_count, 5);
}

/* ---- def_compile errors ---- */

static void test_err_not_object(void **state)
{
    compile_bad("[1,2]", "x.json", NULL, "x.json: a workflow definition must be a JSON object",
                NULL);
}

static void test_err_no_name(void **state)
{
    compile_bad("{'tasks':[{'taskReferenceName':'a','type':'T'}]}", "x.json", NULL,
                "x.json: the workflow has no name", NULL);
    compile_bad("{'name':'','tasks':[{'taskReferenceName':'a','type':'T'}]}", NULL, NULL,
                "has no name", NULL);
    compile_bad("{'name':7,'tasks':[{'taskReferenceName':'a','type':'T'}]}", NULL, NULL,
                "has no name", NULL);
}

static void test_err_no_tasks(void **state)
{
    compile_bad("{'name':'w'}", "x.json", NULL, "x.json: workflow 'w' has no tasks", NULL);
    compile_bad("{'name':'w','tasks':[]}", NULL, NULL, "workflow 'w' has no tasks", NULL);
    compile_bad("{'name':'w','tasks':{'a':1}}", NULL, NULL, "workflow 'w' has no tasks", NULL);
}

static void test_err_bad_version(void **state)
{
    compile_bad("{'name':'w','version':0,'tasks':[{'taskReferenceName':'a','type':'T'}]}", "x.json",
                NULL, "x.json: version must be a whole number >= 1", NULL);
    compile_bad("{'name':'w','version':'2','tasks':[{'taskReferenceName':'a','type':'T'}]}", NULL,
                NULL, "version must be a whole number", NULL);
    compile_bad("{'name':'w','version':1.5,'tasks':[{'taskReferenceName':'a','type':'T'}]}", NULL,
                NULL, "version must be a whole number", NULL);
}

static void test_err_missing_ref(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'},{'type':'T'}]}",
                "x.json", NULL, "x.json: task 2 has no taskReferenceName", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'','type':'T'}]}", NULL, NULL,
                "task 1 has no taskReferenceName", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':3,'type':'T'}]}", NULL, NULL,
                "task 1 has no taskReferenceName", NULL);
    compile_bad("{'name':'w','tasks':['a']}", NULL, NULL, "task 1 has no taskReferenceName", NULL);
}

/*
 * A nested list where one entry lacks its taskReferenceName must be
 * reported, not silently dropped (the other tasks of the list would never
 * be compiled or validated).
 */
static void test_err_missing_nested_ref(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'loop','type':'BOX','loopOver':["
                "{'taskReferenceName':'a','type':'T'},{'name':'b','type':'T'}]}]}",
                "x.json", NULL, "task 'loop': nested task 2 has no taskReferenceName", NULL);
}

static void test_err_duplicate_ref(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'},"
                "{'taskReferenceName':'a','type':'T'}]}",
                "x.json", NULL, "x.json: task 'a': duplicate taskReferenceName 'a'", NULL);
    /* across nesting levels too */
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'},"
                "{'taskReferenceName':'box','type':'BOX','cases':{'x':["
                "{'taskReferenceName':'a','type':'T'}]}}]}",
                NULL, NULL, "duplicate taskReferenceName 'a'", NULL);
}

static void test_err_ref_chars(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a.b','type':'T'}]}", "x.json", NULL,
                "task 'a.b': taskReferenceName may not contain '.'", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a b','type':'T'}]}", NULL, NULL,
                "may not contain", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a$','type':'T'}]}", NULL, NULL,
                "may not contain", NULL);
}

static void test_err_unknown_type(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'},"
                "{'taskReferenceName':'price','type':'LAMBDA'}]}",
                "order.json", NULL,
                "order.json: task 'price': unknown task type LAMBDA (no plugin provides it; "
                "searched: /opt/weft/plugins:/home/me/plugins)",
                NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':''}]}", NULL, NULL,
                "task 'a': type must be a non-empty string", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':5}]}", NULL, NULL,
                "type must be a non-empty string", NULL);
}

static void test_err_unknown_type_nothing_searched(void **state)
{
    def_env bare = {NULL, NULL, NULL, NULL, 0, NULL, NULL};
    json_object *j = J("{'name':'w','tasks':[{'taskReferenceName':'a','type':'X'}]}");
    def_workflow *wf = NULL;
    weft_error err = {0};
    assert_int_equal(def_compile(&bare, j, NULL, NULL, &wf, &err), WEFT_EINVAL);
    assert_null(wf);
    assert_has(err.msg, "unknown task type X");
    assert_has(err.msg, "searched: nothing");
}

static void test_err_bad_input(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T','inputParameters':[1]}]}",
                "x.json", NULL, "x.json: task 'a': inputParameters must be an object", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'inputParameters':'${workflow.input}'}]}",
                NULL, NULL, "inputParameters must be an object", NULL);
}

static void test_err_malformed_expression(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'inputParameters':{'x':'${workflow.input.x'}}]}",
                "x.json", NULL, "x.json: task 'a': inputParameters: ", "${workflow.input.x");
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'inputParameters':{'x':{'deep':['${}']}}}]}",
                NULL, NULL, "task 'a': inputParameters: ", NULL);
    compile_bad("{'name':'w','outputParameters':{'r':'${a.output'},"
                "'tasks':[{'taskReferenceName':'a','type':'T'}]}",
                "x.json", NULL, "x.json: outputParameters: ", NULL);
}

static void test_err_unknown_ref_in_expression(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'inputParameters':{'x':'total: ${fetch.output.n}'}}]}",
                "x.json", NULL, "x.json: task 'a': input refers to unknown task 'fetch'",
                "${fetch.output}");
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'},"
                "{'taskReferenceName':'b','type':'T','inputParameters':{'x':'${a.outptu.n}'}}]}",
                NULL, NULL, "task 'b': input unknown task field 'outptu'", NULL);
    compile_bad("{'name':'w','outputParameters':{'r':'${nope.output.x}'},"
                "'tasks':[{'taskReferenceName':'a','type':'T'}]}",
                "x.json", NULL, "x.json: outputParameters refers to unknown task 'nope'", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'inputParameters':{'x':'${secrets}'}}]}",
                NULL, NULL, "${secrets} needs a name", NULL);
}

static void test_refs_that_resolve(void **state)
{
    /* later tasks, nested tasks, loop iterations, workflow fields, secrets */
    def_workflow *wf = compile_ok(
        "{'name':'w','outputParameters':{'r':'${body__2.output.x}','id':'${workflow.workflowId}'},"
        "'tasks':[{'taskReferenceName':'a','type':'T','inputParameters':{"
        "'later':'${b.output}','nested':'${body.input.k}','iter':'${body__3.output}',"
        "'wf':'${workflow.input.x}','v':'${workflow.variables.v}',"
        "'s':'${secrets.TOKEN}','all':'${workflow}','st':'${a.status}','it':'${a.iteration}'}},"
        "{'taskReferenceName':'loop','type':'BOX','loopOver':[{'taskReferenceName':'body',"
        "'type':'T'}]},{'taskReferenceName':'b','type':'T'}]}");
    assert_non_null(by_ref(wf, "body"));
    /* "x__2" is not an iteration ref when there is no task "x" */
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'inputParameters':{'x':'${x__2.output}'}}]}",
                NULL, NULL, "unknown task 'x__2'", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'inputParameters':{'x':'${a__x.output}'}}]}",
                NULL, NULL, "unknown task 'a__x'", NULL);
}

/* Nested loops name iterations "body__1__2" (DESIGN.md: "__<n>" per enclosing loop). */
static void test_refs_nested_iteration(void **state)
{
    compile_ok("{'name':'w','tasks':[{'taskReferenceName':'outer','type':'BOX','loopOver':["
               "{'taskReferenceName':'inner','type':'BOX','loopOver':[{'taskReferenceName':'body',"
               "'type':'T'}]}]},{'taskReferenceName':'after','type':'T','inputParameters':{"
               "'x':'${body__1__2.output}','y':'${inner__3.output}'}}]}");
}

static void test_err_unknown_workflow_field(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'inputParameters':{'x':'${workflow.inputs.x}'}}]}",
                "x.json", NULL, "x.json: task 'a': input unknown workflow field 'inputs'",
                "${workflow.inputs}");
}

static void test_err_bad_retry_logic(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'taskDefinition':{'retryLogic':'RANDOM'}}]}",
                "x.json", NULL, "x.json: task 'a': retryLogic 'RANDOM'",
                "FIXED, LINEAR_BACKOFF or EXPONENTIAL_BACKOFF");
}

static void test_err_bad_retry_count(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'taskDefinition':{'retryCount':-1}}]}",
                "x.json", NULL, "task 'a': retryCount must be a whole number >= 0", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'taskDefinition':{'retryCount':'3'}}]}",
                NULL, NULL, "retryCount must be a whole number", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T','taskDefinition':7}]}",
                NULL, NULL, "task 'a': taskDefinition must be an object", NULL);
}

static void test_err_bad_duration(void **state)
{
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'taskDefinition':{'retryDelaySeconds':'soon'}}]}",
                "x.json", NULL, "x.json: task 'a': retryDelaySeconds: ", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'taskDefinition':{'timeoutSeconds':-5}}]}",
                NULL, NULL, "task 'a': timeoutSeconds: ", NULL);
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
                "'taskDefinition':{'maxRetryDelaySeconds':'3 weeks'}}]}",
                NULL, NULL, "maxRetryDelaySeconds: ", NULL);
    compile_bad("{'name':'w','timeoutSeconds':'later','tasks':[{'taskReferenceName':'a',"
                "'type':'T'}]}",
                "x.json", NULL, "x.json: timeoutSeconds: ", NULL);
}

static void test_err_validate_callback(void **state)
{
    json_object *lines = J("{'a':3,'v':7}");
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'},"
                "{'taskReferenceName':'v','type':'PICKY','inputParameters':{'bad':1}}]}",
                "order.lua", lines, "order.lua:7: task 'v': field 'bad' is not allowed", NULL);
    /* no line for the ref: no line number */
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'v2','type':'PICKY',"
                "'inputParameters':{'bad':1}}]}",
                "order.lua", lines, "order.lua: task 'v2': field 'bad' is not allowed", NULL);
    /* no source: the workflow name */
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'v','type':'PICKY',"
                "'inputParameters':{'bad':1}}]}",
                NULL, NULL, "w: task 'v': field 'bad' is not allowed", NULL);
    /* nested tasks are validated too, with their own line */
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'BOX','branches':["
                "[{'taskReferenceName':'x','type':'T'}],"
                "[{'taskReferenceName':'v','type':'PICKY','inputParameters':{'bad':1}}]]}]}",
                "order.lua", lines, "order.lua:7: task 'v': field 'bad' is not allowed", NULL);
    /* line numbers also go on the other task errors */
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'NOPE'}]}", "order.lua",
                lines, "order.lua:3: task 'a': unknown task type NOPE", NULL);
}

static void test_lines(void **state)
{
    json_object *lines = J("{'a':3,'b':9}");
    def_workflow *wf = NULL;
    weft_error err;
    assert_int_equal(compile_src("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T'},"
                                 "{'taskReferenceName':'b','type':'T'},"
                                 "{'taskReferenceName':'c','type':'T'}]}",
                                 "w.lua", lines, &wf, &err),
                     0);
    assert_int_equal(by_ref(wf, "a")->line, 3);
    assert_int_equal(by_ref(wf, "b")->line, 9);
    assert_int_equal(by_ref(wf, "c")->line, 0);
}

/*
 * Null where a policy string is expected is bad input like any other: it
 * must never crash the loader (DESIGN.md §8). Reading null as "not set" or
 * rejecting it with a message are both fine.
 */
static void test_null_policy_fields(void **state)
{
    static const char *const defs[] = {
        "{'name':'w','timeoutPolicy':null,'tasks':[{'taskReferenceName':'a','type':'T'}]}",
        "{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
        "'taskDefinition':{'retryLogic':null}}]}",
        "{'name':'w','tasks':[{'taskReferenceName':'a','type':'T',"
        "'taskDefinition':{'timeoutPolicy':null}}]}",
    };
    size_t i;
    int bad = 0;
    for (i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        char msg[WEFT_ERROR_MAX];
        int rc = compile_in_child(defs[i], msg, sizeof msg);
        if (rc == 3)
            print_error("def_compile crashed on %s\n", defs[i]);
        else if (rc == 2)
            print_error("def_compile failed on %s with another code than WEFT_EINVAL: %s\n",
                        defs[i], msg);
        else if (rc == 1 && !*msg)
            print_error("def_compile rejected %s without a message\n", defs[i]);
        bad += rc >= 2 || (rc == 1 && !*msg);
    }
    assert_int_equal(bad, 0);
}

/* ---- nested lists by shape ---- */

static void test_nested_array(void **state)
{
    def_workflow *wf =
        compile_ok("{'name':'w','tasks':[{'taskReferenceName':'loop','type':'BOX','loopOver':["
                   "{'taskReferenceName':'x','type':'T'},{'taskReferenceName':'y','type':'T'}]},"
                   "{'taskReferenceName':'after','type':'T'}]}");
    def_task *loop = by_ref(wf, "loop"), *x = by_ref(wf, "x"), *y = by_ref(wf, "y");
    assert_int_equal(wf->root.n, 2);
    assert_int_equal(loop->nchildren, 1);
    assert_int_equal(loop->children[0]->n, 2);
    assert_ptr_equal(loop->children[0]->owner, loop);
    assert_ptr_equal(loop->children[0]->tasks[0], x);
    assert_ptr_equal(x->list, loop->children[0]);
    assert_int_equal(y->index, 1);
    assert_ptr_equal(def_next(x), y);
    assert_null(def_next(y));
    assert_ptr_equal(def_next(loop), by_ref(wf, "after"));
    assert_int_equal(wf->all.len, 4);
}

static void test_nested_array_of_arrays(void **state)
{
    def_workflow *wf =
        compile_ok("{'name':'w','tasks':[{'taskReferenceName':'fork','type':'BOX','forkTasks':["
                   "[{'taskReferenceName':'a1','type':'T'},{'taskReferenceName':'a2','type':'T'}],"
                   "[{'taskReferenceName':'b1','type':'T'}], 'not a branch', []]}]}");
    def_task *fork = by_ref(wf, "fork");
    assert_int_equal(fork->nchildren, 2);
    assert_int_equal(fork->children[0]->n, 2);
    assert_int_equal(fork->children[1]->n, 1);
    assert_ptr_equal(fork->children[1]->tasks[0], by_ref(wf, "b1"));
    assert_ptr_equal(by_ref(wf, "a2")->list->owner, fork);
    assert_ptr_equal(by_ref(wf, "b1")->list->owner, fork);
}

static void test_nested_object_of_arrays(void **state)
{
    def_workflow *wf = compile_ok(
        "{'name':'w','tasks':[{'taskReferenceName':'d','type':'BOX','decisionCases':{"
        "'big':[{'taskReferenceName':'big1','type':'T'}],"
        "'small':[{'taskReferenceName':'s1','type':'T'},{'taskReferenceName':'s2','type':'T'}],"
        "'none':[], 'odd':5},"
        "'defaultCase':[{'taskReferenceName':'dflt','type':'T'}]}]}");
    def_task *d = by_ref(wf, "d");
    size_t i, total = 0;
    assert_int_equal(d->nchildren, 3); /* big, small, defaultCase */
    for (i = 0; i < d->nchildren; i++) {
        assert_ptr_equal(d->children[i]->owner, d);
        total += d->children[i]->n;
    }
    assert_int_equal(total, 4);
    assert_ptr_equal(def_next(by_ref(wf, "s1")), by_ref(wf, "s2"));
    assert_ptr_equal(by_ref(wf, "dflt")->list->owner, d);
}

static void test_nested_deep(void **state)
{
    def_workflow *wf =
        compile_ok("{'name':'w','tasks':[{'taskReferenceName':'outer','type':'BOX','loopOver':["
                   "{'taskReferenceName':'inner','type':'BOX','cases':{'k':["
                   "{'taskReferenceName':'leaf','type':'T'}]}}]}]}");
    def_task *leaf = by_ref(wf, "leaf"), *inner = by_ref(wf, "inner");
    assert_ptr_equal(leaf->list->owner, inner);
    assert_ptr_equal(inner->list->owner, by_ref(wf, "outer"));
}

static void test_nested_ignored_fields(void **state)
{
    /* tasks in inputParameters / taskDefinition / subWorkflowParam are data */
    def_workflow *wf =
        compile_ok("{'name':'w','tasks':[{'taskReferenceName':'a','type':'BOX',"
                   "'inputParameters':{'list':[{'taskReferenceName':'p','type':'NOPE'}]},"
                   "'taskDefinition':{'x':[{'taskReferenceName':'q','type':'NOPE'}]},"
                   "'subWorkflowParam':{'workflowDefinition':{'name':'c','tasks':["
                   "{'taskReferenceName':'r','type':'NOPE'}]},'tasks':[{'taskReferenceName':'s',"
                   "'type':'NOPE'}]}}]}");
    def_task *a = by_ref(wf, "a");
    json_object *list =
        json_object_object_get(json_object_object_get(a->json, "inputParameters"), "list");
    assert_int_equal(a->nchildren, 0);
    assert_int_equal(wf->all.len, 1);
    assert_null(wu_map_get(wf->by_ref, "p"));
    assert_null(wu_map_get(wf->by_ref, "q"));
    assert_null(wu_map_get(wf->by_ref, "r"));
    assert_null(def_of_json(json_object_array_get_idx(list, 0)));
}

static void test_nested_not_tasks(void **state)
{
    /* arrays of plain objects, a single task object, strings: not lists */
    def_workflow *wf = compile_ok(
        "{'name':'w','tasks':[{'taskReferenceName':'a','type':'BOX',"
        "'joinOn':['x','y'],'headers':[{'k':'v'}],'one':{'taskReferenceName':'z','type':'NOPE'},"
        "'meta':{'list':[1,2]}}]}");
    assert_int_equal(by_ref(wf, "a")->nchildren, 0);
    assert_int_equal(wf->all.len, 1);
}

/* ---- def_compile_dynamic ---- */

static def_workflow *dyn_base(void)
{
    return compile_ok("{'name':'w','tasks':[{'taskReferenceName':'fork','type':'BOX'},"
                      "{'taskReferenceName':'join','type':'T'}]}");
}

static void test_dynamic_ok(void **state)
{
    def_workflow *wf = dyn_base();
    def_dyn *dyn = &G.dyn;
    def_task *fork = by_ref(wf, "fork"), *d = NULL, *d2 = NULL;
    json_object *node = J("{'taskReferenceName':'d1','type':'T','inputParameters':"
                          "{'x':'${workflow.input.x}'},'taskDefinition':{'retryCount':2}}");
    json_object *node2 = J("{'taskReferenceName':'d2','type':'BOX','loopOver':["
                           "{'taskReferenceName':'d2body','type':'T'}]}");
    weft_error err = {0};
    size_t before = wf->all.len;
    assert_int_equal(def_compile_dynamic(&env, wf, fork, node, dyn, &d, &err), 0);
    assert_non_null(d);
    assert_string_equal(d->ref, "d1");
    assert_ptr_equal(d->type, &type_t);
    assert_int_equal(d->retry_count, 2);
    assert_non_null(d->input);
    assert_ptr_equal(d->list->owner, fork);
    assert_int_equal(d->list->n, 1);
    assert_int_equal(d->index, 0);
    assert_null(def_next(d));
    assert_ptr_equal(def_of_json(node), d);
    /* nested lists inside a dynamic task */
    assert_int_equal(def_compile_dynamic(&env, wf, fork, node2, dyn, &d2, &err), 0);
    assert_int_equal(d2->nchildren, 1);
    assert_string_equal(d2->children[0]->tasks[0]->ref, "d2body");
    assert_ptr_equal(d2->children[0]->owner, d2);
    /* the shared definition is untouched */
    assert_int_equal(wf->all.len, before);
    assert_null(wu_map_get(wf->by_ref, "d1"));
    assert_null(wu_map_get(wf->by_ref, "d2body"));
    assert_int_equal(dyn->tasks.len, 3);
    def_dynamic_free(dyn);
    memset(dyn, 0, sizeof *dyn);
    assert_null(def_of_json(node)); /* freeing detaches the node */
}

static void test_dynamic_clash(void **state)
{
    def_workflow *wf = dyn_base();
    def_dyn *dyn = &G.dyn;
    def_task *d = (def_task *)1;
    json_object *node = J("{'taskReferenceName':'join','type':'T'}");
    weft_error err = {0};
    assert_int_equal(def_compile_dynamic(&env, wf, by_ref(wf, "fork"), node, dyn, &d, &err),
                     WEFT_EINVAL);
    assert_null(d);
    assert_has(err.msg, "task 'join': duplicate taskReferenceName 'join'");
    /* undone: the node is not attached and nothing was kept */
    assert_null(def_of_json(node));
    assert_int_equal(dyn->tasks.len, 0);
    /* the static task keeps its node */
    assert_ptr_equal(def_of_json(by_ref(wf, "join")->json), by_ref(wf, "join"));
}

static void test_dynamic_undo(void **state)
{
    def_workflow *wf = dyn_base();
    def_dyn *dyn = &G.dyn;
    def_task *ok = NULL, *d = (def_task *)1;
    json_object *good = J("{'taskReferenceName':'g','type':'T'}");
    /* the outer task and its first nested task compile; the second nested one fails */
    json_object *bad = J("{'taskReferenceName':'outer','type':'BOX','loopOver':["
                         "{'taskReferenceName':'in1','type':'T'},"
                         "{'taskReferenceName':'in2','type':'NOPE'}]}");
    json_object *in1 = json_object_array_get_idx(json_object_object_get(bad, "loopOver"), 0);
    weft_error err = {0};
    assert_int_equal(def_compile_dynamic(&env, wf, by_ref(wf, "fork"), good, dyn, &ok, &err), 0);
    assert_int_equal(dyn->tasks.len, 1);
    assert_int_equal(def_compile_dynamic(&env, wf, by_ref(wf, "fork"), bad, dyn, &d, &err),
                     WEFT_EINVAL);
    assert_null(d);
    assert_has(err.msg, "task 'in2': unknown task type NOPE");
    assert_int_equal(dyn->tasks.len, 1);
    assert_ptr_equal(dyn->tasks.items[0], ok);
    assert_null(def_of_json(bad));
    assert_null(def_of_json(in1));
    assert_ptr_equal(def_of_json(good), ok);
    /* a missing ref */
    {
        json_object *noref = J("{'type':'T'}");
        assert_int_equal(def_compile_dynamic(&env, wf, by_ref(wf, "fork"), noref, dyn, &d, &err),
                         WEFT_EINVAL);
        assert_has(err.msg, "task 'fork': nested task 1 has no taskReferenceName");
    }
    assert_int_equal(dyn->tasks.len, 1);
}

/* ---- def_retry_delay ---- */

static def_task *policy_task(def_workflow **wf, const char *td)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{'name':'w','tasks':[{'taskReferenceName':'a','type':'T','taskDefinition':%s}]}", td);
    *wf = compile_ok(text);
    return by_ref(*wf, "a");
}

static void test_retry_fixed(void **state)
{
    def_workflow *wf;
    def_task *t = policy_task(&wf, "{'retryCount':3,'retryDelaySeconds':2}");
    assert_int_equal(def_retry_delay(t, 1), 2000);
    assert_int_equal(def_retry_delay(t, 2), 2000);
    assert_int_equal(def_retry_delay(t, 3), 2000);
    assert_int_equal(def_retry_delay(t, 0), 2000);
    /* no delay given */
    t = policy_task(&wf, "{'retryCount':1}");
    assert_int_equal(def_retry_delay(t, 1), t->retry_delay_ms);
    assert_true(t->retry_delay_ms >= 0);
    t = policy_task(&wf, "{'retryCount':1,'retryDelaySeconds':0}");
    assert_int_equal(def_retry_delay(t, 1), 0);
}

static void test_retry_linear(void **state)
{
    def_workflow *wf;
    def_task *t = policy_task(&wf, "{'retryLogic':'LINEAR_BACKOFF','retryDelaySeconds':2,"
                                   "'backoffScaleFactor':3}");
    assert_int_equal(def_retry_delay(t, 1), 6000);
    assert_int_equal(def_retry_delay(t, 2), 12000);
    assert_int_equal(def_retry_delay(t, 3), 18000);
    t = policy_task(&wf, "{'retryLogic':'LINEAR_BACKOFF','retryDelaySeconds':'500ms'}");
    assert_int_equal(def_retry_delay(t, 1), 500);
    assert_int_equal(def_retry_delay(t, 4), 2000);
}

static void test_retry_exponential(void **state)
{
    def_workflow *wf;
    def_task *t = policy_task(&wf, "{'retryLogic':'EXPONENTIAL_BACKOFF','retryDelaySeconds':1}");
    assert_int_equal(def_retry_delay(t, 1), 1000);
    assert_int_equal(def_retry_delay(t, 2), 2000);
    assert_int_equal(def_retry_delay(t, 3), 4000);
    assert_int_equal(def_retry_delay(t, 6), 32000);
}

static void test_retry_max_delay(void **state)
{
    def_workflow *wf;
    def_task *t = policy_task(&wf, "{'retryLogic':'EXPONENTIAL_BACKOFF','retryDelaySeconds':1,"
                                   "'maxRetryDelaySeconds':5}");
    assert_int_equal(def_retry_delay(t, 3), 4000);
    assert_int_equal(def_retry_delay(t, 4), 5000);
    assert_int_equal(def_retry_delay(t, 30), 5000);
    t = policy_task(&wf, "{'retryLogic':'LINEAR_BACKOFF','retryDelaySeconds':10,"
                         "'maxRetryDelaySeconds':25}");
    assert_int_equal(def_retry_delay(t, 2), 20000);
    assert_int_equal(def_retry_delay(t, 3), 25000);
}

/* Many retries of an exponential backoff without a cap: huge, never negative. */
static void test_retry_exponential_no_overflow(void **state)
{
    def_workflow *wf;
    def_task *t = policy_task(&wf, "{'retryLogic':'EXPONENTIAL_BACKOFF','retryDelaySeconds':10}");
    int retry;
    int64_t prev = 0;
    for (retry = 1; retry <= 100; retry++) {
        int64_t d = def_retry_delay(t, retry);
        if (d < prev)
            fail_msg("retry %d: delay %lld is below the delay of retry %d (%lld)", retry,
                     (long long)d, retry - 1, (long long)prev);
        prev = d;
    }
}

static void test_retry_jitter(void **state)
{
    def_workflow *wf;
    def_task *t = policy_task(&wf, "{'retryDelaySeconds':1,'backoffJitterMs':100}");
    int i, above = 0;
    for (i = 0; i < 500; i++) {
        int64_t d = def_retry_delay(t, 1);
        assert_in_range(d, 1000, 1100);
        above += d > 1000;
    }
    assert_true(above > 0); /* there is jitter */
    t = policy_task(&wf, "{'retryDelaySeconds':1,'backoffJitterMs':-5}");
    assert_int_equal(t->jitter_ms, 0);
    assert_int_equal(def_retry_delay(t, 1), 1000);
}

/* Definition-time limits fail the definition, naming the file, ref and limit. */
static void test_limits(void **state)
{
    def_limits lim = def_limits_default;
    env.limits = &lim;
    /* retryCount: the default limit is 100 */
    compile_ok("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T','retryCount':100}]}");
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'a','type':'T','retryCount':101}]}",
                "w.json", NULL, "w.json: task 'a': retryCount 101 is over the limit of 100",
                "(max_retry_count)");
    /* tasks per definition, nested ones counted */
    lim.max_tasks = 3;
    compile_ok("{'name':'w','tasks':[{'taskReferenceName':'f','type':'BOX','forkTasks':["
               "[{'taskReferenceName':'a','type':'T'}],[{'taskReferenceName':'b','type':'T'}]]}]}");
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'f','type':'BOX','forkTasks':["
                "[{'taskReferenceName':'a','type':'T'}],[{'taskReferenceName':'b','type':'T'}]]},"
                "{'taskReferenceName':'c','type':'T'}]}",
                "w.json", NULL, "w.json: task 'c': the definition has more than 3 tasks",
                "(max_tasks)");
    /* branches of one task */
    lim = def_limits_default;
    lim.max_fork_width = 2;
    compile_bad("{'name':'w','tasks':[{'taskReferenceName':'f','type':'BOX','forkTasks':["
                "[{'taskReferenceName':'a','type':'T'}],[{'taskReferenceName':'b','type':'T'}],"
                "[{'taskReferenceName':'c','type':'T'}]]}]}",
                "w.json", NULL,
                "w.json: task 'f': 3 branches (nested task lists) is over the limit of 2",
                "(max_fork_width)");
    /* the definition's initial variables */
    lim = def_limits_default;
    lim.max_variables = 16;
    compile_ok("{'name':'w','variables':{'a':1},'tasks':[{'taskReferenceName':'a','type':'T'}]}");
    compile_bad("{'name':'w','variables':{'a':'0123456789'},'tasks':[{'taskReferenceName':'a',"
                "'type':'T'}]}",
                "w.json", NULL, "w.json: variables take 18 bytes, over the limit of 16",
                "(max_variables_size)");
    env.limits = NULL;
}

/* ---- allocation failures ---- */

static json_object *no_value(void *ud, const char *root, const char *field)
{
    return NULL;
}

/* A compiled task as text, what it points at and its input evaluated included. */
static void print_task(wu_buf *b, const def_task *t)
{
    char line[1024];
    json_object *in = t->input ? ex_eval(t->input, no_value, NULL) : NULL;
    size_t i;
    snprintf(line, sizeof line,
             "%s name=%s type=%s queue=%s owner=%s index=%zu line=%d self=%d optional=%d "
             "retry=%d/%d/%lld/%lld/%lld/%g timeout=%lld/%lld/%d start=%lld limit=%d/%lld/%d "
             "secrets=%d input=%s children=",
             t->ref, t->name, t->type_name, t->queue, t->list->owner ? t->list->owner->ref : "-",
             t->index, t->line, def_of_json(t->json) == t, t->optional, t->retry_count,
             (int)t->retry_logic, (long long)t->retry_delay_ms, (long long)t->max_retry_delay_ms,
             (long long)t->jitter_ms, t->backoff_scale, (long long)t->timeout_ms,
             (long long)t->response_timeout_ms, (int)t->timeout_policy,
             (long long)t->start_delay_ms, t->limit.rate_count, (long long)t->limit.rate_per_ms,
             t->limit.concurrency, t->uses_secrets,
             t->input ? json_object_to_json_string_ext(in, JSON_C_TO_STRING_PLAIN) : "-");
    assert_int_equal(wu_buf_add(b, line, strlen(line)), 0);
    for (i = 0; i < t->nchildren; i++) {
        const def_list *l = t->children[i];
        size_t k;
        assert_ptr_equal(l->owner, t);
        for (k = 0; k < l->n; k++) {
            assert_ptr_equal(l->tasks[k]->list, l);
            assert_int_equal(wu_buf_add(b, k ? "," : "[", 1), 0);
            assert_int_equal(wu_buf_add(b, l->tasks[k]->ref, strlen(l->tasks[k]->ref)), 0);
        }
        assert_int_equal(wu_buf_add(b, "]", 2), 0);
    }
    assert_int_equal(wu_buf_add(b, "\n", 1), 0);
    json_object_put(in);
}

/* A compiled workflow as text (caller frees): every field and task. */
static char *print_wf(const def_workflow *wf)
{
    char head[512];
    wu_buf b = {0};
    json_object *out = wf->output ? ex_eval(wf->output, no_value, NULL) : NULL;
    size_t i;
    snprintf(
        head, sizeof head,
        "%s v%d source=%s refs=%d timeout=%lld/%d restartable=%d failure=%s remote=%zu "
        "output=%s root=%zu all=%zu by_ref=%zu json=%s\n",
        wf->name, wf->version, wf->source, wf->refs, (long long)wf->timeout_ms, wf->timeout_fails,
        wf->restartable, wf->failure_workflow ? json_object_get_string(wf->failure_workflow) : "-",
        wf->nremote, wf->output ? json_object_to_json_string(out) : "-", wf->root.n, wf->all.len,
        wu_map_count(wf->by_ref), json_object_to_json_string_ext(wf->json, JSON_C_TO_STRING_PLAIN));
    assert_int_equal(wu_buf_add(&b, head, strlen(head)), 0);
    for (i = 0; i < wf->all.len; i++) {
        const def_task *t = wf->all.items[i];
        assert_ptr_equal(wu_map_get(wf->by_ref, t->ref), t);
        print_task(&b, t);
    }
    json_object_put(out);
    return b.data;
}

/* What a def sweep works on. */
static struct {
    json_object *json, *lines, *node, *good;
    def_workflow *base, *wf;
    def_task *d;
    char *want;
    weft_error err;
} AF;

static const char AF_DEF[] =
    "{'name':'w','version':2,'timeoutSeconds':'2m','failureWorkflow':'cleanup',"
    "'variables':{'v':[1,{'k':'x'}]},'outputParameters':{'r':'${a.output.x}','t':'n=${b.output}'},"
    "'tasks':[{'taskReferenceName':'a','type':'T','inputParameters':{'x':'${workflow.input.x}',"
    "'s':'${secrets.KEY}','k':[1,'c'],'i':'a ${workflow.workflowId} b'},'taskDefinition':"
    "{'retryCount':2,'retryLogic':'LINEAR_BACKOFF','retryDelaySeconds':3,'timeoutSeconds':9,"
    "'responseTimeoutSeconds':4,'rateLimitPerFrequency':5,'concurrentExecLimit':2,"
    "'timeoutPolicy':'RETRY'}},{'taskReferenceName':'b','type':'BOX','loopOver':["
    "{'taskReferenceName':'b1','type':'T'},{'taskReferenceName':'b2','type':'PICKY',"
    "'optional':true,'startDelay':1}],'decisionCases':{'x':[{'taskReferenceName':'c1',"
    "'type':'T','inputParameters':{'p':'${b1.output}'}}]},'forkTasks':[[{'taskReferenceName':"
    "'f1','type':'T'}],[{'taskReferenceName':'f2','name':'ext','type':'T'}]]}]}";

static void af_compile_setup(void *ud)
{
    AF.wf = (def_workflow *)1;
    wu_err_clear(&AF.err);
}

static int af_compile_call(void *ud)
{
    return def_compile(&env, AF.json, "w.json", AF.lines, &AF.wf, &AF.err);
}

/* 0: the same compiled tree; an error: none, the caller's JSON untouched */
static int af_compile_check(void *ud, int rc, int failed)
{
    char *got;
    if (rc) {
        assert_null(AF.wf);
        assert_int_equal(AF.err.code, rc);
    } else {
        got = print_wf(AF.wf);
        assert_string_equal(got, AF.want);
        free(got);
    }
    assert_null(
        def_of_json(json_object_array_get_idx(json_object_object_get(AF.json, "tasks"), 0)));
    return 1;
}

static void af_compile_teardown(void *ud)
{
    if (AF.wf != (def_workflow *)1) def_unref(AF.wf);
    AF.wf = NULL;
}

/* The dynamic store before the call holds one task, "g". */
static void af_dynamic_setup(void *ud)
{
    weft_error err = {0};
    assert_int_equal(
        def_compile_dynamic(&env, AF.base, by_ref(AF.base, "b"), AF.good, &G.dyn, &AF.d, &err), 0);
    AF.d = (def_task *)1;
    wu_err_clear(&AF.err);
}

static int af_dynamic_call(void *ud)
{
    return def_compile_dynamic(&env, AF.base, by_ref(AF.base, "b"), AF.node, &G.dyn, &AF.d,
                               &AF.err);
}

/* 0: the same nodes; WEFT_ENOMEM: none kept, none attached */
static int af_dynamic_check(void *ud, int rc, int failed)
{
    wu_buf b = {0};
    size_t i;
    assert_ptr_equal(def_of_json(AF.good), G.dyn.tasks.items[0]);
    if (rc) {
        assert_null(AF.d);
        assert_int_equal(AF.err.code, WEFT_ENOMEM);
        assert_int_equal(G.dyn.tasks.len, 1);
        assert_int_equal(G.dyn.roots.len, 1);
        assert_null(def_of_json(AF.node));
        return 0;
    }
    assert_ptr_equal(def_of_json(AF.node), AF.d);
    assert_int_equal(G.dyn.roots.len, 2);
    for (i = 1; i < G.dyn.tasks.len; i++)
        print_task(&b, G.dyn.tasks.items[i]);
    assert_string_equal(b.data, AF.want);
    wu_buf_free(&b);
    return 1;
}

static void af_dynamic_teardown(void *ud)
{
    def_dynamic_free(&G.dyn);
    memset(&G.dyn, 0, sizeof G.dyn);
}

/* Every allocation of compiling a definition, and a dynamic task, fails in
 * turn: WEFT_ENOMEM and nothing made or changed, or the same tree. */
static void test_alloc_failures(void **state)
{
    static const af_case compile = {"def_compile",    af_compile_setup,    af_compile_call,
                                    af_compile_check, af_compile_teardown, NULL};
    static const af_case dynamic = {"def_compile_dynamic", af_dynamic_setup,    af_dynamic_call,
                                    af_dynamic_check,      af_dynamic_teardown, NULL};
    weft_error err = {0};
    wu_buf b = {0};
    size_t i;
    env.host = host_table();
    AF.json = J(AF_DEF);
    AF.lines = J("{'a':3,'b1':7}");
    assert_int_equal(def_compile(&env, AF.json, "w.json", AF.lines, &AF.base, &err), 0);
    track_wf(AF.base);
    AF.want = print_wf(AF.base);
    af_run(&compile, NULL);
    free(AF.want);

    /* refused (variables over the limit) whatever fails */
    {
        def_limits lim = def_limits_default;
        lim.max_variables = 16;
        env.limits = &lim;
        AF.json = J("{'name':'w','variables':{'v':'0123456789'},'tasks':[{'taskReferenceName':"
                    "'a','type':'T'}]}");
        AF.lines = NULL;
        assert_int_equal(af_run(&compile, NULL) > 0, 1);
        env.limits = NULL;
    }

    AF.good = J("{'taskReferenceName':'g','type':'T'}");
    AF.node = J("{'taskReferenceName':'d','type':'BOX','inputParameters':{'v':'${g.output.x}'},"
                "'taskDefinition':{'retryCount':1},'loopOver':[{'taskReferenceName':'d1',"
                "'type':'T'},{'taskReferenceName':'d2','type':'T'}]}");
    af_dynamic_setup(NULL);
    AF.d = NULL;
    assert_int_equal(af_dynamic_call(NULL), 0);
    for (i = 1; i < G.dyn.tasks.len; i++)
        print_task(&b, G.dyn.tasks.items[i]);
    AF.want = b.data;
    af_dynamic_teardown(NULL);
    af_run(&dynamic, NULL);
    free(AF.want);
    memset(&AF, 0, sizeof AF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_minimal, teardown),
        cmocka_unit_test_teardown(test_input_is_copied, teardown),
        cmocka_unit_test_teardown(test_ref_unref, teardown),
        cmocka_unit_test_teardown(test_workflow_fields, teardown),
        cmocka_unit_test_teardown(test_task_policy, teardown),
        cmocka_unit_test_teardown(test_task_retry_count_overrides, teardown),
        cmocka_unit_test_teardown(test_err_not_object, teardown),
        cmocka_unit_test_teardown(test_err_no_name, teardown),
        cmocka_unit_test_teardown(test_err_no_tasks, teardown),
        cmocka_unit_test_teardown(test_err_bad_version, teardown),
        cmocka_unit_test_teardown(test_err_missing_ref, teardown),
        cmocka_unit_test_teardown(test_err_missing_nested_ref, teardown),
        cmocka_unit_test_teardown(test_err_duplicate_ref, teardown),
        cmocka_unit_test_teardown(test_err_ref_chars, teardown),
        cmocka_unit_test_teardown(test_err_unknown_type, teardown),
        cmocka_unit_test_teardown(test_err_unknown_type_nothing_searched, teardown),
        cmocka_unit_test_teardown(test_err_bad_input, teardown),
        cmocka_unit_test_teardown(test_err_malformed_expression, teardown),
        cmocka_unit_test_teardown(test_err_unknown_ref_in_expression, teardown),
        cmocka_unit_test_teardown(test_refs_that_resolve, teardown),
        cmocka_unit_test_teardown(test_refs_nested_iteration, teardown),
        cmocka_unit_test_teardown(test_err_unknown_workflow_field, teardown),
        cmocka_unit_test_teardown(test_err_bad_retry_logic, teardown),
        cmocka_unit_test_teardown(test_err_bad_retry_count, teardown),
        cmocka_unit_test_teardown(test_err_bad_duration, teardown),
        cmocka_unit_test_teardown(test_err_validate_callback, teardown),
        cmocka_unit_test_teardown(test_lines, teardown),
        cmocka_unit_test_teardown(test_null_policy_fields, teardown),
        cmocka_unit_test_teardown(test_nested_array, teardown),
        cmocka_unit_test_teardown(test_nested_array_of_arrays, teardown),
        cmocka_unit_test_teardown(test_nested_object_of_arrays, teardown),
        cmocka_unit_test_teardown(test_nested_deep, teardown),
        cmocka_unit_test_teardown(test_nested_ignored_fields, teardown),
        cmocka_unit_test_teardown(test_nested_not_tasks, teardown),
        cmocka_unit_test_teardown(test_dynamic_ok, teardown),
        cmocka_unit_test_teardown(test_dynamic_clash, teardown),
        cmocka_unit_test_teardown(test_dynamic_undo, teardown),
        cmocka_unit_test_teardown(test_retry_fixed, teardown),
        cmocka_unit_test_teardown(test_retry_linear, teardown),
        cmocka_unit_test_teardown(test_retry_exponential, teardown),
        cmocka_unit_test_teardown(test_retry_max_delay, teardown),
        cmocka_unit_test_teardown(test_retry_exponential_no_overflow, teardown),
        cmocka_unit_test_teardown(test_retry_jitter, teardown),
        cmocka_unit_test_teardown(test_limits, teardown),
        cmocka_unit_test_teardown(test_alloc_failures, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Tests of engine.c with the real plugins of the build tree (lambda,
 * decision, fork_join, flow). Skipped (exit 77) without WEFT_TOP_BUILDDIR.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/engine.h"

static char plugin_path[4096];

static struct {
    eng *e;
    json_object *js[32];
    size_t njs;
    def_workflow *defs[8];
    size_t ndefs;
    char *trace_buf;
    size_t trace_len;
    FILE *trace;
} F;

static int setup(void **state)
{
    eng_opts o = {plugin_path, NULL, NULL, NULL};
    weft_error err = {0};
    memset(&F, 0, sizeof F);
    F.trace = open_memstream(&F.trace_buf, &F.trace_len);
    o.trace = F.trace;
    if (eng_new(&o, &F.e, &err)) {
        print_error("eng_new: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    size_t i;
    eng_free(F.e);
    for (i = 0; i < F.ndefs; i++)
        def_unref(F.defs[i]);
    for (i = 0; i < F.njs; i++)
        json_object_put(F.js[i]);
    if (F.trace) fclose(F.trace);
    free(F.trace_buf);
    memset(&F, 0, sizeof F);
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

static def_workflow *load(const char *text)
{
    def_workflow *d = NULL;
    weft_error err = {0};
    if (eng_load_json(F.e, J(text), "test.json", &d, &err)) fail_msg("load: %s", err.msg);
    assert_non_null(d);
    assert_true(F.ndefs < sizeof F.defs / sizeof F.defs[0]);
    F.defs[F.ndefs++] = d;
    return d;
}

static xc_exec *start(const char *def_text, const char *input_text)
{
    xc_exec *x = NULL;
    weft_error err = {0};
    if (eng_start(F.e, load(def_text), input_text ? J(input_text) : NULL, &x, &err))
        fail_msg("start: %s", err.msg);
    assert_non_null(x);
    assert_int_equal(x->status, WEFT_WF_RUNNING);
    return x;
}

/* Start and run to the end; the workflow must end with `want`. */
static xc_exec *run(const char *def_text, const char *input_text, weft_wf_status want)
{
    xc_exec *x = start(def_text, input_text);
    weft_error err = {0};
    if (eng_run(F.e, x, &err)) fail_msg("eng_run: %s", err.msg);
    if (x->status != want)
        fail_msg("workflow ended %s (%s), want %s", weft_wf_status_name(x->status),
                 x->reason ? x->reason : "no reason", weft_wf_status_name(want));
    return x;
}

static xc_task *task(xc_exec *x, const char *ref)
{
    xc_task *t = xc_find_ref(x, ref);
    if (!t) fail_msg("no task '%s'", ref);
    return t;
}

#define LAMBDA(ref, script, input)                                                                 \
    "{'name':'" ref "','taskReferenceName':'" ref "','type':'LAMBDA',"                             \
    "'inputParameters':{'scriptExpression':'" script "'" input "}}"

static void test_chain(void **state)
{
    xc_exec *x =
        run("{'name':'chain','outputParameters':{'answer':'${b.output.result.sum}'},"
            "'tasks':[" LAMBDA("a", "return input.x * 2", ",'x':'${workflow.input.x}'") "," LAMBDA(
                "b", "return { sum = input.v + 1 }", ",'v':'${a.output.result}'") "]}",
            "{'x':5}", WEFT_WF_COMPLETED);
    assert_json(x->output, "{'answer':11}");
    assert_int_equal(x->tasks.len, 2);
    assert_int_equal(task(x, "a")->status, WEFT_TASK_COMPLETED);
    assert_json(task(x, "a")->output, "{'result':10}");
    assert_json(task(x, "b")->input, "{'scriptExpression':'return { sum = input.v + 1 }','v':10}");
    assert_true(task(x, "a")->seq < task(x, "b")->seq);
    assert_null(x->reason);

    /* no outputParameters: the last task's output */
    x = run("{'name':'chain2','tasks':[" LAMBDA("a", "return [[hi]]", "") "]}", NULL,
            WEFT_WF_COMPLETED);
    assert_json(x->output, "{'result':'hi'}");
}

static void test_trace(void **state)
{
    xc_exec *x =
        run("{'name':'traced','tasks':[" LAMBDA("a", "return 1", "") "]}", NULL, WEFT_WF_COMPLETED);
    char line[128];
    fflush(F.trace);
    assert_has(F.trace_buf, "traced: a (LAMBDA) SCHEDULED");
    assert_has(F.trace_buf, "traced: a (LAMBDA) COMPLETED");
    snprintf(line, sizeof line, "traced: workflow %s COMPLETED", x->id);
    assert_has(F.trace_buf, line);
}

static void test_fork_join(void **state)
{
    xc_exec *x = run(
        "{'name':'fj','tasks':[{'name':'fork','taskReferenceName':'fork','type':'FORK_JOIN',"
        "'forkTasks':[[" LAMBDA("a1", "return 1", "") "," LAMBDA(
            "a2", "return input.v + 10",
            ",'v':'${a1.output.result}'") "],"
                                          "[" LAMBDA("b1", "return [[b]]",
                                                     "") "]]},"
                                                         "{'name':'join','taskReferenceName':'join'"
                                                         ",'type':'JOIN','joinOn':['a2','b1']}]}",
        NULL, WEFT_WF_COMPLETED);
    assert_json(task(x, "join")->output, "{'a2':{'result':11},'b1':{'result':'b'}}");
    assert_json(x->output, "{'a2':{'result':11},'b1':{'result':'b'}}");
    assert_int_equal(task(x, "fork")->status, WEFT_TASK_COMPLETED);
    assert_int_equal(task(x, "join")->status, WEFT_TASK_COMPLETED);
    assert_int_equal(x->tasks.len, 5);
    /* the join ends after both branches */
    assert_true(task(x, "join")->ended_ms >= task(x, "a2")->ended_ms);
    assert_true(task(x, "join")->ended_ms >= task(x, "b1")->ended_ms);
}

static const char *DECISION_DEF =
    "{'name':'dec','tasks':[{'name':'d','taskReferenceName':'d','type':'DECISION',"
    "'caseValueParam':'kind','inputParameters':{'kind':'${workflow.input.kind}'},"
    "'decisionCases':{'big':[" LAMBDA(
        "big", "return [[B]]",
        "") "],"
            "'small':[" LAMBDA(
                "small", "return [[S]]",
                "") "]},"
                    "'defaultCase':[" LAMBDA("other", "return [[O]]", "") "]}," LAMBDA(
                        "after", "return input.p", ",'p':'${d.output.selectedCase}'") "]}";

static void test_decision(void **state)
{
    xc_exec *x = run(DECISION_DEF, "{'kind':'big'}", WEFT_WF_COMPLETED);
    assert_json(task(x, "d")->output, "{'selectedCase':'big'}");
    assert_json(task(x, "big")->output, "{'result':'B'}");
    assert_null(xc_find_ref(x, "small"));
    assert_null(xc_find_ref(x, "other"));
    assert_json(x->output, "{'result':'big'}");
    assert_int_equal(x->tasks.len, 3);

    x = run(DECISION_DEF, "{'kind':'huge'}", WEFT_WF_COMPLETED);
    assert_json(task(x, "d")->output, "{'selectedCase':'huge'}");
    assert_json(task(x, "other")->output, "{'result':'O'}");
    assert_null(xc_find_ref(x, "big"));
    assert_json(x->output, "{'result':'huge'}");
}

static void test_decision_expression(void **state)
{
    const char *def =
        "{'name':'dexp','tasks':[{'name':'d','taskReferenceName':'d','type':'DECISION',"
        "'caseExpression':'if input.n > 10 then return [[big]] end return [[small]]',"
        "'inputParameters':{'n':'${workflow.input.n}'},"
        "'decisionCases':{'big':[" LAMBDA("big", "return 1",
                                          "") "],"
                                              "'small':[" LAMBDA("small", "return 2", "") "]}}]}";
    xc_exec *x = run(def, "{'n':50}", WEFT_WF_COMPLETED);
    assert_json(task(x, "d")->output, "{'selectedCase':'big'}");
    assert_null(xc_find_ref(x, "small"));
    x = run(def, "{'n':5}", WEFT_WF_COMPLETED);
    assert_json(task(x, "d")->output, "{'selectedCase':'small'}");
    assert_non_null(xc_find_ref(x, "small"));
    assert_null(xc_find_ref(x, "big"));
}

static void test_switch(void **state)
{
    xc_exec *x =
        run("{'name':'sw','tasks':[{'name':'s','taskReferenceName':'s','type':'SWITCH',"
            "'evaluatorType':'value-param','expression':'kind',"
            "'inputParameters':{'kind':'${workflow.input.kind}'},"
            "'decisionCases':{'a':[" LAMBDA("ca", "return 1", "") "]},"
                                                                  "'defaultCase':[" LAMBDA(
                                                                      "cd", "return 2", "") "]}]}",
            "{'kind':'a'}", WEFT_WF_COMPLETED);
    assert_json(task(x, "s")->output, "{'selectedCase':'a','evaluationResult':['a']}");
    assert_non_null(xc_find_ref(x, "ca"));
    assert_null(xc_find_ref(x, "cd"));
}

static void test_nested_loops(void **state)
{
    xc_exec *x =
        run("{'name':'nest','tasks':[{'name':'outer','taskReferenceName':'outer','type':'DO_WHILE',"
            "'loopCondition':'return input.iteration < 2','loopOver':["
            "{'name':'inner','taskReferenceName':'inner','type':'DO_WHILE',"
            "'loopCondition':'return input.iteration < 3','loopOver':[" LAMBDA("leaf", "return 1",
                                                                               "") "]}]}]}",
            NULL, WEFT_WF_COMPLETED);
    assert_int_equal(task(x, "leaf__1__3")->status, WEFT_TASK_COMPLETED);
    assert_int_equal(task(x, "leaf__2__3")->status, WEFT_TASK_COMPLETED);
    assert_null(xc_find_ref(x, "leaf__2__4"));
    assert_null(xc_find_ref(x, "leaf__3__1"));
    assert_int_equal(task(x, "inner__2")->status, WEFT_TASK_COMPLETED);
    assert_int_equal(x->tasks.len, 1 + 2 * (1 + 3));
}

static void test_workflow_timeout(void **state)
{
    xc_exec *x = run("{'name':'slow','timeoutSeconds':'100ms','tasks':[{'name':'w',"
                     "'taskReferenceName':'hold','type':'WAIT'}]}",
                     NULL, WEFT_WF_TIMED_OUT);
    assert_has(x->reason, "workflow timed out");
    assert_int_equal(task(x, "hold")->status, WEFT_TASK_CANCELED);
    assert_true(x->ended_ms - x->created_ms >= 100);
}

static void test_task_timeout(void **state)
{
    xc_exec *x = run("{'name':'slow','tasks':[{'name':'w','taskReferenceName':'hold',"
                     "'type':'WAIT','taskDefinition':{'timeoutSeconds':'50ms'}}]}",
                     NULL, WEFT_WF_TIMED_OUT);
    assert_int_equal(task(x, "hold")->status, WEFT_TASK_TIMED_OUT);
    assert_has(task(x, "hold")->reason, "timed out");
    assert_has(x->reason, "task 'hold'");
}

static void test_do_while(void **state)
{
    xc_exec *x =
        run("{'name':'loop','tasks':[{'name':'loop','taskReferenceName':'loop','type':'DO_WHILE',"
            "'loopCondition':'return input.iteration < 3 and input.step.result == [[ok]]',"
            "'loopOver':[" LAMBDA("step", "return [[ok]]", "") "]}," LAMBDA(
                "after", "return input.l.iteration", ",'l':'${loop.output}'") "]}",
            NULL, WEFT_WF_COMPLETED);
    xc_task *loop = task(x, "loop");
    assert_int_equal(loop->status, WEFT_TASK_COMPLETED);
    assert_json(loop->output, "{'iteration':3,'step':{'result':'ok'}}");
    assert_int_equal(task(x, "step__1")->iteration, 1);
    assert_int_equal(task(x, "step__2")->iteration, 2);
    assert_int_equal(task(x, "step__3")->iteration, 3);
    assert_int_equal(task(x, "step__3")->status, WEFT_TASK_COMPLETED);
    assert_null(xc_find_ref(x, "step__4"));
    assert_json(x->output, "{'result':3}");
    assert_int_equal(x->tasks.len, 5);
}

static void test_do_while_max_iterations(void **state)
{
    xc_exec *x =
        run("{'name':'loop','tasks':[{'name':'loop','taskReferenceName':'loop','type':'DO_WHILE',"
            "'loopCondition':'return true','maxIterations':2,"
            "'loopOver':[" LAMBDA("step", "return 1", "") "]}]}",
            NULL, WEFT_WF_COMPLETED);
    assert_non_null(xc_find_ref(x, "step__2"));
    assert_null(xc_find_ref(x, "step__3"));
    assert_int_equal(
        json_object_get_int(json_object_object_get(task(x, "loop")->output, "iteration")), 2);
}

/* Inside iteration n, ${loop.output.iteration} is n (as in Conductor). */
static void test_do_while_iteration_visible(void **state)
{
    xc_exec *x = run(
        "{'name':'loop','tasks':[{'name':'loop','taskReferenceName':'loop','type':'DO_WHILE',"
        "'loopCondition':'return input.iteration < 3',"
        "'loopOver':[" LAMBDA("step", "return input.i", ",'i':'${loop.output.iteration}'") "]}]}",
        NULL, WEFT_WF_COMPLETED);
    assert_json(task(x, "step__1")->output, "{'result':1}");
    assert_json(task(x, "step__2")->output, "{'result':2}");
    assert_json(task(x, "step__3")->output, "{'result':3}");
}

static void test_dynamic_fork(void **state)
{
    xc_exec *x =
        run("{'name':'dyn','tasks':[" LAMBDA(
                "gen",
                "return { { ref = [[d1]], type = [[LAMBDA]], script = [[return 1]] },"
                " { ref = [[d2]], type = [[LAMBDA]], input = { v = input.base },"
                " script = [[return input.v * 2]] } }",
                ",'base':'${workflow.input.base}'") ","
                                                    "{'name':'fan','taskReferenceName':'fan','type'"
                                                    ":'FORK_JOIN_DYNAMIC',"
                                                    "'dynamicForkTasksParam':'dynamicTasks',"
                                                    "'inputParameters':{'dynamicTasks':'${gen."
                                                    "output.result}'}},"
                                                    "{'name':'join','taskReferenceName':'join','"
                                                    "type':'JOIN','joinOn':[]}]}",
            "{'base':21}", WEFT_WF_COMPLETED);
    assert_json(task(x, "fan")->output, "{'forkedTasks':['d1','d2']}");
    assert_json(task(x, "join")->output, "{'d1':{'result':1},'d2':{'result':42}}");
    assert_json(x->output, "{'d1':{'result':1},'d2':{'result':42}}");
    assert_non_null(task(x, "d1")->dyn_json);
    assert_int_equal(task(x, "d2")->status, WEFT_TASK_COMPLETED);
    assert_int_equal(x->tasks.len, 5);
}

static const char *SUB_DEF =
    "{'name':'parent','tasks':[{'name':'sub','taskReferenceName':'sub','type':'SUB_WORKFLOW',"
    "'inputParameters':{'n':'${workflow.input.n}'},"
    "'subWorkflowParam':{'workflowDefinition':{'name':'child','tasks':[" LAMBDA(
        "c1", "%s",
        ",'n':'${workflow.input.n}'") "]}}}," LAMBDA("after", "return input.r",
                                                     ",'r':'${sub.output.result}'") "]}";

static void test_sub_workflow(void **state)
{
    char def[2048];
    xc_exec *x;
    xc_task *sub;
    json_object *id;
    snprintf(def, sizeof def, SUB_DEF, "return input.n + 1");
    x = run(def, "{'n':41}", WEFT_WF_COMPLETED);
    sub = task(x, "sub");
    assert_int_equal(sub->status, WEFT_TASK_COMPLETED);
    assert_non_null(sub->child_id);
    assert_string_not_equal(sub->child_id, x->id);
    assert_true(json_object_object_get_ex(sub->output, "subWorkflowId", &id));
    assert_string_equal(json_object_get_string(id), sub->child_id);
    assert_int_equal(json_object_get_int(json_object_object_get(sub->output, "result")), 42);
    assert_json(x->output, "{'result':42}");
}

static void test_sub_workflow_fails(void **state)
{
    char def[2048];
    xc_exec *x;
    xc_task *sub;
    snprintf(def, sizeof def, SUB_DEF, "error([[child broke]])");
    x = run(def, "{'n':1}", WEFT_WF_FAILED);
    sub = task(x, "sub");
    assert_int_equal(sub->status, WEFT_TASK_FAILED);
    assert_has(sub->reason, "child broke");
    assert_has(sub->reason, sub->child_id);
    assert_null(xc_find_ref(x, "after"));
    assert_has(x->reason, "task 'sub'");
    assert_has(x->reason, "child broke");
}

static void test_wait_for_signal(void **state)
{
    xc_exec *x = start(
        "{'name':'waiter','tasks':[{'name':'w','taskReferenceName':'hold',"
        "'type':'WAIT'}," LAMBDA("after", "return input.s", ",'s':'${hold.output.signal}'") "]}",
        NULL);
    weft_error err = {0};
    assert_int_equal(eng_run(F.e, x, &err), WEFT_ESTATE);
    assert_int_equal(err.code, WEFT_ESTATE);
    assert_has(err.msg, x->id);
    assert_has(err.msg, "hold (WAIT IN_PROGRESS)");
    assert_int_equal(x->status, WEFT_WF_RUNNING);
    assert_int_equal(task(x, "hold")->status, WEFT_TASK_IN_PROGRESS);

    /* bad deliveries */
    assert_int_equal(eng_complete_task(F.e, "no-such-id", "hold", WEFT_TASK_COMPLETED, NULL, &err),
                     WEFT_ENOTFOUND);
    assert_has(err.msg, "no-such-id");
    assert_int_equal(eng_complete_task(F.e, x->id, "nope", WEFT_TASK_COMPLETED, NULL, &err),
                     WEFT_ENOTFOUND);
    assert_has(err.msg, "'nope'");

    assert_int_equal(
        eng_complete_task(F.e, x->id, "hold", WEFT_TASK_COMPLETED, J("{'signal':'go'}"), &err), 0);
    assert_int_equal(task(x, "hold")->status, WEFT_TASK_COMPLETED);
    assert_int_equal(eng_run(F.e, x, &err), 0);
    assert_int_equal(x->status, WEFT_WF_COMPLETED);
    assert_json(x->output, "{'result':'go'}");

    /* a second signal finds the task done */
    assert_int_equal(eng_complete_task(F.e, x->id, "hold", WEFT_TASK_COMPLETED, NULL, &err),
                     WEFT_ESTATE);
}

/* A signal's payload is kept: the secrets the WAIT's input names are masked
 * in it (from the environment here, WEFT_SECRET_<NAME>). */
static void test_signal_masks_secrets(void **state)
{
    xc_exec *x = start("{'name':'waiter','tasks':[{'name':'w','taskReferenceName':'hold',"
                       "'type':'WAIT','inputParameters':{'k':'${secrets.ENG_T}'}}]}",
                       NULL);
    weft_error err = {0};
    json_object *payload = J("{'echo':'key s3cr3t-e','n':1}");
    setenv("WEFT_SECRET_ENG_T", "s3cr3t-e", 1);
    assert_int_equal(eng_run(F.e, x, &err), WEFT_ESTATE);
    assert_int_equal(eng_complete_task(F.e, x->id, "hold", WEFT_TASK_COMPLETED, payload, &err), 0);
    unsetenv("WEFT_SECRET_ENG_T");
    assert_json(task(x, "hold")->output, "{'echo':'key ***','n':1}");
    assert_json(payload, "{'echo':'key s3cr3t-e','n':1}"); /* the caller's is left as it was */
}

static void test_wait_duration(void **state)
{
    xc_exec *x = run("{'name':'nap','tasks':[{'name':'w','taskReferenceName':'nap',"
                     "'type':'WAIT','inputParameters':{'duration':'30ms'}}]}",
                     NULL, WEFT_WF_COMPLETED);
    xc_task *t = task(x, "nap");
    assert_int_equal(t->status, WEFT_TASK_COMPLETED);
    assert_true(t->ended_ms - t->started_ms >= 30);
}

/* Conductor's WAIT forms: a duration in words; an until in the past ends
 * at once; an until ahead (UTC, then local time) ends then. */
static void test_wait_conductor_forms(void **state)
{
    char def[1024], utc[64], local[64];
    time_t at = time(NULL) + 2;
    int64_t at_ms = (int64_t)at * 1000;
    struct tm tm;
    xc_exec *x;
    xc_task *t;
    x = run("{'name':'nap','tasks':[{'name':'w','taskReferenceName':'nap','type':'WAIT',"
            "'inputParameters':{'duration':'0 minutes 0.03 seconds'}}]}",
            NULL, WEFT_WF_COMPLETED);
    t = task(x, "nap");
    assert_true(t->ended_ms - t->started_ms >= 30);
    x = run("{'name':'past','tasks':[{'name':'w','taskReferenceName':'past','type':'WAIT',"
            "'inputParameters':{'until':'2020-01-01 00:00 UTC'}}]}",
            NULL, WEFT_WF_COMPLETED);
    t = task(x, "past");
    assert_true(t->ended_ms - t->started_ms < 1000);
    gmtime_r(&at, &tm);
    strftime(utc, sizeof utc, "%Y-%m-%d %H:%M:%S GMT+00:00", &tm);
    at += 1;
    localtime_r(&at, &tm);
    strftime(local, sizeof local, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(def, sizeof def,
             "{'name':'until','tasks':[{'name':'w','taskReferenceName':'u1','type':'WAIT',"
             "'inputParameters':{'until':'%s'}},{'name':'w','taskReferenceName':'u2',"
             "'type':'WAIT','inputParameters':{'until':'%s'}}]}",
             utc, local);
    x = run(def, NULL, WEFT_WF_COMPLETED);
    t = task(x, "u1");
    if (t->ended_ms < at_ms || t->ended_ms > at_ms + 500)
        fail_msg("u1 (%s) ended %lld ms from its time", utc, (long long)(t->ended_ms - at_ms));
    t = task(x, "u2");
    if (t->ended_ms < at_ms + 1000 || t->ended_ms > at_ms + 1500)
        fail_msg("u2 (%s) ended %lld ms from its time", local,
                 (long long)(t->ended_ms - at_ms - 1000));
}

/* A bad until fails the definition, naming the ref and the field. */
static void test_wait_until_bad(void **state)
{
    static const char *const bad[] = {"tomorrow",         "2030-02-30",
                                      "2030-01-01 25:00", "2030-01-01 10:00 PST",
                                      "2030-1-1",         "2030-01-01 10:00 +25"};
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char def[512];
        def_workflow *d = NULL;
        weft_error err = {0};
        snprintf(def, sizeof def,
                 "{'name':'u','tasks':[{'name':'w','taskReferenceName':'hold','type':'WAIT',"
                 "'inputParameters':{'until':'%s'}}]}",
                 bad[i]);
        assert_int_equal(eng_load_json(F.e, J(def), "u.json", &d, &err), WEFT_EINVAL);
        assert_has(err.msg, "hold");
        assert_has(err.msg, "until");
        assert_has(err.msg, bad[i]);
    }
}

/* startDelay holds a task back that long from its scheduling, the first
 * attempt (not its retries' delays). */
static void test_start_delay(void **state)
{
    xc_exec *x =
        run("{'name':'sd','tasks':[" LAMBDA(
                "a", "return 1", "") ",{'name':'b',"
                                     "'taskReferenceName':'b','type':'LAMBDA','startDelay':0.3,"
                                     "'inputParameters':{'scriptExpression':'return 2'}}]}",
            NULL, WEFT_WF_COMPLETED);
    xc_task *a = task(x, "a"), *b = task(x, "b");
    if (b->started_ms - a->ended_ms < 300)
        fail_msg("b started %lld ms after a ended, want >= 300",
                 (long long)(b->started_ms - a->ended_ms));
    assert_true(b->started_ms - b->scheduled_ms >= 300);
}

/* weft run enforces a rate limit too: six LAMBDAs of one name limited to
 * 2 per 300 ms start over at least three windows, never more than 2 in
 * one. */
static void test_rate_limited_lambdas(void **state)
{
    char def[2048];
    size_t used = 0;
    int64_t starts[6], w = 300;
    int i, j, per[64] = {0}, windows = 0;
    xc_exec *x;
    used += (size_t)snprintf(def + used, sizeof def - used,
                             "{'name':'rl','tasks':[{'name':'f','taskReferenceName':'f',"
                             "'type':'FORK_JOIN','forkTasks':[");
    for (i = 0; i < 6; i++)
        used += (size_t)snprintf(
            def + used, sizeof def - used,
            "%s[{'name':'rl','taskReferenceName':'r%d','type':'LAMBDA','taskDefinition':"
            "{'rateLimitPerFrequency':2,'rateLimitFrequencyInSeconds':0.3},"
            "'inputParameters':{'scriptExpression':'return 1'}}]",
            i ? "," : "", i);
    snprintf(def + used, sizeof def - used,
             "]},{'name':'j','taskReferenceName':'j','type':'JOIN','joinOn':['r0','r1','r2','r3',"
             "'r4','r5']}]}");
    x = run(def, NULL, WEFT_WF_COMPLETED);
    for (i = 0; i < 6; i++) {
        char ref[4];
        snprintf(ref, sizeof ref, "r%d", i);
        starts[i] = task(x, ref)->started_ms;
    }
    for (i = 0; i < 6; i++) {
        int64_t k = starts[i] / w - starts[0] / w + 32;
        assert_true(k >= 0 && k < 64);
        if (per[k]++ == 0) windows++;
        for (j = 0; j < 64; j++)
            if (per[j] > 2) fail_msg("%d starts in one %lld ms window", per[j], (long long)w);
    }
    if (windows < 3) fail_msg("6 starts in %d windows, want at least 3", windows);
}

static struct {
    const xc_exec *x[8];
    int n;
} ends;

static void on_end(void *ud, const xc_exec *x)
{
    (void)ud;
    if (ends.n < 8) ends.x[ends.n++] = x;
}

/* Many executions at once: work runs in the order it became due, timers too. */
static void test_run_all(void **state)
{
    const char *chain = "{'name':'c','tasks':[" LAMBDA(
        "a", "return input.x + 1",
        ",'x':'${workflow.input.x}'") "," LAMBDA("b", "return input.v * 2",
                                                 ",'v':'${a.output.result}'") "]}";
    xc_exec *xs[4];
    weft_error err = {0};
    int i;
    memset(&ends, 0, sizeof ends);
    xs[0] = start("{'name':'nap','tasks':[{'name':'w','taskReferenceName':'w','type':'WAIT',"
                  "'inputParameters':{'duration':'20ms'}}," LAMBDA("z", "return 0", "") "]}",
                  NULL);
    xs[1] = start(chain, "{'x':1}");
    xs[2] = start(chain, "{'x':2}");
    xs[3] = start(chain, "{'x':3}");
    assert_int_equal(eng_run_all(F.e, xs, 4, on_end, NULL, &err), 0);
    for (i = 0; i < 4; i++)
        assert_int_equal(xs[i]->status, WEFT_WF_COMPLETED);
    assert_json(xs[3]->output, "{'result':8}");
    assert_int_equal(ends.n, 4);
    assert_ptr_equal(ends.x[0], xs[1]);
    assert_ptr_equal(ends.x[1], xs[2]);
    assert_ptr_equal(ends.x[2], xs[3]);
    assert_ptr_equal(ends.x[3], xs[0]);
}

static void test_terminate(void **state)
{
    xc_exec *x = run(
        "{'name':'term','tasks':[" LAMBDA(
            "a", "return 7",
            "") ","
                "{'name':'stop','taskReferenceName':'stop','type':'TERMINATE','inputParameters':{"
                "'terminationStatus':'FAILED','terminationReason':'stop here',"
                "'workflowOutput':{'why':'${a.output.result}'}}}," LAMBDA("never", "return 1",
                                                                          "") "]}",
        NULL, WEFT_WF_FAILED);
    assert_string_equal(x->reason, "stop here");
    assert_json(x->output, "{'why':7}");
    assert_int_equal(task(x, "stop")->status, WEFT_TASK_COMPLETED);
    assert_null(xc_find_ref(x, "never"));
}

static void test_set_variable(void **state)
{
    xc_exec *x =
        run("{'name':'vars','tasks':[{'name':'sv','taskReferenceName':'sv','type':'SET_VARIABLE',"
            "'inputParameters':{'k':'${workflow.input.v}'}}," LAMBDA(
                "use", "return input.k", ",'k':'${workflow.variables.k}'") "]}",
            "{'v':'val'}", WEFT_WF_COMPLETED);
    assert_json(x->variables, "{'k':'val'}");
    assert_json(x->output, "{'result':'val'}");
}

static void test_lambda_error(void **state)
{
    xc_exec *x = run("{'name':'oops','tasks':[" LAMBDA("ok", "return 1", "") "," LAMBDA(
                         "bad", "error([[kaput]])", "") "," LAMBDA("never", "return 1", "") "]}",
                     NULL, WEFT_WF_FAILED);
    xc_task *bad = task(x, "bad");
    assert_int_equal(bad->status, WEFT_TASK_FAILED);
    assert_has(bad->reason, "kaput");
    assert_has(x->reason, "task 'bad'");
    assert_has(x->reason, "kaput");
    assert_string_equal(x->failed_task_id, bad->id);
    assert_null(xc_find_ref(x, "never"));
}

static void test_lambda_retries(void **state)
{
    xc_exec *x = run("{'name':'oops','tasks':[{'name':'bad','taskReferenceName':'bad',"
                     "'type':'LAMBDA','taskDefinition':{'retryCount':2,'retryDelaySeconds':0},"
                     "'inputParameters':{'scriptExpression':'error([[again]])'}}]}",
                     NULL, WEFT_WF_FAILED);
    assert_int_equal(x->tasks.len, 3);
    assert_int_equal(task(x, "bad")->retry_count, 2);
    assert_true(((xc_task *)x->tasks.items[0])->retried);
    assert_has(x->reason, "again");
}

static void test_to_json(void **state)
{
    xc_exec *x = run("{'name':'j','version':2,'tasks':["
                     "{'name':'ok','taskReferenceName':'ok','type':'LAMBDA','optional':true,"
                     "'inputParameters':{'scriptExpression':'error([[soft]])'}}," LAMBDA(
                         "bad", "error([[hard]])", "") "]}",
                     "{'in':1}", WEFT_WF_FAILED);
    json_object *j = xc_to_json(x), *tasks, *t0, *t1, *v;
    assert_string_equal(json_object_get_string(json_object_object_get(j, "workflowId")), x->id);
    assert_string_equal(json_object_get_string(json_object_object_get(j, "status")), "FAILED");
    assert_string_equal(json_object_get_string(json_object_object_get(j, "workflowType")), "j");
    assert_int_equal(json_object_get_int(json_object_object_get(j, "version")), 2);
    assert_has(json_object_get_string(json_object_object_get(j, "reasonForIncompletion")), "hard");
    assert_true(json_object_equal(json_object_object_get(j, "input"), J("{'in':1}")));
    assert_true(json_object_object_get_ex(j, "tasks", &tasks));
    assert_int_equal(json_object_array_length(tasks), 2);
    t0 = json_object_array_get_idx(tasks, 0);
    t1 = json_object_array_get_idx(tasks, 1);
    assert_string_equal(json_object_get_string(json_object_object_get(t0, "referenceTaskName")),
                        "ok");
    assert_string_equal(json_object_get_string(json_object_object_get(t0, "taskType")), "LAMBDA");
    assert_string_equal(json_object_get_string(json_object_object_get(t0, "status")),
                        "COMPLETED_WITH_ERRORS");
    assert_has(json_object_get_string(json_object_object_get(t0, "reasonForIncompletion")), "soft");
    assert_true(json_object_object_get_ex(t0, "retryCount", &v));
    assert_int_equal(json_object_get_int(v), 0);
    assert_string_equal(json_object_get_string(json_object_object_get(
                            json_object_object_get(t0, "workflowTask"), "taskReferenceName")),
                        "ok");
    assert_string_equal(json_object_get_string(json_object_object_get(t1, "referenceTaskName")),
                        "bad");
    assert_string_equal(json_object_get_string(json_object_object_get(t1, "status")), "FAILED");
    assert_has(json_object_get_string(json_object_object_get(t1, "reasonForIncompletion")), "hard");
    assert_string_equal(json_object_get_string(json_object_object_get(t1, "taskId")),
                        task(x, "bad")->id);
    assert_string_equal(json_object_get_string(json_object_object_get(t1, "workflowInstanceId")),
                        x->id);
    assert_int_equal(json_object_get_int(json_object_object_get(t1, "seq")), 2);
    json_object_put(j);
}

static void test_unknown_type(void **state)
{
    def_workflow *d = NULL;
    weft_error err = {0};
    assert_int_equal(eng_load_json(F.e,
                                   J("{'name':'x','tasks':[{'taskReferenceName':'h',"
                                     "'type':'NO_SUCH_TYPE'}]}"),
                                   "x.json", &d, &err),
                     WEFT_EINVAL);
    assert_null(d);
    assert_has(err.msg, "x.json: task 'h': unknown task type NO_SUCH_TYPE");
    assert_has(err.msg, "plugins/lambda");
    assert_has(err.msg, "plugins/flow");
    assert_non_null(pl_find_type(eng_plugins(F.e), "LAMBDA", NULL));
    assert_non_null(pl_find_type(eng_plugins(F.e), "JOIN", NULL));
}

static void test_plugin_checks_definition(void **state)
{
    def_workflow *d = NULL;
    weft_error err = {0};
    assert_int_equal(eng_load_json(F.e,
                                   J("{'name':'x','tasks':[{'taskReferenceName':'l',"
                                     "'type':'LAMBDA'}]}"),
                                   "x.json", &d, &err),
                     WEFT_EINVAL);
    assert_has(err.msg, "x.json: task 'l': LAMBDA needs inputParameters.scriptExpression");
}

static void test_start_bad_input(void **state)
{
    xc_exec *x = NULL;
    weft_error err = {0};
    def_workflow *d = load("{'name':'w','tasks':[" LAMBDA("a", "return 1", "") "]}");
    assert_int_equal(eng_start(F.e, d, J("[1]"), &x, &err), WEFT_EINVAL);
    assert_has(err.msg, "input must be a JSON object");
}

/*
 * A chain of sub-workflows `levels` deep, each level a workflow "deep" that
 * starts the next until n reaches 0 (the leaf completes). Written to a
 * temporary directory that the engine finds workflows by name in.
 */
#define DEEP_DEF(name, leaf)                                                                       \
    "{\"name\":\"" name "\",\"tasks\":["                                                           \
    "{\"name\":\"dec\",\"taskReferenceName\":\"dec\",\"type\":\"LAMBDA\",\"inputParameters\":{"    \
    "\"n\":\"${workflow.input.n}\",\"scriptExpression\":\"return input.n - 1\"}},"                 \
    "{\"name\":\"d\",\"taskReferenceName\":\"d\",\"type\":\"DECISION\","                           \
    "\"caseExpression\":\"if input.n >= 0 then return 'more' end return 'leaf'\","                 \
    "\"inputParameters\":{\"n\":\"${dec.output.result}\"},\"defaultCase\":[" leaf "],"             \
    "\"decisionCases\":{\"more\":[{\"name\":\"next\",\"taskReferenceName\":\"next\","              \
    "\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":{\"name\":\"" name "\"},"                      \
    "\"inputParameters\":{\"n\":\"${dec.output.result}\"}}]}}]}"

static char deep_dir[64];

static void deep_write(const char *name, const char *text)
{
    char path[128];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s.json", deep_dir, name);
    assert_non_null(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
}

/* "deep" ends at its leaf; "deepw" waits there for a signal. */
static eng *deep_engine_with(const def_limits *lim)
{
    eng_opts o = {plugin_path, NULL, NULL, NULL};
    eng *e = NULL;
    weft_error err = {0};
    snprintf(deep_dir, sizeof deep_dir, "/tmp/weft-deep-XXXXXX");
    assert_non_null(mkdtemp(deep_dir));
    deep_write("deep", DEEP_DEF("deep", ""));
    deep_write("deepw", DEEP_DEF("deepw", "{\"name\":\"hold\",\"taskReferenceName\":\"hold\","
                                          "\"type\":\"WAIT\"}"));
    o.def_path = deep_dir;
    o.trace = F.trace;
    o.limits = lim;
    if (eng_new(&o, &e, &err)) fail_msg("eng_new: %s", err.msg);
    return e;
}

/* deep(3000) is 3,001 levels: the depth limit is raised to admit them. */
static eng *deep_engine(void)
{
    def_limits lim = def_limits_default;
    lim.max_depth = 5000;
    return deep_engine_with(&lim);
}

static void deep_cleanup(eng *e)
{
    char path[128];
    eng_free(e);
    snprintf(path, sizeof path, "%s/deep.json", deep_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/deepw.json", deep_dir);
    unlink(path);
    rmdir(deep_dir);
}

static size_t count_in(const char *text, const char *part)
{
    size_t n = 0;
    for (; text && (text = strstr(text, part)); text += strlen(part))
        n++;
    return n;
}

/* 3,000 levels waiting at the leaf; the root ends (a TERMINATE in a fork's
 * other branch, after a signal): every level is terminated, deepest too. */
static void test_deep_sub_workflow_terminate(void **state)
{
    eng *e = deep_engine();
    def_workflow *d = NULL;
    xc_exec *x = NULL;
    weft_error err = {0};
    const char *root =
        "{'name':'root','tasks':[{'name':'f','taskReferenceName':'f','type':'FORK_JOIN',"
        "'forkTasks':[[{'name':'sub','taskReferenceName':'sub','type':'SUB_WORKFLOW',"
        "'subWorkflowParam':{'name':'deepw'},'inputParameters':{'n':3000}}],"
        "[{'name':'gate','taskReferenceName':'gate','type':'WAIT'},"
        "{'name':'stop','taskReferenceName':'stop','type':'TERMINATE','inputParameters':{"
        "'terminationStatus':'TERMINATED','terminationReason':'enough'}}]]},"
        "{'name':'j','taskReferenceName':'j','type':'JOIN','joinOn':['sub','stop']}]}";
    if (eng_load_json(e, J(root), "root.json", &d, &err)) fail_msg("load: %s", err.msg);
    if (eng_start(e, d, NULL, &x, &err)) fail_msg("start: %s", err.msg);
    assert_int_equal(eng_run(e, x, &err), WEFT_ESTATE); /* all wait: gate and the leaf */
    fflush(F.trace);
    assert_int_equal(count_in(F.trace_buf, "hold (WAIT) IN_PROGRESS"), 1);
    if (eng_complete_task(e, x->id, "gate", WEFT_TASK_COMPLETED, NULL, &err))
        fail_msg("signal: %s", err.msg);
    assert_int_equal(x->status, WEFT_WF_TERMINATED);
    fflush(F.trace);
    assert_int_equal(count_in(F.trace_buf, "TERMINATED: parent task canceled"), 3001);
    assert_int_equal(count_in(F.trace_buf, "hold (WAIT) CANCELED"), 1);
    def_unref(d);
    deep_cleanup(e);
}

/* 3,000 levels complete (the child's end completes the parent task, whose
 * end completes its workflow ... up to the root): no C recursion per level. */
static void test_deep_sub_workflow_chain(void **state)
{
    eng *e = deep_engine();
    def_workflow *d = NULL;
    xc_exec *x = NULL;
    weft_error err = {0};
    char path[128];
    snprintf(path, sizeof path, "%s/deep.json", deep_dir);
    if (eng_load_file(e, path, &d, &err)) fail_msg("load: %s", err.msg);
    if (eng_start(e, d, J("{'n':3000}"), &x, &err)) fail_msg("start: %s", err.msg);
    if (eng_run(e, x, &err)) fail_msg("eng_run: %s", err.msg);
    if (x->status != WEFT_WF_COMPLETED)
        fail_msg("ended %s: %s", weft_wf_status_name(x->status), x->reason ? x->reason : "");
    def_unref(d);
    deep_cleanup(e);
}

/* The engine of F with these limits instead of the defaults. */
static void with_limits(const def_limits *lim)
{
    eng_opts o = {plugin_path, NULL, NULL, NULL};
    weft_error err = {0};
    o.trace = F.trace;
    o.limits = lim;
    eng_free(F.e);
    F.e = NULL;
    if (eng_new(&o, &F.e, &err)) fail_msg("eng_new: %s", err.msg);
}

/* A workflow that starts itself stops at the depth limit: the deepest one
 * fails its SUB_WORKFLOW task naming the ref and the limit, and the failure
 * goes up to the root. */
static void test_depth_limit(void **state)
{
    def_limits lim = def_limits_default;
    eng *e;
    def_workflow *d = NULL;
    xc_exec *x = NULL;
    weft_error err = {0};
    char path[128];
    lim.max_depth = 20;
    e = deep_engine_with(&lim);
    deep_write("selfy", "{\"name\":\"selfy\",\"tasks\":[{\"name\":\"again\",\"taskReferenceName\":"
                        "\"again\",\"type\":\"SUB_WORKFLOW\",\"subWorkflowParam\":{\"name\":"
                        "\"selfy\"}}]}");
    snprintf(path, sizeof path, "%s/selfy.json", deep_dir);
    if (eng_load_file(e, path, &d, &err)) fail_msg("load: %s", err.msg);
    if (eng_start(e, d, NULL, &x, &err)) fail_msg("start: %s", err.msg);
    if (eng_run(e, x, &err)) fail_msg("eng_run: %s", err.msg);
    assert_int_equal(x->status, WEFT_WF_FAILED);
    assert_has(x->reason, "task 'again'");
    assert_has(x->reason, "over the limit of 20 (max_subworkflow_depth)");
    fflush(F.trace);
    /* the root and 20 levels below it, each FAILED */
    assert_int_equal(count_in(F.trace_buf, "selfy: workflow "), 21);
    def_unref(d);
    unlink(path);
    deep_cleanup(e);
}

/* DO_WHILE without maxIterations stops at max_loop_iterations; with its own
 * maxIterations it may go past it. */
static void test_loop_limit(void **state)
{
    def_limits lim = def_limits_default;
    xc_exec *x;
    lim.max_loop_iterations = 5;
    with_limits(&lim);
    x = run("{'name':'loop','tasks':[{'name':'loop','taskReferenceName':'loop','type':'DO_WHILE',"
            "'loopCondition':'return true','loopOver':[" LAMBDA("step", "return 1", "") "]}]}",
            NULL, WEFT_WF_FAILED);
    assert_has(x->reason, "task 'loop'");
    assert_has(x->reason, "'loop' would run iteration 6, over the limit of 5 (max_loop_iterations");
    assert_non_null(xc_find_ref(x, "step__5"));
    assert_null(xc_find_ref(x, "step__6"));
    x = run("{'name':'loop','tasks':[{'name':'loop','taskReferenceName':'loop','type':'DO_WHILE',"
            "'loopCondition':'return true','maxIterations':8,"
            "'loopOver':[" LAMBDA("step", "return 1", "") "]}]}",
            NULL, WEFT_WF_COMPLETED);
    assert_non_null(xc_find_ref(x, "step__8"));
}

/* A dynamic fork wider than max_fork_width fails before any branch starts. */
static void test_dynamic_fork_limit(void **state)
{
    def_limits lim = def_limits_default;
    xc_exec *x;
    lim.max_fork_width = 3;
    with_limits(&lim);
    x = run("{'name':'dyn','tasks':[" LAMBDA(
                "gen",
                "local t = {} for i = 1, 4 do t[i] = { ref = [[d]] .. i, type = [[LAMBDA]],"
                " script = [[return 1]] } end return t",
                "") ",{'name':'fan','taskReferenceName':'fan','type':'FORK_JOIN_DYNAMIC',"
                    "'dynamicForkTasksParam':'dynamicTasks',"
                    "'inputParameters':{'dynamicTasks':'${gen.output.result}'}},"
                    "{'name':'join','taskReferenceName':'join','type':'JOIN','joinOn':[]}]}",
            NULL, WEFT_WF_FAILED);
    assert_has(x->reason,
               "'fan' would start 4 tasks at once, over the limit of 3 (max_fork_width)");
    assert_null(xc_find_ref(x, "d1"));
}

/* SET_VARIABLE over max_variables_size fails its task; the variables stay. */
static void test_variables_limit(void **state)
{
    def_limits lim = def_limits_default;
    xc_exec *x;
    lim.max_variables = 64;
    with_limits(&lim);
    x = run("{'name':'vars','tasks':["
            "{'name':'a','taskReferenceName':'a','type':'SET_VARIABLE','inputParameters':{'k':1}},"
            "{'name':'b','taskReferenceName':'b','type':'SET_VARIABLE',"
            "'inputParameters':{'big':'${workflow.input.big}'}}]}",
            "{'big':'0123456789012345678901234567890123456789012345678901234567890123456789'}",
            WEFT_WF_FAILED);
    assert_has(x->reason, "task 'b'");
    assert_has(x->reason, "over the limit of 64 (max_variables_size)");
    assert_json(x->variables, "{'k':1}");
}

int main(void)
{
    const char *top = getenv("WEFT_TOP_BUILDDIR");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_join, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decision, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decision_expression, setup, teardown),
        cmocka_unit_test_setup_teardown(test_switch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_do_while, setup, teardown),
        cmocka_unit_test_setup_teardown(test_do_while_max_iterations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_do_while_iteration_visible, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_loops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_fork, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sub_workflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sub_workflow_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_for_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_conductor_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_until_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_limited_lambdas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_masks_secrets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_duration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workflow_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_variable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lambda_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lambda_retries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_to_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_checks_definition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_sub_workflow_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_sub_workflow_terminate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loop_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_fork_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_variables_limit, setup, teardown),
    };
    if (!top || !*top) {
        fprintf(stderr, "test_engine: WEFT_TOP_BUILDDIR is not set: skipped\n");
        return 77;
    }
    snprintf(plugin_path, sizeof plugin_path,
             "%s/plugins/lambda:%s/plugins/decision:%s/plugins/fork_join:%s/plugins/flow", top, top,
             top, top);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

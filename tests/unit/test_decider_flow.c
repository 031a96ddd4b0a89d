/*
 * Tests of decider.c on control flow: map containers (a type that schedules
 * a list of tasks, fails, waits on a timer or terminates the workflow),
 * loops and dynamic tasks. The task types, the clock and the fixture are in
 * decider_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "decider_fixture.h"

/* ---- map containers ---- */

static const char PICK_DEF[] =
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
    start("{'name':'w','tasks':[{'taskReferenceName':'loop','type':'LOOP',"
          "'inputParameters':{'times':2},'loopOver':[" T_(
              "body",
              ",'inputParameters':{'it':'${loop."
              "output.iteration}'}") "," T_("body2",
                                            ",'inputParameters':{'prev':'${body.output.n}'"
                                            "}") "]}," T_("after", ",'inputParameters':{'l':'${"
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

/* A retry refused (nothing failed to run again) leaves the workflow as it
 * was: still FAILED, with its reason. */
static void test_retry_refused_unchanged(void **state)
{
    weft_error err = {0};
    start("{'name':'w','tasks':[{'taskReferenceName':'t','type':'TERM',"
          "'inputParameters':{'status':'FAILED'}}]}",
          NULL);
    decide();
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    F.o.n = 0;
    assert_int_equal(dec_retry(&ENV, F.x, &F.o, &err), WEFT_ESTATE);
    assert_has(err.msg, "has no failed task to retry");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
    assert_string_equal(F.x->reason, "stopped");
    assert_non_null(F.x->output);
}

/* ---- allocation failures (decider_fixture.h: df_sweep) ---- */

static const char AF_LOOP[] =
    "{'name':'w','tasks':[{'taskReferenceName':'loop','type':'LOOP','inputParameters':"
    "{'times':2},'loopOver':[" T_(
        "body",
        ",'inputParameters':{'it':'${loop.output.iteration}'}") "]}," T_("after",
                                                                         ",'inputParameters':{'l':'"
                                                                         "${loop.output}'}") "]}";

static int step_decide(void)
{
    return dec_decide(&ENV, F.x, &F.o);
}

static void before_body1(void)
{
    decide();
    DS.output = jt_parse("{'n':1}");
}

/* the body ended: the loop's next iteration, in a scope of its own */
static int step_body1(void)
{
    return df_report("body__1", WEFT_TASK_COMPLETED, NULL);
}

static void before_body2(void)
{
    decide();
    complete("body__1", "{'n':1}");
    DS.output = jt_parse("{'n':2}");
}

/* the last iteration: the loop completes, the task after it is scheduled */
static int step_body2(void)
{
    return df_report("body__2", WEFT_TASK_COMPLETED, NULL);
}

static void before_timer(void)
{
    decide();
    clock_ms += 500;
}

static int step_remap(void)
{
    dec_remap(&ENV, F.x, xc_find_ref(F.x, "p"), &F.o);
    return dec_decide(&ENV, F.x, &F.o);
}

static void before_domains(void)
{
    F.x->task_to_domain = jt_parse("{'T':'gone,blue'}");
}

static const char AF_DYN[] =
    "{'name':'w','tasks':[{'taskReferenceName':'dyn','type':'DYN',"
    "'inputParameters':{'tasks':'${workflow.input.dyn}'}}," T_("after", "") "]}";

/* Every allocation of each step fails in turn (df_sweep). */
static void test_alloc_failures(void **state)
{
    static const df_step steps[] = {
        {"loop: the first iteration", AF_LOOP, NULL, NULL, step_decide},
        {"loop: the next iteration", AF_LOOP, NULL, before_body1, step_body1},
        {"loop: the last iteration", AF_LOOP, NULL, before_body2, step_body2},
        {"dynamic tasks", AF_DYN,
         "{'k':'K','dyn':[{'taskReferenceName':'d1','type':'T','inputParameters':"
         "{'v':'${workflow.input.k}'}},{'taskReferenceName':'d2','type':'LOOP',"
         "'inputParameters':{'times':1},'loopOver':[" T_("d2b", "") "]}]}",
         NULL, step_decide},
        {"pick", PICK_DEF, "{'side':'left'}", NULL, step_decide},
        {"terminate",
         "{'name':'w','tasks':[{'taskReferenceName':'t','type':'TERM',"
         "'inputParameters':{'status':'FAILED'}}," T_("after", "") "]}",
         NULL, NULL, step_decide},
        {"dec_remap (a timer)",
         "{'name':'w','tasks':[{'taskReferenceName':'p','type':'POLL'}," T_("after", "") "]}", NULL,
         before_timer, step_remap},
        {"task domains", "{'name':'w','tasks':[" T_("a", "") "]}", NULL, before_domains,
         step_decide},
    };
    size_t i;
    for (i = 0; i < sizeof steps / sizeof steps[0]; i++)
        df_sweep(&steps[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
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
        cmocka_unit_test_teardown(test_retry_refused_unchanged, teardown),
        cmocka_unit_test_teardown(test_alloc_failures, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

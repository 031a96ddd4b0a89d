/*
 * Tests of decider.c on chains of tasks: scheduling, results, retries,
 * optional tasks, timeouts, ending and cancelling an execution, late results
 * and resolving inputs and outputs. The task types, the clock and the
 * fixture are in decider_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "decider_fixture.h"

/* ---- linear chains ---- */

static void test_chain(void **state)
{
    xc_task *a, *b, *c;
    start("{'name':'w','tasks':[" T_(
              "a",
              ",'inputParameters':{'x':'${workflow.input.x}','k':'"
              "const'}") "," T_("b",
                                ",'inputParameters':{'v':'${a.output.n}','s':'n=${a.output.n}',"
                                "'missing':'${a.output.nope}'}") "," T_("c", ",'inputParameters':{'"
                                                                             "all':'${b.output}'"
                                                                             ",'id':'${workflow."
                                                                             "workflowId}'}") "]}",
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
    start("{'name':'w','tasks':[" T_("a",
                                     ",'inputParameters':{'greeting':'hello, ${workflow.input.n"
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

/* ---- allocation failures (decider_fixture.h: df_sweep) ---- */

static const char AF_CHAIN[] =
    "{'name':'w','variables':{'v':{'k':[1,2]}},'outputParameters':{'total':'${b.output.n}',"
    "'text':'t=${b.output.n} of ${workflow.input.x}','all':'${a.output}'},'tasks':[" T_(
        "a",
        ",'inputParameters':{'x':'${workflow.input.x}','s':'x=${workflow.input.x}!',"
        "'k':[1,'c'],'id':'${workflow.workflowId}'}") "," T_("b", ",'inputParameters':{'v':'${a."
                                                                  "output.n}'},'taskDefinition':{"
                                                                  "'retryCount':1,"
                                                                  "'retryDelaySeconds':2}") "]}";

static int step_decide(void)
{
    return dec_decide(&ENV, F.x, &F.o);
}

static json_object *new_input; /* borrowed from the fixture's JSON */

/* a new execution, and its first decision */
static void before_new(void)
{
    new_input = F.x->input;
    xc_free(F.x);
    F.x = NULL;
}

static int step_new(void)
{
    weft_error err = {0};
    int rc = xc_new(F.wf, new_input, "wf-1", &F.x, &err);
    if (rc) return rc;
    F.x->created_ms = F.x->updated_ms = clock_ms;
    return dec_decide(&ENV, F.x, &F.o);
}

static void before_a_done(void)
{
    decide();
    DS.output = jt_parse("{'n':6,'list':[1,{'d':true}]}");
}

static int step_a_done(void)
{
    return df_report("a", WEFT_TASK_COMPLETED, NULL);
}

static void before_b_fails(void)
{
    decide();
    complete("a", "{'n':6}");
}

static int step_b_fails(void)
{
    return df_report("b", WEFT_TASK_FAILED, "flaky");
}

static void before_b_done(void)
{
    before_b_fails();
    run("b", WEFT_TASK_FAILED, NULL, "flaky");
    clock_ms += 2000;
    DS.output = jt_parse("{'n':7}");
}

/* the last task: the workflow's output is built */
static int step_b_done(void)
{
    return df_report("b", WEFT_TASK_COMPLETED, NULL);
}

static int step_timeouts(void)
{
    int64_t next;
    dec_timeouts(&ENV, F.x, clock_ms + 60000, &next, &F.o);
    return 0;
}

static void before_running(void)
{
    decide();
}

static int step_end(void)
{
    dec_end(&ENV, F.x, WEFT_WF_TERMINATED, "by user", &F.o);
    return 0;
}

static void before_failed(void)
{
    before_b_fails();
    run("b", WEFT_TASK_FAILED, NULL, "flaky");
    clock_ms += 2000;
    run("b", WEFT_TASK_FAILED, NULL, "flaky again");
    assert_int_equal(F.x->status, WEFT_WF_FAILED);
}

static int step_retry(void)
{
    weft_error err = {0};
    return dec_retry(&ENV, F.x, &F.o, &err);
}

static int step_restart(void)
{
    weft_error err = {0};
    return dec_restart(&ENV, F.x, &err);
}

/* Every allocation of each step fails in turn (df_sweep). */
static void test_alloc_failures(void **state)
{
    static const df_step steps[] = {
        {"xc_new, dec_decide", AF_CHAIN, "{'x':5}", before_new, step_new},
        {"dec_decide (start)", AF_CHAIN, "{'x':5}", NULL, step_decide},
        {"a completes", AF_CHAIN, "{'x':5}", before_a_done, step_a_done},
        {"b fails, retried", AF_CHAIN, "{'x':5}", before_b_fails, step_b_fails},
        {"b completes, the output", AF_CHAIN, "{'x':5}", before_b_done, step_b_done},
        {"dec_timeouts", "{'name':'w','timeoutSeconds':5,'tasks':[" T_("a", "") "]}", NULL,
         before_running, step_timeouts},
        {"dec_end", AF_CHAIN, "{'x':5}", before_running, step_end},
        {"dec_retry", AF_CHAIN, "{'x':5}", before_failed, step_retry},
        {"dec_restart", AF_CHAIN, "{'x':5}", before_failed, step_restart},
    };
    size_t i;
    for (i = 0; i < sizeof steps / sizeof steps[0]; i++)
        df_sweep(&steps[i]);
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
        cmocka_unit_test_teardown(test_alloc_failures, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

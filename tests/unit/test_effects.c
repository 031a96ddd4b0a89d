/*
 * Applying a decision (core/effects.c) over a memory store: the queue steps
 * of each action, and the cascades after a save (a canceled task's plugin
 * told, a child terminated, a parent told or woken). No Redis: the memory
 * backend is the store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "alloc_fail.h"
#include "core/codec.h"
#include "core/effects.h"
#include "core/ops.h"
#include "store/memory.h"

static int q_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type Q_TYPE = {.name = "Q", .execute = q_execute};

static const weft_task_type *find_type(void *ud, const char *name)
{
    return !strcmp(name, "Q") ? &Q_TYPE : NULL;
}

static def_env DEFS = {find_type, NULL, "/test/plugins", NULL, 0, NULL, NULL};

static const char *DEF_JSON = "{\"name\":\"fx_w\",\"tasks\":[{\"taskReferenceName\":\"a\","
                              "\"type\":\"Q\"},{\"taskReferenceName\":\"b\",\"type\":\"Q\"}]}";

static struct {
    st_store *st;
    op_env env;
    op_hooks hooks;
    dec_env dec;
    def_workflow *def;
    int canceled;     /* hooks.cancel calls */
    char last[64];    /* the task it was told of */
    xc_exec *mine[4]; /* the test's own references (stored) */
    int nmine;
} F;

static void hear_cancel(void *ud, xc_exec *x, xc_task *t)
{
    F.canceled++;
    strcpy(F.last, t->ref);
}

static int setup(void **state)
{
    weft_error err = {0};
    memset(&F, 0, sizeof F);
    if (st_memory_open(NULL, &F.st, &err)) return -1;
    F.dec.defs = &DEFS;
    F.dec.now = wu_now_ms;
    F.hooks.cancel = hear_cancel;
    F.env.st = F.st;
    F.env.defs = &DEFS;
    F.env.dec = &F.dec;
    F.env.sweep_ms = 60000;
    F.env.hooks = &F.hooks;
    return op_def(&F.env, DEF_JSON, "fx.json", &F.def, &err) ? -1 : 0;
}

static int teardown(void **state)
{
    if (state) af_stopped();
    while (F.nmine > 0)
        xc_free(F.mine[--F.nmine]);
    def_unref(F.def);
    st_free(F.st);
    return 0;
}

/* A stored execution of the definition with this id (NULL: a fresh one),
 * a reference of the store's. */
static xc_exec *stored_id(const char *id, const char *parent)
{
    weft_error err = {0};
    st_create c = {0};
    xc_exec *x = NULL;
    assert_int_equal(xc_new(F.def, NULL, id, &x, &err), 0);
    if (parent) {
        x->parent_id = strdup(parent);
        x->parent_task_id = strdup("none");
    }
    c.x = x;
    assert_int_equal(ST(F.st, exec_create_many, &c, 1, &err), 0);
    assert_int_equal(c.rc, 0);
    F.mine[F.nmine++] = x;
    return x;
}

static xc_exec *stored(const char *parent)
{
    return stored_id(NULL, parent);
}

static size_t count_kind(const st_step *s, size_t n, st_step_kind kind)
{
    size_t i, k = 0;
    for (i = 0; i < n; i++)
        k += s[i].kind == kind;
    return k;
}

/* Enqueue becomes a push; a queued task's cancel and a worker's answer
 * (dec_unqueue) each an unqueue; an end takes it off the decider queue. */
static void test_steps(void **state)
{
    xc_exec *x = stored(NULL);
    dec_out o = {0};
    st_step *s = NULL;
    size_t n = 0;
    xc_task *a;
    assert_int_equal(dec_decide(&F.dec, x, &o), 0);
    assert_int_equal(fx_steps(&F.env, &F.dec, x, &o, 0, &s, &n, NULL, NULL, NULL), 0);
    assert_int_equal(count_kind(s, n, ST_PUSH), 1);
    assert_string_equal(s[0].task_id, (a = xc_find_ref(x, "a"))->id);
    assert_ptr_equal(s[0].task, a);
    free(s);
    o.n = 0;
    dec_unqueue(&F.dec, x, a, &o);
    dec_end(&F.dec, x, WEFT_WF_TERMINATED, "stop", &o);
    assert_int_equal(fx_steps(&F.env, &F.dec, x, &o, 0, &s, &n, NULL, NULL, NULL), 0);
    assert_int_equal(count_kind(s, n, ST_UNQUEUE), 2); /* the answer's and the cancel's */
    assert_int_equal(count_kind(s, n, ST_DONE), 1);
    assert_int_equal(s[n - 1].kind, ST_DONE);
    free(s);
    dec_out_free(&o);
}

/* After the save: the canceled task's plugin hears of it, and a child it
 * started is terminated once the cascades run. */
static void test_cancel_and_child(void **state)
{
    xc_exec *x = stored(NULL), *child = stored(NULL);
    dec_out o = {0};
    weft_error err = {0};
    xc_task *a;
    assert_int_equal(dec_decide(&F.dec, x, &o), 0);
    a = xc_find_ref(x, "a");
    a->child_id = strdup(child->id);
    o.n = 0;
    dec_end(&F.dec, x, WEFT_WF_TERMINATED, "stop", &o);
    fx_after(&F.env, x, &o);
    assert_int_equal(F.canceled, 1);
    assert_string_equal(F.last, "a");
    assert_int_equal(child->status, WEFT_WF_RUNNING); /* cascades wait for fx_drain */
    fx_drain(&F.env);
    assert_int_equal(child->status, WEFT_WF_TERMINATED);
    assert_string_equal(child->reason, "parent task canceled");
    dec_out_free(&o);
    (void)err;
}

/* Where ends are not followed (a client), an ended child wakes its
 * parent's decider instead of completing the parent's task itself. */
static void test_parent_woken(void **state)
{
    xc_exec *parent = stored(NULL), *child;
    dec_out o = {0};
    char due[4][64];
    int ndue = 0;
    weft_error err = {0};
    /* the parent is due at its create: take it off, then see the child wake it */
    assert_int_equal(ST(F.st, due_claim, 0, 4, 60000, due, &ndue, NULL, 0, 0, 0, NULL, &err), 0);
    assert_int_equal(ndue, 1);
    child = stored(parent->id);
    assert_int_equal(ST(F.st, due_claim, 0, 4, 60000, due, &ndue, NULL, 0, 0, 0, NULL, &err), 0);
    assert_int_equal(ndue, 1); /* the child's own create */
    dec_end(&F.dec, child, WEFT_WF_FAILED, "boom", &o);
    F.env.cascade = 0;
    fx_after(&F.env, child, &o);
    fx_drain(&F.env);
    assert_int_equal(ST(F.st, due_claim, 0, 4, 60000, due, &ndue, NULL, 0, 0, 0, NULL, &err), 0);
    assert_int_equal(ndue, 1);
    assert_string_equal(due[0], parent->id);
    dec_out_free(&o);
}

/* ---- allocation failures (alloc_fail.h) ---- */

/* The timed definition: a's timeout has passed when the steps are made. */
static const char *TIMED_JSON =
    "{\"name\":\"fx_t\",\"tasks\":[{\"taskReferenceName\":\"a\",\"type\":\"Q\","
    "\"taskDefinition\":{\"timeoutSeconds\":1}},{\"taskReferenceName\":\"b\",\"type\":\"Q\"}]}";

static struct {
    def_workflow *timed;
    xc_exec *x, *parent;
    dec_out o;
    st_step *s;
    st_lease *eager;
    size_t n, neager, room;
    char *before, *want;
} AX;

/* x's document, its actions, the steps and eager leases made, the
 * cascades queued (text; caller frees). */
static char *af_fx_state(void)
{
    wu_buf b = {0};
    char line[256];
    size_t i;
    json_object *doc = NULL;
    weft_error err = {0};
    assert_int_equal(cd_doc_text(AX.x, &b), 0);
    assert_int_equal(wu_parse_json("doc", b.data, &doc, &err), 0);
    b.len = 0;
    /* task ids and the times taken from the wall clock differ run to run */
    {
        json_object *tasks = json_object_object_get(doc, "tasks");
        json_object_object_del(doc, "createTime");
        json_object_object_del(doc, "updateTime");
        json_object_object_del(doc, "endTime");
        for (i = 0; i < json_object_array_length(tasks); i++) {
            json_object *t = json_object_array_get_idx(tasks, i);
            json_object_object_del(t, "id");
            json_object_object_del(t, "scheduledTime");
            json_object_object_del(t, "updateTime");
            json_object_object_del(t, "startTime");
            json_object_object_del(t, "endTime");
            json_object_object_del(t, "callbackTime");
        }
    }
    snprintf(line, sizeof line, "%s\n",
             json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
    json_object_put(doc);
    assert_int_equal(wu_buf_add(&b, line, strlen(line)), 0);
    for (i = 0; i < AX.o.n; i++) {
        snprintf(line, sizeof line, "action %d %s\n", (int)AX.o.a[i].kind,
                 AX.o.a[i].task ? AX.o.a[i].task->ref : "-");
        assert_int_equal(wu_buf_add(&b, line, strlen(line)), 0);
    }
    for (i = 0; i < AX.n; i++) {
        snprintf(line, sizeof line, "step %d %s %s\n", (int)AX.s[i].kind,
                 AX.s[i].type ? AX.s[i].type : "-", AX.s[i].task ? AX.s[i].task->ref : "-");
        assert_int_equal(wu_buf_add(&b, line, strlen(line)), 0);
    }
    for (i = 0; i < AX.neager; i++) {
        snprintf(line, sizeof line, "eager %s\n", AX.eager[i].t->ref);
        assert_int_equal(wu_buf_add(&b, line, strlen(line)), 0);
    }
    for (i = 0; i < F.env.nlater; i++) {
        snprintf(line, sizeof line, "later %d\n", (int)i);
        assert_int_equal(wu_buf_add(&b, line, strlen(line)), 0);
    }
    return b.data;
}

static int take_all(void *ud, const xc_task *t)
{
    return 1;
}

/* x decided: a and b queued in a workflow whose a is timed (its timeout
 * passed), so that finding x's next look times it out */
static void af_steps_setup(void *ud)
{
    weft_error err = {0};
    setup(NULL);
    assert_int_equal(op_def(&F.env, TIMED_JSON, "fx_t.json", &AX.timed, &err), 0);
    assert_int_equal(xc_new(AX.timed, NULL, "wf-fx", &AX.x, &err), 0);
    memset(&AX.o, 0, sizeof AX.o);
    assert_int_equal(dec_decide(&F.dec, AX.x, &AX.o), 0);
    dec_start(&F.dec, AX.x, xc_find_ref(AX.x, "a"));
    xc_find_ref(AX.x, "a")->started_ms -= 5000;
    F.env.eager = take_all;
    F.env.lease_ms = 60000;
    AX.room = 4;
    AX.s = NULL;
    AX.eager = NULL;
    AX.n = AX.neager = 0;
    AX.before = af_fx_state();
}

static int af_steps_call(void *ud)
{
    return fx_steps(&F.env, &F.dec, AX.x, &AX.o, 0, &AX.s, &AX.n, &AX.room, &AX.eager, &AX.neager);
}

/* Whether the steps look at x again at once (a timeout put off for want
 * of memory: nothing changed, the next look times it out). */
static int af_looks_now(void)
{
    size_t i;
    for (i = 0; i < AX.n; i++)
        if (AX.s[i].kind == ST_WAKE && AX.s[i].at <= wu_now_ms()) return 1;
    return 0;
}

static int warned;

static void hear_warn(void *ud, const char *msg)
{
    warned++;
}

static int af_fx_check(void *ud, int rc, int failed)
{
    char *got = af_fx_state();
    int same = rc == 0 && !strcmp(got, AX.want);
    if (warned) {
        /* fx_after: a cascade lost, and said; nothing else changed */
        assert_false(same);
        assert_memory_equal(got, AX.before, strlen(AX.before));
    } else if (rc == WEFT_ENOMEM) {
        assert_string_equal(got, AX.before);
    } else if (!same) {
        /* x and its actions as they were, and a look at once */
        assert_true(AX.n > 0);
        assert_memory_equal(got, AX.before, strchr(AX.before, '\n') - AX.before);
        assert_true(af_looks_now());
    }
    free(got);
    return same;
}

static void af_fx_baseline(void *ud, int rc)
{
    assert_int_equal(rc, 0);
    AX.want = af_fx_state();
}

static void af_fx_teardown(void *ud)
{
    fx_drain(&F.env); /* the cascades queued: run, so that nothing is left */
    free(AX.s);
    free(AX.eager);
    dec_out_free(&AX.o);
    xc_free(AX.x);
    xc_free(AX.parent);
    def_unref(AX.timed);
    free(AX.before);
    AX.before = NULL;
    AX.x = AX.parent = NULL;
    AX.timed = NULL;
    teardown(NULL);
}

/* a child ended failed: its parent is to be told (a cascade) */
static void af_after_setup(void *ud)
{
    weft_error err = {0};
    setup(NULL);
    F.env.cascade = 1;
    F.hooks.warn = hear_warn;
    warned = 0;
    AX.parent = xc_ref(stored_id("wf-parent", NULL));
    AX.x = xc_ref(stored_id("wf-child", "wf-parent"));
    memset(&AX.o, 0, sizeof AX.o);
    assert_int_equal(dec_decide(&F.dec, AX.x, &AX.o), 0);
    AX.o.n = 0;
    dec_end(&F.dec, AX.x, WEFT_WF_FAILED, "boom", &AX.o);
    AX.s = NULL;
    AX.eager = NULL;
    AX.n = AX.neager = 0;
    AX.before = af_fx_state();
    (void)err;
}

static int af_after_call(void *ud)
{
    fx_after(&F.env, AX.x, &AX.o);
    return 0;
}

/* Every allocation of making a decision's steps, and of queueing its
 * cascades, fails in turn. */
static void test_alloc_failures(void **state)
{
    static const af_case steps = {"fx_steps",  af_steps_setup, af_steps_call,
                                  af_fx_check, af_fx_teardown, af_fx_baseline};
    static const af_case after = {"fx_after",  af_after_setup, af_after_call,
                                  af_fx_check, af_fx_teardown, af_fx_baseline};
    teardown(NULL); /* each run has its own store */
    af_run(&steps, NULL);
    free(AX.want);
    af_run(&after, NULL);
    free(AX.want);
    AX.want = NULL;
    setup(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_and_child, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_woken, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

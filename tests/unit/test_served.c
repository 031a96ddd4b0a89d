/*
 * Tests of served.c over the memory store: a definition whose task types no
 * plugin here provides is refused unless a live daemon serves each (in any
 * domain) or a TaskDef has its name; the refusal names the source, the
 * line, the ref, the type and the types known; a definition of known types
 * costs no look at the store. The staleness of a heartbeat is tested against
 * a real Redis and weftd (integration/task_types.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/served.h"
#include "store/memory.h"

static int t_execute(weft_ctx *ctx, weft_result *r)
{
    (void)ctx;
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type types[] = {
    {.name = "LAMBDA", .execute = t_execute},
    {.name = "SIMPLE", .execute = t_execute, .flags = WEFT_TASK_EXTERNAL},
};

static const weft_task_type *find_type(void *ud, const char *name)
{
    size_t i;
    (void)ud;
    for (i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(types[i].name, name)) return &types[i];
    return NULL;
}

static const def_env ENV = {.find_type = find_type,
                            .searched = "/test/plugins",
                            .allow_unknown = 1,
                            .known = "LAMBDA, SIMPLE"};

/* A store that fails every call: a check that asks it fails. */
static int no_daemons(st_store *s, char **json, weft_error *err)
{
    (void)s;
    *json = NULL;
    return wu_err(err, WEFT_EIO, "the store was asked");
}

typedef struct fixture {
    st_store *st;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    weft_error err = {0};
    assert_int_equal(st_memory_open(NULL, &f->st, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    st_free(f->st);
    free(f);
    return 0;
}

/* Compile text (a WorkflowDef, ' for ") with lines {ref: line}. */
static def_workflow *compile(const char *text, const char *lines)
{
    char *s = strdup(text), *p;
    json_object *j, *l = lines ? json_tokener_parse(lines) : NULL;
    def_workflow *d = NULL;
    weft_error err = {0};
    for (p = s; *p; p++)
        if (*p == '\'') *p = '"';
    j = json_tokener_parse(s);
    free(s);
    assert_non_null(j);
    if (def_compile(&ENV, j, "wf.lua", l, &d, &err)) fail_msg("compile: %s", err.msg);
    json_object_put(j);
    json_object_put(l);
    return d;
}

#define ODD                                                                                        \
    "{'name':'w','tasks':[{'name':'a','taskReferenceName':'a','type':'LAMBDA'},"                   \
    "{'name':'q','taskReferenceName':'ext','type':'SIMPLE'},"                                      \
    "{'name':'o','taskReferenceName':'odd','type':'FX_ODD'}]}"

static void test_unknown_refused_naming_it(void **state)
{
    fixture *f = *state;
    weft_error err = {0};
    def_workflow *d = compile(ODD, "{\"odd\": 7}");
    assert_int_equal(sv_check(f->st, &ENV, d, NULL, 0, &err), WEFT_EINVAL);
    assert_non_null(strstr(err.msg, "wf.lua:7: task 'odd': unknown task type FX_ODD"));
    assert_non_null(strstr(err.msg, "known types: LAMBDA, SIMPLE"));
    assert_non_null(strstr(err.msg, "/test/plugins"));
    def_unref(d);
}

static void test_served_by_a_live_daemon(void **state)
{
    fixture *f = *state;
    weft_error err = {0};
    def_workflow *d = compile(ODD, NULL);
    assert_int_equal(ST(f->st, daemon_beat, "d1", "{\"types\":[\"HTTP\",\"FX_ODDER\"]}", &err), 0);
    assert_int_equal(sv_check(f->st, &ENV, d, NULL, 0, &err), WEFT_EINVAL);
    /* a daemon's types are known types too */
    assert_non_null(strstr(err.msg, "known types: LAMBDA, SIMPLE, HTTP, FX_ODDER"));
    assert_int_equal(ST(f->st, daemon_beat, "d2", "{\"types\":[\"FX_ODD\"]}", &err), 0);
    assert_int_equal(sv_check(f->st, &ENV, d, NULL, 0, &err), 0);
    def_unref(d);
}

static void test_served_in_a_domain(void **state)
{
    fixture *f = *state;
    weft_error err = {0};
    json_object *live = NULL;
    def_workflow *d = compile(ODD, NULL);
    assert_int_equal(ST(f->st, daemon_beat, "d1", "{\"types\":[\"blue:FX_ODD\"]}", &err), 0);
    assert_int_equal(sv_check(f->st, &ENV, d, NULL, 0, &err), 0);
    assert_int_equal(sv_live(f->st, wu_now_ms(), &live, &err), 0);
    assert_true(sv_has(live, "FX_ODD", 1));
    assert_false(sv_has(live, "FX_ODD", 0)); /* the type's own queue: nobody */
    assert_true(sv_has(live, "blue:FX_ODD", 0));
    assert_false(sv_has(live, "ODD", 1)); /* a whole name, not a tail */
    json_object_put(live);
    def_unref(d);
}

static void test_a_taskdef_of_its_name(void **state)
{
    fixture *f = *state;
    weft_error err = {0};
    def_workflow *d = compile(ODD, NULL);
    assert_int_equal(ST(f->st, taskdef_put, "FX_ODD", "{\"name\":\"FX_ODD\"}", &err), 0);
    assert_int_equal(sv_check(f->st, &ENV, d, NULL, 0, &err), 0);
    def_unref(d);
}

/* Conductor looks a user-defined task's TaskDef up by the task's name */
static void test_a_taskdef_of_the_task_name(void **state)
{
    fixture *f = *state;
    weft_error err = {0};
    def_workflow *d = compile(ODD, NULL);
    assert_int_equal(ST(f->st, taskdef_put, "o", "{\"name\":\"o\"}", &err), 0);
    assert_int_equal(sv_check(f->st, &ENV, d, NULL, 1, &err), 0);
    def_unref(d);
}

/* Starting, the queue taskToDomain sends a task to must be served. */
static void test_start_in_a_domain(void **state)
{
    static const struct {
        const char *t2d;
        int rc;
    } cases[] = {
        {NULL, WEFT_EINVAL},                          /* the type's own queue: nobody */
        {"{\"o\":\"blue\"}", 0},                      /* blue's: served */
        {"{\"o\":\"green\"}", WEFT_EINVAL},           /* green's: nobody */
        {"{\"o\":\"green,blue\"}", 0},                /* one of them is */
        {"{\"o\":\"green,NO_DOMAIN\"}", WEFT_EINVAL}, /* the own queue again */
        {"{\"other\":\"blue\"}", WEFT_EINVAL},        /* another task's entry */
    };
    fixture *f = *state;
    weft_error err = {0};
    def_workflow *d = compile(ODD, NULL);
    size_t i;
    assert_int_equal(ST(f->st, daemon_beat, "d1", "{\"types\":[\"blue:FX_ODD\"]}", &err), 0);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_object *t2d = cases[i].t2d ? json_tokener_parse(cases[i].t2d) : NULL;
        wu_err_clear(&err);
        if (sv_check(f->st, &ENV, d, t2d, 1, &err) != cases[i].rc)
            fail_msg("taskToDomain %s: %s", cases[i].t2d ? cases[i].t2d : "none", err.msg);
        json_object_put(t2d);
    }
    sv_check(f->st, &ENV, d, NULL, 1, &err);
    assert_non_null(strstr(err.msg, "no live weftd serves it outside a task domain"));
    /* its own queue served too: fine with none, and with NO_DOMAIN */
    assert_int_equal(ST(f->st, daemon_beat, "d2", "{\"types\":[\"FX_ODD\"]}", &err), 0);
    assert_int_equal(sv_check(f->st, &ENV, d, NULL, 1, &err), 0);
    def_unref(d);
}

/* SIMPLE is for external workers whether or not its plugin is here. */
static void test_simple_always(void **state)
{
    static const def_env bare = {.searched = "/nowhere", .allow_unknown = 1};
    fixture *f = *state;
    weft_error err = {0};
    json_object *j =
        json_tokener_parse("{\"name\":\"w\",\"tasks\":[{\"name\":\"q\",\"taskReferenceName\":\"q\","
                           "\"type\":\"SIMPLE\"},{\"name\":\"r\",\"taskReferenceName\":\"r\"}]}");
    def_workflow *d = NULL;
    assert_int_equal(def_compile(&bare, j, "wf", NULL, &d, &err), 0);
    assert_int_equal(d->nremote, 2);
    assert_int_equal(sv_check(f->st, &bare, d, NULL, 1, &err), 0);
    def_unref(d);
    json_object_put(j);
}

/* Heartbeats are the store's data, not the code's: odd ones are passed over. */
static void test_odd_heartbeats(void **state)
{
    fixture *f = *state;
    weft_error err = {0};
    def_workflow *d = compile(ODD, NULL);
    assert_int_equal(ST(f->st, daemon_beat, "e1", "{\"types\":[\"\", \"blue:\", \":\", 5]}", &err),
                     0);
    assert_int_equal(ST(f->st, daemon_beat, "e2", "{\"types\":\"FX_ODD\"}", &err), 0);
    assert_int_equal(sv_check(f->st, &ENV, d, NULL, 0, &err), WEFT_EINVAL);
    assert_non_null(strstr(err.msg, "known types: LAMBDA, SIMPLE;"));
    def_unref(d);
}

static void test_known_types_ask_nothing(void **state)
{
    fixture *f = *state;
    weft_error err = {0};
    st_ops ops = *f->st->ops;
    st_store failing = {&ops};
    def_workflow *d = compile("{'name':'w','tasks':[{'name':'a','taskReferenceName':'a','type':"
                              "'LAMBDA'},{'name':'q','taskReferenceName':'q'}]}",
                              NULL);
    ops.daemons = no_daemons;
    assert_int_equal(sv_check(&failing, &ENV, d, NULL, 0, &err), 0);
    def_unref(d);
    /* and one that must ask says what the store said */
    d = compile(ODD, NULL);
    assert_int_equal(sv_check(&failing, &ENV, d, NULL, 0, &err), WEFT_EIO);
    assert_string_equal(err.msg, "the store was asked");
    def_unref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unknown_refused_naming_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_served_by_a_live_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_served_in_a_domain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_taskdef_of_its_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_taskdef_of_the_task_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_in_a_domain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_simple_always, setup, teardown),
        cmocka_unit_test_setup_teardown(test_odd_heartbeats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_known_types_ask_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

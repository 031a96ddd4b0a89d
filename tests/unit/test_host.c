/*
 * Tests of host.c: the weft_host table as a plugin sees it (sdk/weft/plugin.h),
 * called with contexts built over real executions: the table itself,
 * config_fill, registration outside a plugin's init, log, error,
 * parse_duration, the task view, lookup, variables and results. The task
 * types and the fixture are in host_fixture.h; no plugin is loaded, so the
 * registration functions run outside any plugin's init.
 */
#include "autoconf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "host_fixture.h"

/* ---- capturing stderr, for log() ---- */

static int saved_fd = -1;
static FILE *capture_file;

static void capture_begin(void)
{
    fflush(stderr);
    capture_file = tmpfile();
    assert_non_null(capture_file);
    saved_fd = dup(2);
    assert_true(saved_fd >= 0);
    assert_true(dup2(fileno(capture_file), 2) >= 0);
}

/* Restores stderr; returns what was written (tracked, freed by the teardown). */
static const char *capture_end(void)
{
    long n;
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    saved_fd = -1;
    n = ftell(capture_file);
    free(G.captured);
    G.captured = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    rewind(capture_file);
    if (n > 0 && fread(G.captured, 1, (size_t)n, capture_file) != (size_t)n)
        fail_msg("cannot read the captured stderr");
    fclose(capture_file);
    capture_file = NULL;
    return G.captured;
}

/* ---- the table itself ---- */

static void test_table_header(void **state)
{
    const weft_host *h = G.h;
    assert_ptr_equal(host_table(), h); /* one table, static storage */
    assert_int_equal(h->abi_major, WEFT_ABI_MAJOR);
    assert_int_equal(h->size, sizeof(weft_host));
    assert_non_null(h->version);
    assert_string_equal(h->version, PACKAGE_VERSION);
    /* the four fixed fields keep their place in every ABI version */
    assert_int_equal(offsetof(weft_host, abi_major), 0);
    assert_int_equal(offsetof(weft_host, size), 4);
    assert_int_equal(offsetof(weft_host, version), 8);
    assert_true(offsetof(weft_host, declare) > offsetof(weft_host, version));
}

static void test_every_function_present(void **state)
{
    const weft_host *h = G.h;
#define PRESENT(f)                                                                                 \
    do {                                                                                           \
        assert_true(WEFT_HOST_HAS(h, f));                                                          \
        assert_non_null(h->f);                                                                     \
    } while (0)
    PRESENT(declare);
    PRESENT(register_task_type);
    PRESENT(register_lock_provider);
    PRESENT(log);
    PRESENT(error);
    PRESENT(task);
    PRESENT(type_data);
    PRESENT(lookup);
    PRESENT(workflow_input);
    PRESENT(workflow_variables);
    PRESENT(set_variables);
    PRESENT(lua_eval);
    PRESENT(start_child);
    PRESENT(parse_duration);
    PRESENT(now_ms);
    PRESENT(previous);
    PRESENT(config_fill);
#undef PRESENT
}

/* A plugin built against a newer SDK tests for fields an older host lacks. */
static void test_host_has_older_host(void **state)
{
    weft_host old = *G.h;
    old.size = (uint32_t)offsetof(weft_host, previous);
    assert_true(WEFT_HOST_HAS(&old, now_ms));
    assert_true(WEFT_HOST_HAS(&old, declare));
    assert_false(WEFT_HOST_HAS(&old, previous));
    old.size = (uint32_t)offsetof(weft_host, previous) + 1; /* a partial field is not there */
    assert_false(WEFT_HOST_HAS(&old, previous));
    old.size = (uint32_t)offsetof(weft_host, declare);
    assert_false(WEFT_HOST_HAS(&old, declare));
    assert_false(WEFT_HOST_HAS(&old, log));
}

/* ---- config_fill: a plugin's config as a declared table ---- */

typedef struct opts {
    const char *url, *name;
    int64_t count, wait_ms;
    int on;
    json_object *any;
} opts;

static const weft_config_field opts_table[] = {
    WEFT_CONFIG_KEY(WEFT_CONFIG_STRING, opts, url, .required = 1),
    WEFT_CONFIG_KEY(WEFT_CONFIG_STRING, opts, name, .dflt = "weft"),
    WEFT_CONFIG_KEY(WEFT_CONFIG_INT, opts, count, .dflt = "3", .min = 1, .max = 10),
    WEFT_CONFIG_KEY(WEFT_CONFIG_MS, opts, wait_ms, .dflt = "2s"),
    WEFT_CONFIG_KEY(WEFT_CONFIG_BOOL, opts, on, .dflt = "true"),
    WEFT_CONFIG_KEY(WEFT_CONFIG_JSON, opts, any),
    WEFT_CONFIG_END,
};

/* config_fill with config given as JSON text (J: ' for ", tracked). */
static int fill(const char *text, opts *o, weft_error *err)
{
    json_object *c = text ? J(text) : NULL;
    int rc;
    memset(err, 0, sizeof *err);
    rc = G.h->config_fill(opts_table, c, o, "plugin x", err);
    return rc;
}

static void test_config_fill(void **state)
{
    weft_error err;
    opts o = {0};
    json_object *c = J("{'url':'redis://h','count':7,'wait_ms':250,'on':false,'any':[1]}");

    assert_int_equal(G.h->config_fill(opts_table, c, &o, "plugin x", &err), 0);
    assert_string_equal(o.url, "redis://h");
    assert_string_equal(o.name, "weft"); /* defaults fill what is not given */
    assert_int_equal(o.count, 7);
    assert_int_equal(o.wait_ms, 250); /* an integer is milliseconds */
    assert_int_equal(o.on, 0);
    assert_int_equal(json_object_array_length(o.any), 1);

    memset(&o, 0, sizeof o);
    c = J("{'url':'u','wait_ms':'1m'}");
    assert_int_equal(G.h->config_fill(opts_table, c, &o, "plugin x", &err), 0);
    assert_int_equal(o.wait_ms, 60000); /* a string is a duration */
    assert_int_equal(o.count, 3);
    assert_int_equal(o.on, 1);
    assert_null(o.any);
}

static void test_config_fill_errors(void **state)
{
    static const struct {
        const char *config, *says;
    } bad[] = {
        {NULL, "plugin x: url is required (a string)"},
        {"{}", "plugin x: url is required"},
        {"[]", "plugin x: config must be an object (got array)"},
        {"{'url':'u','cuont':1}",
         "plugin x: unknown key 'cuont' (known: url, name, count, wait_ms, on, any)"},
        {"{'url':5}", "plugin x: url must be a string (got 5)"},
        {"{'url':'u','count':'3'}", "plugin x: count must be an integer (got \"3\")"},
        {"{'url':'u','count':1.5}", "count must be an integer"},
        {"{'url':'u','count':11}", "plugin x: count must be an integer from 1 to 10 (got 11)"},
        {"{'url':'u','count':0}", "count must be an integer from 1 to 10"},
        {"{'url':'u','wait_ms':'soon'}", "plugin x: wait_ms must be milliseconds or a duration"},
        {"{'url':'u','on':1}", "plugin x: on must be true or false (got 1)"},
    };
    static const weft_config_field none[] = {WEFT_CONFIG_END};
    weft_error err;
    opts o = {.name = "kept"};
    size_t i;
    json_object *c;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (fill(bad[i].config, &o, &err) != WEFT_EINVAL)
            fail_msg("config %s: accepted", bad[i].config ? bad[i].config : "NULL");
        assert_int_equal(err.code, WEFT_EINVAL);
        assert_has(err.msg, bad[i].says);
        /* nothing is written on an error */
        assert_string_equal(o.name, "kept");
        assert_null(o.url);
    }
    /* a table without keys: null and {} are fine, any key is named */
    c = J("{'x':1}");
    assert_int_equal(G.h->config_fill(none, NULL, NULL, "lock local", &err), 0);
    assert_int_equal(G.h->config_fill(none, c, NULL, "lock local", &err), WEFT_EINVAL);
    assert_string_equal(err.msg, "lock local: unknown key 'x' (it takes none)");
}

/* ---- registration outside a plugin's init (plugin_loader.c) ---- */

static void test_declare_outside_init(void **state)
{
    assert_int_equal(G.h->declare(WEFT_ABI_MAJOR, (uint32_t)sizeof(weft_host)), WEFT_ESTATE);
    assert_int_equal(G.h->declare(WEFT_ABI_MAJOR + 1, 8), WEFT_ESTATE);
}

static void test_register_outside_init(void **state)
{
    static const weft_lock_provider lock = {.name = "LATE_LOCK"};
    weft_error err = {0};
    assert_int_equal(G.h->register_task_type(&type_t, &err), WEFT_ESTATE);
    assert_int_equal(err.code, WEFT_ESTATE);
    assert_has(err.msg, "only allowed during weft_plugin_init");
    memset(&err, 0, sizeof err);
    assert_int_equal(G.h->register_lock_provider(&lock, &err), WEFT_ESTATE);
    assert_int_equal(err.code, WEFT_ESTATE);
    assert_has(err.msg, "only allowed during weft_plugin_init");
    /* also when declare was tried first, and without an error to fill */
    G.h->declare(WEFT_ABI_MAJOR, (uint32_t)sizeof(weft_host));
    assert_int_equal(G.h->register_task_type(&type_t, NULL), WEFT_ESTATE);
    assert_int_equal(G.h->register_lock_provider(&lock, NULL), WEFT_ESTATE);
}

/* ---- log / error / parse_duration / now_ms ---- */

static void test_log_levels(void **state)
{
    const char *out;
    capture_begin();
    G.h->log(WEFT_LOG_ERROR, "e %d", 1);
    G.h->log(WEFT_LOG_WARN, "w %s", "two");
    G.h->log(WEFT_LOG_INFO, "i %c", '3');
    G.h->log(WEFT_LOG_DEBUG, "d %d", 4);
    out = capture_end();
    /* debug is below the default level (info) */
    assert_string_equal(out, "weft: error: e 1\n"
                             "weft: warn: w two\n"
                             "weft: info: i 3\n");
}

static void test_log_bad_level(void **state)
{
    const char *out;
    capture_begin();
    G.h->log(-1, "negative");
    G.h->log(42, "too big");
    out = capture_end();
    /* an out-of-range level is never dropped: it is shown as an error */
    assert_string_equal(out, "weft: error: negative\nweft: error: too big\n");
}

static void test_log_long_line(void **state)
{
    char big[3000];
    const char *out;
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = 0;
    capture_begin();
    G.h->log(WEFT_LOG_WARN, "%s", big);
    out = capture_end();
    /* cut, not overflowed: prefix, the first 1023 bytes, a newline */
    assert_int_equal(strlen(out), strlen("weft: warn: ") + 1023 + 1);
    assert_int_equal(strncmp(out, "weft: warn: yyy", 15), 0);
    assert_int_equal(out[strlen(out) - 1], '\n');
}

static void test_error(void **state)
{
    weft_error err = {0};
    char big[2 * WEFT_ERROR_MAX];
    assert_int_equal(G.h->error(&err, WEFT_EINVAL, "field '%s': %d is too big", "count", 7),
                     WEFT_EINVAL);
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_string_equal(err.msg, "field 'count': 7 is too big");
    /* the code comes back whatever it is */
    assert_int_equal(G.h->error(&err, WEFT_ETIMEOUT, "late"), WEFT_ETIMEOUT);
    assert_int_equal(err.code, WEFT_ETIMEOUT);
    assert_string_equal(err.msg, "late");
    /* a long message is cut to the buffer */
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(G.h->error(&err, WEFT_EIO, "%s", big), WEFT_EIO);
    assert_int_equal(strlen(err.msg), WEFT_ERROR_MAX - 1);
}

static void test_parse_duration_good(void **state)
{
    static const struct {
        const char *json;
        int64_t ms;
    } cases[] = {
        {"'250ms'", 250},   {"'5s'", 5000}, {"'2m'", 120000}, {"'1h'", 3600000},
        {"'1d'", 86400000}, {"'7'", 7000},  {"'0.5s'", 500},  {"3", 3000},
        {"1.5", 1500},      {"0", 0},       {"'0ms'", 0},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        weft_error err = {0};
        int64_t ms = -1;
        int rc = G.h->parse_duration(J(cases[i].json), &ms, &err);
        if (rc != 0) fail_msg("%s: rc %d: %s", cases[i].json, rc, err.msg);
        if (ms != cases[i].ms)
            fail_msg("%s: %lld ms, want %lld", cases[i].json, (long long)ms,
                     (long long)cases[i].ms);
    }
}

static void test_parse_duration_bad(void **state)
{
    static const struct {
        const char *json; /* NULL: a NULL pointer (JSON null) */
        const char *says;
    } cases[] = {
        {"'5x'", "bad duration '5x'"}, {"'-1s'", "bad duration '-1s'"},
        {"''", "empty duration"},      {"'s'", "bad duration 's'"},
        {"'1e300h'", "bad duration"},  {"-1", "bad duration -1"},
        {"true", "bad duration true"}, {"{'a':1}", "bad duration"},
        {"[1]", "bad duration [ 1 ]"}, {NULL, "bad duration null"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        weft_error err = {0};
        int64_t ms = 77;
        json_object *v = cases[i].json ? J(cases[i].json) : NULL;
        const char *what = cases[i].json ? cases[i].json : "NULL";
        int rc = G.h->parse_duration(v, &ms, &err);
        if (rc != WEFT_EINVAL) fail_msg("%s: rc %d, want WEFT_EINVAL", what, rc);
        assert_int_equal(err.code, WEFT_EINVAL);
        if (!strstr(err.msg, cases[i].says))
            fail_msg("%s: \"%s\" does not contain \"%s\"", what, err.msg, cases[i].says);
        assert_int_equal(ms, 77); /* untouched on failure */
    }
}

static void test_now_ms(void **state)
{
    int64_t before = wu_now_ms(), now = G.h->now_ms(), after = wu_now_ms();
    assert_true(before <= now && now <= after);
    assert_true(now > 1600000000000LL); /* wall clock, in ms */
}

/* ---- the task view ---- */

static void test_task_view(void **state)
{
    xc_task *a;
    const weft_task_view *v;
    start();
    a = add("a", 0, 0);
    a->status = WEFT_TASK_IN_PROGRESS;
    a->input = json_object_new_object();
    json_object_object_add(a->input, "n", json_object_new_int(5));
    a->output = json_object_new_string("partial");
    a->retry_count = 2;
    a->poll_count = 3;
    a->started_ms = 1234;

    v = G.h->task(ctx_for(a, NULL));
    assert_non_null(v);
    assert_string_equal(v->task_id, a->id);
    assert_string_equal(v->workflow_id, "wf-1");
    assert_string_equal(v->ref, "a");
    assert_string_equal(v->def_ref, "a");
    assert_string_equal(v->type, "T");
    assert_int_equal(v->status, WEFT_TASK_IN_PROGRESS);
    assert_ptr_equal(v->def, a->def->json);
    assert_string_equal(json_object_get_string(json_object_object_get(v->def, "name")), "first");
    assert_ptr_equal(v->input, a->input);
    assert_ptr_equal(v->output, a->output);
    assert_int_equal(v->retry_count, 2);
    assert_int_equal(v->poll_count, 3);
    assert_int_equal(v->iteration, 0);
    assert_int_equal(v->scheduled_ms, a->scheduled_ms);
    assert_int_equal(v->started_ms, 1234);
    /* the same view on every call */
    assert_ptr_equal(G.h->task(&G.ctx), v);
}

static void test_task_view_in_loop(void **state)
{
    xc_task *t;
    const weft_task_view *v;
    int s;
    start();
    add("b", 0, 0);
    s = xc_new_scope(G.x, 0, 3);
    t = add("inner", s, 3);
    v = G.h->task(ctx_for(t, NULL));
    assert_string_equal(v->ref, "inner__3");
    assert_string_equal(v->def_ref, "inner");
    assert_int_equal(v->iteration, 3);
    assert_int_equal(v->status, WEFT_TASK_SCHEDULED);
    assert_null(v->input);
    assert_null(v->output);
    assert_int_equal(v->started_ms, 0);
}

static void test_task_view_dynamic(void **state)
{
    xc_task *a;
    start();
    a = add("a", 0, 0);
    /* a dynamic task's WorkflowTask is its own JSON, not the definition's */
    a->dyn_json = json_object_get(J("{'taskReferenceName':'a','type':'T','dyn':1}"));
    assert_ptr_equal(host_task_json(a), a->dyn_json);
    assert_ptr_equal(G.h->task(ctx_for(a, NULL))->def, a->dyn_json);
}

static void test_type_data(void **state)
{
    start();
    assert_ptr_equal(G.h->type_data(ctx_for(add("b", 0, 0), NULL)), &box_data);
    assert_null(G.h->type_data(ctx_for(add("a", 0, 0), NULL)));
}

/* ---- lookup / previous ---- */

static void test_lookup_unknown(void **state)
{
    weft_ctx *c;
    start();
    c = ctx_for(add("a", 0, 0), NULL);
    assert_null(G.h->lookup(c, "nope"));
    assert_null(G.h->lookup(c, ""));
    assert_null(G.h->lookup(c, NULL));
    /* in the definition but not scheduled yet */
    assert_null(G.h->lookup(c, "c"));
    assert_null(G.h->lookup(c, "inner"));
}

static void test_lookup_known(void **state)
{
    xc_task *a, *b;
    weft_ctx *c;
    const weft_task_view *v, *self;
    start();
    a = add("a", 0, 0);
    a->status = WEFT_TASK_COMPLETED;
    a->output = json_object_new_object();
    json_object_object_add(a->output, "r", json_object_new_int(9));
    a->retry_count = 1;
    b = add("b", 0, 0);
    c = ctx_for(b, NULL);

    v = G.h->lookup(c, "a");
    assert_non_null(v);
    assert_string_equal(v->task_id, a->id);
    assert_string_equal(v->workflow_id, "wf-1");
    assert_string_equal(v->ref, "a");
    assert_string_equal(v->def_ref, "a");
    assert_string_equal(v->type, "T");
    assert_int_equal(v->status, WEFT_TASK_COMPLETED);
    assert_ptr_equal(v->def, a->def->json);
    assert_json(v->output, "{'r':9}");
    assert_int_equal(v->retry_count, 1);
    assert_int_equal(v->scheduled_ms, a->scheduled_ms);
    /* the calling task itself */
    self = G.h->lookup(c, "b");
    assert_non_null(self);
    assert_string_equal(self->task_id, b->id);
    assert_string_equal(self->type, "BOX");
    /* every view stays valid until the callback returns */
    assert_ptr_not_equal(v, self);
    assert_string_equal(v->task_id, a->id);
}

static void test_lookup_loop_instances(void **state)
{
    xc_task *i1, *i2;
    weft_ctx *c;
    int s1, s2;
    start();
    c = ctx_for(add("b", 0, 0), NULL);
    s1 = xc_new_scope(G.x, 0, 1);
    i1 = add("inner", s1, 1);
    s2 = xc_new_scope(G.x, 0, 2);
    i2 = add("inner", s2, 2);
    /* the definition ref gives the newest iteration; an instance ref, that one */
    assert_string_equal(G.h->lookup(c, "inner")->task_id, i2->id);
    assert_string_equal(G.h->lookup(c, "inner__1")->task_id, i1->id);
    assert_int_equal(G.h->lookup(c, "inner__1")->iteration, 1);
    assert_string_equal(G.h->lookup(c, "inner__2")->ref, "inner__2");
    assert_null(G.h->lookup(c, "inner__3"));
}

static void test_lookup_newest_retry(void **state)
{
    xc_task *first, *retry;
    start();
    first = add("a", 0, 0);
    first->status = WEFT_TASK_FAILED;
    retry = add("a", 0, 0);
    retry->retry_count = 1;
    assert_string_equal(G.h->lookup(ctx_for(add("c", 0, 0), NULL), "a")->task_id, retry->id);
    assert_int_equal(G.h->lookup(&G.ctx, "a")->retry_count, 1);
}

static void test_previous(void **state)
{
    xc_task *a, *b, *c;
    const weft_task_view *v;
    start();
    a = add("a", 0, 0);
    /* first in its list */
    assert_null(G.h->previous(ctx_for(a, NULL)));
    b = add("b", 0, 0);
    v = G.h->previous(ctx_for(b, NULL));
    assert_non_null(v);
    assert_string_equal(v->task_id, a->id);
    assert_string_equal(v->ref, "a");
    c = add("c", 0, 0);
    assert_string_equal(G.h->previous(ctx_for(c, NULL))->task_id, b->id);
}

static void test_previous_not_scheduled(void **state)
{
    start();
    /* c stands after b, which never ran (e.g. skipped over): nothing to show */
    assert_null(G.h->previous(ctx_for(add("c", 0, 0), NULL)));
}

static void test_previous_nested(void **state)
{
    xc_task *b, *i1, *i2, *inner2;
    int s1, s2;
    start();
    add("a", 0, 0);
    b = add("b", 0, 0);
    s1 = xc_new_scope(G.x, 0, 1);
    i1 = add("inner", s1, 1);
    /* first of a nested list: not the task holding the list */
    assert_null(G.h->previous(ctx_for(i1, NULL)));
    s2 = xc_new_scope(G.x, 0, 2);
    i2 = add("inner", s2, 2);
    inner2 = add("inner2", s2, 2);
    assert_string_equal(G.h->previous(ctx_for(inner2, NULL))->task_id, i2->id);
    assert_string_equal(G.h->previous(&G.ctx)->ref, "inner__2");
    (void)b;
}

/* ---- workflow input and variables ---- */

static void test_workflow_input_variables(void **state)
{
    weft_ctx *c;
    start();
    c = ctx_for(add("a", 0, 0), NULL);
    assert_ptr_equal(G.h->workflow_input(c), G.x->input);
    assert_json(G.h->workflow_input(c), "{'n':5}");
    assert_ptr_equal(G.h->workflow_variables(c), G.x->variables);
    assert_json(G.h->workflow_variables(c), "{'v0':1}");
}

static void test_set_variables(void **state)
{
    weft_ctx *c;
    weft_error err = {0};
    json_object *vars = json_object_new_object(), *list = json_object_new_array();
    start();
    c = ctx_for(add("a", 0, 0), NULL);
    json_object_array_add(list, json_object_new_int(1));
    json_object_object_add(vars, "k", json_object_new_string("x"));
    json_object_object_add(vars, "v0", json_object_new_int(2));
    json_object_object_add(vars, "list", list);
    assert_int_equal(G.h->set_variables(c, vars, &err), 0);
    /* vars stays borrowed: the caller drops it, the variables keep theirs */
    json_object_put(vars);
    assert_json(G.h->workflow_variables(c), "{'v0':2,'k':'x','list':[1]}");
    /* an empty object changes nothing */
    assert_int_equal(G.h->set_variables(c, J("{}"), &err), 0);
    assert_json(G.x->variables, "{'v0':2,'k':'x','list':[1]}");
    /* merging the variables into themselves neither changes nor frees them */
    assert_int_equal(G.h->set_variables(c, G.x->variables, &err), 0);
    assert_json(G.x->variables, "{'v0':2,'k':'x','list':[1]}");
}

static void test_set_variables_not_object(void **state)
{
    static const char *const bad[] = {"[1,2]", "'str'", "3", "true", NULL};
    weft_ctx *c;
    size_t i;
    start();
    c = ctx_for(add("a", 0, 0), NULL);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        weft_error err = {0};
        json_object *v = bad[i] ? J(bad[i]) : NULL; /* NULL: JSON null */
        assert_int_equal(G.h->set_variables(c, v, &err), WEFT_EINVAL);
        assert_int_equal(err.code, WEFT_EINVAL);
        assert_has(err.msg, "variables must be an object");
    }
    assert_json(G.x->variables, "{'v0':1}");
}

/* Is target reachable from v (a reference cycle when v is inside target)? */
static int reaches(json_object *v, json_object *target, int depth)
{
    size_t i;
    if (v == target) return 1;
    if (depth > 64) return 1; /* deeper than any test builds: a cycle */
    if (json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, k, m)
        {
            (void)k;
            if (reaches(m, target, depth + 1)) return 1;
        }
    } else if (json_object_is_type(v, json_type_array)) {
        for (i = 0; i < json_object_array_length(v); i++)
            if (reaches(json_object_array_get_idx(v, i), target, depth + 1)) return 1;
    }
    return 0;
}

/*
 * set_variables stores copies: a member that is workflow.variables itself
 * (what SET_VARIABLE gets from an input "${workflow.variables}") is stored as
 * a snapshot, never as a reference that would make the variables contain
 * themselves.
 */
static void test_set_variables_self(void **state)
{
    weft_ctx *c;
    weft_error err = {0};
    json_object *vars;
    int rc;
    vars = track_js(json_object_new_object());
    start();
    c = ctx_for(add("a", 0, 0), NULL);
    json_object_object_add(vars, "all", json_object_get(G.x->variables));
    rc = G.h->set_variables(c, vars, &err);
    if (rc != 0) {
        assert_int_equal(rc, WEFT_EINVAL);
        if (strstr(err.msg, "out of memory")) fail_msg("misleading message: %s", err.msg);
        return;
    }
    assert_false(reaches(json_object_object_get(G.x->variables, "all"), G.x->variables, 0));
    assert_json(json_object_object_get(G.x->variables, "all"), "{'v0':1}");
}

/*
 * Regression: the same one level down ({"keep":{"all":"${workflow.variables}"}})
 * is accepted and leaves workflow.variables containing itself: it is never
 * freed, and serialising the execution (xc_to_json, the Redis store, the API)
 * recurses until the stack overflows. Expected: a copy, or WEFT_EINVAL.
 */
static void test_set_variables_cycle(void **state)
{
    weft_ctx *c;
    weft_error err = {0};
    json_object *vars, *keep;
    int rc;
    vars = track_js(json_object_new_object());
    keep = json_object_new_object();
    start();
    c = ctx_for(add("a", 0, 0), NULL);
    json_object_object_add(keep, "all", json_object_get(G.x->variables));
    json_object_object_add(vars, "keep", keep);
    rc = G.h->set_variables(c, vars, &err);
    if (rc != 0) {
        assert_int_equal(rc, WEFT_EINVAL);
        return;
    }
    if (reaches(json_object_object_get(G.x->variables, "keep"), G.x->variables, 0)) {
        json_object_object_del(G.x->variables, "keep"); /* break it, so teardown frees */
        fail_msg("workflow.variables now contains itself");
    }
    assert_json(json_object_object_get(G.x->variables, "keep"), "{'all':{'v0':1}}");
}

/*
 * Regression: error() formats straight into err->msg, so a plugin that prefixes the
 * message a host call just left there - host->error(err, code, "duration:
 * %s", err->msg), the natural way to add context - reads the buffer while
 * vsnprintf overwrites it (overlapping arguments, undefined behaviour).
 * glibc gives "duration: duration: ..." instead of the message.
 */
static void test_error_prefix_own_message(void **state)
{
    weft_error err = {0};
    G.h->error(&err, WEFT_EINVAL, "bad duration '5x'");
    assert_int_equal(G.h->error(&err, WEFT_EINVAL, "field 'duration': %s", err.msg), WEFT_EINVAL);
    assert_string_equal(err.msg, "field 'duration': bad duration '5x'");
}

/* ---- results ---- */

static void test_result_init_clear(void **state)
{
    weft_result r;
    memset(&r, 0x5a, sizeof r);
    host_result_init(&r);
    assert_int_equal(r.status, WEFT_TASK_SCHEDULED);
    assert_null(r.output);
    assert_null(r.end_output);
    assert_int_equal(r.reason[0], 0);
    assert_int_equal(r.callback_after_ms, 0);
    assert_int_equal(r.iteration, 0);
    assert_int_equal(r.end_workflow, WEFT_WF_RUNNING);
    /* clear drops what the plugin handed over (the sanitizers watch) */
    r.status = WEFT_TASK_COMPLETED;
    r.output = json_object_new_string("out");
    r.end_output = json_object_new_object();
    snprintf(r.reason, sizeof r.reason, "why");
    r.end_workflow = WEFT_WF_FAILED;
    host_result_clear(&r);
    assert_int_equal(r.status, WEFT_TASK_SCHEDULED);
    assert_null(r.output);
    assert_null(r.end_output);
    assert_int_equal(r.reason[0], 0);
    assert_int_equal(r.end_workflow, WEFT_WF_RUNNING);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_table_header),
        T(test_every_function_present),
        T(test_host_has_older_host),
        T(test_config_fill),
        T(test_config_fill_errors),
        T(test_declare_outside_init),
        T(test_register_outside_init),
        T(test_log_levels),
        T(test_log_bad_level),
        T(test_log_long_line),
        T(test_error),
        T(test_error_prefix_own_message),
        T(test_parse_duration_good),
        T(test_parse_duration_bad),
        T(test_now_ms),
        T(test_task_view),
        T(test_task_view_in_loop),
        T(test_task_view_dynamic),
        T(test_type_data),
        T(test_lookup_unknown),
        T(test_lookup_known),
        T(test_lookup_loop_instances),
        T(test_lookup_newest_retry),
        T(test_previous),
        T(test_previous_not_scheduled),
        T(test_previous_nested),
        T(test_workflow_input_variables),
        T(test_set_variables),
        T(test_set_variables_not_object),
        T(test_set_variables_self),
        T(test_set_variables_cycle),
        T(test_result_init_clear),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}

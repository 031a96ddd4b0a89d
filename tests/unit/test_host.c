/*
 * Tests of host.c: the weft_host table as a plugin sees it (sdk/weft/plugin.h),
 * called with contexts built over real executions. Task types are defined
 * here; no plugin is loaded, so the registration functions run outside any
 * plugin's init.
 */
#include "autoconf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/exec.h"
#include "plugin/host.h"
#include "lua/sandbox.h"

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

static int box_data; /* what BOX's type_data points at */
static const weft_task_type type_t = {.name = "T", .execute = noop_execute};
static const weft_task_type type_box = {.name = "BOX", .data = &box_data, .map = noop_map};

static const weft_task_type *find_type(void *ud, const char *name)
{
    if (!strcmp(name, "T")) return &type_t;
    if (!strcmp(name, "BOX")) return &type_box;
    return NULL;
}

static def_env DEFS = {.find_type = find_type, .searched = "/test/plugins"};

/* a, then BOX b holding the list [inner, inner2], then c. */
static const char *const WF = "{'name':'hosted','version':2,'variables':{'v0':1},'tasks':["
                              " {'name':'first','taskReferenceName':'a','type':'T',"
                              "  'inputParameters':{'n':'${workflow.input.n}'}},"
                              " {'taskReferenceName':'b','type':'BOX','cases':{'x':["
                              "   {'taskReferenceName':'inner','type':'T'},"
                              "   {'taskReferenceName':'inner2','type':'T'}]}},"
                              " {'taskReferenceName':'c','type':'T'}]}";

/* The service behind start_child and lua_eval, recording what it was given. */
typedef struct fake_svc {
    sbx *box;
    int sandbox_calls;
    int child_calls;
    int child_rc;
    xc_exec *x;
    xc_task *t;
    json_object *def, *input;
    const char *name;
    int version;
    char *id_out;
    size_t id_size;
    char input_text[256]; /* input as it was during the call */
} fake_svc;

static sbx *svc_sandbox(void *ud)
{
    fake_svc *f = ud;
    f->sandbox_calls++;
    return f->box;
}

static int svc_start_child(void *ud, xc_exec *x, xc_task *t, json_object *def, const char *name,
                           int version, json_object *input, char *id_out, size_t id_size,
                           weft_error *err)
{
    fake_svc *f = ud;
    f->child_calls++;
    f->x = x;
    f->t = t;
    f->def = def;
    f->name = name;
    f->version = version;
    f->input = input;
    snprintf(f->input_text, sizeof f->input_text, "%s",
             input ? json_object_to_json_string_ext(input, JSON_C_TO_STRING_PLAIN) : "null");
    f->id_out = id_out;
    f->id_size = id_size;
    if (f->child_rc) return wu_err(err, f->child_rc, "no workflow named '%s'", name);
    snprintf(id_out, id_size, "child-%d", f->child_calls);
    return 0;
}

/*
 * What a test allocates is tracked here and freed by the teardown, so a
 * failing assertion (which leaves the test early) leaks nothing.
 */
static struct {
    const weft_host *h;
    def_workflow *wf;
    xc_exec *x;
    weft_ctx ctx;
    int ctx_live;
    fake_svc svc;
    json_object *js[32];
    size_t njs;
    char *captured;
} G;

static int setup(void **state)
{
    memset(&G, 0, sizeof G);
    G.h = host_table();
    return 0;
}

static int teardown(void **state)
{
    size_t i;
    host_set_log(NULL, NULL, NULL); /* a test that failed may have left its sink */
    if (G.ctx_live) host_ctx_done(&G.ctx);
    xc_free(G.x);
    def_unref(G.wf);
    sbx_free(G.svc.box);
    for (i = 0; i < G.njs; i++)
        json_object_put(G.js[i]);
    free(G.captured);
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

static void assert_has(const char *msg, const char *part)
{
    if (!msg) fail_msg("NULL does not contain \"%s\"", part);
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

/* Compile WF and start execution "wf-1" with input {"n":5}. */
static xc_exec *start(void)
{
    weft_error err = {0};
    DEFS.host = G.h;
    if (def_compile(&DEFS, J(WF), "hosted.json", NULL, &G.wf, &err))
        fail_msg("compile: %s", err.msg);
    assert_int_equal(xc_new(G.wf, J("{'n':5}"), "wf-1", &G.x, &err), 0);
    return G.x;
}

static xc_task *add(const char *ref, int scope, int iteration)
{
    def_task *d = wu_map_get(G.wf->by_ref, ref);
    xc_task *t;
    if (!d) fail_msg("no task '%s'", ref);
    t = xc_add_task(G.x, d, scope, iteration);
    assert_non_null(t);
    return t;
}

/* The context of a callback for task t (svc may be NULL). */
static weft_ctx *ctx_for(xc_task *t, const host_services *svc)
{
    if (G.ctx_live) host_ctx_done(&G.ctx);
    host_ctx_init(&G.ctx, svc, G.x, t);
    G.ctx_live = 1;
    return &G.ctx;
}

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

/* ---- lua_eval ---- */

static void test_lua_eval_no_sandbox(void **state)
{
    static const host_services no_fn = {NULL, NULL, NULL, NULL, NULL};
    weft_error err = {0};
    json_object *out = (json_object *)&err; /* must be reset to NULL */
    xc_task *a;
    host_services null_sbx = {&G.svc, svc_sandbox, NULL, NULL, NULL}; /* G.svc.box is NULL */
    start();
    a = add("a", 0, 0);

    assert_int_equal(G.h->lua_eval(ctx_for(a, NULL), "calc", "return 1", NULL, &out, &err),
                     WEFT_ESTATE);
    assert_null(out);
    assert_int_equal(err.code, WEFT_ESTATE);
    assert_has(err.msg, "no Lua sandbox");

    out = (json_object *)&err;
    memset(&err, 0, sizeof err);
    assert_int_equal(G.h->lua_eval(ctx_for(a, &no_fn), "calc", "return 1", NULL, &out, &err),
                     WEFT_ESTATE);
    assert_null(out);
    assert_has(err.msg, "no Lua sandbox");

    out = (json_object *)&err;
    memset(&err, 0, sizeof err);
    assert_int_equal(G.h->lua_eval(ctx_for(a, &null_sbx), "calc", "return 1", NULL, &out, &err),
                     WEFT_ESTATE);
    assert_null(out);
    assert_int_equal(G.svc.sandbox_calls, 1);
}

/* A context whose service has a real sandbox with the given limits. */
static weft_ctx *sandboxed(uint64_t instructions, size_t mem_bytes, host_services *svc)
{
    sbx_limits lim = {mem_bytes, instructions, 600000, 0};
    weft_error err = {0};
    G.svc.box = sbx_new(&lim, &err);
    if (!G.svc.box) fail_msg("sbx_new: %s", err.msg);
    svc->ud = &G.svc;
    svc->sandbox = svc_sandbox;
    svc->start_child = NULL;
    start();
    return ctx_for(add("a", 0, 0), svc);
}

static void test_lua_eval_ok(void **state)
{
    host_services svc;
    weft_ctx *c = sandboxed(0, 0, &svc);
    weft_error err = {0};
    json_object *out = NULL;

    assert_int_equal(G.h->lua_eval(c, "calc", "return { twice = input.n * 2, s = input.s:upper() }",
                                   J("{'n':21,'s':'ab'}"), &out, &err),
                     0);
    track_js(out);
    assert_json(out, "{'twice':42,'s':'AB'}");
    assert_int_equal(G.svc.sandbox_calls, 1);

    /* nil comes back as NULL; no input is nil */
    out = (json_object *)&err;
    assert_int_equal(G.h->lua_eval(c, "calc", "return input", NULL, &out, &err), 0);
    assert_null(out);
    /* each eval is a fresh environment: globals do not survive */
    assert_int_equal(G.h->lua_eval(c, "calc", "leak = 1 return leak", NULL, &out, &err), 0);
    track_js(out);
    assert_int_equal(json_object_get_int(out), 1);
    assert_int_equal(G.h->lua_eval(c, "calc", "return leak", NULL, &out, &err), 0);
    assert_null(out);
}

static void test_lua_eval_syntax_error(void **state)
{
    host_services svc;
    weft_ctx *c = sandboxed(0, 0, &svc);
    weft_error err = {0};
    json_object *out = (json_object *)&err;
    int rc = G.h->lua_eval(c, "price", "return (1 +", NULL, &out, &err);
    assert_int_equal(rc, WEFT_EINVAL);
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_null(out);
    assert_has(err.msg, "price:1:");
}

static void test_lua_eval_runtime_error(void **state)
{
    host_services svc;
    weft_ctx *c = sandboxed(0, 0, &svc);
    weft_error err = {0};
    json_object *out = (json_object *)&err;
    assert_int_equal(
        G.h->lua_eval(c, "price", "error('boom: ' .. input.x)", J("{'x':'bad'}"), &out, &err),
        WEFT_ESCRIPT);
    assert_int_equal(err.code, WEFT_ESCRIPT);
    assert_has(err.msg, "boom: bad");
    assert_null(out);
    /* the sandbox has no os / io */
    memset(&err, 0, sizeof err);
    assert_int_equal(G.h->lua_eval(c, "price", "return os.time()", NULL, &out, &err), WEFT_ESCRIPT);
    assert_null(out);
    assert_int_equal(G.h->lua_eval(c, "price", "return io.open('/etc/passwd')", NULL, &out, &err),
                     WEFT_ESCRIPT);
    /* a result that is not JSON */
    memset(&err, 0, sizeof err);
    assert_int_not_equal(G.h->lua_eval(c, "price", "return function() end", NULL, &out, &err), 0);
    assert_null(out);
    assert_has(err.msg, "cannot convert a function to JSON");
}

static void test_lua_eval_instruction_limit(void **state)
{
    host_services svc;
    weft_ctx *c = sandboxed(100000, 0, &svc);
    weft_error err = {0};
    json_object *out = (json_object *)&err;
    /* pcall cannot swallow the limit */
    assert_int_equal(G.h->lua_eval(c, "spin", "pcall(function() while true do end end) return 1",
                                   NULL, &out, &err),
                     WEFT_ELIMIT);
    assert_int_equal(err.code, WEFT_ELIMIT);
    assert_has(err.msg, "instruction limit (100000)");
    assert_null(out);
    /* and the sandbox still works afterwards */
    assert_int_equal(G.h->lua_eval(c, "ok", "return 2", NULL, &out, &err), 0);
    track_js(out);
    assert_int_equal(json_object_get_int(out), 2);
}

static void test_lua_eval_memory_limit(void **state)
{
    host_services svc;
    weft_ctx *c = sandboxed(0, 4 << 20, &svc);
    weft_error err = {0};
    json_object *out = (json_object *)&err;
    assert_int_equal(G.h->lua_eval(c, "hog",
                                   "local t = {} for i = 1, 1e7 do t[i] = string.rep('x', 64) .. i "
                                   "end return #t",
                                   NULL, &out, &err),
                     WEFT_ELIMIT);
    assert_int_equal(err.code, WEFT_ELIMIT);
    assert_has(err.msg, "memory limit");
    assert_null(out);
}

/* ---- start_child ---- */

static void test_start_child_no_service(void **state)
{
    static const host_services sandbox_only = {NULL, svc_sandbox, NULL, NULL, NULL};
    weft_error err = {0};
    char id[64] = "untouched";
    xc_task *a;
    start();
    a = add("a", 0, 0);
    assert_int_equal(
        G.h->start_child(ctx_for(a, NULL), NULL, "child", 1, NULL, id, sizeof id, &err),
        WEFT_ESTATE);
    assert_int_equal(err.code, WEFT_ESTATE);
    assert_has(err.msg, "cannot start workflows here");
    assert_string_equal(id, "untouched");
    memset(&err, 0, sizeof err);
    assert_int_equal(
        G.h->start_child(ctx_for(a, &sandbox_only), NULL, "child", 1, NULL, id, sizeof id, &err),
        WEFT_ESTATE);
    assert_has(err.msg, "cannot start workflows here");
}

static void test_start_child_fails(void **state)
{
    host_services svc = {&G.svc, NULL, svc_start_child, NULL, NULL};
    weft_error err = {0};
    char id[64] = "";
    json_object *in = J("{'x':1}");
    xc_task *a;
    start();
    a = add("a", 0, 0);
    G.svc.child_rc = WEFT_ENOTFOUND;
    assert_int_equal(
        G.h->start_child(ctx_for(a, &svc), NULL, "missing", 4, in, id, sizeof id, &err),
        WEFT_ENOTFOUND);
    assert_int_equal(err.code, WEFT_ENOTFOUND);
    assert_string_equal(err.msg, "no workflow named 'missing'");
    /* everything was handed through */
    assert_int_equal(G.svc.child_calls, 1);
    assert_ptr_equal(G.svc.x, G.x);
    assert_ptr_equal(G.svc.t, a);
    assert_null(G.svc.def);
    assert_string_equal(G.svc.name, "missing");
    assert_int_equal(G.svc.version, 4);
    assert_ptr_equal(G.svc.input, in);
    assert_ptr_equal(G.svc.id_out, id);
    assert_int_equal(G.svc.id_size, sizeof id);
}

static void test_start_child_ok(void **state)
{
    host_services svc = {&G.svc, NULL, svc_start_child, NULL, NULL};
    weft_error err = {0};
    char id[64] = "";
    json_object *def = J("{'name':'inline','tasks':[{'taskReferenceName':'z'}]}");
    xc_task *b;
    start();
    b = add("b", 0, 0);
    assert_int_equal(G.h->start_child(ctx_for(b, &svc), def, NULL, 0, NULL, id, sizeof id, &err),
                     0);
    assert_string_equal(id, "child-1");
    assert_ptr_equal(G.svc.def, def);
    assert_null(G.svc.name);
    assert_int_equal(G.svc.version, 0);
    assert_null(G.svc.input);
    assert_ptr_equal(G.svc.t, b);
}

/* ---- secrets ---- */

static int secret_lookups;

/* S = "abc", LONG = "abcdef" (holds S); anything else is not set. */
static int fake_secret(void *ud, const char *name, char **value, weft_error *err)
{
    secret_lookups++;
    if (!strcmp(name, "S"))
        *value = strdup("abc");
    else if (!strcmp(name, "LONG"))
        *value = strdup("abcdef");
    else
        return wu_err(err, WEFT_ENOTFOUND, "secret '%s' is not set", name);
    return 0;
}

/* Task a of a started execution, with this input (stored form) resolved
 * from these inputParameters; lookups counted from 0. */
static xc_task *task_from(const char *params, const char *input)
{
    xc_task *a;
    start();
    a = add("a", 0, 0);
    /* this test's definition of a (compiled afresh for each test) */
    json_object_object_add(a->def->json, "inputParameters", json_object_get(J(params)));
    /* what loading such a definition finds */
    a->def->uses_secrets = strstr(params, "${secrets.") != NULL;
    a->input = json_object_get(J(input));
    secret_lookups = 0;
    return a;
}

/* The same, its input written as is in its inputParameters. */
static xc_task *task_with_input(const char *input)
{
    return task_from(input, input);
}

static void test_redact_reported(void **state)
{
    json_object *given = J("{'v':'abcdef','w':['q abc', 7],'in':{'abc':1,'x abcdef':2},'n':5}");
    json_object *out = json_object_get(given);
    char reason[64] = "used abcdef and abc, not ab";
    xc_task *a = task_with_input("{'k':'${secrets.S}','t':'x ${secrets.LONG} y',"
                                 "'gone':'${secrets.GONE}'}");
    host_redact_reported(a, fake_secret, NULL, &out, reason, reason, sizeof reason);
    track_js(out);
    /* the longer secret first: no "***def" left over; names of members too */
    assert_json(out, "{'v':'***','w':['q ***', 7],'in':{'***':1,'x ***':2},'n':5}");
    assert_string_equal(reason, "used *** and ***, not ab");
    /* what the caller gave is not changed; a secret no longer set is skipped */
    assert_json(given, "{'v':'abcdef','w':['q abc', 7],'in':{'abc':1,'x abcdef':2},'n':5}");
    assert_int_equal(secret_lookups, 3);
}

/* A reason longer than its room is masked whole, then cut: no secret's
 * beginning is left at the cut. */
static void test_redact_reported_cut(void **state)
{
    char reason[1000], out[16];
    xc_task *a = task_with_input("{'k':'${secrets.LONG}'}");
    snprintf(reason, sizeof reason, "0123456789 abcdef");
    host_redact_reported(a, fake_secret, NULL, NULL, reason, out, sizeof out);
    assert_string_equal(out, "0123456789 ***");
    snprintf(reason, sizeof reason, "0123456789abcd abcdef");
    host_redact_reported(a, fake_secret, NULL, NULL, reason, out, sizeof out);
    assert_string_equal(out, "0123456789abcd ");
}

/* A plugin's reason that filled its buffer: a secret's beginning at the end is masked. */
static void test_redact_cut_tail(void **state)
{
    host_services svc = {&G.svc, NULL, NULL, fake_secret, NULL};
    weft_error err = {0};
    weft_result r;
    xc_task *a = task_with_input("{'k':'${secrets.LONG}'}");
    weft_ctx *c = ctx_for(a, &svc);
    assert_int_equal(host_ctx_secrets(c, &err), 0);
    host_result_init(&r);
    memset(r.reason, 'z', sizeof r.reason - 1);
    memcpy(r.reason + sizeof r.reason - 4, "abc", 3); /* "zz...zabc", cut from "abcdef" */
    host_ctx_redact(c, &r);
    assert_int_equal(strlen(r.reason), sizeof r.reason - 1);
    assert_string_equal(r.reason + sizeof r.reason - 5, "z***");
    /* a reason with room left was not cut: its end stays */
    snprintf(r.reason, sizeof r.reason, "ends with ab");
    host_ctx_redact(c, &r);
    assert_string_equal(r.reason, "ends with ab");
}

static void test_redact_reported_no_secret_named(void **state)
{
    json_object *given = J("{'v':'abc'}");
    json_object *out = json_object_get(given);
    char reason[16] = "abc";
    xc_task *a = task_with_input("{'k':'plain'}");
    host_redact_reported(a, fake_secret, NULL, &out, reason, reason, sizeof reason);
    json_object_put(out);
    /* nothing looked up, nothing copied */
    assert_int_equal(secret_lookups, 0);
    assert_ptr_equal(out, given);
    assert_string_equal(reason, "abc");
}

static void test_start_child_masks_secrets(void **state)
{
    host_services svc = {&G.svc, NULL, svc_start_child, fake_secret, NULL};
    weft_error err = {0};
    char id[64] = "";
    xc_task *a = task_with_input("{'token':'${secrets.S}','note':'key ${secrets.S}'}");
    weft_ctx *c = ctx_for(a, &svc);
    assert_int_equal(host_ctx_secrets(c, &err), 0);
    assert_json(G.h->task(c)->input, "{'token':'abc','note':'key abc'}");
    /* the child's input is stored: the secrets this task used are masked */
    assert_int_equal(
        G.h->start_child(c, NULL, "child", 1, G.h->task(c)->input, id, sizeof id, &err), 0);
    assert_json(J(G.svc.input_text), "{'token':'***','note':'key ***'}");
    assert_int_equal(G.h->start_child(c, NULL, "child", 1, J("{'t':'x abc'}"), id, sizeof id, &err),
                     0);
    assert_json(J(G.svc.input_text), "{'t':'x ***'}");
}

/* A placeholder that came in with data (a client's workflow input) is text:
 * only those the task's own inputParameters write are filled. */
static void test_data_placeholders_stay_text(void **state)
{
    host_services svc = {&G.svc, NULL, NULL, fake_secret, NULL};
    weft_error err = {0};
    json_object *filled = NULL;
    xc_task *a = task_from("{'url':'${workflow.input.url}','obj':'${workflow.input.o}',"
                           "'auth':'Bearer ${secrets.S} for ${workflow.input.who}',"
                           "'list':['${secrets.LONG}','${workflow.input.x}']}",
                           "{'url':'http://x/${secrets.LONG}','obj':{'k':'${secrets.S}'},"
                           "'auth':'Bearer ${secrets.S} for ${secrets.LONG}',"
                           "'list':['${secrets.LONG}','${secrets.S}']}");
    weft_ctx *c = ctx_for(a, &svc);
    assert_int_equal(host_ctx_secrets(c, &err), 0);
    assert_json(G.h->task(c)->input,
                "{'url':'http://x/${secrets.LONG}','obj':{'k':'${secrets.S}'},"
                "'auth':'Bearer abc for ${secrets.LONG}','list':['abcdef','${secrets.S}']}");
    assert_int_equal(secret_lookups, 2);
    /* the same for what a worker is handed */
    assert_int_equal(host_fill_secrets(a, a->input, fake_secret, NULL, &filled, &err), 0);
    track_js(filled);
    assert_json(filled,
                "{'url':'http://x/${secrets.LONG}','obj':{'k':'${secrets.S}'},"
                "'auth':'Bearer abc for ${secrets.LONG}','list':['abcdef','${secrets.S}']}");
    /* a dynamic fork's task was built from data: none of its placeholders */
    a->dyn_json = json_object_get(J("{'taskReferenceName':'a','type':'T','inputParameters':"
                                    "{'auth':'Bearer ${secrets.S} for ${workflow.input.who}'}}"));
    assert_int_equal(host_fill_secrets(a, a->input, fake_secret, NULL, &filled, &err), 0);
    track_js(filled);
    assert_ptr_equal(filled, a->input);
}

typedef struct heard {
    int level;
    char plugin[64];
    char msg[1100];
    int n;
} heard;

static void hear(void *ud, int level, const char *plugin, const char *msg)
{
    heard *h = ud;
    h->level = level;
    snprintf(h->plugin, sizeof h->plugin, "%s", plugin ? plugin : "(none)");
    snprintf(h->msg, sizeof h->msg, "%s", msg);
    h->n++;
}

static void test_log_sink_names_plugin_masks_secrets(void **state)
{
    host_services svc = {&G.svc, NULL, NULL, fake_secret, NULL};
    heard h = {0};
    weft_error err = {0};
    xc_task *a = task_with_input("{'token':'${secrets.S}'}");
    host_set_log(hear, &h, NULL);
    G.h->log(WEFT_LOG_INFO, "outside %d", 1);
    assert_string_equal(h.plugin, "(none)");
    assert_string_equal(h.msg, "outside 1");
    assert_int_equal(host_ctx_secrets(ctx_for(a, &svc), &err), 0);
    G.h->log(WEFT_LOG_WARN, "sent %s", "abc");
    /* no registry to name the plugin: the task type stands in */
    assert_int_equal(h.level, WEFT_LOG_WARN);
    assert_string_equal(h.plugin, "T");
    assert_string_equal(h.msg, "sent ***");
    host_ctx_done(&G.ctx);
    G.ctx_live = 0;
    {
        /* masked before the line is cut at 1023 bytes */
        char big[1100];
        memset(big, 'y', 1020);
        big[1020] = 0;
        assert_int_equal(host_ctx_secrets(ctx_for(a, &svc), &err), 0);
        G.h->log(WEFT_LOG_INFO, "%s abc", big);
        assert_null(strstr(h.msg, "ab"));
        G.h->log(WEFT_LOG_INFO, "%s", "abc");
        assert_string_equal(h.msg, "***");
    }
    host_ctx_done(&G.ctx);
    G.ctx_live = 0;
    G.h->log(WEFT_LOG_DEBUG, "after");
    assert_string_equal(h.plugin, "(none)");
    assert_int_equal(h.n, 5);
    host_set_log(NULL, NULL, NULL);
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
        T(test_lua_eval_no_sandbox),
        T(test_lua_eval_ok),
        T(test_lua_eval_syntax_error),
        T(test_lua_eval_runtime_error),
        T(test_lua_eval_instruction_limit),
        T(test_lua_eval_memory_limit),
        T(test_start_child_no_service),
        T(test_start_child_fails),
        T(test_start_child_ok),
        T(test_redact_reported),
        T(test_redact_reported_cut),
        T(test_redact_cut_tail),
        T(test_redact_reported_no_secret_named),
        T(test_start_child_masks_secrets),
        T(test_data_placeholders_stay_text),
        T(test_log_sink_names_plugin_masks_secrets),
        T(test_result_init_clear),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}

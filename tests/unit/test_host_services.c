/*
 * Tests of host.c's calls that go through the host's services: lua_eval in a
 * real sandbox, start_child, and secrets (redacted from what a plugin
 * reports, logs or hands a child). The task types, the fake service and the
 * fixture are in host_fixture.h.
 */
#include "autoconf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "host_fixture.h"
#include "plugin/loader.h"

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

/* The flow plugin's SUB_WORKFLOW when its child cannot be started: a store
 * error that passes (WEFT_EIO: a primary failing over, a lost connection)
 * has the task try again soon, not fail (the child's idempotency key keeps
 * it to one child however often it runs); any other error fails it. */
static void test_sub_workflow_store_error(void **state)
{
    const char *top = getenv("WEFT_TOP_BUILDDIR");
    host_services svc = {&G.svc, NULL, svc_start_child, NULL, NULL};
    const weft_task_type *sub;
    pl_registry *reg;
    weft_error err = {0};
    weft_result r;
    char path[1024];
    xc_task *a;
    if (!top) skip();
    snprintf(path, sizeof path, "%s/plugins/flow/flow", top);
    reg = pl_new(G.h);
    assert_non_null(reg);
    if (pl_load_file(reg, path, &err)) fail_msg("%s: %s", path, err.msg);
    assert_non_null(sub = pl_find_type(reg, "SUB_WORKFLOW", NULL));
    start();
    a = add("a", 0, 0);
    G.svc.child_rc = WEFT_EIO;
    host_result_init(&r);
    assert_int_equal(sub->execute(ctx_for(a, &svc), &r), 0);
    assert_int_equal(r.status, WEFT_TASK_IN_PROGRESS);
    assert_true(r.callback_after_ms > 0 && r.callback_after_ms <= 5000);
    assert_null(r.output); /* no child id: the next run starts it again */
    host_result_clear(&r);
    G.svc.child_rc = WEFT_ENOTFOUND;
    host_result_init(&r);
    assert_int_equal(sub->execute(ctx_for(a, &svc), &r), 0);
    assert_int_equal(r.status, WEFT_TASK_FAILED);
    assert_has(r.reason, "cannot start sub-workflow: no workflow named");
    host_result_clear(&r);
    assert_int_equal(G.svc.child_calls, 2);
    if (G.ctx_live) host_ctx_done(&G.ctx);
    G.ctx_live = 0;
    pl_free(reg);
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

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_lua_eval_no_sandbox),
        T(test_lua_eval_ok),
        T(test_lua_eval_syntax_error),
        T(test_lua_eval_runtime_error),
        T(test_lua_eval_instruction_limit),
        T(test_lua_eval_memory_limit),
        T(test_start_child_no_service),
        T(test_start_child_fails),
        T(test_start_child_ok),
        T(test_sub_workflow_store_error),
        T(test_redact_reported),
        T(test_redact_reported_cut),
        T(test_redact_cut_tail),
        T(test_redact_reported_no_secret_named),
        T(test_start_child_masks_secrets),
        T(test_data_placeholders_stay_text),
        T(test_log_sink_names_plugin_masks_secrets),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}

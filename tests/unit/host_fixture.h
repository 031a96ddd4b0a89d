/*
 * What the tests of host.c (test_host.c, test_host_services.c) share: task
 * types T and BOX (no plugin is loaded), the workflow WF, a fake service
 * behind start_child and lua_eval, and a fixture G that tracks what a test
 * allocates so that the teardown frees it, also after a failed assertion.
 * Header-only (static functions); include it after <cmocka.h>.
 */
#ifndef WEFT_TEST_HOST_FIXTURE_H
#define WEFT_TEST_HOST_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/exec.h"
#include "plugin/host.h"
#include "lua/sandbox.h"
#include "json_text.h"

/* a test may use only some of these */
#define HF_FN static __attribute__((unused))

HF_FN int noop_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

HF_FN int noop_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static int box_data; /* what BOX's type_data points at */
static const weft_task_type type_t = {.name = "T", .execute = noop_execute};
static const weft_task_type type_box = {.name = "BOX", .data = &box_data, .map = noop_map};

HF_FN const weft_task_type *find_type(void *ud, const char *name)
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

HF_FN sbx *svc_sandbox(void *ud)
{
    fake_svc *f = ud;
    f->sandbox_calls++;
    return f->box;
}

HF_FN int svc_start_child(void *ud, xc_exec *x, xc_task *t, json_object *def, const char *name,
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

HF_FN int setup(void **state)
{
    memset(&G, 0, sizeof G);
    G.h = host_table();
    return 0;
}

HF_FN int teardown(void **state)
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

HF_FN json_object *track_js(json_object *j)
{
    assert_true(G.njs < sizeof G.js / sizeof G.js[0]);
    G.js[G.njs++] = j;
    return j;
}

/* JSON from text written with ' for " (keeps the definitions readable); tracked. */
HF_FN json_object *J(const char *text)
{
    return track_js(jt_parse(text));
}

HF_FN void assert_json(json_object *got, const char *want_text)
{
    json_object *want = J(want_text);
    if (!json_object_equal(got, want))
        fail_msg("got %s, want %s", got ? json_object_to_json_string(got) : "NULL",
                 json_object_to_json_string(want));
}

HF_FN void assert_has(const char *msg, const char *part)
{
    if (!msg) fail_msg("NULL does not contain \"%s\"", part);
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

/* Compile WF and start execution "wf-1" with input {"n":5}. */
HF_FN xc_exec *start(void)
{
    weft_error err = {0};
    DEFS.host = G.h;
    if (def_compile(&DEFS, J(WF), "hosted.json", NULL, &G.wf, &err))
        fail_msg("compile: %s", err.msg);
    assert_int_equal(xc_new(G.wf, J("{'n':5}"), "wf-1", &G.x, &err), 0);
    return G.x;
}

HF_FN xc_task *add(const char *ref, int scope, int iteration)
{
    def_task *d = wu_map_get(G.wf->by_ref, ref);
    xc_task *t;
    if (!d) fail_msg("no task '%s'", ref);
    t = xc_add_task(G.x, d, scope, iteration);
    assert_non_null(t);
    return t;
}

/* The context of a callback for task t (svc may be NULL). */
HF_FN weft_ctx *ctx_for(xc_task *t, const host_services *svc)
{
    if (G.ctx_live) host_ctx_done(&G.ctx);
    host_ctx_init(&G.ctx, svc, G.x, t);
    G.ctx_live = 1;
    return &G.ctx;
}

#endif

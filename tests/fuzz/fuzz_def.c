/*
 * Fuzz target for def.c (and what runs on a compiled definition): the bytes
 * are JSON text, parsed with wu_parse_json and compiled with def_compile
 * against a resolver that knows a few type names. A definition that compiles
 * is checked for consistency, started as an execution with one instance of
 * every task, evaluated and serialised. Members of a top-level array
 * "x-dynamic" are compiled as dynamic tasks (def_compile_dynamic).
 *
 * Invariants checked (abort() when broken): errors are WEFT_EINVAL with a
 * message and no output; every node is reachable from its list, resolvable by
 * its ref and tied to its JSON; retry delays are never negative.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "core/def.h"
#include "core/exec.h"
#include "plugin/host.h"
#include "base/util.h"

#define FUZZ_NAME "fuzz_def"
#include "fuzz.h"

static json_object *lookup(void *ud, const char *root, const char *field)
{
    xc_exec *x = ud;
    xc_task *t;
    if (!strcmp(root, "workflow")) {
        if (!field) return NULL;
        if (!strcmp(field, "input")) return x->input;
        if (!strcmp(field, "variables")) return x->variables;
        if (!strcmp(field, "workflowId")) return x->j_id;
        return NULL;
    }
    if (!(t = xc_find_ref(x, root)) || !field) return NULL;
    if (!strcmp(field, "input")) return t->input;
    if (!strcmp(field, "output")) return t->output;
    return NULL;
}

static void check_list(const def_workflow *wf, const def_list *l, const def_task *owner)
{
    size_t i, j;
    check(l->owner == owner, "a list knows its owner");
    for (i = 0; i < l->n; i++) {
        const def_task *t = l->tasks[i];
        check(t != NULL, "no hole in a list");
        check(t->list == l && t->index == i, "a task knows its place");
        check(t->ref && *t->ref, "a task has a ref");
        check(t->type != NULL && t->type_name != NULL, "a task has a type");
        check(fuzz_find_type(NULL, t->type_name) == t->type, "the type is the resolver's");
        check(wu_map_get(wf->by_ref, t->ref) == t, "by_ref finds the task");
        check(def_of_json(t->json) == t, "the JSON node points back");
        check(t->input != NULL, "inputs are compiled");
        check(t->retry_count >= 0, "retry count is not negative");
        for (j = 1; j <= 3; j++)
            check(def_retry_delay(t, (int)j) >= 0, "retry delay is not negative");
        for (j = 0; j < t->nchildren; j++)
            check_list(wf, t->children[j], t);
    }
}

/* Schedule one instance of every task (nested lists in loop scopes). */
static void schedule_all(xc_exec *x, const def_list *l, int scope, int iteration)
{
    size_t i, j;
    for (i = 0; i < l->n; i++) {
        def_task *d = l->tasks[i];
        xc_task *t = xc_add_task(x, d, scope, iteration);
        check(t != NULL, "xc_add_task");
        t->input = ex_eval(d->input, lookup, x);
        check(xc_find_ref(x, t->ref) == t, "the new instance is found by its ref");
        check(xc_find_id(x, t->id) == t, "the new instance is found by its id");
        for (j = 0; j < d->nchildren; j++) {
            int s = xc_new_scope(x, scope, (int)j + 1);
            check(s > 0, "xc_new_scope");
            schedule_all(x, d->children[j], s, (int)j + 1);
        }
    }
}

static void run_execution(def_workflow *wf)
{
    xc_exec *x;
    weft_error err = {0};
    json_object *j;
    check(xc_new(wf, NULL, NULL, &x, &err) == 0, "xc_new");
    schedule_all(x, &wf->root, 0, 0);
    if (wf->output) x->output = ex_eval(wf->output, lookup, x);
    j = xc_to_json(x);
    check(j != NULL && json_object_to_json_string(j) != NULL, "the execution serialises");
    json_object_put(j);
    xc_free(x);
}

static void run_dynamic(const def_env *env, def_workflow *wf, json_object *list)
{
    def_dyn dyn = {0};
    size_t i, n = json_object_array_length(list);
    for (i = 0; i < n && i < 16; i++) {
        weft_error err = {0};
        def_task *t = (def_task *)1;
        int rc = def_compile_dynamic(env, wf, wf->root.tasks[0], json_object_array_get_idx(list, i),
                                     &dyn, &t, &err);
        if (fuzz_verbose()) printf("def_compile_dynamic %zu: %d %s\n", i, rc, rc ? err.msg : "ok");
        if (rc) {
            check(rc == WEFT_EINVAL && err.msg[0], "a dynamic task error has a message");
            check(t == NULL, "a failed dynamic task gives nothing");
        } else {
            check(t != NULL && t->list->owner == wf->root.tasks[0], "a dynamic task has its owner");
            check(def_of_json(t->json) == t, "the dynamic node points back");
        }
    }
    def_dynamic_free(&dyn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static def_env env = {.find_type = fuzz_find_type, .searched = "/fuzz/plugins"};
    json_object *json = (json_object *)1, *dynamic;
    def_workflow *wf = (def_workflow *)1;
    weft_error err = {0};
    char *text;
    int rc;

    if (size > FUZZ_MAX_INPUT) return 0;
    env.host = host_table();
    text = fuzz_text(data, size);
    rc = wu_parse_json("fuzz.json", text, &json, &err);
    free(text);
    if (rc && fuzz_verbose()) printf("wu_parse_json: %d %s\n", rc, err.msg);
    if (rc) {
        check(rc == WEFT_EINVAL && err.code == rc, "bad JSON is WEFT_EINVAL");
        check(strncmp(err.msg, "fuzz.json: ", 11) == 0, "a JSON error names the source");
        return 0;
    }

    memset(&err, 0, sizeof err);
    rc = def_compile(&env, json, "fuzz.json", NULL, &wf, &err);
    if (fuzz_verbose()) printf("def_compile: %d %s\n", rc, rc ? err.msg : "ok");
    if (rc) {
        check(rc == WEFT_EINVAL && err.code == rc, "a bad definition is WEFT_EINVAL");
        check(err.msg[0] != 0, "a definition error has a message");
        check(wf == NULL, "a failed compile gives no workflow");
        json_object_put(json);
        return 0;
    }
    check(wf->refs == 1 && wf->name && *wf->name && wf->version >= 1, "workflow header");
    check(wf->root.n > 0, "a workflow has tasks");
    check(wu_map_count(wf->by_ref) == wf->all.len, "every task is in by_ref once");
    check_list(wf, &wf->root, NULL);
    /* the definition keeps a private copy: the caller's JSON can go */
    if (json_object_object_get_ex(json, "x-dynamic", &dynamic) &&
        json_object_is_type(dynamic, json_type_array))
        run_dynamic(&env, wf, dynamic);
    json_object_put(json);
    run_execution(wf);
    def_unref(wf);
    return 0;
}

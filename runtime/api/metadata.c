/*
 * The metadata calls: workflow definitions (checked by compiling, then
 * registered) and task definitions.
 */
#include "api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compile a WorkflowDef to check it, then register it (and its name). */
static int register_def(ap_server *s, tls *t, json_object *j, weft_error *err)
{
    def_workflow *d = NULL;
    json_object *v;
    const char *source = "workflowDef";
    int rc;
    if (!json_object_is_type(j, json_type_object))
        return wu_err(err, WEFT_EINVAL, "a workflow definition must be a JSON object");
    if (json_object_object_get_ex(j, "name", &v) && json_object_is_type(v, json_type_string))
        source = json_object_get_string(v);
    if ((rc = def_compile(s->cfg.defs, j, source, NULL, &d, err))) return rc;
    if (!(rc = sv_check(t->st, s->cfg.defs, d, NULL, 0, err)))
        rc = ST(t->st, def_register, d->name, d->version,
                json_object_to_json_string_ext(d->json, JSON_C_TO_STRING_PLAIN), err);
    def_unref(d);
    return rc;
}

/* A TaskDef is checked by compiling it into a one-task workflow: its
 * fields mean what they mean there. */
static int check_taskdef(ap_server *s, json_object *td, weft_error *err)
{
    json_object *wf, *task, *tasks, *v;
    def_workflow *d = NULL;
    char source[300];
    int rc;
    if (!json_object_is_type(td, json_type_object))
        return wu_err(err, WEFT_EINVAL, "a task definition must be a JSON object");
    if (!json_object_object_get_ex(td, "name", &v) || !json_object_is_type(v, json_type_string) ||
        !*json_object_get_string(v))
        return wu_err(err, WEFT_EINVAL, "a task definition needs a name");
    snprintf(source, sizeof source, "task definition %s", json_object_get_string(v));
    wf = json_object_new_object();
    task = json_object_new_object();
    tasks = json_object_new_array();
    json_object_object_add(task, "name", json_object_get(v));
    json_object_object_add(task, "taskReferenceName", json_object_new_string("check"));
    json_object_object_add(task, "type", json_object_new_string("SIMPLE"));
    json_object_object_add(task, "taskDefinition", json_object_get(td));
    json_object_array_add(tasks, task);
    json_object_object_add(wf, "name", json_object_new_string("taskdef_check"));
    json_object_object_add(wf, "tasks", tasks);
    rc = def_compile(s->cfg.defs, wf, source, NULL, &d, err);
    def_unref(d);
    json_object_put(wf);
    return rc;
}

/* ---- handlers: metadata ---- */

mhd_result ap_h_defs_list(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    mhd_result r;
    if (ST(c->t->st, def_list, &json, &err)) return ap_send_werr(c, &err);
    r = ap_send_json_text(c, 200, json);
    free(json);
    return r;
}

/* POST /api/metadata/workflow: one WorkflowDef. */
mhd_result ap_h_def_post(ctx *c)
{
    weft_error err = {0};
    json_object *j;
    int rc;
    if (ap_body_json(c, 0, &j)) return c->res;
    rc = register_def(c->s, c->t, j, &err);
    json_object_put(j);
    return rc ? ap_send_werr(c, &err) : ap_send_empty(c, 200);
}

/* PUT /api/metadata/workflow: a list, all checked before any is stored. */
mhd_result ap_h_def_put(ctx *c)
{
    weft_error err = {0};
    json_object *j;
    size_t i, n;
    int rc = 0;
    if (ap_body_json(c, 0, &j)) return c->res;
    if (!json_object_is_type(j, json_type_array)) {
        json_object_put(j);
        return ap_send_error(c, 400, "expected a list of WorkflowDef objects");
    }
    n = json_object_array_length(j);
    for (i = 0; i < n && !rc; i++) {
        def_workflow *d = NULL;
        json_object *one = json_object_array_get_idx(j, i);
        if (!json_object_is_type(one, json_type_object))
            rc = wu_err(&err, WEFT_EINVAL, "item %zu: a workflow definition must be a JSON object",
                        i + 1);
        else if ((rc = def_compile(c->s->cfg.defs, one, "workflowDef", NULL, &d, &err)) ||
                 (rc = sv_check(c->t->st, c->s->cfg.defs, d, NULL, 0, &err)))
            wu_err_prefix(&err, "item %zu: ", i + 1);
        def_unref(d);
    }
    for (i = 0; i < n && !rc; i++)
        rc = register_def(c->s, c->t, json_object_array_get_idx(j, i), &err);
    json_object_put(j);
    return rc ? ap_send_werr(c, &err) : ap_send_empty(c, 200);
}

/* GET /api/metadata/workflow/{name}?version= */
mhd_result ap_h_def_get(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    long version;
    int got = 0;
    mhd_result r;
    if (ap_query_long(c, "version", 0, 0, 0x7fffffff, &version)) return c->res;
    if (ST(c->t->st, def_get, c->q->seg[3], (int)version, &json, &got, &err))
        return ap_send_werr(c, &err);
    r = ap_send_json_text(c, 200, json);
    free(json);
    return r;
}

static int put_taskdef(ap_server *s, tls *t, json_object *td, weft_error *err)
{
    json_object *v;
    json_object_object_get_ex(td, "name", &v);
    return ST(t->st, taskdef_put, json_object_get_string(v),
              json_object_to_json_string_ext(td, JSON_C_TO_STRING_PLAIN), err);
}

/* POST /api/metadata/taskdefs: a list of TaskDef (PUT: one). */
static mhd_result taskdefs(ctx *c, int list)
{
    weft_error err = {0};
    json_object *j;
    size_t i, n;
    int rc = 0;
    if (ap_body_json(c, 0, &j)) return c->res;
    if (list && !json_object_is_type(j, json_type_array)) {
        json_object_put(j);
        return ap_send_error(c, 400, "expected a list of TaskDef objects");
    }
    n = list ? json_object_array_length(j) : 1;
    for (i = 0; i < n && !rc; i++)
        if ((rc = check_taskdef(c->s, list ? json_object_array_get_idx(j, i) : j, &err)) && list)
            wu_err_prefix(&err, "item %zu: ", i + 1);
    for (i = 0; i < n && !rc; i++)
        rc = put_taskdef(c->s, c->t, list ? json_object_array_get_idx(j, i) : j, &err);
    json_object_put(j);
    return rc ? ap_send_werr(c, &err) : ap_send_empty(c, 200);
}

mhd_result ap_h_taskdefs_post(ctx *c)
{
    return taskdefs(c, 1);
}

mhd_result ap_h_taskdefs_put(ctx *c)
{
    return taskdefs(c, 0);
}

mhd_result ap_h_taskdefs_list(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    mhd_result r;
    if (ST(c->t->st, taskdef_list, &json, &err)) return ap_send_werr(c, &err);
    r = ap_send_json_text(c, 200, json);
    free(json);
    return r;
}

mhd_result ap_h_taskdef_get(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    mhd_result r;
    if (ST(c->t->st, taskdef_get, c->q->seg[3], &json, &err)) return ap_send_werr(c, &err);
    r = ap_send_json_text(c, 200, json);
    free(json);
    return r;
}

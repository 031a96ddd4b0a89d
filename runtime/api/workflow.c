/*
 * The workflow calls: start (by name, or with a definition or Lua source),
 * get, terminate, pause, resume, retry, restart.
 */
#include "api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lua/dsl.h"

/* ---- store steps: executions ---- */

/* SIMPLE tasks (type SIMPLE or none) without a taskDefinition, anywhere in a definition. */
static void simple_tasks(json_object *node, wu_vec *out, int depth)
{
    json_object *ref, *type, *td;
    if (depth > 64 || out->len >= 256) return;
    if (json_object_is_type(node, json_type_array)) {
        size_t i, n = json_object_array_length(node);
        for (i = 0; i < n; i++)
            simple_tasks(json_object_array_get_idx(node, i), out, depth + 1);
        return;
    }
    if (!json_object_is_type(node, json_type_object)) return;
    if (json_object_object_get_ex(node, "taskReferenceName", &ref) &&
        json_object_is_type(ref, json_type_string) &&
        (!json_object_object_get_ex(node, "type", &type) ||
         (json_object_is_type(type, json_type_string) &&
          !strcmp(json_object_get_string(type), "SIMPLE"))) &&
        !json_object_object_get_ex(node, "taskDefinition", &td))
        wu_vec_push(out, node);
    json_object_object_foreach(node, key, val)
    {
        if (strcmp(key, "inputParameters") && strcmp(key, "taskDefinition"))
            simple_tasks(val, out, depth + 1);
    }
}

static const char *task_name(json_object *task)
{
    json_object *v;
    if (json_object_object_get_ex(task, "name", &v) && json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    json_object_object_get_ex(task, "taskReferenceName", &v);
    return json_object_get_string(v);
}

/*
 * As in Conductor, a SIMPLE task without its own taskDefinition gets the
 * registered TaskDef of its name (retries, timeouts) when a workflow starts.
 * One round trip, only when there are such tasks.
 */
static int embed_taskdefs(tls *t, json_object *def, weft_error *err)
{
    wu_vec tasks = {0};
    const char **names;
    char **jsons;
    size_t i;
    int rc;
    simple_tasks(def, &tasks, 0);
    if (!tasks.len) {
        wu_vec_free(&tasks);
        return 0;
    }
    names = calloc(tasks.len, sizeof *names);
    jsons = calloc(tasks.len, sizeof *jsons);
    if (!names || !jsons) {
        free(names);
        free(jsons);
        wu_vec_free(&tasks);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    for (i = 0; i < tasks.len; i++)
        names[i] = task_name(tasks.items[i]);
    rc = ST(t->st, taskdefs_get, names, tasks.len, jsons, err);
    for (i = 0; i < tasks.len; i++) {
        json_object *td = !rc && jsons[i] ? json_tokener_parse(jsons[i]) : NULL;
        if (json_object_is_type(td, json_type_object))
            json_object_object_add(tasks.items[i], "taskDefinition", td);
        else
            json_object_put(td);
        free(jsons[i]);
    }
    free(names);
    free(jsons);
    wu_vec_free(&tasks);
    return rc;
}

/* A registered definition as JSON (caller puts it). */
static int registered_def(tls *t, const char *name, long version, json_object **out,
                          weft_error *err)
{
    char *text = NULL;
    int got = 0, rc = ST(t->st, def_get, name, (int)version, &text, &got, err);
    if (rc == 0) rc = wu_parse_json_stored(name, text, out, err);
    free(text);
    return rc;
}

/* What a start request says besides the definition and the input. */
typedef struct start_opts {
    const char *corr, *idem;
    int priority;
    json_object *task_to_domain; /* borrowed */
} start_opts;

/* Start a workflow of def (borrowed; its SIMPLE tasks may gain taskDefinitions). */
static int start_def(ap_server *s, tls *t, json_object *defj, const char *source,
                     json_object *input, const start_opts *o, char id[64], weft_error *err)
{
    def_workflow *def = NULL;
    op_start_args a = {0};
    int rc;
    if (!json_object_is_type(defj, json_type_object))
        return wu_err(err, WEFT_EINVAL, "%s: a workflow definition must be a JSON object", source);
    if ((rc = embed_taskdefs(t, defj, err))) return rc;
    if ((rc = op_def(&t->op, json_object_to_json_string_ext(defj, JSON_C_TO_STRING_PLAIN), source,
                     &def, err)))
        return rc;
    a.def = def;
    a.input = input;
    a.correlation_id = o->corr;
    a.idempotency_key = o->idem;
    a.priority = o->priority;
    a.task_to_domain = o->task_to_domain;
    t->op.client = 1;
    rc = op_start(&t->op, &a, id, err);
    def_unref(def);
    return rc;
}

/* ---- handlers: workflows ---- */

static mhd_result start_reply(ctx *c, json_object *defj, const char *source, json_object *input,
                              const start_opts *o)
{
    weft_error err = {0};
    char id[64] = "";
    json_object *j;
    int code;
    if (!start_def(c->s, c->t, defj, source, input, o, id, &err)) return ap_send_text(c, 200, id);
    if (!id[0]) return ap_send_werr(c, &err);
    /* sent, unanswered: the run may exist. Another start makes a second one
     * unless its idempotency key finds this one: 503 to retry then, else 504
     * (no Retry-After), with the id to look it up by */
    code = o->idem ? 503 : 504;
    j = json_object_new_object();
    json_object_object_add(j, "status", json_object_new_int(code));
    json_object_object_add(j, "message", json_object_new_string(err.msg));
    json_object_object_add(j, "retryable", json_object_new_boolean(o->idem != NULL));
    json_object_object_add(j, "workflowId", json_object_new_string(id));
    return ap_send_json(c, code, j);
}

/* POST /api/workflow: a StartWorkflowRequest. */
mhd_result ap_h_start(ctx *c)
{
    weft_error err = {0};
    json_object *body, *input, *v, *defj = NULL;
    const char *name, *source = "workflowDef";
    start_opts o = {0};
    long version = 0;
    mhd_result r;
    if (ap_body_json(c, 0, &body)) return c->res;
    if (!json_object_is_type(body, json_type_object)) {
        json_object_put(body);
        return ap_send_error(c, 400, "expected a StartWorkflowRequest object");
    }
    if (ap_member_str(c, body, "name", &name) || ap_member_obj(c, body, "input", &input) ||
        ap_member_str(c, body, "correlationId", &o.corr) ||
        ap_member_str(c, body, "idempotencyKey", &o.idem))
        goto out;
    if (json_object_object_get_ex(body, "priority", &v) && v) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            json_object_get_int64(v) > 99) {
            ap_send_error(c, 400, "priority must be a whole number from 0 to 99 (got %s)",
                          json_object_to_json_string(v));
            goto out;
        }
        o.priority = json_object_get_int(v);
    }
    if (json_object_object_get_ex(body, "taskToDomain", &v) && v) {
        if (op_check_domains(v, &err)) {
            ap_send_error(c, 400, "%s", err.msg);
            goto out;
        }
        o.task_to_domain = v;
    }
    if (json_object_object_get_ex(body, "version", &v) && v) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            json_object_get_int64(v) > 0x7fffffff) {
            ap_send_error(c, 400, "version must be a whole number >= 0");
            goto out;
        }
        version = (long)json_object_get_int64(v);
    }
    if (json_object_object_get_ex(body, "workflowDef", &v) && v) {
        if (json_object_is_type(v, json_type_string)) {
            /* Lua DSL source */
            if (dsl_compile("workflowDef", json_object_get_string(v),
                            (size_t)json_object_get_string_len(v), &defj, NULL, &err)) {
                ap_send_error(c, 400, "%s", err.msg);
                goto out;
            }
            if (ap_refuse_nul_names(c, "workflowDef", defj)) goto out;
        } else if (json_object_is_type(v, json_type_object)) {
            defj = json_object_get(v);
        } else {
            ap_send_error(c, 400,
                          "workflowDef must be a WorkflowDef object or Lua source (a string)");
            goto out;
        }
    } else if (!name || !*name) {
        ap_send_error(c, 400, "StartWorkflowRequest needs a name or a workflowDef");
        goto out;
    } else if (registered_def(c->t, name, version, &defj, &err)) {
        ap_send_werr(c, &err);
        goto out;
    } else {
        source = name;
    }
    start_reply(c, defj, source, input, &o);
out:
    r = c->res;
    json_object_put(defj);
    json_object_put(body);
    return r;
}

/* POST /api/workflow/{name}?version=&correlationId=: the body is the input. */
mhd_result ap_h_start_name(ctx *c)
{
    weft_error err = {0};
    json_object *input, *defj = NULL;
    const char *name = c->q->seg[2];
    long version, priority;
    start_opts o = {0};
    mhd_result r;
    if (ap_query_long(c, "version", 0, 0, 0x7fffffff, &version) ||
        ap_query_long(c, "priority", 0, 0, 99, &priority) || ap_body_json(c, 1, &input))
        return c->res;
    o.corr = ap_query(c, "correlationId");
    o.priority = (int)priority;
    if (input && !json_object_is_type(input, json_type_object)) {
        json_object_put(input);
        return ap_send_error(c, 400, "workflow input must be a JSON object");
    }
    if (registered_def(c->t, name, version, &defj, &err))
        r = ap_send_werr(c, &err);
    else
        r = start_reply(c, defj, name, input, &o);
    json_object_put(defj);
    json_object_put(input);
    return r;
}

/* GET /api/workflow/{id}?includeTasks= */
mhd_result ap_h_get(ctx *c)
{
    weft_error err = {0};
    xc_exec *x = NULL;
    json_object *j;
    const char *tasks = ap_query(c, "includeTasks");
    if (op_load(&c->t->op, c->q->seg[2], &x, NULL, &err)) return ap_send_werr(c, &err);
    j = xc_to_json(x);
    op_say_waiting(&c->t->op, x, j);
    xc_free(x);
    if (tasks && !strcasecmp(tasks, "false")) json_object_object_del(j, "tasks");
    return ap_send_json(c, 200, j);
}

static mhd_result change(ctx *c, op_fn fn, void *ud)
{
    weft_error err = {0};
    c->t->op.client = 1;
    if (op_update(&c->t->op, c->q->seg[2], fn, ud, &err)) return ap_send_werr(c, &err);
    return ap_send_empty(c, 200);
}

/* terminate, pause, resume: recorded first, so a busy workflow cannot outrun them */
static mhd_result command(ctx *c, op_cmd cmd, const char *reason)
{
    weft_error err = {0};
    c->t->op.client = 1;
    if (op_command(&c->t->op, c->q->seg[2], cmd, reason, &err)) return ap_send_werr(c, &err);
    return ap_send_empty(c, 200);
}

mhd_result ap_h_terminate(ctx *c)
{
    const char *reason = ap_query(c, "reason");
    return command(c, OP_TERMINATE, reason && *reason ? reason : "terminated through the REST API");
}

mhd_result ap_h_pause(ctx *c)
{
    return command(c, OP_PAUSE, NULL);
}

mhd_result ap_h_resume(ctx *c)
{
    return command(c, OP_RESUME, NULL);
}

mhd_result ap_h_retry(ctx *c)
{
    return change(c, op_fn_retry, NULL);
}

mhd_result ap_h_restart(ctx *c)
{
    return change(c, op_fn_restart, NULL);
}

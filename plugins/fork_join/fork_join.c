/*
 * FORK_JOIN, FORK_JOIN_DYNAMIC and JOIN.
 *
 * FORK_JOIN starts the first task of every branch in forkTasks. Its JOIN
 * (the next task) waits until every task in joinOn has ended; its output is
 * { <ref> = <that task's output> }.
 * FORK_JOIN_DYNAMIC takes its branches from the input parameter named by
 * dynamicForkTasksParam: a list of tasks, each a WorkflowTask or the short
 * form { ref, type, name, input, script }; per-task inputs may come from the
 * parameter named by dynamicForkTasksInputParamName ({ ref = input }). Its
 * output lists the refs it forked ({ forkedTasks = [...] }), which a JOIN
 * with an empty joinOn right after it waits on.
 */
#include <stdio.h>
#include <string.h>
#include <weft/plugin.h>

static const weft_host *H;

static int fork_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *branches;
    size_t i, n;
    if (!json_object_object_get_ex(def, "forkTasks", &branches) ||
        !json_object_is_type(branches, json_type_array) ||
        !(n = json_object_array_length(branches)))
        return host->error(err, WEFT_EINVAL, "FORK_JOIN needs forkTasks: a list of branches");
    for (i = 0; i < n; i++) {
        json_object *b = json_object_array_get_idx(branches, i);
        if (!json_object_is_type(b, json_type_array))
            return host->error(err, WEFT_EINVAL, "fork branch %zu must be a list of tasks", i + 1);
        if (json_object_array_length(b) == 0)
            return host->error(err, WEFT_EINVAL, "fork branch %zu is empty", i + 1);
    }
    return 0;
}

static int fork_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    json_object *branches = json_object_object_get(def, "forkTasks");
    size_t i, n = json_object_array_length(branches);
    for (i = 0; i < n; i++) {
        json_object *b = json_object_array_get_idx(branches, i);
        json_object_array_add(out, json_object_get(json_object_array_get_idx(b, 0)));
    }
    r->output = json_object_new_object();
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static int dyn_validate(const weft_host *host, json_object *def, weft_error *err)
{
    if (!weft_json_str(def, "dynamicForkTasksParam"))
        return host->error(err, WEFT_EINVAL,
                           "FORK_JOIN_DYNAMIC needs dynamicForkTasksParam (the input parameter "
                           "holding the list of tasks)");
    return 0;
}

/* A WorkflowTask for one dynamic entry (caller owns), or NULL with r failed. */
static json_object *dyn_task(json_object *e, json_object *inputs, size_t i, weft_result *r)
{
    json_object *t = json_object_new_object(), *in = NULL, *extra, *v;
    const char *ref = weft_json_str(e, "taskReferenceName");
    int short_form = !ref;
    if (short_form) ref = weft_json_str(e, "ref");
    if (!ref || !*ref) {
        json_object_put(t);
        weft_fail(r, "dynamic task %zu has no ref", i + 1);
        return NULL;
    }
    json_object_object_foreach(e, k, val)
    {
        if (short_form && (!strcmp(k, "ref") || !strcmp(k, "input") || !strcmp(k, "script")))
            continue;
        json_object_object_add(t, k, json_object_get(val));
    }
    json_object_object_add(t, "taskReferenceName", json_object_new_string(ref));
    if (!weft_json_str(t, "name")) json_object_object_add(t, "name", json_object_new_string(ref));
    if (!weft_json_str(t, "type"))
        json_object_object_add(t, "type", json_object_new_string("SIMPLE"));
    /* a fresh inputParameters object: the entry's own, short-form input, per-ref inputs */
    in = json_object_new_object();
    if (json_object_object_get_ex(e, short_form ? "input" : "inputParameters", &v) &&
        json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, k2, v2) json_object_object_add(in, k2, json_object_get(v2));
    }
    if (short_form && (v = json_object_object_get(e, "script")))
        json_object_object_add(in, "scriptExpression", json_object_get(v));
    if (inputs && json_object_object_get_ex(inputs, ref, &extra) &&
        json_object_is_type(extra, json_type_object)) {
        json_object_object_foreach(extra, k3, v3)
            json_object_object_add(in, k3, json_object_get(v3));
    }
    json_object_object_add(t, "inputParameters", in);
    return t;
}

static int dyn_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    const char *pname = weft_json_str(def, "dynamicForkTasksParam");
    const char *iname = weft_json_str(def, "dynamicForkTasksInputParamName");
    json_object *list = NULL, *inputs = NULL, *refs;
    size_t i, j, n;

    json_object_object_get_ex(t->input, pname, &list);
    if (iname) json_object_object_get_ex(t->input, iname, &inputs);
    /* an empty Lua table arrives as {}: that is an empty list too */
    if (json_object_is_type(list, json_type_object) && json_object_object_length(list) == 0)
        n = 0;
    else if (!json_object_is_type(list, json_type_array))
        return weft_fail(r, "input parameter '%s' must be a list of tasks (got %s)", pname,
                         list ? json_object_to_json_string(list) : "null");
    else
        n = json_object_array_length(list);
    refs = json_object_new_array();
    for (i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(list, i), *task;
        const char *ref;
        if (!json_object_is_type(e, json_type_object)) {
            json_object_put(refs);
            return weft_fail(r, "dynamic task %zu is not an object", i + 1);
        }
        if (!(task = dyn_task(e, inputs, i, r))) {
            json_object_put(refs);
            return 0;
        }
        ref = weft_json_str(task, "taskReferenceName");
        for (j = 0; j < json_object_array_length(refs); j++)
            if (!strcmp(json_object_get_string(json_object_array_get_idx(refs, j)), ref)) {
                json_object_put(task);
                json_object_put(refs);
                return weft_fail(r, "dynamic task %zu: duplicate ref '%s'", i + 1, ref);
            }
        json_object_array_add(refs, json_object_new_string(ref));
        json_object_array_add(out, task);
    }
    r->output = json_object_new_object();
    json_object_object_add(r->output, "forkedTasks", refs);
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static int join_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *on;
    size_t i;
    if (!json_object_object_get_ex(def, "joinOn", &on)) return 0;
    if (!json_object_is_type(on, json_type_array))
        return host->error(err, WEFT_EINVAL, "joinOn must be a list of task refs");
    for (i = 0; i < json_object_array_length(on); i++)
        if (!json_object_is_type(json_object_array_get_idx(on, i), json_type_string))
            return host->error(err, WEFT_EINVAL, "joinOn entry %zu is not a ref", i + 1);
    return 0;
}

static int join_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    json_object *on = NULL, *output;
    size_t i, n;
    json_object_object_get_ex(def, "joinOn", &on);
    if (!on || json_object_array_length(on) == 0) {
        /* after a dynamic fork: wait on what it forked */
        const weft_task_view *prev = H->previous(ctx);
        on = NULL;
        if (prev && prev->output) json_object_object_get_ex(prev->output, "forkedTasks", &on);
        if (!on && prev && prev->status < WEFT_TASK_COMPLETED) {
            r->status = WEFT_TASK_IN_PROGRESS;
            r->callback_after_ms = -1;
            return 0;
        }
    }
    n = on ? json_object_array_length(on) : 0;
    for (i = 0; i < n; i++) {
        const weft_task_view *v =
            H->lookup(ctx, json_object_get_string(json_object_array_get_idx(on, i)));
        if (!v || v->status < WEFT_TASK_COMPLETED) {
            r->status = WEFT_TASK_IN_PROGRESS;
            r->callback_after_ms = -1;
            return 0;
        }
    }
    output = json_object_new_object();
    for (i = 0; i < n; i++) {
        const char *ref = json_object_get_string(json_object_array_get_idx(on, i));
        const weft_task_view *v = H->lookup(ctx, ref);
        json_object_object_add(output, ref,
                               v->output ? json_object_get(v->output) : json_object_new_object());
    }
    r->output = output;
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type types[] = {
    WEFT_TASK_TYPE(.name = "FORK_JOIN", .validate = fork_validate, .map = fork_map),
    WEFT_TASK_TYPE(.name = "FORK_JOIN_DYNAMIC", .validate = dyn_validate, .map = dyn_map),
    WEFT_TASK_TYPE(.name = "JOIN", .validate = join_validate, .map = join_map),
};

WEFT_PLUGIN(fork_join, .types = types, .ntypes = WEFT_COUNT(types), .host = &H)

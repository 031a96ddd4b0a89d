#include "core/exec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int init_variables(const def_workflow *def, json_object *vars);

int xc_new(def_workflow *def, json_object *input, const char *id, xc_exec **out, weft_error *err)
{
    xc_exec *x = calloc(1, sizeof *x);
    xc_scope *top;
    *out = NULL;
    if (!x) return wu_err(err, WEFT_ENOMEM, "out of memory");
    if (id)
        snprintf(x->id, sizeof x->id, "%s", id);
    else
        wu_uuid(x->id);
    x->def = def_ref(def);
    x->status = WEFT_WF_RUNNING;
    x->stored_status = -1;
    x->input = input ? json_object_get(input) : json_object_new_object();
    x->variables = json_object_new_object();
    x->created_ms = x->updated_ms = wu_now_ms();
    x->by_ref = wu_map_new();
    x->by_def = wu_map_new_borrowing(); /* see xc_add_task */
    x->j_id = json_object_new_string(x->id);
    top = calloc(1, sizeof *top);
    if (!x->input || !x->variables || !x->by_ref || !x->by_def || !x->j_id || !top ||
        !(top->suffix = strdup("")) || wu_vec_push(&x->scopes, top)) {
        if (top) free(top->suffix);
        free(top);
        xc_free(x);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    if (init_variables(def, x->variables)) {
        xc_free(x);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    *out = x;
    return 0;
}

static void task_free(xc_task *t)
{
    free(t->ref);
    json_object_put(t->dyn_json);
    json_object_put(t->input);
    json_object_put(t->output);
    free(t->reason);
    free(t->child_id);
    free(t->worker_id);
    free(t->domain);
    free(t->queue);
    free(t->input_ref);
    free(t->output_ref);
    free(t);
}

xc_exec *xc_ref(xc_exec *x)
{
    if (x) x->refs++;
    return x;
}

void xc_free(xc_exec *x)
{
    size_t i;
    if (!x) return;
    if (x->refs > 0) {
        x->refs--;
        return;
    }
    for (i = 0; i < x->tasks.len; i++)
        task_free(x->tasks.items[i]);
    wu_vec_free(&x->tasks);
    wu_vec_free(&x->ended);
    for (i = 0; i < x->scopes.len; i++) {
        xc_scope *s = x->scopes.items[i];
        free(s->suffix);
        free(s);
    }
    wu_vec_free(&x->scopes);
    wu_map_free(x->by_ref);
    wu_map_free(x->by_def);
    def_dynamic_free(&x->dyn);
    json_object_put(x->input);
    json_object_put(x->output);
    json_object_put(x->variables);
    json_object_put(x->j_id);
    free(x->reason);
    free(x->correlation_id);
    json_object_put(x->task_to_domain);
    free(x->parent_id);
    free(x->parent_task_id);
    free(x->failed_task_id);
    free(x->input_ref);
    free(x->output_ref);
    free(x->cmd);
    def_unref(x->def);
    free(x);
}

/* The definition's initial variables, copied into vars. 0 or WEFT_ENOMEM. */
static int init_variables(const def_workflow *def, json_object *vars)
{
    json_object *init;
    if (!json_object_object_get_ex(def->json, "variables", &init) ||
        !json_object_is_type(init, json_type_object))
        return 0;
    json_object_object_foreach(init, k, v)
    {
        /* copies: the definition may be used by other threads */
        json_object *copy = NULL;
        if ((v && json_object_deep_copy(v, &copy, NULL)) || json_object_object_add(vars, k, copy)) {
            json_object_put(copy);
            return WEFT_ENOMEM;
        }
    }
    return 0;
}

int xc_reset(xc_exec *x)
{
    wu_map *by_ref = wu_map_new(), *by_def = wu_map_new_borrowing();
    json_object *vars = json_object_new_object();
    size_t i;
    if (!by_ref || !by_def || !vars || init_variables(x->def, vars)) {
        wu_map_free(by_ref);
        wu_map_free(by_def);
        json_object_put(vars);
        return WEFT_ENOMEM;
    }
    for (i = 0; i < x->tasks.len; i++)
        task_free(x->tasks.items[i]);
    x->tasks.len = 0;
    x->ended.len = x->ended_head = 0;
    for (i = 1; i < x->scopes.len; i++) {
        xc_scope *s = x->scopes.items[i];
        free(s->suffix);
        free(s);
    }
    x->scopes.len = 1;
    wu_map_free(x->by_ref);
    wu_map_free(x->by_def);
    x->by_ref = by_ref;
    x->by_def = by_def;
    def_dynamic_free(&x->dyn);
    memset(&x->dyn, 0, sizeof x->dyn);
    json_object_put(x->variables);
    x->variables = vars;
    x->active = x->timed = x->fresh = 0;
    x->root_done = 0;
    x->timer_ms = 0;
    return 0;
}

int xc_new_scope(xc_exec *x, int parent, int iteration)
{
    xc_scope *s = calloc(1, sizeof *s), *p = x->scopes.items[parent];
    size_t n;
    if (!s) return -1;
    n = strlen(p->suffix) + 16;
    s->parent = parent;
    s->iteration = iteration;
    s->suffix = malloc(n);
    if (!s->suffix || wu_vec_push(&x->scopes, s)) {
        free(s->suffix);
        free(s);
        return -1;
    }
    snprintf(s->suffix, n, "%s__%d", p->suffix, iteration);
    return (int)x->scopes.len - 1;
}

xc_task *xc_add_task(xc_exec *x, def_task *def, int scope, int iteration)
{
    xc_task *t = calloc(1, sizeof *t);
    xc_scope *s = x->scopes.items[scope];
    size_t n, sn;
    if (!t) return NULL;
    wu_task_id(t->id, x->id);
    t->def = def;
    t->scope = scope;
    t->iteration = iteration;
    t->status = WEFT_TASK_SCHEDULED;
    t->seq = (int)x->tasks.len + 1;
    t->scheduled_ms = t->updated_ms = wu_now_ms();
    n = strlen(def->ref);
    sn = strlen(s->suffix);
    t->ref = malloc(n + sn + 1);
    /* by_def borrows its keys: def->ref lives as long as x's definition and
     * dynamic nodes. Room first, so that put cannot fail. (by_ref copies:
     * a task's ref may be replaced, codec.c) The same for the queue of
     * ended tasks: the decider's push when the task ends cannot fail. */
    if (!t->ref || wu_map_reserve(x->by_def, 1) || wu_vec_reserve(&x->ended, x->tasks.len + 1) ||
        wu_vec_push(&x->tasks, t)) {
        free(t->ref);
        free(t);
        return NULL;
    }
    memcpy(t->ref, def->ref, n);
    memcpy(t->ref + n, s->suffix, sn + 1);
    if (wu_map_put(x->by_ref, t->ref, t)) {
        x->tasks.len--;
        task_free(t);
        return NULL;
    }
    wu_map_put(x->by_def, def->ref, t);
    x->active++;
    if (def->timeout_ms || def->response_timeout_ms) x->timed = 1;
    return t;
}

void xc_drop_last(xc_exec *x)
{
    xc_task *t = x->tasks.items[--x->tasks.len], *by_ref = NULL, *by_def = NULL;
    size_t i;
    for (i = x->tasks.len; i > 0 && (!by_ref || !by_def); i--) {
        xc_task *p = x->tasks.items[i - 1];
        if (!by_ref && !strcmp(p->ref, t->ref)) by_ref = p;
        if (!by_def && p->def == t->def) by_def = p;
    }
    /* the keys are there: replacing a value makes no room */
    wu_map_put(x->by_ref, t->ref, by_ref);
    wu_map_put(x->by_def, t->def->ref, by_def);
    if (!xc_task_terminal(t->status)) x->active--;
    task_free(t);
}

int xc_child_priority(const xc_exec *x, const xc_task *t)
{
    json_object *p, *v;
    if (json_object_object_get_ex(t->def->json, "subWorkflowParam", &p) &&
        json_object_object_get_ex(p, "priority", &v) && json_object_is_type(v, json_type_int) &&
        json_object_get_int64(v) >= 0 && json_object_get_int64(v) <= 99)
        return json_object_get_int(v);
    return x->priority;
}

int xc_task_set_domain(xc_task *t, const char *domain)
{
    char *d = NULL, *q = NULL;
    if (domain) {
        size_t n = strlen(domain) + strlen(t->def->queue) + 2;
        if (!(d = strdup(domain)) || !(q = malloc(n))) {
            free(d);
            return WEFT_ENOMEM;
        }
        snprintf(q, n, "%s:%s", domain, t->def->queue);
    }
    free(t->domain);
    free(t->queue);
    t->domain = d;
    t->queue = q;
    return 0;
}

xc_task *xc_find_ref(const xc_exec *x, const char *ref)
{
    xc_task *t = wu_map_get(x->by_ref, ref);
    return t ? t : wu_map_get(x->by_def, ref);
}

xc_task *xc_latest(const xc_exec *x, const def_task *def)
{
    xc_task *t = wu_map_get(x->by_def, def->ref);
    return t && t->def == def ? t : NULL;
}

xc_task *xc_find_id(const xc_exec *x, const char *task_id)
{
    size_t i;
    for (i = x->tasks.len; i > 0; i--) {
        xc_task *t = x->tasks.items[i - 1];
        if (!strcmp(t->id, task_id)) return t;
    }
    return NULL;
}

int xc_set_reason(char **slot, const char *fmt, ...)
{
    char buf[WEFT_ERROR_MAX], *r;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!(r = strdup(buf))) return WEFT_ENOMEM;
    free(*slot);
    *slot = r;
    return 0;
}

int xc_wf_status_parse(const char *s, weft_wf_status *out)
{
    int i;
    for (i = WEFT_WF_RUNNING; i <= WEFT_WF_PAUSED; i++)
        if (!strcmp(s, weft_wf_status_name((weft_wf_status)i))) {
            *out = (weft_wf_status)i;
            return 0;
        }
    return WEFT_EINVAL;
}

static void add_str(json_object *o, const char *k, const char *v)
{
    if (v) json_object_object_add(o, k, json_object_new_string(v));
}

static void add_time(json_object *o, const char *k, int64_t ms)
{
    json_object_object_add(o, k, json_object_new_int64(ms));
}

json_object *xc_task_to_json(const xc_exec *x, const xc_task *t)
{
    json_object *o = json_object_new_object();
    json_object *wt = t->dyn_json ? t->dyn_json : t->def->json;
    add_str(o, "taskId", t->id);
    add_str(o, "taskType", t->def->type_name);
    add_str(o, "taskDefName", t->def->name);
    add_str(o, "referenceTaskName", t->ref); /* Conductor's Task field */
    add_str(o, "taskReferenceName", t->ref); /* as in the definition, for readers of both */
    add_str(o, "status", weft_task_status_name(t->status));
    json_object_object_add(o, "inputData",
                           t->input ? json_object_get(t->input) : json_object_new_object());
    json_object_object_add(o, "outputData",
                           t->output ? json_object_get(t->output) : json_object_new_object());
    json_object_object_add(o, "retryCount", json_object_new_int(t->retry_count));
    json_object_object_add(o, "seq", json_object_new_int(t->seq));
    json_object_object_add(o, "pollCount", json_object_new_int(t->poll_count));
    if (t->iteration) json_object_object_add(o, "iteration", json_object_new_int(t->iteration));
    add_str(o, "reasonForIncompletion", t->reason);
    add_str(o, "workflowInstanceId", x->id);
    add_str(o, "workflowType", x->def->name);
    add_str(o, "subWorkflowId", t->child_id);
    add_str(o, "workerId", t->worker_id);
    add_str(o, "domain", t->domain);
    add_time(o, "scheduledTime", t->scheduled_ms);
    add_time(o, "startTime", t->started_ms);
    add_time(o, "endTime", t->ended_ms);
    add_time(o, "updateTime", t->updated_ms);
    json_object_object_add(o, "retried", json_object_new_boolean(t->retried));
    json_object_object_add(o, "workflowTask", json_object_get(wt));
    return o;
}

json_object *xc_to_json(const xc_exec *x)
{
    json_object *o = json_object_new_object(), *tasks = json_object_new_array();
    size_t i;
    add_str(o, "workflowId", x->id);
    add_str(o, "workflowName", x->def->name);
    add_str(o, "workflowType", x->def->name);
    json_object_object_add(o, "workflowVersion", json_object_new_int(x->def->version));
    json_object_object_add(o, "version", json_object_new_int(x->def->version));
    add_str(o, "status", weft_wf_status_name(x->status));
    add_str(o, "correlationId", x->correlation_id);
    json_object_object_add(o, "priority", json_object_new_int(x->priority));
    if (x->task_to_domain)
        json_object_object_add(o, "taskToDomain", json_object_get(x->task_to_domain));
    add_str(o, "reasonForIncompletion", x->reason);
    add_str(o, "failedTaskId", x->failed_task_id);
    add_str(o, "parentWorkflowId", x->parent_id);
    add_str(o, "parentWorkflowTaskId", x->parent_task_id);
    json_object_object_add(o, "input", json_object_get(x->input));
    json_object_object_add(o, "output",
                           x->output ? json_object_get(x->output) : json_object_new_object());
    json_object_object_add(o, "variables", json_object_get(x->variables));
    add_time(o, "createTime", x->created_ms);
    add_time(o, "updateTime", x->updated_ms);
    add_time(o, "endTime", x->ended_ms);
    json_object_object_add(o, "fence", json_object_new_uint64(x->fence));
    for (i = 0; i < x->tasks.len; i++)
        json_object_array_add(tasks, xc_task_to_json(x, x->tasks.items[i]));
    json_object_object_add(o, "tasks", tasks);
    json_object_object_add(o, "workflowDefinition", json_object_get(x->def->json));
    return o;
}

/* ms as Conductor's summaries write times: "2026-11-26T08:00:00.123Z" (UTC). */
static json_object *iso_time(int64_t ms)
{
    char buf[40];
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm)) return NULL;
    snprintf(buf + strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm), 16, ".%03dZ",
             (int)(ms % 1000));
    return json_object_new_string(buf);
}

/* The JSON text of v (null for none). */
static json_object *text_of(json_object *v)
{
    return json_object_new_string(
        v ? json_object_to_json_string_ext(v,
                                           JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
          : "null");
}

json_object *xc_summary(const xc_exec *x)
{
    json_object *o = json_object_new_object(), *failed = json_object_new_array();
    wu_buf refs = {0};
    size_t i;
    add_str(o, "workflowType", x->def->name);
    json_object_object_add(o, "version", json_object_new_int(x->def->version));
    add_str(o, "workflowId", x->id);
    add_str(o, "correlationId", x->correlation_id);
    json_object_object_add(o, "startTime", iso_time(x->created_ms));
    json_object_object_add(o, "updateTime", iso_time(x->updated_ms));
    if (xc_wf_terminal(x->status)) json_object_object_add(o, "endTime", iso_time(x->ended_ms));
    add_str(o, "status", weft_wf_status_name(x->status));
    json_object_object_add(o, "input", text_of(x->input));
    json_object_object_add(o, "output", text_of(x->output));
    add_str(o, "reasonForIncompletion", x->reason);
    json_object_object_add(o, "executionTime",
                           json_object_new_int64(xc_wf_terminal(x->status) && x->ended_ms
                                                     ? x->ended_ms - x->created_ms
                                                     : 0));
    add_str(o, "event", "");
    for (i = 0; i < x->tasks.len; i++) {
        const xc_task *t = x->tasks.items[i];
        if (t->retried ||
            (t->status != WEFT_TASK_FAILED && t->status != WEFT_TASK_FAILED_WITH_TERMINAL_ERROR &&
             t->status != WEFT_TASK_TIMED_OUT))
            continue;
        if ((refs.len && wu_buf_add(&refs, ",", 1)) || wu_buf_add(&refs, t->ref, strlen(t->ref)))
            break;
        json_object_array_add(failed, json_object_new_string(t->def->name));
    }
    add_str(o, "failedReferenceTaskNames", refs.data ? refs.data : "");
    json_object_object_add(o, "failedTaskNames", failed);
    json_object_object_add(o, "priority", json_object_new_int(x->priority));
    add_str(o, "externalInputPayloadStoragePath", x->input_ref);
    add_str(o, "externalOutputPayloadStoragePath", x->output_ref);
    wu_buf_free(&refs);
    return o;
}

/* from's members into to (references). 0, or WEFT_ENOMEM. */
static int copy_members(json_object *to, json_object *from)
{
    if (!json_object_is_type(from, json_type_object)) return 0;
    json_object_object_foreach(from, k, v)
    {
        if (json_object_object_add(to, k, json_object_get(v))) {
            json_object_put(v);
            return WEFT_ENOMEM;
        }
    }
    return 0;
}

/* o[k] = v (taken); v NULL is a value that could not be made. 0, or WEFT_ENOMEM. */
static int add_made(json_object *o, const char *k, json_object *v)
{
    if (!v || json_object_object_add(o, k, v)) {
        json_object_put(v);
        return WEFT_ENOMEM;
    }
    return 0;
}

json_object *xc_child_result(const xc_exec *child, weft_task_status *status, char *reason,
                             size_t size)
{
    json_object *out = json_object_new_object();
    *status = child->status == WEFT_WF_COMPLETED ? WEFT_TASK_COMPLETED : WEFT_TASK_FAILED;
    char head[128];
    snprintf(head, sizeof head, "sub-workflow %s %s%s", child->id,
             weft_wf_status_name(child->status), child->reason ? ": " : "");
    wu_join_tail(reason, size, head, child->reason);
    if (!out || copy_members(out, child->output) ||
        add_made(out, "subWorkflowId", json_object_new_string(child->id))) {
        json_object_put(out);
        return NULL;
    }
    return out;
}

json_object *xc_failure_input(const xc_exec *x)
{
    json_object *in = json_object_new_object();
    if (!in || copy_members(in, x->input) ||
        add_made(in, "workflowId", json_object_new_string(x->id)) ||
        add_made(in, "reason", json_object_new_string(x->reason ? x->reason : "")) ||
        add_made(in, "failureStatus", json_object_new_string(weft_wf_status_name(x->status))) ||
        (x->failed_task_id &&
         add_made(in, "failureTaskId", json_object_new_string(x->failed_task_id)))) {
        json_object_put(in);
        return NULL;
    }
    return in;
}

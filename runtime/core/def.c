#include "core/def.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const def_limits def_limits_default = {
    .max_tasks = 1000,
    .max_retry_count = 100,
    .max_fork_width = 1000,
    .max_depth = 1000,
    .max_loop_iterations = 1000,
    .max_variables = 256 * 1024,
};

const def_limits *def_limits_of(const def_env *env)
{
    return env && env->limits ? env->limits : &def_limits_default;
}

int def_check_depth(const def_limits *lim, int depth, const char *what, weft_error *err)
{
    if (depth >= lim->max_depth)
        return wu_err(err, WEFT_ELIMIT,
                      "%s would be nested %d deep, over the limit of %d (max_subworkflow_depth)",
                      what, depth + 1, lim->max_depth);
    return 0;
}

/* No callbacks: the task is queued under its type name for a worker elsewhere. */
const weft_task_type def_remote_type = {.name = "(served elsewhere)"};

/* Where a node stands, for messages: "fork 'notify' branch 2". */
typedef struct cctx {
    const def_env *env;
    def_workflow *wf;
    json_object *lines;
    wu_vec *owned; /* where new nodes go (wf->all, or a dynamic vec) */
    wu_map *refs;  /* refs seen so far (wf->by_ref, or a scratch map) */
    int ntasks;    /* compiled so far (max_tasks) */
} cctx;

/* ex_foreach_ref: stop at the first ${secrets.NAME} */
static int secret_ref(void *ud, const char *root, const char *field)
{
    (void)ud;
    (void)field;
    return !strcmp(root, "secrets");
}

static int compile_task(cctx *c, json_object *j, def_list *list, size_t index, weft_error *err);

static int task_line(cctx *c, const char *ref)
{
    json_object *l;
    if (c->lines && ref && json_object_object_get_ex(c->lines, ref, &l))
        return json_object_get_int(l);
    return 0;
}

/* Prefix err with "<source>:<line>: task '<ref>': ". */
static int task_err(cctx *c, const char *ref, int line, weft_error *err)
{
    const char *src = c->wf->source ? c->wf->source : c->wf->name;
    if (line > 0) return wu_err_prefix(err, "%s:%d: task '%s': ", src, line, ref);
    return wu_err_prefix(err, "%s: task '%s': ", src, ref);
}

static int is_task_obj(json_object *v)
{
    return json_object_is_type(v, json_type_object) &&
           json_object_object_get_ex(v, "taskReferenceName", NULL);
}

/* A non-empty array of objects, at least one a task: a task list (so that an
 * entry missing its taskReferenceName is reported, not skipped). */
static int is_task_array(json_object *v)
{
    size_t i, n;
    int tasks = 0;
    if (!json_object_is_type(v, json_type_array) || !(n = json_object_array_length(v))) return 0;
    for (i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(v, i);
        if (!json_object_is_type(e, json_type_object)) return 0;
        tasks |= is_task_obj(e);
    }
    return tasks;
}

/* A string field's value, or dflt when it is absent or null. */
static const char *str_or(json_object *v, const char *dflt)
{
    const char *s = v ? json_object_get_string(v) : NULL;
    return s ? s : dflt;
}

static int add_list(cctx *c, def_task *owner, json_object *arr, weft_error *err)
{
    def_list *l = calloc(1, sizeof *l), **children;
    size_t i, n = json_object_array_length(arr);
    int rc;
    if (!l) return wu_err(err, WEFT_ENOMEM, "out of memory");
    children = realloc(owner->children, (owner->nchildren + 1) * sizeof *children);
    if (!children) {
        free(l);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    owner->children = children;
    owner->children[owner->nchildren++] = l;
    l->owner = owner;
    l->tasks = calloc(n ? n : 1, sizeof *l->tasks);
    if (!l->tasks) return wu_err(err, WEFT_ENOMEM, "out of memory");
    for (i = 0; i < n; i++) {
        rc = compile_task(c, json_object_array_get_idx(arr, i), l, i, err);
        if (rc) return rc;
        l->n++;
    }
    return 0;
}

/* Find nested task lists by shape (see def.h). */
static int find_children(cctx *c, def_task *t, weft_error *err)
{
    json_object_object_foreach(t->json, key, val)
    {
        size_t i, n;
        int rc;
        if (!strcmp(key, "inputParameters") || !strcmp(key, "taskDefinition") ||
            !strcmp(key, "subWorkflowParam"))
            continue;
        if (is_task_array(val)) {
            if ((rc = add_list(c, t, val, err))) return rc;
        } else if (json_object_is_type(val, json_type_array)) {
            n = json_object_array_length(val);
            for (i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(val, i);
                if (is_task_array(e) && (rc = add_list(c, t, e, err))) return rc;
            }
        } else if (json_object_is_type(val, json_type_object) && !is_task_obj(val)) {
            json_object_object_foreach(val, k2, v2)
            {
                (void)k2;
                if (is_task_array(v2) && (rc = add_list(c, t, v2, err))) return rc;
            }
        }
    }
    return 0;
}

static int get_seconds_ms(json_object *o, const char *key, int64_t *ms, weft_error *err)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (wu_parse_duration(v, ms, err)) return wu_err_prefix(err, "%s: ", key);
    return 0;
}

/* A whole number >= 0 at key of o (absent: 0). */
static int get_count(json_object *o, const char *key, int *out, weft_error *err)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
        json_object_get_int64(v) > 1000000000)
        return wu_err(err, WEFT_EINVAL, "%s must be a whole number from 0 to 1000000000 (got %s)",
                      key, json_object_to_json_string(v));
    *out = json_object_get_int(v);
    return 0;
}

/* rateLimitPerFrequency per rateLimitFrequencyInSeconds (default 1 s; 0
 * starts: no limit) and concurrentExecLimit (0: none), as in Conductor. */
static int read_qlimit(json_object *td, def_qlimit *q, weft_error *err)
{
    int rc;
    q->rate_per_ms = 1000;
    if ((rc = get_count(td, "rateLimitPerFrequency", &q->rate_count, err)) ||
        (rc = get_count(td, "concurrentExecLimit", &q->concurrency, err)) ||
        (rc = get_seconds_ms(td, "rateLimitFrequencyInSeconds", &q->rate_per_ms, err)))
        return rc;
    if (q->rate_count > 0 && q->rate_per_ms < 1)
        return wu_err(err, WEFT_EINVAL,
                      "rateLimitFrequencyInSeconds must be at least 1 ms when "
                      "rateLimitPerFrequency is set");
    if (q->rate_count == 0) q->rate_per_ms = 0;
    return 0;
}

static int read_policy(const def_limits *lim, def_task *t, weft_error *err)
{
    json_object *td = NULL, *v;
    int rc;
    t->backoff_scale = 1;
    t->retry_delay_ms = 1000;
    if (json_object_object_get_ex(t->json, "optional", &v))
        t->optional = json_object_get_boolean(v);
    if (!json_object_object_get_ex(t->json, "taskDefinition", &td)) td = NULL;
    if (td && !json_object_is_type(td, json_type_object))
        return wu_err(err, WEFT_EINVAL, "taskDefinition must be an object");
    /* retryCount on the task overrides the task definition's, as in Conductor */
    if (json_object_object_get_ex(t->json, "retryCount", &v) ||
        (td && json_object_object_get_ex(td, "retryCount", &v))) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int(v) < 0)
            return wu_err(err, WEFT_EINVAL, "retryCount must be a whole number >= 0");
        t->retry_count = json_object_get_int(v);
        if (t->retry_count > lim->max_retry_count)
            return wu_err(err, WEFT_EINVAL,
                          "retryCount %d is over the limit of %d (max_retry_count)", t->retry_count,
                          lim->max_retry_count);
    }
    if (td && json_object_object_get_ex(td, "retryLogic", &v)) {
        const char *s = str_or(v, "FIXED");
        if (!strcmp(s, "FIXED"))
            t->retry_logic = DEF_RETRY_FIXED;
        else if (!strcmp(s, "LINEAR_BACKOFF"))
            t->retry_logic = DEF_RETRY_LINEAR;
        else if (!strcmp(s, "EXPONENTIAL_BACKOFF"))
            t->retry_logic = DEF_RETRY_EXPONENTIAL;
        else
            return wu_err(err, WEFT_EINVAL,
                          "retryLogic '%s' (use FIXED, LINEAR_BACKOFF or EXPONENTIAL_BACKOFF)", s);
    }
    if (td && json_object_object_get_ex(td, "backoffScaleFactor", &v))
        t->backoff_scale = json_object_get_double(v) > 0 ? json_object_get_double(v) : 1;
    if ((rc = get_seconds_ms(t->json, "startDelay", &t->start_delay_ms, err)) ||
        (rc = get_seconds_ms(td, "retryDelaySeconds", &t->retry_delay_ms, err)) ||
        (rc = get_seconds_ms(td, "maxRetryDelaySeconds", &t->max_retry_delay_ms, err)) ||
        (rc = get_seconds_ms(td, "timeoutSeconds", &t->timeout_ms, err)) ||
        (rc = get_seconds_ms(td, "responseTimeoutSeconds", &t->response_timeout_ms, err)))
        return rc;
    if ((rc = read_qlimit(td, &t->limit, err))) return rc;
    if (td && json_object_object_get_ex(td, "backoffJitterMs", &v))
        t->jitter_ms = json_object_get_int64(v) > 0 ? json_object_get_int64(v) : 0;
    if (td && json_object_object_get_ex(td, "timeoutPolicy", &v)) {
        const char *s = str_or(v, "TIME_OUT_WF");
        if (!strcmp(s, "RETRY"))
            t->timeout_policy = DEF_TIMEOUT_RETRY;
        else if (!strcmp(s, "ALERT_ONLY"))
            t->timeout_policy = DEF_TIMEOUT_ALERT_ONLY;
        else if (!strcmp(s, "TIME_OUT_WF"))
            t->timeout_policy = DEF_TIMEOUT_WF;
        else
            return wu_err(err, WEFT_EINVAL,
                          "timeoutPolicy '%s' (use RETRY, TIME_OUT_WF or ALERT_ONLY)", s);
    }
    return 0;
}

static int compile_task(cctx *c, json_object *j, def_list *list, size_t index, weft_error *err)
{
    const def_limits *lim = def_limits_of(c->env);
    def_task *t;
    json_object *v, *in = NULL;
    const char *ref;
    int rc;

    if (!json_object_is_type(j, json_type_object) ||
        !json_object_object_get_ex(j, "taskReferenceName", &v) ||
        !json_object_is_type(v, json_type_string) || !*(ref = json_object_get_string(v))) {
        const char *src = c->wf->source ? c->wf->source : c->wf->name;
        if (list->owner)
            return wu_err(err, WEFT_EINVAL,
                          "%s: task '%s': nested task %zu has no taskReferenceName", src,
                          list->owner->ref, index + 1);
        return wu_err(err, WEFT_EINVAL, "%s: task %zu has no taskReferenceName", src, index + 1);
    }
    t = calloc(1, sizeof *t);
    if (!t || wu_vec_push(c->owned, t)) {
        free(t);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    t->json = j;
    t->ref = ref;
    t->list = list;
    if (++c->ntasks > lim->max_tasks) {
        wu_err(err, WEFT_EINVAL, "the definition has more than %d tasks (max_tasks)",
               lim->max_tasks);
        return task_err(c, ref, task_line(c, ref), err);
    }
    t->index = index;
    t->line = task_line(c, ref);
    list->tasks[index] = t;
    json_object_set_userdata(j, t, NULL);

    if (wu_map_get(c->refs, ref) || (c->refs != c->wf->by_ref && wu_map_get(c->wf->by_ref, ref))) {
        wu_err(err, WEFT_EINVAL, "duplicate taskReferenceName '%s'", ref);
        return task_err(c, ref, t->line, err);
    }
    if (strchr(ref, '.') || strchr(ref, '$') || strchr(ref, ' ')) {
        wu_err(err, WEFT_EINVAL, "taskReferenceName may not contain '.', '$' or spaces");
        return task_err(c, ref, t->line, err);
    }
    if (wu_map_put(c->refs, ref, t)) return wu_err(err, WEFT_ENOMEM, "out of memory");

    t->type_name = "SIMPLE"; /* Conductor's default type */
    if (json_object_object_get_ex(j, "type", &v)) {
        if (!json_object_is_type(v, json_type_string) || !*json_object_get_string(v)) {
            wu_err(err, WEFT_EINVAL, "type must be a non-empty string");
            return task_err(c, ref, t->line, err);
        }
        t->type_name = json_object_get_string(v);
    }
    t->name = ref;
    if (json_object_object_get_ex(j, "name", &v) && json_object_is_type(v, json_type_string))
        t->name = json_object_get_string(v);
    t->type = c->env->find_type ? c->env->find_type(c->env->ud, t->type_name) : NULL;
    if (!t->type && c->env->allow_unknown) t->type = &def_remote_type;
    if (!t->type) {
        wu_err(err, WEFT_EINVAL, "unknown task type %s (no plugin provides it; searched: %s%s%s)",
               t->type_name, c->env->searched ? c->env->searched : "nothing",
               c->env->known ? "; known types: " : "",
               c->env->known ? (*c->env->known ? c->env->known : "none") : "");
        return task_err(c, ref, t->line, err);
    }
    t->queue = t->type->flags & WEFT_TASK_EXTERNAL ? t->name : t->type_name;
    if (strchr(t->queue, ':')) {
        /* "<domain>:<queue>" names a task domain's queue */
        wu_err(err, WEFT_EINVAL,
               "task name '%s': a queue name may not hold ':' (it separates a task "
               "domain from its queue)",
               t->queue);
        return task_err(c, ref, t->line, err);
    }
    if (json_object_object_get_ex(j, "inputParameters", &in) &&
        !json_object_is_type(in, json_type_object) && !json_object_is_type(in, json_type_null)) {
        wu_err(err, WEFT_EINVAL, "inputParameters must be an object");
        return task_err(c, ref, t->line, err);
    }
    if ((rc = ex_compile(in, &t->input, err))) {
        wu_err_prefix(err, "inputParameters: ");
        return task_err(c, ref, t->line, err);
    }
    t->uses_secrets = ex_foreach_ref(t->input, secret_ref, NULL);
    if ((rc = read_policy(lim, t, err))) return task_err(c, ref, t->line, err);
    if (t->type->validate && (rc = t->type->validate(c->env->host, j, err)))
        return task_err(c, ref, t->line, err);
    if ((rc = find_children(c, t, err))) return rc;
    if (t->nchildren > (size_t)lim->max_fork_width) {
        wu_err(err, WEFT_EINVAL,
               "%zu branches (nested task lists) is over the limit of %d "
               "(max_fork_width)",
               t->nchildren, lim->max_fork_width);
        return task_err(c, ref, t->line, err);
    }
    return 0;
}

static const char *const wf_fields[] = {
    "input",
    "output",
    "variables",
    "workflowId",
    "correlationId",
    "status",
    "workflowType",
    "version",
    "parentWorkflowId",
    "parentWorkflowTaskId",
    "createTime",
    "reasonForIncompletion",
    NULL,
};
static const char *const task_fields[] = {
    "input",
    "output",
    "status",
    "taskId",
    "referenceTaskName",
    "retryCount",
    "taskType",
    "reasonForIncompletion",
    "iteration",
    "scheduledTime",
    "startTime",
    "endTime",
    NULL,
};

static int in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(s, *list)) return 1;
    return 0;
}

/* "ref__3" names iteration 3 of loop body task "ref". */
static int is_iteration_ref(const def_workflow *wf, const char *root)
{
    const char *p = strstr(root, "__");
    char base[256];
    size_t n;
    while (p) {
        const char *q = p + 2;
        n = (size_t)(p - root);
        if (*q && n < sizeof base) {
            while (isdigit((unsigned char)*q))
                q++;
            /* "ref__2" or, in nested loops, "ref__2__1" */
            if (q > p + 2 && (!*q || (q[0] == '_' && q[1] == '_'))) {
                memcpy(base, root, n);
                base[n] = 0;
                if (wu_map_get(wf->by_ref, base)) return 1;
            }
        }
        p = strstr(p + 2, "__");
    }
    return 0;
}

typedef struct refcheck {
    const def_workflow *wf;
    weft_error *err;
} refcheck;

static int check_ref(void *ud, const char *root, const char *field)
{
    refcheck *rc = ud;
    if (!strcmp(root, "workflow")) {
        if (field && !in_list(field, wf_fields))
            return wu_err(rc->err, WEFT_EINVAL, "unknown workflow field '%s' in ${workflow.%s}",
                          field, field);
        return 0;
    }
    if (!strcmp(root, "secrets")) {
        if (!field) return wu_err(rc->err, WEFT_EINVAL, "${secrets} needs a name: ${secrets.NAME}");
        return 0;
    }
    if (!wu_map_get(rc->wf->by_ref, root) && !is_iteration_ref(rc->wf, root))
        return wu_err(rc->err, WEFT_EINVAL, "refers to unknown task '%s' in ${%s%s%s}", root, root,
                      field ? "." : "", field ? field : "");
    if (field && !in_list(field, task_fields))
        return wu_err(rc->err, WEFT_EINVAL,
                      "unknown task field '%s' in ${%s.%s} (use input or output)", field, root,
                      field);
    return 0;
}

static int check_refs(cctx *c, weft_error *err)
{
    refcheck rc = {c->wf, err};
    size_t i;
    for (i = 0; i < c->wf->all.len; i++) {
        def_task *t = c->wf->all.items[i];
        if (t->input && ex_foreach_ref(t->input, check_ref, &rc)) {
            wu_err_prefix(err, "input ");
            return task_err(c, t->ref, t->line, err);
        }
    }
    if (c->wf->output && ex_foreach_ref(c->wf->output, check_ref, &rc)) {
        const char *src = c->wf->source ? c->wf->source : c->wf->name;
        return wu_err_prefix(err, "%s: outputParameters ", src);
    }
    return 0;
}

static void free_task(def_task *t)
{
    size_t i;
    for (i = 0; i < t->nchildren; i++) {
        free(t->children[i]->tasks);
        free(t->children[i]);
    }
    free(t->children);
    ex_free(t->input);
    if (t->json && json_object_get_userdata(t->json) == t)
        json_object_set_userdata(t->json, NULL, NULL);
    free(t);
}

static void wf_free(def_workflow *wf)
{
    size_t i;
    if (!wf) return;
    for (i = 0; i < wf->all.len; i++)
        free_task(wf->all.items[i]);
    wu_vec_free(&wf->all);
    free(wf->root.tasks);
    wu_map_free(wf->by_ref);
    ex_free(wf->output);
    json_object_put(wf->json);
    free(wf->source);
    free(wf);
}

int def_compile(const def_env *env, json_object *json, const char *source, json_object *lines,
                def_workflow **out, weft_error *err)
{
    def_workflow *wf;
    json_object *v, *tasks;
    cctx c;
    size_t i, n;
    int rc;
    const char *src = source ? source : "definition";

    *out = NULL;
    if (!json_object_is_type(json, json_type_object))
        return wu_err(err, WEFT_EINVAL, "%s: a workflow definition must be a JSON object", src);
    if (!json_object_object_get_ex(json, "name", &v) || !json_object_is_type(v, json_type_string) ||
        !*json_object_get_string(v))
        return wu_err(err, WEFT_EINVAL, "%s: the workflow has no name", src);
    wf = calloc(1, sizeof *wf);
    if (!wf) return wu_err(err, WEFT_ENOMEM, "out of memory");
    wf->refs = 1;
    /* A private copy: nodes carry userdata pointing at their def_task. */
    wf->json = json_object_new_null();
    if (json_object_deep_copy(json, &wf->json, NULL) != 0 || !(wf->by_ref = wu_map_new()) ||
        (source && !(wf->source = strdup(source)))) {
        wf_free(wf);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    json_object_object_get_ex(wf->json, "name", &v);
    wf->name = json_object_get_string(v);
    if (!wf->source && !(wf->source = strdup(wf->name))) {
        wf_free(wf);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    wf->version = 1;
    if (json_object_object_get_ex(wf->json, "version", &v)) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int(v) < 1) {
            wf_free(wf);
            return wu_err(err, WEFT_EINVAL, "%s: version must be a whole number >= 1", src);
        }
        wf->version = json_object_get_int(v);
    }
    wf->restartable = 1;
    if (json_object_object_get_ex(wf->json, "restartable", &v))
        wf->restartable = json_object_get_boolean(v);
    if (json_object_object_get_ex(wf->json, "failureWorkflow", &v) &&
        json_object_is_type(v, json_type_string) && *json_object_get_string(v))
        wf->failure_workflow = v;
    if ((rc = get_seconds_ms(wf->json, "timeoutSeconds", &wf->timeout_ms, err))) {
        wu_err_prefix(err, "%s: ", src);
        wf_free(wf);
        return rc;
    }
    if (json_object_object_get_ex(wf->json, "variables", &v) &&
        json_object_is_type(v, json_type_object)) {
        /* the initial workflow.variables: the same bound as SET_VARIABLE's */
        size_t len = 0;
        if (!json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &len)) {
            wf_free(wf);
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        }
        if ((int64_t)len > def_limits_of(env)->max_variables) {
            wf_free(wf);
            return wu_err(err, WEFT_EINVAL,
                          "%s: variables take %zu bytes, over the limit of %lld "
                          "(max_variables_size)",
                          src, len, (long long)def_limits_of(env)->max_variables);
        }
    }
    wf->timeout_fails = 1;
    if (json_object_object_get_ex(wf->json, "timeoutPolicy", &v))
        wf->timeout_fails = strcmp(str_or(v, "TIME_OUT_WF"), "ALERT_ONLY") != 0;
    if (json_object_object_get_ex(wf->json, "outputParameters", &v) &&
        json_object_is_type(v, json_type_object) && json_object_object_length(v) > 0 &&
        (rc = ex_compile(v, &wf->output, err))) {
        wu_err_prefix(err, "%s: outputParameters: ", src);
        wf_free(wf);
        return rc;
    }
    if (!json_object_object_get_ex(wf->json, "tasks", &tasks) ||
        !json_object_is_type(tasks, json_type_array) || !(n = json_object_array_length(tasks))) {
        wf_free(wf);
        return wu_err(err, WEFT_EINVAL, "%s: workflow '%s' has no tasks", src,
                      json_object_get_string(json_object_object_get(json, "name")));
    }
    wf->root.tasks = calloc(n, sizeof *wf->root.tasks);
    if (!wf->root.tasks) {
        wf_free(wf);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    c.env = env;
    c.wf = wf;
    c.lines = lines;
    c.owned = &wf->all;
    c.refs = wf->by_ref;
    c.ntasks = 0;
    for (i = 0; i < n; i++) {
        if ((rc = compile_task(&c, json_object_array_get_idx(tasks, i), &wf->root, i, err))) {
            wf->root.n = i;
            wf_free(wf);
            return rc;
        }
        wf->root.n++;
    }
    if ((rc = check_refs(&c, err))) {
        wf_free(wf);
        return rc;
    }
    for (i = 0; i < wf->all.len; i++)
        wf->nremote += ((def_task *)wf->all.items[i])->type == &def_remote_type;
    *out = wf;
    return 0;
}

int def_compile_dynamic(const def_env *env, def_workflow *wf, def_task *owner, json_object *json,
                        def_dyn *dyn, def_task **out, weft_error *err)
{
    def_list *l = calloc(1, sizeof *l);
    cctx c = {env, wf, NULL, &dyn->tasks, NULL, 0};
    size_t mark = dyn->tasks.len;
    int rc;

    *out = NULL;
    if (!l || !(l->tasks = calloc(1, sizeof *l->tasks)) || wu_vec_push(&dyn->lists, l) ||
        !(c.refs = wu_map_new())) {
        if (l && (!dyn->lists.len || dyn->lists.items[dyn->lists.len - 1] != l)) {
            free(l->tasks);
            free(l);
        }
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    l->owner = owner;
    rc = compile_task(&c, json, l, 0, err);
    wu_map_free(c.refs);
    if (rc) {
        while (dyn->tasks.len > mark)
            free_task(dyn->tasks.items[--dyn->tasks.len]);
        return rc;
    }
    /* the node outlives whoever handed it in (a plugin's out_tasks array) */
    if (wu_vec_push(&dyn->roots, json_object_get(json))) {
        json_object_put(json);
        while (dyn->tasks.len > mark)
            free_task(dyn->tasks.items[--dyn->tasks.len]);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    l->n = 1;
    *out = l->tasks[0];
    return 0;
}

void def_dynamic_free(def_dyn *dyn)
{
    size_t i;
    for (i = 0; i < dyn->tasks.len; i++)
        free_task(dyn->tasks.items[i]);
    for (i = 0; i < dyn->roots.len; i++)
        json_object_put(dyn->roots.items[i]);
    wu_vec_free(&dyn->roots);
    for (i = 0; i < dyn->lists.len; i++) {
        def_list *l = dyn->lists.items[i];
        free(l->tasks);
        free(l);
    }
    wu_vec_free(&dyn->tasks);
    wu_vec_free(&dyn->lists);
}

def_workflow *def_ref(def_workflow *wf)
{
    if (wf) __atomic_add_fetch(&wf->refs, 1, __ATOMIC_RELAXED);
    return wf;
}

void def_unref(def_workflow *wf)
{
    if (wf && __atomic_sub_fetch(&wf->refs, 1, __ATOMIC_ACQ_REL) == 0) wf_free(wf);
}

def_task *def_of_json(json_object *node)
{
    return node && json_object_is_type(node, json_type_object) ? json_object_get_userdata(node)
                                                               : NULL;
}

int64_t def_retry_delay(const def_task *t, int retry)
{
    double d = (double)t->retry_delay_ms;
    if (retry < 1) retry = 1;
    switch (t->retry_logic) {
    case DEF_RETRY_FIXED:
        break;
    case DEF_RETRY_LINEAR:
        d = d * t->backoff_scale * retry;
        break;
    case DEF_RETRY_EXPONENTIAL:
        d = d * pow(2.0, retry - 1 > 60 ? 60 : retry - 1);
        break;
    }
    if (t->max_retry_delay_ms > 0 && d > (double)t->max_retry_delay_ms)
        d = (double)t->max_retry_delay_ms;
    if (d > 1e15) /* about 30 years: keeps the cast below defined */
        d = 1e15;
    if (t->jitter_ms > 0) d += (double)(rand() % (t->jitter_ms + 1));
    return (int64_t)d;
}

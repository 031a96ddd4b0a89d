#include "core/codec.h"
#include "base/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A value kept outside has its reference in a field of its own, "<k>Ref",
 * which only w_payload writes: whatever a client sends is a value in "<k>"
 * and stays data, however it is shaped (payload.h). The reference goes to
 * *ref, the value (a new reference, or NULL) to *val. 0 or WEFT_ENOMEM.
 */
static int get_payload(json_object *o, const char *k, const char *kref, json_object **val,
                       char **ref)
{
    json_object *v;
    *val = NULL;
    *ref = NULL;
    if (json_object_object_get_ex(o, kref, &v) && json_object_is_type(v, json_type_string))
        return (*ref = strdup(json_object_get_string(v))) ? 0 : WEFT_ENOMEM;
    if (json_object_object_get_ex(o, k, &v) && !json_object_is_type(v, json_type_null))
        *val = json_object_get(v);
    return 0;
}

/* ---- the document and events as text, written directly ----
 *
 * Plain JSON as json-c writes it, without building and freeing a tree of
 * json objects on every save (that tree was about half of a worker's CPU).
 * Only the JSON values of the execution (inputs, outputs, variables) go
 * through json-c. */

typedef struct jw {
    wu_buf *b;
    int rc;
    int first; /* no comma before the next key */
} jw;

static void jw_raw(jw *w, const char *s, size_t n)
{
    if (!w->rc) w->rc = wu_buf_add(w->b, s, n);
}

static void jw_str(jw *w, const char *s)
{
    if (!w->rc) w->rc = wu_buf_add_json_str(w->b, s);
}

static void jw_key(jw *w, const char *k)
{
    if (!w->first) jw_raw(w, ",", 1);
    w->first = 0;
    jw_raw(w, "\"", 1);
    jw_raw(w, k, strlen(k));
    jw_raw(w, "\":", 2);
}

static void jw_int(jw *w, int64_t v)
{
    char buf[24], *p = buf + sizeof buf;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do
        *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0) *--p = '-';
    jw_raw(w, p, (size_t)(buf + sizeof buf - p));
}

static void jw_open(jw *w, char c)
{
    jw_raw(w, &c, 1);
    w->first = 1;
}

static void jw_close(jw *w, char c)
{
    jw_raw(w, &c, 1);
    w->first = 0;
}

/* a field, left out when NULL or 0 */
static void w_str(jw *w, const char *k, const char *v)
{
    if (v) {
        jw_key(w, k);
        jw_str(w, v);
    }
}

static void w_int(jw *w, const char *k, int64_t v)
{
    if (v) {
        jw_key(w, k);
        jw_int(w, v);
    }
}

/* A JSON value as json-c writes it (plain), walked here: json-c prints
 * every integer with snprintf and renders into each object's own buffer.
 * Doubles (and integers at the edge of int64) are still json-c's. */
static void w_json(jw *w, json_object *v)
{
    size_t n = 0, i;
    const char *s;
    int64_t k;
    int first = 1;
    switch (json_object_get_type(v)) {
    case json_type_null:
        jw_raw(w, "null", 4);
        return;
    case json_type_boolean:
        if (json_object_get_boolean(v))
            jw_raw(w, "true", 4);
        else
            jw_raw(w, "false", 5);
        return;
    case json_type_string:
        if (!w->rc)
            w->rc = wu_buf_add_json_strn(w->b, json_object_get_string(v),
                                         (size_t)json_object_get_string_len(v));
        return;
    case json_type_int:
        k = json_object_get_int64(v);
        if (k != INT64_MAX && k != INT64_MIN) {
            jw_int(w, k);
            return;
        }
        break;
    case json_type_object: {
        jw_raw(w, "{", 1);
        json_object_object_foreach(v, key, val)
        {
            if (!first) jw_raw(w, ",", 1);
            first = 0;
            jw_str(w, key);
            jw_raw(w, ":", 1);
            w_json(w, val);
        }
        jw_raw(w, "}", 1);
        return;
    }
    case json_type_array:
        jw_raw(w, "[", 1);
        for (i = 0; i < json_object_array_length(v); i++) {
            if (i) jw_raw(w, ",", 1);
            w_json(w, json_object_array_get_idx(v, i));
        }
        jw_raw(w, "]", 1);
        return;
    default:
        break;
    }
    s = json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &n);
    if (!s)
        w->rc = WEFT_ENOMEM;
    else
        jw_raw(w, s, n);
}

static void w_obj(jw *w, const char *k, json_object *v)
{
    if (v) {
        jw_key(w, k);
        w_json(w, v);
    }
}

static void w_payload(jw *w, const char *k, const char *kref, json_object *v, const char *ref)
{
    if (ref)
        w_str(w, kref, ref);
    else
        w_obj(w, k, v);
}

static void w_task(jw *w, const xc_task *t)
{
    int flags = (t->followed ? 1 : 0) | (t->spawned ? 2 : 0) | (t->retried ? 4 : 0) |
                (t->queued ? 8 : 0) | (t->fresh ? 16 : 0) | (t->sized ? 32 : 0) |
                (t->no_response ? 64 : 0);
    jw_open(w, '{');
    w_str(w, "id", t->id);
    w_str(w, "ref", t->ref);
    if (strcmp(t->def->ref, t->ref)) w_str(w, "def", t->def->ref); /* else the same as ref */
    if (t->dyn_json) {
        w_obj(w, "dyn", t->dyn_json);
        w_str(w, "owner", t->def->list->owner->ref);
    }
    w_str(w, "status", weft_task_status_name(t->status));
    w_payload(w, "input", "inputRef", t->input, t->input_ref);
    w_payload(w, "output", "outputRef", t->output, t->output_ref);
    w_str(w, "reason", t->reason);
    w_int(w, "retryCount", t->retry_count);
    w_int(w, "pollCount", t->poll_count);
    w_int(w, "iteration", t->iteration);
    w_int(w, "scope", t->scope);
    w_int(w, "scheduledTime", t->scheduled_ms);
    w_int(w, "startTime", t->started_ms);
    w_int(w, "endTime", t->ended_ms);
    w_int(w, "updateTime", t->updated_ms);
    w_int(w, "callbackTime", t->callback_ms);
    w_str(w, "subWorkflowId", t->child_id);
    w_str(w, "workerId", t->worker_id);
    w_str(w, "domain", t->domain);
    w_int(w, "flags", flags);
    jw_close(w, '}');
}

int cd_doc_text(const xc_exec *x, wu_buf *b)
{
    jw w = {b, 0, 1};
    size_t i;
    jw_open(&w, '{');
    w_str(&w, "id", x->id);
    w_str(&w, "status", weft_wf_status_name(x->status));
    w_payload(&w, "input", "inputRef", x->input, x->input_ref);
    w_payload(&w, "output", "outputRef", x->output, x->output_ref);
    w_obj(&w, "variables", x->variables);
    w_str(&w, "reason", x->reason);
    w_str(&w, "correlationId", x->correlation_id);
    w_str(&w, "parentWorkflowId", x->parent_id);
    w_str(&w, "parentWorkflowTaskId", x->parent_task_id);
    w_int(&w, "depth", x->depth);
    w_int(&w, "priority", x->priority);
    w_obj(&w, "taskToDomain", x->task_to_domain);
    w_str(&w, "failedTaskId", x->failed_task_id);
    w_int(&w, "createTime", x->created_ms);
    w_int(&w, "updateTime", x->updated_ms);
    w_int(&w, "endTime", x->ended_ms);
    if (x->root_done) {
        jw_key(&w, "rootDone");
        jw_raw(&w, "true", 4);
    }
    jw_key(&w, "scopes");
    jw_open(&w, '[');
    for (i = 1; i < x->scopes.len; i++) {
        xc_scope *s = x->scopes.items[i];
        if (i > 1) jw_raw(&w, ",", 1);
        jw_raw(&w, "[", 1);
        jw_int(&w, s->parent);
        jw_raw(&w, ",", 1);
        jw_int(&w, s->iteration);
        jw_raw(&w, "]", 1);
    }
    jw_close(&w, ']');
    jw_key(&w, "ended");
    jw_open(&w, '[');
    for (i = x->ended_head; i < x->ended.len; i++) {
        if (i > x->ended_head) jw_raw(&w, ",", 1);
        jw_int(&w, ((xc_task *)x->ended.items[i])->seq - 1);
    }
    jw_close(&w, ']');
    jw_key(&w, "tasks");
    jw_open(&w, '[');
    for (i = 0; i < x->tasks.len; i++) {
        if (i > 0) jw_raw(&w, ",", 1);
        w_task(&w, x->tasks.items[i]);
    }
    jw_close(&w, ']');
    jw_close(&w, '}');
    return w.rc;
}

int cd_event_text(const xc_exec *x, const xc_task *t, wu_buf *b)
{
    jw w = {b, 0, 1};
    jw_open(&w, '{');
    if (t) {
        w_str(&w, "taskId", t->id);
        w_str(&w, "referenceTaskName", t->ref);
        w_str(&w, "taskType", t->def->type_name);
        w_str(&w, "status", weft_task_status_name(t->status));
        if (t->reason && xc_task_terminal(t->status) && !xc_task_ok(t->status))
            w_str(&w, "reason", t->reason);
    } else {
        w_str(&w, "status", weft_wf_status_name(x->status));
        w_str(&w, "reason", x->reason);
        if (xc_wf_terminal(x->status)) w_obj(&w, "output", x->output);
    }
    jw_close(&w, '}');
    return w.rc;
}

static const char *get_str(json_object *o, const char *k)
{
    json_object *v;
    return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

static int64_t get_int(json_object *o, const char *k)
{
    json_object *v;
    return json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : 0;
}

static json_object *get_obj(json_object *o, const char *k)
{
    json_object *v;
    return json_object_object_get_ex(o, k, &v) && !json_object_is_type(v, json_type_null)
               ? json_object_get(v)
               : NULL;
}

/* A copy of s (NULL: none) into *slot. 0, or WEFT_ENOMEM. */
static int dup_to(char **slot, const char *s)
{
    *slot = s ? strdup(s) : NULL;
    return s && !*slot ? WEFT_ENOMEM : 0;
}

static int task_status_parse(const char *s, weft_task_status *out)
{
    int i;
    for (i = WEFT_TASK_SCHEDULED; s && i <= WEFT_TASK_SKIPPED; i++)
        if (!strcmp(s, weft_task_status_name((weft_task_status)i))) {
            *out = (weft_task_status)i;
            return 0;
        }
    return WEFT_EINVAL;
}

/* The def node of a stored task: static by ref, or a dynamic one compiled again. */
static int task_def(json_object *td, xc_exec *x, const def_env *env, def_task **out,
                    weft_error *err)
{
    const char *ref = get_str(td, "def") ? get_str(td, "def") : get_str(td, "ref"), *owner_ref;
    json_object *dyn;
    def_task *owner = NULL;
    size_t i;
    if (!ref) return wu_err(err, WEFT_EINVAL, "task without a definition ref");
    if (!json_object_object_get_ex(td, "dyn", &dyn)) {
        *out = wu_map_get(x->def->by_ref, ref);
        /* or a node nested in a dynamic task (a dynamic loop's body) */
        for (i = x->dyn.tasks.len; !*out && i > 0; i--) {
            def_task *d = x->dyn.tasks.items[i - 1];
            if (!strcmp(d->ref, ref)) *out = d;
        }
        return *out ? 0 : wu_err(err, WEFT_EINVAL, "task '%s' is not in the definition", ref);
    }
    if (!json_object_is_type(dyn, json_type_object))
        return wu_err(err, WEFT_EINVAL, "dynamic task '%s' has no definition", ref);
    /* the same dynamic node may have run before (a retry): reuse its def */
    for (i = 0; i < x->tasks.len; i++) {
        xc_task *t = x->tasks.items[i];
        if (t->dyn_json && !strcmp(t->def->ref, ref) && json_object_equal(t->dyn_json, dyn)) {
            *out = t->def;
            return 0;
        }
    }
    owner_ref = get_str(td, "owner");
    if (owner_ref && !(owner = wu_map_get(x->def->by_ref, owner_ref)))
        for (i = 0; i < x->dyn.tasks.len && !owner; i++) {
            def_task *d = x->dyn.tasks.items[i];
            if (!strcmp(d->ref, owner_ref)) owner = d;
        }
    if (!owner)
        return wu_err(err, WEFT_EINVAL, "dynamic task '%s' has no owner '%s'", ref,
                      owner_ref ? owner_ref : "(none)");
    /* a private copy: the document is freed after loading */
    {
        json_object *copy = NULL;
        int rc;
        if (json_object_deep_copy(dyn, &copy, NULL))
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        rc = def_compile_dynamic(env, x->def, owner, copy, &x->dyn, out, err);
        json_object_put(copy); /* x->dyn keeps its own reference */
        return rc;
    }
}

static int restore_task(json_object *td, xc_exec *x, const def_env *env, weft_error *err)
{
    def_task *d;
    xc_task *t;
    weft_task_status st;
    int64_t scope = get_int(td, "scope"), flags = get_int(td, "flags");
    const char *id = get_str(td, "id"), *ref = get_str(td, "ref"), *domain;
    int rc, oom = 0;

    if (!id || !ref) return wu_err(err, WEFT_EINVAL, "task %zu has no id or ref", x->tasks.len + 1);
    if ((rc = task_def(td, x, env, &d, err))) return rc;
    if (task_status_parse(get_str(td, "status"), &st))
        return wu_err(err, WEFT_EINVAL, "task '%s' has a bad status", ref);
    if (scope < 0 || (size_t)scope >= x->scopes.len)
        return wu_err(err, WEFT_EINVAL, "task '%s' has a bad scope", ref);
    t = xc_add_task(x, d, (int)scope, (int)get_int(td, "iteration"));
    if (!t) return wu_err(err, WEFT_ENOMEM, "out of memory");
    /* xc_add_task made a fresh id and ref: take the stored ones */
    snprintf(t->id, sizeof t->id, "%s", id);
    if (strcmp(t->ref, ref)) {
        char *r = strdup(ref);
        if (!r || wu_map_put(x->by_ref, r, t)) {
            free(r);
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        }
        free(t->ref);
        t->ref = r;
    }
    if (json_object_object_get_ex(td, "dyn", NULL))
        t->dyn_json = json_object_get(d->json); /* a dynamic def is its own node */
    t->status = st;
    if (xc_task_terminal(st)) x->active--;
    oom |= get_payload(td, "input", "inputRef", &t->input, &t->input_ref);
    oom |= get_payload(td, "output", "outputRef", &t->output, &t->output_ref);
    oom |= dup_to(&t->reason, get_str(td, "reason"));
    t->retry_count = (int)get_int(td, "retryCount");
    t->poll_count = (int)get_int(td, "pollCount");
    t->scheduled_ms = get_int(td, "scheduledTime");
    t->started_ms = get_int(td, "startTime");
    t->ended_ms = get_int(td, "endTime");
    t->updated_ms = get_int(td, "updateTime");
    t->callback_ms = get_int(td, "callbackTime");
    oom |= dup_to(&t->child_id, get_str(td, "subWorkflowId"));
    oom |= dup_to(&t->worker_id, get_str(td, "workerId"));
    /* a domain read back must name a queue: a non-empty string */
    if ((domain = get_str(td, "domain")) && *domain) oom |= xc_task_set_domain(t, domain);
    t->followed = (flags & 1) != 0;
    t->spawned = (flags & 2) != 0;
    t->retried = (flags & 4) != 0;
    t->queued = (flags & 8) != 0;
    t->fresh = (flags & 16) != 0;
    t->sized = (flags & 32) != 0;
    t->no_response = (flags & 64) != 0;
    if (t->fresh) x->fresh++;
    if (!t->input && !t->input_ref && !(t->input = json_object_new_object())) oom = 1;
    return oom ? wu_err(err, WEFT_ENOMEM, "out of memory") : 0;
}

int cd_from_doc(json_object *doc, def_workflow *def, const def_env *env, xc_exec **out,
                weft_error *err)
{
    const char *id = get_str(doc, "id");
    json_object *arr, *v;
    xc_exec *x;
    size_t i, n;
    int rc, oom = 0;

    *out = NULL;
    if (!id) return wu_err(err, WEFT_EINVAL, "stored workflow has no id");
    if ((rc = xc_new(def, NULL, id, &x, err))) return rc;
    if (xc_wf_status_parse(get_str(doc, "status") ? get_str(doc, "status") : "", &x->status)) {
        rc = wu_err(err, WEFT_EINVAL, "bad status");
        goto fail;
    }
    json_object_put(x->input);
    oom |= get_payload(doc, "input", "inputRef", &x->input, &x->input_ref);
    if (!x->input && !x->input_ref && !(x->input = json_object_new_object())) oom = 1;
    oom |= get_payload(doc, "output", "outputRef", &x->output, &x->output_ref);
    if ((v = get_obj(doc, "variables"))) {
        json_object_put(x->variables);
        x->variables = v;
    }
    oom |= dup_to(&x->reason, get_str(doc, "reason"));
    oom |= dup_to(&x->correlation_id, get_str(doc, "correlationId"));
    oom |= dup_to(&x->parent_id, get_str(doc, "parentWorkflowId"));
    oom |= dup_to(&x->parent_task_id, get_str(doc, "parentWorkflowTaskId"));
    x->depth = (int)get_int(doc, "depth");
    x->priority = (int)get_int(doc, "priority");
    x->task_to_domain = get_obj(doc, "taskToDomain");
    if (x->task_to_domain && !json_object_is_type(x->task_to_domain, json_type_object)) {
        json_object_put(x->task_to_domain); /* not a map: none */
        x->task_to_domain = NULL;
    }
    if (x->priority < 0 || x->priority > 99) x->priority = 0;
    oom |= dup_to(&x->failed_task_id, get_str(doc, "failedTaskId"));
    if (oom) {
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        goto fail;
    }
    x->created_ms = get_int(doc, "createTime");
    x->updated_ms = get_int(doc, "updateTime");
    x->ended_ms = get_int(doc, "endTime");
    x->root_done = get_int(doc, "rootDone") != 0;
    if (json_object_object_get_ex(doc, "scopes", &arr) &&
        json_object_is_type(arr, json_type_array)) {
        n = json_object_array_length(arr);
        for (i = 0; i < n; i++) {
            json_object *pair = json_object_array_get_idx(arr, i);
            int parent =
                json_object_is_type(pair, json_type_array) && json_object_array_length(pair) == 2
                    ? json_object_get_int(json_object_array_get_idx(pair, 0))
                    : -1;
            if (parent < 0 || (size_t)parent >= x->scopes.len) {
                rc = wu_err(err, WEFT_EINVAL, "bad loop scope %zu", i + 1);
                goto fail;
            }
            if (xc_new_scope(x, parent, json_object_get_int(json_object_array_get_idx(pair, 1))) <
                0) {
                rc = wu_err(err, WEFT_ENOMEM, "out of memory");
                goto fail;
            }
        }
    }
    if (json_object_object_get_ex(doc, "tasks", &arr) &&
        json_object_is_type(arr, json_type_array)) {
        n = json_object_array_length(arr);
        for (i = 0; i < n; i++)
            if ((rc = restore_task(json_object_array_get_idx(arr, i), x, env, err))) goto fail;
    }
    if (json_object_object_get_ex(doc, "ended", &arr) &&
        json_object_is_type(arr, json_type_array)) {
        n = json_object_array_length(arr);
        for (i = 0; i < n; i++) {
            int k = json_object_get_int(json_object_array_get_idx(arr, i));
            if (k < 0 || (size_t)k >= x->tasks.len) {
                rc = wu_err(err, WEFT_EINVAL, "bad ended task %d", k);
                goto fail;
            }
            if (wu_vec_push(&x->ended, x->tasks.items[k])) {
                rc = wu_err(err, WEFT_ENOMEM, "out of memory");
                goto fail;
            }
        }
    }
    *out = x;
    return 0;
fail:
    if (rc == WEFT_ENOMEM)
        wu_err_prefix(err, "workflow %s: ", id);
    else
        wu_err_prefix(err, "workflow %s: stored state is corrupt: ", id);
    xc_free(x);
    return rc ? rc : WEFT_EINVAL;
}

void cd_def_key(const char *def_json, char out[17])
{
    /* FNV-1a 64: a cache key, not a security boundary */
    uint64_t h = 14695981039346656037ull;
    const unsigned char *p = (const unsigned char *)def_json;
    while (*p)
        h = (h ^ *p++) * 1099511628211ull;
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

#include "core/decider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- expression lookups against an execution ---- */

typedef struct lk {
    const xc_exec *x;
    wu_vec scratch; /* values made for this evaluation */
    int oom;        /* a value could not be made: the result is not to be used */
} lk;

/* o (made for this evaluation; NULL = it could not be made) kept until the end. */
static json_object *keep(lk *l, json_object *o)
{
    if (!o || wu_vec_push(&l->scratch, o)) {
        json_object_put(o);
        l->oom = 1;
        return NULL;
    }
    return o;
}

static json_object *str_or_null(lk *l, const char *s)
{
    return s ? keep(l, json_object_new_string(s)) : NULL;
}

static json_object *lookup_workflow(lk *l, const char *field)
{
    const xc_exec *x = l->x;
    if (!field) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "workflowId", json_object_get(x->j_id));
        json_object_object_add(o, "input", json_object_get(x->input));
        json_object_object_add(o, "variables", json_object_get(x->variables));
        return keep(l, o);
    }
    if (!strcmp(field, "input")) return x->input;
    if (!strcmp(field, "variables")) return x->variables;
    if (!strcmp(field, "output")) return x->output;
    if (!strcmp(field, "workflowId")) return x->j_id;
    if (!strcmp(field, "correlationId")) return str_or_null(l, x->correlation_id);
    if (!strcmp(field, "status")) return str_or_null(l, weft_wf_status_name(x->status));
    if (!strcmp(field, "workflowType")) return str_or_null(l, x->def->name);
    if (!strcmp(field, "version")) return keep(l, json_object_new_int(x->def->version));
    if (!strcmp(field, "parentWorkflowId")) return str_or_null(l, x->parent_id);
    if (!strcmp(field, "parentWorkflowTaskId")) return str_or_null(l, x->parent_task_id);
    if (!strcmp(field, "createTime")) return keep(l, json_object_new_int64(x->created_ms));
    if (!strcmp(field, "reasonForIncompletion")) return str_or_null(l, x->reason);
    return NULL;
}

static json_object *lookup_task(lk *l, const xc_task *t, const char *field)
{
    if (!field) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "input", json_object_get(t->input));
        json_object_object_add(o, "output", json_object_get(t->output));
        json_object_object_add(o, "status",
                               json_object_new_string(weft_task_status_name(t->status)));
        return keep(l, o);
    }
    if (!strcmp(field, "output")) return t->output;
    if (!strcmp(field, "input")) return t->input;
    if (!strcmp(field, "status")) return str_or_null(l, weft_task_status_name(t->status));
    if (!strcmp(field, "taskId")) return str_or_null(l, t->id);
    if (!strcmp(field, "referenceTaskName")) return str_or_null(l, t->ref);
    if (!strcmp(field, "taskType")) return str_or_null(l, t->def->type_name);
    if (!strcmp(field, "reasonForIncompletion")) return str_or_null(l, t->reason);
    if (!strcmp(field, "retryCount")) return keep(l, json_object_new_int(t->retry_count));
    if (!strcmp(field, "iteration")) return keep(l, json_object_new_int(t->iteration));
    if (!strcmp(field, "scheduledTime")) return keep(l, json_object_new_int64(t->scheduled_ms));
    if (!strcmp(field, "startTime")) return keep(l, json_object_new_int64(t->started_ms));
    if (!strcmp(field, "endTime")) return keep(l, json_object_new_int64(t->ended_ms));
    return NULL;
}

static json_object *lookup(void *ud, const char *root, const char *field)
{
    lk *l = ud;
    const xc_task *t;
    if (!strcmp(root, "workflow")) return lookup_workflow(l, field);
    if (!strcmp(root, "secrets")) {
        /* Secrets are filled in only when a task executes (host_ctx_secrets):
         * what is resolved and stored here is the placeholder itself. */
        char ph[300];
        if (!field || snprintf(ph, sizeof ph, "${secrets.%s}", field) >= (int)sizeof ph)
            return NULL;
        return str_or_null(l, ph);
    }
    t = xc_find_ref(l->x, root);
    return t ? lookup_task(l, t, field) : NULL;
}

int dec_resolve_checked(const xc_exec *x, const ex_tmpl *t, json_object **out)
{
    lk l = {x, {0}, 0};
    size_t i;
    int rc;
    *out = NULL;
    if (!t) return 0;
    rc = ex_eval_checked(t, lookup, &l, out);
    for (i = 0; i < l.scratch.len; i++)
        json_object_put(l.scratch.items[i]);
    wu_vec_free(&l.scratch);
    if (rc == 0 && l.oom) {
        /* a lookup could not make its value: it read as missing (null) */
        json_object_put(*out);
        *out = NULL;
        rc = WEFT_ENOMEM;
    }
    return rc;
}

json_object *dec_resolve(const xc_exec *x, const ex_tmpl *t)
{
    json_object *r = NULL;
    dec_resolve_checked(x, t, &r);
    return r;
}

/* ---- actions ---- */

/*
 * Room for n more actions. A change that asks for an action makes the room
 * first and fails the workflow when it cannot (fail_oom), so that no
 * action is ever lost: the embedded engine has no sweeper to find a task
 * marked queued and never queued. 0 or WEFT_ENOMEM.
 */
static int room(dec_out *o, size_t n)
{
    return wu_grow(&o->a, &o->cap, o->n, n, sizeof *o->a);
}

static void push(dec_out *o, dec_kind kind, xc_task *t, int64_t at)
{
    if (room(o, 1)) return; /* only where no room was made: the sweeper finds it */
    o->a[o->n].kind = kind;
    o->a[o->n].task = t;
    o->a[o->n].at = at;
    o->n++;
}

void dec_out_free(dec_out *o)
{
    free(o->a);
    o->a = NULL;
    o->n = o->cap = 0;
}

static void changed(const dec_env *e, const xc_exec *x, const xc_task *t)
{
    if (e->on_change) e->on_change(e->ud, x, t);
}

static void set_status(const dec_env *e, xc_exec *x, xc_task *t, weft_task_status s)
{
    int64_t now = e->now();
    int was_active = !xc_task_terminal(t->status);
    t->status = s;
    t->sized = 0; /* its output may have changed: check the payload limits again */
    t->updated_ms = now;
    if (s == WEFT_TASK_IN_PROGRESS && !t->started_ms) t->started_ms = now;
    if (xc_task_terminal(s)) {
        t->ended_ms = now;
        t->queued = 0;
        if (was_active) x->active--;
        /* room was made when t was created (xc_add_task) */
        if (!t->followed) wu_vec_push(&x->ended, t);
    }
    x->updated_ms = now;
    changed(e, x, t);
}

/* A task was canceled (or timed out): what that asks of the world. */
static void cancel(dec_out *o, xc_task *t)
{
    if (!t->def->type->map || t->child_id) push(o, DEC_CANCEL, t, 0);
    if (t->child_id) push(o, DEC_TERMINATE_CHILD, t, 0);
}

void dec_end(const dec_env *e, xc_exec *x, weft_wf_status status, const char *reason, dec_out *o)
{
    size_t i;
    if (xc_wf_terminal(x->status)) return;
    /* its actions: a cancel and a terminate per task, the parent, the
     * failure workflow, the end (when room cannot be made, each push
     * tries again) */
    room(o, 2 * (size_t)x->active + 3);
    x->status = status;
    /* a reason that cannot be kept says at least why */
    if (reason && xc_set_reason(&x->reason, "%s", reason))
        xc_set_reason(&x->reason, "out of memory");
    x->ended_ms = x->updated_ms = e->now();
    for (i = 0; i < x->tasks.len; i++) {
        xc_task *t = x->tasks.items[i];
        if (!xc_task_terminal(t->status)) {
            set_status(e, x, t, WEFT_TASK_CANCELED);
            t->followed = 1;
            cancel(o, t);
        }
    }
    if (!x->output) x->output = json_object_new_object();
    changed(e, x, NULL);
    if (x->parent_id && x->parent_task_id) push(o, DEC_NOTIFY_PARENT, NULL, 0);
    if ((status == WEFT_WF_FAILED || status == WEFT_WF_TIMED_OUT) && x->def->failure_workflow)
        push(o, DEC_START_FAILURE, NULL, 0);
    push(o, DEC_WF_ENDED, NULL, 0);
}

static void fail_oom(const dec_env *e, xc_exec *x, dec_out *o)
{
    dec_end(e, x, WEFT_WF_FAILED, "out of memory while deciding", o);
}

/* ---- scheduling ---- */

static void remap(const dec_env *e, xc_exec *x, xc_task *t, dec_out *o);

/* t's input resolved: 0, or WEFT_ENOMEM (t->input NULL): a value could
 * not be made, and it must not be taken for null or {}. */
static int resolve_input(const xc_exec *x, xc_task *t)
{
    if (!dec_resolve_checked(x, t->def->input, &t->input) &&
        !json_object_is_type(t->input, json_type_object)) {
        json_object_put(t->input);
        t->input = json_object_new_object();
    }
    return t->input ? 0 : WEFT_ENOMEM;
}

/* A new instance of d in scope, its input resolved; dispatch() sends it on. */
static xc_task *create(const dec_env *e, xc_exec *x, def_task *d, int scope, json_object *dyn,
                       int retry_count, dec_out *o)
{
    xc_scope *s = x->scopes.items[scope];
    xc_task *t = xc_add_task(x, d, scope, s->iteration);
    if (!t) {
        fail_oom(e, x, o);
        return NULL;
    }
    t->retry_count = retry_count;
    if (dyn) t->dyn_json = json_object_get(dyn);
    if (resolve_input(x, t)) {
        /* never run with a null where a value should be: failed, followed
         * (retried, or the workflow fails) like any failed task */
        t->input = json_object_new_object();
        if (!t->input || xc_set_reason(&t->reason, "its input could not be built: out of memory "
                                                   "while resolving its expressions")) {
            fail_oom(e, x, o);
            return NULL;
        }
        set_status(e, x, t, WEFT_TASK_FAILED);
        return t;
    }
    t->fresh = 1;
    x->fresh++;
    changed(e, x, t);
    return t;
}

/*
 * The domain a queued task goes to, by its workflow's taskToDomain: its
 * name's entry, else "*" for the tasks workers poll (external types; weftd's
 * own, LAMBDA, WAIT ..., only by name), as in Conductor. A list
 * "d1,d2,..." names the first whose queue a worker polled lately, else the
 * last one; NO_DOMAIN, honoured as the last entry, stands for no domain. A
 * domain whose queue name would be too long for the store is passed over
 * (op_start refuses those it can see).
 */
static int resolve_domain(const dec_env *e, const xc_exec *x, xc_task *t)
{
    json_object *v;
    const char *p, *s, *pick = NULL;
    size_t k, npick = 0, qlen = strlen(t->def->queue);
    int many;
    char d[XC_DOMAIN_MAX + 1];
    if (!x->task_to_domain || t->domain) return 0;
    if (!json_object_object_get_ex(x->task_to_domain, t->def->name, &v) &&
        (!(t->def->type->flags & WEFT_TASK_EXTERNAL) ||
         !json_object_object_get_ex(x->task_to_domain, "*", &v)))
        return 0;
    if (!json_object_is_type(v, json_type_string)) return 0;
    p = json_object_get_string(v);
    many = strchr(p, ',') != NULL;
    while (wu_list_next(&p, &s, &k)) {
        if (k && k <= XC_DOMAIN_MAX && k + 1 + qlen < XC_QUEUE_MAX) {
            int last = !p;
            memcpy(d, s, k);
            d[k] = 0;
            if (!strcasecmp(d, "NO_DOMAIN")) {
                if (last) { /* no domain at all */
                    pick = NULL;
                    break;
                }
            } else {
                pick = s;
                npick = k;
                if (!many || last ||
                    (e->domain_active && e->domain_active(e->domain_ud, t->def->queue, d)))
                    break;
            }
        }
    }
    if (!pick) return 0;
    memcpy(d, pick, npick);
    d[npick] = 0;
    return xc_task_set_domain(t, d);
}

/* Control flow is mapped now (or at `delay`); other types go to their queue. */
static void dispatch(const dec_env *e, xc_exec *x, xc_task *t, int64_t delay, dec_out *o)
{
    if (t->fresh) {
        t->fresh = 0;
        x->fresh--;
    }
    if (t->def->type->map) {
        if (delay > 0) {
            t->callback_ms = e->now() + delay;
            push(o, DEC_TIMER, t, t->callback_ms);
        } else {
            remap(e, x, t, o);
        }
    } else if (resolve_domain(e, x, t)) {
        fail_oom(e, x, o); /* not queued where no worker of its domain would look */
    } else {
        t->queued = 1;
        t->callback_ms = e->now() + delay;
        push(o, DEC_ENQUEUE, t, t->callback_ms);
    }
}

static xc_task *schedule(const dec_env *e, xc_exec *x, def_task *d, int scope, json_object *dyn,
                         int retry_count, int64_t delay, dec_out *o)
{
    xc_task *t;
    if (room(o, 1)) { /* its ENQUEUE or TIMER */
        fail_oom(e, x, o);
        return NULL;
    }
    t = create(e, x, d, scope, dyn, retry_count, o);
    /* startDelay holds back a first attempt; a retry waits its retry delay */
    if (t && retry_count == 0 && t->def->start_delay_ms > delay) delay = t->def->start_delay_ms;
    if (t && !xc_task_terminal(t->status)) dispatch(e, x, t, delay, o);
    return t;
}

/* Take a result's workflow ending (TERMINATE). */
static void take_end(const dec_env *e, xc_exec *x, weft_result *r, dec_out *o)
{
    if (r->end_workflow == WEFT_WF_RUNNING) return;
    if (r->end_output) {
        json_object_put(x->output);
        x->output = r->end_output;
        r->end_output = NULL;
    }
    dec_end(e, x, r->end_workflow, r->reason[0] ? r->reason : NULL, o);
}

/* A map's result within the limits (def_limits): tasks scheduled at once
 * (a dynamic fork's width), loop iterations when the loop sets no cap of
 * its own. 0, or WEFT_ELIMIT with the reason in r. */
static int check_map(const dec_env *e, const xc_task *t, weft_result *r, size_t n)
{
    const def_limits *lim = def_limits_of(e->defs);
    if (n > (size_t)lim->max_fork_width) {
        snprintf(r->reason, sizeof r->reason,
                 "'%s' would start %zu tasks at once, over the limit of %d (max_fork_width)",
                 t->ref, n, lim->max_fork_width);
        return WEFT_ELIMIT;
    }
    if (r->iteration > lim->max_loop_iterations &&
        !json_object_object_get_ex(t->def->json, "maxIterations", NULL)) {
        snprintf(r->reason, sizeof r->reason,
                 "'%s' would run iteration %d, over the limit of %d (max_loop_iterations; "
                 "set maxIterations to allow more)",
                 t->ref, r->iteration, lim->max_loop_iterations);
        return WEFT_ELIMIT;
    }
    return 0;
}

static void remap(const dec_env *e, xc_exec *x, xc_task *t, dec_out *o)
{
    json_object *out_tasks;
    weft_result r;
    weft_ctx c;
    weft_error err = {0};
    unsigned char *dynamic = NULL;
    int rc, child_scope = t->scope;
    size_t i, n;

    if (xc_task_terminal(t->status) || xc_wf_terminal(x->status)) return;
    out_tasks = json_object_new_array();
    if (!out_tasks) {
        fail_oom(e, x, o);
        return;
    }
    host_result_init(&r);
    t->poll_count++;
    host_ctx_init(&c, e->svc, x, t);
    rc = t->def->type->map(&c, host_task_json(t), out_tasks, &r);
    if (c.oom && rc == 0) {
        rc = WEFT_ENOMEM;
        snprintf(r.reason, sizeof r.reason, "out of memory while its map ran (a lookup)");
    }
    host_ctx_done(&c);
    if (rc == 0 && r.status != WEFT_TASK_IN_PROGRESS && r.status != WEFT_TASK_COMPLETED &&
        r.status != WEFT_TASK_FAILED && r.status != WEFT_TASK_FAILED_WITH_TERMINAL_ERROR) {
        rc = WEFT_EINVAL;
        snprintf(r.reason, sizeof r.reason, "%s map reported no valid status", t->def->type_name);
    }
    if (rc == 0) rc = check_map(e, t, &r, json_object_array_length(out_tasks));
    if (rc == 0 && r.iteration > 0) {
        child_scope = xc_new_scope(x, t->scope, r.iteration);
        if (child_scope < 0) {
            host_result_clear(&r);
            json_object_put(out_tasks);
            fail_oom(e, x, o);
            return;
        }
        t->iteration = r.iteration;
    }
    if (rc != 0) {
        if (xc_set_reason(&t->reason, "%s", r.reason[0] ? r.reason : "map failed"))
            fail_oom(e, x, o);
        else
            set_status(e, x, t, WEFT_TASK_FAILED);
        goto done;
    }
    json_object_put(t->output);
    t->output = r.output;
    r.output = NULL;
    t->spawned = 0;
    n = json_object_array_length(out_tasks);
    dynamic = calloc(n ? n : 1, 1);
    if (!dynamic) {
        host_result_clear(&r);
        json_object_put(out_tasks);
        fail_oom(e, x, o);
        return;
    }
    /* Compile dynamic nodes first, so a bad one fails the task before any runs. */
    for (i = 0; i < n; i++) {
        json_object *node = json_object_array_get_idx(out_tasks, i);
        def_task *d = def_of_json(node);
        if (d) continue;
        if ((rc = def_compile_dynamic(e->defs, x->def, t->def, node, &x->dyn, &d, &err))) {
            if (xc_set_reason(&t->reason, "%s", err.msg))
                fail_oom(e, x, o);
            else
                set_status(e, x, t, WEFT_TASK_FAILED);
            goto done;
        }
        dynamic[i] = 1;
    }
    if ((r.status == WEFT_TASK_FAILED || r.status == WEFT_TASK_FAILED_WITH_TERMINAL_ERROR) &&
        xc_set_reason(&t->reason, "%s", r.reason[0] ? r.reason : "failed")) {
        fail_oom(e, x, o);
        goto done;
    }
    if (t->status != r.status) set_status(e, x, t, r.status);
    if (xc_task_terminal(t->status) && !xc_task_ok(t->status))
        n = 0; /* a failed map schedules nothing */
    for (i = 0; i < n && !xc_wf_terminal(x->status); i++) {
        json_object *node = json_object_array_get_idx(out_tasks, i);
        t->spawned = 1;
        schedule(e, x, def_of_json(node), child_scope, dynamic[i] ? node : NULL, 0, 0, o);
    }
    if (t->status == WEFT_TASK_IN_PROGRESS && r.callback_after_ms >= 0) {
        if (room(o, 1)) {
            fail_oom(e, x, o);
        } else {
            t->callback_ms = e->now() + r.callback_after_ms;
            push(o, DEC_TIMER, t, t->callback_ms);
        }
    }
    take_end(e, x, &r, o);
done:
    free(dynamic);
    host_result_clear(&r);
    json_object_put(out_tasks);
}

void dec_enqueue(const dec_env *e, xc_exec *x, xc_task *t, int64_t at, dec_out *o)
{
    if (room(o, 1) || resolve_domain(e, x, t)) return; /* the sweeper tries again */
    t->queued = 1;
    t->callback_ms = at;
    push(o, DEC_ENQUEUE, t, at);
}

void dec_unqueue(const dec_env *e, xc_exec *x, xc_task *t, dec_out *o)
{
    if (!t->def->type->map && !t->child_id) push(o, DEC_UNQUEUE, t, 0);
}

void dec_start(const dec_env *e, xc_exec *x, xc_task *t)
{
    t->poll_count++;
    t->queued = 0;
    if (t->status != WEFT_TASK_IN_PROGRESS) set_status(e, x, t, WEFT_TASK_IN_PROGRESS);
}

void dec_remap(const dec_env *e, xc_exec *x, xc_task *t, dec_out *o)
{
    remap(e, x, t, o);
}

/* Reach def d in scope: schedule it, or re-evaluate it if it already runs there. */
static void reach(const dec_env *e, xc_exec *x, def_task *d, int scope, dec_out *o)
{
    xc_task *ex = xc_latest(x, d);
    if (ex && ex->scope == scope) {
        if (!xc_task_terminal(ex->status) && d->type->map) remap(e, x, ex, o);
        return;
    }
    schedule(e, x, d, scope, NULL, 0, 0, o);
}

/* What comes after def d finished in scope: its next sibling, or walk up. */
static void next_after(const dec_env *e, xc_exec *x, def_task *d, int scope, dec_out *o)
{
    for (;;) {
        def_task *nx = def_next(d), *owner;
        xc_task *oi;
        if (nx) {
            reach(e, x, nx, scope, o);
            return;
        }
        owner = d->list->owner;
        if (!owner) {
            x->root_done = 1;
            return;
        }
        oi = xc_latest(x, owner);
        if (!oi) return;
        if (!xc_task_terminal(oi->status)) {
            if (owner->type->map) remap(e, x, oi, o); /* a loop: next iteration or done */
            return;
        }
        if (!xc_task_ok(oi->status)) return;
        d = owner;
        scope = oi->scope;
    }
}

static void follow(const dec_env *e, xc_exec *x, xc_task *t, dec_out *o)
{
    char reason[WEFT_ERROR_MAX], head[WEFT_ERROR_MAX / 2];
    switch (t->status) {
    case WEFT_TASK_COMPLETED:
    case WEFT_TASK_COMPLETED_WITH_ERRORS:
    case WEFT_TASK_SKIPPED:
        if (!t->spawned) next_after(e, x, t->def, t->scope, o);
        return;
    case WEFT_TASK_FAILED:
    case WEFT_TASK_TIMED_OUT:
    case WEFT_TASK_FAILED_WITH_TERMINAL_ERROR:
        if (t->status != WEFT_TASK_FAILED_WITH_TERMINAL_ERROR &&
            /* a worker that stopped answering is retried whatever the
             * policy, as in Conductor; a task that ran too long only on RETRY */
            (t->status != WEFT_TASK_TIMED_OUT || t->no_response ||
             t->def->timeout_policy == DEF_TIMEOUT_RETRY) &&
            t->retry_count < t->def->retry_count) {
            t->retried = 1;
            schedule(e, x, t->def, t->scope, t->dyn_json, t->retry_count + 1,
                     def_retry_delay(t->def, t->retry_count + 1), o);
            return;
        }
        if (t->def->optional) {
            set_status(e, x, t, WEFT_TASK_COMPLETED_WITH_ERRORS);
            next_after(e, x, t->def, t->scope, o);
            return;
        }
        free(x->failed_task_id);
        if (!(x->failed_task_id = strdup(t->id))) {
            fail_oom(e, x, o);
            return;
        }
        snprintf(head, sizeof head, "task '%s' (%s) %s: ", t->ref, t->def->type_name,
                 t->status == WEFT_TASK_TIMED_OUT ? "timed out" : "failed");
        wu_join_tail(reason, sizeof reason, head, t->reason ? t->reason : "no reason given");
        dec_end(e, x, t->status == WEFT_TASK_TIMED_OUT ? WEFT_WF_TIMED_OUT : WEFT_WF_FAILED, reason,
                o);
        return;
    default:
        return;
    }
}

static void complete_workflow(const dec_env *e, xc_exec *x, dec_out *o)
{
    json_object *out;
    if (x->def->output) {
        if (dec_resolve_checked(x, x->def->output, &out)) {
            dec_end(e, x, WEFT_WF_FAILED,
                    "the workflow's output could not be built: out of memory while resolving "
                    "its expressions",
                    o);
            return;
        }
    } else {
        def_task *last = x->def->root.tasks[x->def->root.n - 1];
        xc_task *lt = xc_latest(x, last);
        out = lt && lt->output ? json_object_get(lt->output) : NULL;
    }
    if (!json_object_is_type(out, json_type_object)) {
        /* the output of a workflow is an object: wrap anything else */
        json_object *w = json_object_new_object();
        if (!w || (out && json_object_object_add(w, "result", out))) {
            json_object_put(w);
            json_object_put(out);
            fail_oom(e, x, o);
            return;
        }
        out = w;
    }
    json_object_put(x->output);
    x->output = out;
    dec_end(e, x, WEFT_WF_COMPLETED, NULL, o);
}

int dec_can_start(const xc_exec *x)
{
    const def_list *root = &x->def->root;
    return root->n > 0 && !root->tasks[0]->type->map;
}

int dec_decide(const dec_env *e, xc_exec *x, dec_out *o)
{
    size_t i;
    if (x->status != WEFT_WF_RUNNING) return 0;
    if (x->tasks.len == 0) schedule(e, x, x->def->root.tasks[0], 0, NULL, 0, 0, o);
    /* instances made where no plugins run (a client's retry) go out now */
    for (i = 0; x->fresh > 0 && i < x->tasks.len && x->status == WEFT_WF_RUNNING; i++) {
        xc_task *t = x->tasks.items[i];
        if (!t->fresh || xc_task_terminal(t->status)) continue;
        if (room(o, 1))
            fail_oom(e, x, o);
        else
            dispatch(e, x, t, 0, o);
    }
    /* follow each task that ended, in the order they ended; following one
     * may end others (inline tasks), which join the queue */
    while (x->status == WEFT_WF_RUNNING && x->ended_head < x->ended.len) {
        xc_task *t = x->ended.items[x->ended_head++];
        if (t->followed || !xc_task_terminal(t->status)) continue;
        t->followed = 1;
        follow(e, x, t, o);
    }
    if (x->ended_head == x->ended.len) x->ended.len = x->ended_head = 0;
    if (x->status == WEFT_WF_RUNNING && x->root_done && x->active == 0) complete_workflow(e, x, o);
    return 0;
}

void dec_apply(const dec_env *e, xc_exec *x, xc_task *t, int rc, weft_result *r, dec_out *o)
{
    if (xc_task_terminal(t->status) || xc_wf_terminal(x->status))
        return; /* canceled or timed out meanwhile: the late result is dropped */
    if (r->output) {
        json_object_put(t->output);
        t->output = r->output;
        r->output = NULL;
    }
    if (rc != 0 && r->status != WEFT_TASK_FAILED_WITH_TERMINAL_ERROR) r->status = WEFT_TASK_FAILED;
    switch (r->status) {
    case WEFT_TASK_COMPLETED:
    case WEFT_TASK_COMPLETED_WITH_ERRORS:
        set_status(e, x, t, WEFT_TASK_COMPLETED);
        break;
    case WEFT_TASK_FAILED:
    case WEFT_TASK_FAILED_WITH_TERMINAL_ERROR:
        if (xc_set_reason(&t->reason, "%s",
                          r->reason[0] ? r->reason : "failed (no reason given)")) {
            fail_oom(e, x, o);
            return;
        }
        set_status(e, x, t, r->status);
        break;
    case WEFT_TASK_IN_PROGRESS:
        if (r->callback_after_ms >= 0 && room(o, 1)) {
            fail_oom(e, x, o);
            return;
        }
        if (t->status != WEFT_TASK_IN_PROGRESS) set_status(e, x, t, WEFT_TASK_IN_PROGRESS);
        if (r->callback_after_ms >= 0) {
            t->callback_ms = e->now() + r->callback_after_ms;
            t->queued = 1;
            push(o, DEC_ENQUEUE, t, t->callback_ms);
        } else {
            t->queued = 0;
        }
        break;
    default:
        if (xc_set_reason(&t->reason, "%s execute reported no status", t->def->type_name)) {
            fail_oom(e, x, o);
            return;
        }
        set_status(e, x, t, WEFT_TASK_FAILED);
        break;
    }
    take_end(e, x, r, o);
}

int dec_complete(const dec_env *e, xc_exec *x, xc_task *t, weft_task_status status,
                 json_object *output, const char *reason, dec_out *o, weft_error *err)
{
    weft_result r;
    if (xc_task_terminal(t->status))
        return wu_err(err, WEFT_ESTATE, "task %s (%s) is already %s", t->id, t->ref,
                      weft_task_status_name(t->status));
    host_result_init(&r);
    r.status = status;
    r.output = output ? json_object_get(output) : NULL;
    r.callback_after_ms = -1;
    if (reason) snprintf(r.reason, sizeof r.reason, "%s", reason);
    dec_apply(e, x, t, 0, &r, o);
    host_result_clear(&r);
    return 0;
}

void dec_timeouts(const dec_env *e, xc_exec *x, int64_t now, int64_t *next, dec_out *o)
{
    size_t i;
    int64_t soonest = 0;
#define SOONER(d) (soonest = (!soonest || (d) < soonest) ? (d) : soonest)
    *next = 0;
    if (x->status != WEFT_WF_RUNNING) return;
    if (x->def->timeout_ms > 0 && x->def->timeout_fails) {
        int64_t d = x->created_ms + x->def->timeout_ms;
        if (now >= d) {
            char reason[128];
            snprintf(reason, sizeof reason, "workflow timed out after %.3gs",
                     (double)x->def->timeout_ms / 1000.0);
            dec_end(e, x, WEFT_WF_TIMED_OUT, reason, o);
            return;
        }
        SOONER(d);
    }
    for (i = 0; x->timed && i < x->tasks.len; i++) {
        xc_task *t = x->tasks.items[i];
        const def_task *dt = t->def;
        int64_t d;
        const char *why = NULL;
        if (xc_task_terminal(t->status) || !t->started_ms || dt->type->map ||
            dt->timeout_policy == DEF_TIMEOUT_ALERT_ONLY)
            continue;
        /* responseTimeout: no word from the worker since its last update */
        if (dt->response_timeout_ms && t->status == WEFT_TASK_IN_PROGRESS) {
            d = t->updated_ms + dt->response_timeout_ms;
            if (now >= d)
                why = "response timeout";
            else
                SOONER(d);
        }
        if (!why && dt->timeout_ms) {
            d = t->started_ms + dt->timeout_ms;
            if (now >= d)
                why = "timeout";
            else
                SOONER(d);
        }
        if (!why) continue;
        /* out of memory for its cancels or its reason: it times out at the
         * next look, now */
        if (room(o, 2) ||
            (strcmp(why, "timeout")
                 ? xc_set_reason(&t->reason,
                                 "no response from the worker for %.3gs (responseTimeout)",
                                 (double)dt->response_timeout_ms / 1000.0)
                 : xc_set_reason(&t->reason, "task timed out after %.3gs",
                                 (double)dt->timeout_ms / 1000.0))) {
            SOONER(now);
            break;
        }
        if (strcmp(why, "timeout")) t->no_response = 1;
        cancel(o, t);
        set_status(e, x, t, WEFT_TASK_TIMED_OUT);
    }
#undef SOONER
    *next = soonest;
}

static int wf_state(weft_error *err, const xc_exec *x, const char *what, const char *allowed)
{
    return wu_err(err, WEFT_ESTATE, "workflow %s is %s: only %s workflows can be %s", x->id,
                  weft_wf_status_name(x->status), allowed, what);
}

int dec_pause(const dec_env *e, xc_exec *x, weft_error *err)
{
    if (x->status != WEFT_WF_RUNNING) return wf_state(err, x, "paused", "RUNNING");
    x->status = WEFT_WF_PAUSED;
    x->updated_ms = e->now();
    changed(e, x, NULL);
    return 0;
}

int dec_resume(const dec_env *e, xc_exec *x, weft_error *err)
{
    if (x->status != WEFT_WF_PAUSED) return wf_state(err, x, "resumed", "PAUSED");
    x->status = WEFT_WF_RUNNING;
    x->updated_ms = e->now();
    changed(e, x, NULL);
    return 0;
}

static void reopen(const dec_env *e, xc_exec *x)
{
    x->status = WEFT_WF_RUNNING;
    x->revived = 1;
    free(x->reason);
    x->reason = NULL;
    free(x->failed_task_id);
    x->failed_task_id = NULL;
    json_object_put(x->output);
    x->output = NULL;
    x->ended_ms = 0;
    x->updated_ms = e->now();
}

/* Whether dec_retry runs t again: the latest instance of its node, ended
 * badly and not yet replaced. */
static int retryable(const xc_exec *x, const xc_task *t)
{
    return !xc_task_ok(t->status) && xc_task_terminal(t->status) && !t->retried &&
           xc_latest(x, t->def) == t;
}

/* A join or loop cut short: retried, it picks up where it was. */
static int cut_short(const xc_task *t)
{
    return t->def->type->map && t->status == WEFT_TASK_CANCELED;
}

int dec_retry(const dec_env *e, xc_exec *x, dec_out *o, weft_error *err)
{
    size_t i, k, n = x->tasks.len, again = 0;
    xc_task **from;
    if (x->status != WEFT_WF_FAILED && x->status != WEFT_WF_TIMED_OUT &&
        x->status != WEFT_WF_TERMINATED)
        return wf_state(err, x, "retried", "FAILED, TIMED_OUT or TERMINATED");
    for (i = 0; i < n; i++)
        again += retryable(x, x->tasks.items[i]);
    if (!again) return wu_err(err, WEFT_ESTATE, "workflow %s has no failed task to retry", x->id);
    /* The new instances first, with nothing else changed: when one cannot
     * be made, those made are dropped and x is as it was (room in the maps
     * first, so that dropping one cannot fail). */
    if (!(from = malloc(again * sizeof *from)) || wu_map_reserve(x->by_ref, again) ||
        wu_map_reserve(x->by_def, again)) {
        free(from);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    for (i = k = 0; i < n; i++) {
        xc_task *t = x->tasks.items[i], *r;
        if (!retryable(x, t)) continue;
        from[k++] = t;
        if (cut_short(t)) continue;
        r = xc_add_task(x, t->def, t->scope, ((xc_scope *)x->scopes.items[t->scope])->iteration);
        if (r) {
            r->retry_count = t->retry_count + 1;
            r->dyn_json = json_object_get(t->dyn_json);
        }
        if (!r || resolve_input(x, r)) {
            while (x->tasks.len > n)
                xc_drop_last(x);
            free(from);
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        }
    }
    reopen(e, x);
    for (i = 0, k = n; i < again; i++) {
        xc_task *t = from[i], *r;
        if (cut_short(t)) {
            t->status = WEFT_TASK_IN_PROGRESS;
            t->ended_ms = 0;
            t->followed = 0;
            x->active++;
            changed(e, x, t);
        } else {
            t->retried = 1;
            r = x->tasks.items[k++];
            r->fresh = 1;
            x->fresh++;
            changed(e, x, r);
        }
    }
    free(from);
    changed(e, x, NULL);
    return 0;
}

int dec_restart(const dec_env *e, xc_exec *x, weft_error *err)
{
    if (!xc_wf_terminal(x->status))
        return wf_state(err, x, "restarted", "COMPLETED, FAILED, TIMED_OUT or TERMINATED");
    if (!x->def->restartable)
        return wu_err(err, WEFT_ESTATE, "workflow %s: definition '%s' is not restartable", x->id,
                      x->def->name);
    if (xc_reset(x)) return wu_err(err, WEFT_ENOMEM, "out of memory");
    reopen(e, x);
    changed(e, x, NULL);
    return 0;
}

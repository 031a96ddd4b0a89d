#include "core/effects.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- queue steps ---- */

/* When a decider should look at x next (follow: at once, the change was
 * made where no decider follows it): its next deadline, within sweep_ms;
 * 0 when it has none and sweep_ms is 0 (nothing to look at until its
 * tasks say so). */
static int64_t next_due(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, int follow,
                        int64_t now)
{
    int64_t due = env->sweep_ms ? now + env->sweep_ms : 0, next = 0;
    size_t i;
    if (follow || x->fresh > 0 || x->ended_head < x->ended.len) return now;
    dec_timeouts(dec, x, now, &next, o);
    if (x->ended_head < x->ended.len) return now; /* something timed out: follow it now */
    if (next && (!due || next < due)) due = next;
    for (i = 0; i < x->tasks.len; i++) {
        xc_task *t = x->tasks.items[i];
        if (t->def->type->map && t->status == WEFT_TASK_IN_PROGRESS && t->callback_ms > 0 &&
            (!due || t->callback_ms < due))
            due = t->callback_ms;
    }
    return due && due < now ? now : due;
}

/* src into dst (size bytes), cut to fit: what snprintf("%s") does, at a
 * fraction of its cost on a path taken for every task. */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* The next lease token into lease: "<seed>:e<n>", kept as text and counted
 * up in place (no printf on a path taken for every task). */
static void lease_next(op_env *env, char lease[40])
{
    char *t = env->lease_tok;
    size_t n = env->lease_len, i;
    if (!n) {
        char u[37];
        wu_uuid(u);
        for (i = 0; u[i] && n < 24; i++)
            if (u[i] != '-') t[n++] = u[i];
        t[n++] = ':';
        t[n++] = 'e';
        t[n++] = '1';
        t[n] = 0;
        env->lease_len = n;
    }
    memcpy(lease, t, n + 1);
    for (i = n - 1; t[i] == '9'; i--)
        t[i] = '0';
    if (t[i] != 'e')
        t[i]++;
    else if (n + 1 < sizeof env->lease_tok) { /* all nines: one digit more */
        t[i + 1] = '1';
        t[n] = '0';
        t[n + 1] = 0;
        env->lease_len = n + 1;
    } else {
        env->lease_len = 0; /* out of digits: a new seed */
    }
}

/* Eager dispatch: whether task t, made visible now by a save, is leased to
 * the saver instead (room permitting); the token into lease. */
static int take_eager(op_env *env, const dec_action *a, int64_t now, size_t *room, char lease[40])
{
    if (!room || !*room || !env->eager || a->at > now || !env->eager(env->eager_ud, a->task))
        return 0;
    lease_next(env, lease);
    (*room)--;
    return 1;
}

int fx_steps(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, int follow, st_step **out,
             size_t *n, size_t *room, st_lease **eager, size_t *neager)
{
    return fx_steps_in(env, dec, x, o, follow, NULL, out, n, room, eager, neager);
}

void fx_free(const fx_buf *buf, st_step *steps, st_lease *eager)
{
    if (!buf || steps != buf->steps) free(steps);
    if (!buf || eager != buf->leases) free(eager);
}

int fx_steps_in(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, int follow, fx_buf *buf,
                st_step **out, size_t *n, size_t *room, st_lease **eager, size_t *neager)
{
    st_step *s;
    st_lease *got = NULL;
    size_t i, k = 0, ng = 0;
    int64_t now = dec->now(), due;
    /* Room first: next_due may time tasks out, adding their cancels to o
     * (a cancel and a child's end each, the workflow's end), and a call
     * that then failed would leave them applied to x with no steps. */
    int may_time_out = !xc_wf_terminal(x->status) &&
                       (x->timed || (x->def->timeout_ms > 0 && x->def->timeout_fails));
    size_t most = o->n + (may_time_out ? 2 * (size_t)x->active + 3 : 0);
    int inline_steps = buf && most + 1 <= sizeof buf->steps / sizeof buf->steps[0];
    /* (eager leases are of pushes: a timeout adds none) */
    int inline_leases = buf && o->n <= sizeof buf->leases / sizeof buf->leases[0];
    /* filled entry by entry below: nothing to zero */
    s = inline_steps ? buf->steps : malloc((most + 1) * sizeof *s);
    if (s && room && *room &&
        !(got = inline_leases ? buf->leases : malloc((o->n + 1) * sizeof *got))) {
        if (!inline_steps) free(s);
        return WEFT_ENOMEM;
    }
    if (!s) return WEFT_ENOMEM;
    due = xc_wf_terminal(x->status) ? 0 : next_due(env, dec, x, o, follow, now);
    for (i = 0; i < o->n; i++) {
        dec_action *a = &o->a[i];
        st_step st = {0};
        st.task = a->task;
        if (a->kind == DEC_ENQUEUE) {
            st.kind = ST_PUSH;
            st.type = xc_task_queue(a->task);
            st.task_id = a->task->id;
            st.at = a->at;
            st.priority = x->priority;
            if (def_limited(a->task->def)) {
                st.limit_name = a->task->def->name;
                st.limit = &a->task->def->limit;
            }
            /* a task with queue controls (or a domain) waits its turn in the queue */
            if (got && !st.priority && !st.limit && !a->task->domain &&
                take_eager(env, a, now, room, got[ng].lease)) {
                copy_str(got[ng].workflow_id, sizeof got[ng].workflow_id, x->id);
                copy_str(got[ng].task_id, sizeof got[ng].task_id, a->task->id);
                copy_str(got[ng].type, sizeof got[ng].type, st.type);
                got[ng].never_reaped = 1;
                got[ng].controlled = 0;
                got[ng].qshard = 0;
                got[ng].x = x;
                got[ng].t = a->task;
                st.lease = got[ng].lease;
                st.lease_until = now + env->lease_ms;
                ng++;
            }
            s[k++] = st;
        } else if ((a->kind == DEC_CANCEL && !a->task->def->type->map) || a->kind == DEC_UNQUEUE) {
            st.kind = ST_UNQUEUE;
            st.type = xc_task_queue(a->task);
            st.task_id = a->task->id;
            s[k++] = st;
        }
    }
    /* a running execution that was created is on the decider queue, due
     * within sweep_ms (every save and due.lua keep it so): a save that wants
     * it looked at no sooner than that needs no wake. With no sweep
     * (sweep_ms 0), only a deadline wakes it. */
    if (xc_wf_terminal(x->status) ||
        (env->sweep_ms ? x->fence == 0 || x->revived || due < now + env->sweep_ms : due != 0)) {
        st_step st = {0};
        st.kind = xc_wf_terminal(x->status) ? ST_DONE : ST_WAKE;
        st.at = due;
        s[k++] = st;
    }
    *out = s;
    *n = k;
    if (!ng || !eager) {
        if (!inline_leases) free(got);
        got = NULL;
    }
    if (eager) {
        *eager = got;
        *neager = ng;
    }
    return 0;
}

/* ---- cascades ---- */

typedef enum later_kind { LATER_TERMINATE, LATER_PARENT, LATER_FAILURE } later_kind;

/* One cascade step, with copies of what it needs of the execution that
 * asked for it (which is gone by the time it runs). */
struct op_later {
    later_kind kind;
    char *id;                /* TERMINATE: the child; PARENT: the parent; FAILURE: the failed one */
    char *task_id;           /* PARENT: the parent's task */
    char *child_id;          /* PARENT: the child that ended */
    weft_task_status status; /* PARENT: what the task gets */
    json_object *data;       /* PARENT: the task's output; FAILURE: the workflow's input */
    char *text;              /* PARENT: the reason (NULL when completed); FAILURE: the name */
    int depth;               /* FAILURE: the failed one's depth */
    int priority;            /* FAILURE: the failed one's priority */
};

static void later_clear(struct op_later *l)
{
    free(l->id);
    free(l->task_id);
    free(l->child_id);
    free(l->text);
    json_object_put(l->data);
}

static void warn(op_env *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Queue a cascade step (taken, also on failure). One that cannot be
 * queued, or was not made whole (ok 0), is said (the sweeper repairs what
 * a crash or this loses: a parent reads its child's end). */
static void later_push(op_env *env, struct op_later *l, int ok)
{
    if (!ok || wu_grow(&env->later, &env->caplater, env->nlater, 1, sizeof *env->later)) {
        warn(env, "out of memory: a cascade was lost (%s; the sweeper repairs it)",
             l->kind == LATER_TERMINATE ? "a child to terminate"
             : l->kind == LATER_PARENT  ? "a parent to tell"
                                        : "a failure workflow to start");
        later_clear(l);
        return;
    }
    env->later[env->nlater++] = *l;
}
static void warn(op_env *env, const char *fmt, ...)
{
    char line[WEFT_ERROR_MAX * 2];
    va_list ap;
    if (!env->hooks || (!env->hooks->warn && !env->hooks->note)) return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (env->hooks->warn)
        env->hooks->warn(env->hooks->ud, line);
    else
        env->hooks->note(env->hooks->ud, WEFT_LOG_WARN, NULL, line);
}

/* A child ended: its parent's SUB_WORKFLOW task completes with its result. */
static void tell_parent(op_env *env, struct op_later *l)
{
    op_complete c = {0};
    weft_error err = {0};
    c.task_id = l->task_id;
    c.child_id = l->child_id;
    c.status = l->status;
    c.output = l->data;
    c.reason = l->text;
    if (op_update(env, l->id, op_fn_complete, &c, &err) && err.code != WEFT_ESTATE)
        warn(env, "workflow %s: telling parent %s: %s (the sweeper retries)", l->child_id, l->id,
             err.msg);
}

/* A workflow failed: its failure workflow starts, once (its idempotency
 * key names the failed one). A failure workflow that fails and starts
 * itself again is a recursion too: bounded like sub-workflows. */
static void start_failure(op_env *env, struct op_later *l)
{
    char *json = NULL, id[64], key[128], what[WEFT_ERROR_MAX / 2];
    def_workflow *d = NULL;
    op_start_args a = {0};
    weft_error err = {0};
    int v = 0;
    snprintf(what, sizeof what, "failure workflow '%s'", l->text);
    if (def_check_depth(def_limits_of(env->defs), l->depth, what, &err)) {
        warn(env, "workflow %s: not started: %s", l->id, err.msg);
        return;
    }
    if (env->hooks && env->hooks->find_def
            ? env->hooks->find_def(env->hooks->ud, l->text, 0, &d, &err)
            : (ST(env->st, def_get, l->text, 0, &json, &v, &err) ||
               op_def(env, json, l->text, &d, &err))) {
        warn(env, "workflow %s: failure workflow '%s': %s", l->id, l->text, err.msg);
        free(json);
        return;
    }
    free(json);
    snprintf(key, sizeof key, "failure:%s", l->id);
    a.def = d;
    a.input = l->data;
    a.idempotency_key = key;
    a.depth = l->depth + 1;
    a.priority = l->priority;
    a.unchecked_types = 1; /* refused, it would be lost: it waits for its types instead */
    if (op_start(env, &a, id, &err))
        warn(env, "workflow %s: failure workflow '%s': %s", l->id, l->text, err.msg);
    def_unref(d);
}

void fx_drain(op_env *env)
{
    if (env->nest || !env->nlater) return;
    env->nest++;
    while (env->hlater < env->nlater) {
        struct op_later l = env->later[env->hlater++];
        weft_error e = {0};
        switch (l.kind) {
        case LATER_TERMINATE:
            op_command(env, l.id, OP_TERMINATE, "parent task canceled", &e);
            break;
        case LATER_PARENT:
            tell_parent(env, &l);
            break;
        case LATER_FAILURE:
            start_failure(env, &l);
            break;
        }
        later_clear(&l);
    }
    env->nest--;
    free(env->later);
    env->later = NULL;
    env->nlater = env->hlater = env->caplater = 0;
}

void fx_terminate_later(op_env *env, const char *id)
{
    struct op_later l = {.kind = LATER_TERMINATE, .id = strdup(id)};
    later_push(env, &l, l.id != NULL);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

void fx_after(op_env *env, xc_exec *x, const dec_out *o)
{
    size_t i;
    for (i = 0; i < o->n; i++) {
        const dec_action *a = &o->a[i];
        struct op_later l = {0};
        switch (a->kind) {
        case DEC_CANCEL:
            if (env->hooks && env->hooks->cancel) env->hooks->cancel(env->hooks->ud, x, a->task);
            break;
        case DEC_TERMINATE_CHILD:
            fx_terminate_later(env, a->task->child_id);
            break;
        case DEC_NOTIFY_PARENT:
            if (!env->cascade) {
                /* the parent's decider reads the child's end when it looks
                 * at the parent, so it looks now */
                weft_error e = {0};
                ST(env->st, wake, x->parent_id, wu_now_ms(), 1, &e);
                break;
            }
            {
                char reason[WEFT_ERROR_MAX];
                l.kind = LATER_PARENT;
                l.data = xc_child_result(x, &l.status, reason, sizeof reason);
                l.id = strdup(x->parent_id);
                l.task_id = strdup(x->parent_task_id);
                l.child_id = strdup(x->id);
                l.text = l.status == WEFT_TASK_COMPLETED ? NULL : strdup(reason);
                later_push(env, &l, l.data && l.id && l.task_id && l.child_id);
            }
            break;
        case DEC_START_FAILURE:
            if (!env->cascade) break; /* started by a daemon's decider only */
            l.kind = LATER_FAILURE;
            l.id = strdup(x->id);
            l.text = dup_or_null(json_object_get_string(x->def->failure_workflow));
            l.data = xc_failure_input(x);
            l.depth = x->depth;
            l.priority = x->priority;
            later_push(env, &l, l.data && l.id && l.text);
            break;
        case DEC_WF_ENDED:
            if (env->hooks && env->hooks->ended) env->hooks->ended(env->hooks->ud, x);
            break;
        default:
            break; /* queue steps: fx_steps */
        }
    }
}

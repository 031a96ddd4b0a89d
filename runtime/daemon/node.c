#include "daemon/node.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "core/codec.h"
#include "plugin/host.h"
#include "lua/sandbox.h"
#include "daemon/metrics.h"
#include "core/ops.h"
#include "store/payload.h"
#include "plugin/loader.h"

#define ND_BATCH 32        /* tasks a worker holds at once (claimed or eager) */
#define ND_DUE_BATCH 8     /* executions a worker takes off the decider queue per round */
#define ND_BUSY_POLL_MS 2  /* while busy with held work, look at the queues this often */
#define ND_ROUND_MS 20     /* run held tasks for this long, then save what is done */
#define ND_PS_BATCH 512   /* payload directory entries a keeper round looks at */

/* A task leased to a worker, and the execution it holds for it (or NULL). */
typedef struct held {
    rs_lease l;
    int64_t since; /* when it was leased (monotonic ms) */
    xc_exec *x;
} held;

typedef struct worker {
    struct nd_node *n;
    int idx; /* -1 = the keeper */
    rs *r;
    sbx *sandbox;
    host_services svc;
    dec_env dec;
    op_env op;
    op_hooks hooks;
    held leases[ND_BATCH]; /* a copy of hold (x unused), for the keeper to renew */
    int nleases;
    held hold[ND_BATCH];
    int nhold;
    int64_t last_due, last_claim;
    int64_t due_gap, claim_gap; /* while busy: poll again after this (doubles while empty) */
    int due_more, claim_more;   /* the last poll was full: poll again at once */
    int poll_refused;           /* polls Redis refused in a row (logged once) */
    op_cache *cache; /* this thread's compiled definitions */
    pthread_t thread;
    int started;
} worker;

struct nd_node {
    const cf_config *cfg;
    pl_registry *plugins;
    ps_store *payloads; /* large inputs/outputs, shared by the threads */
    def_env defs;
    def_limits limits;
    const weft_lock_provider *lock;
    void *lock_handle;
    char **types;
    size_t ntypes;
    char id[128];
    int level;
    volatile sig_atomic_t stopping;
    int redis_down; /* logged once per outage */
    pthread_mutex_t mu;
    worker *workers;
    int nworkers;
    worker keeper;
    int running; /* worker threads still in their loop */
    mt_metrics *metrics;
    int64_t ps_next;    /* the keeper: when the next payload sweep starts (monotonic ms) */
    int ps_pass;        /* a payload sweep is under way */
    size_t ps_removed;  /* files it removed so far */
    rs_epoch *epoch;   /* the store's, shared by every connection */
    ap_config api_cfg; /* must outlive api */
    ap_server *api;    /* NULL when the REST API is off */
};

/* ---- logging ---- */

/* One line: ts, level, node, the plugin speaking (when one is), msg. */
static void vlog(nd_node *n, int level, const char *plugin, const char *fmt, va_list ap)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char msg[2048], ts[32];
    struct timespec now;
    struct tm tm;
    size_t i, j;
    if (level > __atomic_load_n(&n->level, __ATOMIC_RELAXED))
        return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* quotes and newlines inside msg would break the line format */
    for (i = j = 0; msg[i]; i++)
        if (msg[i] != '\n')
            msg[j++] = msg[i] == '"' ? '\'' : msg[i];
    msg[j] = 0;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    pthread_mutex_lock(&n->mu);
    fprintf(stderr, "ts=%s.%03ldZ level=%s node=%s%s%s msg=\"%s\"\n", ts, now.tv_nsec / 1000000,
            names[level < 0 || level > 3 ? 0 : level], n->id, plugin ? " plugin=" : "",
            plugin ? plugin : "", msg);
    fflush(stderr);
    pthread_mutex_unlock(&n->mu);
}

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int nd_set_level(nd_node *n, const char *name, weft_error *err)
{
    int i;
    for (i = 0; i < 4; i++)
        if (!strcmp(name ? name : "info", level_names[i])) {
            __atomic_store_n(&n->level, i, __ATOMIC_RELAXED);
            return 0;
        }
    return wu_err(err, WEFT_EINVAL, "log_level '%s' (use error, warn, info or debug)", name);
}

const char *nd_level_name(nd_node *n)
{
    return level_names[__atomic_load_n(&n->level, __ATOMIC_RELAXED)];
}

void nd_log(nd_node *n, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(n, level, NULL, fmt, ap);
    va_end(ap);
}

/* A plugin's log line (host_set_log). */
__attribute__((format(printf, 4, 5))) static void
plugin_say(nd_node *n, int level, const char *plugin, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(n, level, plugin, fmt, ap);
    va_end(ap);
}

static void plugin_log(void *ud, int level, const char *plugin, const char *msg)
{
    plugin_say(ud, level, plugin, "%s", msg);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* Redis trouble: log once, back off; log when it is back. */
/* Sleep *ms, and double it for next time (up to 2 s). */
static void back_off(int64_t *ms)
{
    sleep_ms(*ms);
    *ms = *ms * 2 > 2000 ? 2000 : *ms * 2;
}

static void redis_trouble(worker *w, const weft_error *err, int64_t *backoff)
{
    nd_node *n = w->n;
    if (!__atomic_exchange_n(&n->redis_down, 1, __ATOMIC_ACQ_REL))
        nd_log(n, WEFT_LOG_ERROR, "redis unreachable: %s; retrying", err->msg);
    back_off(backoff);
}

static void redis_fine(worker *w)
{
    if (__atomic_exchange_n(&w->n->redis_down, 0, __ATOMIC_ACQ_REL))
        nd_log(w->n, WEFT_LOG_INFO, "redis reachable again at %s", rs_url(w->r));
}

/* ---- host services ---- */

static sbx *svc_sandbox(void *ud)
{
    return ((worker *)ud)->sandbox;
}

static int svc_start_child(void *ud, xc_exec *x, xc_task *t, json_object *defj, const char *name,
                           int version, json_object *input, char *id_out, size_t id_size,
                           weft_error *err)
{
    worker *w = ud;
    def_workflow *d = NULL;
    op_start_args a = {0};
    char id[64], key[128];
    int rc;
    if (defj) {
        char src[160];
        snprintf(src, sizeof src, "%s: sub-workflow '%s'", x->def->name, t->ref);
        rc = op_def(&w->op, json_object_to_json_string_ext(defj, JSON_C_TO_STRING_PLAIN), src, &d,
                    err);
    } else if (!name || !*name) {
        return wu_err(err, WEFT_EINVAL, "sub-workflow needs a name or a definition");
    } else {
        char *json = NULL;
        int v = 0;
        if ((rc = rs_def_get(w->r, name, version, &json, &v, err)) == 0)
            rc = op_def(&w->op, json, name, &d, err);
        free(json);
    }
    if (rc)
        return rc;
    /* one child per task instance, even if the task runs twice */
    snprintf(key, sizeof key, "sub:%s", t->id);
    a.def = d;
    a.input = input;
    a.parent_id = x->id;
    a.parent_task_id = t->id;
    a.depth = x->depth + 1;
    a.idempotency_key = key;
    rc = op_start(&w->op, &a, id, err);
    def_unref(d);
    if (rc)
        return rc;
    mt_workflow_started(w->n->metrics);
    free(t->child_id);
    t->child_id = strdup(id);
    snprintf(id_out, id_size, "%s", id);
    return 0;
}

/* Secrets are kept in Redis (weft secret set NAME). */
static int svc_secret(void *ud, const char *name, char **value, weft_error *err)
{
    return rs_secret_get(((worker *)ud)->r, name, value, err);
}

/* ---- what follows a save ---- */

static void on_note(void *ud, int level, const char *msg)
{
    nd_log(((worker *)ud)->n, level, "%s", msg);
}

static void on_ended(void *ud, op_env *env, const xc_exec *x)
{
    worker *w = ud;
    weft_error err = {0};
    mt_workflow_ended(w->n->metrics, weft_wf_status_name(x->status));
    if (x->parent_id && x->parent_task_id) {
        op_complete c = {0};
        char reason[WEFT_ERROR_MAX];
        json_object *out = xc_child_result(x, &c.status, reason, sizeof reason);
        c.task_id = x->parent_task_id;
        c.child_id = x->id;
        c.output = out;
        c.reason = c.status == WEFT_TASK_COMPLETED ? NULL : reason;
        if (op_update(env, x->parent_id, op_fn_complete, &c, &err) && err.code != WEFT_ESTATE)
            nd_log(w->n, WEFT_LOG_WARN, "workflow %s: telling parent %s: %s (the sweeper retries)",
                   x->id, x->parent_id, err.msg);
        json_object_put(out);
    }
    if ((x->status == WEFT_WF_FAILED || x->status == WEFT_WF_TIMED_OUT) &&
        x->def->failure_workflow) {
        const char *name = json_object_get_string(x->def->failure_workflow);
        char *json = NULL, id[64], key[128], what[WEFT_ERROR_MAX / 2];
        def_workflow *d = NULL;
        op_start_args a = {0};
        json_object *in;
        int v = 0;
        /* a failure workflow that fails and starts itself again is a
         * recursion too: bounded like sub-workflows */
        snprintf(what, sizeof what, "failure workflow '%s'", name);
        if (def_check_depth(&w->n->limits, x->depth, what, &err)) {
            nd_log(w->n, WEFT_LOG_WARN, "workflow %s: not started: %s", x->id, err.msg);
            return;
        }
        if (rs_def_get(w->r, name, 0, &json, &v, &err) || op_def(env, json, name, &d, &err)) {
            nd_log(w->n, WEFT_LOG_WARN, "workflow %s: failure workflow '%s': %s", x->id, name,
                   err.msg);
            free(json);
            return;
        }
        free(json);
        in = xc_failure_input(x);
        snprintf(key, sizeof key, "failure:%s", x->id);
        a.def = d;
        a.input = in;
        a.idempotency_key = key;
        a.depth = x->depth + 1;
        if (op_start(env, &a, id, &err))
            nd_log(w->n, WEFT_LOG_WARN, "workflow %s: failure workflow '%s': %s", x->id, name,
                   err.msg);
        else
            mt_workflow_started(w->n->metrics);
        json_object_put(in);
        def_unref(d);
    }
}

/* ---- sweeping an execution ---- */

/* Read a child's end (a parent whose notice was lost). 1 = it ended, filled in c. */
static int child_ended(worker *w, const char *child_id, op_complete *c, json_object **out,
                       char *reason, size_t rsize)
{
    xc_exec *cx = NULL;
    weft_error err = {0};
    if (op_load(&w->op, child_id, &cx, NULL, &err))
        return 0;
    if (!xc_wf_terminal(cx->status)) {
        xc_free(cx);
        return 0;
    }
    *out = xc_child_result(cx, &c->status, reason, rsize);
    c->reason = c->status == WEFT_TASK_COMPLETED ? NULL : reason;
    c->output = *out;
    xc_free(cx);
    return 1;
}

static int fn_sweep(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                    weft_error *err)
{
    worker *w = ud;
    int64_t now = dec->now(), next;
    size_t i, n = x->tasks.len;
    if (xc_wf_terminal(x->status))
        return OP_NOCHANGE; /* finished: only its decider-queue entry was left */
    for (i = 0; i < n && !xc_wf_terminal(x->status); i++) {
        xc_task *t = x->tasks.items[i];
        if (xc_task_terminal(t->status))
            continue;
        if (t->def->type->map) {
            /* a control-flow timer that came due */
            if (t->status == WEFT_TASK_IN_PROGRESS && t->callback_ms > 0 && t->callback_ms <= now) {
                t->callback_ms = 0;
                dec_remap(dec, x, t, o);
            }
        } else if (t->child_id) {
            /* a sub-workflow that ended while nobody told us */
            op_complete c = {0};
            json_object *out = NULL;
            char reason[WEFT_ERROR_MAX];
            if (child_ended(w, t->child_id, &c, &out, reason, sizeof reason))
                dec_complete(dec, x, t, c.status, c.output, c.reason, o, err);
            json_object_put(out);
        } else if (t->queued && rs_queue_has(env->r, t->def->queue, x->id, t->id, err) == 0) {
            /* queued in the execution but in no queue: a step lost to a crash */
            dec_enqueue(dec, x, t, t->callback_ms > now ? t->callback_ms : now, o);
        }
    }
    dec_timeouts(dec, x, now, &next, o);
    dec_decide(dec, x, o);
    return 0;
}

/* ---- running tasks ----
 *
 * A worker works in rounds. Each round it takes executions due for a decider
 * and claims tasks up to ND_BATCH held at once, loads in one round trip the
 * executions it does not hold in memory, runs the tasks, and saves every
 * execution it changed with op_update_many: two round trips for the whole
 * round. A task that a save makes runnable at once (the next step of a
 * chain, the branches of a fork) is leased to this worker in that same
 * save's steps (eager dispatch) and run next round on the execution still in
 * memory: no claim, no load. A crash leaves those leases to expire, and the
 * keeper of any node puts them back in their queues.
 */

/* One task's result, waiting to be applied. */
typedef struct result {
    char task_id[64];
    int rc;
    weft_result r;
    char child_id[64];
    int64_t started_ms;
    int poll_count; /* the task's poll count once this worker took it */
} result;

/* An execution this round touches, with the results of its tasks. */
typedef struct job {
    char id[64];
    xc_exec *x;
    int due;     /* a decider should look at it (decider queue) */
    int load_rc; /* why it could not be loaded */
    result *res;
    size_t nres;
    rs_lease *acks; /* claims its save consumes */
    size_t nacks;
    int unrun; /* held tasks of it left for the next round */
    int ended; /* it was loaded ended: a decider has nothing left to do for it */
} job;

static void job_clear(job *j)
{
    size_t i;
    for (i = 0; i < j->nres; i++)
        host_result_clear(&j->res[i].r);
    free(j->res);
    free(j->acks);
    xc_free(j->x);
    memset(j, 0, sizeof *j);
}

/* Apply one result to x (a fresh load too: a fenced save may run this twice,
 * so the decider gets its own references). 1 when it changed x. */
static int apply_one(op_env *env, const dec_env *dec, xc_exec *x, const result *a, dec_out *o)
{
    xc_task *t = xc_find_id(x, a->task_id);
    weft_result r;
    if (!t || xc_task_terminal(t->status) || xc_wf_terminal(x->status)) {
        /* canceled or already done: the late result is dropped. A child it
         * started that the execution never learned of (terminated between
         * the start and this save) is terminated too: nobody else knows it */
        if (a->child_id[0] && !(t && t->child_id && !strcmp(t->child_id, a->child_id)))
            op_terminate_later(env, a->child_id);
        return 0;
    }
    if (!t->started_ms)
        t->started_ms = a->started_ms;
    /* started already in the worker's copy; a fresh load has not seen it */
    if (t->poll_count < a->poll_count)
        dec_start(dec, x, t);
    if (a->child_id[0] && !t->child_id)
        t->child_id = strdup(a->child_id);
    r = a->r;
    r.output = a->r.output ? json_object_get(a->r.output) : NULL;
    r.end_output = a->r.end_output ? json_object_get(a->r.end_output) : NULL;
    dec_apply(dec, x, t, a->rc, &r, o);
    host_result_clear(&r);
    return 1;
}

static int fn_apply(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                    weft_error *err)
{
    job *j = ud;
    size_t i;
    int changed = 0;
    for (i = 0; i < j->nres; i++)
        changed |= apply_one(env, dec, x, &j->res[i], o);
    if (!changed)
        return OP_NOCHANGE;
    dec_decide(dec, x, o);
    return 0;
}

static int fn_noop(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    return OP_NOCHANGE;
}

/* The keeper renews what the workers hold. */
static void publish_held(worker *w)
{
    int i;
    pthread_mutex_lock(&w->n->mu);
    for (i = 0; i < w->nhold; i++)
        w->leases[i] = w->hold[i];
    w->nleases = w->nhold;
    pthread_mutex_unlock(&w->n->mu);
}

/* Eager dispatch takes tasks of the queues this node serves, while it runs. */
static int want_eager(void *ud, const xc_task *t)
{
    worker *w = ud;
    nd_node *n = w->n;
    size_t i;
    if (n->stopping)
        return 0;
    for (i = 0; i < n->ntypes; i++)
        if (!strcmp(n->types[i], t->def->queue))
            return 1;
    return 0;
}

static job *job_of(job *jobs, size_t *nj, const char *id)
{
    size_t i;
    for (i = 0; i < *nj; i++)
        if (!strcmp(jobs[i].id, id))
            return &jobs[i];
    memset(&jobs[*nj], 0, sizeof jobs[*nj]);
    snprintf(jobs[*nj].id, sizeof jobs[*nj].id, "%s", id);
    return &jobs[(*nj)++];
}

static int push_lease(rs_lease **v, size_t *n, const rs_lease *l)
{
    rs_lease *g = realloc(*v, (*n + 1) * sizeof *g);
    if (!g)
        return -1;
    g[(*n)++] = *l;
    *v = g;
    return 0;
}

/* Run held task h of j (loaded): its result, or its lease, goes in j. */
static void run_held(worker *w, job *j, const held *h)
{
    nd_node *n = w->n;
    weft_error err = {0};
    dec_env quiet = w->dec;
    xc_task *t = xc_find_id(j->x, h->l.task_id);
    result *a, *g;
    int64_t t0;
    int rc, fresh;
    quiet.on_change = NULL;
    if (!t || xc_task_terminal(t->status) || !t->queued || xc_wf_terminal(j->x->status)) {
        push_lease(&j->acks, &j->nacks, &h->l); /* nothing to run: done or canceled meanwhile */
        return;
    }
    if (!(g = realloc(j->res, (j->nres + 1) * sizeof *g)))
        return; /* the lease expires; the task runs again later */
    j->res = g;
    a = &j->res[j->nres];
    memset(a, 0, sizeof *a);
    dec_start(&quiet, j->x, t);
    host_result_init(&a->r);
    t0 = wu_mono_ms();
    rc = host_execute(&w->svc, j->x, t, &a->r);
    {
        char what[200];
        snprintf(what, sizeof what, "output of task '%s'", t->ref);
        if (ps_guard(n->payloads, what, a->r.output, &err)) {
            /* over the hard limit: refused, and retrying would not help */
            json_object_put(a->r.output);
            a->r.output = NULL;
            a->r.status = WEFT_TASK_FAILED_WITH_TERMINAL_ERROR;
            snprintf(a->r.reason, sizeof a->r.reason, "%s", err.msg);
            rc = 0;
        }
    }
    /* counted as the decider will take it: an error is a failure */
    mt_task(n->metrics, t->def->type_name,
            weft_task_status_name(rc && a->r.status != WEFT_TASK_FAILED_WITH_TERMINAL_ERROR
                                      ? WEFT_TASK_FAILED
                                      : a->r.status),
            (double)(wu_mono_ms() - t0) / 1000.0);
    /* A lease taken less than half its length ago is current: nobody can have
     * reaped it, and a cancel moves the fence, which the save checks. An older
     * one is checked (and dropped) before its result may count. */
    fresh = wu_mono_ms() - h->since <= n->cfg->lease_ms / 2;
    if (!fresh && rs_ack(w->r, &h->l, &err) != 0) {
        nd_log(n, WEFT_LOG_WARN, "task %s of workflow %s: %s", t->id, j->id, err.msg);
        host_result_clear(&a->r);
        return;
    }
    if (fresh)
        push_lease(&j->acks, &j->nacks, &h->l);
    snprintf(a->task_id, sizeof a->task_id, "%s", t->id);
    a->rc = rc;
    if (t->child_id)
        snprintf(a->child_id, sizeof a->child_id, "%s", t->child_id);
    a->started_ms = t->started_ms;
    a->poll_count = t->poll_count;
    j->nres++;
}

/* A busy worker's polls of a queue that keeps coming back empty thin out
 * (eager dispatch feeds it meanwhile): 2, 4, 8 ... ms up to poll_interval. */
static int64_t next_gap(const nd_node *n, int64_t gap, int got)
{
    if (got > 0 || gap < ND_BUSY_POLL_MS)
        return ND_BUSY_POLL_MS;
    return gap * 2 > n->cfg->poll_ms ? n->cfg->poll_ms : gap * 2;
}

/* A poll of a queue failed: back off if Redis is away, else say what. -1. */
static int poll_failed(worker *w, const char *what, const weft_error *err, int64_t *backoff)
{
    if (rs_broken(w->r))
        redis_trouble(w, err, backoff);
    else if (!w->poll_refused++) /* said once until a poll goes through */
        nd_log(w->n, WEFT_LOG_ERROR, "%s: %s", what, err->msg);
    return -1;
}

/* The executions due for a decider and the claimable tasks, as far as there is room. */
static int poll_work(worker *w, int wait, char (*due)[64], int *ndue, int64_t *backoff)
{
    nd_node *n = w->n;
    weft_error err = {0};
    int64_t now = wu_mono_ms();
    int room = ND_BATCH - w->nhold, k, i, want_due, want_claim;
    rs_lease got[ND_BATCH];
    *ndue = 0;
    if (n->stopping)
        return 0;
    /* busy with held work: look at the queues every few ms, not every round;
     * both in one round trip */
    want_due = w->due_more || !w->nhold || now - w->last_due >= w->due_gap;
    want_claim = room > 0 && n->ntypes &&
                 (w->claim_more || !w->nhold || now - w->last_claim >= w->claim_gap);
    if (!want_due && !want_claim)
        return 0;
    k = rs_due_claim(w->r, wait && !w->nhold ? (int)n->cfg->poll_ms : 0,
                     want_due ? ND_DUE_BATCH : 0, n->cfg->sweep_ms, due, ndue,
                     (const char *const *)n->types, want_claim ? n->ntypes : 0, room,
                     n->cfg->lease_ms, got, &err);
    if (k < 0)
        return poll_failed(w, want_claim ? "claiming tasks" : "decider queue", &err, backoff);
    redis_fine(w);
    if (w->poll_refused) {
        nd_log(n, WEFT_LOG_INFO, "polls go through again (after %d refused)", w->poll_refused);
        w->poll_refused = 0;
    }
    if (want_due) {
        w->due_more = *ndue == ND_DUE_BATCH;
        w->last_due = now;
        w->due_gap = next_gap(n, w->due_gap, *ndue);
    }
    if (want_claim) {
        for (i = 0; i < k; i++) {
            w->hold[w->nhold].l = got[i];
            w->hold[w->nhold].since = now;
            w->hold[w->nhold].x = NULL;
            w->nhold++;
        }
        w->claim_more = k == room;
        w->last_claim = now;
        w->claim_gap = next_gap(n, w->claim_gap, k);
        publish_held(w);
    }
    return 0;
}

/* A due execution that no longer exists: off the decider queue. */
static void forget_due(worker *w, const char *id)
{
    weft_error err = {0};
    rs_command(w->r, &err, "ZREM %s{dq}:due %s", rs_prefix(w->r), id);
}

/*
 * An ended execution found due (a client that ended a child woke its parent,
 * which had ended first): off the decider queue, else it would be looked at
 * every sweep_interval until it expires. A retry or restart that made it run
 * again meanwhile is put back.
 */
static void forget_ended(worker *w, const char *id)
{
    weft_error err = {0};
    rs_exec e = {0};
    weft_wf_status st;
    forget_due(w, id);
    if (rs_exec_load(w->r, id, 0, &e, &err) == 0 &&
        !(xc_wf_status_parse(e.status, &st) == 0 && xc_wf_terminal(st)))
        rs_wake(w->r, id, wu_now_ms(), 0, &err);
    rs_exec_clear(&e);
}

/* One round; wait: an idle worker's, whose poll first waits for new work. */
static int run_round(worker *w, int wait, int64_t *backoff)
{
    nd_node *n = w->n;
    char due[ND_DUE_BATCH][64];
    job jobs[ND_BATCH + ND_DUE_BATCH];
    op_item items[ND_BATCH + ND_DUE_BATCH];
    const char *ids[ND_BATCH + ND_DUE_BATCH];
    xc_exec *xs[ND_BATCH + ND_DUE_BATCH];
    int rcs[ND_BATCH + ND_DUE_BATCH];
    held next[ND_BATCH];
    size_t nj = 0, nl = 0, ni = 0, room, i;
    int ndue = 0, nkeep = 0, did;
    int64_t start = wu_mono_ms();
    weft_error err = {0};

    if (poll_work(w, wait, due, &ndue, backoff) < 0 && !w->nhold)
        return -1;
    if (!w->nhold && !ndue)
        return 0;
    did = w->nhold + ndue;
    /* the executions: held in memory, or loaded now in one round trip */
    for (i = 0; i < (size_t)w->nhold; i++) {
        job *j = job_of(jobs, &nj, w->hold[i].l.workflow_id);
        if (w->hold[i].x && !j->x)
            j->x = w->hold[i].x;
        else if (w->hold[i].x && j->x != w->hold[i].x)
            xc_free(w->hold[i].x); /* a stale second copy */
        w->hold[i].x = NULL;
    }
    for (i = 0; i < (size_t)ndue; i++)
        job_of(jobs, &nj, due[i])->due = 1;
    for (i = 0; i < nj; i++)
        if (!jobs[i].x)
            ids[nl++] = jobs[i].id;
    if (nl) {
        size_t k = 0;
        if (op_load_many(&w->op, ids, nl, xs, rcs, &err) && rs_broken(w->r))
            redis_trouble(w, &err, backoff);
        for (i = 0; i < nj; i++)
            if (!jobs[i].x) {
                jobs[i].x = xs[k];
                jobs[i].load_rc = rcs[k++];
            }
    }
    /* run the held tasks, for at most ND_ROUND_MS: the rest wait a round */
    for (i = 0; i < (size_t)w->nhold; i++) {
        held *h = &w->hold[i];
        job *j = job_of(jobs, &nj, h->l.workflow_id);
        if (!j->x) {
            if (j->load_rc == WEFT_EIO) {
                next[nkeep++] = *h; /* Redis trouble: try again */
            } else {
                /* gone, or unreadable: failing it is what an update does with it */
                if (j->load_rc == WEFT_EINVAL && !j->due)
                    op_update(&w->op, j->id, fn_noop, NULL, &err);
                rs_ack(w->r, &h->l, &err);
            }
            continue;
        }
        if (wu_mono_ms() - start > ND_ROUND_MS && (j->nres || j->nacks || i > 0)) {
            next[nkeep++] = *h;
            j->unrun = 1;
            continue;
        }
        run_held(w, j, h);
    }
    /* save what changed: two round trips for all */
    for (i = 0; i < nj; i++) {
        job *j = &jobs[i];
        op_item *it = &items[ni];
        if (!j->x && j->due) {
            if (j->load_rc == WEFT_ENOTFOUND)
                forget_due(w, j->id);
            else if (j->load_rc != WEFT_EIO)
                op_update(&w->op, j->id, fn_sweep, w, &err); /* says what is wrong with it */
            continue;
        }
        if (!j->x || (!j->nres && !j->due)) {
            if (j->nacks) {
                size_t q;
                for (q = 0; q < j->nacks; q++)
                    rs_ack(w->r, &j->acks[q], &err);
            }
            continue;
        }
        memset(it, 0, sizeof *it);
        j->ended = xc_wf_terminal(j->x->status);
        it->id = j->id;
        it->x = j->x;
        j->x = NULL;
        it->fn = j->nres ? fn_apply : fn_sweep;
        it->ud = j->nres ? (void *)j : (void *)w;
        it->acks = j->acks;
        it->nacks = j->nacks;
        it->keep = j->unrun;
        it->look = !j->nres;
        ni++;
    }
    room = ND_BATCH > nkeep ? (size_t)(ND_BATCH - nkeep) : 0;
    op_update_many(&w->op, items, ni, &room);
    /* what is held next round: the tasks not run, and the eager ones */
    for (i = 0; i < ni; i++) {
        op_item *it = &items[i];
        job *j = job_of(jobs, &nj, it->id);
        size_t q;
        if (it->rc) {
            if (it->rc == WEFT_ENOTFOUND && j->due)
                forget_due(w, it->id);
            else if (it->rc != WEFT_ETIMEOUT)
                nd_log(n, WEFT_LOG_WARN, "workflow %s: %s%s", it->id,
                       j->nres ? "results not saved: " : "", it->err.msg);
        } else if (!it->saved && j->due && !j->nres) {
            /* finished: only its decider-queue entry or outbox was left */
            weft_error e = {0};
            rs_exec_flush(w->r, it->id, &e);
            if (j->ended)
                forget_ended(w, it->id);
        }
        for (q = 0; q < it->neager && nkeep < ND_BATCH; q++) {
            next[nkeep].l = it->eager[q];
            next[nkeep].since = wu_mono_ms();
            next[nkeep].x = NULL;
            nkeep++;
        }
        free(it->eager);
        if (it->x)
            j->x = it->x; /* kept in memory for its held tasks */
    }
    /* hand each kept execution to the first of its held tasks (every held
     * task came from one of this round's jobs) */
    for (i = 0; i < (size_t)nkeep; i++) {
        job *j = job_of(jobs, &nj, next[i].l.workflow_id);
        next[i].x = j->x;
        j->x = NULL;
    }
    for (i = 0; i < nj; i++)
        job_clear(&jobs[i]);
    memcpy(w->hold, next, (size_t)nkeep * sizeof *next);
    w->nhold = nkeep;
    publish_held(w);
    return did;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    nd_node *n = w->n;
    int64_t backoff = 100, pause = 10;
    int idle = 0, did;
    while (!n->stopping || w->nhold) {
        /* an idle worker's poll waits in Redis until a save makes work
         * visible, or the poll interval passes (timed work: retries, WAIT) */
        did = run_round(w, idle && !n->stopping, &backoff);
        idle = did <= 0;
        if (did >= 0)
            pause = 10;
        if (did > 0) {
            backoff = 100;
        } else if (did < 0 && !rs_broken(w->r)) {
            /* a poll Redis refused (logged once; a lost connection already
             * backed off): ask again after 10 ms, doubling up to 2 s */
            back_off(&pause);
        }
    }
    __atomic_sub_fetch(&n->running, 1, __ATOMIC_ACQ_REL);
    return NULL;
}

/* ---- the keeper: leases, reaping, heartbeat ---- */

static void warn_reaped(void *ud, const char *workflow_id, const char *msg)
{
    nd_log(ud, WEFT_LOG_WARN, "workflow %s: %s", workflow_id, msg);
}

/* ---- the keeper: leases, reaping, heartbeat, payload sweep ---- */

static int execs_alive(void *ud, const char *const *ids, size_t n, int *alive, weft_error *err)
{
    return rs_exec_exists_many(ud, ids, n, alive, err);
}

/*
 * Payload files of executions that no longer exist (ended and expired, or
 * never created) go, a batch of directory entries per keeper round so that
 * leases are still renewed on time; every payload_sweep a new pass starts.
 * Every daemon sweeps: they only race to remove the same files.
 */
static void sweep_payloads(worker *k)
{
    nd_node *n = k->n;
    weft_error err = {0};
    int rc;
    if (!n->payloads || !n->cfg->payload_sweep_ms || (!n->ps_pass && wu_mono_ms() < n->ps_next))
        return;
    n->ps_pass = 1;
    rc = ps_sweep(n->payloads, n->cfg->payload_grace_ms, ND_PS_BATCH, execs_alive, k->r,
                  &n->ps_removed, &err);
    if (rc == 0)
        return;
    if (rc < 0 && !rs_broken(k->r))
        nd_log(n, WEFT_LOG_WARN, "payload sweep: %s (again in %llds)", err.msg,
               (long long)(n->cfg->payload_sweep_ms / 1000));
    if (n->ps_removed)
        nd_log(n, WEFT_LOG_INFO, "%zu payload file(s) of ended workflows removed", n->ps_removed);
    n->ps_pass = 0;
    n->ps_removed = 0;
    n->ps_next = wu_mono_ms() + n->cfg->payload_sweep_ms;
}

static void keep(worker *k)
{
    nd_node *n = k->n;
    weft_error err = {0};
    rs_lease renew[1024];
    int ok[1024], nr = 0, i;
    size_t t;
    char info[4096], host[256] = "?";
    json_object *j, *types;

    /* leases of held tasks, but for young ones: the keeper comes again
     * within a third of a lease, well before they expire */
    pthread_mutex_lock(&n->mu);
    for (i = 0; i < n->nworkers; i++) {
        int j2;
        for (j2 = 0; j2 < n->workers[i].nleases && nr < 1024; j2++)
            if (wu_mono_ms() - n->workers[i].leases[j2].since >= n->cfg->lease_ms / 4)
                renew[nr++] = n->workers[i].leases[j2].l;
    }
    pthread_mutex_unlock(&n->mu);
    if (nr && rs_renew_many(k->r, renew, (size_t)nr, n->cfg->lease_ms, ok, &err) == 0) {
        for (i = 0; i < nr; i++)
            if (!ok[i])
                nd_log(n, WEFT_LOG_WARN, "task %s of workflow %s: lost its lease",
                       renew[i].task_id, renew[i].workflow_id);
    } else if (nr && !rs_broken(k->r)) {
        nd_log(n, WEFT_LOG_WARN, "renewing %d lease(s): %s", nr, err.msg);
    }
    /* expired leases go back to their queues */
    for (t = 0; t < n->ntypes; t++) {
        char **exhausted = NULL;
        size_t ne = 0;
        int back = rs_reap(k->r, n->types[t], n->cfg->max_reaps, &exhausted, &ne, &err);
        if (back > 0) {
            mt_lease_reaps(n->metrics, back);
            nd_log(n, WEFT_LOG_INFO, "%d expired lease(s) of %s returned to the queue", back,
                   n->types[t]);
        }
        if (ne > 0)
            mt_lease_reaps(n->metrics, (long)ne);
        op_fail_reaped(&k->op, exhausted, ne, warn_reaped, n);
    }
    /* alive, and what we serve */
    gethostname(host, sizeof host - 1);
    j = json_object_new_object();
    types = json_object_new_array();
    for (t = 0; t < n->ntypes; t++)
        json_object_array_add(types, json_object_new_string(n->types[t]));
    /* external types (SIMPLE): this node's API hands them to workers */
    if (n->api) {
        size_t p, q;
        for (p = 0; p < pl_count(n->plugins); p++) {
            const pl_plugin *pp = pl_get(n->plugins, p);
            for (q = 0; q < pp->ntypes; q++)
                if (pp->types[q]->flags & WEFT_TASK_EXTERNAL)
                    json_object_array_add(types, json_object_new_string(pp->types[q]->name));
        }
    }
    json_object_object_add(j, "types", types);
    json_object_object_add(j, "pid", json_object_new_int(getpid()));
    json_object_object_add(j, "host", json_object_new_string(host));
    json_object_object_add(j, "seen", json_object_new_int64(wu_now_ms()));
    snprintf(info, sizeof info, "%s", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    if (rs_daemon_beat(k->r, n->id, info, &err) == 0)
        redis_fine(k);
    sweep_payloads(k);
}

static void *keeper_main(void *arg)
{
    worker *k = arg;
    nd_node *n = k->n;
    int64_t every = n->cfg->lease_ms / 3, last = 0;
    if (every > 1000)
        every = 1000;
    if (every < 50)
        every = 50;
    while (!n->stopping || __atomic_load_n(&n->running, __ATOMIC_ACQUIRE) > 0) {
        int64_t now = wu_mono_ms();
        if (now - last >= every) {
            keep(k);
            last = now;
        }
        sleep_ms(20);
    }
    return NULL;
}

/* ---- set-up ---- */

/* Called by whichever connection found the store's epoch gone or changed. */
static void store_lost(void *ud, const rs_loss *l)
{
    nd_node *n = ud;
    char seen[96] = "how many workflows it held is unknown (no heartbeat since the last loss)";
    int i, running = 0;
    mt_store_lost(n->metrics, l->at_ms);
    pthread_mutex_lock(&n->mu);
    for (i = 0; n->workers && i < n->nworkers; i++)
        running += n->workers[i].nleases;
    pthread_mutex_unlock(&n->mu);
    if (l->unfinished >= 0)
        snprintf(seen, sizeof seen,
                 "%lld unfinished workflow(s) were in it at the last heartbeat and are gone",
                 l->unfinished);
    nd_log(n, WEFT_LOG_ERROR,
           "the store lost its data: the epoch key %s %s%s (Redis restarted empty, was flushed, "
           "or is another server); %s; this daemon was running %d of their task(s); a new "
           "epoch %s is written (loss %lld since this daemon started)",
           l->key, l->gone ? "is gone, was " : "holds another epoch than ", l->was, seen, running,
           l->now, l->count);
}

static int worker_init(nd_node *n, worker *w, int idx, weft_error *err)
{
    rs_opts o = {0};
    sbx_limits lim;
    int rc;
    w->n = n;
    w->idx = idx;
    o.url = n->cfg->redis_url;
    o.prefix = n->cfg->key_prefix;
    o.retention_ms = n->cfg->retention_ms;
    o.early_steps = idx >= 0; /* workers: steps go out while the next tasks run */
    o.epoch = n->epoch;
    rc = rs_open(&o, &w->r, err);
    if (rc && !w->r)
        return rc;
    if (rc)
        nd_log(n, WEFT_LOG_WARN, "%s (will retry)", err->msg);
    lim.mem_bytes = (size_t)n->cfg->lua_memory;
    lim.instructions = (uint64_t)n->cfg->lua_instructions;
    lim.time_ms = (uint64_t)n->cfg->lua_time_ms;
    lim.result_bytes = (size_t)n->cfg->lua_result;
    if (!(w->sandbox = sbx_new(&lim, err)))
        return err->code ? err->code : WEFT_ENOMEM;
    w->svc.ud = w;
    w->svc.sandbox = svc_sandbox;
    w->svc.start_child = svc_start_child;
    w->svc.secret = svc_secret;
    w->svc.limits = &n->limits;
    w->dec.defs = &n->defs;
    w->dec.svc = &w->svc;
    w->dec.now = wu_now_ms;
    w->hooks.ud = w;
    w->hooks.ended = on_ended;
    w->hooks.note = on_note;
    w->op.r = w->r;
    w->op.defs = &n->defs;
    w->op.dec = &w->dec;
    /* Each thread compiles its own copy of a definition: json-c's reference
     * counts are not atomic, so no JSON may be shared between threads. */
    w->op.cache = w->cache = op_cache_new();
    if (!w->cache)
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    w->op.lock = n->lock;
    w->op.lock_handle = n->lock_handle;
    w->op.lock_ttl_ms = n->cfg->lock_ttl_ms;
    w->op.lock_wait_ms = n->cfg->lock_wait_ms;
    w->op.command_wait_ms = n->cfg->command_wait_ms;
    w->op.sweep_ms = n->cfg->sweep_ms;
    w->op.unfenced = !n->cfg->fencing;
    w->op.ps = n->payloads;
    w->op.hooks = &w->hooks;
    w->op.eager = want_eager;
    w->op.eager_ud = w;
    w->op.lease_ms = n->cfg->lease_ms;
    return 0;
}

static void worker_fini(worker *w)
{
    int i;
    for (i = 0; i < w->nhold; i++)
        xc_free(w->hold[i].x);
    w->nhold = 0;
    rs_free(w->r);
    sbx_free(w->sandbox);
    op_cache_free(w->cache);
}

static const weft_task_type *find_type(void *ud, const char *name)
{
    return pl_find_type(ud, name, NULL);
}

/* The queued types to serve: every loaded type with execute, or the configured list. */
static int pick_types(nd_node *n, weft_error *err)
{
    size_t i, j;
    if (n->cfg->ntypes) {
        n->types = calloc(n->cfg->ntypes, sizeof *n->types);
        if (!n->types)
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        for (i = 0; i < n->cfg->ntypes; i++) {
            const weft_task_type *t = pl_find_type(n->plugins, n->cfg->types[i], NULL);
            if (!t || !t->execute)
                return wu_err(err, WEFT_EINVAL,
                              "types: %s is not a queued task type of a loaded plugin (searched: %s)",
                              n->cfg->types[i], pl_searched(n->plugins));
            n->types[n->ntypes++] = n->cfg->types[i];
        }
        return 0;
    }
    for (i = 0; i < pl_count(n->plugins); i++) {
        const pl_plugin *p = pl_get(n->plugins, i);
        for (j = 0; j < p->ntypes; j++) {
            char **g;
            if (!p->types[j]->execute || p->types[j]->map)
                continue;
            g = realloc(n->types, (n->ntypes + 1) * sizeof *g);
            if (!g)
                return wu_err(err, WEFT_ENOMEM, "out of memory");
            n->types = g;
            n->types[n->ntypes++] = (char *)p->types[j]->name;
        }
    }
    return 0;
}

int nd_new(const cf_config *cfg, nd_node **out, weft_error *err)
{
    nd_node *n = calloc(1, sizeof *n);
    const char *path = cfg->plugin_path;
    char *dflt = NULL, host[200] = "weftd";
    size_t i;
    int rc;
    *out = NULL;
    if (!n)
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    pthread_mutex_init(&n->mu, NULL);
    n->cfg = cfg;
    n->level = WEFT_LOG_INFO;
    if (!(n->metrics = mt_new()) || !(n->epoch = rs_epoch_new(store_lost, n))) {
        nd_free(n);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    if (cfg->log_level) {
        weft_error lerr = {0};
        nd_set_level(n, cfg->log_level, &lerr); /* config.c checked the value */
    }
    gethostname(host, sizeof host - 1);
    if (cfg->daemon_id)
        snprintf(n->id, sizeof n->id, "%s", cfg->daemon_id);
    else
        snprintf(n->id, sizeof n->id, "%s-%d", host, (int)getpid());
    n->plugins = pl_new(host_table());
    if (!n->plugins) {
        nd_free(n);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    host_set_log(plugin_log, n, n->plugins); /* before the plugins' init */
    if (!path || !*path)
        path = dflt = pl_default_path();
    pl_set_config(n->plugins, cfg->plugins); /* { <plugin name>: { ... } } for types' init */
    pl_load_path(n->plugins, path ? path : "");
    free(dflt);
    for (i = 0; i < pl_failure_count(n->plugins); i++)
        nd_log(n, WEFT_LOG_WARN, "%s", pl_failure(n->plugins, i));
    n->defs.find_type = find_type;
    n->defs.ud = n->plugins;
    n->defs.searched = pl_searched(n->plugins);
    n->defs.host = host_table();
    n->defs.allow_unknown = 1;
    cf_limits(cfg, &n->limits);
    n->defs.limits = &n->limits;
    {
        char dir[4096];
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/weft-payloads", tmp && *tmp ? tmp : "/tmp");
        if ((rc = ps_dir_open(cfg->payload_dir ? cfg->payload_dir : dir, (size_t)cfg->payload_soft,
                              (size_t)cfg->payload_hard, &n->payloads, err))) {
            nd_free(n);
            return rc;
        }
    }
    if ((rc = pick_types(n, err))) {
        nd_free(n);
        return rc;
    }
    if (cfg->lock && strcmp(cfg->lock, "none")) {
        json_object *lc = NULL;
        n->lock = pl_find_lock(n->plugins, cfg->lock);
        if (!n->lock) {
            rc = wu_err(err, WEFT_EINVAL, "lock '%s': no plugin provides it (searched: %s)",
                        cfg->lock, pl_searched(n->plugins));
            nd_free(n);
            return rc;
        }
        if (cfg->plugins && json_object_object_get_ex(cfg->plugins, cfg->lock, &lc))
            json_object_get(lc);
        else if (!strcmp(cfg->lock, "redis")) {
            /* by default the redis lock lives where the workflows do */
            lc = json_object_new_object();
            json_object_object_add(lc, "url", json_object_new_string(cfg->redis_url));
            json_object_object_add(lc, "prefix", json_object_new_string(cfg->key_prefix));
        }
        n->lock_handle = n->lock->open(host_table(), lc, err);
        json_object_put(lc);
        if (!n->lock_handle) {
            wu_err_prefix(err, "lock '%s': ", cfg->lock);
            rc = err->code ? err->code : WEFT_EINVAL;
            nd_free(n);
            return rc;
        }
    }
    *out = n;
    return 0;
}

static void api_log(void *ud, int level, const char *msg)
{
    nd_log(ud, level, "%s", msg);
}

/* The REST API, sharing the node's plugins, lock and metrics. */
static int start_api(nd_node *n, weft_error *err)
{
    ap_config *a = &n->api_cfg;
    const cf_config *cfg = n->cfg;
    memset(a, 0, sizeof *a);
    a->listen = cfg->api_listen;
    a->token = cfg->api_token;
    a->body_limit = cfg->api_body_limit;
    a->threads = cfg->api_threads;
    a->max_conns = cfg->api_max_connections;
    a->max_conns_per_ip = cfg->api_max_connections_per_ip;
    a->request_timeout_ms = cfg->api_request_timeout_ms;
    a->idle_timeout_ms = cfg->api_idle_timeout_ms;
    a->store.url = cfg->redis_url;
    a->store.prefix = cfg->key_prefix;
    a->store.retention_ms = cfg->retention_ms;
    a->store.epoch = n->epoch;
    a->defs = &n->defs;
    a->lock = n->lock;
    a->lock_handle = n->lock_handle;
    a->lock_ttl_ms = cfg->lock_ttl_ms;
    a->lock_wait_ms = cfg->lock_wait_ms;
    a->command_wait_ms = cfg->command_wait_ms;
    a->sweep_ms = cfg->sweep_ms;
    a->fencing = cfg->fencing;
    a->max_reaps = cfg->max_reaps;
    a->metrics = n->metrics;
    a->payloads = n->payloads;
    a->types = (const char *const *)n->types;
    a->ntypes = n->ntypes;
    a->log = api_log;
    a->log_ud = n;
    return ap_start(a, &n->api, err);
}

void nd_stop(nd_node *n)
{
    n->stopping = 1;
}

int nd_run(nd_node *n)
{
    weft_error err = {0};
    int i, rc = 0;
    int64_t deadline;
    n->nworkers = n->cfg->workers > 0 ? n->cfg->workers : 1;
    n->workers = calloc((size_t)n->nworkers, sizeof *n->workers);
    if (!n->workers)
        return WEFT_ENOMEM;
    if ((rc = worker_init(n, &n->keeper, -1, &err))) {
        nd_log(n, WEFT_LOG_ERROR, "%s", err.msg);
        return rc;
    }
    for (i = 0; i < n->nworkers; i++)
        if ((rc = worker_init(n, &n->workers[i], i, &err))) {
            nd_log(n, WEFT_LOG_ERROR, "%s", err.msg);
            return rc;
        }
    if (n->cfg->api && (rc = start_api(n, &err))) {
        /* several daemons on one host with the defaults: the first serves the API */
        if (rc != WEFT_EEXIST || strcmp(n->cfg->api_listen, CF_API_LISTEN_DEFAULT)) {
            nd_log(n, WEFT_LOG_ERROR, "%s", err.msg);
            return rc;
        }
        nd_log(n, WEFT_LOG_WARN,
               "%s (another weftd?): running without the REST API; set api_listen to serve it",
               err.msg);
        rc = 0;
    }
    {
        char types[1024] = "";
        size_t t, used = 0;
        for (t = 0; t < n->ntypes && used < sizeof types - 130; t++)
            used += (size_t)snprintf(types + used, sizeof types - used, "%s%s", t ? "," : "",
                                     n->types[t]);
        /* rs_url: the password, if any, masked */
        nd_log(n, WEFT_LOG_INFO,
               "started: redis=%s prefix=%s workers=%d lock=%s serves=%s api=%s plugins=%s",
               rs_url(n->keeper.r), n->cfg->key_prefix, n->nworkers,
               n->lock ? n->cfg->lock : "none", n->ntypes ? types : "(nothing)",
               n->api ? ap_address(n->api) : "off", pl_searched(n->plugins));
    }
    n->running = n->nworkers;
    for (i = 0; i < n->nworkers; i++)
        if (pthread_create(&n->workers[i].thread, NULL, worker_main, &n->workers[i]) == 0)
            n->workers[i].started = 1;
        else
            __atomic_sub_fetch(&n->running, 1, __ATOMIC_ACQ_REL);
    if (pthread_create(&n->keeper.thread, NULL, keeper_main, &n->keeper) == 0)
        n->keeper.started = 1;
    while (!n->stopping)
        sleep_ms(50);
    nd_log(n, WEFT_LOG_INFO, "stopping: no new work; %lld ms for running tasks",
           (long long)n->cfg->grace_ms);
    /* no new requests; long polls and event streams end */
    ap_stop(n->api);
    n->api = NULL;
    deadline = wu_mono_ms() + n->cfg->grace_ms;
    while (__atomic_load_n(&n->running, __ATOMIC_ACQUIRE) > 0 && wu_mono_ms() < deadline)
        sleep_ms(20);
    if (__atomic_load_n(&n->running, __ATOMIC_ACQUIRE) > 0) {
        /* their leases expire and other nodes take the tasks over */
        nd_log(n, WEFT_LOG_WARN, "grace period over with tasks still running: leaving them to "
                                 "lease expiry");
        return 1;
    }
    for (i = 0; i < n->nworkers; i++)
        if (n->workers[i].started)
            pthread_join(n->workers[i].thread, NULL);
    if (n->keeper.started)
        pthread_join(n->keeper.thread, NULL);
    nd_log(n, WEFT_LOG_INFO, "stopped");
    return 0;
}

void nd_free(nd_node *n)
{
    int i;
    if (!n)
        return;
    for (i = 0; i < n->nworkers; i++)
        worker_fini(&n->workers[i]);
    ap_stop(n->api);
    n->api = NULL;
    free(n->workers);
    worker_fini(&n->keeper);
    if (n->lock && n->lock_handle)
        n->lock->close(n->lock_handle);
    ps_close(n->payloads);
    free(n->types);
    pl_free(n->plugins); /* the plugins' fini may still log, in our format */
    host_set_log(NULL, NULL, NULL);
    mt_free(n->metrics);
    rs_epoch_free(n->epoch);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

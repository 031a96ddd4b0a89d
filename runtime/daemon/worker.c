#include "daemon/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * weftd's worker threads. A worker works in rounds. Each round it takes
 * executions due for a decider and claims tasks up to ND_BATCH held at once, loads in one round
 * trip the executions it does not hold in memory, runs the tasks, and saves every execution it
 * changed with op_update_many: two round trips for the whole round. A task that a save makes
 * runnable at once (the next step of a chain, the branches of a fork) is leased to this worker in
 * that same save's steps (eager dispatch) and run next round on the execution still in memory: no
 * claim, no load. A crash leaves those leases to expire, and the keeper of any node puts them back
 * in their queues.
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
    st_lease *acks; /* claims its save consumes */
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
            fx_terminate_later(env, a->child_id);
        return 0;
    }
    if (!t->started_ms) t->started_ms = a->started_ms;
    /* started already in the worker's copy; a fresh load has not seen it */
    if (t->poll_count < a->poll_count) dec_start(dec, x, t);
    if (a->child_id[0] && !t->child_id) t->child_id = strdup(a->child_id);
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
    if (!changed) return OP_NOCHANGE;
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
int nd_want_eager(void *ud, const xc_task *t)
{
    worker *w = ud;
    nd_node *n = w->n;
    size_t i;
    if (n->stopping) return 0;
    for (i = 0; i < n->ntypes; i++)
        if (!strcmp(n->types[i], t->def->queue)) return 1;
    return 0;
}

static job *job_of(job *jobs, size_t *nj, const char *id)
{
    size_t i;
    for (i = 0; i < *nj; i++)
        if (!strcmp(jobs[i].id, id)) return &jobs[i];
    memset(&jobs[*nj], 0, sizeof jobs[*nj]);
    snprintf(jobs[*nj].id, sizeof jobs[*nj].id, "%s", id);
    return &jobs[(*nj)++];
}

static int push_lease(st_lease **v, size_t *n, const st_lease *l)
{
    st_lease *g = realloc(*v, (*n + 1) * sizeof *g);
    if (!g) return -1;
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
    if (!fresh && ST(w->st, ack, &h->l, &err) != 0) {
        lg_log(
            WEFT_LOG_WARN,
            LG_FIELDS(LG_STR("workflow", j->id), LG_STR("task_id", t->id), LG_STR("task", t->ref)),
            "%s", err.msg);
        host_result_clear(&a->r);
        return;
    }
    if (fresh) push_lease(&j->acks, &j->nacks, &h->l);
    snprintf(a->task_id, sizeof a->task_id, "%s", t->id);
    a->rc = rc;
    if (t->child_id) snprintf(a->child_id, sizeof a->child_id, "%s", t->child_id);
    a->started_ms = t->started_ms;
    a->poll_count = t->poll_count;
    j->nres++;
}

/* A busy worker's polls of a queue that keeps coming back empty thin out
 * (eager dispatch feeds it meanwhile): 2, 4, 8 ... ms up to poll_interval. */
static int64_t next_gap(const nd_node *n, int64_t gap, int got)
{
    if (got > 0 || gap < ND_BUSY_POLL_MS) return ND_BUSY_POLL_MS;
    return gap * 2 > n->cfg->poll_ms ? n->cfg->poll_ms : gap * 2;
}

/* A poll of a queue failed: back off if Redis is away, else say what. -1. */
static int poll_failed(worker *w, const char *what, const weft_error *err, int64_t *backoff)
{
    if (ST(w->st, broken))
        nd_redis_trouble(w, err, backoff);
    else if (!w->poll_refused++) /* said once until a poll goes through */
        lg_say(WEFT_LOG_ERROR, "%s: %s", what, err->msg);
    return -1;
}

/* The executions due for a decider and the claimable tasks, as far as there is room. */
static int poll_work(worker *w, int wait, char (*due)[64], int *ndue, int64_t *backoff)
{
    nd_node *n = w->n;
    weft_error err = {0};
    int64_t now = wu_mono_ms();
    int room = ND_BATCH - w->nhold, k, i, want_due, want_claim;
    st_lease got[ND_BATCH];
    *ndue = 0;
    if (n->stopping) return 0;
    /* busy with held work: look at the queues every few ms, not every round;
     * both in one round trip */
    want_due = w->due_more || !w->nhold || now - w->last_due >= w->due_gap;
    want_claim = room > 0 && n->ntypes &&
                 (w->claim_more || !w->nhold || now - w->last_claim >= w->claim_gap);
    if (!want_due && !want_claim) return 0;
    k = ST(w->st, due_claim, wait && !w->nhold ? (int)n->cfg->poll_ms : 0,
           want_due ? ND_DUE_BATCH : 0, n->cfg->sweep_ms, due, ndue, (const char *const *)n->types,
           want_claim ? n->ntypes : 0, room, n->cfg->lease_ms, got, &err);
    if (k < 0)
        return poll_failed(w, want_claim ? "claiming tasks" : "decider queue", &err, backoff);
    nd_redis_fine(w);
    if (w->poll_refused) {
        lg_say(WEFT_LOG_INFO, "polls go through again (after %d refused)", w->poll_refused);
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

/* A due execution off the decider queue: it ended, or it is missing (it
 * leaves once it has been missing for a while: its create may be on its way). */
static void forget_due(worker *w, const char *id, int missing)
{
    weft_error err = {0};
    ST(w->st, forget, id, missing, &err);
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
    st_doc e = {0};
    weft_wf_status st;
    forget_due(w, id, 0);
    if (ST(w->st, exec_read, id, &e, &err) == 0 &&
        !(xc_wf_status_parse(e.status, &st) == 0 && xc_wf_terminal(st)))
        ST(w->st, wake, id, wu_now_ms(), 0, &err);
    st_doc_clear(&e);
}

/* One round; wait: an idle worker's, whose poll first waits for new work. */
static int run_round(worker *w, int wait, int64_t *backoff)
{
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

    if (poll_work(w, wait, due, &ndue, backoff) < 0 && !w->nhold) return -1;
    if (!w->nhold && !ndue) return 0;
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
        if (!jobs[i].x) ids[nl++] = jobs[i].id;
    if (nl) {
        size_t k = 0;
        if (op_load_many(&w->op, ids, nl, xs, rcs, &err) && ST(w->st, broken))
            nd_redis_trouble(w, &err, backoff);
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
                ST(w->st, ack, &h->l, &err);
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
                forget_due(w, j->id, 1);
            else if (j->load_rc != WEFT_EIO)
                op_update(&w->op, j->id, sw_look, w, &err); /* says what is wrong with it */
            continue;
        }
        if (!j->x || (!j->nres && !j->due)) {
            if (j->nacks) {
                size_t q;
                for (q = 0; q < j->nacks; q++)
                    ST(w->st, ack, &j->acks[q], &err);
            }
            continue;
        }
        memset(it, 0, sizeof *it);
        j->ended = xc_wf_terminal(j->x->status);
        it->id = j->id;
        it->x = j->x;
        j->x = NULL;
        it->fn = j->nres ? fn_apply : sw_look;
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
                forget_due(w, it->id, 1);
            else if (it->rc != WEFT_ETIMEOUT)
                lg_log(WEFT_LOG_WARN, LG_FIELDS(LG_STR("workflow", it->id)), "%s%s",
                       j->nres ? "results not saved: " : "", it->err.msg);
        } else if (!it->saved && j->due && !j->nres) {
            /* finished: only its decider-queue entry or outbox was left */
            weft_error e = {0};
            ST(w->st, exec_flush, it->id, &e);
            if (j->ended) forget_ended(w, it->id);
        }
        for (q = 0; q < it->neager && nkeep < ND_BATCH; q++) {
            next[nkeep].l = it->eager[q];
            next[nkeep].since = wu_mono_ms();
            next[nkeep].x = NULL;
            nkeep++;
        }
        free(it->eager);
        if (it->x) j->x = it->x; /* kept in memory for its held tasks */
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

void *nd_worker_main(void *arg)
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
        if (did >= 0) pause = 10;
        if (did > 0) {
            backoff = 100;
        } else if (did < 0 && !ST(w->st, broken)) {
            /* a poll Redis refused (logged once; a lost connection already
             * backed off): ask again after 10 ms, doubling up to 2 s */
            nd_back_off(&pause);
        }
    }
    __atomic_sub_fetch(&n->running, 1, __ATOMIC_ACQ_REL);
    return NULL;
}

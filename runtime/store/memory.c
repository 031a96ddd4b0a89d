#include "store/memory.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "core/codec.h"
#include "store/memory_meta.h"
#include "store/memory_queue.h"

#define ID_MAX MQ_ID_MAX
#define TYPE_MAX MQ_TYPE_MAX
#define EVENTS_COUNT 100 /* stream entries per events() call, as redis reads them */

typedef struct mem_event_entry {
    uint64_t ms, seq;
    char *lines; /* the save's events, one line each */
} mem_event_entry;

typedef struct mem_exec {
    char id[ID_MAX];
    xc_exec *x;       /* NULL: only a wake knows this id */
    uint64_t fence;   /* as stored */
    uint64_t cmdf;    /* the fence of the save that dropped the last command */
    char *cmd;        /* the operator command waiting */
    uint64_t due_seq; /* its item on the decider queue, 0 = none */
    int64_t due_at;   /* that item's time */
    mem_event_entry *ev;
    size_t nev, capev;
    wu_vec logs; /* mem_log *: its tasks' logs */
} mem_exec;

typedef struct mem_log {
    char *task_id;
    wu_vec lines; /* char *, oldest first */
} mem_log;

typedef struct mem {
    st_store base;
    int keep_events;
    int unrecorded_eager; /* st_memory_opts */
    uint64_t seq;
    size_t rr;     /* claims start at another type each call, as redis's */
    wu_map *execs; /* borrowing: id -> mem_exec */
    wu_vec all_execs;
    mq *queues;
    mq_order due;
    mm *meta;
    mem_exec *by_obj[8192]; /* a cache: stored object -> its entry (exec_of) */
} mem;

/* ---- checks (the redis backend's, so that both refuse the same) ---- */

static int check_id(const char *id, weft_error *err)
{
    return st_check_name("workflow id", id, ID_MAX, 0, err);
}

static int check_type(const char *type, weft_error *err)
{
    return st_check_name("task type", type, TYPE_MAX, 0, err);
}

static int check_member(const char *type, const char *wf, const char *task, weft_error *err)
{
    int rc;
    if ((rc = check_type(type, err)) != 0 || (rc = check_id(wf, err)) != 0 ||
        (rc = st_check_name("task id", task, ID_MAX, 0, err)) != 0)
        return rc;
    return 0;
}

static int check_claim(const st_lease *c, weft_error *err)
{
    int rc;
    if (!c) return wu_err(err, WEFT_EINVAL, "no claim");
    if ((rc = check_type(c->type, err)) != 0) return rc;
    if (!c->lease[0])
        return wu_err(err, WEFT_EINVAL, "claim of %s|%s has no lease", c->workflow_id, c->task_id);
    return 0;
}

static int check_step(const st_step *s, weft_error *err)
{
    int rc;
    if ((unsigned)s->kind > ST_DONE)
        return wu_err(err, WEFT_EINVAL, "queue step: unknown kind %d", (int)s->kind);
    if (s->kind != ST_PUSH && s->kind != ST_UNQUEUE) return 0;
    if (s->task && s->task_id == s->task->id)
        return 0; /* named by the task object itself: its ids are made valid */
    if ((rc = check_type(s->type, err)) != 0 ||
        (rc = st_check_name("task id", s->task_id, ID_MAX, 0, err)) != 0)
        return rc;
    return 0;
}

/* What a create or save is given besides x: its steps, events and acks. */
static int check_write(const char *id, const st_step *steps, size_t nsteps,
                       const char *const *events, size_t nevents, const st_lease *acks,
                       size_t nacks, weft_error *err)
{
    size_t i;
    int rc;
    for (i = 0; i < nsteps; i++)
        if ((rc = check_step(&steps[i], err)) != 0) return wu_err_prefix(err, "workflow %s: ", id);
    for (i = 0; i < nevents; i++) {
        if (!events[i]) return wu_err(err, WEFT_EINVAL, "workflow %s: event %zu is NULL", id, i);
        if (strchr(events[i], '\n'))
            return wu_err(err, WEFT_EINVAL, "workflow %s: event %zu spans lines", id, i);
    }
    for (i = 0; i < nacks; i++)
        if ((rc = check_claim(&acks[i], err)) != 0) return rc;
    return 0;
}

/* A per-item error made ready for use: not the whole buffer, which a
 * save per task would clear each time. */
static int oom(weft_error *err)
{
    return wu_err(err, WEFT_ENOMEM, "memory store: out of memory");
}

/* ---- executions and the decider queue ---- */

static mem_exec *exec_find(const mem *m, const char *id)
{
    return wu_map_get(m->execs, id);
}

/* The entry that stores x itself (most saves are of the stored object),
 * else the entry of x's id (NULL: none). A cache hit needs no hashing of
 * the id: while an entry holds x, no other object can have its address. */
static mem_exec **obj_slot(mem *m, const xc_exec *x)
{
    return &m->by_obj[((uintptr_t)x >> 6) & 8191];
}

static mem_exec *exec_of(mem *m, const xc_exec *x)
{
    mem_exec **slot = obj_slot(m, x), *ex = *slot;
    if (ex && ex->x == x) return ex;
    if ((ex = exec_find(m, x->id)) && ex->x == x) *slot = ex;
    return ex;
}

/* Whether x is a stored object itself (cached by exec_of): no lookup. */
static int exec_known(mem *m, const xc_exec *x)
{
    const mem_exec *ex = *obj_slot(m, x);
    return ex && ex->x == x;
}

/* id's entry, made when missing; NULL when out of memory. */
static mem_exec *exec_entry(mem *m, const char *id)
{
    mem_exec *ex = exec_find(m, id);
    if (ex) return ex;
    if (!(ex = calloc(1, sizeof *ex))) return NULL;
    memcpy(ex->id, id, strnlen(id, sizeof ex->id - 1)); /* checked: under ID_MAX */
    if (wu_vec_push(&m->all_execs, ex)) {
        free(ex);
        return NULL;
    }
    if (wu_map_put(m->execs, ex->id, ex)) {
        m->all_execs.len--;
        free(ex);
        return NULL;
    }
    return ex;
}

static int due_at(mem *m, mem_exec *ex, int64_t at)
{
    ex->due_seq = ++m->seq;
    ex->due_at = at;
    return mq_order_push(&m->due, at, ex->due_seq, ex);
}

static int wake(mem *m, mem_exec *ex, int64_t at, int only_earlier)
{
    if (only_earlier && ex->due_seq && ex->due_at <= at) return 0;
    return due_at(m, ex, at);
}

/* One stream entry holding events[0..n), made ready to append
 * (events_commit): room for it, and its lines in *lines (malloc'd; NULL
 * when there is nothing to keep). 0 or WEFT_ENOMEM, nothing changed. */
static int events_prepare(mem *m, mem_exec *ex, const char *const *events, size_t n, char **lines)
{
    size_t i, len = 0;
    char *p;
    *lines = NULL;
    if (!m->keep_events || n == 0) return 0;
    if (wu_grow(&ex->ev, &ex->capev, ex->nev, 1, sizeof *ex->ev)) return WEFT_ENOMEM;
    for (i = 0; i < n; i++)
        len += strlen(events[i]) + 1;
    if (!(p = *lines = malloc(len))) return WEFT_ENOMEM;
    for (i = 0; i < n; i++) {
        size_t l = strlen(events[i]);
        memcpy(p, events[i], l);
        p += l;
        *p++ = '\n';
    }
    p[-1] = 0;
    return 0;
}

/* Append the entry events_prepare made (taking lines), numbered as redis's
 * XADD * would number it. */
static void events_commit(mem_exec *ex, char *lines)
{
    mem_event_entry *e;
    uint64_t now;
    if (!lines) return;
    now = (uint64_t)wu_now_ms();
    e = &ex->ev[ex->nev];
    e->lines = lines;
    e->ms = now;
    e->seq = 0;
    if (ex->nev && ex->ev[ex->nev - 1].ms >= now) {
        e->ms = ex->ev[ex->nev - 1].ms;
        e->seq = ex->ev[ex->nev - 1].seq + 1;
    }
    ex->nev++;
}

/* Everything the steps and acks of a write will allocate, made first, so
 * that the write is applied whole or not at all: room in their queues and
 * in the decider queue. 0 or WEFT_ENOMEM. */
static int steps_reserve(mem *m, const st_step *steps, size_t n, const st_lease *acks, size_t nacks)
{
    size_t i, all = n + nacks;
    for (i = 0; i < n; i++) {
        const st_step *st = &steps[i];
        int rc = 0;
        if (st->kind == ST_PUSH && st->lease && m->unrecorded_eager)
            continue; /* not recorded (step_apply) */
        if (st->kind == ST_PUSH)
            rc = mq_reserve(m->queues, st->type, all, st->limit ? st->limit_name : NULL, 1);
        else if (st->kind == ST_UNQUEUE)
            rc = mq_reserve(m->queues, st->type, all, NULL, 0);
        else if (st->kind == ST_WAKE)
            rc = mq_order_reserve(&m->due, n);
        if (rc) return WEFT_ENOMEM;
    }
    for (i = 0; i < nacks; i++)
        if (!(m->unrecorded_eager && acks[i].never_reaped) &&
            mq_reserve(m->queues, acks[i].type, all, NULL, 0))
            return WEFT_ENOMEM;
    return 0;
}

/* One save's or create's queue step, for the execution ex. */
static int step_apply(mem *m, mem_exec *ex, const st_step *s)
{
    switch (s->kind) {
    case ST_PUSH:
        if (s->lease && m->unrecorded_eager) return 0;
        return mq_push(m->queues, s->type, ex->id, s->task_id, &ex->x, s->task, s->at, s->lease,
                       s->lease_until, s);
    case ST_UNQUEUE:
        mq_unqueue(m->queues, s->type, ex->id, s->task_id);
        return 0;
    case ST_WAKE:
        return wake(m, ex, s->at, 1);
    case ST_DONE:
        ex->due_seq = 0;
        return 0;
    }
    return 0;
}

static int steps_apply(mem *m, mem_exec *ex, const st_step *steps, size_t n, weft_error *err)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (step_apply(m, ex, &steps[i])) return oom(err);
    return 0;
}

/* ---- executions ---- */

static int mem_exec_create_many(st_store *s, st_create *c, size_t n, weft_error *err)
{
    mem *m = (mem *)s;
    size_t i;
    for (i = 0; i < n; i++) {
        weft_error e;
        mem_exec *ex = NULL;
        st_step now = {.kind = ST_WAKE, .at = wu_now_ms()};
        wu_err_clear(&e);
        c[i].why[0] = 0;
        if (!c[i].x)
            c[i].rc = wu_err(&e, WEFT_EINVAL, "create: no execution");
        else if ((c[i].rc = check_id(c[i].x->id, &e)) == 0 &&
                 (c[i].rc = check_write(c[i].x->id, c[i].steps, c[i].nsteps, c[i].events,
                                        c[i].nevents, NULL, 0, &e)) == 0) {
            if (!(ex = exec_entry(m, c[i].x->id)))
                c[i].rc = oom(&e);
            else if (ex->x)
                c[i].rc = wu_err(&e, WEFT_EEXIST, "workflow %s already exists", c[i].x->id);
        }
        if (c[i].rc == 0) {
            const st_step *steps = c[i].nsteps ? c[i].steps : &now;
            size_t nsteps = c[i].nsteps ? c[i].nsteps : 1;
            char *lines = NULL;
            if (steps_reserve(m, steps, nsteps, NULL, 0) ||
                events_prepare(m, ex, c[i].events, c[i].nevents, &lines)) {
                c[i].rc = oom(&e);
            } else {
                ex->x = xc_ref(c[i].x);
                *obj_slot(m, ex->x) = ex; /* its first save finds it without a lookup */
                ex->fence = c[i].x->fence = 1;
                steps_apply(m, ex, steps, nsteps, &e); /* room was made */
                events_commit(ex, lines);
            }
        }
        if (c[i].rc) snprintf(c[i].why, sizeof c[i].why, "%s", e.msg);
    }
    (void)err;
    return 0;
}

static int mem_exec_load(st_store *s, const char *id, xc_exec **out, uint64_t *fence,
                         weft_error *err)
{
    mem *m = (mem *)s;
    mem_exec *ex;
    char *cmd = NULL;
    int rc;
    *out = NULL;
    if (fence) *fence = 0;
    if ((rc = check_id(id, err)) != 0) return rc;
    if (!(ex = exec_find(m, id)) || !ex->x)
        return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id);
    if (ex->cmd && !(cmd = strdup(ex->cmd))) return oom(err);
    if (fence) *fence = ex->fence;
    free(ex->x->cmd);
    ex->x->cmd = cmd;
    ex->x->fence = ex->fence;
    *out = xc_ref(ex->x);
    return 0;
}

static int mem_exec_load_many(st_store *s, const char *const *ids, size_t n, xc_exec **out,
                              int *rcs, weft_error *err)
{
    size_t i;
    for (i = 0; i < n; i++) {
        weft_error e;
        wu_err_clear(&e);
        rcs[i] = mem_exec_load(s, ids[i], &out[i], NULL, &e);
    }
    (void)err;
    return 0;
}

static int mem_exec_read(st_store *s, const char *id, st_doc *out, weft_error *err)
{
    mem *m = (mem *)s;
    mem_exec *ex;
    wu_buf b = {0};
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = check_id(id, err)) != 0) return rc;
    if (!(ex = exec_find(m, id)) || !ex->x)
        return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id);
    if (cd_doc_text(ex->x, &b) || !(out->status = strdup(weft_wf_status_name(ex->x->status))) ||
        (ex->cmd && !(out->cmd = strdup(ex->cmd)))) {
        wu_buf_free(&b);
        st_doc_clear(out);
        return oom(err);
    }
    out->doc = b.data;
    out->fence = ex->fence;
    return 0;
}

/* The search (st_ops.search) over every execution kept. */
static int mem_search(st_store *s, const st_query *q, long long *total, st_hit **hits_out,
                      size_t *n, weft_error *err)
{
    mem *m = (mem *)s;
    st_hit *hits;
    size_t i, have = 0;
    int rc;
    *total = 0;
    *hits_out = NULL;
    *n = 0;
    if ((rc = st_check_query(q, err)) != 0) return rc;
    if (!(hits = calloc(m->all_execs.len + 1, sizeof *hits))) return oom(err);
    for (i = 0; i < m->all_execs.len; i++) {
        const mem_exec *ex = m->all_execs.items[i];
        const xc_exec *x = ex->x;
        if (!x || !st_query_match(q, x->id, weft_wf_status_name(x->status), x->def->name,
                                  x->def->version, x->correlation_id, x->created_ms))
            continue;
        snprintf(hits[have].id, sizeof hits[have].id, "%s", x->id);
        hits[have++].key = !q->by_end ? x->created_ms : xc_wf_terminal(x->status) ? x->ended_ms : 0;
    }
    *total = (long long)have;
    st_hits_page(q, hits, have, n);
    *hits_out = hits;
    return 0;
}

static mem_log *log_of(mem_exec *ex, const char *task_id, int make)
{
    mem_log *l;
    size_t i;
    for (i = 0; i < ex->logs.len; i++)
        if (!strcmp(((mem_log *)ex->logs.items[i])->task_id, task_id)) return ex->logs.items[i];
    if (!make || !(l = calloc(1, sizeof *l))) return NULL;
    if (!(l->task_id = strdup(task_id)) || wu_vec_push(&ex->logs, l)) {
        free(l->task_id);
        free(l);
        return NULL;
    }
    return l;
}

static int mem_task_log_add(st_store *s, const char *workflow_id, const char *task_id,
                            const char *const *lines, size_t n, weft_error *err)
{
    mem_exec *ex;
    mem_log *l;
    size_t i;
    int rc;
    if ((rc = check_id(workflow_id, err)) != 0 ||
        (rc = st_check_name("task id", task_id, ID_MAX, 0, err)) != 0)
        return rc;
    if (!(ex = exec_find((mem *)s, workflow_id)) || !ex->x)
        return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", workflow_id);
    for (i = 0; i < n; i++)
        if (strchr(lines[i], '\n'))
            return wu_err(err, WEFT_EINVAL, "task %s: log line %zu spans lines", task_id, i);
    /* every line copied, and room for them, before one is added: all or none
     * (an empty log made for them reads as none) */
    if (!(l = log_of(ex, task_id, 1)) || wu_vec_reserve(&l->lines, n)) return oom(err);
    for (i = 0; i < n; i++)
        if (!(l->lines.items[l->lines.len + i] = strdup(lines[i]))) {
            while (i > 0)
                free(l->lines.items[l->lines.len + --i]);
            return oom(err);
        }
    l->lines.len += n;
    if (l->lines.len > ST_LOG_LINES_MAX) { /* the newest kept */
        size_t drop = l->lines.len - ST_LOG_LINES_MAX;
        for (i = 0; i < drop; i++)
            free(l->lines.items[i]);
        memmove(l->lines.items, l->lines.items + drop, ST_LOG_LINES_MAX * sizeof(void *));
        l->lines.len = ST_LOG_LINES_MAX;
    }
    return 0;
}

static int mem_task_log(st_store *s, const char *workflow_id, const char *task_id, char **lines,
                        weft_error *err)
{
    mem_exec *ex;
    mem_log *l;
    wu_buf b = {0};
    size_t i;
    int rc;
    *lines = NULL;
    if ((rc = check_id(workflow_id, err)) != 0 ||
        (rc = st_check_name("task id", task_id, ID_MAX, 0, err)) != 0)
        return rc;
    ex = exec_find((mem *)s, workflow_id);
    l = ex ? log_of(ex, task_id, 0) : NULL;
    for (i = 0; l && i < l->lines.len; i++)
        if ((i && wu_buf_add(&b, "\n", 1)) ||
            wu_buf_add(&b, l->lines.items[i], strlen(l->lines.items[i])))
            break;
    if ((l && i < l->lines.len) || !(*lines = b.data ? b.data : strdup(""))) {
        wu_buf_free(&b);
        return oom(err);
    }
    return 0;
}

/* save.lua's checks: 0, or WEFT_ESTATE/ENOTFOUND with the message. */
static int save_allowed(const mem_exec *ex, const st_save *sv, weft_error *err)
{
    const char *applied = sv->x->cmd;
    int any = applied && !strcmp(applied, "*");
    if (!ex || !ex->x) return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", sv->x->id);
    if ((ex->cmd && !any && (!applied || strcmp(applied, ex->cmd))) ||
        (!sv->fence && sv->loaded_fence && ex->cmdf > sv->loaded_fence && !any))
        return wu_err(err, WEFT_ESTATE, "execution %s has an operator command to apply first",
                      ex->id);
    if (sv->fence && sv->fence != ex->fence)
        return wu_err(err, WEFT_ESTATE,
                      "execution %s was changed by someone else (fence %llu, expected %llu)",
                      ex->id, (unsigned long long)ex->fence, (unsigned long long)sv->fence);
    return 0;
}

/* A committed write's fence: bumped, any waiting command dropped. */
static uint64_t fence_bump(mem_exec *ex)
{
    ex->fence++;
    if (ex->cmd) {
        free(ex->cmd);
        ex->cmd = NULL;
        ex->cmdf = ex->fence;
    }
    return ex->fence;
}

/* Whether every ack of sv is of an eager lease this store did not record. */
static int unrecorded_acks(const mem *m, const st_save *sv)
{
    size_t i;
    if (!m->unrecorded_eager) return 0;
    for (i = 0; i < sv->nacks; i++)
        if (!sv->acks[i].never_reaped) return 0;
    return 1;
}

static int save_one(mem *m, st_save *sv, weft_error *err)
{
    mem_exec *ex;
    char *lines = NULL;
    size_t i;
    int rc;
    if (!sv->x) return wu_err(err, WEFT_EINVAL, "save: no execution");
    /* the stored object's id was checked when it was created */
    /* acks of leases this store kept no record of (unrecorded_eager) are
     * skipped below: nothing to check either */
    if ((!exec_known(m, sv->x) && (rc = check_id(sv->x->id, err)) != 0) ||
        (rc = check_write(sv->x->id, sv->steps, sv->nsteps, sv->events, sv->nevents, sv->acks,
                          unrecorded_acks(m, sv) ? 0 : sv->nacks, err)) != 0)
        return rc;
    ex = exec_of(m, sv->x);
    if ((rc = save_allowed(ex, sv, err)) != 0) return rc;
    if (steps_reserve(m, sv->steps, sv->nsteps, sv->acks, sv->nacks) ||
        events_prepare(m, ex, sv->events, sv->nevents, &lines)) {
        free(lines);
        return oom(err);
    }
    sv->new_fence = fence_bump(ex);
    if (sv->x != ex->x) {
        xc_exec *old = ex->x;
        ex->x = xc_ref(sv->x);
        xc_free(old);
    }
    /* x is what is stored now: no command waits for it */
    ex->x->fence = ex->fence;
    free(ex->x->cmd);
    ex->x->cmd = NULL;
    steps_apply(m, ex, sv->steps, sv->nsteps, err); /* room was made */
    events_commit(ex, lines);
    for (i = 0; i < sv->nacks; i++)
        if (!(m->unrecorded_eager && sv->acks[i].never_reaped)) mq_ack(m->queues, &sv->acks[i], 0);
    return 0;
}

static int mem_exec_save_many(st_store *s, st_save *sv, size_t n, weft_error *err)
{
    size_t i;
    for (i = 0; i < n; i++) {
        weft_error e;
        wu_err_clear(&e);
        sv[i].why[0] = 0;
        sv[i].new_fence = 0;
        if ((sv[i].rc = save_one((mem *)s, &sv[i], &e)) != 0)
            snprintf(sv[i].why, sizeof sv[i].why, "%s", e.msg);
    }
    (void)err;
    return 0;
}

static int mem_exec_fail(st_store *s, const char *id, uint64_t fence, const char *why,
                         weft_error *err)
{
    mem *m = (mem *)s;
    mem_exec *ex;
    wu_buf ev = {0};
    char *reason = NULL, *lines = NULL;
    int rc;
    if ((rc = check_id(id, err)) != 0) return rc;
    if (!(ex = exec_find(m, id)) || !ex->x)
        return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id);
    if (fence && fence != ex->fence)
        return wu_err(err, WEFT_ESTATE,
                      "execution %s was changed by someone else (fence %llu, expected %llu)", id,
                      (unsigned long long)ex->fence, (unsigned long long)fence);
    /* what it allocates first: its reason, its event (events() adds
     * workflowId and time) */
    if (!(reason = strdup(why ? why : "failed")) ||
        wu_buf_add(&ev, "{\"status\":\"FAILED\",\"reason\":", 28) ||
        wu_buf_add_json_str(&ev, reason) || wu_buf_add(&ev, "}", 1) ||
        events_prepare(m, ex, (const char *const *)&ev.data, 1, &lines)) {
        free(reason);
        wu_buf_free(&ev);
        return oom(err);
    }
    wu_buf_free(&ev);
    fence_bump(ex);
    ex->x->fence = ex->fence;
    ex->x->status = WEFT_WF_FAILED;
    free(ex->x->reason);
    ex->x->reason = reason;
    ex->x->ended_ms = ex->x->updated_ms = wu_now_ms();
    ex->due_seq = 0;
    events_commit(ex, lines);
    return 0;
}

static int cmd_ended(weft_wf_status ws)
{
    return ws == WEFT_WF_COMPLETED || ws == WEFT_WF_FAILED || ws == WEFT_WF_TIMED_OUT ||
           ws == WEFT_WF_TERMINATED;
}

/* command.lua */
static int mem_exec_command(st_store *s, const char *id, const char *text, const char *kind,
                            char **pending, char status[32], weft_error *err)
{
    mem *m = (mem *)s;
    mem_exec *ex;
    char *copy;
    int rc;
    *pending = NULL;
    status[0] = 0;
    if ((rc = check_id(id, err)) != 0) return rc;
    if (!text || !kind) return wu_err(err, WEFT_EINVAL, "workflow %s: no command", id);
    if (!(ex = exec_find(m, id)) || !ex->x)
        return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id);
    if (ex->cmd) {
        const char *k = strchr(ex->cmd, '|');
        size_t n;
        k = k ? k + 1 : ex->cmd + strlen(ex->cmd);
        n = strcspn(k, "|");
        if (strlen(kind) == n && !strncmp(k, kind, n))
            rc = ST_CMD_SAME;
        else if (strcmp(kind, "terminate"))
            rc = ST_CMD_OTHER;
        if (rc) /* terminate overrides a waiting pause or resume */
            return (*pending = strdup(ex->cmd)) ? rc : oom(err);
    } else {
        weft_wf_status ws = ex->x->status;
        if ((!strcmp(kind, "terminate") && cmd_ended(ws)) ||
            (!strcmp(kind, "pause") && ws != WEFT_WF_RUNNING) ||
            (!strcmp(kind, "resume") && ws != WEFT_WF_PAUSED)) {
            snprintf(status, 32, "%s", weft_wf_status_name(ws));
            return wu_err(err, WEFT_ESTATE, "workflow %s is %s", id, status);
        }
    }
    if (!(copy = strdup(text))) return oom(err);
    free(ex->cmd);
    ex->cmd = copy;
    return ST_CMD_RECORDED;
}

static int mem_exec_flush(st_store *s, const char *id, weft_error *err)
{
    (void)s;
    return check_id(id, err);
}

static int mem_exec_exists_many(st_store *s, const char *const *ids, size_t n, int *exists,
                                weft_error *err)
{
    size_t i;
    (void)err;
    for (i = 0; i < n; i++) {
        weft_error e;
        const mem_exec *ex;
        wu_err_clear(&e);
        ex = check_id(ids[i], &e) == 0 ? exec_find((mem *)s, ids[i]) : NULL;
        exists[i] = ex && ex->x;
    }
    return 0;
}

/* ---- work queues and leases ---- */

static int mem_renew_many(st_store *s, const st_lease *c, size_t n, int64_t lease_ms, int *ok,
                          weft_error *err)
{
    mem *m = (mem *)s;
    int64_t expiry = wu_now_ms() + lease_ms;
    size_t i;
    int rc;
    if ((rc = st_check_lease("renew", lease_ms, err)) != 0) return rc;
    for (i = 0; i < n; i++)
        if ((rc = check_claim(&c[i], err)) != 0) return rc;
    for (i = 0; i < n; i++)
        if ((ok[i] = mq_renew(m->queues, &c[i], expiry)) < 0) return oom(err);
    return 0;
}

static int mem_ack(st_store *s, const st_lease *c, weft_error *err)
{
    mem *m = (mem *)s;
    int rc;
    if ((rc = check_claim(c, err)) != 0) return rc;
    if (!mq_ack(m->queues, c, 1))
        return wu_err(err, WEFT_ESTATE, "stale lease for %s|%s: result discarded", c->workflow_id,
                      c->task_id);
    return 0;
}

static int mem_reap(st_store *s, const char *type, int max_reaps, char ***exhausted,
                    size_t *nexhausted, weft_error *err)
{
    int rc;
    *exhausted = NULL;
    *nexhausted = 0;
    if ((rc = check_type(type, err)) != 0) return rc;
    if (max_reaps < 0) return wu_err(err, WEFT_EINVAL, "reap %s: max_reaps must be >= 0", type);
    rc = mq_reap(((mem *)s)->queues, type, max_reaps, exhausted, nexhausted);
    return rc < 0 ? oom(err) : rc;
}

static int mem_poll(st_store *s, const char *queue, int max, int64_t lease_ms, int max_reaps,
                    st_lease *out, int *reaped, char ***exhausted, size_t *nexhausted,
                    weft_error *err)
{
    mem *m = (mem *)s;
    int rc;
    *reaped = 0;
    *exhausted = NULL;
    *nexhausted = 0;
    if ((rc = st_check_name("task queue", queue, TYPE_MAX, 0, err)) != 0) return rc;
    if (max <= 0) return 0;
    if (lease_ms <= 0 || max_reaps < 0)
        return wu_err(err, WEFT_EINVAL, "poll %s: lease must be positive, max_reaps >= 0", queue);
    if ((rc = mq_reap(m->queues, queue, max_reaps, exhausted, nexhausted)) < 0) return oom(err);
    *reaped = rc;
    rc = mq_claim(m->queues, queue, wu_now_ms(), lease_ms, max, out);
    return rc < 0 ? oom(err) : rc;
}

static int mem_lease_extend(st_store *s, const char *queue, const char *workflow_id,
                            const char *task_id, int64_t lease_ms, weft_error *err)
{
    int rc;
    if ((rc = check_member(queue, workflow_id, task_id, err)) != 0) return rc;
    if (mq_extend(((mem *)s)->queues, queue, workflow_id, task_id, wu_now_ms() + lease_ms))
        return oom(err);
    return 0;
}

static int mem_queue_sizes(st_store *s, const char *type, long long *ready, long long *leased,
                           weft_error *err)
{
    int rc;
    if ((rc = check_type(type, err)) != 0) return rc;
    mq_sizes(((mem *)s)->queues, type, ready, leased);
    return 0;
}

static int mem_queue_has(st_store *s, const char *type, const char *workflow_id,
                         const char *task_id, weft_error *err)
{
    int rc;
    if ((rc = check_member(type, workflow_id, task_id, err)) != 0) return rc;
    return mq_has(((mem *)s)->queues, type, workflow_id, task_id);
}

static int mem_queue_polled(st_store *s, const char *queue, int64_t *ms, weft_error *err)
{
    int rc;
    *ms = 0;
    if ((rc = st_check_name("task queue", queue, TYPE_MAX, 0, err)) != 0) return rc;
    *ms = mq_polled(((mem *)s)->queues, queue);
    return 0;
}

static int mem_queue_list(st_store *s, st_qinfo **out, size_t *n, weft_error *err)
{
    return mq_list(((mem *)s)->queues, out, n) ? oom(err) : 0;
}

static int mem_queue_member(st_store *s, const char *queue, const char *workflow_id,
                            const char *task_id, st_qmember *out, weft_error *err)
{
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = check_member(queue, workflow_id, task_id, err)) != 0) return rc;
    mq_member_state(((mem *)s)->queues, queue, workflow_id, task_id, out);
    return 0;
}

static int mem_queue_limits(st_store *s, const char *queue, json_object **out, weft_error *err)
{
    int rc;
    *out = NULL;
    if ((rc = st_check_name("task queue", queue, TYPE_MAX, 0, err)) != 0) return rc;
    return (*out = mq_limits(((mem *)s)->queues, queue)) ? 0 : oom(err);
}

/* ---- the decider queue ---- */

/* The earliest time anything of the decider queue or of types' ready sets
 * is due, or INT64_MAX. */
static int64_t earliest(mem *m, const char *const *types, size_t ntypes, int due)
{
    int64_t at = INT64_MAX;
    const mq_item *it;
    size_t i;
    if (due && (it = mq_order_peek(&m->due)) && it->at < at) at = it->at;
    for (i = 0; i < ntypes; i++)
        if (mq_next(m->queues, types[i]) < at) at = mq_next(m->queues, types[i]);
    return at;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static int mem_due_claim(st_store *s, int wait_ms, int due_max, int64_t hold_ms,
                         char (*due_ids)[64], int *ndue, const char *const *types, size_t ntypes,
                         int max, int64_t lease_ms, st_lease *out, weft_error *err)
{
    mem *m = (mem *)s;
    int64_t now = wu_now_ms();
    int nd = due_max > 0, n = 0, rc, k;
    size_t i;
    if (ndue) *ndue = 0;
    if ((rc = st_check_due_claim(due_max, hold_ms, types, &ntypes, max, lease_ms, err)) != 0)
        return rc;
    if (!nd && !ntypes) return 0;
    for (i = 0; i < ntypes; i++)
        if ((rc = check_type(types[i], err)) != 0) return rc;
    if (wait_ms > 0) {
        /* nothing else runs on this store meanwhile: sleep until the first
         * thing comes due (or the wait ends), not until a wake token */
        int64_t at = earliest(m, types, ntypes, nd);
        if (at > now) {
            sleep_ms(at - now < wait_ms ? at - now : wait_ms);
            now = wu_now_ms();
        }
    }
    /* room first: an execution taken off the decider queue and not put
     * back held would never be looked at again, a task taken off ready
     * and not leased never run */
    if (nd && mq_order_reserve(&m->due, (size_t)due_max)) return oom(err);
    for (i = 0; i < ntypes; i++)
        if (mq_claim_room(m->queues, types[i], max)) return oom(err);
    if (nd) {
        /* taken first, then held: a hold of 0 must not hand one out twice */
        mq_item *it;
        while (*ndue < due_max && (it = mq_order_peek(&m->due)) && it->at <= now) {
            mem_exec *ex = it->obj;
            mq_order_pop(&m->due, it);
            ex->due_seq = 0;
            snprintf(due_ids[(*ndue)++], 64, "%s", ex->id);
        }
        for (k = 0; k < *ndue; k++)
            if (due_at(m, exec_find(m, due_ids[k]), now + hold_ms)) return oom(err);
    }
    for (i = 0; i < ntypes && n < max; i++) {
        if ((rc = mq_claim(m->queues, types[(m->rr + i) % ntypes], now, lease_ms, max - n,
                           out + n)) < 0)
            return oom(err);
        n += rc;
    }
    if (ntypes) m->rr++;
    return n;
}

static int mem_wake(st_store *s, const char *id, int64_t at, int only_earlier, weft_error *err)
{
    mem *m = (mem *)s;
    mem_exec *ex;
    int rc;
    if ((rc = check_id(id, err)) != 0) return rc;
    if (!(ex = exec_entry(m, id)) || wake(m, ex, at, only_earlier)) return oom(err);
    return 0;
}

static int mem_forget(st_store *s, const char *id, int missing, weft_error *err)
{
    mem_exec *ex;
    int rc;
    (void)missing; /* one process: a create is never behind its own steps */
    if ((rc = check_id(id, err)) != 0) return rc;
    if ((ex = exec_find((mem *)s, id))) ex->due_seq = 0;
    return 0;
}

static int mem_unfinished(st_store *s, long long *n, weft_error *err)
{
    mem *m = (mem *)s;
    size_t i;
    (void)err;
    *n = 0;
    for (i = 0; i < m->all_execs.len; i++)
        *n += ((mem_exec *)m->all_execs.items[i])->due_seq != 0;
    return 0;
}

/* ---- the status lane ---- */

static int mem_events(st_store *s, const char *workflow_id, const char *after_id, char *next_id,
                      int block_ms, int (*fn)(void *ud, const char *id, const char *json), void *ud,
                      weft_error *err)
{
    mem *m = (mem *)s;
    char seen[ST_EVENT_ID_MAX], next[ST_EVENT_ID_MAX], evid[ST_EVENT_ID_MAX + 24];
    unsigned long long ms, seq = 0;
    const mem_exec *ex;
    wu_buf full = {0};
    long long skip;
    size_t lo, hi, e, read = 0;
    int rc, n = 0, stop = 0;

    if ((rc = check_id(workflow_id, err)) != 0) return rc;
    if (block_ms < 0) return wu_err(err, WEFT_EINVAL, "events of %s: negative wait", workflow_id);
    if ((rc = st_event_id_parse(after_id, seen, &skip, err)) != 0)
        return wu_err_prefix(err, "events of %s: ", workflow_id);
    snprintf(next, sizeof next, "%s", after_id && *after_id ? after_id : "0");
    ms = strtoull(seen, NULL, 10);
    if (strchr(seen, '-')) seq = strtoull(strchr(seen, '-') + 1, NULL, 10);
    ex = exec_find(m, workflow_id);
    /* the first entry after the one seen (or the one seen itself, when an
     * event inside it was the last one read) */
    lo = 0;
    hi = ex ? ex->nev : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const mem_event_entry *v = &ex->ev[mid];
        int after = v->ms > ms || (v->ms == ms && (v->seq > seq || (skip >= 0 && v->seq == seq)));
        if (after)
            hi = mid;
        else
            lo = mid + 1;
    }
    for (e = lo; ex && e < ex->nev && read < EVENTS_COUNT && !stop; e++, read++) {
        const mem_event_entry *v = &ex->ev[e];
        int again = skip >= 0 && v->ms == ms && v->seq == seq;
        const char *line = v->lines;
        long long k;
        char entry[ST_EVENT_ID_MAX];
        snprintf(entry, sizeof entry, "%llu-%llu", (unsigned long long)v->ms,
                 (unsigned long long)v->seq);
        /* a stop takes effect after the entry: the rest of it is delivered */
        for (k = 0; line; k++) {
            const char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            if (!(again && k <= skip)) {
                n++;
                snprintf(evid, sizeof evid, "%s-%lld", entry, k);
                if (fn && st_event_text(&full, workflow_id, v->ms, line, len) == 0 &&
                    fn(ud, evid, full.data))
                    stop = 1;
            }
            line = nl ? nl + 1 : NULL;
        }
        snprintf(next, sizeof next, "%s", entry);
    }
    if (next_id) snprintf(next_id, ST_EVENT_ID_MAX, "%s", next);
    wu_buf_free(&full);
    return n;
}

int64_t st_memory_next(st_store *s, const char *const *types, size_t ntypes)
{
    int64_t at = earliest((mem *)s, types, ntypes, 1);
    return at == INT64_MAX ? 0 : at > 0 ? at : 1; /* 0 says "nothing" */
}

/* ---- the handle ---- */

mm *st_memory_meta(st_store *s)
{
    return ((mem *)s)->meta;
}

static const char *mem_where(st_store *s)
{
    (void)s;
    return "memory";
}

static void mem_revive(st_store *s)
{
    (void)s;
}

static int mem_broken(const st_store *s)
{
    (void)s;
    return 0;
}

static int mem_ping(st_store *s, weft_error *err)
{
    (void)s;
    (void)err;
    return 0;
}

static void mem_free(st_store *s)
{
    mem *m = (mem *)s;
    size_t i, j;
    if (!m) return;
    for (i = 0; i < m->all_execs.len; i++) {
        mem_exec *ex = m->all_execs.items[i];
        for (j = 0; j < ex->nev; j++)
            free(ex->ev[j].lines);
        free(ex->ev);
        free(ex->cmd);
        for (j = 0; j < ex->logs.len; j++) {
            mem_log *l = ex->logs.items[j];
            size_t k;
            for (k = 0; k < l->lines.len; k++)
                free(l->lines.items[k]);
            wu_vec_free(&l->lines);
            free(l->task_id);
            free(l);
        }
        wu_vec_free(&ex->logs);
        xc_free(ex->x);
        free(ex);
    }
    wu_vec_free(&m->all_execs);
    wu_map_free(m->execs);
    mq_free(m->queues);
    mq_order_free(&m->due);
    mm_free(m->meta);
    free(m);
}

static const st_ops mem_ops = {
    .size = sizeof(st_ops),
    .name = "memory",
    .free = mem_free,
    .where = mem_where,
    .revive = mem_revive,
    .broken = mem_broken,
    .ping = mem_ping,
    .exec_create_many = mem_exec_create_many,
    .exec_load = mem_exec_load,
    .exec_load_many = mem_exec_load_many,
    .exec_read = mem_exec_read,
    .exec_save_many = mem_exec_save_many,
    .exec_fail = mem_exec_fail,
    .exec_command = mem_exec_command,
    .exec_flush = mem_exec_flush,
    .exec_exists_many = mem_exec_exists_many,
    .renew_many = mem_renew_many,
    .ack = mem_ack,
    .reap = mem_reap,
    .poll = mem_poll,
    .lease_extend = mem_lease_extend,
    .queue_sizes = mem_queue_sizes,
    .queue_has = mem_queue_has,
    .due_claim = mem_due_claim,
    .wake = mem_wake,
    .forget = mem_forget,
    .unfinished = mem_unfinished,
    .def_register = mm_def_register,
    .def_get = mm_def_get,
    .def_list = mm_def_list,
    .taskdef_put = mm_taskdef_put,
    .taskdef_get = mm_taskdef_get,
    .taskdef_list = mm_taskdef_list,
    .taskdefs_get = mm_taskdefs_get,
    .idem_claim = mm_idem_claim,
    .daemon_beat = mm_daemon_beat,
    .daemons = mm_daemons,
    .daemons_forget = mm_daemons_forget,
    .secret_set = mm_secret_set,
    .secret_get = mm_secret_get,
    .secret_delete = mm_secret_delete,
    .secret_names = mm_secret_names,
    .events = mem_events,
    .queue_polled = mem_queue_polled,
    .queue_member = mem_queue_member,
    .queue_limits = mem_queue_limits,
    .search = mem_search,
    .task_log_add = mem_task_log_add,
    .task_log = mem_task_log,
    .queue_list = mem_queue_list,
};

int st_memory_open(const st_memory_opts *o, st_store **out, weft_error *err)
{
    mem *m;
    int rc;
    *out = NULL;
    if ((rc = st_check(&mem_ops, err)) != 0) return rc;
    if (!(m = calloc(1, sizeof *m))) return oom(err);
    m->base.ops = &mem_ops;
    m->keep_events = o ? o->keep_events : 1;
    m->unrecorded_eager = o ? o->unrecorded_eager : 0;
    m->due.seq_off = offsetof(mem_exec, due_seq);
    m->execs = wu_map_new_borrowing();
    m->queues = mq_new();
    m->meta = mm_new();
    if (!m->execs || !m->queues || !m->meta) {
        mem_free(&m->base);
        return oom(err);
    }
    *out = &m->base;
    return 0;
}

#include "core/ops.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/codec.h"
#include "core/defcache.h"
#include "core/effects.h"
#include "core/served.h"

/* How long an update keeps redoing its change after losing fence races. */
#define OP_RACE_MS 10000

/* How long a look (op_item.look) redoes its change after losing a fence
 * race: a busy workflow's decider saves every few ms, and a sweeper that
 * raced it for OP_RACE_MS held a worker for 10 s to no end. */
#define OP_LOOK_RACE_MS 200

/* How long op_command waits for its command to land, unless told. */
#define OP_COMMAND_WAIT_MS 10000

int op_def(op_env *env, const char *json, const char *source, def_workflow **out, weft_error *err)
{
    return dc_compile(env->cache, env->defs, json, source, out, err);
}

int op_load_many(op_env *env, const char *const *ids, size_t n, xc_exec **out, int *rcs,
                 weft_error *err)
{
    return ST(env->st, exec_load_many, ids, n, out, rcs, err);
}

int op_load(op_env *env, const char *id, xc_exec **out, uint64_t *fence, weft_error *err)
{
    return ST(env->st, exec_load, id, out, fence, err);
}

json_object *op_summary(const xc_exec *x, int arg)
{
    (void)arg;
    return xc_summary(x);
}

json_object *op_workflow(const xc_exec *x, int tasks)
{
    json_object *j = xc_to_json(x);
    if (!tasks) json_object_object_add(j, "tasks", json_object_new_array());
    return j;
}

int op_search(op_env *env, const st_query *q, int workflows, json_object **res, weft_error *err)
{
    long long total = 0;
    json_object *results;
    int rc = op_find(env, q, workflows ? op_workflow : op_summary, 0, &total, &results, err);
    *res = NULL;
    if (rc) return rc;
    *res = json_object_new_object();
    json_object_object_add(*res, "totalHits", json_object_new_int64(total));
    json_object_object_add(*res, "results", results);
    return 0;
}

int op_find(op_env *env, const st_query *q, json_object *(*shape)(const xc_exec *x, int arg),
            int arg, long long *total, json_object **out, weft_error *err)
{
    st_hit *h = NULL;
    size_t n = 0, i;
    const char **ids = NULL;
    xc_exec **xs = NULL;
    int *rcs = NULL, rc;
    *out = NULL;
    if ((rc = ST(env->st, search, q, total, &h, &n, err)) != 0) return rc;
    ids = calloc(n + 1, sizeof *ids);
    xs = calloc(n + 1, sizeof *xs);
    rcs = calloc(n + 1, sizeof *rcs);
    if (!ids || !xs || !rcs) {
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++)
        ids[i] = h[i].id;
    if (n && (rc = ST(env->st, exec_load_many, ids, n, xs, rcs, err)) != 0) goto out;
    *out = json_object_new_array();
    for (i = 0; i < n; i++)
        if (rcs[i] == 0) { /* (one gone since the search is left out) */
            json_object_array_add(*out, shape(xs[i], arg));
            xc_free(xs[i]);
        }
out:
    free(h);
    free(ids);
    free(xs);
    free(rcs);
    return rc;
}

/* ---- status lane events, collected while a change runs ---- */

/* A log line of a change (op_hooks.note): its level, what it is about as
 * fields, its message. One allocation: the strings follow the struct. */
typedef struct note {
    int level;
    lg_field f[7]; /* workflow, name, task, type, status, reason; the end */
    const char *msg;
} note;

typedef struct collect {
    wu_vec events;         /* char * JSON texts */
    wu_vec notes;          /* note *: log lines for op_hooks.note */
    int ended;             /* the workflow's end is noted */
    const op_hooks *hooks; /* its change hook hears of every change */
} collect;

/* A log line of a change, kept until the change is saved: failures,
 * retries, timeouts and the workflow's end. Plain progress (a task started or
 * completed) is left to the status lane, so successes cost nothing here. */
/* A note of level with msg about x (and t), with its reason (NULL: none),
 * kept in c. */
static void add_note(collect *c, int level, const xc_exec *x, const xc_task *t, const char *status,
                     const char *reason, const char *msg)
{
    const char *v[6] = {x->id,  x->def->name, t ? t->ref : NULL, t ? t->def->type_name : NULL,
                        status, reason};
    static const char *const keys[6] = {"workflow", "name", "task", "type", "status", "reason"};
    size_t len = sizeof(note) + strlen(msg) + 1, i, k = 0;
    note *n;
    char *p;
    for (i = 0; i < 6; i++)
        len += v[i] ? strlen(v[i]) + 1 : 0;
    if (!(n = malloc(len))) return;
    n->level = level;
    p = (char *)(n + 1);
    for (i = 0; i < 6; i++)
        if (v[i]) {
            n->f[k++] = (lg_field)LG_STR(keys[i], strcpy(p, v[i]));
            p += strlen(v[i]) + 1;
        }
    n->f[k] = (lg_field){.key = NULL};
    n->msg = strcpy(p, msg);
    if (wu_vec_push(&c->notes, n)) free(n);
}

static void note_change(collect *c, const xc_exec *x, const xc_task *t)
{
    char msg[128];
    const char *why;
    if (!t) {
        if (!xc_wf_terminal(x->status) || c->ended) return;
        c->ended = 1;
        why = x->status == WEFT_WF_COMPLETED ? NULL : x->reason ? x->reason : "no reason given";
        snprintf(msg, sizeof msg, "workflow %s", weft_wf_status_name(x->status));
        add_note(c, why ? WEFT_LOG_WARN : WEFT_LOG_INFO, x, NULL, weft_wf_status_name(x->status),
                 why, msg);
    } else if (t->status == WEFT_TASK_FAILED || t->status == WEFT_TASK_FAILED_WITH_TERMINAL_ERROR ||
               t->status == WEFT_TASK_TIMED_OUT) {
        snprintf(msg, sizeof msg, "task %s", weft_task_status_name(t->status));
        add_note(c, WEFT_LOG_WARN, x, t, weft_task_status_name(t->status),
                 t->reason ? t->reason : "no reason given", msg);
    } else if (t->status == WEFT_TASK_SCHEDULED && t->retry_count > 0) {
        if (t->retry_count <= t->def->retry_count)
            snprintf(msg, sizeof msg, "task retry %d of %d", t->retry_count, t->def->retry_count);
        else /* an operator's retry of the workflow */
            snprintf(msg, sizeof msg, "task retry %d", t->retry_count);
        add_note(c, WEFT_LOG_INFO, x, t, NULL, NULL, msg);
    }
}

static void on_change(void *ud, const xc_exec *x, const xc_task *t)
{
    collect *c = ud;
    wu_buf b = {0};
    if (c->hooks && c->hooks->change) c->hooks->change(c->hooks->ud, x, t);
    if (cd_event_text(x, t, &b) || wu_vec_push(&c->events, b.data)) wu_buf_free(&b);
    note_change(c, x, t);
}

static void collect_clear(collect *c)
{
    size_t i;
    for (i = 0; i < c->events.len; i++)
        free(c->events.items[i]);
    c->events.len = 0;
    for (i = 0; i < c->notes.len; i++)
        free(c->notes.items[i]);
    c->notes.len = 0;
    c->ended = 0;
}

/* ---- saving ---- */

/* The notes of a saved change, to the log. */
static void say_notes(op_env *env, const collect *col)
{
    size_t i;
    for (i = 0; env->hooks && env->hooks->note && i < col->notes.len; i++) {
        const note *n = col->notes.items[i];
        env->hooks->note(env->hooks->ud, n->level, n->f, n->msg);
    }
}

/* After a save of x: its start counted when first (the first save since
 * its create or restart: the fence it was loaded at is the create's, or it
 * was revived), its log lines, and its cascades queued (effects.h). */
static void after_save(op_env *env, xc_exec *x, const dec_out *o, const collect *col, int first)
{
    if (first && env->hooks && env->hooks->started) env->hooks->started(env->hooks->ud, x);
    say_notes(env, col);
    fx_after(env, x, o);
}

/* A change made, and what saving it takes. */
typedef struct prep {
    xc_exec *x;
    dec_out o;
    collect col;
    st_step *steps;
    size_t nsteps;
} prep;

static void prep_clear(prep *p)
{
    dec_out_free(&p->o);
    collect_clear(&p->col);
    wu_vec_free(&p->col.events);
    wu_vec_free(&p->col.notes);
    free(p->steps);
    xc_free(p->x);
    memset(p, 0, sizeof *p);
}

/* After a decision: x's queue steps (fx_steps). 0 or WEFT_ENOMEM. */
static int prep_write(op_env *env, const dec_env *dec, prep *p, int follow, size_t *room,
                      st_lease **eager, size_t *neager)
{
    return fx_steps(env, dec, p->x, &p->o, follow, &p->steps, &p->nsteps, room, eager, neager)
               ? WEFT_ENOMEM
               : 0;
}

/* After a change: prep_write (leasing tasks eagerly as room permits), and
 * in sv the save that writes it. */
static int prepare(op_env *env, const dec_env *dec, prep *p, size_t *room, st_lease **eager,
                   size_t *neager, st_save *sv)
{
    if (prep_write(env, dec, p, env->client, room, eager, neager)) return WEFT_ENOMEM;
    memset(sv, 0, sizeof *sv);
    sv->x = p->x;
    sv->fence = env->unfenced ? 0 : p->x->fence;
    sv->loaded_fence = p->x->fence;
    sv->steps = p->steps;
    sv->nsteps = p->nsteps;
    sv->events = (const char *const *)p->col.events.items;
    sv->nevents = p->col.events.len;
    return 0;
}

static int update_from(op_env *env, const char *id, xc_exec *loaded, op_fn fn, void *ud,
                       int64_t race_ms, weft_error *err);
static int fn_none(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err);

int op_update(op_env *env, const char *id, op_fn fn, void *ud, weft_error *err)
{
    return op_update_from(env, id, NULL, fn, ud, err);
}

static const char *const cmd_kinds[] = {"terminate", "pause", "resume"};

/*
 * Apply the operator command x was loaded with ("<token>|<kind>|<reason>",
 * rs_exec_command), before any other change: x->cmd stays set, so the save
 * tells the store it was applied. command.lua checked the status when it
 * recorded the command and no save since went without it, so it applies;
 * a command that somehow does not is dropped all the same. 1 when there
 * was one (x must be saved), else 0.
 */
static int apply_cmd(const dec_env *dec, xc_exec *x, dec_out *o)
{
    const char *kind, *reason;
    weft_error ignored = {0};
    size_t n, k;
    if (!x->cmd) return 0;
    kind = strchr(x->cmd, '|');
    kind = kind ? kind + 1 : "";
    n = strcspn(kind, "|");
    reason = kind[n] ? kind + n + 1 : "";
    for (k = 0; k < sizeof cmd_kinds / sizeof cmd_kinds[0]; k++)
        if (strlen(cmd_kinds[k]) == n && !strncmp(kind, cmd_kinds[k], n)) break;
    switch (k) {
    case OP_TERMINATE:
        dec_end(dec, x, WEFT_WF_TERMINATED, *reason ? reason : "terminated", o);
        break;
    case OP_PAUSE:
        dec_pause(dec, x, &ignored);
        break;
    case OP_RESUME:
        dec_resume(dec, x, &ignored);
        break;
    default:
        break; /* unknown: dropped */
    }
    return 1;
}

int op_update_from(op_env *env, const char *id, xc_exec *loaded, op_fn fn, void *ud,
                   weft_error *err)
{
    return update_from(env, id, loaded, fn, ud, OP_RACE_MS, err);
}

static int update_from(op_env *env, const char *id, xc_exec *loaded, op_fn fn, void *ud,
                       int64_t race_ms, weft_error *err)
{
    char token[128] = "";
    int locked = 0, attempt, rc = 0, cmd, frc, later;
    dec_env dec = *env->dec;

    dec.on_change = on_change;
    if (env->lock) {
        rc = env->lock->acquire(env->lock_handle, id, env->lock_ttl_ms, env->lock_wait_ms, token,
                                sizeof token, err);
        if (rc) {
            xc_free(loaded);
            return rc;
        }
        locked = 1;
    }
    if (loaded && env->unfenced) {
        /* a copy loaded before the lock was had may be older than what is
         * stored, and with fencing off nothing would refuse its save: it
         * would undo a newer change (an operator's pause) */
        xc_free(loaded);
        loaded = NULL;
    }
    int64_t until = wu_mono_ms() + race_ms;
    for (attempt = 0;; attempt++) {
        prep p;
        st_save sv;
        uint64_t fence = 0;

        memset(&p, 0, sizeof p);
        if (loaded) {
            /* the caller's copy: the fence tells whether it is still current */
            p.x = loaded;
            fence = p.x->fence;
            loaded = NULL;
            rc = 0;
        } else {
            rc = ST(env->st, exec_load, id, &p.x, &fence, err);
        }
        if (rc == WEFT_EINVAL && fence > 0) {
            /* unreadable: fail it with the reason, once */
            char why[WEFT_ERROR_MAX];
            snprintf(why, sizeof why, "%s", err->msg);
            rc = ST(env->st, exec_fail, id, fence, why, err);
            if (rc == WEFT_ESTATE) continue;
            if (rc == 0) rc = wu_err(err, WEFT_EINVAL, "%s (the workflow was failed)", why);
            break;
        }
        if (rc) break;
        dec.ud = &p.col;
        p.col.hooks = env->hooks;
        cmd = apply_cmd(&dec, p.x, &p.o);
        /* a command applied is saved on its own, and fn runs on what that
         * save left: fn may drop the tasks the command's actions point at
         * (a restart after a terminate resets them) */
        later = cmd && fn != fn_none;
        frc = later ? OP_NOCHANGE : fn(env, &dec, p.x, &p.o, ud, err);
        if (frc != 0 && !cmd) {
            /* fn's own error (WEFT_ESTATE too) is final: no redo */
            prep_clear(&p);
            rc = frc == OP_NOCHANGE ? 0 : frc;
            break;
        }
        /* an operator command applied is saved even when fn then failed */
        if ((rc = prepare(env, &dec, &p, NULL, NULL, NULL, &sv)) != 0)
            wu_err(err, rc, "out of memory");
        else if ((rc = ST(env->st, exec_save_many, &sv, 1, err)) == 0 && sv.rc)
            rc = wu_err(err, sv.rc, "%s", sv.why);
        else if (rc == 0)
            after_save(env, p.x, &p.o, &p.col, p.x->fence == 1 || p.x->revived);
        prep_clear(&p);
        if (rc == 0 && later) continue; /* now fn, on the execution loaded anew */
        if (rc == 0) {
            if (frc != OP_NOCHANGE)
                rc = frc; /* fn's message is still in err: a successful save writes none */
            break;
        }
        if (rc != WEFT_ESTATE) break;
        if (wu_mono_ms() >= until) {
            wu_err_prefix(err, "gave up after %d attempts in %lld ms: ", attempt + 1,
                          (long long)race_ms);
            break;
        }
        /* someone saved newer state: load it and redo the change, after a
         * short random pause so two racers fall out of step */
        if (attempt > 2) {
            struct timespec ts = {0,
                                  (long)(rand() % (attempt < 20 ? attempt * 100 : 2000)) * 1000L};
            nanosleep(&ts, NULL);
        }
    }
    if (locked) {
        weft_error e = {0};
        env->lock->release(env->lock_handle, id, token, &e);
    }
    fx_drain(env); /* the cascade steps this update queued */
    return rc;
}

/* Drop claims one by one (an item that made no save, or was redone alone). */
static void ack_each(op_env *env, const op_item *it)
{
    size_t i;
    for (i = 0; i < it->nacks; i++) {
        weft_error e = {0};
        ST(env->st, ack, &it->acks[i], &e);
    }
}

/* An item that cannot go in the batch: alone, as op_update_from would (a
 * look that keeps losing races gives up soon, quietly: see op_item.look). */
static void one_by_one(op_env *env, op_item *it, xc_exec *x)
{
    int look = it->look && !(x && x->cmd);
    it->rc =
        update_from(env, it->id, x, it->fn, it->ud, look ? OP_LOOK_RACE_MS : OP_RACE_MS, &it->err);
    it->saved = it->rc == 0;
    if (look && it->rc == WEFT_ESTATE)
        it->rc = 0; /* a newer save than its own was made: not saved, no error */
    if (it->rc == 0) ack_each(env, it);
}

void op_update_many(op_env *env, op_item *items, size_t n, size_t *room)
{
    prep *p = calloc(n + 1, sizeof *p);
    st_save *sv = calloc(n + 1, sizeof *sv);
    const char **ids = calloc(n + 1, sizeof *ids);
    xc_exec **xs = calloc(n + 1, sizeof *xs);
    int *rcs = calloc(n + 1, sizeof *rcs);
    size_t *at = calloc(n + 1, sizeof *at);
    size_t i, nl = 0, ns = 0;
    weft_error err = {0};

    for (i = 0; i < n; i++) {
        items[i].rc = 0;
        items[i].saved = 0;
        items[i].eager = NULL;
        items[i].neager = 0;
        items[i].err.msg[0] = 0;
    }
    if (!p || !sv || !ids || !xs || !rcs || !at || env->lock) {
        /* out of memory, or a lock to take per execution: one by one */
        for (i = 0; i < n; i++) {
            one_by_one(env, &items[i], items[i].x);
            items[i].x = NULL;
        }
        goto out;
    }
    /* those not loaded yet: one round trip */
    for (i = 0; i < n; i++)
        if (!items[i].x) ids[nl++] = items[i].id;
    if (nl) {
        size_t k = 0;
        op_load_many(env, ids, nl, xs, rcs, &err);
        for (i = 0; i < n; i++)
            if (!items[i].x) {
                /* NULL when unreadable or gone: op_update says how, below */
                p[i].x = xs[k];
                if (rcs[k] == WEFT_EIO)
                    items[i].rc = wu_err(&items[i].err, WEFT_EIO, "%s", err.msg);
                k++;
            } else {
                p[i].x = items[i].x;
            }
    } else {
        for (i = 0; i < n; i++)
            p[i].x = items[i].x;
    }
    for (i = 0; i < n; i++) {
        op_item *it = &items[i];
        prep *pp = &p[i];
        dec_env dec = *env->dec;
        int rc;
        it->x = NULL;
        if (it->rc) continue;
        if (!pp->x || pp->x->cmd) {
            /* its error (or a failed corrupt workflow); or an operator
             * command to apply first, whatever fn says: alone */
            one_by_one(env, it, pp->x);
            pp->x = NULL;
            continue;
        }
        dec.on_change = on_change;
        dec.ud = &pp->col;
        pp->col.hooks = env->hooks;
        rc = it->fn(env, &dec, pp->x, &pp->o, it->ud, &it->err);
        if (rc) {
            if (rc == OP_NOCHANGE) {
                ack_each(env, it);
                if (it->keep) {
                    it->x = pp->x;
                    pp->x = NULL;
                }
            } else {
                it->rc = rc;
            }
            prep_clear(pp);
            continue;
        }
        if (prepare(env, &dec, pp, room, &it->eager, &it->neager, &sv[ns])) {
            it->rc = wu_err(&it->err, WEFT_ENOMEM, "out of memory");
            prep_clear(pp);
            continue;
        }
        sv[ns].acks = it->acks;
        sv[ns].nacks = it->nacks;
        at[ns++] = i;
    }
    if (ns && ST(env->st, exec_save_many, sv, ns, &err))
        for (i = 0; i < ns; i++)
            if (sv[i].rc == 0) {
                /* the whole call failed: nothing of this item is known saved */
                sv[i].rc = err.code ? err.code : WEFT_EIO;
                snprintf(sv[i].why, sizeof sv[i].why, "%s", err.msg);
            }
    for (i = 0; i < ns; i++) {
        op_item *it = &items[at[i]];
        prep *pp = &p[at[i]];
        if (sv[i].rc == 0) {
            int first = pp->x->fence == 1 || pp->x->revived;
            pp->x->fence = sv[i].new_fence;
            pp->x->revived = 0;
            it->saved = 1;
            after_save(env, pp->x, &pp->o, &pp->col, first);
            if (it->keep || it->neager) {
                it->x = pp->x;
                pp->x = NULL;
            }
        } else {
            /* nothing of it was applied: no eager leases were written */
            free(it->eager);
            it->eager = NULL;
            if (room) *room += it->neager;
            it->neager = 0;
            if (sv[i].rc == WEFT_ESTATE) {
                /* someone saved since: redo it alone on fresh state */
                prep_clear(pp);
                one_by_one(env, it, NULL);
                continue;
            }
            it->rc = wu_err(&it->err, sv[i].rc, "%s", sv[i].why);
        }
        prep_clear(pp);
    }
out:
    fx_drain(env);
    if (p)
        for (i = 0; i < n; i++)
            prep_clear(&p[i]);
    free(p);
    free(sv);
    free(ids);
    free(xs);
    free(rcs);
    free(at);
}

/* What every start does to its new execution before the create. */
static void start_fill(const op_start_args *a, xc_exec *x)
{
    if (a->correlation_id) x->correlation_id = strdup(a->correlation_id);
    if (a->parent_id) {
        x->parent_id = strdup(a->parent_id);
        x->parent_task_id = a->parent_task_id ? strdup(a->parent_task_id) : NULL;
    }
    x->depth = a->depth;
    x->priority = a->priority;
    x->task_to_domain = a->task_to_domain ? json_object_get(a->task_to_domain) : NULL;
}

/*
 * The create of p->x into c (borrowing from p), with the first decision
 * when the starter can make it. That is when the first task is queued (no
 * plugin code runs for it, so any client can): the execution is created
 * with that task scheduled, its push in the create's steps and its event
 * on the status lane, and no decider has to load and save it first; the
 * decider queue sees it again only after sweep_ms (or a timeout), like any
 * execution waiting on a task. A start with an idempotency key may race
 * another for its id, and the create applies its steps whether or not the
 * id was free: it only wakes a decider. 0 or WEFT_ENOMEM.
 */
static int start_create(op_env *env, const op_start_args *a, prep *p, st_create *c)
{
    dec_env dec;
    memset(c, 0, sizeof *c);
    c->x = p->x;
    if (!env->dec || a->idempotency_key || !dec_can_start(p->x)) return 0;
    dec = *env->dec;
    dec.on_change = on_change;
    dec.ud = &p->col;
    p->col.hooks = env->hooks;
    dec_decide(&dec, p->x, &p->o);
    if (prep_write(env, &dec, p, 0, NULL, NULL, NULL)) return WEFT_ENOMEM;
    c->steps = p->steps;
    c->nsteps = p->nsteps;
    c->events = (const char *const *)p->col.events.items;
    c->nevents = p->col.events.len;
    return 0;
}

/* Every queued task of def whose taskToDomain entry (its name's, or "*"
 * for an external type) names a domain: "<domain>:<queue>" fits the
 * stores' names. 0 or WEFT_EINVAL naming the entry, domain and task. */
static int check_domain_queues(const def_workflow *def, json_object *m, weft_error *err)
{
    size_t i;
    for (i = 0; i < def->all.len; i++) {
        const def_task *t = def->all.items[i];
        const char *key = t->name, *p, *d;
        size_t k;
        json_object *v;
        if (!t->type->execute || t->type->map) continue;
        if (!json_object_object_get_ex(m, key, &v) &&
            (!(t->type->flags & WEFT_TASK_EXTERNAL) ||
             !json_object_object_get_ex(m, key = "*", &v)))
            continue;
        for (p = json_object_get_string(v); wu_list_next(&p, &d, &k);)
            if (k + 1 + strlen(t->queue) >= XC_QUEUE_MAX &&
                !(k == 9 && !strncasecmp(d, "NO_DOMAIN", 9)))
                return wu_err(err, WEFT_EINVAL,
                              "taskToDomain.%s: domain '%.*s' with task '%s' makes a queue name "
                              "over %d bytes",
                              key, (int)k, d, t->ref, XC_QUEUE_MAX - 1);
    }
    return 0;
}

/* Every task of a new run something can run (served.h): none waits for a
 * worker that cannot exist. Checked once a run is to be made (a start
 * again with its idempotency key finds the first, whatever runs now). */
static int check_served(op_env *env, const op_start_args *a, weft_error *err)
{
    if (a->unchecked_types) return 0;
    return sv_check(env->st, env->defs, a->def, a->task_to_domain, 1, err);
}

/* A new execution of a->def, its start's arguments checked. */
static int start_new(const op_start_args *a, xc_exec **x, weft_error *err)
{
    int rc;
    if (a->input && !json_object_is_type(a->input, json_type_object))
        return wu_err(err, WEFT_EINVAL, "workflow input must be a JSON object");
    if (a->priority < 0 || a->priority > 99)
        return wu_err(err, WEFT_EINVAL, "priority must be a whole number from 0 to 99 (got %d)",
                      a->priority);
    if (a->task_to_domain) {
        rc = op_check_domains(a->task_to_domain, err);
        if (rc || (rc = check_domain_queues(a->def, a->task_to_domain, err))) return rc;
    }
    return xc_new(a->def, a->input, a->id, x, err);
}

int op_start(op_env *env, const op_start_args *a, char id_out[64], weft_error *err)
{
    prep p;
    st_create c;
    char existing[64];
    int rc;

    memset(&p, 0, sizeof p);
    if ((rc = start_new(a, &p.x, err))) return rc;
    if (a->idempotency_key) {
        rc = ST(env->st, idem_claim, a->idempotency_key, p.x->id, existing, err);
        if (rc == WEFT_EEXIST) {
            /* the same start again: its workflow, whether or not it got created */
            int there = 0;
            const char *ids[1] = {existing};
            snprintf(id_out, 64, "%s", existing);
            if ((rc = ST(env->st, exec_exists_many, ids, 1, &there, err)) || there) {
                prep_clear(&p);
                return rc;
            }
            snprintf(p.x->id, sizeof p.x->id, "%.36s", existing);
            json_object_put(p.x->j_id);
            p.x->j_id = json_object_new_string(p.x->id);
        } else if (rc) {
            prep_clear(&p);
            return rc;
        }
    }
    if ((rc = check_served(env, a, err))) {
        prep_clear(&p);
        return rc;
    }
    start_fill(a, p.x);
    if (start_create(env, a, &p, &c))
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
    else if ((rc = ST(env->st, exec_create_many, &c, 1, err)) == 0 && c.rc)
        rc = wu_err(err, c.rc, "%s", c.why);
    if (rc == WEFT_EEXIST && a->idempotency_key)
        rc = 0; /* created by the earlier start with this key */
    if (rc == 0) {
        snprintf(id_out, 64, "%s", p.x->id);
    } else if (rc == WEFT_EIO || rc == WEFT_ETIMEOUT) {
        /* sent, unanswered: whether it landed is unknown, and starting
         * again may make a second run */
        snprintf(id_out, 64, "%s", p.x->id);
        wu_err_prefix(
            err, "workflow %s may have started (look it up before starting it again): ", p.x->id);
    }
    prep_clear(&p);
    return rc;
}

int op_start_many(op_env *env, const op_start_args *a, size_t n, char (*ids)[64], int *rcs,
                  weft_error *err)
{
    st_create *c = calloc(n + 1, sizeof *c);
    prep *ps = calloc(n + 1, sizeof *ps);
    size_t i, m = 0;
    int rc = 0, first = 0;

    if (!c || !ps) {
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++) {
        weft_error e = {0};
        ids[i][0] = 0;
        if (a[i].idempotency_key) {
            /* its key decides which id it gets: alone */
            rcs[i] = op_start(env, &a[i], ids[i], &e);
        } else if (!(rcs[i] = start_new(&a[i], &ps[i].x, &e)) &&
                   !(rcs[i] = check_served(env, &a[i], &e))) {
            start_fill(&a[i], ps[i].x);
            if (start_create(env, &a[i], &ps[i], &c[m]))
                rcs[i] = wu_err(&e, WEFT_ENOMEM, "out of memory");
            else
                m++;
        }
        if (rcs[i] && ps[i].x) prep_clear(&ps[i]); /* not created: left out of the batch */
        if (rcs[i] && !first++) wu_err(err, rcs[i], "%s", e.msg);
    }
    if (m) rc = ST(env->st, exec_create_many, c, m, err);
    for (i = 0, m = 0; i < n; i++) {
        if (!ps[i].x) continue;
        rcs[i] = rc ? rc : c[m].rc;
        if (rcs[i] == 0)
            snprintf(ids[i], 64, "%s", ps[i].x->id);
        else if (!rc && !first++)
            wu_err(err, rcs[i], "%s", c[m].why);
        m++;
    }
    if (!rc && first) rc = err->code ? err->code : WEFT_EIO;
out:
    for (i = 0; i < n && ps; i++)
        prep_clear(&ps[i]);
    free(c);
    free(ps);
    return rc;
}

/* A change that changes nothing: an update that only applies a waiting command. */
static int fn_none(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    return OP_NOCHANGE;
}

/* The refusal of a command the status does not allow, worded as the
 * decider's own (op_fn_terminate, dec_pause, dec_resume). */
static int cmd_refused(weft_error *err, const char *id, op_cmd cmd, const char *status)
{
    if (cmd == OP_TERMINATE)
        return wu_err(err, WEFT_ESTATE, "workflow %s is already %s", id, status);
    return wu_err(err, WEFT_ESTATE, "workflow %s is %s: only %s workflows can be %s", id, status,
                  cmd == OP_PAUSE ? "RUNNING" : "PAUSED", cmd == OP_PAUSE ? "paused" : "resumed");
}

int op_command(op_env *env, const char *id, op_cmd cmd, const char *reason, weft_error *err)
{
    int64_t wait = env->command_wait_ms > 0 ? env->command_wait_ms : OP_COMMAND_WAIT_MS;
    int64_t until = wu_mono_ms() + wait;
    char token[37], status[32], *text, *mine = NULL, *pending = NULL;
    size_t n;
    int rc;

    wu_uuid(token);
    n = strlen(token) + strlen(cmd_kinds[cmd]) + (reason ? strlen(reason) : 0) + 3;
    if (!(text = malloc(n))) return wu_err(err, WEFT_ENOMEM, "out of memory");
    snprintf(text, n, "%s|%s|%s", token, cmd_kinds[cmd], reason ? reason : "");
    for (;;) {
        rc = ST(env->st, exec_command, id, text, cmd_kinds[cmd], &pending, status, err);
        if (rc == ST_CMD_RECORDED) {
            mine = text;
            text = NULL;
            break;
        }
        if (rc == ST_CMD_SAME) {
            mine = pending; /* an operator asked the same: that one is ours too */
            break;
        }
        free(pending);
        if (rc == WEFT_ESTATE) rc = cmd_refused(err, id, cmd, status);
        if (rc != ST_CMD_OTHER) goto out;
        /* another operator's command waits (a pause before this resume):
         * it lands first, then this one is asked for again */
        rc = op_update(env, id, fn_none, NULL, err);
        if (rc && rc != WEFT_ESTATE && rc != WEFT_ETIMEOUT) goto out;
        if (wu_mono_ms() >= until) {
            rc = wu_err(err, WEFT_ETIMEOUT,
                        "workflow %s: another operator command waits since "
                        "more than %lld ms",
                        id, (long long)wait);
            goto out;
        }
    }
    /* Apply it now; or, when the lock or the races went to a decider, see
     * it applied by that decider's next save, which cannot go without it. */
    for (;;) {
        st_doc e = {0};
        int gone;
        rc = op_update(env, id, fn_none, NULL, err);
        if (rc != WEFT_ESTATE && rc != WEFT_ETIMEOUT) break;
        if ((rc = ST(env->st, exec_read, id, &e, err)) != 0) break;
        gone = !e.cmd || strcmp(e.cmd, mine);
        st_doc_clear(&e);
        if (gone) break;
        if (wu_mono_ms() >= until) {
            rc = wu_err(err, WEFT_ETIMEOUT,
                        "workflow %s: the %s is recorded, but no decider applied it within %lld "
                        "ms (it is applied at the workflow's next save)",
                        id, cmd_kinds[cmd], (long long)wait);
            break;
        }
        {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
out:
    free(text);
    free(mine);
    return rc;
}

int op_fn_terminate(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *reason,
                    weft_error *err)
{
    if (xc_wf_terminal(x->status))
        return wu_err(err, WEFT_ESTATE, "workflow %s is already %s", x->id,
                      weft_wf_status_name(x->status));
    dec_end(dec, x, WEFT_WF_TERMINATED, reason ? reason : "terminated", o);
    return 0;
}

int op_fn_pause(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud, weft_error *err)
{
    return dec_pause(dec, x, err);
}

int op_fn_resume(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud, weft_error *err)
{
    return dec_resume(dec, x, err);
}

int op_fn_retry(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud, weft_error *err)
{
    return dec_retry(dec, x, o, err);
}

int op_fn_restart(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                  weft_error *err)
{
    return dec_restart(dec, x, err);
}

int op_secret(void *ud, const char *name, char **value, weft_error *err)
{
    st_store *s = ud;
    return ST(s, secret_get, name, value, err);
}

int op_complete_reported(op_env *env, const dec_env *dec, xc_exec *x, xc_task *t,
                         weft_task_status status, json_object *output, const char *reason,
                         size_t reason_max, dec_out *o, weft_error *err)
{
    char masked[WEFT_ERROR_MAX];
    json_object *out = json_object_get(output);
    size_t keep = reason_max && reason_max < sizeof masked ? reason_max + 1 : sizeof masked;
    int rc;
    host_redact_reported(t, op_secret, env->st, &out, reason, masked, keep);
    rc = dec_complete(dec, x, t, status, out, reason ? masked : NULL, o, err);
    json_object_put(out);
    return rc;
}

int op_fn_complete(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    op_complete *c = ud;
    xc_task *t = c->task_id ? xc_find_id(x, c->task_id) : xc_find_ref(x, c->ref);
    int rc;
    if (!t)
        return wu_err(err, WEFT_ENOTFOUND, "workflow %s has no task '%s'", x->id,
                      c->task_id ? c->task_id : c->ref);
    if (c->child_id && t->child_id && strcmp(t->child_id, c->child_id))
        return OP_NOCHANGE; /* an older child of a retried task */
    /* A task has one child per instance (its start's idempotency key), so a
     * task that does not know its child yet is this child's: the worker that
     * started it has not saved yet, and its save will lose the fence race. */
    if (c->child_id && !t->child_id && !(t->child_id = strdup(c->child_id)))
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    if (xc_wf_terminal(x->status))
        return wu_err(err, WEFT_ESTATE, "workflow %s is already %s", x->id,
                      weft_wf_status_name(x->status));
    if ((rc = op_complete_reported(env, dec, x, t, c->status, c->output, c->reason, 0, o, err)))
        return rc;
    if (!env->client) dec_decide(dec, x, o);
    return 0;
}

static int fn_lease_exhausted(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                              weft_error *err)
{
    op_complete c = {0};
    c.task_id = ud;
    c.status = WEFT_TASK_FAILED;
    c.reason = "its lease expired too often: the workers that took it died or never answered";
    return op_fn_complete(env, dec, x, o, &c, err);
}

void op_fail_reaped(op_env *env, char **members, size_t n,
                    void (*warn)(void *ud, const char *workflow_id, const char *msg), void *ud)
{
    size_t i;
    for (i = 0; i < n; i++) {
        char *bar = strchr(members[i], '|');
        weft_error err = {0};
        if (bar) {
            *bar = 0;
            if (op_update(env, members[i], fn_lease_exhausted, bar + 1, &err) &&
                err.code != WEFT_ENOTFOUND && warn)
                warn(ud, members[i], err.msg);
        }
        free(members[i]);
    }
    free(members);
}

int op_domain_active(void *ud, const char *queue, const char *domain)
{
    op_domains *c = ud;
    char name[200];
    int64_t ms = 0, now = wu_now_ms();
    weft_error err;
    unsigned i;
    if ((size_t)snprintf(name, sizeof name, "%s:%s", domain, queue) >= sizeof name) return 0;
    for (i = 0; i < sizeof c->e / sizeof c->e[0]; i++)
        if (c->e[i].at && now - c->e[i].at < 1000 && !strcmp(c->e[i].key, name))
            return c->e[i].active;
    wu_err_clear(&err);
    if (ST(c->st, queue_polled, name, &ms, &err)) return 0;
    i = c->next++ % (sizeof c->e / sizeof c->e[0]);
    memcpy(c->e[i].key, name, sizeof name);
    c->e[i].active = ms > 0 && now - ms <= 10000;
    c->e[i].at = now;
    return c->e[i].active;
}

int op_domain_ok(const char *d, size_t n)
{
    size_t i;
    if (n == 0 || n > 64) return 0;
    for (i = 0; i < n; i++)
        if (!isalnum((unsigned char)d[i]) && d[i] != '_' && d[i] != '-' && d[i] != '.') return 0;
    return 1;
}

int op_check_domains(json_object *m, weft_error *err)
{
    if (!json_object_is_type(m, json_type_object))
        return wu_err(err, WEFT_EINVAL, "taskToDomain must be an object {\"task\": \"domain\"}");
    json_object_object_foreach(m, k, v)
    {
        const char *s = json_object_get_string(v), *p = s, *d;
        size_t n;
        if (!json_object_is_type(v, json_type_string))
            return wu_err(err, WEFT_EINVAL, "taskToDomain.%s must be a string of domains", k);
        while (wu_list_next(&p, &d, &n))
            if (!op_domain_ok(d, n))
                return wu_err(err, WEFT_EINVAL,
                              "taskToDomain.%s: bad domain in '%s' (letters, digits, '_', '-', "
                              "'.', at most 64; a list is comma-separated)",
                              k, s);
    }
    return 0;
}

void op_say_waiting(op_env *env, const xc_exec *x, json_object *doc)
{
    json_object *tasks;
    int64_t now = wu_now_ms();
    size_t i;
    if (!json_object_object_get_ex(doc, "tasks", &tasks)) return;
    for (i = 0; i < x->tasks.len && i < json_object_array_length(tasks); i++) {
        const xc_task *t = x->tasks.items[i];
        st_qmember m;
        weft_error err;
        char why[512] = "";
        if (t->status != WEFT_TASK_SCHEDULED || !t->queued || t->def->type->map) continue;
        if (t->callback_ms > now) {
            /* its own record says when: no store call */
            snprintf(why, sizeof why,
                     "waiting: not claimable for %.1f s more (its startDelay or retry delay)",
                     (double)(t->callback_ms - now) / 1000.0);
        } else if (def_limited(t->def)) {
            /* only a task with limits can be held back by its queue: ask it */
            wu_err_clear(&err);
            if (ST(env->st, queue_member, xc_task_queue(t), x->id, t->id, &m, &err) ||
                m.state != ST_Q_WAITING)
                continue;
            if (m.limit.concurrency > 0 && m.held >= m.limit.concurrency)
                snprintf(why, sizeof why,
                         "waiting: '%s' is at its concurrency limit (%d of %d held) in queue %s",
                         m.name, m.held, m.limit.concurrency, xc_task_queue(t));
            else if (m.limit.rate_count > 0)
                snprintf(why, sizeof why,
                         "waiting: '%s' used its rate limit (%d per %lld ms) in this window; the "
                         "next one begins in %.1f s",
                         m.name, m.limit.rate_count, (long long)m.limit.rate_per_ms,
                         (double)(m.window_start + m.limit.rate_per_ms - now) / 1000.0);
            else
                snprintf(why, sizeof why, "waiting: held back by the limits of '%s'", m.name);
        }
        if (why[0])
            json_object_object_add(json_object_array_get_idx(tasks, i), "reasonForIncompletion",
                                   json_object_new_string(why));
    }
}

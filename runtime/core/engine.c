#include "core/engine.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/decider.h"
#include "core/effects.h"
#include "core/ops.h"
#include "core/sweeper.h"
#include "lua/dsl.h"
#include "lua/sandbox.h"
#include "plugin/host.h"
#include "store/memory.h"

/*
 * The engine is a decider over a memory store (store/memory.c), through
 * the same store interface and the same effects (core/effects.c) as the
 * daemon: a task's result becomes a decision, the decision's actions
 * become queue steps saved with the execution and cascades run after the
 * save. What differs from weftd is the backend and that one thread does
 * it all: it claims what is due from the store, runs it, saves, and
 * sleeps when nothing is due until the store's next deadline.
 */

/* Claims and due executions taken per round. */
#define ENG_BATCH 64
/* A lease outlives any task run here (they run one at a time). */
#define ENG_LEASE_MS (24LL * 3600 * 1000)
/* An execution waiting on its tasks is looked at again only when its
 * tasks say so (a result, a timer, a timeout: op_env.sweep_ms 0). A look
 * holds it this long on the store's decider queue, until its save says
 * when next or takes it off (commit). */
#define ENG_HOLD_MS (24LL * 3600 * 1000)

struct eng {
    pl_registry *plugins;
    char *searched;
    def_env defs;
    sbx *sandbox;
    host_services svc;
    dec_env dec;
    st_store *st; /* the memory store: executions, queues, the decider queue */
    op_env op;    /* what effects and cascades run with */
    op_hooks hooks;
    const char **types; /* the task types run here (every queued one of a plugin) */
    size_t ntypes;
    wu_vec all_execs; /* the caller's references (eng_start: valid until eng_free) */
    wu_map *named;    /* "name" -> def_workflow (sub-workflows by name) */
    wu_vec all_defs;
    char *def_path;
    def_limits limits;
    FILE *trace;
    int64_t t0;
    eng_ended_fn on_ended; /* set during eng_run_all */
    void *on_ended_ud;
    /* Tasks a save made runnable now and leased to the engine at once
     * (eager dispatch, as weftd's workers do): run before the next claim. */
    st_lease *pend;
    size_t npend, hpend, cappend;
};

/* ---- tracing ---- */

static void on_change(void *ud, const xc_exec *x, const xc_task *t)
{
    eng *e = ud;
    double s;
    if (!e->trace) return;
    s = (double)(wu_mono_ms() - e->t0) / 1000.0;
    if (t)
        fprintf(e->trace, "[%8.3fs] %s: %s (%s) %s%s%s\n", s, x->def->name, t->ref,
                t->def->type_name, weft_task_status_name(t->status),
                t->reason && xc_task_terminal(t->status) && !xc_task_ok(t->status) ? ": " : "",
                t->reason && xc_task_terminal(t->status) && !xc_task_ok(t->status) ? t->reason
                                                                                   : "");
    else
        fprintf(e->trace, "[%8.3fs] %s: workflow %s %s%s%s\n", s, x->def->name, x->id,
                weft_wf_status_name(x->status), x->reason ? ": " : "", x->reason ? x->reason : "");
    fflush(e->trace);
}

/* ---- definitions ---- */

static const weft_task_type *find_type(void *ud, const char *name)
{
    return pl_find_type(ud, name, NULL);
}

int eng_load_json(eng *e, json_object *json, const char *source, def_workflow **out,
                  weft_error *err)
{
    return def_compile(&e->defs, json, source, NULL, out, err);
}

int eng_load_file(eng *e, const char *path, def_workflow **out, weft_error *err)
{
    json_object *json = NULL, *lines = NULL;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int rc = dsl_load(path, &json, &lines, err);
    if (rc == 0) rc = def_compile(&e->defs, json, base, lines, out, err);
    json_object_put(json);
    json_object_put(lines);
    return rc;
}

/* A workflow by name (sub-workflows, failure workflows): <dir>/<name>.lua or .json. */
static int find_named(eng *e, const char *name, int version, def_workflow **out, weft_error *err)
{
    def_workflow *d = wu_map_get(e->named, name);
    char *path, *dir, *save = NULL;
    int rc = WEFT_ENOTFOUND;
    if (!d && e->def_path) {
        char *dirs = strdup(e->def_path);
        if (!dirs) return wu_err(err, WEFT_ENOMEM, "out of memory");
        for (dir = strtok_r(dirs, ":", &save); dir && rc == WEFT_ENOTFOUND;
             dir = strtok_r(NULL, ":", &save)) {
            static const char *const exts[] = {".lua", ".json"};
            size_t i;
            for (i = 0; i < 2 && rc == WEFT_ENOTFOUND; i++) {
                size_t n = strlen(dir) + strlen(name) + 8;
                FILE *f;
                path = malloc(n);
                if (!path) break;
                snprintf(path, n, "%s/%s%s", dir, name, exts[i]);
                if ((f = fopen(path, "r"))) {
                    fclose(f);
                    rc = eng_load_file(e, path, &d, err);
                }
                free(path);
            }
        }
        free(dirs);
        if (rc == WEFT_ENOTFOUND)
            return wu_err(err, WEFT_ENOTFOUND,
                          "workflow '%s' not found (looked for %s.lua and %s.json in %s)", name,
                          name, name, e->def_path);
        if (rc) return rc;
        if (strcmp(d->name, name)) {
            wu_err(err, WEFT_EINVAL, "%s defines workflow '%s', not '%s'", d->source, d->name,
                   name);
            def_unref(d);
            return WEFT_EINVAL;
        }
        if (wu_map_put(e->named, name, d) || wu_vec_push(&e->all_defs, d)) {
            def_unref(d);
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        }
    }
    if (!d)
        return wu_err(err, WEFT_ENOTFOUND, "workflow '%s' not found (no definition path)", name);
    if (version > 0 && d->version != version)
        return wu_err(err, WEFT_ENOTFOUND, "workflow '%s' version %d not found (%s has version %d)",
                      name, version, d->source, d->version);
    *out = d;
    return 0;
}

/* ---- executions ---- */

/* Tasks leased to the engine by a save (copied): run next. */
static void pend_add(eng *e, const st_lease *l, size_t n)
{
    if (!n) return;
    if (e->hpend == e->npend) e->hpend = e->npend = 0;
    if (e->npend + n > e->cappend) {
        size_t cap = (e->npend + n) * 2;
        st_lease *p = realloc(e->pend, cap * sizeof *p);
        if (!p) return; /* their leases expire: the claims find them again */
        e->pend = p;
        e->cappend = cap;
    }
    memcpy(e->pend + e->npend, l, n * sizeof *l);
    e->npend += n;
}

/*
 * A new execution of def, created in the store; before the create, fill
 * (may be NULL) sets what the caller adds. Its first decision is made
 * before the create when it runs no plugin code (op_start does the same):
 * the create then queues the first tasks itself (leased to the engine at
 * once as a save's are, room permitting) and no decider has to look at it
 * first; else it is due for a decider now.
 */
static int add_exec(eng *e, def_workflow *def, json_object *input,
                    void (*fill)(xc_exec *x, void *ud), void *ud, xc_exec **out, weft_error *err)
{
    st_create c = {0};
    dec_out o = {0};
    fx_buf buf;
    st_step *steps = NULL;
    st_lease *eager = NULL;
    size_t nsteps = 0, neager = 0, backlog = e->npend - e->hpend;
    /* a start leases its first tasks to the engine while few are waiting
     * (a serial caller's); many starts in a row queue theirs, claimed a
     * batch at a time as the engine gets to them */
    size_t room = backlog < ENG_BATCH ? ENG_BATCH - backlog : 0;
    xc_exec *x;
    int rc = xc_new(def, input, NULL, &x, err);
    if (rc) return rc;
    if (fill) fill(x, ud);
    if (wu_vec_push(&e->all_execs, x)) {
        xc_free(x);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    c.x = x;
    if (dec_can_start(x)) {
        dec_decide(&e->dec, x, &o);
        if (fx_steps_in(&e->op, &e->dec, x, &o, 0, &buf, &steps, &nsteps, &room, &eager, &neager))
            rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        c.steps = steps;
        c.nsteps = nsteps;
    }
    if (rc == 0 && (rc = ST(e->st, exec_create_many, &c, 1, err)) == 0) {
        if (c.rc)
            rc = wu_err(err, c.rc, "%s", c.why);
        else
            pend_add(e, eager, neager);
    }
    fx_free(&buf, steps, eager);
    dec_out_free(&o);
    if (rc) return rc;
    *out = x;
    return 0;
}

int eng_start(eng *e, def_workflow *def, json_object *input, xc_exec **out, weft_error *err)
{
    if (input && !json_object_is_type(input, json_type_object))
        return wu_err(err, WEFT_EINVAL, "workflow input must be a JSON object");
    return add_exec(e, def, input, NULL, NULL, out, err);
}

typedef struct child_of {
    const xc_exec *x;
    const xc_task *t;
} child_of;

static void fill_child(xc_exec *cx, void *ud)
{
    const child_of *p = ud;
    cx->parent_id = strdup(p->x->id);
    cx->parent_task_id = strdup(p->t->id);
    cx->depth = p->x->depth + 1;
    cx->priority = xc_child_priority(p->x, p->t);
}

static int svc_start_child(void *ud, xc_exec *x, xc_task *t, json_object *defj, const char *name,
                           int version, json_object *input, char *id_out, size_t id_size,
                           weft_error *err)
{
    eng *e = ud;
    def_workflow *d = NULL;
    child_of p = {x, t};
    xc_exec *cx;
    int rc;
    if (defj) {
        char src[256];
        snprintf(src, sizeof src, "%s: sub-workflow '%s'", x->def->source, t->ref);
        if ((rc = def_compile(&e->defs, defj, src, NULL, &d, err))) return rc;
    } else if (!name || !*name) {
        return wu_err(err, WEFT_EINVAL, "sub-workflow needs a name or a definition");
    } else if ((rc = find_named(e, name, version, &d, err))) {
        return rc;
    } else {
        def_ref(d);
    }
    rc = add_exec(e, d, input, fill_child, &p, &cx, err);
    def_unref(d);
    if (rc) return rc;
    free(t->child_id);
    t->child_id = strdup(cx->id);
    snprintf(id_out, id_size, "%s", cx->id);
    return 0;
}

static sbx *svc_sandbox(void *ud)
{
    return ((eng *)ud)->sandbox;
}

/* In one process, secrets come from the environment: WEFT_SECRET_<NAME>. */
static int svc_secret(void *ud, const char *name, char **value, weft_error *err)
{
    char var[300];
    const char *v;
    snprintf(var, sizeof var, "WEFT_SECRET_%s", name);
    if (!(v = getenv(var)))
        return wu_err(err, WEFT_ENOTFOUND, "secret '%s' is not set (set %s)", name, var);
    *value = strdup(v);
    return *value ? 0 : wu_err(err, WEFT_ENOMEM, "out of memory");
}

/* Failure workflows are found by name as sub-workflows are (op_hooks.find_def). */
static int hook_find_def(void *ud, const char *name, int version, def_workflow **out,
                         weft_error *err)
{
    int rc = find_named(ud, name, version, out, err);
    if (rc == 0) def_ref(*out);
    return rc;
}

/* A canceled task's plugin hears of it. */
static void hook_cancel(void *ud, xc_exec *x, xc_task *t)
{
    eng *e = ud;
    if (t->def->type->cancel) {
        weft_ctx c;
        host_ctx_init(&c, &e->svc, x, t);
        t->def->type->cancel(&c);
        host_ctx_done(&c);
    }
}

static void hook_warn(void *ud, const char *msg)
{
    fprintf(stderr, "weft: %s\n", msg);
}

static void hook_ended(void *ud, const xc_exec *x)
{
    eng *e = ud;
    if (e->on_ended) e->on_ended(e->on_ended_ud, x);
}

/* ---- deciding and applying ---- */

/* Whether a task made runnable now is run by the engine at once. */
static int eager_run(void *ud, const xc_task *t)
{
    return t->def->type->execute != NULL && !t->def->type->map;
}

/* Save x with the steps of o's actions (claim, when given, done with it),
 * then run what follows the save (effects.h). looked: x came due on the
 * decider queue (and is held there until this save says when next). */
static void commit(eng *e, xc_exec *x, dec_out *o, const st_lease *claim, int looked)
{
    st_save sv; /* its fields set one by one: why[] need not be zeroed */
    fx_buf buf;
    st_step *steps = NULL;
    st_lease *eager = NULL;
    weft_error err;
    size_t n = 0, i, neager = 0, room = ENG_BATCH;
    int next = 0;
    wu_err_clear(&err);
    if (fx_steps_in(&e->op, &e->dec, x, o, 0, &buf, &steps, &n, &room, &eager, &neager)) {
        fprintf(stderr, "weft: workflow %s: out of memory applying a decision\n", x->id);
        return;
    }
    memset(&sv, 0, offsetof(st_save, why));
    sv.why[0] = 0;
    sv.x = x;
    sv.fence = sv.loaded_fence = x->fence;
    sv.steps = steps;
    sv.nsteps = n;
    sv.acks = claim;
    sv.nacks = claim != NULL;
    if (ST(e->st, exec_save_many, &sv, 1, &err) || sv.rc)
        fprintf(stderr, "weft: workflow %s: %s\n", x->id, sv.rc ? sv.why : err.msg);
    else
        pend_add(e, eager, neager);
    for (i = 0; looked && i < n; i++)
        next |= steps[i].kind == ST_WAKE || steps[i].kind == ST_DONE;
    if (looked && !next) /* it waits on its tasks: off the decider queue until they say */
        ST(e->st, forget, x->id, 0, &err);
    fx_free(&buf, steps, eager);
    fx_after(&e->op, x, o);
    fx_drain(&e->op);
}

/* A decider looks at an execution that came due: timers, timeouts, what ended. */
static void look(eng *e, const char *id)
{
    xc_exec *x = NULL;
    dec_out o = {0};
    weft_error err = {0};
    int rc;
    if (ST(e->st, exec_load, id, &x, NULL, &err)) return;
    rc = sw_look(&e->op, &e->dec, x, &o, NULL, &err);
    if (rc == 0)
        commit(e, x, &o, NULL, 1);
    else if (rc == OP_NOCHANGE)
        ST(e->st, forget, id, 0, &err);
    dec_out_free(&o);
    xc_free(x);
}

/* Run a claimed task and apply what it reported. */
static void run(eng *e, const st_lease *l)
{
    xc_exec *x = l->x;
    xc_task *t = l->t;
    dec_out o = {0};
    weft_result r;
    weft_error err;
    int rc;
    wu_err_clear(&err);
    if (!x || !t || xc_task_terminal(t->status) || !t->queued || x->status != WEFT_WF_RUNNING ||
        !t->def->type->execute) {
        ST(e->st, ack, l, &err); /* canceled or paused meanwhile: dropped */
        return;
    }
    dec_start(&e->dec, x, t);
    host_result_init(&r);
    rc = host_execute(&e->svc, x, t, &r);
    dec_apply(&e->dec, x, t, rc, &r, &o);
    host_result_clear(&r);
    dec_decide(&e->dec, x, &o);
    commit(e, x, &o, l, 0);
    dec_out_free(&o);
}

static void describe_blocked(xc_exec *x, weft_error *err)
{
    char buf[WEFT_ERROR_MAX] = "";
    size_t i, used = 0;
    for (i = 0; i < x->tasks.len && used < sizeof buf - 64; i++) {
        xc_task *t = x->tasks.items[i];
        if (xc_task_terminal(t->status)) continue;
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s (%s %s)", used ? ", " : "",
                                 t->ref, t->def->type_name, weft_task_status_name(t->status));
    }
    wu_err(err, WEFT_ESTATE,
           "workflow %s is blocked: nothing in this process can move on %s (a WAIT without a "
           "duration needs a signal, a SIMPLE task needs a worker: use weftd)",
           x->id, used ? buf : "its tasks");
}

int eng_run(eng *e, xc_exec *x, weft_error *err)
{
    return eng_run_all(e, &x, 1, NULL, NULL, err);
}

int eng_run_all(eng *e, xc_exec *const *xs, size_t n, eng_ended_fn on_end, void *ud,
                weft_error *err)
{
    size_t first = 0; /* xs before this one are terminal */
    int rc = 0;
    e->on_ended = on_end;
    e->on_ended_ud = ud;
    for (;;) {
        st_lease claims[ENG_BATCH];
        char due[ENG_BATCH][64];
        int got, ndue = 0, i;
        while (e->hpend < e->npend) { /* what saves and creates leased to it, first */
            st_lease l = e->pend[e->hpend++];
            run(e, &l);
        }
        while (first < n && xc_wf_terminal(xs[first]->status))
            first++;
        if (first == n) break;
        got = ST(e->st, due_claim, 0, ENG_BATCH, ENG_HOLD_MS, due, &ndue, e->types, e->ntypes,
                 ENG_BATCH, ENG_LEASE_MS, claims, err);
        if (got < 0) {
            rc = got;
            break;
        }
        for (i = 0; i < ndue; i++)
            look(e, due[i]);
        for (i = 0; i < got; i++)
            run(e, &claims[i]);
        if (got == 0 && ndue == 0 && e->hpend == e->npend) {
            int64_t next = st_memory_next(e->st, e->types, e->ntypes), wait;
            struct timespec ts;
            if (!next) {
                describe_blocked(xs[first], err);
                rc = WEFT_ESTATE;
                break;
            }
            if ((wait = next - wu_now_ms()) > 0) {
                ts.tv_sec = (time_t)(wait / 1000);
                ts.tv_nsec = (long)(wait % 1000) * 1000000L;
                while (nanosleep(&ts, &ts) && errno == EINTR)
                    ;
            }
        }
    }
    e->on_ended = NULL;
    e->on_ended_ud = NULL;
    return rc;
}

int eng_complete_task(eng *e, const char *workflow_id, const char *task_ref,
                      weft_task_status status, json_object *output, weft_error *err)
{
    xc_exec *x = NULL;
    xc_task *t;
    dec_out o = {0};
    int rc;
    if (ST(e->st, exec_load, workflow_id, &x, NULL, err))
        return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", workflow_id);
    if (!(t = xc_find_ref(x, task_ref))) {
        xc_free(x);
        return wu_err(err, WEFT_ENOTFOUND, "workflow %s has no task '%s'", workflow_id, task_ref);
    }
    /* from outside: the secrets the task's input names are masked before it is kept */
    output = json_object_get(output);
    host_redact_reported(t, svc_secret, e, &output, NULL, NULL, 0);
    rc = dec_complete(&e->dec, x, t, status, output, NULL, &o, err);
    json_object_put(output);
    if (rc == 0) {
        dec_decide(&e->dec, x, &o);
        commit(e, x, &o, NULL, 0);
    }
    dec_out_free(&o);
    xc_free(x);
    return rc;
}

/* ---- set-up ---- */

/* Every queued type a plugin here runs: what the engine claims. */
static int pick_types(eng *e, weft_error *err)
{
    size_t i, j;
    for (i = 0; i < pl_count(e->plugins); i++) {
        const pl_plugin *p = pl_get(e->plugins, i);
        for (j = 0; j < p->ntypes; j++) {
            const char **g;
            if (!p->types[j]->execute || p->types[j]->map) continue;
            if (!(g = realloc(e->types, (e->ntypes + 1) * sizeof *g)))
                return wu_err(err, WEFT_ENOMEM, "out of memory");
            e->types = g;
            e->types[e->ntypes++] = p->types[j]->name;
        }
    }
    return 0;
}

int eng_new(const eng_opts *opts, eng **out, weft_error *err)
{
    eng *e = calloc(1, sizeof *e);
    const char *path = opts->plugin_path ? opts->plugin_path : getenv("WEFT_PLUGIN_PATH");
    st_memory_opts mo = {0};
    char *dflt = NULL;
    size_t i;
    int rc;
    *out = NULL;
    if (!e) return wu_err(err, WEFT_ENOMEM, "out of memory");
    e->t0 = wu_mono_ms();
    e->trace = opts->trace;
    e->named = wu_map_new();
    if (opts->def_path) e->def_path = strdup(opts->def_path);
    e->plugins = pl_new(host_table());
    if (!e->named || !e->plugins) {
        eng_free(e);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    if (!path || !*path) path = dflt = pl_default_path();
    pl_load_path(e->plugins, path ? path : "");
    free(dflt);
    for (i = 0; i < pl_failure_count(e->plugins); i++)
        fprintf(stderr, "weft: warning: %s\n", pl_failure(e->plugins, i));
    e->sandbox = sbx_new(NULL, err);
    if (!e->sandbox) {
        eng_free(e);
        return err ? err->code : WEFT_ENOMEM;
    }
    mo.unrecorded_eager = 1; /* this thread runs what it leases itself at once */
    if ((rc = pick_types(e, err)) || (rc = st_memory_open(&mo, &e->st, err))) {
        eng_free(e);
        return rc;
    }
    e->defs.find_type = find_type;
    e->defs.ud = e->plugins;
    e->defs.searched = pl_searched(e->plugins);
    e->defs.known = pl_type_names(e->plugins);
    e->defs.host = host_table();
    e->limits = opts->limits ? *opts->limits : def_limits_default;
    e->defs.limits = &e->limits;
    e->svc.limits = &e->limits;
    e->svc.ud = e;
    e->svc.sandbox = svc_sandbox;
    e->svc.start_child = svc_start_child;
    e->svc.secret = svc_secret;
    e->dec.defs = &e->defs;
    e->dec.svc = &e->svc;
    e->dec.now = wu_now_ms;
    e->dec.on_change = on_change;
    e->dec.ud = e;
    e->hooks.ud = e;
    e->hooks.ended = hook_ended;
    e->hooks.change = e->trace ? on_change : NULL;
    e->hooks.find_def = hook_find_def;
    e->hooks.warn = hook_warn;
    e->hooks.cancel = hook_cancel;
    e->op.st = e->st;
    e->op.defs = &e->defs;
    e->op.dec = &e->dec;
    e->op.sweep_ms = 0; /* one process: nothing to repair, no periodic look */
    e->op.cascade = 1;
    e->op.hooks = &e->hooks;
    e->op.eager = eager_run;
    e->op.eager_ud = e;
    e->op.lease_ms = ENG_LEASE_MS;
    *out = e;
    return 0;
}

pl_registry *eng_plugins(eng *e)
{
    return e->plugins;
}

void eng_free(eng *e)
{
    size_t i;
    if (!e) return;
    for (i = 0; i < e->all_execs.len; i++)
        xc_free(e->all_execs.items[i]);
    wu_vec_free(&e->all_execs);
    st_free(e->st);
    for (i = 0; i < e->all_defs.len; i++)
        def_unref(e->all_defs.items[i]);
    wu_vec_free(&e->all_defs);
    wu_map_free(e->named);
    sbx_free(e->sandbox);
    pl_free(e->plugins);
    free(e->types);
    free(e->pend);
    free(e->def_path);
    free(e->searched);
    free(e);
}

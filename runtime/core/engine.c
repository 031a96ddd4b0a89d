#include "core/engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/decider.h"
#include "lua/dsl.h"
#include "plugin/host.h"
#include "lua/sandbox.h"

typedef enum item_kind { IT_RUN, IT_REMAP, IT_TIMEOUT, IT_DECIDE } item_kind;

typedef struct item {
    int64_t at;
    uint64_t seq; /* FIFO among equal times */
    item_kind kind;
    xc_exec *x;
    xc_task *t;
} item;

struct eng {
    pl_registry *plugins;
    char *searched;
    def_env defs;
    sbx *sandbox;
    host_services svc;
    dec_env dec;
    wu_map *execs;    /* id -> xc_exec */
    wu_vec all_execs; /* for freeing */
    wu_map *named;    /* "name" -> def_workflow (sub-workflows by name) */
    wu_vec all_defs;
    char *def_path;
    def_limits limits;
    FILE *trace;
    int64_t t0;
    item *heap;
    size_t nheap, capheap;
    item *fifo; /* a ring of due items in (at, seq) order: see queue_push */
    size_t fhead, nfifo, capfifo;
    int64_t now_ms; /* the clock as last read by queue_push */
    uint64_t seq;
    eng_ended_fn on_ended; /* set during eng_run_all */
    void *on_ended_ud;
    /* Cascades between executions (a child's end to its parent, a canceled
     * task to its child) wait here and the outermost apply runs them one
     * after the other: a tree thousands of levels deep costs no C stack
     * per level. */
    struct later *later;
    size_t nlater, hlater, caplater;
    int draining;
};

typedef enum later_kind { LATER_ENDED, LATER_TERMINATE } later_kind;

struct later {
    later_kind kind;
    xc_exec *x;
};

/*
 * The work queue (memory store queue): items run in (at, seq) order. Most
 * are due when queued and come in that order already; those go to a FIFO
 * ring, the rest (timers, clock steps back) to a heap. The next item is the
 * smaller of the two heads: the same order as one heap, without a heap's
 * log n steps through memory for each item.
 */

static int item_less(const item *a, const item *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static int heap_push(eng *e, item it)
{
    size_t i;
    if (e->nheap == e->capheap) {
        size_t cap = e->capheap ? e->capheap * 2 : 64;
        item *h = realloc(e->heap, cap * sizeof *h);
        if (!h)
            return WEFT_ENOMEM;
        e->heap = h;
        e->capheap = cap;
    }
    i = e->nheap++;
    e->heap[i] = it;
    while (i > 0 && item_less(&e->heap[i], &e->heap[(i - 1) / 2])) {
        item tmp = e->heap[i];
        e->heap[i] = e->heap[(i - 1) / 2];
        e->heap[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
    return 0;
}

static item heap_pop(eng *e)
{
    item top = e->heap[0];
    size_t i = 0;
    e->heap[0] = e->heap[--e->nheap];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->nheap && item_less(&e->heap[l], &e->heap[m]))
            m = l;
        if (r < e->nheap && item_less(&e->heap[r], &e->heap[m]))
            m = r;
        if (m == i)
            break;
        item tmp = e->heap[i];
        e->heap[i] = e->heap[m];
        e->heap[m] = tmp;
        i = m;
    }
    return top;
}

static item *fifo_at(const eng *e, size_t i)
{
    return &e->fifo[(e->fhead + i) & (e->capfifo - 1)];
}

static int fifo_push(eng *e, item it)
{
    if (e->nfifo == e->capfifo) {
        size_t cap = e->capfifo ? e->capfifo * 2 : 64, i; /* a power of 2 */
        item *f = malloc(cap * sizeof *f);
        if (!f)
            return WEFT_ENOMEM;
        for (i = 0; i < e->nfifo; i++)
            f[i] = *fifo_at(e, i);
        free(e->fifo);
        e->fifo = f;
        e->fhead = 0;
        e->capfifo = cap;
    }
    *fifo_at(e, e->nfifo++) = it;
    return 0;
}

static void queue_push(eng *e, item_kind kind, xc_exec *x, xc_task *t, int64_t at)
{
    item it = {at, e->seq++, kind, x, t};
    /* the FIFO takes it if it keeps the FIFO in order and is due (the clock
     * is read again only when the last reading is older than at) */
    int due = at <= e->now_ms || at <= (e->now_ms = wu_now_ms());
    if (due && (!e->nfifo || !item_less(&it, fifo_at(e, e->nfifo - 1))) && !fifo_push(e, it))
        return;
    if (heap_push(e, it))
        fprintf(stderr, "weft: out of memory queueing work\n");
}

/* The next item to run, or NULL if none is queued. */
static const item *queue_peek(const eng *e)
{
    const item *f = e->nfifo ? fifo_at(e, 0) : NULL;
    if (!e->nheap)
        return f;
    return f && item_less(f, &e->heap[0]) ? f : &e->heap[0];
}

static item queue_pop(eng *e)
{
    item it;
    if (!e->nfifo || (e->nheap && item_less(&e->heap[0], fifo_at(e, 0))))
        return heap_pop(e);
    it = *fifo_at(e, 0);
    e->fhead = (e->fhead + 1) & (e->capfifo - 1);
    e->nfifo--;
    return it;
}

/* ---- tracing ---- */

static void on_change(void *ud, const xc_exec *x, const xc_task *t)
{
    eng *e = ud;
    double s;
    if (!e->trace)
        return;
    s = (double)(wu_mono_ms() - e->t0) / 1000.0;
    if (t)
        fprintf(e->trace, "[%8.3fs] %s: %s (%s) %s%s%s\n", s, x->def->name, t->ref,
                t->def->type_name, weft_task_status_name(t->status),
                t->reason && xc_task_terminal(t->status) && !xc_task_ok(t->status) ? ": " : "",
                t->reason && xc_task_terminal(t->status) && !xc_task_ok(t->status) ? t->reason
                                                                                   : "");
    else
        fprintf(e->trace, "[%8.3fs] %s: workflow %s %s%s%s\n", s, x->def->name, x->id,
                weft_wf_status_name(x->status), x->reason ? ": " : "",
                x->reason ? x->reason : "");
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
    if (rc == 0)
        rc = def_compile(&e->defs, json, base, lines, out, err);
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
        if (!dirs)
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        for (dir = strtok_r(dirs, ":", &save); dir && rc == WEFT_ENOTFOUND;
             dir = strtok_r(NULL, ":", &save)) {
            static const char *const exts[] = {".lua", ".json"};
            size_t i;
            for (i = 0; i < 2 && rc == WEFT_ENOTFOUND; i++) {
                size_t n = strlen(dir) + strlen(name) + 8;
                FILE *f;
                path = malloc(n);
                if (!path)
                    break;
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
        if (rc)
            return rc;
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

static void apply(eng *e, xc_exec *x, dec_out *o);

static int add_exec(eng *e, def_workflow *def, json_object *input, xc_exec **out, weft_error *err)
{
    xc_exec *x;
    int rc = xc_new(def, input, NULL, &x, err);
    if (rc)
        return rc;
    /* execs borrows x->id (x lives until eng_free): room first, so the put cannot fail */
    if (wu_map_reserve(e->execs, 1) || wu_vec_push(&e->all_execs, x)) {
        xc_free(x);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    wu_map_put(e->execs, x->id, x);
    queue_push(e, IT_DECIDE, x, NULL, wu_now_ms());
    *out = x;
    return 0;
}

int eng_start(eng *e, def_workflow *def, json_object *input, xc_exec **out, weft_error *err)
{
    if (input && !json_object_is_type(input, json_type_object))
        return wu_err(err, WEFT_EINVAL, "workflow input must be a JSON object");
    return add_exec(e, def, input, out, err);
}

static int svc_start_child(void *ud, xc_exec *x, xc_task *t, json_object *defj, const char *name,
                           int version, json_object *input, char *id_out, size_t id_size,
                           weft_error *err)
{
    eng *e = ud;
    def_workflow *d = NULL;
    xc_exec *cx;
    int rc;
    if (defj) {
        char src[256];
        snprintf(src, sizeof src, "%s: sub-workflow '%s'", x->def->source, t->ref);
        if ((rc = def_compile(&e->defs, defj, src, NULL, &d, err)))
            return rc;
    } else if (!name || !*name) {
        return wu_err(err, WEFT_EINVAL, "sub-workflow needs a name or a definition");
    } else if ((rc = find_named(e, name, version, &d, err))) {
        return rc;
    } else {
        def_ref(d);
    }
    rc = add_exec(e, d, input, &cx, err);
    def_unref(d);
    if (rc)
        return rc;
    cx->parent_id = strdup(x->id);
    cx->parent_task_id = strdup(t->id);
    cx->depth = x->depth + 1;
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

static void decide(eng *e, xc_exec *x)
{
    dec_out o = {0};
    dec_decide(&e->dec, x, &o);
    apply(e, x, &o);
    dec_out_free(&o);
}

static void start_failure_workflow(eng *e, xc_exec *x)
{
    def_workflow *d;
    weft_error err = {0};
    json_object *in;
    xc_exec *fx;
    const char *name = json_object_get_string(x->def->failure_workflow);
    char what[WEFT_ERROR_MAX / 2];
    snprintf(what, sizeof what, "failure workflow '%s'", name);
    if (def_check_depth(&e->limits, x->depth, what, &err) || find_named(e, name, 0, &d, &err)) {
        fprintf(stderr, "weft: %s: failure workflow: %s\n", x->def->name, err.msg);
        return;
    }
    in = xc_failure_input(x);
    if (add_exec(e, d, in, &fx, &err))
        fprintf(stderr, "weft: %s: failure workflow: %s\n", x->def->name, err.msg);
    else
        fx->depth = x->depth + 1;
    json_object_put(in);
}

/* A child ended: tell its parent's task. */
static void tell_parent(eng *e, xc_exec *x)
{
    xc_exec *px;
    xc_task *pt;
    if (!x->parent_id || !(px = wu_map_get(e->execs, x->parent_id)) ||
        !(pt = xc_find_id(px, x->parent_task_id)) || xc_task_terminal(pt->status))
        return;
    if (pt->child_id && strcmp(pt->child_id, x->id))
        return; /* an older child of a retried task */
    {
        dec_out o = {0};
        weft_error err;
        weft_task_status st;
        char reason[WEFT_ERROR_MAX];
        json_object *out = xc_child_result(x, &st, reason, sizeof reason);
        dec_complete(&e->dec, px, pt, st, out, st == WEFT_TASK_COMPLETED ? NULL : reason, &o,
                     &err);
        json_object_put(out);
        dec_decide(&e->dec, px, &o);
        apply(e, px, &o);
        dec_out_free(&o);
    }
}

static void later_push(eng *e, later_kind kind, xc_exec *x)
{
    if (e->nlater == e->caplater) {
        size_t cap = e->caplater ? e->caplater * 2 : 16;
        struct later *l = realloc(e->later, cap * sizeof *l);
        if (!l) {
            fprintf(stderr, "weft: out of memory: workflow %s: its %s is lost\n", x->id,
                    kind == LATER_ENDED ? "end (its parent waits)" : "termination");
            return;
        }
        e->later = l;
        e->caplater = cap;
    }
    e->later[e->nlater].kind = kind;
    e->later[e->nlater].x = x;
    e->nlater++;
}

/* Run the queued cascade steps in order; the applies they make queue
 * their own steps here instead of recursing. */
static void later_drain(eng *e)
{
    e->draining = 1;
    while (e->hlater < e->nlater) {
        struct later l = e->later[e->hlater++];
        if (l.kind == LATER_ENDED) {
            tell_parent(e, l.x);
        } else if (!xc_wf_terminal(l.x->status)) {
            dec_out o = {0};
            dec_end(&e->dec, l.x, WEFT_WF_TERMINATED, "parent task canceled", &o);
            apply(e, l.x, &o);
            dec_out_free(&o);
        }
    }
    e->nlater = e->hlater = 0;
    e->draining = 0;
}

/* A canceled task's plugin hears of it. */
static void cancel_task(eng *e, xc_exec *x, xc_task *t)
{
    if (t->def->type->cancel) {
        weft_ctx c;
        host_ctx_init(&c, &e->svc, x, t);
        t->def->type->cancel(&c);
        host_ctx_done(&c);
    }
}

static void apply(eng *e, xc_exec *x, dec_out *o)
{
    size_t i;
    int64_t next;
    for (i = 0; i < o->n; i++) {
        dec_action *a = &o->a[i];
        switch (a->kind) {
        case DEC_ENQUEUE:
            a->task->callback_ms = a->at;
            queue_push(e, IT_RUN, x, a->task, a->at);
            break;
        case DEC_TIMER:
            a->task->callback_ms = a->at;
            queue_push(e, IT_REMAP, x, a->task, a->at);
            break;
        case DEC_CANCEL:
            cancel_task(e, x, a->task);
            break;
        case DEC_UNQUEUE:
            break; /* its queue entry is stale now (process skips it) */
        case DEC_TERMINATE_CHILD: {
            xc_exec *cx = wu_map_get(e->execs, a->task->child_id);
            if (cx && !xc_wf_terminal(cx->status))
                later_push(e, LATER_TERMINATE, cx);
            break;
        }
        case DEC_NOTIFY_PARENT:
            later_push(e, LATER_ENDED, x);
            break;
        case DEC_START_FAILURE:
            start_failure_workflow(e, x);
            break;
        case DEC_WF_ENDED:
            if (e->on_ended)
                e->on_ended(e->on_ended_ud, x);
            break;
        }
    }
    /* arm the next timeout check */
    {
        dec_out to = {0};
        dec_timeouts(&e->dec, x, wu_now_ms(), &next, &to);
        if (to.n) { /* something timed out: it carries at least a DEC_CANCEL */
            dec_decide(&e->dec, x, &to);
            apply(e, x, &to);
        } else if (next && (!x->timer_ms || next < x->timer_ms)) {
            x->timer_ms = next;
            queue_push(e, IT_TIMEOUT, x, NULL, next);
        }
        dec_out_free(&to);
    }
    if (!e->draining && e->nlater)
        later_drain(e);
}

static void run_task(eng *e, xc_exec *x, xc_task *t)
{
    weft_result r;
    dec_out o = {0};
    int rc;
    dec_start(&e->dec, x, t);
    host_result_init(&r);
    rc = host_execute(&e->svc, x, t, &r);
    dec_apply(&e->dec, x, t, rc, &r, &o);
    host_result_clear(&r);
    dec_decide(&e->dec, x, &o);
    apply(e, x, &o);
    dec_out_free(&o);
}

static void process(eng *e, item *it)
{
    xc_exec *x = it->x;
    xc_task *t = it->t;
    dec_out o = {0};
    int64_t next;
    switch (it->kind) {
    case IT_DECIDE:
        decide(e, x);
        break;
    case IT_RUN:
        /* stale entries: canceled, or superseded by a later enqueue */
        if (!t->queued || t->callback_ms != it->at || xc_task_terminal(t->status) ||
            x->status != WEFT_WF_RUNNING)
            break;
        if (!t->def->type->execute)
            break; /* an external worker's task: it waits (and the run reports it blocked) */
        run_task(e, x, t);
        break;
    case IT_REMAP:
        if (xc_task_terminal(t->status) || t->callback_ms != it->at ||
            x->status != WEFT_WF_RUNNING)
            break;
        dec_remap(&e->dec, x, t, &o);
        dec_decide(&e->dec, x, &o);
        apply(e, x, &o);
        break;
    case IT_TIMEOUT:
        if (it->at == x->timer_ms)
            x->timer_ms = 0;
        dec_timeouts(&e->dec, x, wu_now_ms(), &next, &o);
        dec_decide(&e->dec, x, &o); /* a timed-out task is followed like any other end */
        apply(e, x, &o);            /* also re-arms the next check */
        break;
    }
    dec_out_free(&o);
}

static void describe_blocked(xc_exec *x, weft_error *err)
{
    char buf[WEFT_ERROR_MAX] = "";
    size_t i, used = 0;
    for (i = 0; i < x->tasks.len && used < sizeof buf - 64; i++) {
        xc_task *t = x->tasks.items[i];
        if (xc_task_terminal(t->status))
            continue;
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
        int64_t now;
        const item *next;
        item it;
        while (first < n && xc_wf_terminal(xs[first]->status))
            first++;
        if (first == n)
            break;
        if (!(next = queue_peek(e))) {
            describe_blocked(xs[first], err);
            rc = WEFT_ESTATE;
            break;
        }
        now = wu_now_ms();
        if (next->at > now) {
            int64_t wait = next->at - now;
            struct timespec ts = {(time_t)(wait / 1000), (long)(wait % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) && errno == EINTR)
                ;
            continue;
        }
        it = queue_pop(e);
        process(e, &it);
    }
    e->on_ended = NULL;
    e->on_ended_ud = NULL;
    return rc;
}

int eng_complete_task(eng *e, const char *workflow_id, const char *task_ref,
                      weft_task_status status, json_object *output, weft_error *err)
{
    xc_exec *x = wu_map_get(e->execs, workflow_id);
    xc_task *t;
    dec_out o = {0};
    int rc;
    if (!x)
        return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", workflow_id);
    if (!(t = xc_find_ref(x, task_ref)))
        return wu_err(err, WEFT_ENOTFOUND, "workflow %s has no task '%s'", workflow_id, task_ref);
    /* from outside: the secrets the task's input names are masked before it is kept */
    output = json_object_get(output);
    host_redact_reported(t, svc_secret, e, &output, NULL, NULL, 0);
    rc = dec_complete(&e->dec, x, t, status, output, NULL, &o, err);
    json_object_put(output);
    if (rc == 0) {
        dec_decide(&e->dec, x, &o);
        apply(e, x, &o);
    }
    dec_out_free(&o);
    return rc;
}

/* ---- set-up ---- */

int eng_new(const eng_opts *opts, eng **out, weft_error *err)
{
    eng *e = calloc(1, sizeof *e);
    const char *path = opts->plugin_path ? opts->plugin_path : getenv("WEFT_PLUGIN_PATH");
    char *dflt = NULL;
    size_t i;
    *out = NULL;
    if (!e)
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    e->t0 = wu_mono_ms();
    e->trace = opts->trace;
    e->execs = wu_map_new_borrowing();
    e->named = wu_map_new();
    if (opts->def_path)
        e->def_path = strdup(opts->def_path);
    e->plugins = pl_new(host_table());
    if (!e->execs || !e->named || !e->plugins) {
        eng_free(e);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    if (!path || !*path)
        path = dflt = pl_default_path();
    pl_load_path(e->plugins, path ? path : "");
    free(dflt);
    for (i = 0; i < pl_failure_count(e->plugins); i++)
        fprintf(stderr, "weft: warning: %s\n", pl_failure(e->plugins, i));
    e->sandbox = sbx_new(NULL, err);
    if (!e->sandbox) {
        eng_free(e);
        return err ? err->code : WEFT_ENOMEM;
    }
    e->defs.find_type = find_type;
    e->defs.ud = e->plugins;
    e->defs.searched = pl_searched(e->plugins);
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
    if (!e)
        return;
    for (i = 0; i < e->all_execs.len; i++)
        xc_free(e->all_execs.items[i]);
    wu_vec_free(&e->all_execs);
    for (i = 0; i < e->all_defs.len; i++)
        def_unref(e->all_defs.items[i]);
    wu_vec_free(&e->all_defs);
    wu_map_free(e->execs);
    wu_map_free(e->named);
    sbx_free(e->sandbox);
    pl_free(e->plugins);
    free(e->def_path);
    free(e->heap);
    free(e->fifo);
    free(e->later);
    free(e->searched);
    free(e);
}

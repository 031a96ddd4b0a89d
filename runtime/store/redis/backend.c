#include "store/redis/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "core/codec.h"

typedef struct rb {
    st_store base;
    rs *r;
    const def_env *defs;
    dc_cache *cache;
    ps_store *ps;
} rb;

static rb *rb_of(st_store *s)
{
    return (rb *)s;
}

rs *st_redis_conn(st_store *s)
{
    return rb_of(s)->r;
}

/* ---- executions as documents ---- */

/* The compiled definition of a stored execution (cache, else its stored text). */
static int exec_def(rb *b, const char *id, const char *defkey, def_workflow **out, weft_error *err)
{
    char *json = NULL;
    int rc;
    if ((*out = dc_get(b->cache, defkey))) return 0;
    if ((rc = rs_exec_def(b->r, id, &json, err))) return rc;
    rc = dc_compile(b->cache, b->defs, json, id, out, err);
    free(json);
    return rc;
}

/* Payloads kept outside come back in. A file that is gone makes the
 * execution unreadable (WEFT_EINVAL), never one that is not there: a
 * decider would take it off the decider queue, a parent start its child
 * again. */
static int load_one(rb *b, const xc_exec *x, const char *ref, json_object **slot, weft_error *err)
{
    int rc;
    if (!ref || *slot) return 0;
    if ((rc = ps_load(b->ps, x->id, ref, slot, err)) == WEFT_ENOTFOUND) {
        rc = WEFT_EINVAL;
        if (err) err->code = rc;
    }
    return rc;
}

static int load_payloads(rb *b, xc_exec *x, weft_error *err)
{
    size_t i;
    int rc;
    if ((rc = load_one(b, x, x->input_ref, &x->input, err)) ||
        (rc = load_one(b, x, x->output_ref, &x->output, err)))
        return rc;
    for (i = 0; i < x->tasks.len; i++) {
        xc_task *t = x->tasks.items[i];
        if ((rc = load_one(b, x, t->input_ref, &t->input, err)) ||
            (rc = load_one(b, x, t->output_ref, &t->output, err)))
            return rc;
    }
    return 0;
}

/* One payload outside when it is large (ps_keep); a failure keeps it inline. */
static void keep_one(rb *b, xc_exec *x, const char *what, json_object *v, char **ref)
{
    weft_error err = {0};
    if (ps_keep(b->ps, x->id, what, v, ref, &err))
        fprintf(stderr, "weft: workflow %s: %s (kept inline)\n", x->id, err.msg);
}

/* Large inputs and outputs go outside before a save (each checked once). */
static void keep_payloads(rb *b, xc_exec *x)
{
    char what[200];
    size_t i;
    if (!b->ps) return;
    for (i = 0; i < x->tasks.len; i++) {
        xc_task *t = x->tasks.items[i];
        if (t->sized) continue;
        free(t->output_ref);
        t->output_ref = NULL;
        /* an input is resolved once, when its task is made: one kept
         * outside already need not be hashed again on each status change */
        snprintf(what, sizeof what, "input of task '%s'", t->ref);
        if (!t->input_ref) keep_one(b, x, what, t->input, &t->input_ref);
        snprintf(what, sizeof what, "output of task '%s'", t->ref);
        keep_one(b, x, what, t->output, &t->output_ref);
        t->sized = 1;
    }
    if (xc_wf_terminal(x->status) && x->output && !x->output_ref)
        keep_one(b, x, "workflow output", x->output, &x->output_ref);
}

/* x's entry in the execution index (rs_index), pointing into x. */
static void index_of(const xc_exec *x, rs_index *ix)
{
    ix->status = weft_wf_status_name(x->status);
    ix->name = x->def->name;
    ix->version = x->def->version;
    ix->correlation_id = x->correlation_id;
    ix->start_ms = x->created_ms;
    ix->end_ms = xc_wf_terminal(x->status) ? x->ended_ms : 0;
}

/* A stored execution (rs_exec, cleared here) into *out. */
static int decode(rb *b, const char *id, rs_exec *e, xc_exec **out, weft_error *err)
{
    def_workflow *def = NULL;
    json_object *doc = NULL, *v;
    const char *sid;
    int rc;
    *out = NULL;
    if (!e->doc || !e->defkey) {
        rc = wu_err(err, WEFT_EINVAL, "workflow %s: stored state is incomplete", id);
        goto out;
    }
    if ((rc = exec_def(b, id, e->defkey, &def, err))) {
        wu_err_prefix(err, "workflow %s: stored definition: ", id);
        /* a definition that cannot be read makes the run unreadable (it is
         * failed); Redis not answering, or the run gone meanwhile, does not */
        if (rc != WEFT_EIO && rc != WEFT_ETIMEOUT && rc != WEFT_ENOMEM && rc != WEFT_ENOTFOUND)
            rc = err->code = WEFT_EINVAL;
        goto out;
    }
    if ((rc = wu_parse_json_stored(id, e->doc, &doc, err))) {
        wu_err_prefix(err, "workflow %s: stored state is corrupt: ", id);
        goto out;
    }
    sid = json_object_object_get_ex(doc, "id", &v) ? json_object_get_string(v) : NULL;
    if (!sid)
        rc = wu_err(err, WEFT_EINVAL, "workflow %s: stored state is corrupt: it has no id", id);
    else if (strcmp(sid, id))
        rc = wu_err(err, WEFT_EINVAL, "workflow %s: stored state is corrupt: it names %s", id, sid);
    if (rc) goto out;
    rc = cd_from_doc(doc, def, b->defs, out, err);
    if (rc == 0) {
        (*out)->fence = e->fence;
        (*out)->stored_status = (int)(*out)->status;
        (*out)->cmd = e->cmd;
        e->cmd = NULL;
        if ((rc = load_payloads(b, *out, err))) {
            wu_err_prefix(err, "workflow %s: ", id);
            xc_free(*out);
            *out = NULL;
        }
    }
out:
    json_object_put(doc);
    def_unref(def);
    rs_exec_clear(e);
    return rc;
}

static int rb_exec_load(st_store *s, const char *id, xc_exec **out, uint64_t *fence,
                        weft_error *err)
{
    rb *b = rb_of(s);
    rs_exec e = {0};
    int rc;
    *out = NULL;
    if ((rc = rs_exec_load(b->r, id, 0, &e, err))) return rc;
    if (fence) *fence = e.fence;
    return decode(b, id, &e, out, err);
}

static int rb_exec_load_many(st_store *s, const char *const *ids, size_t n, xc_exec **out, int *rcs,
                             weft_error *err)
{
    rb *b = rb_of(s);
    rs_exec *e = calloc(n + 1, sizeof *e);
    size_t i;
    int rc;
    if (!e) return wu_err(err, WEFT_ENOMEM, "out of memory");
    rc = rs_exec_load_many(b->r, ids, n, e, rcs, err);
    for (i = 0; i < n; i++) {
        weft_error e2 = {0};
        out[i] = NULL;
        if (rc)
            rcs[i] = rc;
        else if (rcs[i] == 0)
            rcs[i] = decode(b, ids[i], &e[i], &out[i], &e2);
        rs_exec_clear(&e[i]);
    }
    free(e);
    return rc;
}

static int rb_exec_read(st_store *s, const char *id, st_doc *out, weft_error *err)
{
    rs_exec e = {0};
    int rc = rs_exec_load(rb_of(s)->r, id, 0, &e, err);
    memset(out, 0, sizeof *out);
    if (rc == 0) {
        out->doc = e.doc;
        out->status = e.status;
        out->cmd = e.cmd;
        out->fence = e.fence;
        e.doc = e.status = e.cmd = NULL;
    }
    rs_exec_clear(&e);
    return rc;
}

static int rb_exec_save_many(st_store *s, st_save *sv, size_t n, weft_error *err)
{
    rb *b = rb_of(s);
    rs_save *rv = calloc(n + 1, sizeof *rv);
    rs_index *ix = calloc(n + 1, sizeof *ix);
    wu_buf *docs = calloc(n + 1, sizeof *docs);
    size_t i;
    int rc = 0, sent = 0;
    if (!rv || !ix || !docs) {
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++) {
        xc_exec *x = sv[i].x;
        keep_payloads(b, x);
        if (cd_doc_text(x, &docs[i])) {
            rc = wu_err(err, WEFT_ENOMEM, "out of memory");
            goto out;
        }
        rv[i].id = x->id;
        rv[i].fence = sv[i].fence;
        rv[i].loaded_fence = sv[i].loaded_fence;
        rv[i].doc = docs[i].data;
        rv[i].status = weft_wf_status_name(x->status);
        rv[i].terminal = xc_wf_terminal(x->status);
        rv[i].revive = x->revived;
        rv[i].cmd = x->cmd;
        rv[i].steps = sv[i].steps;
        rv[i].nsteps = sv[i].nsteps;
        rv[i].events = sv[i].events;
        rv[i].nevents = sv[i].nevents;
        rv[i].acks = sv[i].acks;
        rv[i].nacks = sv[i].nacks;
        /* an end, or a run made to run again: a run not ended is found on
         * the decider queue (a pause or resume changes nothing there) */
        if ((xc_wf_terminal(x->status) && x->stored_status != (int)x->status) || x->revived) {
            index_of(x, &ix[i]);
            rv[i].ix = &ix[i];
        }
    }
    sent = 1; /* rs_exec_save_many sets every item's code */
    rc = rs_exec_save_many(b->r, rv, n, err);
    for (i = 0; i < n; i++) {
        if (rv[i].rc == 0) sv[i].x->stored_status = (int)sv[i].x->status;
        sv[i].rc = rv[i].rc;
        sv[i].new_fence = rv[i].new_fence;
        snprintf(sv[i].why, sizeof sv[i].why, "%s", rv[i].why);
    }
out:
    for (i = 0; rc && !sent && i < n; i++) { /* failed before any was sent: every item's */
        sv[i].rc = rc;
        snprintf(sv[i].why, sizeof sv[i].why, "%s", err->msg);
    }
    for (i = 0; docs && i < n; i++)
        wu_buf_free(&docs[i]);
    free(docs);
    free(ix);
    free(rv);
    return rc;
}

static int rb_exec_create_many(st_store *s, st_create *c, size_t n, weft_error *err)
{
    rb *b = rb_of(s);
    rs_create *rv = calloc(n + 1, sizeof *rv);
    rs_index *ix = calloc(n + 1, sizeof *ix);
    wu_buf *docs = calloc(n + 1, sizeof *docs);
    char(*keys)[17] = calloc(n + 1, sizeof *keys);
    size_t *at = calloc(n + 1, sizeof *at);
    size_t i, m = 0;
    int rc = 0;
    if (!rv || !ix || !docs || !keys || !at) {
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++) {
        xc_exec *x = c[i].x;
        weft_error e2 = {0};
        const char *deftext;
        c[i].rc = 0;
        c[i].why[0] = 0;
        /* a large input goes outside; one over the hard limit is refused */
        if (!x->input_ref &&
            (c[i].rc = ps_keep(b->ps, x->id, "workflow input", x->input, &x->input_ref, &e2))) {
            snprintf(c[i].why, sizeof c[i].why, "%s", e2.msg);
            continue;
        }
        deftext = json_object_to_json_string_ext(x->def->json, JSON_C_TO_STRING_PLAIN);
        cd_def_key(deftext, keys[m]);
        dc_put(b->cache, keys[m], x->def);
        keep_payloads(b, x);
        rv[m].id = x->id;
        /* out of memory: no document, which the create refuses */
        rv[m].doc = cd_doc_text(x, &docs[m]) ? NULL : docs[m].data;
        rv[m].status = weft_wf_status_name(x->status);
        rv[m].def = deftext;
        rv[m].defkey = keys[m];
        rv[m].due_ms = wu_now_ms();
        rv[m].steps = c[i].steps;
        rv[m].nsteps = c[i].nsteps;
        rv[m].events = c[i].events;
        rv[m].nevents = c[i].nevents;
        index_of(x, &ix[m]);
        rv[m].ix = &ix[m];
        at[m++] = i;
    }
    if (m) rc = rs_exec_create_many(b->r, rv, m, err);
    for (i = 0; i < m; i++) {
        c[at[i]].rc = rc ? rc : rv[i].rc;
        if (c[at[i]].rc == 0) c[at[i]].x->stored_status = (int)c[at[i]].x->status;
        snprintf(c[at[i]].why, sizeof c[at[i]].why, "%s", rc ? err->msg : rv[i].why);
    }
out:
    for (i = 0; docs && i < n; i++)
        wu_buf_free(&docs[i]);
    free(docs);
    free(keys);
    free(at);
    free(ix);
    free(rv);
    return rc;
}

/* A document that cannot be read fails its workflow, so nothing waits on it forever. */
static int rb_exec_fail(st_store *s, const char *id, uint64_t fence, const char *why,
                        weft_error *err)
{
    json_object *doc, *r;
    rs_step done = {.kind = RS_DONE};
    char ev[WEFT_ERROR_MAX + 128];
    const char *evs[1] = {ev};
    /* its index entry: what its create stored of it (a run from before
     * the field: start 0, no name) */
    rs_index ix = {.status = "FAILED", .name = "", .end_ms = wu_now_ms()};
    rs_save sv;
    char *what = NULL;
    int rc;
    if ((rc = rs_exec_field(rb_of(s)->r, id, "", "ix", &what, err)) != 0) return rc;
    ix.what = what;
    doc = json_object_new_object();
    json_object_object_add(doc, "id", json_object_new_string(id));
    json_object_object_add(doc, "status", json_object_new_string("FAILED"));
    json_object_object_add(doc, "reason", json_object_new_string(why));
    json_object_object_add(doc, "endTime", json_object_new_int64(wu_now_ms()));
    r = json_object_new_object(); /* its event: rs_events adds workflowId and time */
    json_object_object_add(r, "status", json_object_new_string("FAILED"));
    json_object_object_add(r, "reason", json_object_new_string(why));
    snprintf(ev, sizeof ev, "%s", json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN));
    memset(&sv, 0, sizeof sv);
    sv.id = id;
    sv.fence = fence;
    sv.doc = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
    sv.status = "FAILED";
    sv.terminal = 1;
    sv.steps = &done;
    sv.nsteps = 1;
    sv.events = evs;
    sv.nevents = 1;
    sv.cmd = "*";
    sv.ix = &ix;
    rc = rs_exec_save_many(rb_of(s)->r, &sv, 1, err);
    if (rc == 0 && sv.rc) rc = wu_err(err, sv.rc, "%s", sv.why);
    free(what);
    json_object_put(doc);
    json_object_put(r);
    return rc;
}

/* ---- the rest is rs's own, one call each ---- */

static void rb_free(st_store *s)
{
    if (s) {
        rs_free(rb_of(s)->r);
        free(s);
    }
}
static const char *rb_where(st_store *s)
{
    return rs_url(rb_of(s)->r);
}
static void rb_revive(st_store *s)
{
    rs_revive(rb_of(s)->r);
}
static int rb_broken(const st_store *s)
{
    return rs_broken(((const rb *)s)->r);
}
static int rb_ping(st_store *s, weft_error *err)
{
    return rs_command(rb_of(s)->r, err, "PING");
}
static int rb_exec_command(st_store *s, const char *id, const char *text, const char *kind,
                           char **pending, char status[32], weft_error *err)
{
    return rs_exec_command(rb_of(s)->r, id, text, kind, pending, status, err);
}
static int rb_exec_flush(st_store *s, const char *id, weft_error *err)
{
    return rs_exec_flush(rb_of(s)->r, id, err);
}
static int rb_exec_exists_many(st_store *s, const char *const *ids, size_t n, int *exists,
                               weft_error *err)
{
    return rs_exec_exists_many(rb_of(s)->r, ids, n, exists, err);
}
static int rb_renew_many(st_store *s, const st_lease *c, size_t n, int64_t lease_ms, int *ok,
                         weft_error *err)
{
    return rs_renew_many(rb_of(s)->r, c, n, lease_ms, ok, err);
}
static int rb_ack(st_store *s, const st_lease *c, weft_error *err)
{
    return rs_ack(rb_of(s)->r, c, err);
}
static int rb_reap(st_store *s, const char *type, int max_reaps, char ***exhausted,
                   size_t *nexhausted, weft_error *err)
{
    return rs_reap(rb_of(s)->r, type, max_reaps, exhausted, nexhausted, err);
}
static int rb_poll(st_store *s, const char *queue, int max, int64_t lease_ms, int max_reaps,
                   st_lease *out, int *reaped, char ***exhausted, size_t *nexhausted,
                   weft_error *err)
{
    return rs_poll(rb_of(s)->r, queue, max, lease_ms, max_reaps, out, reaped, exhausted, nexhausted,
                   err);
}
static int rb_lease_extend(st_store *s, const char *queue, const char *workflow_id,
                           const char *task_id, int64_t lease_ms, weft_error *err)
{
    return rs_lease_extend(rb_of(s)->r, queue, workflow_id, task_id, lease_ms, err);
}
static int rb_queue_sizes(st_store *s, const char *type, long long *ready, long long *leased,
                          weft_error *err)
{
    return rs_queue_sizes(rb_of(s)->r, type, ready, leased, err);
}
static int rb_queue_has(st_store *s, const char *type, const char *workflow_id, const char *task_id,
                        weft_error *err)
{
    return rs_queue_has(rb_of(s)->r, type, workflow_id, task_id, err);
}

static int rb_queue_polled(st_store *s, const char *queue, int64_t *ms, weft_error *err)
{
    return rs_queue_polled(rb_of(s)->r, queue, ms, err);
}

static int rb_queue_list(st_store *s, st_qinfo **out, size_t *n, weft_error *err)
{
    return rs_queue_list(rb_of(s)->r, out, n, err);
}

static int rb_queue_member(st_store *s, const char *queue, const char *workflow_id,
                           const char *task_id, st_qmember *out, weft_error *err)
{
    return rs_queue_member(rb_of(s)->r, queue, workflow_id, task_id, out, err);
}

static int rb_queue_limits(st_store *s, const char *queue, json_object **out, weft_error *err)
{
    return rs_queue_limits(rb_of(s)->r, queue, out, err);
}
static int rb_search(st_store *s, const st_query *q, long long *total, st_hit **hits, size_t *n,
                     weft_error *err)
{
    return rs_search(rb_of(s)->r, q, total, hits, n, err);
}
static int rb_task_log_add(st_store *s, const char *workflow_id, const char *task_id,
                           const char *const *lines, size_t n, weft_error *err)
{
    return rs_task_log_add(rb_of(s)->r, workflow_id, task_id, lines, n, err);
}
static int rb_task_log(st_store *s, const char *workflow_id, const char *task_id, char **lines,
                       weft_error *err)
{
    return rs_task_log(rb_of(s)->r, workflow_id, task_id, lines, err);
}
static int rb_due_claim(st_store *s, int wait_ms, int due_max, int64_t hold_ms, char (*due_ids)[64],
                        int *ndue, const char *const *types, size_t ntypes, int max,
                        int64_t lease_ms, st_lease *out, weft_error *err)
{
    return rs_due_claim(rb_of(s)->r, wait_ms, due_max, hold_ms, due_ids, ndue, types, ntypes, max,
                        lease_ms, out, err);
}
static int rb_wake(st_store *s, const char *id, int64_t at, int only_earlier, weft_error *err)
{
    return rs_wake(rb_of(s)->r, id, at, only_earlier, err);
}
static int rb_forget(st_store *s, const char *id, int missing, weft_error *err)
{
    return rs_forget(rb_of(s)->r, id, missing, err);
}
static int rb_unfinished(st_store *s, long long *n, weft_error *err)
{
    return rs_unfinished(rb_of(s)->r, n, err);
}
static int rb_def_register(st_store *s, const char *name, int version, const char *json,
                           weft_error *err)
{
    return rs_def_register(rb_of(s)->r, name, version, json, err);
}
static int rb_def_get(st_store *s, const char *name, int version, char **json, int *version_out,
                      weft_error *err)
{
    return rs_def_get(rb_of(s)->r, name, version, json, version_out, err);
}
static int rb_def_list(st_store *s, char **json, weft_error *err)
{
    return rs_def_list(rb_of(s)->r, json, err);
}
static int rb_taskdef_put(st_store *s, const char *name, const char *json, weft_error *err)
{
    return rs_taskdef_put(rb_of(s)->r, name, json, err);
}
static int rb_taskdef_get(st_store *s, const char *name, char **json, weft_error *err)
{
    return rs_taskdef_get(rb_of(s)->r, name, json, err);
}
static int rb_taskdef_list(st_store *s, char **json, weft_error *err)
{
    return rs_taskdef_list(rb_of(s)->r, json, err);
}
static int rb_taskdefs_get(st_store *s, const char *const *names, size_t n, char **jsons,
                           weft_error *err)
{
    return rs_taskdefs_get(rb_of(s)->r, names, n, jsons, err);
}
static int rb_idem_claim(st_store *s, const char *key, const char *id, char existing[64],
                         weft_error *err)
{
    return rs_idem_claim(rb_of(s)->r, key, id, existing, err);
}
static int rb_daemon_beat(st_store *s, const char *daemon_id, const char *info_json,
                          weft_error *err)
{
    return rs_daemon_beat(rb_of(s)->r, daemon_id, info_json, err);
}
static int rb_daemons_forget(st_store *s, int64_t seen_before, size_t *n, weft_error *err)
{
    return rs_daemons_forget(rb_of(s)->r, seen_before, n, err);
}

static int rb_daemons(st_store *s, char **json, weft_error *err)
{
    return rs_daemons(rb_of(s)->r, json, err);
}
static int rb_secret_set(st_store *s, const char *name, const char *value, weft_error *err)
{
    return rs_secret_set(rb_of(s)->r, name, value, err);
}
static int rb_secret_get(st_store *s, const char *name, char **value, weft_error *err)
{
    return rs_secret_get(rb_of(s)->r, name, value, err);
}
static int rb_secret_delete(st_store *s, const char *name, weft_error *err)
{
    return rs_secret_delete(rb_of(s)->r, name, err);
}
static int rb_secret_names(st_store *s, char ***names, size_t *n, weft_error *err)
{
    return rs_secret_names(rb_of(s)->r, names, n, err);
}
static int rb_events(st_store *s, const char *workflow_id, const char *after_id, char *next_id,
                     int block_ms, int (*fn)(void *ud, const char *id, const char *json), void *ud,
                     weft_error *err)
{
    return rs_events(rb_of(s)->r, workflow_id, after_id, next_id, block_ms, fn, ud, err);
}

static const st_ops rb_ops = {
    .size = sizeof(st_ops),
    .name = "redis",
    .free = rb_free,
    .where = rb_where,
    .revive = rb_revive,
    .broken = rb_broken,
    .ping = rb_ping,
    .exec_create_many = rb_exec_create_many,
    .exec_load = rb_exec_load,
    .exec_load_many = rb_exec_load_many,
    .exec_read = rb_exec_read,
    .exec_save_many = rb_exec_save_many,
    .exec_fail = rb_exec_fail,
    .exec_command = rb_exec_command,
    .exec_flush = rb_exec_flush,
    .exec_exists_many = rb_exec_exists_many,
    .renew_many = rb_renew_many,
    .ack = rb_ack,
    .reap = rb_reap,
    .poll = rb_poll,
    .lease_extend = rb_lease_extend,
    .queue_sizes = rb_queue_sizes,
    .queue_has = rb_queue_has,
    .due_claim = rb_due_claim,
    .wake = rb_wake,
    .forget = rb_forget,
    .unfinished = rb_unfinished,
    .def_register = rb_def_register,
    .def_get = rb_def_get,
    .def_list = rb_def_list,
    .taskdef_put = rb_taskdef_put,
    .taskdef_get = rb_taskdef_get,
    .taskdef_list = rb_taskdef_list,
    .taskdefs_get = rb_taskdefs_get,
    .idem_claim = rb_idem_claim,
    .daemon_beat = rb_daemon_beat,
    .daemons = rb_daemons,
    .daemons_forget = rb_daemons_forget,
    .secret_set = rb_secret_set,
    .secret_get = rb_secret_get,
    .secret_delete = rb_secret_delete,
    .secret_names = rb_secret_names,
    .events = rb_events,
    .queue_polled = rb_queue_polled,
    .queue_member = rb_queue_member,
    .queue_limits = rb_queue_limits,
    .search = rb_search,
    .task_log_add = rb_task_log_add,
    .task_log = rb_task_log,
    .queue_list = rb_queue_list,
};

int st_redis_open(const st_redis_opts *o, st_store **out, weft_error *err)
{
    rb *b;
    int rc;
    *out = NULL;
    if ((rc = st_check(&rb_ops, err)) != 0) return rc;
    if (!(b = calloc(1, sizeof *b))) return wu_err(err, WEFT_ENOMEM, "out of memory");
    b->base.ops = &rb_ops;
    b->defs = o->defs;
    b->cache = o->cache;
    b->ps = o->ps;
    rc = rs_open(&o->rs, &b->r, err);
    if (!b->r) {
        free(b);
        return rc;
    }
    *out = &b->base;
    return rc;
}

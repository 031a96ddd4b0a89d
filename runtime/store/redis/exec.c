/* The Redis store's executions (redis.h): create, load, save, command, flush. */
#include "store/redis/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* Events (one-line JSON texts) as one argument, a line each, for a
 * script's single stream entry and message; NULL when there are none (or no
 * memory: oom set). */
static char *events_arg(const char *id, const char *const *ev, size_t n, int *oom, weft_error *err)
{
    size_t i, len = 0;
    char *t, *p;
    for (i = 0; i < n; i++) {
        if (!ev[i]) return wu_err(err, WEFT_EINVAL, "workflow %s: event %zu is NULL", id, i), NULL;
        if (strchr(ev[i], '\n'))
            return wu_err(err, WEFT_EINVAL, "workflow %s: event %zu spans lines", id, i), NULL;
        len += strlen(ev[i]) + 1;
    }
    if (n == 0) return NULL;
    if (!(p = t = malloc(len))) {
        *oom = 1;
        return NULL;
    }
    for (i = 0; i < n; i++) {
        size_t l = strlen(ev[i]);
        memcpy(p, ev[i], l);
        p += l;
        *p++ = '\n';
    }
    p[-1] = 0;
    return t;
}

/* The "status" of a document, or RUNNING. */
static char *doc_status(const char *doc)
{
    json_object *j = NULL, *s;
    char *out;
    if (!wu_parse_json_stored("document", doc, &j, NULL) &&
        json_object_object_get_ex(j, "status", &s) && json_object_is_type(s, json_type_string))
        out = strdup(json_object_get_string(s));
    else
        out = strdup("RUNNING");
    json_object_put(j);
    return out;
}

/* A create's decider queue entry goes in with its steps, after create.lua.
 * On a Redis Cluster those may be other nodes: should create.lua run and
 * its steps not (a node lost between), nothing would look at the execution
 * again. So there each execution gets an entry first, for in
 * CREATE_GUARD_MS, which its steps can only bring earlier (ZADD LT): the
 * sweep finds it and applies its outbox. The guard goes ahead of
 * create.lua (wave -1 of the create's group): in the same exchange when its
 * partition is on the execution's node (a replica that has create.lua's
 * write has the guard's too), else in an exchange before it. */
#define CREATE_GUARD_MS 10000

static void guard_cmd(rs *r, const char *id, long long when, rs_cmd *c)
{
    char dq[KEY_MAX];
    rs_k_dq(r, rs_part(r, id), dq);
    rs_cmd_add(c, "ZADD");
    rs_cmd_dup(c, dq);
    rs_cmd_add(c, "LT");
    rs_cmd_addf(c, "%lld", when);
    rs_cmd_add(c, id);
    c->wave = -1;
}

/* One round trip for all n (more on a cluster when their keys are on other
 * nodes): create.lua, ZADD the decider queue and trim the outbox for each,
 * pipelined. */
int rs_exec_create_many(rs *r, rs_create *cr, size_t n, weft_error *err)
{
    rs_cmd *head = calloc(2 * n + 1, sizeof *head), *trim = calloc(n + 1, sizeof *trim);
    redisReply **hrep = calloc(2 * n + 1, sizeof *hrep), **crep;
    rs_entry **es = calloc(n + 1, sizeof *es);
    step_set *sets = calloc(n + 1, sizeof *sets);
    size_t *at = calloc(n + 1, sizeof *at);
    size_t i, j, m = 0, ng = 0;
    int rc = 0;

    if ((rc = rs_ensure(r, err)) != 0) goto out; /* the layout names the keys */
    if (!head || !trim || !hrep || !es || !sets || !at) {
        rc = rs_oom(err);
        goto out;
    }
    for (i = 0; i < n; i++) {
        char h[KEY_MAX], out[KEY_MAX], ev[KEY_MAX];
        weft_error e2 = {0};
        char *status = NULL, *evs = NULL;
        rs_create *c = &cr[i];
        rs_step wake = {.kind = RS_WAKE, .at = c->due_ms};
        const rs_step *st = c->nsteps ? c->steps : &wake;
        size_t nst = c->nsteps ? c->nsteps : 1;
        char *what = NULL;
        rs_entry *e = NULL;
        c->why[0] = 0;
        if ((c->rc = rs_check_id(c->id, &e2)) == 0 && (!c->doc || !c->def || !c->defkey))
            c->rc =
                wu_err(&e2, WEFT_EINVAL, "workflow %s: no document or definition to store", c->id);
        for (j = 0; j < c->nsteps && c->rc == 0; j++)
            if ((c->rc = rs_check_step(&c->steps[j], &e2)) != 0)
                wu_err_prefix(&e2, "workflow %s: ", c->id);
        if (c->rc == 0) {
            int nomem = 0;
            evs = events_arg(c->id, c->events, c->nevents, &nomem, &e2);
            c->rc = e2.code ? e2.code : nomem ? rs_oom(&e2) : 0;
        }
        if (c->rc == 0 && !(status = c->status ? strdup(c->status) : doc_status(c->doc)))
            c->rc = rs_oom(&e2);
        if (c->rc == 0 && !(what = c->ix ? rs_index_what(c->ix) : strdup(""))) c->rc = rs_oom(&e2);
        if (c->rc == 0 && !(es[m] = e = calloc(nst + 1, sizeof *e))) c->rc = rs_oom(&e2);
        if (c->rc) {
            free(status);
            free(evs);
            free(what);
            snprintf(c->why, sizeof c->why, "%s", e2.msg);
            continue;
        }
        rs_k_exec(r, c->id, "", h);
        rs_k_exec(r, c->id, ":out", out);
        rs_k_exec(r, c->id, ":ev", ev);
        rs_cmd_script(&head[m], r, S_CREATE, 3);
        rs_cmd_dup(&head[m], h);
        rs_cmd_dup(&head[m], out);
        rs_cmd_dup(&head[m], ev);
        rs_cmd_add(&head[m], c->doc);
        rs_cmd_add(&head[m], c->def);
        rs_cmd_add(&head[m], c->defkey);
        rs_cmd_addn(&head[m], status, strlen(status), status);
        /* a run not ended has no index entry: a search finds it on the
         * decider queue and reads this */
        rs_cmd_addn(&head[m], what, strlen(what), what);
        rs_cmd_add(&head[m], STREAM_MAXLEN);
        rs_cmd_addf(&head[m], "%zu", nst);
        /* the outbox entries at fence 1 (a WAKE is ZADD LT, so a create of
         * a taken id can only make that execution due earlier); the script
         * gets their text after the "1|" */
        for (j = 0; j < nst; j++)
            if (rs_step_entry(&e[j], &st[j], 1))
                head[m].oom = 1;
            else
                rs_cmd_add(&head[m], e[j].raw + 2);
        if (evs) rs_cmd_addn(&head[m], evs, strlen(evs), evs);
        /* exactly its own entries: a create of a taken id leaves that
         * execution's outbox alone */
        rs_cmd_add(&trim[m], "ZREM");
        rs_cmd_dup(&trim[m], out);
        for (j = 0; j < nst; j++)
            if (e[j].raw) rs_cmd_add(&trim[m], e[j].raw);
        sets[m].id = c->id;
        sets[m].e = e;
        sets[m].n = nst;
        sets[m].trim = &trim[m];
        if (!(sets[m].rep = calloc(nst + 1, sizeof *sets[m].rep))) head[m].oom = 1;
        at[m++] = i;
    }
    if (m == 0) goto out;
    if (r->cl) {
        /* the guards first, each in its create's group */
        long long when = (long long)wu_now_ms() + CREATE_GUARD_MS;
        memmove(head + m, head, m * sizeof *head);
        memset(head, 0, m * sizeof *head);
        for (i = 0; i < m; i++) {
            guard_cmd(r, cr[at[i]].id, when, &head[i]);
            head[i].group = head[m + i].group = (int)i + 1;
        }
        ng = m;
    }
    rc = rs_steps_apply(r, head, ng + m, hrep, sets, m, err);
    crep = hrep + ng; /* create.lua's */
    for (i = 0; i < m; i++) {
        rs_create *c = &cr[at[i]];
        weft_error e2 = {0};
        char h[KEY_MAX];
        rs_k_exec(r, c->id, "", h);
        if (rc)
            c->rc = rc, snprintf(c->why, sizeof c->why, "%s", err->msg);
        else if (rs_is_err(crep[i]))
            c->rc = rs_reply_err(r, crep[i], h, &e2);
        else if (!crep[i] || crep[i]->type != REDIS_REPLY_INTEGER)
            c->rc = rs_bad_reply(r, h, &e2);
        else if (crep[i]->integer == 0)
            c->rc = wu_err(&e2, WEFT_EEXIST, "workflow %s already exists", c->id);
        else /* a refused step waits in the outbox */
            rs_steps_check(r, c->id, sets[i].e, sets[i].n, sets[i].rep, &e2);
        if (c->rc && !rc) snprintf(c->why, sizeof c->why, "%s", e2.msg);
    }
    rs_replies_free(hrep, ng + m);
out:
    for (i = 0; i < m; i++) {
        if (sets[i].rep) rs_replies_free(sets[i].rep, sets[i].n);
        free(sets[i].rep);
        rs_entries_free(es[i], sets[i].n);
    }
    free(head);
    free(trim);
    free(hrep);
    free(es);
    free(sets);
    free(at);
    return rc;
}

int rs_exec_create(rs *r, const char *id, const char *doc, const char *def, const char *defkey,
                   int64_t due_ms, weft_error *err)
{
    rs_create c;
    int rc;
    memset(&c, 0, sizeof c);
    c.id = id;
    c.doc = doc;
    c.def = def;
    c.defkey = defkey;
    c.due_ms = due_ms;
    if ((rc = rs_exec_create_many(r, &c, 1, err)) != 0) return rc;
    if (c.rc) return wu_err(err, c.rc, "%s", c.why);
    return 0;
}

void rs_exec_clear(rs_exec *e)
{
    if (!e) return;
    free(e->doc);
    free(e->def);
    free(e->defkey);
    free(e->status);
    free(e->cmd);
    memset(e, 0, sizeof *e);
}

/* The fields a load reads, in exec_reply's order (def after them when asked for). */
static const char *const load_names[] = {"doc", "defkey", "status", "fence", "cmd", NULL};

static void load_fields(rs_cmd *c)
{
    const char *const *f;
    for (f = load_names; *f; f++)
        rs_cmd_add(c, *f);
}

/* An HMGET doc defkey status fence cmd [def] reply into out: 0, WEFT_ENOTFOUND,
 * WEFT_EINVAL or WEFT_EIO. */
static int exec_reply(rs *r, const char *id, redisReply *x, int want_def, rs_exec *out,
                      weft_error *err)
{
    char h[KEY_MAX];
    redisReply **el;
    memset(out, 0, sizeof *out);
    rs_k_exec(r, id, "", h);
    if (rs_is_err(x)) return rs_reply_err(r, x, h, err);
    if (x->type != REDIS_REPLY_ARRAY || x->elements != (size_t)(want_def ? 6 : 5))
        return rs_bad_reply(r, h, err);
    el = x->element;
    if (el[0]->type != REDIS_REPLY_STRING) return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id);
    if (el[3]->type != REDIS_REPLY_STRING || (want_def && el[5]->type != REDIS_REPLY_STRING))
        return wu_err(err, WEFT_EINVAL, "%s: %s: execution without %s", r->url.shown, h,
                      el[3]->type != REDIS_REPLY_STRING ? "a fence" : "a definition");
    out->doc = rs_reply_dup(el[0]);
    out->defkey = el[1]->type == REDIS_REPLY_STRING ? rs_reply_dup(el[1]) : strdup("");
    out->status = el[2]->type == REDIS_REPLY_STRING ? rs_reply_dup(el[2]) : strdup("");
    out->fence = strtoull(el[3]->str, NULL, 10);
    if (el[4]->type == REDIS_REPLY_STRING) out->cmd = rs_reply_dup(el[4]);
    if (want_def) out->def = rs_reply_dup(el[5]);
    if (!out->doc || !out->defkey || !out->status || (want_def && !out->def) ||
        (el[4]->type == REDIS_REPLY_STRING && !out->cmd)) {
        rs_exec_clear(out);
        return rs_oom(err);
    }
    return 0;
}

/* One round trip: HMGET. */
int rs_exec_load(rs *r, const char *id, int want_def, rs_exec *out, weft_error *err)
{
    char h[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = rs_check_id(id, err)) != 0) return rc;
    rs_k_exec(r, id, "", h);
    rs_cmd_add(&c, "HMGET");
    rs_cmd_add(&c, h);
    load_fields(&c);
    if (want_def) rs_cmd_add(&c, "def");
    if ((rc = rs_one(r, &c, &x, h, err)) != 0) return rc;
    rc = exec_reply(r, id, x, want_def, out, err);
    rs_replies_free(&x, 1);
    return rc;
}

int rs_exec_field(rs *r, const char *id, const char *suffix, const char *field, char **out,
                  weft_error *err)
{
    char h[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    *out = NULL;
    if ((rc = rs_check_id(id, err)) != 0) return rc;
    rs_k_exec(r, id, suffix, h);
    rs_cmd_add(&c, "HGET");
    rs_cmd_add(&c, h);
    rs_cmd_add(&c, field);
    if ((rc = rs_one(r, &c, &x, h, err)) != 0) return rc;
    if (rs_is_str(x) && !(*out = rs_reply_dup(x)))
        rc = rs_oom(err);
    else if (!rs_is_str(x) && x->type != REDIS_REPLY_NIL)
        rc = rs_bad_reply(r, h, err);
    rs_replies_free(&x, 1);
    return rc;
}

/* One round trip: HGET def and EXISTS, pipelined. */
int rs_exec_def(rs *r, const char *id, char **def, weft_error *err)
{
    char h[KEY_MAX];
    rs_cmd c[2];
    redisReply *x[2];
    int rc;

    *def = NULL;
    if ((rc = rs_check_id(id, err)) != 0) return rc;
    rs_k_exec(r, id, "", h);
    memset(c, 0, sizeof c);
    rs_cmd_add(&c[0], "HGET");
    rs_cmd_add(&c[0], h);
    rs_cmd_add(&c[0], "def");
    rs_cmd_add(&c[1], "EXISTS");
    rs_cmd_add(&c[1], h);
    rc = rs_pipe(r, c, 2, x, h, err);
    rs_cmds_free(c, 2);
    if (!rc && rs_is_err(x[0]))
        rc = rs_reply_err(r, x[0], h, err);
    else if (!rc && x[0]->type == REDIS_REPLY_STRING && !(*def = rs_reply_dup(x[0])))
        rc = rs_oom(err);
    else if (!rc && x[0]->type != REDIS_REPLY_STRING)
        rc = x[1]->type == REDIS_REPLY_INTEGER && x[1]->integer == 0
                 ? wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id)
                 : wu_err(err, WEFT_EINVAL, "%s: %s: execution without a definition", rs_url(r), h);
    rs_replies_free(x, 2);
    return rc;
}

/* save.lua for one save into c (checked first: s->rc on bad input). */
static int save_cmd(rs *r, rs_save *s, rs_cmd *c, weft_error *err)
{
    char h[KEY_MAX], out[KEY_MAX], evk[KEY_MAX], *ev;
    size_t i;
    int rc;
    if ((rc = rs_check_id(s->id, err)) != 0) return rc;
    if (!s->doc || !s->status)
        return wu_err(err, WEFT_EINVAL, "workflow %s: no document or status to save", s->id);
    for (i = 0; i < s->nsteps; i++)
        if ((rc = rs_check_step(&s->steps[i], err)) != 0)
            return wu_err_prefix(err, "workflow %s: ", s->id);
    for (i = 0; i < s->nacks; i++)
        if ((rc = rs_check_claim(&s->acks[i], err)) != 0) return rc;
    err->code = 0;
    ev = events_arg(s->id, s->events, s->nevents, &c->oom, err);
    if (err->code) return err->code;
    rs_k_exec(r, s->id, "", h);
    rs_k_exec(r, s->id, ":out", out);
    rs_k_exec(r, s->id, ":ev", evk);
    rs_cmd_script(c, r, S_SAVE, 3);
    rs_cmd_dup(c, h);
    rs_cmd_dup(c, out);
    rs_cmd_dup(c, evk);
    if (s->fence)
        rs_cmd_addf(c, "%llu", (unsigned long long)s->fence);
    else if (s->loaded_fence) /* unfenced: the last writer wins, but not over an operator */
        rs_cmd_addf(c, "*%llu", (unsigned long long)s->loaded_fence);
    else
        rs_cmd_add(c, "*");
    rs_cmd_add(c, s->doc);
    rs_cmd_add(c, s->status);
    rs_cmd_add(c, s->terminal ? "1" : s->revive ? "2" : "0");
    rs_cmd_addf(c, "%lld", (long long)r->retention_ms);
    rs_cmd_add(c, STREAM_MAXLEN);
    rs_cmd_dup(c, evk);
    rs_cmd_addf(c, "%zu", s->nsteps + (s->ix ? 1 : 0));
    rs_cmd_add(c, s->cmd ? s->cmd : "");
    /* the index entry first, as save_reply applies it: before a DONE that
     * takes the run off the decider queue */
    if (s->ix) {
        char *t = rs_index_text(s->ix);
        if (t)
            rs_cmd_addn(c, t, strlen(t), t);
        else
            c->oom = 1;
    }
    for (i = 0; i < s->nsteps; i++) {
        char *t = rs_step_text(&s->steps[i]);
        if (t)
            rs_cmd_addn(c, t, strlen(t), t);
        else
            c->oom = 1;
    }
    if (ev) rs_cmd_addn(c, ev, strlen(ev), ev);
    return 0;
}

/*
 * save.lua's reply: s->rc and s->new_fence, and on success the entries to
 * apply (left by earlier saves, then this save's steps) in *e / *n.
 */
static void save_reply(rs *r, rs_save *s, redisReply *x, rs_entry **e_out, size_t *n_out,
                       int *whole)
{
    char h[KEY_MAX];
    weft_error err = {0};
    rs_entry *e;
    size_t i, nleft, n = 0;
    uint64_t nf;
    *e_out = NULL;
    *n_out = 0;
    *whole = 0;
    rs_k_exec(r, s->id, "", h);
    if (rs_is_err(x)) {
        s->rc = rs_reply_err(r, x, h, &err);
    } else if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 ||
               x->element[0]->type != REDIS_REPLY_INTEGER) {
        s->rc = rs_bad_reply(r, h, &err);
    } else if (x->element[0]->integer == -1) {
        s->rc = wu_err(&err, WEFT_ENOTFOUND, "no workflow %s", s->id);
    } else if (x->element[0]->integer == 0 && x->elements > 2) {
        s->rc =
            wu_err(&err, WEFT_ESTATE, "execution %s has an operator command to apply first", s->id);
    } else if (x->element[0]->integer == 0) {
        long long cur = x->elements > 1 ? x->element[1]->integer : -1;
        s->rc = wu_err(&err, WEFT_ESTATE,
                       "execution %s was changed by someone else (fence %lld, expected %llu)",
                       s->id, cur, (unsigned long long)s->fence);
    } else if (x->elements < 2 || x->element[1]->type != REDIS_REPLY_INTEGER) {
        s->rc = rs_bad_reply(r, h, &err);
    }
    if (s->rc) {
        snprintf(s->why, sizeof s->why, "%s", err.msg);
        return;
    }
    nf = s->new_fence = (uint64_t)x->element[1]->integer;
    /* From here the save is committed: what cannot be applied stays in the outbox. */
    nleft = x->elements - 2;
    *whole = 1;
    if (nleft + s->nsteps == 0 && !s->ix) return;
    if (!(e = calloc(nleft + s->nsteps + 2, sizeof *e))) { /* ends with raw NULL */
        *whole = 0;
        return;
    }
    for (i = 0; i < nleft; i++) {
        const redisReply *m = x->element[2 + i];
        int k;
        if (m->type != REDIS_REPLY_STRING) continue;
        if ((k = rs_entry_parse(&e[n], m)) == 0) {
            n++;
        } else {
            if (k == -2) *whole = 0;
            free(e[n].raw);
            free(e[n].buf);
            memset(&e[n], 0, sizeof e[n]);
        }
    }
    /* the index entry ahead of the steps: a pipeline cut after a DONE
     * (the run off the decider queue, so no sweep comes) has applied it */
    if (s->ix && rs_index_entry(&e[n], s->ix, nf) == 0) n++;
    for (i = 0; i < s->nsteps; i++, n++)
        if (rs_step_entry(&e[n], &s->steps[i], nf))
            break; /* the rest wait in the outbox for rs_exec_flush */
    *e_out = e;
    *n_out = n;
}

/*
 * Two round trips for all n: the save.lua calls pipelined, then one pipeline
 * applying the committed saves' steps (those of earlier saves left in their
 * outbox first), trimming the outboxes and dropping the acked claims. One
 * round trip when there is nothing to apply.
 */
int rs_exec_save_many(rs *r, rs_save *s, size_t n, weft_error *err)
{
    rs_cmd *c = calloc(n + 1, sizeof *c);
    redisReply **x = calloc(n + 1, sizeof *x);
    size_t *at = calloc(n + 1, sizeof *at);
    step_set *sets = calloc(n + 1, sizeof *sets);
    rs_entry **es = calloc(n + 1, sizeof *es);
    rs_cmd *trims = calloc(n + 1, sizeof *trims);
    size_t i, j, m = 0, nsets = 0;
    int rc = 0, whole;

    if (!c || !x || !at || !sets || !es || !trims) {
        rc = rs_oom(err);
        for (i = 0; i < n; i++) { /* a whole-call failure is every item's */
            s[i].rc = rc;
            snprintf(s[i].why, sizeof s[i].why, "%s", err->msg);
        }
        goto out;
    }
    for (i = 0; i < n; i++) {
        weft_error e = {0};
        s[i].new_fence = 0;
        s[i].why[0] = 0;
        if ((s[i].rc = save_cmd(r, &s[i], &c[m], &e)) != 0) {
            snprintf(s[i].why, sizeof s[i].why, "%s", e.msg);
            rs_cmd_free(&c[m]);
            continue;
        }
        at[m++] = i;
    }
    if (m == 0) goto out;
    if ((rc = rs_pipe(r, c, m, x, m == 1 ? s[at[0]].id : "save", err)) != 0) {
        for (i = 0; i < m; i++) {
            s[at[i]].rc = rc;
            snprintf(s[at[i]].why, sizeof s[at[i]].why, "%s", err->msg);
        }
        goto out;
    }
    for (i = 0; i < m; i++) {
        rs_save *sv = &s[at[i]];
        step_set *st = &sets[nsets];
        char out[KEY_MAX];
        save_reply(r, sv, x[i], &es[i], &st->n, &whole);
        if (sv->rc) continue;
        if (st->n == 0 && sv->nacks == 0) continue;
        /* the trim removes exactly what this pipeline applies (and any
         * unreadable leftover): an entry recorded again meanwhile (refused
         * by Redis, or by a save whose steps are in flight) stays */
        rs_k_exec(r, sv->id, ":out", out);
        rs_cmd_add(&trims[nsets], "ZREM");
        rs_cmd_dup(&trims[nsets], out);
        if (whole) /* every leftover: applied now, or malformed */
            for (j = 2; j < x[i]->elements; j++)
                if (x[i]->element[j]->type == REDIS_REPLY_STRING)
                    rs_cmd_addn(&trims[nsets], x[i]->element[j]->str, x[i]->element[j]->len, NULL);
        for (j = 0; j < st->n; j++)
            if (!whole || es[i][j].fence == sv->new_fence) rs_cmd_add(&trims[nsets], es[i][j].raw);
        st->id = sv->id;
        st->e = es[i];
        st->trim = &trims[nsets];
        st->acks = sv->acks;
        st->nacks = sv->nacks;
        st->rep = calloc(st->n + 1, sizeof *st->rep);
        if (!st->rep) {
            rs_cmd_free(&trims[nsets]);
            continue; /* committed; the steps wait in the outbox */
        }
        nsets++;
    }
    if (nsets) {
        rs_cmd *cmds;
        size_t k, *first;
        flight *f;
        weft_error ignored = {0};
        /* committed whatever happens now: a failure leaves steps in the outboxes */
        if (rs_steps_build(r, NULL, 0, sets, nsets, &cmds, &k, &first, &ignored) == 0) {
            if (r->early && (r->c || (r->cl && rs_cl_one_exchange(r, cmds, k))) &&
                (f = rs_flight_new(sets, nsets, es, m, k, first))) {
                /* sent now, replies read with the next round trip */
                rs_flight_send(r, f, cmds);
                sets = NULL;
                es = NULL;
            } else {
                if (rs_steps_now(r, cmds, k, first, 0, NULL, sets, nsets, &ignored) == 0)
                    for (i = 0; i < nsets; i++)
                        rs_steps_check(r, sets[i].id, sets[i].e, sets[i].n, sets[i].rep, &ignored);
                free(first);
            }
            rs_cmds_free(cmds, k);
            free(cmds);
        }
        for (i = 0; sets && i < nsets; i++) {
            rs_replies_free(sets[i].rep, sets[i].n);
            free(sets[i].rep);
        }
    }
    for (i = 0; es && i < m; i++)
        if (es[i]) {
            /* save_reply counted them into a set or dropped them: free by count */
            size_t k = 0;
            while (es[i][k].raw)
                k++;
            rs_entries_free(es[i], k);
        }
out:
    if (x) rs_replies_free(x, m);
    if (c) rs_cmds_free(c, m);
    free(c);
    free(x);
    free(at);
    free(sets);
    free(es);
    free(trims);
    return rc;
}

int rs_exec_save(rs *r, const char *id, uint64_t fence, const char *doc, const char *status,
                 int terminal, const rs_step *steps, size_t nsteps, const char *const *events,
                 size_t nevents, uint64_t *new_fence, weft_error *err)
{
    rs_save s;
    int rc;
    memset(&s, 0, sizeof s);
    s.id = id;
    s.fence = fence;
    s.doc = doc;
    s.status = status;
    s.terminal = terminal;
    s.steps = steps;
    s.nsteps = nsteps;
    s.events = events;
    s.nevents = nevents;
    s.cmd = "*";
    rc = rs_exec_save_many(r, &s, 1, err);
    if (rc) return rc;
    if (s.rc) return wu_err(err, s.rc, "%s", s.why);
    if (new_fence) *new_fence = s.new_fence;
    return 0;
}

/* One round trip: command.lua. */
int rs_exec_command(rs *r, const char *id, const char *text, const char *kind, char **pending,
                    char status[32], weft_error *err)
{
    char h[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    long long k;
    int rc;

    *pending = NULL;
    status[0] = 0;
    if ((rc = rs_check_id(id, err)) != 0) return rc;
    rs_k_exec(r, id, "", h);
    rs_cmd_script(&c, r, S_COMMAND, 1);
    rs_cmd_add(&c, h);
    rs_cmd_add(&c, text);
    rs_cmd_add(&c, kind);
    if ((rc = rs_one(r, &c, &x, h, err)) != 0) return rc;
    if (rs_is_err(x)) {
        rc = rs_reply_err(r, x, h, err);
    } else if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 ||
               x->element[0]->type != REDIS_REPLY_INTEGER || x->element[0]->integer < -1 ||
               x->element[0]->integer > 3 ||
               (x->element[0]->integer != 1 && x->element[0]->integer != -1 &&
                (x->elements < 2 || !rs_is_str(x->element[1])))) {
        rc = rs_bad_reply(r, h, err);
    } else if ((k = x->element[0]->integer) == -1) {
        rc = wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id);
    } else if (k == 0) {
        rs_copy_str(status, 32, x->element[1]);
        rc = wu_err(err, WEFT_ESTATE, "workflow %s is %s", id, status);
    } else if (k > 1 && !(*pending = rs_reply_dup(x->element[1]))) {
        rc = rs_oom(err);
    } else {
        rc = (int)k;
    }
    rs_replies_free(&x, 1);
    return rc;
}

/*
 * One command per execution, pipelined (one round trip): `cmd`, the
 * execution's key, then the words of tail (NULL-terminated, may be NULL).
 * *rep gets the n replies; free them with each_exec_free, also on failure.
 */
static int each_exec(rs *r, const char *cmd, const char *const *ids, size_t n,
                     const char *const *tail, const char *what, redisReply ***rep, weft_error *err)
{
    rs_cmd *c = calloc(n + 1, sizeof *c);
    size_t i;
    int rc;
    *rep = calloc(n + 1, sizeof **rep);
    if (!c || !*rep) {
        free(c);
        return rs_oom(err);
    }
    for (i = 0; i < n; i++) {
        char h[KEY_MAX];
        const char *const *t;
        rs_k_exec(r, ids[i] ? ids[i] : "", "", h);
        rs_cmd_add(&c[i], cmd);
        rs_cmd_dup(&c[i], h);
        for (t = tail; t && *t; t++)
            rs_cmd_add(&c[i], *t);
    }
    rc = rs_pipe(r, c, n, *rep, what, err);
    rs_cmds_free(c, n);
    free(c);
    return rc;
}

static void each_exec_free(redisReply **rep, size_t n)
{
    if (rep) rs_replies_free(rep, n);
    free(rep);
}

/* One round trip: an HMGET per execution, pipelined. */
int rs_exec_load_many(rs *r, const char *const *ids, size_t n, rs_exec *out, int *rcs,
                      weft_error *err)
{
    redisReply **x = NULL;
    size_t i;
    int rc;
    memset(out, 0, n * sizeof *out);
    if ((rc = each_exec(r, "HMGET", ids, n, load_names, "load", &x, err)) != 0)
        for (i = 0; i < n; i++)
            rcs[i] = rc;
    else
        for (i = 0; i < n; i++) {
            weft_error e = {0};
            rcs[i] = rs_check_id(ids[i], &e);
            if (!rcs[i]) rcs[i] = exec_reply(r, ids[i], x[i], 0, &out[i], &e);
        }
    each_exec_free(x, n);
    return rc;
}

int rs_exec_exists_many(rs *r, const char *const *ids, size_t n, int *exists, weft_error *err)
{
    redisReply **x = NULL;
    size_t i;
    int rc = each_exec(r, "EXISTS", ids, n, NULL, "exists", &x, err);
    for (i = 0; !rc && i < n; i++) {
        weft_error e = {0};
        /* a reply that is not a count removes nothing: files go only when
         * Redis said their execution is not there */
        if (!x[i] || x[i]->type != REDIS_REPLY_INTEGER)
            rc = wu_err(err, WEFT_EIO, "EXISTS %s: %s", ids[i],
                        x[i] && x[i]->type == REDIS_REPLY_ERROR ? x[i]->str : "unexpected reply");
        else
            exists[i] = rs_check_id(ids[i], &e) == 0 && x[i]->integer > 0;
    }
    each_exec_free(x, n);
    return rc;
}

/*
 * Two round trips: flush.lua (read the outbox), then one pipeline applying
 * the entries and removing them. One when the outbox is empty. Returns the
 * number of entries applied.
 */
int rs_exec_flush(rs *r, const char *id, weft_error *err)
{
    char out[KEY_MAX];
    rs_cmd c = {0}, trim = {0};
    redisReply *x = NULL, **srep = NULL;
    rs_entry *e = NULL;
    size_t i, n = 0, total;
    int rc, k;

    if ((rc = rs_check_id(id, err)) != 0) return rc;
    rs_k_exec(r, id, ":out", out);
    rs_cmd_script(&c, r, S_FLUSH, 1);
    rs_cmd_add(&c, out);
    rs_cmd_addf(&c, "%d", FLUSH_BATCH);
    if ((rc = rs_array(r, &c, &x, out, err)) != 0) return rc;
    total = x->elements;
    if (total == 0) {
        rs_replies_free(&x, 1);
        return 0;
    }
    e = calloc(total, sizeof *e);
    srep = calloc(total, sizeof *srep);
    if (!e || !srep) {
        rs_replies_free(&x, 1);
        free(e);
        free(srep);
        return rs_oom(err);
    }
    /* removed by member: exactly what was read, malformed entries too */
    rs_cmd_add(&trim, "ZREM");
    rs_cmd_add(&trim, out);
    for (i = 0; i < total; i++) {
        const redisReply *m = x->element[i];
        if (m->type != REDIS_REPLY_STRING) continue;
        k = rs_entry_parse(&e[n], m);
        if (k != -2) rs_cmd_addn(&trim, m->str, m->len, NULL); /* applied, or malformed */
        if (k == 0) {
            n++;
        } else {
            free(e[n].raw);
            free(e[n].buf);
            memset(&e[n], 0, sizeof e[n]);
        }
    }
    rc = rs_steps_run(r, id, NULL, &trim, e, n, NULL, srep, err);
    rs_replies_free(&x, 1); /* trim borrowed its strings */
    if (!rc) rc = rs_steps_check(r, id, e, n, srep, err);
    rs_replies_free(srep, n);
    free(srep);
    rs_entries_free(e, n);
    return rc ? rc : (int)n;
}

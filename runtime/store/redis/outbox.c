/*
 * The Redis store's outbox steps (redis.h): queue steps recorded with a save,
 * then applied and trimmed in one pipeline, or sent early (a flight) and
 * read at the start of the next round trip.
 */
#include "store/redis/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"push", "unqueue", "wake", "done", "index"};
#define NKINDS 5

void rs_entries_free(rs_entry *e, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        free(e[i].raw);
        free(e[i].buf);
    }
    free(e);
}

/* The fields of e->buf (a copy of e->raw) into e: 0, or -1 when malformed. */
static int entry_fields(rs_entry *e)
{
    char *f[6], *p, *end;
    int i, k, nf = 5;
    e->fence = strtoull(e->raw, NULL, 10);
    p = e->buf;
    /* "<fence>|<kind>|<type>|<task>|<at>" and, for a push with queue
     * controls, "|<controls>" (the rest: a name may hold '|') */
    for (i = 0; i < 5; i++) {
        f[i] = p;
        p = strchr(p, '|');
        if (i < 4) {
            if (!p) return -1;
            *p++ = 0;
        } else if (p) {
            *p++ = 0;
            f[5] = p;
            nf = 6;
        }
    }
    for (k = 0; k < NKINDS; k++)
        if (!strcmp(f[1], kind_names[k])) break;
    if (k == NKINDS) return -1;
    e->kind = (rs_step_kind)k;
    e->type = f[2];
    e->task = f[3];
    errno = 0;
    e->at = strtoll(f[4], &end, 10);
    if (errno || *end || end == f[4]) return -1;
    if ((e->kind == RS_PUSH || e->kind == RS_UNQUEUE) && (!*e->type || !*e->task)) return -1;
    if (e->kind == RS_INDEX) {
        if (nf != 6 || !*e->type) return -1;
        e->ix = f[5];
        return 0;
    }
    if (nf == 6 && (e->kind != RS_PUSH || rs_controls_parse(f[5], e) != 0)) return -1;
    return 0;
}

/* Parse an outbox member; 0, -1 when malformed, -2 when out of memory (raw
 * is kept either way). */
int rs_entry_parse(rs_entry *e, const redisReply *x)
{
    memset(e, 0, sizeof *e);
    e->raw = rs_reply_dup(x);
    e->buf = rs_reply_dup(x);
    if (!e->raw || !e->buf) return -2; /* out of memory: not malformed */
    return entry_fields(e);
}

/* (the strings of an index entry are made with rs_cat, not snprintf: one
 * per run, with the save, its outbox entry and its step) */
char *rs_index_what(const rs_index *ix)
{
    const char *corr = ix->correlation_id ? ix->correlation_id : "";
    size_t n = strlen(ix->name) + strlen(corr) + 3 * 24;
    char a[24], b[24], c[24], *t;
    if (ix->what) return strdup(ix->what);
    if ((t = malloc(n)))
        rs_cat(t, n, rs_ll(a, ix->start_ms), ":", rs_ll(b, ix->version), ":",
               rs_digits(c, strlen(ix->name), 0), ":", ix->name, corr, (char *)NULL);
    return t;
}

char *rs_index_text(const rs_index *ix)
{
    char *what = rs_index_what(ix), *t, a[24];
    size_t n = what ? strlen(what) + strlen(ix->status) + 40 : 0;
    if (!what || !(t = malloc(n))) {
        free(what);
        return NULL;
    }
    rs_cat(t, n, "index|", ix->status, "||", rs_ll(a, ix->end_ms), "|", what, (char *)NULL);
    free(what);
    return t;
}

/* An outbox member: "<fence>|<text>" (malloc'd; NULL for text NULL or when
 * out of memory). text is freed. */
static char *fenced(uint64_t fence, char *text)
{
    char num[24], *m = NULL;
    size_t len = text ? strlen(text) + 24 : 0;
    if (text && (m = malloc(len)))
        rs_cat(m, len, rs_digits(num, fence, 0), "|", text, (char *)NULL);
    free(text);
    return m;
}

int rs_index_entry(rs_entry *e, const rs_index *ix, uint64_t fence)
{
    memset(e, 0, sizeof *e);
    if ((e->raw = fenced(fence, rs_index_text(ix)))) e->buf = strdup(e->raw);
    if (!e->raw || !e->buf) {
        free(e->raw);
        free(e->buf);
        e->raw = e->buf = NULL;
        return -1;
    }
    return entry_fields(e);
}

int rs_index_what_parse(const char *what, rs_what *w)
{
    char *end;
    size_t rest;
    int ok;
    memset(w, 0, sizeof *w);
    w->start_ms = strtoll(what, &end, 10);
    ok = *end == ':';
    if (ok) w->version = (int)strtol(end + 1, &end, 10);
    ok = ok && *end == ':';
    if (ok) w->name_len = (size_t)strtoull(end + 1, &end, 10);
    ok = ok && *end == ':';
    w->name = ok ? end + 1 : "";
    rest = strlen(w->name);
    if (w->name_len > rest) w->name_len = rest, ok = 0;
    w->corr = w->name + w->name_len;
    return ok ? 0 : -1;
}

/* Add t (malloc'd, NULL when out of memory) to c, which owns it. */
static void own(rs_cmd *c, char *t)
{
    if (t)
        rs_cmd_addn(c, t, strlen(t), t);
    else
        c->oom = 1;
}

/* An index entry's RPUSH onto its partition's index log (index_lib.lua has
 * its 6 elements), folded into the index later with no parsing: id, record
 * "<fence>|<status>|<start>|<end>|<version>|<name length>|<name><correlation
 * id>", the key of its status's and name's set, start, expiry (the end plus
 * this store's retention, as the run's keys) and correlation member; a run
 * made to run again (end 0) has no set, expiry or member. Into c (the log's
 * key into key). */
static void index_cmd(rs *r, const char *id, const rs_entry *e, rs_cmd *c, char key[KEY_MAX])
{
    rs_what w;
    size_t n, klen;
    int ended = e->at > 0;
    char ix[KEY_MAX], *t;
    /* a malformed one goes in with what it has: start 0, an empty name */
    rs_index_what_parse(e->ix, &w);
    rs_k_ix(r, rs_part(r, id), ix);
    klen = strlen(ix);
    rs_cat(key, KEY_MAX, ix, ":log", (char *)NULL);
    rs_cmd_add(c, "RPUSH");
    rs_cmd_dup(c, key);
    rs_cmd_add(c, id);
    n = strlen(e->type) + strlen(w.name) + 5 * 24;
    if ((t = malloc(n))) {
        char f[24], s[24], a[24], v[24], l[24];
        rs_cat(t, n, rs_digits(f, e->fence, 0), "|", e->type, "|", rs_ll(s, w.start_ms), "|",
               rs_ll(a, e->at), "|", rs_ll(v, w.version), "|", rs_digits(l, w.name_len, 0), "|",
               w.name, (char *)NULL);
    }
    own(c, t);
    if (!ended) { /* no set, its start, no expiry, no member */
        rs_cmd_add(c, "");
        rs_cmd_addf(c, "%lld", (long long)w.start_ms);
        rs_cmd_add(c, "0");
        rs_cmd_add(c, "");
        return;
    }
    /* sized to end with the name, not its correlation id */
    n = klen + 4 + strlen(e->type) + 1 + w.name_len + 1;
    if ((t = malloc(n))) rs_cat(t, n, ix, ":sn:", e->type, ":", w.name, (char *)NULL);
    own(c, t);
    rs_cmd_addf(c, "%lld", (long long)w.start_ms);
    rs_cmd_addf(c, "%lld", (long long)(e->at + r->retention_ms));
    if (!*w.corr) {
        rs_cmd_add(c, "");
        return;
    }
    /* "<correlation id>\0<id>" */
    n = strlen(w.corr) + 1 + strlen(id);
    if (!(t = malloc(n + 1))) {
        c->oom = 1;
        return;
    }
    memcpy(t, w.corr, strlen(w.corr) + 1);
    memcpy(t + strlen(w.corr) + 1, id, strlen(id) + 1);
    rs_cmd_addn(c, t, n, t); /* c owns it */
}

/* Whether a push has queue controls. */
static int controlled(const rs_step *s)
{
    return s->kind == RS_PUSH && (s->priority > 0 || (s->limit && s->limit_name));
}

/* A push's controls as queue_lib.lua reads them from meta:
 * "<priority>:<count>:<per ms>:<concurrency>:<name>" (malloc'd). */
static char *controls_text(const rs_step *s)
{
    const def_qlimit *l = s->limit && s->limit_name ? s->limit : NULL;
    const char *name = l ? s->limit_name : "";
    size_t n = strlen(name) + 96;
    char *t = malloc(n);
    if (t)
        snprintf(t, n, "%d:%d:%lld:%d:%s",
                 s->priority < 0    ? 0
                 : s->priority > 99 ? 99
                                    : s->priority,
                 l ? l->rate_count : 0, l ? (long long)l->rate_per_ms : 0LL, l ? l->concurrency : 0,
                 name);
    return t;
}

int rs_controls_parse(char *text, rs_entry *e)
{
    long long v[4];
    char *p = text, *end;
    int i;
    for (i = 0; i < 4; i++) {
        errno = 0;
        v[i] = strtoll(p, &end, 10);
        if (errno || end == p || *end != ':' || v[i] < 0) return -1;
        p = end + 1;
    }
    /* a rate needs a window of 1 ms to 10 years */
    if (v[0] > 99 || v[1] > 1000000000 || v[3] > 1000000000 ||
        (v[1] > 0 && (v[2] < 1 || v[2] > 315360000000LL)))
        return -1;
    e->priority = (int)v[0];
    e->limit.rate_count = (int)v[1];
    e->limit.rate_per_ms = v[2];
    e->limit.concurrency = (int)v[3];
    e->limit_name = *p ? p : NULL;
    return 0;
}

/* The step as recorded after its fence: "<kind>|<type>|<taskid>|<at>",
 * and "|<controls>" for a push that has them. */
char *rs_step_text(const rs_step *s)
{
    const char *type = s->kind == RS_PUSH || s->kind == RS_UNQUEUE ? s->type : "";
    const char *task = s->kind == RS_PUSH || s->kind == RS_UNQUEUE ? s->task_id : "";
    long long at = s->kind == RS_PUSH || s->kind == RS_WAKE ? (long long)s->at : 0;
    char *ctl = controlled(s) ? controls_text(s) : NULL;
    size_t n = strlen(type) + strlen(task) + (ctl ? strlen(ctl) : 0) + 48;
    char *t = malloc(n), num[24];
    if (controlled(s) && !ctl) {
        free(t);
        return NULL;
    }
    if (t)
        rs_cat(t, n, kind_names[s->kind], "|", type, "|", task, "|",
               rs_digits(num, at < 0 ? 0 - (unsigned long long)at : (unsigned long long)at, at < 0),
               ctl ? "|" : "", ctl ? ctl : "", (char *)NULL);
    free(ctl);
    return t;
}

/* The outbox entry of step st recorded at fence ("<fence>|<step text>"),
 * pointing to st's strings. 0, or -1 when out of memory (e->raw NULL). */
int rs_step_entry(rs_entry *e, const rs_step *st, uint64_t fence)
{
    memset(e, 0, sizeof *e);
    e->fence = fence;
    e->kind = st->kind;
    e->type = st->type;
    e->task = st->task_id;
    e->at = st->at;
    e->lease = st->kind == RS_PUSH && !controlled(st) ? st->lease : NULL;
    e->lease_until = st->lease_until;
    if (controlled(st)) {
        e->priority = st->priority;
        e->limit_name = st->limit && st->limit_name ? st->limit_name : NULL;
        if (e->limit_name) e->limit = *st->limit;
    }
    e->raw = fenced(fence, rs_step_text(st));
    return e->raw ? 0 : -1;
}

int rs_check_step(const rs_step *s, weft_error *err)
{
    int rc;
    if ((unsigned)s->kind > RS_DONE)
        return wu_err(err, WEFT_EINVAL, "queue step: unknown kind %d", (int)s->kind);
    if (s->kind != RS_PUSH && s->kind != RS_UNQUEUE) return 0;
    if ((rc = st_check_name("task type", s->type, TYPE_MAX, 0, err)) != 0 ||
        (rc = st_check_name("task id", s->task_id, ID_MAX, 0, err)) != 0)
        return rc;
    return 0;
}

/* The commands applying e (idempotent) into c[0] (and c[1] for a lease):
 * how many; the key it touches into key. */
static int step_cmd(rs *r, const char *id, const rs_entry *e, rs_cmd *c, char key[KEY_MAX])
{
    char member[ID_MAX * 2 + 2];
    char k2[KEY_MAX];
    int sh, sc[2], n, i;
    snprintf(member, sizeof member, "%s|%s", id, e->task ? e->task : "");
    switch (e->kind) {
    case RS_PUSH:
        if (e->priority > 0 || e->limit_name) {
            /* its controls first: a claim never sees it without them */
            rs_step s = {.kind = RS_PUSH,
                         .priority = e->priority,
                         .limit_name = e->limit_name,
                         .limit = &e->limit};
            char *ctl = controls_text(&s);
            rs_k_queue(r, e->type, "meta", k2);
            rs_cmd_add(&c[0], "HSET");
            rs_cmd_dup(&c[0], k2);
            rs_cmd_dup(&c[0], member);
            if (ctl)
                rs_cmd_addn(&c[0], ctl, strlen(ctl), ctl); /* c owns it */
            else
                c[0].oom = 1;
            rs_k_queue(r, e->type, "ready", key);
            rs_cmd_add(&c[1], "ZADD");
            rs_cmd_dup(&c[1], key);
            rs_cmd_addf(&c[1], "%lld", (long long)e->at);
            rs_cmd_dup(&c[1], member);
            return 2;
        }
        sh = rs_qshard_of(r, e->type, member, 0);
        if (e->lease) {
            /* eager: leased to the saver, never ready for anyone else */
            rs_k_qs(r, e->type, sh, "leases", key);
            rs_cmd_add(&c[0], "ZADD");
            rs_cmd_dup(&c[0], key);
            rs_cmd_addf(&c[0], "%lld", (long long)e->lease_until);
            rs_cmd_dup(&c[0], member);
            rs_k_qs(r, e->type, sh, "lease", k2);
            rs_cmd_add(&c[1], "HSET");
            rs_cmd_dup(&c[1], k2);
            rs_cmd_dup(&c[1], member);
            rs_cmd_dup(&c[1], e->lease);
            return 2;
        }
        rs_k_qs(r, e->type, sh, "ready", key);
        rs_cmd_add(&c[0], "ZADD");
        rs_cmd_dup(&c[0], key);
        rs_cmd_addf(&c[0], "%lld", (long long)e->at);
        rs_cmd_dup(&c[0], member);
        break;
    case RS_UNQUEUE:
        /* with controls it sits in the base queue, else in its shard */
        n = rs_qshard_candidates(r, e->type, member, sc);
        rs_k_queue(r, e->type, "ready", key);
        for (i = 0; i < n; i++) {
            rs_cmd_script(&c[i], r, S_UNQUEUE, 4);
            rs_queue_keys(r, e->type, sc[i], &c[i]);
            rs_cmd_dup(&c[i], member);
        }
        return n;
    case RS_WAKE:
        /* Always LT: a save's steps are applied after its script, so an older
         * save's "look again in 30 s" may arrive after a newer "look now" and
         * must not push it back. Only rs_due's hold moves an entry later; at
         * worst a workflow is looked at once more than it needs. */
        rs_k_dq(r, rs_part(r, id), key);
        rs_cmd_add(&c[0], "ZADD");
        rs_cmd_dup(&c[0], key);
        rs_cmd_add(&c[0], "LT");
        rs_cmd_addf(&c[0], "%lld", (long long)e->at);
        rs_cmd_add(&c[0], id);
        break;
    case RS_DONE:
        rs_k_dq(r, rs_part(r, id), key);
        rs_cmd_add(&c[0], "ZREM");
        rs_cmd_dup(&c[0], key);
        rs_cmd_add(&c[0], id);
        break;
    default: /* RS_INDEX */
        index_cmd(r, id, e, &c[0], key);
        break;
    }
    return 1;
}

/* ack.lua (or renew/check) for a claim, into c. An ack with expiry -1
 * gives the claim back (ready again at once). */
void rs_lease_cmd(rs *r, const rs_lease *cl, int s, int64_t expiry, rs_cmd *c)
{
    char k[KEY_MAX], member[ID_MAX * 2 + 2];
    int sh = rs_lease_shard(r, cl);
    rs_claim_member(cl, member, sizeof member);
    if (s == S_ACK) {
        rs_cmd_script(c, r, S_ACK, 4);
        rs_queue_keys(r, cl->type, sh, c);
        rs_cmd_dup(c, member);
        rs_cmd_add(c, cl->lease);
        if (expiry == -1) {
            rs_cmd_add(c, "back");
            rs_cmd_addf(c, "%lld", (long long)wu_now_ms());
        }
        return;
    }
    rs_cmd_script(c, r, s, s == S_CHECK ? 1 : 2);
    if (s != S_CHECK) {
        rs_k_qs(r, cl->type, sh, "leases", k);
        rs_cmd_dup(c, k);
    }
    rs_k_qs(r, cl->type, sh, "lease", k);
    rs_cmd_dup(c, k);
    rs_cmd_dup(c, member);
    rs_cmd_add(c, cl->lease);
    if (s == S_RENEW) rs_cmd_addf(c, "%lld", (long long)expiry);
}

/* Drop a claim known to be current (the caller's own, taken less than half
 * a lease ago): plain commands, no token check. Three, two for an eager
 * lease (never reaped). */
static size_t drop_cmds(rs *r, const rs_lease *cl, rs_cmd *c)
{
    static const char *const which[3] = {"leases", "lease", "reaped"};
    char k[KEY_MAX], member[ID_MAX * 2 + 2];
    int i, n = cl->never_reaped ? 2 : 3, sh = rs_lease_shard(r, cl);
    if (cl->controlled) { /* its slot and controls: ack.lua, which checks the token */
        rs_lease_cmd(r, cl, S_ACK, 0, c);
        return 1;
    }
    rs_claim_member(cl, member, sizeof member);
    for (i = 0; i < n; i++) {
        rs_k_qs(r, cl->type, sh, which[i], k);
        rs_cmd_add(&c[i], i == 0 ? "ZREM" : "HDEL");
        rs_cmd_dup(&c[i], k);
        rs_cmd_dup(&c[i], member);
    }
    return (size_t)n;
}

/*
 * After a pipeline that applied e[0..n) (their replies in rep[0..n)) and
 * trimmed them from the outbox: record again the ones Redis refused, and
 * make the execution due now, so the sweeper retries them (one more round
 * trip, only then): a finished one is off the decider queue, and would have
 * no next save to apply them. Returns the first failure, or 0.
 */
int rs_steps_check(rs *r, const char *id, const rs_entry *e, size_t n, redisReply **rep,
                   weft_error *err)
{
    char key[KEY_MAX], out_key[KEY_MAX];
    rs_cmd c = {0};
    size_t i;
    int rc = 0;
    for (i = 0; i < n; i++) {
        if (!rs_is_err(rep[i])) continue;
        if (!rc) {
            rs_cmd tmp[2];
            memset(tmp, 0, sizeof tmp);
            step_cmd(r, id, &e[i], tmp, key);
            rs_cmds_free(tmp, 2);
            rc = rs_reply_err(r, rep[i], key, err);
            rs_k_exec(r, id, ":out", out_key);
            rs_cmd_add(&c, "ZADD");
            rs_cmd_add(&c, out_key);
        }
        rs_cmd_addf(&c, "%llu", (unsigned long long)e[i].fence);
        rs_cmd_add(&c, e[i].raw);
    }
    if (rc) {
        /* with an expiry: a finished execution's outbox must not outlive it
         * (a running one applies it at its next save or sweep) */
        rs_cmd three[3];
        redisReply *y[3];
        weft_error ignored;
        char dq[KEY_MAX];
        memset(three, 0, sizeof three);
        three[0] = c;
        memset(&c, 0, sizeof c);
        rs_cmd_add(&three[1], "PEXPIRE");
        rs_cmd_add(&three[1], out_key);
        rs_cmd_addf(&three[1], "%lld", (long long)r->retention_ms);
        rs_k_dq(r, rs_part(r, id), dq);
        rs_cmd_add(&three[2], "ZADD");
        rs_cmd_add(&three[2], dq);
        rs_cmd_add(&three[2], "LT");
        rs_cmd_addf(&three[2], "%lld", (long long)wu_now_ms());
        rs_cmd_add(&three[2], id);
        rs_pipe(r, three, 3, y, out_key, &ignored);
        rs_replies_free(y, 3);
        rs_cmds_free(three, 3);
    }
    rs_cmd_free(&c);
    return rc;
}

/*
 * SADD Pqueues of the queues the sets push to that this rs did not name
 * there lately (rs_queue_note), into c: rs_queue_list finds every queue
 * holding tasks there, whoever serves it. 1, or 0 (c left empty) when
 * there are none. Its reply is not looked at: a queue it failed to name is
 * named by a push within RS_QNOTE_MS.
 */
static size_t queues_cmd(rs *r, const step_set *sets, size_t nsets, rs_cmd *c)
{
    char key[KEY_MAX];
    size_t i, j;
    rs_k_name(r, "queues", "", key);
    rs_cmd_add(c, "SADD");
    rs_cmd_dup(c, key);
    for (i = 0; i < nsets; i++)
        for (j = 0; j < sets[i].n; j++)
            if (sets[i].e[j].kind == RS_PUSH && rs_queue_note(r, sets[i].e[j].type))
                rs_cmd_dup(c, sets[i].e[j].type);
    if (c->argc > 2 || c->oom) {
        c->group = -1; /* no order */
        return 1;
    }
    rs_cmd_free(c);
    return 0;
}

/*
 * The commands of a steps pipeline into *cmds_out (*k_out of them): the
 * nhead commands of head, for each set the commands applying its entries,
 * its trim and its acks, and a wake token when any of it is work visible
 * now. *first_out[i] is 1 + the number of commands of the entry whose first
 * command is i. heads and trims are consumed (freed), also on failure.
 */
int rs_steps_build(rs *r, rs_cmd *head, size_t nhead, step_set *sets, size_t nsets,
                   rs_cmd **cmds_out, size_t *k_out, size_t **first_out, weft_error *err)
{
    char key[KEY_MAX], wake_key[KEY_MAX];
    size_t total = nhead, k = 0, i, j;
    int64_t now = wu_now_ms();
    int wake = 0, rc;
    rs_cmd *cmds;
    size_t *first;
    if ((rc = rs_ensure(r, err)) != 0) { /* the layout names the keys */
        for (i = 0; i < nhead; i++)
            rs_cmd_free(&head[i]);
        for (i = 0; i < nsets; i++)
            rs_cmd_free(sets[i].trim);
        return rc;
    }
    for (i = 0; i < nsets; i++) {
        total += 2 * sets[i].n + 1 + 3 * sets[i].nacks;
        for (j = 0; j < sets[i].n && !wake; j++)
            wake =
                (sets[i].e[j].kind == RS_PUSH && !sets[i].e[j].lease && sets[i].e[j].at <= now) ||
                (sets[i].e[j].kind == RS_WAKE && sets[i].e[j].at <= now);
    }
    /* work that is visible now wakes an idle worker (two more commands in the
     * same pipeline: no extra round trip); the queues pushed to are named in
     * Pqueues (one more, at times) */
    total += (wake ? 2 : 0) + 1;
    cmds = calloc(total, sizeof *cmds);
    first = calloc(total + 1, sizeof *first);
    if (!cmds || !first) {
        free(cmds);
        free(first);
        for (i = 0; i < nhead; i++)
            rs_cmd_free(&head[i]);
        for (i = 0; i < nsets; i++)
            rs_cmd_free(sets[i].trim);
        return rs_oom(err);
    }
    for (i = 0; i < nhead; i++)
        cmds[k++] = head[i];
    /* on a Redis Cluster (waves and groups, internal.h): each set's steps
     * after the head that recorded them (head i is set i's when there is one
     * per set), its trim after the steps it removes */
    for (i = 0; i < nhead; i++)
        if (!cmds[i].group) cmds[i].group = nhead == nsets ? (int)i + 1 : 0;
    for (i = 0; i < nsets; i++) {
        step_set *s = &sets[i];
        size_t from = k;
        for (j = 0; j < s->n; j++) {
            size_t m = (size_t)step_cmd(r, s->id, &s->e[j], &cmds[k], key);
            first[k] = 1 + m;
            k += m;
        }
        for (j = 0, s->nackcmds = 0; j < s->nacks; j++)
            s->nackcmds += drop_cmds(r, &s->acks[j], &cmds[k + s->nackcmds]);
        k += s->nackcmds;
        s->acks = NULL; /* not needed after: a flight outlives the caller's acks */
        /* the trim, last: ZREM of the applied entries (a ZREM of none is skipped) */
        s->ntrim = s->trim->argc > 2 || s->trim->oom;
        if (s->ntrim) {
            cmds[k] = *s->trim;
            cmds[k++].wave = 2;
        } else
            rs_cmd_free(s->trim);
        for (j = from; j < k; j++) {
            if (!cmds[j].wave) cmds[j].wave = 1;
            cmds[j].group = (int)i + 1;
        }
    }
    k += queues_cmd(r, sets, nsets, &cmds[k]);
    if (wake) {
        /* in the first exchange, on a cluster: a worker it wakes polls the
         * steps' nodes after those have the steps in hand (written to them
         * first); at worst it finds nothing yet and looks again after
         * poll_interval */
        cmds[k].group = cmds[k + 1].group = -1;
        rs_k_wake(r, rs_wake_part(r, sets[0].id), wake_key);
        rs_cmd_add(&cmds[k], "LPUSH");
        rs_cmd_dup(&cmds[k], wake_key);
        rs_cmd_add(&cmds[k++], "1");
        rs_cmd_add(&cmds[k], "LTRIM");
        rs_cmd_dup(&cmds[k], wake_key);
        rs_cmd_add(&cmds[k], "0");
        rs_cmd_add(&cmds[k++], WAKE_TOKENS_MAX);
    }
    *cmds_out = cmds;
    *k_out = k;
    *first_out = first;
    return 0;
}

/*
 * The replies of a steps pipeline built by rs_steps_build: the heads' to
 * head_rep[], each entry's (that of its first failing command, else its
 * first) to its set's rep[]; the rest are freed. Returns the first failed
 * trim's error, or 0.
 */
static int steps_take(rs *r, redisReply **rep, size_t k, const size_t *first, size_t nhead,
                      redisReply **head_rep, step_set *sets, size_t nsets, weft_error *err)
{
    size_t i, j;
    int rc = 0;
    for (i = 0; i < nhead; i++) {
        head_rep[i] = rep[i];
        rep[i] = NULL;
    }
    for (j = 0; j < nsets; j++) {
        step_set *s = &sets[j];
        size_t e;
        for (e = 0; e < s->n; e++) {
            size_t m = first[i] - 1, q, pick = i;
            for (q = i; q < i + m; q++)
                if (rs_is_err(rep[q]) && !rs_is_err(rep[pick])) pick = q;
            s->rep[e] = rep[pick];
            rep[pick] = NULL;
            i += m;
        }
        i += s->nackcmds; /* the acks */
        if (!rc && s->ntrim && rs_is_err(rep[i])) rc = rs_reply_err(r, rep[i], s->id, err);
        i += s->ntrim; /* the trim */
    }
    rs_replies_free(rep, k);
    return rc;
}

/* rs_steps_build's commands sent now, their replies by steps_take. */
int rs_steps_now(rs *r, rs_cmd *cmds, size_t k, const size_t *first, size_t nhead,
                 redisReply **head_rep, step_set *sets, size_t nsets, weft_error *err)
{
    redisReply **rep = calloc(k + 1, sizeof *rep);
    int rc;
    if (!rep) return rs_oom(err);
    rc = rs_pipe(r, cmds, k, rep, nsets == 1 ? sets[0].id : "steps", err);
    if (rc == 0) rc = steps_take(r, rep, k, first, nhead, head_rep, sets, nsets, err);
    rs_replies_free(rep, k);
    free(rep);
    return rc;
}

/* One pipeline: rs_steps_build's commands, their replies by steps_take. */
int rs_steps_apply(rs *r, rs_cmd *head, size_t nhead, redisReply **head_rep, step_set *sets,
                   size_t nsets, weft_error *err)
{
    rs_cmd *cmds;
    size_t *first, k;
    int rc;
    if ((rc = rs_steps_build(r, head, nhead, sets, nsets, &cmds, &k, &first, err)) != 0) return rc;
    rc = rs_steps_now(r, cmds, k, first, nhead, head_rep, sets, nsets, err);
    rs_cmds_free(cmds, k);
    free(cmds);
    free(first);
    return rc;
}

/* Entries that point into the caller's steps (their buf is NULL) get copies
 * of their strings, so they outlive the call (a flight). 0 or -1. */
static int entries_own(rs_entry *e, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        const char *f[3] = {e[i].type, e[i].task, e[i].lease};
        size_t l[3], k, total = 0;
        char *b;
        if (e[i].buf) continue;
        for (k = 0; k < 3; k++)
            total += (l[k] = f[k] ? strlen(f[k]) + 1 : 0);
        if (!total) continue;
        if (!(b = e[i].buf = malloc(total))) return -1;
        for (k = 0; k < 3; k++)
            if (f[k]) {
                memcpy(b, f[k], l[k]);
                f[k] = b;
                b += l[k];
            }
        e[i].type = f[0];
        e[i].task = f[1];
        e[i].lease = f[2];
    }
    return 0;
}

/*
 * Steps sent early (rs_opts.early_steps): the pipeline is written now and
 * its replies read at the start of the next round trip, so the saver goes on
 * (runs the tasks it leased) while Redis applies them. The flight owns its
 * sets, copies of their ids, their entries and reply arrays.
 */
struct flight {
    size_t k, *first; /* the commands: as rs_steps_build made them */
    redisReply **rep; /* their k replies, once read */
    step_set *sets;
    size_t nsets;
    char **ids;    /* the sets' ids */
    rs_entry **es; /* entry arrays, each ending with raw NULL (NULL ones skipped) */
    size_t nes;
    rs_fly_at *at; /* on a cluster: where each command went (rs_cl_fly) */
    int read;      /* the replies are in rep */
};

void rs_flight_free(flight *f)
{
    size_t i, n;
    if (!f) return;
    rs_replies_free(f->rep, f->k);
    free(f->rep);
    for (i = 0; i < f->nsets; i++) {
        rs_replies_free(f->sets[i].rep, f->sets[i].n);
        free(f->sets[i].rep);
        free(f->ids[i]);
    }
    for (i = 0; i < f->nes; i++)
        if (f->es[i]) {
            for (n = 0; f->es[i][n].raw; n++) {
            }
            rs_entries_free(f->es[i], n);
        }
    free(f->ids);
    free(f->es);
    free(f->sets);
    free(f->first);
    free(f->at);
    free(f);
}

/* A flight of the nsets sets built into k commands: it takes sets, es and
 * first, and copies what stays the caller's (the ids, the strings the
 * entries point to). NULL when out of memory, having taken nothing. */
flight *rs_flight_new(step_set *sets, size_t nsets, rs_entry **es, size_t nes, size_t k,
                      size_t *first)
{
    flight *f = calloc(1, sizeof *f);
    size_t i;
    if (!f || !(f->rep = calloc(k + 1, sizeof *f->rep)) ||
        !(f->ids = calloc(nsets + 1, sizeof *f->ids)))
        goto fail;
    for (i = 0; i < nsets; i++)
        if (entries_own((rs_entry *)sets[i].e, sets[i].n) || !(f->ids[i] = strdup(sets[i].id)))
            goto fail;
    for (i = 0; i < nsets; i++)
        sets[i].id = f->ids[i];
    f->k = k;
    f->first = first;
    f->sets = sets;
    f->nsets = nsets;
    f->es = es;
    f->nes = nes;
    return f;
fail:
    for (i = 0; f && f->ids && i < nsets; i++)
        free(f->ids[i]);
    if (f) {
        free(f->ids);
        free(f->rep);
    }
    free(f);
    return NULL;
}

/* Write f's commands without reading (on a cluster, cmds passed
 * rs_cl_one_exchange); on success r->fly = f. On failure the steps stay in
 * their outboxes (the sweeper applies them). */
void rs_flight_send(rs *r, flight *f, const rs_cmd *cmds)
{
    sigpipe_guard g;
    weft_error ignored;
    size_t i;
    int ok = 1;
    if (r->fly) rs_flight_land(r); /* (the save's exchange has read it: cannot be) */
    if (r->cl) {
        if ((f->at = calloc(f->k + 1, sizeof *f->at)) && rs_cl_fly(r, cmds, f->k, f->at) == 0)
            r->fly = f;
        else
            rs_flight_free(f);
        return;
    }
    for (i = 0; i < f->k && ok; i++)
        ok = !cmds[i].oom;
    ok = ok && rs_append_cmds(r, r->c, cmds, f->k) == REDIS_OK;
    rs_sigpipe_block(r, &g);
    ok = ok && rs_write_out(r->c);
    rs_sigpipe_restore(&g);
    if (!ok) {
        rs_conn_fail(r, "steps", &ignored);
        rs_flight_free(f);
        return;
    }
    r->fly = f;
}

/* SCRIPT LOAD of every script: one round trip (on a cluster, one per node). */
static void scripts_load(rs *r)
{
    rs_cmd c[S_COUNT];
    redisReply *x[S_COUNT];
    weft_error ignored;
    int s;
    if (r->cl) {
        rs_cl_scripts_load(r);
        return;
    }
    memset(c, 0, sizeof c);
    for (s = 0; s < S_COUNT; s++)
        rs_cmd_script_load(&c[s], r, s);
    rs_pipe(r, c, S_COUNT, x, "SCRIPT LOAD", &ignored);
    rs_replies_free(x, S_COUNT);
    rs_cmds_free(c, S_COUNT);
}

/* Read the replies of the steps in flight f (once): 1, or 0 when the
 * connection failed. On a cluster always 1: a reply lost with its node's
 * connection is NULL (applied or not, its entry is in its outbox until
 * its trim, which went to the same node after it). */
int rs_flight_read(rs *r, flight *f)
{
    size_t i;
    if (f->read) return 1;
    f->read = 1;
    if (r->cl) {
        rs_cl_land(r, f->at, f->k, f->rep);
        return 1;
    }
    for (i = 0; i < f->k; i++) {
        void *x = NULL;
        if (redisGetReply(r->c, &x) != REDIS_OK) return 0;
        f->rep[i] = x;
    }
    return 1;
}

/* After rs_flight_read: put back in their outboxes the steps Redis refused
 * (a round trip, only then), and free f. A step refused for a script Redis
 * no longer has (SCRIPT FLUSH, a restart) reloads the scripts, so the next
 * save applies it. */
void rs_flight_finish(rs *r, flight *f)
{
    weft_error ignored;
    size_t i;
    for (i = 0; i < f->k; i++)
        if (rs_is_noscript(f->rep[i])) {
            scripts_load(r);
            break;
        }
    steps_take(r, f->rep, f->k, f->first, 0, NULL, f->sets, f->nsets, &ignored);
    for (i = 0; i < f->nsets; i++)
        rs_steps_check(r, f->sets[i].id, f->sets[i].e, f->sets[i].n, f->sets[i].rep, &ignored);
    rs_flight_free(f);
}

int rs_flight_is_read(const flight *f)
{
    return f->read;
}

/* Read the replies of the steps in flight now. A lost connection forgets
 * them (they are in the outboxes already) and leaves r->c NULL. */
void rs_flight_land(rs *r)
{
    flight *f = r->fly;
    weft_error ignored;
    r->fly = NULL;
    if (rs_flight_read(r, f)) {
        rs_flight_finish(r, f);
    } else {
        rs_conn_fail(r, "steps", &ignored);
        rs_flight_free(f);
    }
}

/* rs_steps_apply for one execution's entries. */
int rs_steps_run(rs *r, const char *id, rs_cmd *head, rs_cmd *trim, const rs_entry *e, size_t n,
                 redisReply **head_rep, redisReply **step_rep, weft_error *err)
{
    step_set s = {id, e, n, trim, NULL, 0, 0, 0, step_rep};
    return rs_steps_apply(r, head, head ? 1 : 0, head_rep, &s, 1, err);
}

/* The Redis store's work queues (redis.h): claims, leases, reaps, sizes, polls. */
#include "store/redis/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rs_check_claim(const rs_lease *c, weft_error *err)
{
    int rc;
    if (!c) return wu_err(err, WEFT_EINVAL, "no claim");
    if ((rc = st_check_name("task type", c->type, TYPE_MAX, 0, err)) != 0) return rc;
    if (!c->lease[0])
        return wu_err(err, WEFT_EINVAL, "claim of %s|%s has no lease", c->workflow_id, c->task_id);
    return 0;
}

void rs_queue_keys(rs *r, const char *type, int shard, rs_cmd *c)
{
    static const char *const which[4] = {"ready", "leases", "lease", "reaped"};
    char key[KEY_MAX];
    int i;
    for (i = 0; i < 4; i++) {
        rs_k_qs(r, type, shard, which[i], key);
        rs_cmd_dup(c, key);
    }
    rs_k_qs(r, type, shard, "", key); /* the prefix of the controls' keys */
    rs_cmd_dup(c, key);
}

void rs_claims_of(const redisReply *x, const char *type, int shard, int max, rs_lease *out,
                  size_t *n)
{
    size_t i;
    for (i = 0; i + 2 < x->elements && *n < (size_t)max; i += 3) {
        const redisReply *m = x->element[i], *t = x->element[i + 1], *f = x->element[i + 2];
        rs_lease *cl = &out[*n];
        const char *bar;
        size_t wl, tl;
        if (m->type != REDIS_REPLY_STRING || t->type != REDIS_REPLY_STRING) continue;
        /* a member weft did not write ("<wfid>|<taskid>", each fitting) or
         * no token is no claim: nothing could ack it */
        bar = memchr(m->str, '|', m->len);
        wl = bar ? (size_t)(bar - m->str) : 0;
        tl = bar ? m->len - wl - 1 : 0;
        if (!wl || wl >= sizeof cl->workflow_id || !tl || tl >= sizeof cl->task_id || !t->len ||
            t->len >= sizeof cl->lease || memchr(m->str, 0, m->len) || memchr(t->str, 0, t->len))
            continue;
        memset(cl, 0, sizeof *cl);
        memcpy(cl->workflow_id, m->str, wl);
        memcpy(cl->task_id, bar + 1, tl);
        rs_copy_str(cl->lease, sizeof cl->lease, t);
        snprintf(cl->type, sizeof cl->type, "%s", type);
        cl->controlled = f->type == REDIS_REPLY_INTEGER && f->integer == 1;
        cl->qshard = shard + 1;
        (*n)++;
    }
}

/* Give claims back (ack.lua "back": ready again at once, the slots they
 * held freed): one round trip. */
void rs_claim_release(rs *r, const rs_lease *cl, size_t n)
{
    rs_cmd *c = calloc(n, sizeof *c);
    redisReply **x = calloc(n, sizeof *x);
    weft_error ignored;
    size_t i;
    if (c && x) {
        for (i = 0; i < n; i++)
            rs_lease_cmd(r, &cl[i], S_ACK, -1, &c[i]);
        /* on failure the leases expire and the reaper puts the members back */
        rs_pipe(r, c, n, x, "claim release", &ignored);
        rs_replies_free(x, n);
        rs_cmds_free(c, n);
    }
    free(c);
    free(x);
}

int rs_claim(rs *r, const char *const *types, size_t ntypes, int max, int64_t lease_ms,
             rs_lease *out, weft_error *err)
{
    int rc;
    if (max <= 0 || ntypes == 0) return 0;
    if ((rc = st_check_lease("claim", lease_ms, err)) != 0) return rc;
    return rs_due_claim(r, 0, 0, 0, NULL, NULL, types, ntypes, max, lease_ms, out, err);
}

/* One lease script (renew/ack/check) with the claim's keys; 1 or 0 in *ok. */
static int lease_call(rs *r, const rs_lease *cl, int s, int64_t expiry, int *ok, weft_error *err)
{
    char k1[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    if ((rc = rs_check_claim(cl, err)) != 0 || (rc = rs_ensure(r, err)) != 0) return rc;
    rs_k_qs(r, cl->type, rs_lease_shard(r, cl), "leases", k1);
    rs_lease_cmd(r, cl, s, expiry, &c);
    if ((rc = rs_one(r, &c, &x, k1, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_INTEGER)
        rc = rs_bad_reply(r, k1, err);
    else
        *ok = x->integer == 1;
    rs_replies_free(&x, 1);
    return rc;
}

/* One round trip: renew.lua. */
int rs_renew(rs *r, const rs_lease *c, int64_t lease_ms, weft_error *err)
{
    int ok = 0, rc = rs_renew_many(r, c, 1, lease_ms, &ok, err);
    if (rc) return rc;
    if (!ok)
        return wu_err(err, WEFT_ESTATE, "stale lease for %s|%s: not renewed", c->workflow_id,
                      c->task_id);
    return 0;
}

/* One round trip: renew.lua for each, pipelined. */
int rs_renew_many(rs *r, const rs_lease *c, size_t n, int64_t lease_ms, int *ok, weft_error *err)
{
    rs_cmd *cmds;
    redisReply **x;
    int64_t expiry = wu_now_ms() + lease_ms;
    size_t i;
    int rc;
    if ((rc = st_check_lease("renew", lease_ms, err)) != 0) return rc;
    if (n == 0) return 0;
    for (i = 0; i < n; i++)
        if ((rc = rs_check_claim(&c[i], err)) != 0) return rc;
    if ((rc = rs_ensure(r, err)) != 0) return rc; /* the layout names the shards */
    cmds = calloc(n, sizeof *cmds);
    x = calloc(n, sizeof *x);
    if (!cmds || !x) {
        free(cmds);
        free(x);
        return rs_oom(err);
    }
    for (i = 0; i < n; i++)
        rs_lease_cmd(r, &c[i], S_RENEW, expiry, &cmds[i]);
    rc = rs_pipe(r, cmds, n, x, "renew", err);
    for (i = 0; i < n && !rc; i++) {
        char k[KEY_MAX];
        rs_k_qs(r, c[i].type, rs_lease_shard(r, &c[i]), "leases", k);
        if (rs_is_err(x[i]))
            rc = rs_reply_err(r, x[i], k, err);
        else if (x[i]->type != REDIS_REPLY_INTEGER)
            rc = rs_bad_reply(r, k, err);
        else
            ok[i] = x[i]->integer == 1;
    }
    rs_replies_free(x, n);
    rs_cmds_free(cmds, n);
    free(cmds);
    free(x);
    return rc;
}

/* One round trip: ack.lua. */
int rs_ack(rs *r, const rs_lease *c, weft_error *err)
{
    int ok = 0, rc;
    if ((rc = lease_call(r, c, S_ACK, 0, &ok, err)) != 0) return rc;
    if (!ok)
        return wu_err(err, WEFT_ESTATE, "stale lease for %s|%s: result discarded", c->workflow_id,
                      c->task_id);
    return 0;
}

/* One round trip: check.lua. */
int rs_check_lease(rs *r, const rs_lease *c, weft_error *err)
{
    int ok = 0, rc;
    if ((rc = lease_call(r, c, S_CHECK, 0, &ok, err)) != 0) return rc;
    if (!ok) return wu_err(err, WEFT_ESTATE, "stale lease for %s|%s", c->workflow_id, c->task_id);
    return 0;
}

/* The exhausted members of reap.lua's reply x (from its second element)
 * appended to *list (*n of them, room for all); -1 when out of memory. */
static int reap_take(const redisReply *x, char **list, size_t *n)
{
    size_t i;
    for (i = 1; i < x->elements; i++) {
        if (x->element[i]->type != REDIS_REPLY_STRING) continue;
        if (!(list[*n] = rs_reply_dup(x->element[i]))) return -1;
        (*n)++;
    }
    return 0;
}

/* Well-formed replies of reap.lua: {count, member...}. */
static int reap_ok(const redisReply *x)
{
    return x && x->type == REDIS_REPLY_ARRAY && x->elements >= 1 &&
           x->element[0]->type == REDIS_REPLY_INTEGER;
}

/* What the well-formed replies among reap.lua's x[0..nq) reaped: their
 * counts added into *back, their exhausted members into *list (*n of
 * them). How many replies were well-formed, or -1 out of memory (what was
 * taken is still in *list). */
static int reaps_take(redisReply **x, int nq, int *back, char ***list, size_t *n)
{
    size_t room = 0;
    int q, good = 0;
    for (q = 0; q < nq; q++)
        if (reap_ok(x[q])) room += x[q]->elements - 1, good++;
    if (room && !(*list = calloc(room, sizeof **list))) return -1;
    for (q = 0; q < nq; q++) {
        if (!reap_ok(x[q])) continue;
        *back += (int)x[q]->element[0]->integer;
        if (reap_take(x[q], *list, n) != 0) return -1;
    }
    return good;
}

/* reap.lua on the queue shard of type into c. */
static void reap_cmd(rs *r, const char *type, int shard, long long now, int max_reaps, rs_cmd *c)
{
    rs_cmd_script(c, r, S_REAP, 4);
    rs_queue_keys(r, type, shard, c);
    rs_cmd_addf(c, "%lld", now);
    rs_cmd_addf(c, "%d", max_reaps);
    rs_cmd_addf(c, "%d", REAP_BATCH);
}

/* One round trip: reap.lua on each of the type's queues (at most
 * REAP_BATCH members each). */
int rs_reap(rs *r, const char *type, int max_reaps, char ***exhausted, size_t *nexhausted,
            weft_error *err)
{
    char leases[KEY_MAX];
    rs_cmd c[RS_QSHARDS_MAX + 1];
    redisReply *x[RS_QSHARDS_MAX + 1];
    char **list = NULL;
    size_t n = 0;
    int nq, q, rc, back = 0, good = 0;
    long long now = (long long)wu_now_ms();

    *exhausted = NULL;
    *nexhausted = 0;
    if ((rc = st_check_name("task type", type, TYPE_MAX, 0, err)) != 0) return rc;
    if (max_reaps < 0) return wu_err(err, WEFT_EINVAL, "reap %s: max_reaps must be >= 0", type);
    if ((rc = rs_ensure(r, err)) != 0) return rc;
    nq = rs_nqueues(r, type);
    memset(c, 0, sizeof c);
    for (q = 0; q < nq; q++)
        reap_cmd(r, type, q, now, max_reaps, &c[q]);
    rs_k_queue(r, type, "leases", leases);
    memset(x, 0, sizeof x);
    rc = rs_pipe(r, c, (size_t)nq, x, leases, err);
    rs_cmds_free(c, (size_t)nq);
    /* what the shards that answered reaped is the caller's (their members
     * left their leases), whatever another one said: its error is said
     * only when none answered */
    if (!rc && (good = reaps_take(x, nq, &back, &list, &n)) < 0) rc = rs_oom(err);
    for (q = 0; q < nq && !rc && !good; q++) /* none answered: the first one's error */
        if (!reap_ok(x[q])) {
            rs_k_qs(r, type, q, "leases", leases);
            rc =
                rs_is_err(x[q]) ? rs_reply_err(r, x[q], leases, err) : rs_bad_reply(r, leases, err);
        }
    rs_replies_free(x, (size_t)nq);
    if (rc) {
        while (n)
            free(list[--n]);
        free(list);
        return rc;
    }
    *exhausted = list;
    *nexhausted = n;
    return back;
}

/* n queries on the keys of each of type's queues sh[0..nq), "cmd[i] <key
 * which[i]> [arg[i]]", pipelined in one round trip; the replies in x, the
 * n of sh[0] first (freed on failure). */
static int queue_query(rs *r, const char *type, const int *sh, int nq, const char *const *cmd,
                       const char *const *which, const char *const *arg, size_t n, redisReply **x,
                       weft_error *err)
{
    char k[KEY_MAX], first[KEY_MAX] = "";
    rs_cmd *c;
    size_t i, all = n * (size_t)nq;
    int rc, q;
    if ((rc = rs_ensure(r, err)) != 0) return rc;
    if (!(c = calloc(all, sizeof *c))) return rs_oom(err);
    for (q = 0; q < nq; q++)
        for (i = 0; i < n; i++) {
            rs_cmd *ci = &c[(size_t)q * n + i];
            rs_k_qs(r, type, sh[q], which[i], k);
            if (!first[0]) memcpy(first, k, sizeof k);
            rs_cmd_add(ci, cmd[i]);
            rs_cmd_dup(ci, k);
            if (arg[i]) rs_cmd_add(ci, arg[i]);
        }
    memset(x, 0, all * sizeof *x);
    rc = rs_pipe(r, c, all, x, first, err);
    rs_cmds_free(c, all);
    free(c);
    for (i = 0; i < all && !rc; i++)
        if (rs_is_err(x[i])) {
            rs_k_qs(r, type, sh[i / n], which[i % n], k);
            rc = rs_reply_err(r, x[i], k, err);
        }
    if (rc) rs_replies_free(x, all);
    return rc;
}

/* queue_query on the base queue alone. */
static int base_query(rs *r, const char *type, const char *const *cmd, const char *const *which,
                      const char *const *arg, size_t n, redisReply **x, weft_error *err)
{
    static const int base[1] = {0};
    return queue_query(r, type, base, 1, cmd, which, arg, n, x, err);
}

/* The sizes of a queue: what is asked of each of its queues (base and
 * shards), and the sum of the nq * SIZE_N replies from x. Ready counts
 * every member not leased: visible or not, waiting on a limit or not. */
#define SIZE_N 4
static const char *const size_cmd[SIZE_N] = {"ZCARD", "ZCARD", "ZCARD", "HGET"};
static const char *const size_which[SIZE_N] = {"ready", "due", "leases", "lim"};
static const char *const size_arg[SIZE_N] = {NULL, NULL, NULL, "parked"};

static void sizes_sum(redisReply **x, int nq, long long *ready, long long *leased)
{
    long long v[SIZE_N] = {0, 0, 0, 0}, p;
    int i;
    for (i = 0; i < SIZE_N * nq; i++)
        if (i % SIZE_N < 3)
            v[i % SIZE_N] += x[i]->type == REDIS_REPLY_INTEGER ? x[i]->integer : 0;
        else if (x[i]->type == REDIS_REPLY_STRING && (p = atoll(x[i]->str)) > 0)
            v[3] += p;
    if (ready) *ready = v[0] + v[1] + v[3];
    if (leased) *leased = v[2];
}

/* One round trip: ZCARDs and the parked count of every queue of type,
 * pipelined. */
int rs_queue_sizes(rs *r, const char *type, long long *ready, long long *leased, weft_error *err)
{
    redisReply *x[SIZE_N * (RS_QSHARDS_MAX + 1)];
    int rc, i, sh[RS_QSHARDS_MAX + 1] = {0}, nq; /* every queue: 0..nq */
    if ((rc = st_check_name("task type", type, TYPE_MAX, 0, err)) != 0 ||
        (rc = rs_ensure(r, err)) != 0)
        return rc;
    nq = rs_nqueues(r, type);
    for (i = 0; i < nq; i++)
        sh[i] = i;
    rc = queue_query(r, type, sh, nq, size_cmd, size_which, size_arg, SIZE_N, x, err);
    if (rc) return rc;
    sizes_sum(x, nq, ready, leased);
    rs_replies_free(x, (size_t)(SIZE_N * nq));
    return 0;
}

/* A name Pqueues may hold: one a push could have made. */
static int queue_name_ok(const char *name)
{
    weft_error ignored;
    return st_check_name("queue", name, TYPE_MAX, 0, &ignored) == 0;
}

/* Two round trips: Pqueues' names (SMEMBERS), then each one's sizes and
 * GET polled, pipelined; the queues that hold tasks are kept. */
int rs_queue_list(rs *r, st_qinfo **out, size_t *n, weft_error *err)
{
    char **names = NULL, k[KEY_MAX];
    size_t nnames = 0, i, all = 0, at = 0, j;
    rs_cmd *c = NULL;
    redisReply **x = NULL;
    int rc, q;
    *out = NULL;
    *n = 0;
    rs_k_name(r, "queues", "", k);
    if ((rc = rs_ensure(r, err)) != 0 ||
        (rc = rs_strings(r, "SMEMBERS", k, queue_name_ok, &names, &nnames, err)) != 0)
        return rc;
    for (i = 0; i < nnames; i++)
        all += SIZE_N * (size_t)rs_nqueues(r, names[i]) + 1;
    if (nnames && (!(c = calloc(all, sizeof *c)) || !(x = calloc(all, sizeof *x)) ||
                   !(*out = calloc(nnames, sizeof **out))))
        rc = rs_oom(err);
    for (i = 0; i < nnames && !rc; i++) {
        for (q = 0; q < rs_nqueues(r, names[i]); q++)
            for (j = 0; j < SIZE_N; j++, at++) {
                rs_k_qs(r, names[i], q, size_which[j], k);
                rs_cmd_add(&c[at], size_cmd[j]);
                rs_cmd_dup(&c[at], k);
                if (size_arg[j]) rs_cmd_add(&c[at], size_arg[j]);
            }
        rs_k_qs(r, names[i], 0, "polled", k);
        rs_cmd_add(&c[at], "GET");
        rs_cmd_dup(&c[at++], k);
    }
    rs_k_name(r, "queues", "", k);
    if (!rc && nnames) rc = rs_pipe(r, c, all, x, k, err);
    for (i = 0, at = 0; i < nnames && !rc; i++) {
        st_qinfo *v = &(*out)[*n];
        int nq = rs_nqueues(r, names[i]);
        for (j = 0; j < (size_t)(SIZE_N * nq + 1) && !rc; j++)
            if (rs_is_err(x[at + j])) rc = rs_reply_err(r, x[at + j], names[i], err);
        if (rc) break;
        snprintf(v->name, sizeof v->name, "%s", names[i]);
        sizes_sum(&x[at], nq, &v->ready, &v->leased);
        at += SIZE_N * (size_t)nq;
        v->polled_ms = rs_is_str(x[at]) ? atoll(x[at]->str) : 0;
        at++;
        if (v->ready > 0 || v->leased > 0) ++*n;
    }
    if (c) rs_cmds_free(c, all);
    if (x) rs_replies_free(x, all);
    free(c);
    free(x);
    for (i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    if (rc || !*n) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* One round trip: ZSCOREs and HEXISTS, pipelined. Returns 1 when queued
 * (ready, due, waiting on a limit or leased), 0 when not. */
int rs_queue_has(rs *r, const char *type, const char *workflow_id, const char *task_id,
                 weft_error *err)
{
    static const char *const cmd[4] = {"ZSCORE", "ZSCORE", "ZSCORE", "HEXISTS"};
    static const char *const which[4] = {"ready", "leases", "due", "meta"};
    char member[ID_MAX * 2 + 2];
    const char *arg[4] = {member, member, member, member};
    redisReply *x[8];
    int rc, i, has = 0, sh[2], nq;
    if ((rc = st_check_name("task type", type, TYPE_MAX, 0, err)) != 0 ||
        (rc = rs_check_id(workflow_id, err)) != 0 ||
        (rc = st_check_name("task id", task_id, ID_MAX, 0, err)) != 0)
        return rc;
    snprintf(member, sizeof member, "%s|%s", workflow_id, task_id);
    if ((rc = rs_ensure(r, err)) != 0) return rc;
    nq = rs_qshard_candidates(r, type, member, sh);
    if ((rc = queue_query(r, type, sh, nq, cmd, which, arg, 4, x, err)) != 0) return rc;
    for (i = 0; i < 4 * nq; i++)
        if (x[i]->type == REDIS_REPLY_STRING ||
            (x[i]->type == REDIS_REPLY_INTEGER && x[i]->integer))
            has = 1;
    rs_replies_free(x, (size_t)(4 * nq));
    return has;
}

/* ---- the REST API's calls ---- */

/* A claim's token seed: 24 random hex digits. */
void rs_token_seed(char seed[37])
{
    size_t i, j;
    wu_uuid(seed);
    for (i = j = 0; seed[i]; i++)
        if (seed[i] != '-') seed[j++] = seed[i];
    seed[24] = 0;
}

/* type's place among the RS_QSEEN places of size each from first, each
 * starting with its char type[TYPE_MAX]: a type not among them starts
 * afresh (zeroed), in the place after the last taken (*next). */
static void *place_of(void *first, size_t size, unsigned *next, const char *type)
{
    char *p = first;
    size_t i;
    for (i = 0; i < RS_QSEEN; i++)
        if (!strcmp(p + i * size, type)) return p + i * size;
    p += (*next)++ % RS_QSEEN * size;
    memset(p, 0, size);
    snprintf(p, TYPE_MAX, "%s", type);
    return p;
}

/* What the last claims of type found (rs.qseen, a few types at a time). */
static struct rs_qseen *seen_of(rs *r, const char *type)
{
    return place_of(r->qseen, sizeof r->qseen[0], &r->qseen_next, type);
}

int rs_queue_note(rs *r, const char *type)
{
    struct rs_qnote *q = place_of(r->qnote, sizeof r->qnote[0], &r->qnote_next, type);
    int64_t now = wu_mono_ms();
    if (q->at && now - q->at < RS_QNOTE_MS) return 0;
    q->at = now;
    return 1;
}

/* A turn counter's value spread over the unsigned range (Fibonacci hashing). */
static unsigned mixed(unsigned v)
{
    return (v * 2654435761u) >> 7;
}

/*
 * The claims of up to max members of type into c (room for
 * RS_QSHARDS_MAX + 1), one claim.lua per queue; which queue each asks and
 * for how many into q; how many. The base queue (members with a priority or
 * limits) is asked first, for max: its claims are handed out first. The
 * shards, taken in a turn that moves by one a call, share what the base
 * queue left of max at its last claim, at least 1: when that is enough for
 * all, each is asked for 1 but the first in turn of those that did not come
 * back short at their last claim (of all, when none or all did), which is
 * asked for the rest;
 * when it is not, a REST poll (how: RS_CLAIM_COVER, which must not miss a
 * task) asks every shard for 1, and a worker the first ones in turn, as many
 * as it has room for. A busy worker (RS_CLAIM_BUSY: it holds work, and
 * polls again soon) asks only one of the queues found empty at their last
 * claim, in turn. A round kept to one node (home >= 0, rs_cl_home) asks
 * only the shards on it, and the base queue when it is there or was not
 * empty at its last claim. What comes back over max goes back (the caller,
 * who notes what came: rs_claim_noted). The base queue keeps the time of
 * the last poll (a domain's base queue is always asked: its poll tells
 * taskToDomain that a worker serves the domain).
 */
int rs_claim_cmds(rs *r, const char *type, long long now, int64_t lease_ms, int max, int how,
                  int home, const char *seed, rs_cmd *c, rs_qclaim *q)
{
    static const struct rs_qseen none;
    char key[KEY_MAX];
    int share[RS_QSHARDS_MAX + 1], order[RS_QSHARDS_MAX];
    int nq = rs_nqueues(r, type), all = nq - 1, ns = 0, n = 0, k, nshort = 0;
    /* one queue, anywhere: nothing to weigh */
    const struct rs_qseen *w = nq > 1 || home >= 0 ? seen_of(r, type) : &none;
    /* a round kept to one node: the turns mixed, else they would keep step
     * with the nodes' (the same shard first on a node every time) */
    unsigned turn = all < 2 ? 0 : home >= 0 ? mixed(r->srr++) : r->srr++;
    int start = (int)(turn % (unsigned)(all > 1 ? all : 1)), domain = strchr(type, ':') != NULL;
    int rest = max - (w->base < max ? w->base : max), longs = 0, base_home = 1;
    if (rest < 1) rest = 1; /* the shards are never left unasked */
    for (k = 0; k < all; k++) {
        int s = 1 + (k + start) % all;
        if (home >= 0) {
            rs_k_qs(r, type, s, "ready", key);
            if (rs_cl_node_of(r, key) != home) continue;
        }
        order[ns++] = s;
        nshort += (int)(w->shorts >> (s - 1) & 1);
    }
    if (home >= 0) {
        rs_k_qs(r, type, 0, "ready", key);
        base_home = rs_cl_node_of(r, key) == home;
    }
    if (nshort == ns) nshort = 0; /* none known to have more: alike */
    memset(share, 0, sizeof share);
    share[0] = base_home || !w->base_empty ? max : 0;
    for (k = 0; k < ns; k++) {
        int s = order[k], is_short = nshort && (w->shorts >> (s - 1) & 1);
        if (rest >= ns && is_short) /* 1 for the short */
            share[s] = 1;
        else if (rest >= ns) {
            /* the first long one in turn takes the rest: a workflow's tasks,
             * which share a shard, go out together (a fork's to one worker) */
            share[s] = longs++ == 0 ? rest - (ns - 1) : 1;
        } else
            share[s] = how == RS_CLAIM_COVER || k < rest;
    }
    if (how == RS_CLAIM_BUSY) {
        /* a busy worker asks one of the queues found empty last, in turn */
        int e[RS_QSHARDS_MAX + 1], ne = 0, pick;
        if (w->base_empty && share[0]) e[ne++] = 0;
        for (k = 0; k < ns; k++)
            if (w->empty >> (order[k] - 1) & 1) e[ne++] = order[k];
        pick = ne > 1 ? e[(home >= 0 ? mixed(r->erot++) : r->erot++) % (unsigned)ne] : -1;
        for (k = 0; k < ne && pick >= 0; k++)
            if (e[k] != pick) share[e[k]] = 0;
        if (pick >= 0 && share[pick] <= 0) share[pick] = 1;
    }
    for (k = 0; k < ns + 1; k++) {
        int s = k == 0 ? 0 : order[k - 1];
        if (share[s] <= 0 && !(s == 0 && domain && base_home)) continue;
        rs_cmd_script(&c[n], r, S_CLAIM, 4);
        rs_queue_keys(r, type, s, &c[n]);
        rs_cmd_addf(&c[n], "%lld", now);
        rs_cmd_addf(&c[n], "%lld", (long long)lease_ms);
        rs_cmd_addf(&c[n], "%d", share[s]);
        rs_cmd_add(&c[n], seed);
        if (s == 0) /* the base queue keeps the poll's time */
            rs_cmd_addf(&c[n], "%lld", (long long)r->retention_ms);
        else
            rs_cmd_add(&c[n], "0");
        q[n].shard = s;
        q[n].asked = share[s];
        q[n++].got = 0;
    }
    return n;
}

/* What the n claims of type in q found (their got set). */
void rs_claim_noted(rs *r, const char *type, int max, const rs_qclaim *q, int n)
{
    struct rs_qseen *w;
    int k;
    if (rs_qshards(r, type) <= 1 && !(r->homes && r->cl)) return; /* nothing to weigh */
    w = seen_of(r, type);
    for (k = 0; k < n; k++) {
        uint64_t bit = q[k].shard ? 1ULL << (q[k].shard - 1) : 0;
        if (q[k].shard == 0) {
            w->base = q[k].got < max ? q[k].got : max;
            if (q[k].asked) w->base_empty = !q[k].got;
            continue;
        }
        w->shorts = q[k].got < q[k].asked ? w->shorts | bit : w->shorts & ~bit;
        w->empty = !q[k].got ? w->empty | bit : w->empty & ~bit;
    }
}

/* One round trip: reap.lua and claim.lua on each of the queue's queues,
 * pipelined. */
int rs_poll(rs *r, const char *queue, int max, int64_t lease_ms, int max_reaps, rs_lease *out,
            int *reaped, char ***exhausted, size_t *nexhausted, weft_error *err)
{
    char ready[KEY_MAX], seed[37];
    rs_cmd c[2 * (RS_QSHARDS_MAX + 1)];
    redisReply *x[2 * (RS_QSHARDS_MAX + 1)];
    long long now = (long long)wu_now_ms();
    char **list = NULL;
    rs_lease *all = NULL;
    size_t n = 0, room = 0, ng = 0;
    int rc, q, nq, nc;
    rs_qclaim qc[RS_QSHARDS_MAX + 1];

    *reaped = 0;
    *exhausted = NULL;
    *nexhausted = 0;
    if ((rc = st_check_name("task queue", queue, TYPE_MAX, 0, err)) != 0) return rc;
    if (max <= 0) return 0;
    if (lease_ms <= 0 || max_reaps < 0)
        return wu_err(err, WEFT_EINVAL, "poll %s: lease must be positive, max_reaps >= 0", queue);
    if ((rc = rs_ensure(r, err)) != 0) return rc;
    rs_token_seed(seed);
    memset(c, 0, sizeof c);
    nq = rs_nqueues(r, queue);
    for (q = 0; q < nq; q++)
        reap_cmd(r, queue, q, now, max_reaps, &c[q]);
    nc = nq + rs_claim_cmds(r, queue, now, lease_ms, max, RS_CLAIM_COVER, -1, seed, c + nq, qc);
    rs_k_queue(r, queue, "ready", ready);
    memset(x, 0, sizeof x);
    rc = rs_pipe(r, c, (size_t)nc, x, ready, err);
    rs_cmds_free(c, (size_t)nc);
    if (rc) {
        rs_replies_free(x, (size_t)nc);
        return rc;
    }
    /* the claims first: once made they must reach the caller (or go back) */
    for (q = nq; q < nc; q++)
        if (!rs_is_err(x[q]) && x[q]->type == REDIS_REPLY_ARRAY) room += x[q]->elements / 3;
    if (room && !(all = calloc(room, sizeof *all))) rc = rs_oom(err);
    for (q = nq; q < nc; q++) {
        size_t was = ng;
        if (rs_is_err(x[q])) {
            rs_k_qs(r, queue, qc[q - nq].shard, "ready", ready);
            if (!rc) rc = rs_reply_err(r, x[q], ready, err);
        } else if (x[q]->type == REDIS_REPLY_ARRAY && all)
            rs_claims_of(x[q], queue, qc[q - nq].shard, (int)room, all, &ng);
        qc[q - nq].got = (int)(ng - was);
    }
    rs_claim_noted(r, queue, max, qc, nc - nq);
    if (rc && ng) rs_claim_release(r, all, ng);
    if (!rc && ng > (size_t)max) rs_claim_release(r, all + max, ng - (size_t)max);
    if (rc || ng > (size_t)max) ng = rc ? 0 : (size_t)max;
    if (ng) memcpy(out, all, ng * sizeof *all);
    free(all);
    reaps_take(x, nq, reaped, &list, &n); /* out of memory: those taken */
    *exhausted = list;
    *nexhausted = n;
    rs_replies_free(x, (size_t)nc);
    return rc ? rc : (int)ng;
}

/* One round trip: ZADD XX (on the base queue and the member's shard: one
 * of them holds its lease). */
int rs_lease_extend(rs *r, const char *queue, const char *workflow_id, const char *task_id,
                    int64_t lease_ms, weft_error *err)
{
    char k[KEY_MAX], member[ID_MAX * 2 + 2];
    rs_cmd c[2];
    redisReply *x[2];
    int rc, q, nq, sh[2];
    if ((rc = st_check_name("task queue", queue, TYPE_MAX, 0, err)) != 0 ||
        (rc = rs_check_id(workflow_id, err)) != 0 ||
        (rc = st_check_name("task id", task_id, ID_MAX, 0, err)) != 0 ||
        (rc = rs_ensure(r, err)) != 0)
        return rc;
    snprintf(member, sizeof member, "%s|%s", workflow_id, task_id);
    nq = rs_qshard_candidates(r, queue, member, sh);
    memset(c, 0, sizeof c);
    for (q = 0; q < nq; q++) {
        rs_k_qs(r, queue, sh[q], "leases", k);
        rs_cmd_add(&c[q], "ZADD");
        rs_cmd_dup(&c[q], k);
        rs_cmd_add(&c[q], "XX");
        rs_cmd_addf(&c[q], "%lld", (long long)(wu_now_ms() + lease_ms));
        rs_cmd_add(&c[q], member);
    }
    memset(x, 0, sizeof x);
    rc = rs_pipe(r, c, (size_t)nq, x, k, err);
    rs_cmds_free(c, (size_t)nq);
    rs_replies_free(x, (size_t)nq);
    return rc;
}

/* One round trip: GET polled (claim.lua's, kept for the retention). */
int rs_queue_polled(rs *r, const char *queue, int64_t *ms, weft_error *err)
{
    static const char *const cmd[1] = {"GET"}, *const which[1] = {"polled"}, *const arg[1] = {NULL};
    redisReply *x[1];
    int rc;
    *ms = 0;
    if ((rc = st_check_name("task queue", queue, TYPE_MAX, 0, err)) != 0) return rc;
    if ((rc = base_query(r, queue, cmd, which, arg, 1, x, err)) != 0) return rc;
    if (x[0]->type == REDIS_REPLY_STRING) *ms = atoll(x[0]->str);
    rs_replies_free(x, 1);
    return 0;
}

/* Two round trips: where the member is (ZSCOREs, its controls), then, when
 * it has limits, whether it waits on them and their counts. */
int rs_queue_member(rs *r, const char *queue, const char *workflow_id, const char *task_id,
                    st_qmember *out, weft_error *err)
{
    static const char *const cmd[4] = {"ZSCORE", "ZSCORE", "ZSCORE", "HGET"};
    static const char *const which[4] = {"leases", "due", "ready", "meta"};
    char member[ID_MAX * 2 + 2], park[KEY_MAX], f[3][KEY_MAX];
    const char *arg[4] = {member, member, member, member};
    redisReply *x[8];
    rs_entry e;
    int rc, i, sh[2], nq;
    memset(out, 0, sizeof *out);
    if ((rc = st_check_name("task queue", queue, TYPE_MAX, 0, err)) != 0 ||
        (rc = rs_check_id(workflow_id, err)) != 0 ||
        (rc = st_check_name("task id", task_id, ID_MAX, 0, err)) != 0)
        return rc;
    snprintf(member, sizeof member, "%s|%s", workflow_id, task_id);
    if ((rc = rs_ensure(r, err)) != 0) return rc;
    nq = rs_qshard_candidates(r, queue, member, sh);
    if ((rc = queue_query(r, queue, sh, nq, cmd, which, arg, 4, x, err)) != 0) return rc;
    /* in its shard or in the base queue (with controls): where it is */
    for (i = 0; nq == 2 && i < 4; i++)
        if (x[i]->type != REDIS_REPLY_STRING && x[4 + i]->type == REDIS_REPLY_STRING) {
            redisReply *t = x[i];
            x[i] = x[4 + i];
            x[4 + i] = t;
        }
    if (x[0]->type == REDIS_REPLY_STRING)
        out->state = ST_Q_LEASED;
    else if (x[1]->type == REDIS_REPLY_STRING)
        out->state = ST_Q_READY;
    else if (x[2]->type == REDIS_REPLY_STRING) {
        out->state = ST_Q_READY;
        out->visible = atoll(x[2]->str);
    }
    memset(&e, 0, sizeof e);
    if (x[3]->type == REDIS_REPLY_STRING && (e.buf = rs_reply_dup(x[3])) &&
        rs_controls_parse(e.buf, &e) == 0 && e.limit_name) {
        snprintf(out->name, sizeof out->name, "%s", e.limit_name);
        out->limit = e.limit;
    }
    free(e.buf);
    rs_replies_free(x, (size_t)(4 * nq));
    if (!out->name[0]) return 0;
    {
        const char *cmd2[4] = {"ZSCORE", "HGET", "HGET", "HGET"};
        const char *which2[4] = {park, "lim", "lim", "lim"};
        const char *arg2[4] = {member, f[0], f[1], f[2]};
        snprintf(park, sizeof park, "park:%s", out->name);
        snprintf(f[0], sizeof f[0], "c:%s", out->name);
        snprintf(f[1], sizeof f[1], "ws:%s", out->name);
        snprintf(f[2], sizeof f[2], "wn:%s", out->name);
        if ((rc = base_query(r, queue, cmd2, which2, arg2, 4, x, err)) != 0) return rc;
        if (x[0]->type == REDIS_REPLY_STRING) out->state = ST_Q_WAITING;
        if (x[1]->type == REDIS_REPLY_STRING) out->held = atoi(x[1]->str);
        if (x[2]->type == REDIS_REPLY_STRING) out->window_start = atoll(x[2]->str);
        if (x[3]->type == REDIS_REPLY_STRING) out->window_claims = atoi(x[3]->str);
        rs_replies_free(x, 4);
    }
    return 0;
}

/* One round trip: HGETALL lim. */
int rs_queue_limits(rs *r, const char *queue, json_object **out, weft_error *err)
{
    static const char *const cmd[1] = {"HGETALL"}, *const which[1] = {"lim"},
                             *const arg[1] = {NULL};
    json_object *o, *limits;
    redisReply *x[1];
    size_t i;
    int rc;
    *out = NULL;
    if ((rc = st_check_name("task queue", queue, TYPE_MAX, 0, err)) != 0) return rc;
    if ((rc = base_query(r, queue, cmd, which, arg, 1, x, err)) != 0) return rc;
    o = json_object_new_object();
    limits = json_object_new_object();
    json_object_object_add(o, "waiting", json_object_new_int64(0));
    for (i = 0; x[0]->type == REDIS_REPLY_ARRAY && i + 1 < x[0]->elements; i += 2) {
        const char *k = x[0]->element[i]->str, *v = x[0]->element[i + 1]->str, *name;
        const char *field = NULL;
        json_object *l;
        if (!k || !v) continue;
        if (!strcmp(k, "parked")) {
            json_object_object_add(o, "waiting", json_object_new_int64(atoll(v)));
            continue;
        }
        if (!strncmp(k, "c:", 2))
            field = "held", name = k + 2;
        else if (!strncmp(k, "ws:", 3))
            field = "windowStart", name = k + 3;
        else if (!strncmp(k, "wn:", 3))
            field = "windowClaims", name = k + 3;
        if (!field) continue;
        if (!json_object_object_get_ex(limits, name, &l)) {
            l = json_object_new_object();
            json_object_object_add(limits, name, l);
        }
        json_object_object_add(l, field, json_object_new_int64(atoll(v)));
    }
    rs_replies_free(x, 1);
    json_object_object_add(o, "limits", limits);
    *out = o;
    return 0;
}

/* The Redis store's decider queue (redis.h): due executions, claims with them, wakes. */
#include "store/redis/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Partitions of the decider queue one poll looks at: the one an idle worker
 * waited on, and the next ones (all of a cluster's default, up to 16
 * primaries). */
#define DUE_WINDOW 16

/*
 * The partitions this process's idle workers wait on, counted (all handles
 * of the process together). A save's wake token goes to one of them when
 * there is one (rs_wake_part), so that an idle worker of the same daemon
 * hears it at once; else to its workflow's partition, which the next
 * worker to wait takes first (unheard), so that it finds the token there.
 * Idle workers otherwise spread over the partitions (the least waited on
 * first), so that tokens from other processes are heard too.
 */
#define WAIT_PARTS_MAX 1024
static int waiting[WAIT_PARTS_MAX];
static int unheard = -1;

int rs_wake_part(const rs *r, const char *id)
{
    int p = rs_part(r, id), k;
    for (k = 0; k < r->parts && k < WAIT_PARTS_MAX; k++) {
        int q = (p + k) % r->parts;
        if (__atomic_load_n(&waiting[q], __ATOMIC_RELAXED) > 0) return q;
    }
    __atomic_store_n(&unheard, p, __ATOMIC_RELAXED);
    return p;
}

/* The partition an idle worker waits on. */
static int wait_part(const rs *r, int start)
{
    int best = __atomic_exchange_n(&unheard, -1, __ATOMIC_RELAXED), k, least = -1;
    if (best >= 0 && best < r->parts) return best;
    best = start;
    for (k = 0; k < r->parts && k < WAIT_PARTS_MAX; k++) {
        int q = (start + k) % r->parts, n = __atomic_load_n(&waiting[q], __ATOMIC_RELAXED);
        if (least < 0 || n < least) {
            least = n;
            best = q;
        }
    }
    return best;
}

/* due.lua on partition part for up to max executions, into c (now 0: Redis's clock). */
static void due_cmd(rs *r, int part, int max, int64_t hold_ms, long long now, rs_cmd *c,
                    char dq[KEY_MAX])
{
    char ix[KEY_MAX];
    rs_k_dq(r, part, dq);
    rs_k_ix(r, part, ix);
    rs_cmd_script(c, r, S_DUE, 2);
    rs_cmd_dup(c, dq); /* dq is reused for the next partition */
    rs_cmd_dup(c, ix);
    rs_cmd_addf(c, "%lld", now);
    rs_cmd_addf(c, "%d", max);
    rs_cmd_addf(c, "%lld", (long long)hold_ms);
}

/*
 * One round trip: due.lua (when due_max > 0) and one claim.lua per type, in
 * one pipeline. Each type may hand out up to max; when together they hand
 * out more, the extra ones are given back in one more round trip (only
 * then). The due executions go to due_ids, their count to *ndue.
 */
int rs_due_claim(rs *r, int wait_ms, int due_max, int64_t hold_ms, char (*due_ids)[64], int *ndue,
                 const char *const *types, size_t ntypes, int max, int64_t lease_ms, rs_lease *out,
                 weft_error *err)
{
    char seed[37], ready[KEY_MAX], dq[KEY_MAX], wk[KEY_MAX];
    rs_cmd *c = NULL;
    redisReply **x = NULL, **cx;
    rs_lease *got = NULL;
    size_t i, j, k, ngot = 0, cap = 0, first = 0, nw = wait_ms > 0 ? 1 : 0, nd, nc, ncl = 0;
    long long now = (long long)wu_now_ms();
    int rc, start, per, home = -1, part[DUE_WINDOW], how;
    /* each claim command: its type's index in types, what it asks and got */
    struct {
        int type;
        rs_qclaim q;
    } *cq = NULL;
    rs_qclaim qc[RS_QSHARDS_MAX + 1];

    if (ndue) *ndue = 0;
    if ((rc = st_check_due_claim(due_max, hold_ms, types, &ntypes, max, lease_ms, err)) != 0)
        return rc;
    if ((rc = rs_ensure(r, err)) != 0) return rc; /* the layout */
    /* A worker's round on a cluster (rs.homes) keeps to one node when its
     * poll does not wait: the partitions and queue shards there, whose
     * workflows live there too, so that the round's loads and saves go to
     * that node alone; the nodes take turns, a few rounds each
     * (rs_cl_home). A poll that would wait right
     * after such a round looks at every node first, without waiting: work
     * on the others may have no wake token left for it. */
    how = nw ? RS_CLAIM_IDLE : RS_CLAIM_BUSY;
    if (r->homes && r->cl && nw && r->homed)
        nw = 0; /* (asking every queue, as an idle worker does) */
    else if (r->homes && r->cl && !nw)
        home = rs_cl_home(r);
    r->homed = home >= 0;
    /* on a cluster the partitions are polled a window at a time, from a
     * rotating start: the wait's partition first */
    start = (int)(r->wrr++ % (unsigned)r->parts);
    if (nw && r->parts > 1) start = wait_part(r, start);
    for (i = nd = 0; due_max > 0 && i < (size_t)r->parts && nd < DUE_WINDOW; i++) {
        int p = (start + (int)i) % r->parts;
        if (home >= 0) {
            rs_k_dq(r, p, dq);
            if (rs_cl_node_of(r, dq) != home) continue;
        }
        part[nd++] = p;
    }
    if (nd > (size_t)due_max) nd = (size_t)due_max;
    /* together never more than due_max: one taken but not returned would
     * wait out its hold */
    per = nd ? due_max / (int)nd : 0;
    if (nd + ntypes == 0) return 0;
    for (i = 0; i < ntypes; i++)
        if ((rc = st_check_name("task type", types[i], TYPE_MAX, 0, err)) != 0) return rc;
    rs_token_seed(seed);

    for (k = 0; k < ntypes; k++)
        ncl += (size_t)rs_nqueues(r, types[k]);
    nc = nw + nd + ncl;
    c = calloc(nc, sizeof *c);
    x = calloc(nc, sizeof *x);
    cq = calloc(ncl + 1, sizeof *cq);
    if (!c || !x || !cq) {
        free(c);
        free(x);
        free(cq);
        return rs_oom(err);
    }
    if (nw) {
        /* the polls wait in Redis behind the BLPOP: they run the moment a
         * token comes (or the wait ends), with no round trip of their own */
        rs_k_wake(r, start, wk);
        rs_cmd_add(&c[0], "BLPOP");
        rs_cmd_dup(&c[0], wk);
        rs_cmd_addf(&c[0], "%.3f", wait_ms / 1000.0);
    }
    /* behind a wait the polls run later than now: they read Redis's clock */
    if (nw) now = 0;
    for (j = 0; j < nd; j++)
        due_cmd(r, part[j], per, hold_ms, now, &c[nw + j], dq);
    if (ntypes) first = r->rr++ % ntypes;
    for (k = 0, ncl = 0; k < ntypes; k++) {
        int t = (int)((first + k) % ntypes), m, q;
        m = rs_claim_cmds(r, types[t], now, lease_ms, max, how, home, seed, &c[nw + nd + ncl], qc);
        for (q = 0; q < m; q++) {
            cq[ncl + (size_t)q].type = t;
            cq[ncl + (size_t)q].q = qc[q];
        }
        ncl += (size_t)m;
    }
    nc = nw + nd + ncl;
    if (nc == 0) { /* nothing of it on its home */
        free(c);
        free(x);
        free(cq);
        return 0;
    }
    r->long_ms = nw ? wait_ms : 0;
    if (nw && r->parts > 1) __atomic_add_fetch(&waiting[start], 1, __ATOMIC_RELAXED);
    if (nw && r->cl) {
        /* on a cluster the polls go to other nodes, which would not wait
         * behind the BLPOP: it waits on its own, then they run */
        rc = rs_pipe(r, c, 1, x, wk, err);
        r->long_ms = 0;
        if (!rc) rc = rs_pipe(r, c + 1, nc - 1, x + 1, ntypes ? "claim" : dq, err);
    } else {
        rc = rs_pipe(r, c, nc, x, ntypes ? "claim" : dq, err);
    }
    if (nw && r->parts > 1) __atomic_sub_fetch(&waiting[start], 1, __ATOMIC_RELAXED);
    r->long_ms = 0;
    rs_cmds_free(c, nc);
    free(c);
    if (rc && r->cl) {
        /* a cluster's other nodes may have handed out claims before one node
         * failed: they go back (on a single Redis nothing was read) */
        rs_lease *back;
        size_t nb = 0, room = 0;
        for (k = 0; k < ncl; k++)
            if (x[nw + nd + k] && x[nw + nd + k]->type == REDIS_REPLY_ARRAY)
                room += x[nw + nd + k]->elements / 3;
        if (room && (back = calloc(room, sizeof *back)) != NULL) {
            for (k = 0; k < ncl; k++) {
                redisReply *y = x[nw + nd + k];
                if (y && y->type == REDIS_REPLY_ARRAY)
                    rs_claims_of(y, types[cq[k].type], cq[k].q.shard, (int)room, back, &nb);
            }
            if (nb) rs_claim_release(r, back, nb);
            free(back);
        }
    }
    if (rc) {
        rs_replies_free(x, nc);
        free(x);
        free(cq);
        return rc;
    }
    if (nw && rs_is_err(x[0])) {
        rc = rs_reply_err(r, x[0], wk, err);
    } else {
        for (j = 0; j < nd && !rc; j++) {
            redisReply *d = x[nw + j];
            if (rs_is_err(d))
                rc = rs_reply_err(r, d, dq, err);
            else if (d->type != REDIS_REPLY_ARRAY)
                rc = rs_bad_reply(r, dq, err);
            else
                for (i = 0; i < d->elements && *ndue < due_max; i++)
                    /* anything else would be cut or misread: it was not written by weft */
                    if (rs_reply_id(d->element[i]))
                        rs_copy_str(due_ids[(*ndue)++], 64, d->element[i]);
        }
    }
    cx = x + nw + nd;
    for (k = 0; k < ncl; k++)
        if (cx[k]->type == REDIS_REPLY_ARRAY) cap += cx[k]->elements / 3;
    got = calloc(cap + 1, sizeof *got);
    if (!got && !rc) rc = rs_oom(err);
    /* every type's claims are collected, even after an error: they must go back */
    for (k = 0, j = 0; k < ncl && got; k++) {
        const char *type = types[cq[k].type];
        size_t was = ngot;
        if (rs_is_err(cx[k])) {
            rs_k_qs(r, type, cq[k].q.shard, "ready", ready);
            if (!rc) rc = rs_reply_err(r, cx[k], ready, err);
        } else if (cx[k]->type == REDIS_REPLY_ARRAY)
            rs_claims_of(cx[k], type, cq[k].q.shard, (int)cap, got, &ngot);
        qc[k - j] = cq[k].q;
        qc[k - j].got = (int)(ngot - was);
        if (k + 1 == ncl || cq[k + 1].type != cq[k].type) { /* the type's last queue */
            rs_claim_noted(r, type, max, qc, (int)(k + 1 - j));
            j = k + 1;
        }
    }
    rs_replies_free(x, nc);
    free(x);
    free(cq);
    if (rc) {
        if (ngot) rs_claim_release(r, got, ngot);
        free(got);
        if (ndue) *ndue = 0; /* they come due again after hold_ms */
        return rc;
    }
    if (ngot > (size_t)max) rs_claim_release(r, got + max, ngot - (size_t)max);
    if (ngot > (size_t)max) ngot = (size_t)max;
    if (ngot) memcpy(out, got, ngot * sizeof *got);
    free(got);
    return (int)ngot;
}

/* One round trip: due.lua. */
int rs_due(rs *r, int max, int64_t hold_ms, char (*ids)[64], weft_error *err)
{
    int n = 0, rc;
    if (max <= 0) return 0;
    rc = rs_due_claim(r, 0, max, hold_ms, ids, &n, NULL, 0, 0, 0, NULL, err);
    return rc < 0 ? rc : n;
}

/* One round trip: ZADD [LT]. */
int rs_wake(rs *r, const char *id, int64_t at, int only_earlier, weft_error *err)
{
    char dq[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    if ((rc = rs_check_id(id, err)) != 0 || (rc = rs_ensure(r, err)) != 0) return rc;
    rs_k_dq(r, rs_part(r, id), dq);
    rs_cmd_add(&c, "ZADD");
    rs_cmd_add(&c, dq);
    if (only_earlier) rs_cmd_add(&c, "LT");
    rs_cmd_addf(&c, "%lld", (long long)at);
    rs_cmd_add(&c, id);
    if ((rc = rs_one(r, &c, &x, dq, err)) != 0) return rc;
    rs_replies_free(&x, 1);
    return 0;
}

/* How long an execution found due must stay missing before its entry
 * leaves, and how soon it is looked at again meanwhile (forget.lua): the
 * grace is as long as a start's guard (exec.c). */
#define FORGET_GRACE_MS 10000
#define FORGET_AGAIN_MS 1000

int rs_forget(rs *r, const char *id, int missing, weft_error *err)
{
    char dq[KEY_MAX], gone[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc, part;
    if ((rc = rs_check_id(id, err)) != 0 || (rc = rs_ensure(r, err)) != 0) return rc;
    rs_k_dq(r, part = rs_part(r, id), dq);
    if (missing) {
        rs_k_part(r, part, ":gone", gone);
        rs_cmd_script(&c, r, S_FORGET, 2);
        rs_cmd_add(&c, dq);
        rs_cmd_add(&c, gone);
        rs_cmd_add(&c, id);
        rs_cmd_addf(&c, "%d", FORGET_GRACE_MS);
        rs_cmd_addf(&c, "%d", FORGET_AGAIN_MS);
    } else {
        rs_cmd_add(&c, "ZREM");
        rs_cmd_add(&c, dq);
        rs_cmd_add(&c, id);
    }
    if ((rc = rs_one(r, &c, &x, dq, err)) != 0) return rc;
    rs_replies_free(&x, 1);
    return 0;
}

int rs_unfinished(rs *r, long long *n, weft_error *err)
{
    char dq[KEY_MAX];
    rs_cmd *c;
    redisReply **x;
    int rc, i;
    *n = 0;
    if ((rc = rs_ensure(r, err)) != 0) return rc; /* the layout: how many partitions */
    c = calloc((size_t)r->parts, sizeof *c);
    x = calloc((size_t)r->parts, sizeof *x);
    if (!c || !x) {
        free(c);
        free(x);
        return rs_oom(err);
    }
    for (i = 0; i < r->parts; i++) {
        rs_k_dq(r, i, dq);
        rs_cmd_add(&c[i], "ZCARD");
        rs_cmd_dup(&c[i], dq);
    }
    rc = rs_pipe(r, c, (size_t)r->parts, x, dq, err);
    for (i = 0; i < r->parts && !rc; i++) {
        if (rs_is_err(x[i]))
            rc = rs_reply_err(r, x[i], dq, err);
        else if (x[i]->type != REDIS_REPLY_INTEGER)
            rc = rs_bad_reply(r, dq, err);
        else
            *n += x[i]->integer;
    }
    rs_replies_free(x, (size_t)r->parts);
    rs_cmds_free(c, (size_t)r->parts);
    free(c);
    free(x);
    return rc;
}

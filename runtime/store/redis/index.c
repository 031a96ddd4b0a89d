/*
 * The Redis store's execution index and task logs (redis.h). The index
 * of the ended runs lives in the partitions' hash tags (index_lib.lua): a
 * save that ends a run (or makes it run again) records its entry in the
 * outbox, applied with its other steps (outbox.c): pushed onto the
 * partition's index log, which search.lua folds in first. A run not ended has no
 * entry (none to write at each start): it is on the decider queue, and its
 * hash holds what a search reads of it. A search asks every partition in
 * one pipeline and merges their pages.
 */
#include "store/redis/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* search.lua for partition part into c. */
static void search_cmd(rs *r, const st_query *q, int part, rs_cmd *c)
{
    char key[KEY_MAX];
    size_t i;
    rs_k_ix(r, part, key);
    rs_cmd_script(c, r, S_SEARCH, 1);
    rs_cmd_dup(c, key);
    rs_cmd_addf(c, "%lld", (long long)wu_now_ms());
    if (q->start_after)
        rs_cmd_addf(c, "%lld", (long long)q->start_after);
    else
        rs_cmd_add(c, "");
    if (q->start_before)
        rs_cmd_addf(c, "%lld", (long long)q->start_before);
    else
        rs_cmd_add(c, "");
    rs_cmd_add(c, q->by_end ? "end" : "start");
    rs_cmd_add(c, q->asc ? "1" : "0");
    rs_cmd_addf(c, "%zu", q->start + q->size);
    rs_cmd_add(c, q->correlation_id ? q->correlation_id : "");
    rs_cmd_add(c, q->free_text ? q->free_text : "");
    if (q->version)
        rs_cmd_addf(c, "%d", q->version);
    else
        rs_cmd_add(c, "");
    rs_cmd_addf(c, "%zu", q->nstatuses);
    for (i = 0; i < q->nstatuses; i++)
        rs_cmd_add(c, q->statuses[i]);
    rs_cmd_addf(c, "%zu", q->nnames);
    for (i = 0; i < q->nnames; i++)
        rs_cmd_add(c, q->names[i]);
}

/* Room for n more hits in *hits (cap *cap): 0 or -1. */
static int hits_room(st_hit **hits, size_t have, size_t *cap, size_t n)
{
    st_hit *h;
    if (have + n <= *cap) return 0;
    if (!(h = realloc(*hits, (have + n + 16) * sizeof *h))) return -1;
    *hits = h;
    *cap = have + n + 16;
    return 0;
}

static int is_open(const char *status)
{
    return !strcmp(status, "RUNNING") || !strcmp(status, "PAUSED");
}

/* The runs not ended that q finds, from the decider queue's members ids
 * (x->elements of them): their status and "ix" read (one round trip, one
 * per node on a cluster), matched, added to hits and counted in *total. */
static int open_hits(rs *r, const st_query *q, redisReply **dq, st_hit **hits, size_t *have,
                     size_t *cap, long long *total, weft_error *err)
{
    size_t n = 0, k, j;
    rs_cmd *c;
    redisReply **x;
    const redisReply **ids;
    int p, rc;
    for (p = 0; p < r->parts; p++)
        n += dq[p]->elements;
    if (!n) return 0;
    c = calloc(n + 1, sizeof *c);
    x = calloc(n + 1, sizeof *x);
    ids = calloc(n + 1, sizeof *ids);
    if (!c || !x || !ids) {
        free(c);
        free(x);
        free(ids);
        return rs_oom(err);
    }
    /* the members that are ids (anything else was not written by weft) */
    for (p = 0, n = 0; p < r->parts; p++)
        for (j = 0; j < dq[p]->elements; j++)
            if (rs_reply_id(dq[p]->element[j])) {
                char h[KEY_MAX];
                ids[n] = dq[p]->element[j];
                rs_k_exec(r, ids[n]->str, "", h);
                rs_cmd_add(&c[n], "HMGET");
                rs_cmd_dup(&c[n], h);
                rs_cmd_add(&c[n], "status");
                rs_cmd_add(&c[n], "ix");
                n++;
            }
    rc = n ? rs_pipe(r, c, n, x, "search", err) : 0;
    for (k = 0; rc == 0 && k < n; k++) {
        const char *id = ids[k]->str;
        char *name;
        redisReply *y = x[k];
        rs_what w;
        int match;
        /* gone, or ended (the index has it, or will in a moment) */
        if (!y || y->type != REDIS_REPLY_ARRAY || y->elements != 2 || !rs_is_str(y->element[0]) ||
            !rs_is_str(y->element[1]) || !is_open(y->element[0]->str))
            continue;
        /* (the correlation id ends the text; the name is followed by it) */
        rs_index_what_parse(y->element[1]->str, &w);
        if (!(name = strndup(w.name, w.name_len))) {
            rc = rs_oom(err);
            break;
        }
        match = st_query_match(q, id, y->element[0]->str, name, w.version, w.corr, w.start_ms);
        free(name);
        if (!match) continue;
        (*total)++;
        if (hits_room(hits, *have, cap, 1)) {
            rc = rs_oom(err);
            break;
        }
        snprintf((*hits)[*have].id, sizeof(*hits)[*have].id, "%s", id);
        (*hits)[(*have)++].key = q->by_end ? 0 : w.start_ms;
    }
    free(ids);
    rs_replies_free(x, n);
    rs_cmds_free(c, n);
    free(c);
    free(x);
    return rc;
}

/*
 * The ended runs from search.lua in every partition (each answers its count
 * and its first start + size runs), the runs not ended from the decider
 * queue (every one is on it; each read and matched here): one round trip
 * for those (one per node on a cluster), one more to read the runs not
 * ended when they are asked for. Their merge gives the page.
 */
int rs_search(rs *r, const st_query *q, long long *total, st_hit **hits_out, size_t *n_out,
              weft_error *err)
{
    const char *ended[8];
    st_query q1 = *q;
    rs_cmd *c = NULL;
    redisReply **x = NULL;
    st_hit *hits = NULL;
    size_t have = 0, cap = 0, j, k, ncmd = 0, nended = 0;
    int p, rc, want_open = !q->nstatuses, want_ended = !q->nstatuses;
    *total = 0;
    *hits_out = NULL;
    *n_out = 0;
    if ((rc = st_check_query(q, err)) != 0 || (rc = rs_ensure(r, err)) != 0) return rc;
    for (j = 0; j < q->nstatuses; j++)
        if (is_open(q->statuses[j]))
            want_open = 1;
        else if (nended < sizeof ended / sizeof ended[0])
            ended[nended++] = q->statuses[j], want_ended = 1;
    q1.statuses = ended;
    q1.nstatuses = nended;
    c = calloc(2 * (size_t)r->parts + 1, sizeof *c);
    x = calloc(2 * (size_t)r->parts + 1, sizeof *x);
    if (!c || !x) {
        rc = rs_oom(err);
        goto out;
    }
    for (p = 0; p < r->parts; p++) {
        if (want_ended) search_cmd(r, &q1, p, &c[ncmd++]);
        if (want_open) {
            char dq[KEY_MAX];
            rs_k_dq(r, p, dq);
            rs_cmd_add(&c[ncmd], "ZRANGE");
            rs_cmd_dup(&c[ncmd], dq);
            rs_cmd_add(&c[ncmd], "0");
            rs_cmd_add(&c[ncmd++], "-1");
        }
    }
    if ((rc = rs_pipe(r, c, ncmd, x, "search", err)) != 0) goto out;
    for (k = 0; k < ncmd && !rc; k++) {
        char key[KEY_MAX];
        redisReply *y = x[k];
        p = want_ended && want_open ? (int)(k / 2) : (int)k;
        if (want_open && (!want_ended || k % 2)) { /* a ZRANGE of the decider queue */
            rs_k_dq(r, p, key);
            if (rs_is_err(y))
                rc = rs_reply_err(r, y, key, err);
            else if (y->type != REDIS_REPLY_ARRAY)
                rc = rs_bad_reply(r, key, err);
            continue;
        }
        rs_k_ix(r, p, key);
        if (rs_is_err(y)) {
            rc = rs_reply_err(r, y, key, err);
            break;
        }
        if (y->type != REDIS_REPLY_ARRAY || y->elements % 2 != 1 ||
            y->element[0]->type != REDIS_REPLY_INTEGER) {
            rc = rs_bad_reply(r, key, err);
            break;
        }
        *total += y->element[0]->integer;
        if (hits_room(&hits, have, &cap, y->elements / 2)) {
            rc = rs_oom(err);
            break;
        }
        for (j = 1; j + 1 < y->elements; j += 2) {
            const redisReply *id = y->element[j], *kv = y->element[j + 1];
            if (!rs_reply_id(id) || kv->type != REDIS_REPLY_INTEGER) continue;
            rs_copy_str(hits[have].id, sizeof hits[have].id, id);
            hits[have++].key = kv->integer;
        }
    }
    if (rc == 0 && want_open) {
        redisReply **dq = calloc((size_t)r->parts + 1, sizeof *dq);
        if (!dq) {
            rc = rs_oom(err);
            goto out;
        }
        for (p = 0; p < r->parts; p++)
            dq[p] = x[want_ended ? 2 * (size_t)p + 1 : (size_t)p];
        rc = open_hits(r, q, dq, &hits, &have, &cap, total, err);
        free(dq);
    }
    if (rc == 0) {
        st_hits_page(q, hits, have, n_out);
        *hits_out = hits;
        hits = NULL;
    }
out:
    if (x) rs_replies_free(x, ncmd);
    if (c) rs_cmds_free(c, ncmd);
    free(c);
    free(x);
    free(hits);
    return rc;
}

/* One round trip: tasklog.lua. */
int rs_task_log_add(rs *r, const char *workflow_id, const char *task_id, const char *const *lines,
                    size_t n, weft_error *err)
{
    char h[KEY_MAX], lk[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;
    if ((rc = rs_check_id(workflow_id, err)) != 0 ||
        (rc = st_check_name("task id", task_id, ID_MAX, 0, err)) != 0)
        return rc;
    for (i = 0; i < n; i++)
        if (strchr(lines[i], '\n'))
            return wu_err(err, WEFT_EINVAL, "task %s: log line %zu spans lines", task_id, i);
    rs_k_exec(r, workflow_id, "", h);
    rs_k_exec(r, workflow_id, ":log", lk);
    rs_cmd_script(&c, r, S_TASKLOG, 2);
    rs_cmd_add(&c, h);
    rs_cmd_add(&c, lk);
    rs_cmd_add(&c, task_id);
    rs_cmd_addf(&c, "%d", ST_LOG_LINES_MAX);
    for (i = 0; i < n; i++)
        rs_cmd_add(&c, lines[i]);
    if ((rc = rs_one(r, &c, &x, lk, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_INTEGER)
        rc = rs_bad_reply(r, lk, err);
    else if (x->integer < 0)
        rc = wu_err(err, WEFT_ENOTFOUND, "no workflow %s", workflow_id);
    rs_replies_free(&x, 1);
    return rc;
}

/* One round trip: HGET (rs_exec_field). */
int rs_task_log(rs *r, const char *workflow_id, const char *task_id, char **lines, weft_error *err)
{
    int rc;
    *lines = NULL;
    if ((rc = st_check_name("task id", task_id, ID_MAX, 0, err)) != 0 ||
        (rc = rs_exec_field(r, workflow_id, ":log", task_id, lines, err)) != 0)
        return rc;
    if (!*lines && !(*lines = strdup(""))) return rs_oom(err);
    return 0;
}

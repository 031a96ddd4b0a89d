/*
 * The Redis store's execution index and task logs (redis.h). The index
 * lives in the partitions' hash tags (index_lib.lua): a save that changes
 * a run's status records its entry in the outbox, applied with its other
 * steps (outbox.c); a search asks every partition in one pipeline and
 * merges their pages.
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

/*
 * One round trip (one per node on a cluster): search.lua in every
 * partition, each answering its count and its first start + size runs;
 * their merge gives the page.
 */
int rs_search(rs *r, const st_query *q, long long *total, st_hit **hits_out, size_t *n_out,
              weft_error *err)
{
    rs_cmd *c = NULL;
    redisReply **x = NULL;
    st_hit *hits = NULL;
    size_t have = 0, cap = 0, j;
    int p, rc;
    *total = 0;
    *hits_out = NULL;
    *n_out = 0;
    if ((rc = st_check_query(q, err)) != 0 || (rc = rs_ensure(r, err)) != 0) return rc;
    c = calloc((size_t)r->parts + 1, sizeof *c);
    x = calloc((size_t)r->parts + 1, sizeof *x);
    if (!c || !x) {
        rc = rs_oom(err);
        goto out;
    }
    for (p = 0; p < r->parts; p++)
        search_cmd(r, q, p, &c[p]);
    if ((rc = rs_pipe(r, c, (size_t)r->parts, x, "search", err)) != 0) goto out;
    for (p = 0; p < r->parts && !rc; p++) {
        char key[KEY_MAX];
        redisReply *y = x[p];
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
        if (have + y->elements / 2 > cap) {
            size_t ncap = have + y->elements / 2 + 16;
            st_hit *h = realloc(hits, ncap * sizeof *h);
            if (!h) {
                rc = rs_oom(err);
                break;
            }
            hits = h;
            cap = ncap;
        }
        for (j = 1; j + 1 < y->elements; j += 2) {
            const redisReply *id = y->element[j], *k = y->element[j + 1];
            if (!rs_is_str(id) || k->type != REDIS_REPLY_INTEGER) continue;
            rs_copy_str(hits[have].id, sizeof hits[have].id, id);
            hits[have++].key = k->integer;
        }
    }
    if (rc == 0) {
        st_hits_page(q, hits, have, n_out);
        *hits_out = hits;
        hits = NULL;
    }
out:
    if (x) rs_replies_free(x, (size_t)r->parts);
    if (c) rs_cmds_free(c, (size_t)r->parts);
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

/* One round trip: HGET. */
int rs_task_log(rs *r, const char *workflow_id, const char *task_id, char **lines, weft_error *err)
{
    char lk[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    *lines = NULL;
    if ((rc = rs_check_id(workflow_id, err)) != 0 ||
        (rc = st_check_name("task id", task_id, ID_MAX, 0, err)) != 0)
        return rc;
    rs_k_exec(r, workflow_id, ":log", lk);
    rs_cmd_add(&c, "HGET");
    rs_cmd_add(&c, lk);
    rs_cmd_add(&c, task_id);
    if ((rc = rs_one(r, &c, &x, lk, err)) != 0) return rc;
    if (x->type == REDIS_REPLY_NIL)
        *lines = strdup("");
    else if (rs_is_str(x))
        *lines = rs_reply_dup(x);
    else
        rc = rs_bad_reply(r, lk, err);
    if (!rc && !*lines) rc = rs_oom(err);
    rs_replies_free(&x, 1);
    return rc;
}

/*
 * The queues as operators and external workers see them: their sizes
 * (Conductor's /api/tasks/queue/sizes and /all), one queue and its limits
 * (/api/queue/{name}), poll data (Conductor's /api/tasks/queue/polldata and
 * /all), and the queues /metrics reports. A queue holding ready tasks that
 * no worker polled for cfg.unpolled_ms says so, in words.
 */
#include "api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNPOLLED_MS (5 * 60 * 1000) /* cfg.unpolled_ms 0 */

void ap_qset_free(ap_qset *set)
{
    free(set->q);
    memset(set, 0, sizeof *set);
}

/* Add queue to set unless it is there, with its sizes and last poll:
 * 0, or the store's error. */
static int qset_add(st_store *st, ap_qset *set, const char *queue, weft_error *err)
{
    st_qinfo *q;
    size_t i;
    int rc;
    for (i = 0; i < set->n; i++)
        if (!strcmp(set->q[i].name, queue)) return 0;
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 16;
        if (!(q = realloc(set->q, cap * sizeof *q)))
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        set->q = q;
        set->cap = cap;
    }
    q = &set->q[set->n];
    memset(q, 0, sizeof *q);
    /* (a name the store takes fits) */
    if ((rc = ST(st, queue_sizes, queue, &q->ready, &q->leased, err)) != 0 ||
        (rc = ST(st, queue_polled, queue, &q->polled_ms, err)) != 0)
        return rc;
    snprintf(q->name, sizeof q->name, "%s", queue);
    set->n++;
    return 0;
}

typedef struct seen_add {
    st_store *st;
    ap_qset *set;
    weft_error *err;
    int rc;
} seen_add;

static int add_seen(void *ud, const char *queue)
{
    seen_add *a = ud;
    return a->rc = qset_add(a->st, a->set, queue, a->err);
}

int ap_queues(ap_server *s, st_store *st, ap_qset *set, weft_error *err)
{
    seen_add a = {st, set, err, 0};
    size_t i;
    int rc;
    memset(set, 0, sizeof *set);
    if ((rc = ST(st, queue_list, &set->q, &set->n, err)) != 0) return rc;
    set->cap = set->n;
    for (i = 0; !rc && i < s->cfg.ntypes; i++)
        rc = qset_add(st, set, s->cfg.types[i], err);
    if (!rc) mt_queues(s->cfg.metrics, add_seen, &a);
    if (rc || a.rc) ap_qset_free(set);
    return rc ? rc : a.rc;
}

const char *ap_unpolled(const ap_server *s, const st_qinfo *q, int64_t now_ms, char *buf,
                        size_t size)
{
    int64_t after = s->cfg.unpolled_ms > 0 ? s->cfg.unpolled_ms : UNPOLLED_MS;
    char took[32];
    if (q->ready <= 0 || (q->polled_ms > 0 && now_ms - q->polled_ms < after)) return NULL;
    if (!q->polled_ms) {
        snprintf(buf, size, "no worker has polled this queue (none on record); %lld task(s) wait",
                 q->ready);
        return buf;
    }
    wu_duration_text(took, sizeof took, now_ms - q->polled_ms);
    snprintf(buf, size, "no worker has polled for %s; %lld task(s) wait", took, q->ready);
    return buf;
}

/* ---- handlers ---- */

typedef struct names {
    const char *v[64];
    int n;
} names;

static mhd_result each_task_type(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    names *ns = cls;
    if (key && value && !strcmp(key, "taskType") && ns->n < 64) ns->v[ns->n++] = value;
    return MHD_YES;
}

/* {"<queue>": ready + leased} of every queue that holds tasks. */
static mhd_result all_sizes(ctx *c)
{
    weft_error err = {0};
    json_object *j;
    st_qinfo *q = NULL;
    size_t n = 0, i;
    if (ST(c->t->st, queue_list, &q, &n, &err)) return ap_send_werr(c, &err);
    j = json_object_new_object();
    for (i = 0; i < n; i++)
        json_object_object_add(j, q[i].name, json_object_new_int64(q[i].ready + q[i].leased));
    free(q);
    return ap_send_json(c, 200, j);
}

/* GET /api/tasks/queue/sizes?taskType=a&taskType=b: {"a": n, ...} (ready +
 * leased); without taskType, every queue that holds tasks. */
mhd_result ap_h_queue_sizes(ctx *c)
{
    names ns = {{0}, 0};
    json_object *j;
    int i;
    MHD_get_connection_values(c->conn, MHD_GET_ARGUMENT_KIND, each_task_type, &ns);
    if (!ns.n) return all_sizes(c);
    j = json_object_new_object();
    for (i = 0; i < ns.n; i++) {
        weft_error err = {0};
        long long ready = 0, leased = 0;
        if (ST(c->t->st, queue_sizes, ns.v[i], &ready, &leased, &err)) {
            json_object_put(j);
            return ap_send_werr(c, &err);
        }
        json_object_object_add(j, ns.v[i], json_object_new_int64(ready + leased));
    }
    return ap_send_json(c, 200, j);
}

/* GET /api/tasks/queue/all: every queue that holds tasks, as above. */
mhd_result ap_h_queue_all(ctx *c)
{
    return all_sizes(c);
}

/* Conductor's PollData of q ({"queueName", "domain", "lastPollTime"}: a
 * domain's queue "<domain>:<type>" is named by its type), and when no worker
 * polled it lately, why it is a problem ("problem"). */
static json_object *poll_data(ctx *c, const st_qinfo *q, int64_t now)
{
    json_object *o = json_object_new_object();
    const char *colon = strchr(q->name, ':'), *why;
    char buf[160];
    json_object_object_add(o, "queueName", json_object_new_string(colon ? colon + 1 : q->name));
    json_object_object_add(
        o, "domain", colon ? json_object_new_string_len(q->name, (int)(colon - q->name)) : NULL);
    json_object_object_add(o, "lastPollTime", json_object_new_int64(q->polled_ms));
    json_object_object_add(o, "queueSize", json_object_new_int64(q->ready + q->leased));
    if ((why = ap_unpolled(c->s, q, now, buf, sizeof buf)) != NULL)
        json_object_object_add(o, "problem", json_object_new_string(why));
    return o;
}

/* The poll data of the queues in set whose type is type (NULL: all). */
static mhd_result send_poll_data(ctx *c, const ap_qset *set, const char *type)
{
    json_object *arr = json_object_new_array();
    int64_t now = wu_now_ms();
    size_t i;
    for (i = 0; i < set->n; i++) {
        const char *colon = strchr(set->q[i].name, ':');
        if (!type || !strcmp(colon ? colon + 1 : set->q[i].name, type))
            json_object_array_add(arr, poll_data(c, &set->q[i], now));
    }
    return ap_send_json(c, 200, arr);
}

/* GET /api/tasks/queue/polldata?taskType=T: T's queue and its domains'
 * queues that hold tasks or were polled. */
mhd_result ap_h_polldata(ctx *c)
{
    weft_error err = {0};
    const char *type = ap_query(c, "taskType");
    ap_qset set;
    mhd_result r;
    if (!type || !*type) return ap_send_error(c, 400, "taskType is required");
    if (strchr(type, ':'))
        return ap_send_error(c, 400, "taskType '%s': ':' separates a task domain", type);
    /* with its own queue, whether or not it holds tasks or is served here */
    if (ap_queues(c->s, c->t->st, &set, &err)) return ap_send_werr(c, &err);
    if (qset_add(c->t->st, &set, type, &err)) {
        ap_qset_free(&set);
        return ap_send_werr(c, &err);
    }
    r = send_poll_data(c, &set, type);
    ap_qset_free(&set);
    return r;
}

/* GET /api/tasks/queue/polldata/all: every queue that holds tasks, and
 * those this daemon serves or was polled through. */
mhd_result ap_h_polldata_all(ctx *c)
{
    weft_error err = {0};
    ap_qset set;
    mhd_result r;
    if (ap_queues(c->s, c->t->st, &set, &err)) return ap_send_werr(c, &err);
    r = send_poll_data(c, &set, NULL);
    ap_qset_free(&set);
    return r;
}

/* GET /api/queue/{name}?domain=: the queue's sizes, the state of its
 * limits, its last poll and, when no worker polled it lately, the problem:
 * {"queue", "ready", "leased", "waiting", "limits": {<name>: {"held",
 * "windowStart", "windowClaims"}}, "lastPollTime", "problem"}. */
mhd_result ap_h_queue(ctx *c)
{
    weft_error err = {0};
    char qbuf[256], buf[160];
    const char *queue = ap_poll_queue(c, c->q->seg[2], qbuf), *why;
    st_qinfo q = {{0}, 0, 0, 0};
    json_object *j = NULL;
    if (!queue) return c->res;
    if (ST(c->t->st, queue_sizes, queue, &q.ready, &q.leased, &err) ||
        ST(c->t->st, queue_polled, queue, &q.polled_ms, &err) ||
        ST(c->t->st, queue_limits, queue, &j, &err))
        return ap_send_werr(c, &err);
    json_object_object_add(j, "queue", json_object_new_string(queue));
    json_object_object_add(j, "ready", json_object_new_int64(q.ready));
    json_object_object_add(j, "leased", json_object_new_int64(q.leased));
    json_object_object_add(j, "lastPollTime", json_object_new_int64(q.polled_ms));
    if ((why = ap_unpolled(c->s, &q, wu_now_ms(), buf, sizeof buf)) != NULL)
        json_object_object_add(j, "problem", json_object_new_string(why));
    return ap_send_json(c, 200, j);
}

/*
 * The external workers' calls: poll, result (complete, fail, heartbeat,
 * callback); the leases their tasks are claimed with (the queues' sizes and
 * poll data are queues.c's). Batch long polls wait in events.c and take
 * through ap_take.
 *
 * Round trips to Redis (fencing on, so no lock): a poll that hands out a
 * task costs 4 (claim with reaping, load, fenced save, the save's queue
 * steps); a result costs 3 (load, fenced save, its steps: the claim is
 * dropped in the same pipeline that wakes the decider).
 */
#include "api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plugin/host.h"

#define LEASE_DEFAULT_MS 600000 /* a polled task's lease when it has no responseTimeout */
#define LEASE_MARGIN_MS 1000    /* lease past the responseTimeout: the decider's timeout wins */
#define REASON_MAX 500          /* Conductor cuts reasonForIncompletion here */

static int task_status_of(const char *s, weft_task_status *out)
{
    static const weft_task_status ok[] = {WEFT_TASK_IN_PROGRESS, WEFT_TASK_COMPLETED,
                                          WEFT_TASK_FAILED, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR};
    size_t i;
    for (i = 0; s && i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(s, weft_task_status_name(ok[i]))) {
            *out = ok[i];
            return 0;
        }
    return -1;
}

/* ---- store steps: external workers ---- */

/* The lease a queue's tasks needed last time (polls claim with it). */
static int64_t lease_for(ap_server *s, const char *queue)
{
    void *v;
    pthread_mutex_lock(&s->mu);
    v = wu_map_get(s->leases, queue);
    pthread_mutex_unlock(&s->mu);
    return v ? (int64_t)(intptr_t)v : LEASE_DEFAULT_MS;
}

static void lease_learned(ap_server *s, const char *queue, int64_t ms)
{
    pthread_mutex_lock(&s->mu);
    if (wu_map_count(s->leases) < 4096 || wu_map_get(s->leases, queue))
        wu_map_put(s->leases, queue, (void *)(intptr_t)ms);
    pthread_mutex_unlock(&s->mu);
}

/* A task's lease: its responseTimeout and a margin, or the default. */
static int64_t lease_of(const xc_task *t)
{
    return t->def->response_timeout_ms ? t->def->response_timeout_ms + LEASE_MARGIN_MS
                                       : LEASE_DEFAULT_MS;
}

/*
 * The workflow's own timeout has passed. Saves made here with client 0
 * would end it (next_due times it out) without what follows an end in a
 * daemon (failure workflow, telling the parent): leave that to a decider.
 */
static int wf_overdue(const dec_env *dec, const xc_exec *x)
{
    return x->def->timeout_ms > 0 && x->def->timeout_fails &&
           dec->now() >= x->created_ms + x->def->timeout_ms;
}

typedef struct poll_args {
    const char *task_id;
    const char *worker;
    json_object *task; /* out: the Task JSON as saved */
    int64_t lease_ms;  /* out: the lease it needs */
    int skip;          /* out: nothing to hand out */
} poll_args;

/* A worker takes the task: IN_PROGRESS, poll count, start time, worker id. */
static int fn_poll(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err)
{
    poll_args *a = ud;
    xc_task *t = xc_find_id(x, a->task_id);
    int64_t rto;
    json_object_put(a->task);
    a->task = NULL;
    a->skip = !t || xc_task_terminal(t->status) || xc_wf_terminal(x->status) || t->def->type->map ||
              wf_overdue(dec, x);
    if (a->skip) return OP_NOCHANGE;
    dec_start(dec, x, t);
    t->updated_ms = dec->now(); /* the response timeout counts from the last poll */
    t->callback_ms = 0;
    free(t->worker_id);
    if (a->worker && *a->worker) {
        t->worker_id = strdup(a->worker);
    } else {
        /* an identity of its own for this poll, in the Task's workerId: a
         * result that echoes it is the current poller's (fn_result) */
        char u[37], anon[48];
        wu_uuid(u);
        snprintf(anon, sizeof anon, "anonymous-%.8s", u);
        t->worker_id = strdup(anon);
    }
    a->lease_ms = lease_of(t);
    rto = t->def->response_timeout_ms ? t->def->response_timeout_ms : LEASE_DEFAULT_MS;
    a->task = xc_task_to_json(x, t);
    {
        /* the worker gets the secrets; what is stored keeps the placeholders */
        json_object *in, *filled;
        weft_error serr = {0};
        if (json_object_object_get_ex(a->task, "inputData", &in)) {
            if (host_fill_secrets(t, in, op_secret, env->st, &filled, &serr) == 0)
                json_object_object_add(a->task, "inputData", filled);
            else
                fprintf(stderr, "weft: task %s: %s (handed out with the placeholder)\n", t->id,
                        serr.msg);
        }
    }
    json_object_object_add(a->task, "callbackAfterSeconds", json_object_new_int(0));
    json_object_object_add(a->task, "responseTimeoutSeconds", json_object_new_int64(rto / 1000));
    return 0;
}

static void warn_reaped(void *ud, const char *workflow_id, const char *msg)
{
    ap_log(ud, WEFT_LOG_WARN, LG_FIELDS(LG_STR("workflow", workflow_id)), "api: %s", msg);
}

/* Members whose lease expired too often fail their task (the decider retries it). */
static void fail_exhausted(ap_server *s, tls *t, char **members, size_t n)
{
    t->op.client = 1;
    op_fail_reaped(&t->op, members, n, warn_reaped, s);
}

/*
 * Start a claimed task for the worker and add its Task JSON to arr.
 * Returns 1 when handed out, 0 when skipped (the claim is dropped, or
 * left to expire when Redis failed).
 *
 * The save runs as a daemon's would (client 0): nothing here needs a
 * decider, and the save then arms the response timeout instead of waking
 * one; a change that does need a decider (tasks ended or new) still wakes
 * one at once.
 */
static int hand_out(ap_server *s, tls *t, const st_lease *l, int64_t lease_ms, const char *worker,
                    json_object *arr)
{
    poll_args a = {0};
    weft_error err = {0};
    int rc;
    a.task_id = l->task_id;
    a.worker = worker;
    t->op.client = 0;
    rc = op_update(&t->op, l->workflow_id, fn_poll, &a, &err);
    t->op.client = 1;
    if (rc == 0 && a.task) {
        if (a.lease_ms != lease_ms) {
            weft_error e2 = {0};
            ST(t->st, lease_extend, l->type, l->workflow_id, l->task_id, a.lease_ms, &e2);
            lease_learned(s, l->type, a.lease_ms);
        }
        json_object_array_add(arr, a.task);
        return 1;
    }
    json_object_put(a.task);
    if (rc == 0 || rc == WEFT_ENOTFOUND || rc == WEFT_EINVAL) {
        weft_error e2 = {0};
        ST(t->st, ack, l, &e2); /* nothing to run: done, canceled or gone */
    } else if (rc != WEFT_EIO) {
        weft_error e2 = {0};
        /* contention: let it expire now, so the next poll gets it again */
        ST(t->st, lease_extend, l->type, l->workflow_id, l->task_id, 0, &e2);
        ap_log(s, WEFT_LOG_WARN,
               LG_FIELDS(LG_STR("workflow", l->workflow_id), LG_STR("task_id", l->task_id)),
               "api: %s", err.msg);
    }
    return 0;
}

/* Claim from queue and hand out up to max tasks into arr. Returns how many,
 * or -1 (err set) when Redis failed before any. */
int ap_take(ap_server *s, tls *t, const char *queue, int max, const char *worker, json_object *arr,
            weft_error *err)
{
    st_lease got[POLL_MAX];
    int handed = 0, tries, i;
    mt_queue_seen(s->cfg.metrics, queue);
    for (tries = 0; tries < 8 && handed < max; tries++) {
        char **ex = NULL;
        size_t nex = 0;
        int reaped = 0, want = max - handed;
        int64_t lease = lease_for(s, queue);
        int n = ST(t->st, poll, queue, want, lease, s->cfg.max_reaps, got, &reaped, &ex, &nex, err);
        mt_lease_reaps(s->cfg.metrics, reaped + (long)nex);
        if (reaped > 0)
            ap_say(s, WEFT_LOG_INFO, "%d expired lease(s) of %s returned to the queue", reaped,
                   queue);
        fail_exhausted(s, t, ex, nex);
        if (n < 0) return handed ? handed : -1;
        for (i = 0; i < n; i++)
            handed += hand_out(s, t, &got[i], lease, worker, arr);
        if (n < want) break; /* the queue has no more */
    }
    return handed;
}

/* ---- task logs ---- */

/* A list of log lines as stored (st_ops.task_log_add). */
typedef struct log_lines {
    char **v;
    size_t n;
} log_lines;

static void log_lines_clear(log_lines *l)
{
    size_t i;
    for (i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* s cut to at most max bytes, at a character's start, "..." marking a cut
 * (malloc'd). */
static char *cut_text(const char *s, size_t max)
{
    size_t n = strlen(s);
    char *out;
    if (n <= max) return strdup(s);
    n = max - 3;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    if ((out = malloc(n + 4))) {
        memcpy(out, s, n);
        memcpy(out + n, "...", 4);
    }
    return out;
}

/*
 * entries (an array of {"log": text, "createdTime": ms}, taken) of task t
 * as the lines to store (TaskExecLog JSON texts) into *out: the secrets t's
 * input names masked, then each text cut at ST_LOG_LINE_MAX bytes.
 */
static int log_lines_of(st_store *st, const xc_task *t, json_object *entries, log_lines *out,
                        weft_error *err)
{
    size_t i, n = json_object_array_length(entries);
    int rc = 0;
    log_lines_clear(out);
    host_redact_reported(t, op_secret, st, &entries, NULL, NULL, 0);
    if (!(out->v = calloc(n + 1, sizeof *out->v))) rc = wu_err(err, WEFT_ENOMEM, "out of memory");
    for (i = 0; i < n && !rc; i++) {
        json_object *e = json_object_array_get_idx(entries, i), *v, *line;
        char *text;
        int64_t at = wu_now_ms();
        if (json_object_object_get_ex(e, "createdTime", &v) && json_object_get_int64(v) > 0)
            at = json_object_get_int64(v);
        json_object_object_get_ex(e, "log", &v);
        if (!(text = cut_text(json_object_get_string(v), ST_LOG_LINE_MAX))) {
            rc = wu_err(err, WEFT_ENOMEM, "out of memory");
            break;
        }
        line = json_object_new_object();
        json_object_object_add(line, "log", json_object_new_string(text));
        json_object_object_add(line, "taskId", json_object_new_string(t->id));
        json_object_object_add(line, "createdTime", json_object_new_int64(at));
        free(text);
        if (!(out->v[out->n] = strdup(json_object_to_json_string_ext(line, JSON_FLAGS))))
            rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        else
            out->n++;
        json_object_put(line);
    }
    json_object_put(entries);
    return rc;
}

/* A TaskResult's "logs" (absent or null: NULL) as log_lines_of's entries in
 * *out: each item {"log": "...", "createdTime": ms} or a string. -1 after
 * answering 400. */
static int result_logs(ctx *c, json_object *body, json_object **out)
{
    json_object *logs, *e, *text, *at;
    size_t i, n;
    *out = NULL;
    if (!json_object_object_get_ex(body, "logs", &logs) || !logs) return 0;
    if (!json_object_is_type(logs, json_type_array)) {
        ap_send_error(c, 400, "logs must be an array of {\"log\", \"createdTime\"}");
        return -1;
    }
    n = json_object_array_length(logs);
    *out = json_object_new_array();
    for (i = 0; i < n; i++) {
        json_object *entry;
        e = json_object_array_get_idx(logs, i);
        text =
            json_object_is_type(e, json_type_object) && json_object_object_get_ex(e, "log", &text)
                ? text
                : e;
        if (!json_object_is_type(text, json_type_string)) break;
        /* every one checked, the newest ST_LOG_LINES_MAX kept: a task keeps
         * no more, so the rest need no masking nor a trip to Redis */
        if (i + ST_LOG_LINES_MAX < n) continue;
        entry = json_object_new_object();
        json_object_object_add(entry, "log", json_object_get(text));
        if (text != e && json_object_object_get_ex(e, "createdTime", &at) &&
            json_object_is_type(at, json_type_int))
            json_object_object_add(entry, "createdTime", json_object_get(at));
        json_object_array_add(*out, entry);
    }
    if (i < n) {
        json_object_put(*out);
        *out = NULL;
        ap_send_error(c, 400, "logs[%zu]: expected {\"log\": \"...\", \"createdTime\": ms}", i);
        return -1;
    }
    return 0;
}

typedef struct result_args {
    const char *task_id, *ref; /* which task: by id, else by reference name */
    weft_task_status status;
    json_object *output; /* borrowed */
    const char *reason;
    const char *worker;
    int64_t callback_ms; /* > 0: back to its queue, invisible this long */
    json_object *logs;   /* borrowed: result_logs' entries, or NULL */
    /* out */
    char found_id[64], queue[128], type[128];
    int64_t lease_ms, started_ms;
    log_lines lines; /* the logs to store, once the result is taken */
} result_args;

/* A worker's report: complete or fail the task, or keep it IN_PROGRESS. */
static int fn_result(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                     weft_error *err)
{
    result_args *a = ud;
    xc_task *t = a->task_id ? xc_find_id(x, a->task_id) : xc_find_ref(x, a->ref);
    if (!t)
        return wu_err(err, WEFT_ENOTFOUND, "workflow %s has no task '%s'", x->id,
                      a->task_id ? a->task_id : a->ref);
    if (xc_wf_terminal(x->status))
        return wu_err(err, WEFT_ESTATE, "workflow %s is already %s", x->id,
                      weft_wf_status_name(x->status));
    if (xc_task_terminal(t->status))
        return wu_err(err, WEFT_ESTATE, "task %s (%s) is already %s", t->id, t->ref,
                      weft_task_status_name(t->status));
    if (a->worker && *a->worker && t->worker_id && strcmp(a->worker, t->worker_id))
        return wu_err(err, WEFT_ESTATE,
                      "task %s (%s) was polled again, by worker %s: the result of worker %s is "
                      "discarded",
                      t->id, t->ref, t->worker_id, a->worker);
    if ((!a->worker || !*a->worker) && t->poll_count > 1)
        /* a late result of an earlier poll looks just like the current
         * poller's: only the identity of the current poll tells them apart */
        return wu_err(err, WEFT_ESTATE,
                      "task %s (%s) was polled %d times (again after a lease ran out): a result "
                      "without workerId is discarded; send the workerId of the poll that "
                      "handed the task out (its Task's workerId)",
                      t->id, t->ref, t->poll_count);
    if (a->logs && log_lines_of(env->st, t, json_object_get(a->logs), &a->lines, err))
        return err->code;
    snprintf(a->found_id, sizeof a->found_id, "%s", t->id);
    snprintf(a->queue, sizeof a->queue, "%s", xc_task_queue(t));
    snprintf(a->type, sizeof a->type, "%s", t->def->type_name);
    a->lease_ms = lease_of(t);
    a->started_ms = t->started_ms;
    if (a->status == WEFT_TASK_IN_PROGRESS) {
        weft_result r;
        if (t->def->type->map)
            return wu_err(err, WEFT_EINVAL,
                          "task %s (%s) is a %s task that weftd runs: report COMPLETED or FAILED",
                          t->id, t->ref, t->def->type_name);
        host_result_init(&r);
        r.status = WEFT_TASK_IN_PROGRESS;
        r.output = a->output ? json_object_get(a->output) : NULL;
        host_redact_reported(t, op_secret, env->st, &r.output, NULL, NULL, 0);
        r.callback_after_ms = a->callback_ms > 0 ? a->callback_ms : -1;
        if (wf_overdue(dec, x)) env->client = 1; /* a decider ends it now */
        if (a->callback_ms > 0)
            /* the worker's claim is dropped by the same save that takes its
             * result, before the push dec_apply adds: unqueue, then queue again */
            dec_unqueue(dec, x, t, o);
        dec_apply(dec, x, t, 0, &r, o);
        host_result_clear(&r);
        t->updated_ms = dec->now(); /* word from the worker: the response timeout restarts */
        return 0;
    }
    dec_unqueue(dec, x, t, o); /* the claim goes with the save that takes the result */
    return op_complete_reported(env, dec, x, t, a->status, a->output, a->reason, REASON_MAX, o,
                                err);
}

/* Apply a result; terminal ones wake a decider, heartbeats extend the lease. */
static int apply_result(ap_server *s, tls *t, const char *wfid, result_args *a, weft_error *err)
{
    int rc;
    t->op.client = a->status != WEFT_TASK_IN_PROGRESS;
    rc = op_update(&t->op, wfid, fn_result, a, err);
    t->op.client = 1;
    if (rc) return rc;
    if (a->lines.n) {
        /* after the result: a log does not hold a result up, nor is it
         * kept for one refused (one more round trip, only with logs) */
        weft_error e2 = {0};
        if (ST(t->st, task_log_add, wfid, a->found_id, (const char *const *)a->lines.v, a->lines.n,
               &e2))
            ap_log(s, WEFT_LOG_WARN, LG_FIELDS(LG_STR("task_id", a->found_id)),
                   "api: its logs were not kept: %s", e2.msg);
    }
    if (a->status == WEFT_TASK_IN_PROGRESS) {
        if (a->callback_ms <= 0) {
            weft_error e2 = {0};
            ST(t->st, lease_extend, a->queue, wfid, a->found_id, a->lease_ms, &e2);
        }
    } else {
        mt_task(s->cfg.metrics, a->type, weft_task_status_name(a->status),
                a->started_ms ? (double)(wu_now_ms() - a->started_ms) / 1000.0 : -1);
    }
    return 0;
}

/* ---- handlers: external workers ---- */

const char *ap_poll_queue(ctx *c, const char *name, char buf[256])
{
    const char *d = ap_query(c, "domain");
    if (strchr(name, ':')) { /* a plain poll never names a domain's queue */
        ap_send_error(c, 400, "task name '%s': ':' separates a task domain (poll ?domain=)", name);
        return NULL;
    }
    if (!d || !*d || !strcasecmp(d, "NO_DOMAIN")) return name;
    /* (spaces or a ',' make it no name: a poll takes one domain, as written) */
    if (!op_domain_ok(d, strlen(d)) || (size_t)snprintf(buf, 256, "%s:%s", d, name) >= 256) {
        ap_send_error(c, 400, "domain '%s': letters, digits, '_', '-', '.', at most 64", d);
        return NULL;
    }
    return buf;
}

/* GET /api/tasks/poll/{name}?workerid=&domain=: 200 with a Task, or 204. */
mhd_result ap_h_poll(ctx *c)
{
    weft_error err = {0};
    char qbuf[256];
    const char *queue = ap_poll_queue(c, c->q->seg[3], qbuf);
    json_object *arr;
    int n;
    mhd_result r;
    if (!queue) return c->res;
    arr = json_object_new_array();
    n = ap_take(c->s, c->t, queue, 1, ap_query(c, "workerid"), arr, &err);
    if (n < 0)
        r = ap_send_werr(c, &err);
    else if (n == 0)
        r = ap_send_empty(c, 204);
    else
        r = ap_send_json(c, 200, json_object_get(json_object_array_get_idx(arr, 0)));
    json_object_put(arr);
    return r;
}

static mhd_result result_reply(ctx *c, const char *wfid, result_args *a)
{
    weft_error err = {0};
    int rc = apply_result(c->s, c->t, wfid, a, &err);
    log_lines_clear(&a->lines);
    if (rc) return ap_send_werr(c, &err);
    return ap_send_text(c, 200, a->found_id);
}

/* POST /api/tasks: a TaskResult. */
mhd_result ap_h_result(ctx *c)
{
    json_object *body, *v;
    const char *wfid, *status;
    result_args a = {0};
    mhd_result r;
    if (ap_body_json(c, 0, &body)) return c->res;
    if (!json_object_is_type(body, json_type_object)) {
        json_object_put(body);
        return ap_send_error(c, 400, "expected a TaskResult object");
    }
    a.callback_ms = -1;
    if (ap_member_str(c, body, "workflowInstanceId", &wfid) ||
        ap_member_str(c, body, "taskId", &a.task_id) || ap_member_str(c, body, "status", &status) ||
        ap_member_obj(c, body, "outputData", &a.output) ||
        ap_member_str(c, body, "reasonForIncompletion", &a.reason) ||
        ap_member_str(c, body, "workerId", &a.worker) || result_logs(c, body, &a.logs))
        goto out;
    if (!wfid || !*wfid || !a.task_id || !*a.task_id) {
        ap_send_error(c, 400, "a TaskResult needs workflowInstanceId and taskId");
        goto out;
    }
    if (task_status_of(status, &a.status)) {
        ap_send_error(
            c, 400, "status must be IN_PROGRESS, COMPLETED, FAILED or FAILED_WITH_TERMINAL_ERROR");
        goto out;
    }
    if (json_object_object_get_ex(body, "callbackAfterSeconds", &v) && v) {
        double s;
        if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) {
            ap_send_error(c, 400, "callbackAfterSeconds must be a number");
            goto out;
        }
        s = json_object_get_double(v);
        if (s < 0 || s > 365.0 * 24 * 3600) {
            ap_send_error(c, 400, "callbackAfterSeconds must be between 0 and a year");
            goto out;
        }
        a.callback_ms = (int64_t)(s * 1000);
    }
    /* the reason is cut at REASON_MAX when applied, after its secrets are masked */
    result_reply(c, wfid, &a);
out:
    r = c->res;
    json_object_put(a.logs);
    json_object_put(body);
    return r;
}

/* POST /api/tasks/{wfId}/{taskRef}/{status}?workerid=&reason=: the body is the output. */
mhd_result ap_h_by_ref(ctx *c)
{
    json_object *out;
    result_args a = {0};
    mhd_result r;
    if (task_status_of(c->q->seg[4], &a.status))
        return ap_send_error(c, 400,
                             "status %s: use COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR "
                             "or IN_PROGRESS",
                             c->q->seg[4]);
    if (ap_body_json(c, 1, &out)) return c->res;
    if (out && !json_object_is_type(out, json_type_object)) {
        json_object_put(out);
        return ap_send_error(c, 400, "the output must be a JSON object");
    }
    a.ref = c->q->seg[3];
    a.output = out;
    a.worker = ap_query(c, "workerid");
    a.reason = ap_query(c, "reason");
    a.callback_ms = -1;
    if (!a.reason && a.status != WEFT_TASK_COMPLETED && a.status != WEFT_TASK_IN_PROGRESS)
        a.reason = "failed through the REST API";
    r = result_reply(c, c->q->seg[2], &a);
    json_object_put(out);
    return r;
}

/* ---- a task by its id, and its log ---- */

/* The execution the task id names, loaded, and the task in it: 0, or -1
 * after answering 404 (naming the id) or the store's error. */
static int task_of(ctx *c, const char *task_id, xc_exec **x, xc_task **t)
{
    weft_error err = {0};
    char wf[WU_TASK_ID_MAX];
    *x = NULL;
    *t = NULL;
    if (wu_task_workflow(task_id, wf, &err)) {
        ap_send_error(c, 404, "no task %s: a task id is its workflow's id, '.' and 16 hex digits",
                      task_id);
        return -1;
    }
    if (op_load(&c->t->op, wf, x, NULL, &err)) {
        if (err.code == WEFT_ENOTFOUND)
            ap_send_error(c, 404, "no task %s: its workflow %s is not stored", task_id, wf);
        else
            ap_send_werr(c, &err);
        return -1;
    }
    if (!(*t = xc_find_id(*x, task_id))) {
        ap_send_error(c, 404, "no task %s in workflow %s", task_id, wf);
        xc_free(*x);
        *x = NULL;
        return -1;
    }
    return 0;
}

/* GET /api/tasks/{taskId}: Conductor's Task. */
mhd_result ap_h_task(ctx *c)
{
    xc_exec *x;
    xc_task *t;
    json_object *j;
    if (task_of(c, c->q->seg[2], &x, &t)) return c->res;
    j = xc_task_to_json(x, t);
    xc_free(x);
    return ap_send_json(c, 200, j);
}

/* GET /api/tasks/{taskId}/log: [TaskExecLog {log, taskId, createdTime}],
 * oldest first. */
mhd_result ap_h_task_log(ctx *c)
{
    weft_error err = {0};
    xc_exec *x;
    xc_task *t;
    char *lines = NULL;
    wu_buf b = {0};
    int rc;
    if (task_of(c, c->q->seg[2], &x, &t)) return c->res;
    rc = ST(c->t->st, task_log, x->id, t->id, &lines, &err);
    xc_free(x);
    if (rc) return ap_send_werr(c, &err);
    /* the lines are JSON texts, one a line: an array of them */
    if (wu_buf_add(&b, "[", 1)) goto oom;
    for (char *p = lines; *p;) {
        size_t n = strcspn(p, "\n");
        if ((b.len > 1 && wu_buf_add(&b, ",", 1)) || wu_buf_add(&b, p, n)) goto oom;
        p += n + (p[n] == '\n');
    }
    if (wu_buf_add(&b, "]", 1)) goto oom;
    free(lines);
    {
        mhd_result r = ap_send_json_text(c, 200, b.data);
        wu_buf_free(&b);
        return r;
    }
oom:
    free(lines);
    wu_buf_free(&b);
    return ap_send_error(c, 500, "out of memory");
}

/* POST /api/tasks/{taskId}/log: the body is the log line, as text (Conductor's
 * Java client) or a JSON string (its Python client). */
mhd_result ap_h_task_log_post(ctx *c)
{
    weft_error err = {0};
    xc_exec *x;
    xc_task *t;
    const char *text;
    json_object *j = NULL, *entries, *entry;
    log_lines l = {0};
    int rc;
    if (ap_body_text(c, &text)) return c->res;
    if (!text) return ap_send_error(c, 400, "request body: expected the log line, got nothing");
    /* a whole JSON string is its value; anything else, "a" and more
     * included, is the text as sent */
    if (*text == '"' &&
        (wu_parse_json("log", text, &j, &err) || !json_object_is_type(j, json_type_string))) {
        json_object_put(j);
        j = NULL;
        memset(&err, 0, sizeof err);
    }
    if (task_of(c, c->q->seg[2], &x, &t)) {
        json_object_put(j);
        return c->res;
    }
    entries = json_object_new_array();
    entry = json_object_new_object();
    json_object_object_add(entry, "log", j ? json_object_get(j) : json_object_new_string(text));
    json_object_array_add(entries, entry);
    json_object_put(j);
    rc = log_lines_of(c->t->st, t, entries, &l, &err) ||
         ST(c->t->st, task_log_add, x->id, t->id, (const char *const *)l.v, l.n, &err);
    xc_free(x);
    log_lines_clear(&l);
    if (rc) return ap_send_werr(c, &err);
    return ap_send_empty(c, 200);
}

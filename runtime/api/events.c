/*
 * What waits off the pool threads: the waiter, which holds suspended
 * connections and resumes them when due (and drops slow requests); the
 * status lane as Server-Sent Events; batch long polls.
 */
#include "api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REAP_EVERY_MS 250      /* how often the waiter looks for slow requests */
#define LONG_POLL_MAX_MS 20000 /* the longest a batch poll waits */
#define SSE_LOOK_MIN_MS 10     /* an idle event stream looks for events after this, */
#define SSE_LOOK_MAX_MS 200    /* doubling up to this */
#define SSE_KEEPALIVE_MS 15000

/* ---- the waiter: parked long polls and event streams ---- */

/* Suspend p->conn and hand it to the waiter; -1 when stopping (not parked:
 * the caller answers now). Called from a handler or a content reader. */
static int park_add(ap_server *s, park *p)
{
    pthread_mutex_lock(&s->pmu);
    if (ap_stopping(s)) {
        pthread_mutex_unlock(&s->pmu);
        return -1;
    }
    /* suspended before it is listed: the waiter resumes only listed ones */
    MHD_suspend_connection(p->conn);
    p->next = s->parked;
    s->parked = p;
    s->kicked = 1;
    pthread_cond_signal(&s->pcond);
    pthread_mutex_unlock(&s->pmu);
    return 0;
}

void *ap_waiter_main(void *arg)
{
    ap_server *s = arg;
    int64_t reaped = 0;
    pthread_mutex_lock(&s->pmu);
    for (;;) {
        int64_t now = wu_mono_ms(), next = now + REAP_EVERY_MS;
        int stop = ap_stopping(s);
        park *due = NULL, **pp = &s->parked, *p;
        s->kicked = 0;
        while ((p = *pp) != NULL) {
            if (stop || p->due <= now) {
                *pp = p->next;
                p->next = due;
                due = p;
            } else {
                if (p->due < next) next = p->due;
                pp = &p->next;
            }
        }
        pthread_mutex_unlock(&s->pmu);
        /* off the lock: a poll's try talks to Redis */
        while ((p = due) != NULL) {
            due = p->next;
            if (stop || p->fn(s, p)) {
                MHD_resume_connection(p->conn);
            } else {
                pthread_mutex_lock(&s->pmu);
                p->next = s->parked;
                s->parked = p;
                pthread_mutex_unlock(&s->pmu);
                if (p->due < next) next = p->due;
            }
        }
        if (wu_mono_ms() - reaped >= REAP_EVERY_MS) {
            ap_drop_slow(s);
            reaped = wu_mono_ms();
        }
        pthread_mutex_lock(&s->pmu);
        if (stop && !s->parked) break;
        if (!ap_stopping(s) && !s->kicked && next > wu_mono_ms()) {
            struct timespec ts;
            int64_t wait = next - wu_mono_ms();
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)(wait / 1000);
            ts.tv_nsec += (long)(wait % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&s->pcond, &s->pmu, &ts);
        }
    }
    pthread_mutex_unlock(&s->pmu);
    return NULL;
}

/* ---- handlers: the status lane as Server-Sent Events ---- */

typedef struct sse {
    park pk; /* with the waiter while there is nothing to send */
    int64_t gap;
    ap_server *s;
    st_store *st; /* its own: the stream outlives the request's handler */
    char id[64];
    char last[ST_EVENT_ID_MAX];  /* where the next read resumes (rs_events' next_id) */
    char entry[ST_EVENT_ID_MAX]; /* the stream entry of the last event sent */
    wu_buf out;
    size_t off;
    int done;      /* the workflow ended: close once out is sent */
    int maybe_end; /* the last event ended it: close unless more follow at once */
    int64_t wrote_ms;
} sse;

static int wf_end_event(const char *json)
{
    json_object *ev = json_tokener_parse(json), *v;
    weft_wf_status st;
    int end = ev && !json_object_object_get_ex(ev, "taskId", &v) &&
              json_object_object_get_ex(ev, "status", &v) &&
              json_object_is_type(v, json_type_string) &&
              xc_wf_status_parse(json_object_get_string(v), &st) == 0 && xc_wf_terminal(st);
    json_object_put(ev);
    return end;
}

static int sse_event(void *ud, const char *id, const char *json)
{
    sse *e = ud;
    size_t n = (size_t)(strrchr(id, '-') - id); /* "<entry>-<index>" */
    wu_buf_add(&e->out, "id: ", 4);
    wu_buf_add(&e->out, id, strlen(id));
    wu_buf_add(&e->out, "\ndata: ", 7);
    wu_buf_add(&e->out, json, strlen(json)); /* one line: JSON text escapes newlines */
    wu_buf_add(&e->out, "\n\n", 2);
    /* the events of one save share an entry: the end may come before its
     * cancels, so an entry ends the stream if any of its events does */
    if (strlen(e->entry) != n || strncmp(e->entry, id, n)) {
        e->maybe_end = 0;
        snprintf(e->entry, sizeof e->entry, "%.*s", (int)n, id);
    }
    e->maybe_end |= wf_end_event(json);
    return 0;
}

/* Whether the workflow ended (or is gone) without its end in the stream. */
static int sse_ended(sse *e)
{
    st_doc x = {0};
    weft_error err = {0};
    weft_wf_status st;
    int rc = ST(e->st, exec_read, e->id, &x, &err), end;
    end = rc == WEFT_ENOTFOUND ||
          (rc == 0 && xc_wf_status_parse(x.status, &st) == 0 && xc_wf_terminal(st));
    st_doc_clear(&x);
    return end;
}

/* Called (on the connection's thread) whenever the client can take more. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    sse *e = cls;
    for (;;) {
        weft_error err = {0};
        int n;
        if (e->off < e->out.len) {
            size_t k = e->out.len - e->off < max ? e->out.len - e->off : max;
            memcpy(buf, e->out.data + e->off, k);
            e->off += k;
            if (e->off == e->out.len) e->off = e->out.len = 0;
            e->wrote_ms = wu_mono_ms();
            return (ssize_t)k;
        }
        if (e->done || ap_stopping(e->s)) return MHD_CONTENT_READER_END_OF_STREAM;
        n = ST(e->st, events, e->id, e->last, e->last, 0, sse_event, e, &err);
        if (n > 0) {
            e->gap = 0;
            continue;
        }
        if (n == 0 && e->maybe_end) {
            e->done = 1;
            continue;
        }
        if (n < 0 && err.code != WEFT_EIO) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (wu_mono_ms() - e->wrote_ms >= SSE_KEEPALIVE_MS) {
            wu_buf_add(&e->out, ": keepalive\n\n", 13);
            if (n == 0 && sse_ended(e)) e->maybe_end = 1;
            continue;
        }
        /* nothing to send: off the pool thread until it is time to look
         * again (sooner after events; Redis away: keep the stream, keep trying) */
        e->gap = n < 0    ? SSE_LOOK_MAX_MS
                 : e->gap ? (e->gap * 2 > SSE_LOOK_MAX_MS ? SSE_LOOK_MAX_MS : e->gap * 2)
                          : SSE_LOOK_MIN_MS;
        e->pk.due = wu_mono_ms() + e->gap;
        if (park_add(e->s, &e->pk)) return MHD_CONTENT_READER_END_OF_STREAM;
        return 0;
    }
}

/* The waiter's turn at a parked stream: resume it, the reader looks. */
static int sse_again(ap_server *s, park *p)
{
    (void)s;
    (void)p;
    return 1;
}

static void sse_free(void *cls)
{
    sse *e = cls;
    st_free(e->st);
    wu_buf_free(&e->out);
    free(e);
}

/* GET /api/workflow/{id}/events: history first (after Last-Event-ID), then live. */
mhd_result ap_h_events(ctx *c)
{
    weft_error err = {0};
    const char *last = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Last-Event-ID");
    struct MHD_Response *resp;
    st_doc x = {0};
    weft_wf_status st;
    sse *e;
    char entry[ST_EVENT_ID_MAX];
    long long index;
    int ended;
    if (last && st_event_id_parse(last, entry, &index, &err))
        return ap_send_error(c, 400, "Last-Event-ID: %s", err.msg);
    if (ST(c->t->st, exec_read, c->q->seg[2], &x, &err)) return ap_send_werr(c, &err);
    ended = xc_wf_status_parse(x.status, &st) == 0 && xc_wf_terminal(st);
    st_doc_clear(&x);
    if (!(e = calloc(1, sizeof *e))) return ap_send_error(c, 500, "out of memory");
    e->s = c->s;
    if (ap_open_store(c->s, NULL, &e->st, &err) && !e->st) {
        free(e);
        return ap_send_werr(c, &err);
    }
    e->pk.conn = c->conn;
    e->pk.fn = sse_again;
    snprintf(e->id, sizeof e->id, "%s", c->q->seg[2]);
    snprintf(e->last, sizeof e->last, "%s", last ? last : "0");
    e->maybe_end = ended;
    e->wrote_ms = wu_mono_ms();
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_read, e, sse_free);
    if (!resp) {
        sse_free(e);
        return ap_send_error(c, 500, "out of memory");
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    c->res = MHD_queue_response(c->conn, 200, resp);
    MHD_destroy_response(resp);
    c->q->code = 200;
    return c->res;
}

static mhd_result poll_reply(ctx *c, longpoll *lp)
{
    if (lp->failed) return ap_send_werr(c, &lp->err);
    return ap_send_json(c, 200, json_object_get(lp->arr));
}

/* The waiter's turn at a parked batch poll: 1 when it has its answer. */
static int poll_again(ap_server *s, park *p)
{
    longpoll *lp = (longpoll *)p;
    tls *t = ap_tls_get(s);
    int64_t left;
    int n;
    if (!t) return 1;
    n = ap_take(s, t, lp->queue, lp->count - lp->got, lp->worker, lp->arr, &lp->err);
    if (n < 0) {
        lp->failed = !lp->got;
        return 1;
    }
    lp->got += n;
    left = lp->deadline - wu_mono_ms();
    if (lp->got > 0 || left <= 0) return 1;
    lp->pause = lp->pause * 2 > 50 ? 50 : lp->pause * 2;
    p->due = wu_mono_ms() + (lp->pause < left ? lp->pause : left);
    return 0;
}

/*
 * GET /api/tasks/poll/batch/{name}?workerid=&count=&timeout=: a list; waits
 * up to timeout ms for the first task. The first try is made here; then the
 * connection is parked with the waiter, which tries again (5 ms apart, then
 * up to 50) and resumes it with the answer: no pool thread waits.
 */
mhd_result ap_h_poll_batch(ctx *c)
{
    longpoll *lp = c->q->lp;
    long count, timeout;
    int n;
    if (lp) return poll_reply(c, lp); /* resumed by the waiter */
    if (ap_query_long(c, "count", 1, 1, 1000000, &count) ||
        ap_query_long(c, "timeout", 100, 0, 1000000000L, &timeout))
        return c->res;
    if (count > POLL_MAX) count = POLL_MAX;
    if (timeout > LONG_POLL_MAX_MS) timeout = LONG_POLL_MAX_MS;
    if (!(lp = calloc(1, sizeof *lp)) || !(lp->arr = json_object_new_array())) {
        free(lp);
        return ap_send_error(c, 500, "out of memory");
    }
    c->q->lp = lp;
    if (!(lp->queue = ap_poll_queue(c, c->q->seg[4], lp->qbuf))) return c->res;
    lp->worker = ap_query(c, "workerid");
    lp->count = (int)count;
    n = ap_take(c->s, c->t, lp->queue, lp->count, lp->worker, lp->arr, &lp->err);
    if (n < 0) lp->failed = 1;
    if (n != 0 || timeout <= 0) return poll_reply(c, lp);
    lp->deadline = wu_mono_ms() + timeout;
    lp->pause = 5;
    lp->pk.conn = c->conn;
    lp->pk.fn = poll_again;
    lp->pk.due = wu_mono_ms() + (lp->pause < timeout ? lp->pause : timeout);
    if (park_add(c->s, &lp->pk)) return poll_reply(c, lp); /* stopping */
    return MHD_YES;
}

/*
 * The REST API, in this order: per-thread state; responses and request
 * parsing; the store steps the routes take (small functions on ops.h and
 * store_redis.h); the handlers, one per route; routing, auth and body
 * limits; the server.
 *
 * Round trips to Redis (fencing on, so no lock): a poll that hands out a
 * task costs 4 (claim with reaping, load, fenced save, the save's queue
 * steps); a result costs 3 (load, fenced save, its steps: the claim is
 * dropped in the same pipeline that wakes the decider).
 */
#include "api/api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <microhttpd.h>

#include "lua/dsl.h"
#include "plugin/host.h"
#include "core/ops.h"

#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

#define API_THREADS 16 /* the pool, when the config says 0 */
#define API_THREADS_MAX 1024
#define API_CONNS 512           /* connections served, when the config says 0 */
#define API_REQUEST_MS 60000    /* a whole request must arrive within this (config 0) */
#define API_IDLE_MS 30000       /* a connection silent this long is closed (config 0) */
#define REAP_EVERY_MS 250       /* how often the waiter looks for slow requests */
#define POLL_MAX 100            /* tasks one batch poll hands out at most */
#define LONG_POLL_MAX_MS 20000  /* the longest a batch poll waits */
#define LEASE_DEFAULT_MS 600000 /* a polled task's lease when it has no responseTimeout */
#define LEASE_MARGIN_MS 1000    /* lease past the responseTimeout: the decider's timeout wins */
#define SSE_LOOK_MIN_MS 10      /* an idle event stream looks for events after this, */
#define SSE_LOOK_MAX_MS 200     /* doubling up to this */
#define SSE_KEEPALIVE_MS 15000
#define REASON_MAX 500 /* Conductor cuts reasonForIncompletion here */
#define SEGS_MAX 8
#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

typedef struct park park;
typedef struct conn_rec conn_rec;

struct ap_server {
    ap_config cfg;
    struct MHD_Daemon *d;
    char address[96];
    pthread_key_t key;
    int key_made;
    int stopping;
    op_hooks hooks;
    pthread_mutex_t mu;
    wu_map *leases;    /* queue -> the lease (ms) its tasks last needed */
    char mhd_msg[256]; /* libmicrohttpd's last complaint while starting */
    conn_rec *conns;   /* every open connection (under mu) */
    int nconns;
    /* the waiter: suspended connections waiting for something to send */
    pthread_mutex_t pmu;
    pthread_cond_t pcond;
    park *parked; /* under pmu */
    int kicked;   /* under pmu: parked changed while the waiter was busy */
    pthread_t waiter;
    int waiter_made;
};

/*
 * One client connection, from accept to close (libmicrohttpd's socket
 * context). The request timeout counts from `since` while no handler has
 * the request: a slow client is dropped, a long poll or stream is not.
 */
struct conn_rec {
    conn_rec *prev, *next;
    int fd;
    struct sockaddr_storage addr;
    char ip[INET6_ADDRSTRLEN];
    int64_t since; /* the connect, or the end of the previous request (mono ms) */
    int busy;      /* a handler has its request */
    int dropped;
    int nul;  /* the request's URL or query held %00 */
    int over; /* past a limit when it came: 1 the total, 2 its address's */
};

/*
 * A suspended connection with the waiter. When due, the waiter calls fn:
 * 1 = resume the connection now (its handler or content reader runs again
 * on a pool thread and answers), 0 = not yet (fn set a new due).
 */
struct park {
    park *next;
    struct MHD_Connection *conn;
    int64_t due; /* wu_mono_ms */
    int (*fn)(ap_server *s, park *p);
};

/* A batch poll waiting for a task. */
typedef struct longpoll {
    park pk;
    const char *queue, *worker; /* borrowed from the request */
    int count, got, failed;
    int64_t deadline, pause;
    json_object *arr;
    weft_error err;
} longpoll;

/* What each handler thread keeps: its own connection and compiled definitions. */
typedef struct tls {
    ap_server *s;
    rs *r;
    op_cache *cache;
    dec_env dec;
    op_env op;
} tls;

/* One request, across the calls libmicrohttpd makes for it. */
typedef struct req {
    char method[8];
    char url[160]; /* the path as logged (cut) */
    char *path;    /* the URL path, split in place into seg[] */
    const char *seg[SEGS_MAX];
    int nseg;
    int64_t t0;
    int code; /* the status sent; 0 = none yet */
    int too_big;
    int oom;
    int close; /* answer with Connection: close */
    const struct route *route;
    int m;        /* method index */
    longpoll *lp; /* a batch poll that waited */
    wu_buf body;
    char why[200]; /* the message of a 5xx, for the log */
} req;

typedef struct ctx {
    ap_server *s;
    struct MHD_Connection *conn;
    req *q;
    tls *t; /* NULL when it could not be made (out of memory) */
    mhd_result res;
} ctx;

typedef mhd_result (*handler)(ctx *c);

static int park_add(ap_server *s, park *p);
static conn_rec *conn_of(struct MHD_Connection *conn);

static int stopping(const ap_server *s)
{
    return __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE);
}

__attribute__((format(printf, 3, 4))) static void say(ap_server *s, int level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    if (!s->cfg.log) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->cfg.log(s->cfg.log_ud, level, msg);
}

/* ---- per-thread state ---- */

static void tls_free(tls *t)
{
    if (!t) return;
    rs_free(t->r);
    op_cache_free(t->cache);
    free(t);
}

/* A thread ended (the pool and the waiter end when the server stops). */
static void tls_release(void *p)
{
    tls_free(p);
}

static void api_ended(void *ud, op_env *env, const xc_exec *x)
{
    mt_workflow_ended(((ap_server *)ud)->cfg.metrics, weft_wf_status_name(x->status));
    if (x->parent_id) {
        /* a child ended here (an operator's terminate): its parent's decider
         * reads the end when it looks at the parent, so it looks now, not at
         * its next sweep */
        weft_error e = {0};
        rs_wake(env->r, x->parent_id, wu_now_ms(), 1, &e);
    }
}

/* This thread's state, made on first use. A Redis that cannot be reached
 * is no error here: each call tries to connect again. */
static tls *tls_get(ap_server *s)
{
    tls *t = pthread_getspecific(s->key);
    weft_error err = {0};
    if (t) return t;
    if (!(t = calloc(1, sizeof *t))) return NULL;
    t->s = s;
    if (!(t->cache = op_cache_new()) || (rs_open(&s->cfg.store, &t->r, &err) && !t->r)) {
        say(s, WEFT_LOG_ERROR, "api: %s", err.msg[0] ? err.msg : "out of memory");
        tls_free(t);
        return NULL;
    }
    t->dec.defs = s->cfg.defs;
    t->dec.now = wu_now_ms;
    t->op.r = t->r;
    t->op.defs = s->cfg.defs;
    t->op.dec = &t->dec;
    t->op.cache = t->cache;
    /* fencing alone keeps changes safe, as for the weft client; the lock
     * is what protects when fencing is off */
    if (!s->cfg.fencing) {
        t->op.lock = s->cfg.lock;
        t->op.lock_handle = s->cfg.lock_handle;
    }
    t->op.lock_ttl_ms = s->cfg.lock_ttl_ms;
    t->op.lock_wait_ms = s->cfg.lock_wait_ms;
    t->op.command_wait_ms = s->cfg.command_wait_ms;
    t->op.sweep_ms = s->cfg.sweep_ms;
    t->op.unfenced = !s->cfg.fencing;
    t->op.ps = s->cfg.payloads;
    t->op.client = 1;
    t->op.hooks = &s->hooks;
    if (pthread_setspecific(s->key, t)) {
        tls_free(t);
        return NULL;
    }
    return t;
}

/* ---- responses ---- */

static mhd_result send_raw(ctx *c, int code, const char *type, const char *body, size_t len,
                           const char *hname, const char *hvalue)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (!r) return c->res = MHD_NO;
    if (type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (hname) MHD_add_response_header(r, hname, hvalue);
    if (code == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (c->q->close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    c->res = MHD_queue_response(c->conn, (unsigned)code, r);
    MHD_destroy_response(r);
    c->q->code = code;
    return c->res;
}

static mhd_result send_text(ctx *c, int code, const char *text)
{
    return send_raw(c, code, "text/plain; charset=utf-8", text, strlen(text), NULL, NULL);
}

static mhd_result send_json_text(ctx *c, int code, const char *text)
{
    return send_raw(c, code, "application/json", text, strlen(text), NULL, NULL);
}

/* Takes j. */
static mhd_result send_json(ctx *c, int code, json_object *j)
{
    mhd_result r;
    if (!j)
        return send_json_text(c, 500,
                              "{\"status\":500,\"message\":\"out of memory\",\"retryable\":true}");
    r = send_json_text(c, code, json_object_to_json_string_ext(j, JSON_FLAGS));
    json_object_put(j);
    return r;
}

static mhd_result send_empty(ctx *c, int code)
{
    return send_raw(c, code, NULL, "", 0, NULL, NULL);
}

/* The length of the valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t len, i;
    if (p[0] < 0x80) return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        len = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        len = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        len = 4;
    else
        return 0;
    /* no overlong forms, no surrogates, nothing past U+10FFFF */
    if (p[0] == 0xe0) lo = 0xa0;
    if (p[0] == 0xed) hi = 0x9f;
    if (p[0] == 0xf0) lo = 0x90;
    if (p[0] == 0xf4) hi = 0x8f;
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return len;
}

/* in as valid UTF-8 into out (cap bytes): each byte that is not part of a
 * valid sequence becomes the text \xNN, so a message that quotes the
 * request stays valid JSON and still shows what was sent. */
static void utf8_clean(char *out, size_t cap, const char *in)
{
    const unsigned char *p = (const unsigned char *)in;
    size_t n = strlen(in), o = 0, k;
    while (n) {
        if ((k = utf8_seq(p, n)) != 0) {
            if (o + k >= cap) break;
            memcpy(out + o, p, k);
            o += k;
        } else {
            if (o + 4 >= cap) break;
            snprintf(out + o, cap - o, "\\x%02x", *p);
            o += 4;
            k = 1;
        }
        p += k;
        n -= k;
    }
    out[o] = 0;
}

/* Conductor's error shape: {"status": N, "message": "...", "retryable": bool}. */
static mhd_result send_error_v(ctx *c, int code, const char *hname, const char *hvalue,
                               const char *fmt, va_list ap)
{
    char raw[WEFT_ERROR_MAX + 128], msg[sizeof raw * 4];
    json_object *j = json_object_new_object();
    const char *text;
    mhd_result r;
    vsnprintf(raw, sizeof raw, fmt, ap);
    utf8_clean(msg, sizeof msg, raw);
    if (code >= 500) snprintf(c->q->why, sizeof c->q->why, "%.199s", msg);
    json_object_object_add(j, "status", json_object_new_int(code));
    json_object_object_add(j, "message", json_object_new_string(msg));
    json_object_object_add(j, "retryable", json_object_new_boolean(code == 503 || code == 429));
    text = json_object_to_json_string_ext(j, JSON_FLAGS);
    r = send_raw(c, code, "application/json", text, strlen(text), hname, hvalue);
    json_object_put(j);
    return r;
}

__attribute__((format(printf, 3, 4))) static mhd_result send_error(ctx *c, int code,
                                                                   const char *fmt, ...)
{
    va_list ap;
    mhd_result r;
    va_start(ap, fmt);
    r = send_error_v(c, code, NULL, NULL, fmt, ap);
    va_end(ap);
    return r;
}

__attribute__((format(printf, 5, 6))) static mhd_result
send_error_h(ctx *c, int code, const char *hname, const char *hvalue, const char *fmt, ...)
{
    va_list ap;
    mhd_result r;
    va_start(ap, fmt);
    r = send_error_v(c, code, hname, hvalue, fmt, ap);
    va_end(ap);
    return r;
}

/* The HTTP status for a WEFT_E* code. */
static int http_code(int code)
{
    switch (code) {
    case WEFT_ENOTFOUND:
        return 404;
    case WEFT_EINVAL:
    case WEFT_ELIMIT:
    case WEFT_ESCRIPT:
        return 400;
    case WEFT_ESTATE:
    case WEFT_EEXIST:
        return 409;
    case WEFT_EIO:
    case WEFT_ETIMEOUT:
        return 503;
    default:
        return 500;
    }
}

static mhd_result send_werr(ctx *c, const weft_error *err)
{
    return send_error(c, http_code(err->code), "%s", err->msg[0] ? err->msg : "failed");
}

/* ---- request parts ---- */

static const char *query(ctx *c, const char *name)
{
    return MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* An integer query argument in [min, max]; absent = def. -1 after answering 400. */
static int query_long(ctx *c, const char *name, long def, long min, long max, long *out)
{
    const char *v = query(c, name);
    char *end;
    long n;
    *out = def;
    if (!v || !*v) return 0;
    errno = 0;
    n = strtol(v, &end, 10);
    if (*end || errno || n < min || n > max) {
        send_error(c, 400, "query argument %s: expected a whole number from %ld to %ld", name, min,
                   max);
        return -1;
    }
    *out = n;
    return 0;
}

static int one_of(const char *key, const char *const *keys)
{
    for (; *keys; keys++)
        if (!strcmp(key, *keys)) return 1;
    return 0;
}

/* Members that hold data, where any string is fine. */
static const char *const data_members[] = {
    "input",           "inputData",        "output",        "outputData", "variables",
    "inputParameters", "outputParameters", "inputTemplate", "logs",       NULL};

/* Members that name something: a NUL in one would cut the name short where
 * it is used as a C string (a key, a queue, a log line). */
static const char *const name_members[] = {"name",          "taskReferenceName",
                                           "type",          "workflowInstanceId",
                                           "taskId",        "workerId",
                                           "correlationId", "idempotencyKey",
                                           "taskDefName",   "workflowType",
                                           "status",        "version",
                                           "keyId",         "joinOn",
                                           "loopCondition", NULL};

/* A string name (or list of names) holding a NUL, anywhere outside data
 * members: 1, and the member's name goes to *where. */
static int nul_in_names(json_object *j, const char *key, const char **where, int depth)
{
    size_t i, n;
    if (depth > 200) return 0;
    switch (json_object_get_type(j)) {
    case json_type_string:
        if (key && one_of(key, name_members) &&
            strlen(json_object_get_string(j)) != (size_t)json_object_get_string_len(j)) {
            *where = key;
            return 1;
        }
        return 0;
    case json_type_array:
        n = json_object_array_length(j);
        for (i = 0; i < n; i++)
            if (nul_in_names(json_object_array_get_idx(j, i), key, where, depth + 1)) return 1;
        return 0;
    case json_type_object: {
        json_object_object_foreach(j, k, v)
        {
            if (!one_of(k, data_members) && nul_in_names(v, k, where, depth + 1)) return 1;
        }
        return 0;
    }
    default:
        return 0;
    }
}

/* -1 after answering 400 when a name in j (from what) holds a NUL. */
static int refuse_nul_names(ctx *c, const char *what, json_object *j)
{
    const char *where = NULL;
    if (!nul_in_names(j, NULL, &where, 0)) return 0;
    send_error(c, 400, "%s: %s holds a NUL byte (\\u0000): names and ids cannot hold one", what,
               where);
    return -1;
}

/* The request body as JSON. An empty body gives NULL when empty_ok, else
 * 400. -1 after answering 400 (the parse error, with its line; invalid
 * UTF-8, with its place; a name holding a NUL). */
static int body_json(ctx *c, int empty_ok, json_object **out)
{
    weft_error err = {0};
    const wu_buf *b = &c->q->body;
    size_t i, k, line = 1, col = 1;
    *out = NULL;
    if (!b->len) {
        if (empty_ok) return 0;
        send_error(c, 400, "request body: expected JSON, got nothing");
        return -1;
    }
    if (memchr(b->data, 0, b->len)) {
        send_error(c, 400, "request body: holds a NUL byte");
        return -1;
    }
    /* JSON is UTF-8 (RFC 8259): what is stored and echoed must be too */
    for (i = 0; i < b->len; i += k, col++) {
        if (!(k = utf8_seq((const unsigned char *)b->data + i, b->len - i))) {
            send_error(c, 400, "request body: invalid UTF-8 at line %zu, column %zu (byte 0x%02x)",
                       line, col, (unsigned char)b->data[i]);
            return -1;
        }
        if (b->data[i] == '\n') line++, col = 0;
    }
    if (wu_parse_json("request body", b->data, out, &err)) {
        send_error(c, 400, "%s", err.msg);
        return -1;
    }
    if (refuse_nul_names(c, "request body", *out)) {
        json_object_put(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* A string member: NULL when absent or null; -1 after answering 400 when another type. */
static int member_str(ctx *c, json_object *o, const char *key, const char **out)
{
    json_object *v;
    *out = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !v) return 0;
    if (!json_object_is_type(v, json_type_string)) {
        send_error(c, 400, "%s must be a string", key);
        return -1;
    }
    *out = json_object_get_string(v);
    return 0;
}

/* An object member: NULL when absent or null; -1 after answering 400 when another type. */
static int member_obj(ctx *c, json_object *o, const char *key, json_object **out)
{
    json_object *v;
    *out = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !v) return 0;
    if (!json_object_is_type(v, json_type_object)) {
        send_error(c, 400, "%s must be a JSON object", key);
        return -1;
    }
    *out = v;
    return 0;
}

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

/* ---- store steps: executions ---- */

/* SIMPLE tasks (type SIMPLE or none) without a taskDefinition, anywhere in a definition. */
static void simple_tasks(json_object *node, wu_vec *out, int depth)
{
    json_object *ref, *type, *td;
    if (depth > 64 || out->len >= 256) return;
    if (json_object_is_type(node, json_type_array)) {
        size_t i, n = json_object_array_length(node);
        for (i = 0; i < n; i++)
            simple_tasks(json_object_array_get_idx(node, i), out, depth + 1);
        return;
    }
    if (!json_object_is_type(node, json_type_object)) return;
    if (json_object_object_get_ex(node, "taskReferenceName", &ref) &&
        json_object_is_type(ref, json_type_string) &&
        (!json_object_object_get_ex(node, "type", &type) ||
         (json_object_is_type(type, json_type_string) &&
          !strcmp(json_object_get_string(type), "SIMPLE"))) &&
        !json_object_object_get_ex(node, "taskDefinition", &td))
        wu_vec_push(out, node);
    json_object_object_foreach(node, key, val)
    {
        if (strcmp(key, "inputParameters") && strcmp(key, "taskDefinition"))
            simple_tasks(val, out, depth + 1);
    }
}

static const char *task_name(json_object *task)
{
    json_object *v;
    if (json_object_object_get_ex(task, "name", &v) && json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    json_object_object_get_ex(task, "taskReferenceName", &v);
    return json_object_get_string(v);
}

/*
 * As in Conductor, a SIMPLE task without its own taskDefinition gets the
 * registered TaskDef of its name (retries, timeouts) when a workflow starts.
 * One round trip, only when there are such tasks.
 */
static int embed_taskdefs(tls *t, json_object *def, weft_error *err)
{
    wu_vec tasks = {0};
    const char **names;
    char **jsons;
    size_t i;
    int rc;
    simple_tasks(def, &tasks, 0);
    if (!tasks.len) {
        wu_vec_free(&tasks);
        return 0;
    }
    names = calloc(tasks.len, sizeof *names);
    jsons = calloc(tasks.len, sizeof *jsons);
    if (!names || !jsons) {
        free(names);
        free(jsons);
        wu_vec_free(&tasks);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    for (i = 0; i < tasks.len; i++)
        names[i] = task_name(tasks.items[i]);
    rc = rs_taskdefs_get(t->r, names, tasks.len, jsons, err);
    for (i = 0; i < tasks.len; i++) {
        json_object *td = !rc && jsons[i] ? json_tokener_parse(jsons[i]) : NULL;
        if (json_object_is_type(td, json_type_object))
            json_object_object_add(tasks.items[i], "taskDefinition", td);
        else
            json_object_put(td);
        free(jsons[i]);
    }
    free(names);
    free(jsons);
    wu_vec_free(&tasks);
    return rc;
}

/* A registered definition as JSON (caller puts it). */
static int registered_def(tls *t, const char *name, long version, json_object **out,
                          weft_error *err)
{
    char *text = NULL;
    int got = 0, rc = rs_def_get(t->r, name, (int)version, &text, &got, err);
    if (rc == 0) rc = wu_parse_json(name, text, out, err);
    free(text);
    return rc;
}

/* Start a workflow of def (borrowed; its SIMPLE tasks may gain taskDefinitions). */
static int start_def(ap_server *s, tls *t, json_object *defj, const char *source,
                     json_object *input, const char *corr, const char *idem, char id[64],
                     weft_error *err)
{
    def_workflow *def = NULL;
    op_start_args a = {0};
    int rc;
    if (!json_object_is_type(defj, json_type_object))
        return wu_err(err, WEFT_EINVAL, "%s: a workflow definition must be a JSON object", source);
    if ((rc = embed_taskdefs(t, defj, err))) return rc;
    if ((rc = op_def(&t->op, json_object_to_json_string_ext(defj, JSON_C_TO_STRING_PLAIN), source,
                     &def, err)))
        return rc;
    a.def = def;
    a.input = input;
    a.correlation_id = corr;
    a.idempotency_key = idem;
    t->op.client = 1;
    rc = op_start(&t->op, &a, id, err);
    def_unref(def);
    if (rc == 0) mt_workflow_started(s->cfg.metrics);
    return rc;
}

/* Compile a WorkflowDef to check it, then register it (and its name). */
static int register_def(ap_server *s, tls *t, json_object *j, weft_error *err)
{
    def_workflow *d = NULL;
    json_object *v;
    const char *source = "workflowDef";
    int rc;
    if (!json_object_is_type(j, json_type_object))
        return wu_err(err, WEFT_EINVAL, "a workflow definition must be a JSON object");
    if (json_object_object_get_ex(j, "name", &v) && json_object_is_type(v, json_type_string))
        source = json_object_get_string(v);
    if ((rc = def_compile(s->cfg.defs, j, source, NULL, &d, err))) return rc;
    rc = rs_def_register(t->r, d->name, d->version,
                         json_object_to_json_string_ext(d->json, JSON_C_TO_STRING_PLAIN), err);
    def_unref(d);
    return rc;
}

/* A TaskDef is checked by compiling it into a one-task workflow: its
 * fields mean what they mean there. */
static int check_taskdef(ap_server *s, json_object *td, weft_error *err)
{
    json_object *wf, *task, *tasks, *v;
    def_workflow *d = NULL;
    char source[300];
    int rc;
    if (!json_object_is_type(td, json_type_object))
        return wu_err(err, WEFT_EINVAL, "a task definition must be a JSON object");
    if (!json_object_object_get_ex(td, "name", &v) || !json_object_is_type(v, json_type_string) ||
        !*json_object_get_string(v))
        return wu_err(err, WEFT_EINVAL, "a task definition needs a name");
    snprintf(source, sizeof source, "task definition %s", json_object_get_string(v));
    wf = json_object_new_object();
    task = json_object_new_object();
    tasks = json_object_new_array();
    json_object_object_add(task, "name", json_object_get(v));
    json_object_object_add(task, "taskReferenceName", json_object_new_string("check"));
    json_object_object_add(task, "type", json_object_new_string("SIMPLE"));
    json_object_object_add(task, "taskDefinition", json_object_get(td));
    json_object_array_add(tasks, task);
    json_object_object_add(wf, "name", json_object_new_string("taskdef_check"));
    json_object_object_add(wf, "tasks", tasks);
    rc = def_compile(s->cfg.defs, wf, source, NULL, &d, err);
    def_unref(d);
    json_object_put(wf);
    return rc;
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
 * A cancel action for a queued task becomes an unqueue step in the
 * execution's outbox: the worker's claim is dropped by the same save that
 * takes its result, pipelined with the decider's wake-up.
 */
static void drop_claim(dec_out *o, xc_task *t)
{
    if (t->def->type->map || t->child_id)
        return; /* not queued; or a sub-workflow, whose cancel would end the child */
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 8;
        dec_action *a = realloc(o->a, cap * sizeof *a);
        if (!a) return; /* the claim expires and is dropped then */
        o->a = a;
        o->cap = cap;
    }
    o->a[o->n].kind = DEC_CANCEL;
    o->a[o->n].task = t;
    o->a[o->n].at = 0;
    o->n++;
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
    t->worker_id = a->worker && *a->worker ? strdup(a->worker) : NULL;
    a->lease_ms = lease_of(t);
    rto = t->def->response_timeout_ms ? t->def->response_timeout_ms : LEASE_DEFAULT_MS;
    a->task = xc_task_to_json(x, t);
    {
        /* the worker gets the secrets; what is stored keeps the placeholders */
        json_object *in, *filled;
        weft_error serr = {0};
        if (json_object_object_get_ex(a->task, "inputData", &in)) {
            if (host_fill_secrets(t, in, op_secret, env->r, &filled, &serr) == 0)
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

static void api_note(void *ud, int level, const char *msg)
{
    say(ud, level, "%s", msg);
}

static void warn_reaped(void *ud, const char *workflow_id, const char *msg)
{
    say(ud, WEFT_LOG_WARN, "api: workflow %s: %s", workflow_id, msg);
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
static int hand_out(ap_server *s, tls *t, const rs_lease *l, int64_t lease_ms, const char *worker,
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
            rs_lease_extend(t->r, l->type, l->workflow_id, l->task_id, a.lease_ms, &e2);
            lease_learned(s, l->type, a.lease_ms);
        }
        json_object_array_add(arr, a.task);
        return 1;
    }
    json_object_put(a.task);
    if (rc == 0 || rc == WEFT_ENOTFOUND || rc == WEFT_EINVAL) {
        weft_error e2 = {0};
        rs_ack(t->r, l, &e2); /* nothing to run: done, canceled or gone */
    } else if (rc != WEFT_EIO) {
        weft_error e2 = {0};
        /* contention: let it expire now, so the next poll gets it again */
        rs_lease_extend(t->r, l->type, l->workflow_id, l->task_id, 0, &e2);
        say(s, WEFT_LOG_WARN, "api: task %s of workflow %s: %s", l->task_id, l->workflow_id,
            err.msg);
    }
    return 0;
}

/* Claim from queue and hand out up to max tasks into arr. Returns how many,
 * or -1 (err set) when Redis failed before any. */
static int take(ap_server *s, tls *t, const char *queue, int max, const char *worker,
                json_object *arr, weft_error *err)
{
    rs_lease got[POLL_MAX];
    int handed = 0, tries, i;
    mt_queue_seen(s->cfg.metrics, queue);
    for (tries = 0; tries < 8 && handed < max; tries++) {
        char **ex = NULL;
        size_t nex = 0;
        int reaped = 0, want = max - handed;
        int64_t lease = lease_for(s, queue);
        int n = rs_poll(t->r, queue, want, lease, s->cfg.max_reaps, got, &reaped, &ex, &nex, err);
        mt_lease_reaps(s->cfg.metrics, reaped + (long)nex);
        if (reaped > 0)
            say(s, WEFT_LOG_INFO, "%d expired lease(s) of %s returned to the queue", reaped, queue);
        fail_exhausted(s, t, ex, nex);
        if (n < 0) return handed ? handed : -1;
        for (i = 0; i < n; i++)
            handed += hand_out(s, t, &got[i], lease, worker, arr);
        if (n < want) break; /* the queue has no more */
    }
    return handed;
}

typedef struct result_args {
    const char *task_id, *ref; /* which task: by id, else by reference name */
    weft_task_status status;
    json_object *output; /* borrowed */
    const char *reason;
    const char *worker;
    int64_t callback_ms; /* > 0: back to its queue, invisible this long */
    /* out */
    char found_id[64], queue[128], type[128];
    int64_t lease_ms, started_ms;
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
    snprintf(a->found_id, sizeof a->found_id, "%s", t->id);
    snprintf(a->queue, sizeof a->queue, "%s", t->def->queue);
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
        host_redact_reported(t, op_secret, env->r, &r.output, NULL, NULL, 0);
        r.callback_after_ms = a->callback_ms > 0 ? a->callback_ms : -1;
        if (wf_overdue(dec, x)) env->client = 1; /* a decider ends it now */
        if (a->callback_ms > 0)
            drop_claim(o, t); /* before the push dec_apply adds: unqueue, then queue again */
        dec_apply(dec, x, t, 0, &r, o);
        host_result_clear(&r);
        t->updated_ms = dec->now(); /* word from the worker: the response timeout restarts */
        return 0;
    }
    drop_claim(o, t);
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
    if (a->status == WEFT_TASK_IN_PROGRESS) {
        if (a->callback_ms <= 0) {
            weft_error e2 = {0};
            rs_lease_extend(t->r, a->queue, wfid, a->found_id, a->lease_ms, &e2);
        }
    } else {
        mt_task(s->cfg.metrics, a->type, weft_task_status_name(a->status),
                a->started_ms ? (double)(wu_now_ms() - a->started_ms) / 1000.0 : -1);
    }
    return 0;
}

/* ---- handlers: health, metrics ---- */

static mhd_result h_health(ctx *c)
{
    weft_error err = {0};
    int up = c->t && rs_command(c->t->r, &err, "PING") == 0;
    json_object *j = json_object_new_object();
    rs_loss l = {0};
    if (c->s->cfg.store.epoch) rs_epoch_last(c->s->cfg.store.epoch, &l);
    /* a loss stays reported until the daemon restarts: an operator must see it */
    json_object_object_add(j, "status",
                           json_object_new_string(!up       ? "DOWN"
                                                  : l.count ? "DEGRADED"
                                                            : "UP"));
    json_object_object_add(j, "redis", json_object_new_string(up ? "UP" : "DOWN"));
    if (l.count) {
        char at[32], msg[512];
        time_t sec = (time_t)(l.at_ms / 1000);
        struct tm tm;
        gmtime_r(&sec, &tm);
        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(msg, sizeof msg,
                 "the store lost its data at %s: the epoch key %s %s (Redis restarted empty, was "
                 "flushed, or is another server); workflows and queues from before are gone; "
                 "%lld loss(es) since this daemon started (see its log)",
                 at, l.key, l.gone ? "was gone" : "held another epoch", l.count);
        json_object_object_add(j, "store", json_object_new_string("DATA_LOST"));
        json_object_object_add(j, "problem", json_object_new_string(msg));
        json_object_object_add(j, "storeLosses", json_object_new_int64(l.count));
        json_object_object_add(j, "storeLostAt", json_object_new_int64(l.at_ms));
    }
    return send_json(c, up ? 200 : 503, j);
}

typedef struct depths {
    mt_depth d[MT_SERIES_MAX * 2];
    size_t n;
    rs *r;
} depths;

static int add_depth(void *ud, const char *queue)
{
    depths *g = ud;
    weft_error err = {0};
    long long ready = 0, leased = 0;
    size_t i;
    for (i = 0; i < g->n; i++)
        if (!strcmp(g->d[i].queue, queue)) return 0;
    if (g->n == sizeof g->d / sizeof g->d[0]) return 1;
    if (rs_queue_sizes(g->r, queue, &ready, &leased, &err))
        return rs_broken(g->r); /* Redis away: stop asking */
    g->d[g->n].queue = queue;
    g->d[g->n++].depth = ready + leased;
    return 0;
}

static mhd_result h_metrics(ctx *c)
{
    depths *g = calloc(1, sizeof *g);
    wu_buf b = {0};
    size_t i;
    mhd_result r;
    if (!g || !c->s->cfg.metrics) {
        free(g);
        return send_error(c, 500, "no metrics");
    }
    g->r = c->t ? c->t->r : NULL;
    for (i = 0; g->r && i < c->s->cfg.ntypes; i++)
        if (add_depth(g, c->s->cfg.types[i])) break;
    if (g->r && !rs_broken(g->r)) mt_queues(c->s->cfg.metrics, add_depth, g);
    if (mt_render(c->s->cfg.metrics, g->d, g->n, &b))
        r = send_error(c, 500, "out of memory");
    else
        r = send_raw(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, NULL, NULL);
    wu_buf_free(&b);
    free(g);
    return r;
}

/* ---- handlers: workflows ---- */

static mhd_result start_reply(ctx *c, json_object *defj, const char *source, json_object *input,
                              const char *corr, const char *idem)
{
    weft_error err = {0};
    char id[64];
    if (start_def(c->s, c->t, defj, source, input, corr, idem, id, &err)) return send_werr(c, &err);
    return send_text(c, 200, id);
}

/* POST /api/workflow: a StartWorkflowRequest. */
static mhd_result h_start(ctx *c)
{
    weft_error err = {0};
    json_object *body, *input, *v, *defj = NULL;
    const char *name, *corr, *idem, *source = "workflowDef";
    long version = 0;
    mhd_result r;
    if (body_json(c, 0, &body)) return c->res;
    if (!json_object_is_type(body, json_type_object)) {
        json_object_put(body);
        return send_error(c, 400, "expected a StartWorkflowRequest object");
    }
    if (member_str(c, body, "name", &name) || member_obj(c, body, "input", &input) ||
        member_str(c, body, "correlationId", &corr) || member_str(c, body, "idempotencyKey", &idem))
        goto out;
    if (json_object_object_get_ex(body, "version", &v) && v) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            json_object_get_int64(v) > 0x7fffffff) {
            send_error(c, 400, "version must be a whole number >= 0");
            goto out;
        }
        version = (long)json_object_get_int64(v);
    }
    if (json_object_object_get_ex(body, "workflowDef", &v) && v) {
        if (json_object_is_type(v, json_type_string)) {
            /* Lua DSL source */
            if (dsl_compile("workflowDef", json_object_get_string(v),
                            (size_t)json_object_get_string_len(v), &defj, NULL, &err)) {
                send_error(c, 400, "%s", err.msg);
                goto out;
            }
            if (refuse_nul_names(c, "workflowDef", defj)) goto out;
        } else if (json_object_is_type(v, json_type_object)) {
            defj = json_object_get(v);
        } else {
            send_error(c, 400, "workflowDef must be a WorkflowDef object or Lua source (a string)");
            goto out;
        }
    } else if (!name || !*name) {
        send_error(c, 400, "StartWorkflowRequest needs a name or a workflowDef");
        goto out;
    } else if (registered_def(c->t, name, version, &defj, &err)) {
        send_werr(c, &err);
        goto out;
    } else {
        source = name;
    }
    start_reply(c, defj, source, input, corr, idem);
out:
    r = c->res;
    json_object_put(defj);
    json_object_put(body);
    return r;
}

/* POST /api/workflow/{name}?version=&correlationId=: the body is the input. */
static mhd_result h_start_name(ctx *c)
{
    weft_error err = {0};
    json_object *input, *defj = NULL;
    const char *name = c->q->seg[2];
    long version;
    mhd_result r;
    if (query_long(c, "version", 0, 0, 0x7fffffff, &version) || body_json(c, 1, &input))
        return c->res;
    if (input && !json_object_is_type(input, json_type_object)) {
        json_object_put(input);
        return send_error(c, 400, "workflow input must be a JSON object");
    }
    if (registered_def(c->t, name, version, &defj, &err))
        r = send_werr(c, &err);
    else
        r = start_reply(c, defj, name, input, query(c, "correlationId"), NULL);
    json_object_put(defj);
    json_object_put(input);
    return r;
}

/* GET /api/workflow/{id}?includeTasks= */
static mhd_result h_get(ctx *c)
{
    weft_error err = {0};
    xc_exec *x = NULL;
    json_object *j;
    const char *tasks = query(c, "includeTasks");
    if (op_load(&c->t->op, c->q->seg[2], &x, NULL, &err)) return send_werr(c, &err);
    j = xc_to_json(x);
    xc_free(x);
    if (tasks && !strcasecmp(tasks, "false")) json_object_object_del(j, "tasks");
    return send_json(c, 200, j);
}

static mhd_result change(ctx *c, op_fn fn, void *ud)
{
    weft_error err = {0};
    c->t->op.client = 1;
    if (op_update(&c->t->op, c->q->seg[2], fn, ud, &err)) return send_werr(c, &err);
    return send_empty(c, 200);
}

/* terminate, pause, resume: recorded first, so a busy workflow cannot outrun them */
static mhd_result command(ctx *c, op_cmd cmd, const char *reason)
{
    weft_error err = {0};
    c->t->op.client = 1;
    if (op_command(&c->t->op, c->q->seg[2], cmd, reason, &err)) return send_werr(c, &err);
    return send_empty(c, 200);
}

static mhd_result h_terminate(ctx *c)
{
    const char *reason = query(c, "reason");
    return command(c, OP_TERMINATE, reason && *reason ? reason : "terminated through the REST API");
}

static mhd_result h_pause(ctx *c)
{
    return command(c, OP_PAUSE, NULL);
}

static mhd_result h_resume(ctx *c)
{
    return command(c, OP_RESUME, NULL);
}

static mhd_result h_retry(ctx *c)
{
    return change(c, op_fn_retry, NULL);
}

static mhd_result h_restart(ctx *c)
{
    return change(c, op_fn_restart, NULL);
}

/* ---- handlers: the status lane as Server-Sent Events ---- */

typedef struct sse {
    park pk; /* with the waiter while there is nothing to send */
    int64_t gap;
    ap_server *s;
    rs *r; /* its own: the stream outlives the request's handler */
    char id[64];
    char last[RS_EVENT_ID_MAX];  /* where the next read resumes (rs_events' next_id) */
    char entry[RS_EVENT_ID_MAX]; /* the stream entry of the last event sent */
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
    rs_exec x = {0};
    weft_error err = {0};
    weft_wf_status st;
    int rc = rs_exec_load(e->r, e->id, 0, &x, &err), end;
    end = rc == WEFT_ENOTFOUND ||
          (rc == 0 && xc_wf_status_parse(x.status, &st) == 0 && xc_wf_terminal(st));
    rs_exec_clear(&x);
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
        if (e->done || stopping(e->s)) return MHD_CONTENT_READER_END_OF_STREAM;
        n = rs_events(e->r, e->id, e->last, e->last, 0, sse_event, e, &err);
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
    rs_free(e->r);
    wu_buf_free(&e->out);
    free(e);
}

/* GET /api/workflow/{id}/events: history first (after Last-Event-ID), then live. */
static mhd_result h_events(ctx *c)
{
    weft_error err = {0};
    const char *last = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Last-Event-ID");
    struct MHD_Response *resp;
    rs_exec x = {0};
    weft_wf_status st;
    sse *e;
    char entry[RS_EVENT_ID_MAX];
    long long index;
    int ended;
    if (last && rs_event_id_parse(last, entry, &index, &err))
        return send_error(c, 400, "Last-Event-ID: %s", err.msg);
    if (rs_exec_load(c->t->r, c->q->seg[2], 0, &x, &err)) return send_werr(c, &err);
    ended = xc_wf_status_parse(x.status, &st) == 0 && xc_wf_terminal(st);
    rs_exec_clear(&x);
    if (!(e = calloc(1, sizeof *e))) return send_error(c, 500, "out of memory");
    e->s = c->s;
    if (rs_open(&c->s->cfg.store, &e->r, &err) && !e->r) {
        free(e);
        return send_werr(c, &err);
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
        return send_error(c, 500, "out of memory");
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    c->res = MHD_queue_response(c->conn, 200, resp);
    MHD_destroy_response(resp);
    c->q->code = 200;
    return c->res;
}

/* ---- handlers: metadata ---- */

static mhd_result h_defs_list(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    mhd_result r;
    if (rs_def_list(c->t->r, &json, &err)) return send_werr(c, &err);
    r = send_json_text(c, 200, json);
    free(json);
    return r;
}

/* POST /api/metadata/workflow: one WorkflowDef. */
static mhd_result h_def_post(ctx *c)
{
    weft_error err = {0};
    json_object *j;
    int rc;
    if (body_json(c, 0, &j)) return c->res;
    rc = register_def(c->s, c->t, j, &err);
    json_object_put(j);
    return rc ? send_werr(c, &err) : send_empty(c, 200);
}

/* PUT /api/metadata/workflow: a list, all checked before any is stored. */
static mhd_result h_def_put(ctx *c)
{
    weft_error err = {0};
    json_object *j;
    size_t i, n;
    int rc = 0;
    if (body_json(c, 0, &j)) return c->res;
    if (!json_object_is_type(j, json_type_array)) {
        json_object_put(j);
        return send_error(c, 400, "expected a list of WorkflowDef objects");
    }
    n = json_object_array_length(j);
    for (i = 0; i < n && !rc; i++) {
        def_workflow *d = NULL;
        json_object *one = json_object_array_get_idx(j, i);
        if (!json_object_is_type(one, json_type_object))
            rc = wu_err(&err, WEFT_EINVAL, "item %zu: a workflow definition must be a JSON object",
                        i + 1);
        else if ((rc = def_compile(c->s->cfg.defs, one, "workflowDef", NULL, &d, &err)))
            wu_err_prefix(&err, "item %zu: ", i + 1);
        def_unref(d);
    }
    for (i = 0; i < n && !rc; i++)
        rc = register_def(c->s, c->t, json_object_array_get_idx(j, i), &err);
    json_object_put(j);
    return rc ? send_werr(c, &err) : send_empty(c, 200);
}

/* GET /api/metadata/workflow/{name}?version= */
static mhd_result h_def_get(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    long version;
    int got = 0;
    mhd_result r;
    if (query_long(c, "version", 0, 0, 0x7fffffff, &version)) return c->res;
    if (rs_def_get(c->t->r, c->q->seg[3], (int)version, &json, &got, &err))
        return send_werr(c, &err);
    r = send_json_text(c, 200, json);
    free(json);
    return r;
}

static int put_taskdef(ap_server *s, tls *t, json_object *td, weft_error *err)
{
    json_object *v;
    json_object_object_get_ex(td, "name", &v);
    return rs_taskdef_put(t->r, json_object_get_string(v),
                          json_object_to_json_string_ext(td, JSON_C_TO_STRING_PLAIN), err);
}

/* POST /api/metadata/taskdefs: a list of TaskDef (PUT: one). */
static mhd_result taskdefs(ctx *c, int list)
{
    weft_error err = {0};
    json_object *j;
    size_t i, n;
    int rc = 0;
    if (body_json(c, 0, &j)) return c->res;
    if (list && !json_object_is_type(j, json_type_array)) {
        json_object_put(j);
        return send_error(c, 400, "expected a list of TaskDef objects");
    }
    n = list ? json_object_array_length(j) : 1;
    for (i = 0; i < n && !rc; i++)
        if ((rc = check_taskdef(c->s, list ? json_object_array_get_idx(j, i) : j, &err)) && list)
            wu_err_prefix(&err, "item %zu: ", i + 1);
    for (i = 0; i < n && !rc; i++)
        rc = put_taskdef(c->s, c->t, list ? json_object_array_get_idx(j, i) : j, &err);
    json_object_put(j);
    return rc ? send_werr(c, &err) : send_empty(c, 200);
}

static mhd_result h_taskdefs_post(ctx *c)
{
    return taskdefs(c, 1);
}

static mhd_result h_taskdefs_put(ctx *c)
{
    return taskdefs(c, 0);
}

static mhd_result h_taskdefs_list(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    mhd_result r;
    if (rs_taskdef_list(c->t->r, &json, &err)) return send_werr(c, &err);
    r = send_json_text(c, 200, json);
    free(json);
    return r;
}

static mhd_result h_taskdef_get(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    mhd_result r;
    if (rs_taskdef_get(c->t->r, c->q->seg[3], &json, &err)) return send_werr(c, &err);
    r = send_json_text(c, 200, json);
    free(json);
    return r;
}

/* ---- handlers: external workers ---- */

/* GET /api/tasks/poll/{name}?workerid=: 200 with a Task, or 204. */
static mhd_result h_poll(ctx *c)
{
    weft_error err = {0};
    json_object *arr = json_object_new_array();
    int n = take(c->s, c->t, c->q->seg[3], 1, query(c, "workerid"), arr, &err);
    mhd_result r;
    if (n < 0)
        r = send_werr(c, &err);
    else if (n == 0)
        r = send_empty(c, 204);
    else
        r = send_json(c, 200, json_object_get(json_object_array_get_idx(arr, 0)));
    json_object_put(arr);
    return r;
}

static mhd_result poll_reply(ctx *c, longpoll *lp)
{
    if (lp->failed) return send_werr(c, &lp->err);
    return send_json(c, 200, json_object_get(lp->arr));
}

/* The waiter's turn at a parked batch poll: 1 when it has its answer. */
static int poll_again(ap_server *s, park *p)
{
    longpoll *lp = (longpoll *)p;
    tls *t = tls_get(s);
    int64_t left;
    int n;
    if (!t) return 1;
    n = take(s, t, lp->queue, lp->count - lp->got, lp->worker, lp->arr, &lp->err);
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
static mhd_result h_poll_batch(ctx *c)
{
    longpoll *lp = c->q->lp;
    long count, timeout;
    int n;
    if (lp) return poll_reply(c, lp); /* resumed by the waiter */
    if (query_long(c, "count", 1, 1, 1000000, &count) ||
        query_long(c, "timeout", 100, 0, 1000000000L, &timeout))
        return c->res;
    if (count > POLL_MAX) count = POLL_MAX;
    if (timeout > LONG_POLL_MAX_MS) timeout = LONG_POLL_MAX_MS;
    if (!(lp = calloc(1, sizeof *lp)) || !(lp->arr = json_object_new_array())) {
        free(lp);
        return send_error(c, 500, "out of memory");
    }
    c->q->lp = lp;
    lp->queue = c->q->seg[4];
    lp->worker = query(c, "workerid");
    lp->count = (int)count;
    n = take(c->s, c->t, lp->queue, lp->count, lp->worker, lp->arr, &lp->err);
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

static mhd_result result_reply(ctx *c, const char *wfid, result_args *a)
{
    weft_error err = {0};
    if (apply_result(c->s, c->t, wfid, a, &err)) return send_werr(c, &err);
    return send_text(c, 200, a->found_id);
}

/* POST /api/tasks: a TaskResult. */
static mhd_result h_result(ctx *c)
{
    json_object *body, *v;
    const char *wfid, *status;
    result_args a = {0};
    mhd_result r;
    if (body_json(c, 0, &body)) return c->res;
    if (!json_object_is_type(body, json_type_object)) {
        json_object_put(body);
        return send_error(c, 400, "expected a TaskResult object");
    }
    a.callback_ms = -1;
    if (member_str(c, body, "workflowInstanceId", &wfid) ||
        member_str(c, body, "taskId", &a.task_id) || member_str(c, body, "status", &status) ||
        member_obj(c, body, "outputData", &a.output) ||
        member_str(c, body, "reasonForIncompletion", &a.reason) ||
        member_str(c, body, "workerId", &a.worker))
        goto out;
    if (!wfid || !*wfid || !a.task_id || !*a.task_id) {
        send_error(c, 400, "a TaskResult needs workflowInstanceId and taskId");
        goto out;
    }
    if (task_status_of(status, &a.status)) {
        send_error(c, 400,
                   "status must be IN_PROGRESS, COMPLETED, FAILED or FAILED_WITH_TERMINAL_ERROR");
        goto out;
    }
    if (json_object_object_get_ex(body, "callbackAfterSeconds", &v) && v) {
        double s;
        if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) {
            send_error(c, 400, "callbackAfterSeconds must be a number");
            goto out;
        }
        s = json_object_get_double(v);
        if (s < 0 || s > 365.0 * 24 * 3600) {
            send_error(c, 400, "callbackAfterSeconds must be between 0 and a year");
            goto out;
        }
        a.callback_ms = (int64_t)(s * 1000);
    }
    /* the reason is cut at REASON_MAX when applied, after its secrets are masked */
    result_reply(c, wfid, &a);
out:
    r = c->res;
    json_object_put(body);
    return r;
}

/* POST /api/tasks/{wfId}/{taskRef}/{status}?workerid=&reason=: the body is the output. */
static mhd_result h_by_ref(ctx *c)
{
    json_object *out;
    result_args a = {0};
    mhd_result r;
    if (task_status_of(c->q->seg[4], &a.status))
        return send_error(c, 400,
                          "status %s: use COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR "
                          "or IN_PROGRESS",
                          c->q->seg[4]);
    if (body_json(c, 1, &out)) return c->res;
    if (out && !json_object_is_type(out, json_type_object)) {
        json_object_put(out);
        return send_error(c, 400, "the output must be a JSON object");
    }
    a.ref = c->q->seg[3];
    a.output = out;
    a.worker = query(c, "workerid");
    a.reason = query(c, "reason");
    a.callback_ms = -1;
    if (!a.reason && a.status != WEFT_TASK_COMPLETED && a.status != WEFT_TASK_IN_PROGRESS)
        a.reason = "failed through the REST API";
    r = result_reply(c, c->q->seg[2], &a);
    json_object_put(out);
    return r;
}

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

/* GET /api/tasks/queue/sizes?taskType=a&taskType=b: {"a": n, ...} (ready + leased). */
static mhd_result h_queue_sizes(ctx *c)
{
    names ns = {{0}, 0};
    json_object *j = json_object_new_object();
    int i;
    MHD_get_connection_values(c->conn, MHD_GET_ARGUMENT_KIND, each_task_type, &ns);
    for (i = 0; i < ns.n; i++) {
        weft_error err = {0};
        long long ready = 0, leased = 0;
        if (rs_queue_sizes(c->t->r, ns.v[i], &ready, &leased, &err)) {
            json_object_put(j);
            return send_werr(c, &err);
        }
        json_object_object_add(j, ns.v[i], json_object_new_int64(ready + leased));
    }
    return send_json(c, 200, j);
}

/* ---- routing ---- */

enum { M_GET, M_POST, M_PUT, M_DELETE, M_COUNT };
static const char *const method_names[M_COUNT] = {"GET", "POST", "PUT", "DELETE"};

typedef struct route {
    const char *pattern; /* segments; "*" matches any one */
    handler h[M_COUNT];
} route;

/* First match wins: literal routes before the ones with wildcards at the same place. */
static mhd_result h_token(ctx *c);

static const route routes[] = {
    {"health", {h_health, NULL, NULL, NULL}},
    {"metrics", {h_metrics, NULL, NULL, NULL}},
    {"api/workflow", {NULL, h_start, NULL, NULL}},
    {"api/workflow/*", {h_get, h_start_name, NULL, h_terminate}},
    {"api/workflow/*/pause", {NULL, NULL, h_pause, NULL}},
    {"api/workflow/*/resume", {NULL, NULL, h_resume, NULL}},
    {"api/workflow/*/retry", {NULL, h_retry, NULL, NULL}},
    {"api/workflow/*/restart", {NULL, h_restart, NULL, NULL}},
    {"api/workflow/*/events", {h_events, NULL, NULL, NULL}},
    {"api/metadata/workflow", {h_defs_list, h_def_post, h_def_put, NULL}},
    {"api/metadata/workflow/*", {h_def_get, NULL, NULL, NULL}},
    {"api/metadata/taskdefs", {h_taskdefs_list, h_taskdefs_post, h_taskdefs_put, NULL}},
    {"api/metadata/taskdefs/*", {h_taskdef_get, NULL, NULL, NULL}},
    {"api/tasks", {NULL, h_result, NULL, NULL}},
    {"api/tasks/queue/sizes", {h_queue_sizes, NULL, NULL, NULL}},
    {"api/tasks/poll/batch/*", {h_poll_batch, NULL, NULL, NULL}},
    {"api/tasks/poll/*", {h_poll, NULL, NULL, NULL}},
    {"api/tasks/*/*/*", {NULL, h_by_ref, NULL, NULL}},
    {"api/token", {NULL, h_token, NULL, NULL}},
};

static int matches(const char *pattern, const char *const *seg, int nseg)
{
    int i = 0;
    const char *p = pattern;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (i >= nseg) return 0;
        if (!(n == 1 && *p == '*') && (strlen(seg[i]) != n || strncmp(seg[i], p, n))) return 0;
        i++;
        p += n;
        if (*p == '/') p++;
    }
    return i == nseg;
}

static const route *route_of(const req *q)
{
    size_t i;
    for (i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (matches(routes[i].pattern, q->seg, q->nseg)) return &routes[i];
    return NULL;
}

/* Split the path at '/' (empty segments dropped); more than SEGS_MAX: no route. */
static int split(req *q, const char *url)
{
    char *p, *save = NULL, *tok;
    if (!(q->path = strdup(url))) return -1;
    for (p = q->path; (tok = strtok_r(p, "/", &save)); p = NULL) {
        if (q->nseg == SEGS_MAX) {
            q->nseg = SEGS_MAX + 1;
            break;
        }
        q->seg[q->nseg++] = tok;
    }
    return 0;
}

/* Constant-time: how long the comparison takes says nothing of the token. */
static int same_secret(const char *tok, const char *h)
{
    size_t lt = strlen(tok), lh = strlen(h), i;
    unsigned diff = lt != lh;
    for (i = 0; i < lt; i++)
        diff |= (unsigned)(unsigned char)tok[i] ^ (unsigned)(unsigned char)(i < lh ? h[i] : 0);
    return diff == 0;
}

/* "Authorization: Bearer <token>", or Conductor's "X-Authorization: <token>"
 * (what its client SDKs send after POST /api/token). */
static int authorized(const ap_server *s, struct MHD_Connection *conn)
{
    const char *tok = s->cfg.token, *h;
    if (!tok || !*tok) return 1;
    h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Authorization");
    if (h && same_secret(tok, h)) return 1;
    h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    for (h += 7; *h == ' '; h++)
        ;
    return same_secret(tok, h);
}

/* POST /api/token {keyId, keySecret}: Conductor's SDKs trade a key for a token
 * here. The secret is the API token; the answer is the token to send. */
static mhd_result h_token(ctx *c)
{
    json_object *j, *secret, *out;
    const char *tok = c->s->cfg.token;
    mhd_result r;
    if (body_json(c, 0, &j)) return c->res;
    if (tok && *tok &&
        !(json_object_object_get_ex(j, "keySecret", &secret) &&
          json_object_is_type(secret, json_type_string) &&
          same_secret(tok, json_object_get_string(secret)))) {
        json_object_put(j);
        return send_error(c, 401, "keySecret does not match the API token");
    }
    json_object_put(j);
    out = json_object_new_object();
    json_object_object_add(out, "token", json_object_new_string(tok ? tok : ""));
    r = send_json(c, 200, out); /* takes out */
    return r;
}

/* The first call for a request: route, auth and size, answered at once when wrong. */
static mhd_result begin(ctx *c, const char *url, const char *method)
{
    req *q = c->q;
    const char *len;
    int m;
    conn_rec *cr = conn_of(c->conn);
    if (split(q, url)) {
        q->close = 1;
        return send_error(c, 500, "out of memory");
    }
    if (cr && cr->over) {
        q->close = 1;
        if (cr->over == 1)
            return send_error(c, 503,
                              "too many connections: %d are open (api_max_connections); try again",
                              c->s->cfg.max_conns);
        return send_error(c, 503,
                          "too many connections from %s: at most %d (api_max_connections_per_ip); "
                          "try again",
                          cr->ip, c->s->cfg.max_conns_per_ip);
    }
    if (cr && cr->nul)
        return send_error(c, 400,
                          "the URL holds a NUL byte (%%00) in its path or query: names and ids "
                          "cannot hold one");
    if (q->nseg >= 1 && !strcmp(q->seg[0], "api") &&
        !(q->nseg == 2 && !strcmp(q->seg[1], "token")) && !authorized(c->s, c->conn))
        return send_error_h(c, 401, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"weft\"",
                            "missing or wrong bearer token (Authorization: Bearer <token>)");
    if (q->nseg > SEGS_MAX || !(q->route = route_of(q)))
        return send_error(c, 404, "no such resource: %s", url);
    for (m = 0; m < M_COUNT; m++)
        if (!strcmp(method, method_names[m])) break;
    if (m == M_COUNT || !q->route->h[m]) {
        char allow[64] = "";
        int k;
        for (k = 0; k < M_COUNT; k++)
            if (q->route->h[k])
                snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s",
                         allow[0] ? ", " : "", method_names[k]);
        return send_error_h(c, 405, MHD_HTTP_HEADER_ALLOW, allow,
                            "%s is not allowed on %s (allowed: %s)", method, url, allow);
    }
    q->m = m;
    len = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (len && strtoull(len, NULL, 10) > (unsigned long long)c->s->cfg.body_limit)
        return send_error(
            c, 413, "request body of %s bytes is over the limit of %lld bytes (api_body_limit)",
            len, (long long)c->s->cfg.body_limit);
    return MHD_YES;
}

static mhd_result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_size, void **con_cls)
{
    ap_server *s = cls;
    req *q = *con_cls;
    conn_rec *cr;
    ctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.conn = conn;
    c.res = MHD_YES;
    if (!q) {
        if (!(q = calloc(1, sizeof *q))) return MHD_NO; /* libmicrohttpd answers 500 */
        *con_cls = q;
        q->t0 = wu_mono_ms();
        snprintf(q->method, sizeof q->method, "%s", method);
        snprintf(q->url, sizeof q->url, "%s", url);
        c.q = q;
        return begin(&c, url, method);
    }
    c.q = q;
    if (*upload_size) {
        /* past the limit the rest is read and dropped, then answered 413 */
        if (!q->code && !q->too_big) {
            if (q->body.len + *upload_size > (size_t)s->cfg.body_limit) {
                q->too_big = 1;
                wu_buf_free(&q->body);
            } else if (wu_buf_add(&q->body, upload, *upload_size)) {
                q->oom = 1;
                q->too_big = 1;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (q->code) return MHD_YES; /* answered at the first call */
    if (q->oom) return send_error(&c, 500, "out of memory");
    if (q->too_big)
        return send_error(&c, 413, "request body is over the limit of %lld bytes (api_body_limit)",
                          (long long)s->cfg.body_limit);
    c.t = tls_get(s);
    if (!c.t && q->route->h[q->m] != h_health) return send_error(&c, 500, "out of memory");
    /* a connection Redis closed (it restarted) is replaced before it fails the request */
    if (c.t && !q->lp) rs_revive(c.t->r);
    if ((cr = conn_of(conn)) != NULL) __atomic_store_n(&cr->busy, 1, __ATOMIC_RELEASE);
    return q->route->h[q->m](&c);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    ap_server *s = cls;
    req *q = *con_cls;
    conn_rec *cr = conn_of(conn);
    if (cr) {
        /* the request timeout counts again, for the next request */
        pthread_mutex_lock(&s->mu);
        cr->since = wu_mono_ms();
        cr->busy = 0;
        cr->nul = 0;
        pthread_mutex_unlock(&s->mu);
    }
    if (!q) return;
    if (q->code) {
        say(s, q->code >= 500 ? WEFT_LOG_WARN : WEFT_LOG_DEBUG,
            "api method=%s path=%s status=%d ms=%lld%s%s%s", q->method, q->url, q->code,
            (long long)(wu_mono_ms() - q->t0),
            toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)",
            q->why[0] ? " error=" : "", q->why);
        mt_api_request(s->cfg.metrics, q->code);
    }
    if (q->lp) json_object_put(q->lp->arr);
    free(q->lp);
    wu_buf_free(&q->body);
    free(q->path);
    free(q);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    ap_server *s = cls;
    char msg[256];
    size_t n;
    vsnprintf(msg, sizeof msg, fmt, ap);
    n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    snprintf(s->mhd_msg, sizeof s->mhd_msg, "%s", msg);
    say(s, WEFT_LOG_DEBUG, "api: libmicrohttpd: %s", msg);
}

/* ---- connections: limits and the request timeout ---- */

static conn_rec *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static int same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family) return 0;
    if (a->ss_family == AF_INET)
        return !memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                       &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr));
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return 1;
}

/*
 * libmicrohttpd accepts up to a quarter more connections (and per address)
 * than the limits, so that one past a limit is answered 503 rather than
 * closed unanswered; past that margin it closes them at once.
 */
static unsigned with_margin(int n)
{
    long long m = (long long)n + n / 4 + 8;
    return m > 1000000 ? 1000000U : (unsigned)m;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    ap_server *s = cls;
    conn_rec *cr = *socket_context, *o;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        int same = 0;
        if (!(cr = calloc(1, sizeof *cr))) return; /* untracked: no limits, no timeout */
        cr->fd = fd ? fd->connect_fd : -1;
        if (ad && ad->client_addr) {
            const struct sockaddr *sa = ad->client_addr;
            if (sa->sa_family == AF_INET6) {
                memcpy(&cr->addr, sa, sizeof(struct sockaddr_in6));
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, cr->ip,
                          sizeof cr->ip);
            } else if (sa->sa_family == AF_INET) {
                memcpy(&cr->addr, sa, sizeof(struct sockaddr_in));
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, cr->ip,
                          sizeof cr->ip);
            }
        }
        cr->since = wu_mono_ms();
        pthread_mutex_lock(&s->mu);
        for (o = s->conns; o && s->cfg.max_conns_per_ip > 0; o = o->next)
            same += same_addr(&o->addr, &cr->addr);
        if (s->nconns >= s->cfg.max_conns)
            cr->over = 1;
        else if (s->cfg.max_conns_per_ip > 0 && same >= s->cfg.max_conns_per_ip)
            cr->over = 2;
        cr->next = s->conns;
        if (s->conns) s->conns->prev = cr;
        s->conns = cr;
        s->nconns++;
        pthread_mutex_unlock(&s->mu);
        *socket_context = cr;
        return;
    }
    if (!cr) return;
    /* libmicrohttpd closes the socket after this returns: the waiter, which
     * shuts down slow ones under mu, never touches a reused descriptor */
    pthread_mutex_lock(&s->mu);
    if (cr->prev)
        cr->prev->next = cr->next;
    else
        s->conns = cr->next;
    if (cr->next) cr->next->prev = cr->prev;
    s->nconns--;
    pthread_mutex_unlock(&s->mu);
    free(cr);
    *socket_context = NULL;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/*
 * Percent-decoding of the URL path and query arguments, in place. %00
 * would end the C string there, so that "/api/workflow/abc%00def" read as
 * "abc": it is noted on the connection instead (begin answers 400) and
 * left encoded.
 */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *str)
{
    char *r = str, *w = str;
    (void)cls;
    while (*r) {
        int hi, lo;
        if (*r == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0) {
            if (hi == 0 && lo == 0) {
                conn_rec *cr = conn_of(conn);
                if (cr) cr->nul = 1;
                *w++ = *r++;
                continue;
            }
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
    return (size_t)(w - str);
}

/* Drop connections whose request has not arrived whole in time: shutdown
 * makes libmicrohttpd see the end of the stream and close it. */
static void drop_slow(ap_server *s)
{
    int64_t now = wu_mono_ms();
    conn_rec *cr;
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (cr = s->conns; cr; cr = cr->next)
        if (!__atomic_load_n(&cr->busy, __ATOMIC_ACQUIRE) && !cr->dropped && cr->fd >= 0 &&
            now - cr->since >= s->cfg.request_timeout_ms) {
            shutdown(cr->fd, SHUT_RDWR);
            cr->dropped = 1;
            n++;
        }
    pthread_mutex_unlock(&s->mu);
    if (n) {
        mt_api_slow_dropped(s->cfg.metrics, n);
        say(s, WEFT_LOG_DEBUG,
            "api: dropped %d connection(s) whose request did not arrive within %lld ms "
            "(api_request_timeout)",
            n, (long long)s->cfg.request_timeout_ms);
    }
}

/* ---- the waiter: parked long polls and event streams ---- */

/* Suspend p->conn and hand it to the waiter; -1 when stopping (not parked:
 * the caller answers now). Called from a handler or a content reader. */
static int park_add(ap_server *s, park *p)
{
    pthread_mutex_lock(&s->pmu);
    if (stopping(s)) {
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

static void *waiter_main(void *arg)
{
    ap_server *s = arg;
    int64_t reaped = 0;
    pthread_mutex_lock(&s->pmu);
    for (;;) {
        int64_t now = wu_mono_ms(), next = now + REAP_EVERY_MS;
        int stop = stopping(s);
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
            drop_slow(s);
            reaped = wu_mono_ms();
        }
        pthread_mutex_lock(&s->pmu);
        if (stop && !s->parked) break;
        if (!stopping(s) && !s->kicked && next > wu_mono_ms()) {
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

/* ---- the server ---- */

/* Bind and listen on "HOST:PORT"; the address bound goes to shown. */
static int listen_on(const char *spec, char *shown, size_t n, weft_error *err)
{
    char host[256], port[16], ip[INET6_ADDRSTRLEN];
    const char *colon = spec ? strrchr(spec, ':') : NULL;
    struct addrinfo hints, *ai = NULL;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    size_t hl;
    int fd, one = 1, rc;
    if (!colon || colon == spec || !colon[1] || strlen(colon + 1) >= sizeof port ||
        strspn(colon + 1, "0123456789") != strlen(colon + 1) || atol(colon + 1) > 65535)
        return wu_err(err, WEFT_EINVAL,
                      "api_listen \"%s\": expected HOST:PORT, e.g. 127.0.0.1:8080",
                      spec ? spec : "");
    hl = (size_t)(colon - spec);
    if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') spec++, hl -= 2;
    if (hl >= sizeof host) return wu_err(err, WEFT_EINVAL, "api_listen: host name too long");
    memcpy(host, spec, hl);
    host[hl] = 0;
    snprintf(port, sizeof port, "%s", colon + 1);
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0)
        return wu_err(err, WEFT_EINVAL, "api_listen %s:%s: %s", host, port, gai_strerror(rc));
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128) ||
        getsockname(fd, (struct sockaddr *)&sa, &sl)) {
        rc = wu_err(err, errno == EADDRINUSE ? WEFT_EEXIST : WEFT_EIO, "api_listen %s:%s: %s", host,
                    port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return rc;
    }
    freeaddrinfo(ai);
    if (sa.ss_family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&sa;
        inet_ntop(AF_INET6, &a6->sin6_addr, ip, sizeof ip);
        snprintf(shown, n, "[%s]:%u", ip, ntohs(a6->sin6_port));
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&sa;
        inet_ntop(AF_INET, &a4->sin_addr, ip, sizeof ip);
        snprintf(shown, n, "%s:%u", ip, ntohs(a4->sin_port));
    }
    return fd;
}

int ap_start(const ap_config *cfg, ap_server **out, weft_error *err)
{
    ap_server *s;
    int fd;
    *out = NULL;
    if (cfg->body_limit <= 0) return wu_err(err, WEFT_EINVAL, "api_body_limit must be positive");
    if (cfg->threads < 0 || cfg->threads > API_THREADS_MAX)
        return wu_err(err, WEFT_EINVAL, "api_threads %d: expected 1 to %d", cfg->threads,
                      API_THREADS_MAX);
    if (cfg->max_conns < 0 || cfg->max_conns_per_ip < 0 || cfg->request_timeout_ms < 0 ||
        cfg->idle_timeout_ms < 0)
        return wu_err(err, WEFT_EINVAL,
                      "api_max_connections, api_max_connections_per_ip, api_request_timeout and "
                      "api_idle_timeout cannot be negative");
    if (!(s = calloc(1, sizeof *s))) return wu_err(err, WEFT_ENOMEM, "out of memory");
    s->cfg = *cfg;
    if (!s->cfg.threads) s->cfg.threads = API_THREADS;
    if (!s->cfg.max_conns) s->cfg.max_conns = API_CONNS;
    if (!s->cfg.request_timeout_ms) s->cfg.request_timeout_ms = API_REQUEST_MS;
    if (!s->cfg.idle_timeout_ms) s->cfg.idle_timeout_ms = API_IDLE_MS;
    s->hooks.ud = s;
    s->hooks.ended = api_ended;
    s->hooks.note = api_note;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->pmu, NULL);
    pthread_cond_init(&s->pcond, NULL);
    if (!(s->leases = wu_map_new()) || pthread_key_create(&s->key, tls_release)) {
        ap_stop(s);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    s->key_made = 1;
    if ((fd = listen_on(cfg->listen, s->address, sizeof s->address, err)) < 0) {
        ap_stop(s);
        return fd;
    }
    if (pthread_create(&s->waiter, NULL, waiter_main, s)) {
        close(fd);
        ap_stop(s);
        return wu_err(err, WEFT_ENOMEM, "REST API: cannot start a thread");
    }
    s->waiter_made = 1;
    {
        /* a pool of epoll loops; suspend/resume lets long polls and event
         * streams wait off them (MHD_ALLOW_SUSPEND_RESUME brings the
         * inter-thread channel that wakes a loop for a resumed connection) */
        struct MHD_OptionItem o[12];
        size_t k = 0;
#define OPT(opt, v, p) (o[k].option = (opt), o[k].value = (intptr_t)(v), o[k++].ptr_value = (p))
        OPT(MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s);
        OPT(MHD_OPTION_LISTEN_SOCKET, fd, NULL);
        OPT(MHD_OPTION_CONNECTION_LIMIT, with_margin(s->cfg.max_conns), NULL);
        OPT(MHD_OPTION_CONNECTION_TIMEOUT, (s->cfg.idle_timeout_ms + 999) / 1000, NULL);
        OPT(MHD_OPTION_NOTIFY_COMPLETED, on_completed, s);
        OPT(MHD_OPTION_NOTIFY_CONNECTION, on_connection, s);
        OPT(MHD_OPTION_UNESCAPE_CALLBACK, unescape, s);
        if (s->cfg.threads > 1) OPT(MHD_OPTION_THREAD_POOL_SIZE, s->cfg.threads, NULL);
        if (s->cfg.max_conns_per_ip > 0)
            OPT(MHD_OPTION_PER_IP_CONNECTION_LIMIT, with_margin(s->cfg.max_conns_per_ip), NULL);
        OPT(MHD_OPTION_END, 0, NULL);
#undef OPT
        s->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_INTERNAL_POLLING_THREAD |
                                    MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                                0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, o, MHD_OPTION_END);
    }
    if (!s->d) {
        close(fd);
        wu_err(err, WEFT_EIO, "REST API on %s: libmicrohttpd would not start%s%s", s->address,
               s->mhd_msg[0] ? ": " : "", s->mhd_msg);
        ap_stop(s);
        return WEFT_EIO;
    }
    *out = s;
    return 0;
}

const char *ap_address(const ap_server *s)
{
    return s->address;
}

void ap_stop(ap_server *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->pmu);
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&s->pcond);
    pthread_mutex_unlock(&s->pmu);
    /* the waiter resumes every parked connection before it ends: stopping
     * libmicrohttpd with suspended ones is not allowed */
    if (s->waiter_made) pthread_join(s->waiter, NULL);
    if (s->d) MHD_stop_daemon(s->d); /* joins the pool threads: their state is freed */
    if (s->key_made) pthread_key_delete(s->key);
    wu_map_free(s->leases);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->pmu);
    pthread_cond_destroy(&s->pcond);
    free(s);
}

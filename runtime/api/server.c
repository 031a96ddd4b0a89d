/*
 * The REST API's server: per-thread state, replies and errors, request
 * parts, the routing table, auth and body limits, connection limits and
 * the request timeout, start and stop. The handlers live by concern in
 * workflow.c, metadata.c, tasks.c, events.c and health.c.
 */
#include "api/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define API_THREADS 16 /* the pool, when the config says 0 */
#define API_THREADS_MAX 1024
#define API_CONNS 512        /* connections served, when the config says 0 */
#define API_REQUEST_MS 60000 /* a whole request must arrive within this (config 0) */
#define API_IDLE_MS 30000    /* a connection silent this long is closed (config 0) */
#define AUTH_CHALLENGE "Bearer realm=\"weft\"" /* what a 401 answers in WWW-Authenticate */

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
    int utf8; /* ... or bytes that are not UTF-8, once decoded */
    int over; /* past a limit when it came: 1 the total, 2 its address's */
};

static conn_rec *conn_of(struct MHD_Connection *conn);

int ap_stopping(const ap_server *s)
{
    return __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE);
}

void ap_log(ap_server *s, int level, const lg_field *fields, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    if (!s->cfg.log) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->cfg.log(s->cfg.log_ud, level, fields, msg);
}

/* ---- per-thread state ---- */

static void tls_free(tls *t)
{
    if (!t) return;
    st_free(t->st);
    dc_free(t->cache);
    free(t);
}

/* A thread ended (the pool and the waiter end when the server stops). */
static void tls_release(void *p)
{
    tls_free(p);
}

/* Counted; what follows an end here (the parent's decider woken, as the
 * effects do where cascades are not followed: op_env.cascade 0) is the
 * effects' (core/effects.c). */
static void api_ended(void *ud, const xc_exec *x)
{
    mt_workflow_ended(((ap_server *)ud)->cfg.metrics, x->def ? x->def->name : NULL,
                      weft_wf_status_name(x->status), xc_run_seconds(x));
}

static void api_started(void *ud, const xc_exec *x)
{
    mt_workflow_started(((ap_server *)ud)->cfg.metrics);
}

int ap_open_store(ap_server *s, dc_cache *cache, st_store **out, weft_error *err)
{
    st_redis_opts o = {0};
    if (s->cfg.open_store) return s->cfg.open_store(s->cfg.open_store_ud, out, err);
    o.rs = s->cfg.store;
    o.defs = s->cfg.defs;
    o.cache = cache;
    o.ps = s->cfg.payloads;
    return st_redis_open(&o, out, err);
}

static void api_note(void *ud, int level, const lg_field *fields, const char *msg)
{
    ap_log(ud, level, fields, "%s", msg);
}

/* This thread's state, made on first use. A Redis that cannot be reached
 * is no error here: each call tries to connect again. */
tls *ap_tls_get(ap_server *s)
{
    tls *t = pthread_getspecific(s->key);
    weft_error err = {0};
    if (t) return t;
    if (!(t = calloc(1, sizeof *t))) return NULL;
    t->s = s;
    if (!(t->cache = dc_new()) || (ap_open_store(s, t->cache, &t->st, &err) && !t->st)) {
        ap_say(s, WEFT_LOG_ERROR, "api: %s", err.msg[0] ? err.msg : "out of memory");
        tls_free(t);
        return NULL;
    }
    t->dec.defs = s->cfg.defs;
    t->dec.now = wu_now_ms;
    t->dec.domain_active = op_domain_active;
    t->op.domains.st = t->st;
    t->dec.domain_ud = &t->op.domains;
    t->op.st = t->st;
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
    t->op.client = 1;
    t->op.hooks = &s->hooks;
    if (pthread_setspecific(s->key, t)) {
        tls_free(t);
        return NULL;
    }
    return t;
}

/* ---- responses ---- */

mhd_result ap_send_raw(ctx *c, int code, const char *type, const char *body, size_t len,
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

mhd_result ap_send_text(ctx *c, int code, const char *text)
{
    return ap_send_raw(c, code, "text/plain; charset=utf-8", text, strlen(text), NULL, NULL);
}

mhd_result ap_send_json_text(ctx *c, int code, const char *text)
{
    return ap_send_raw(c, code, "application/json", text, strlen(text), NULL, NULL);
}

/* Takes j. */
mhd_result ap_send_json(ctx *c, int code, json_object *j)
{
    mhd_result r;
    if (!j)
        return ap_send_json_text(
            c, 500, "{\"status\":500,\"message\":\"out of memory\",\"retryable\":true}");
    r = ap_send_json_text(c, code, json_object_to_json_string_ext(j, JSON_FLAGS));
    json_object_put(j);
    return r;
}

mhd_result ap_send_empty(ctx *c, int code)
{
    return ap_send_raw(c, code, NULL, "", 0, NULL, NULL);
}

/* in as valid UTF-8 into out (cap bytes), by wu_utf8's rule: a message
 * that quotes the request stays valid JSON and still shows what was sent. */
static void utf8_clean(char *out, size_t cap, const char *in)
{
    wu_utf8_copy(out, cap, in, strlen(in));
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
    r = ap_send_raw(c, code, "application/json", text, strlen(text), hname, hvalue);
    json_object_put(j);
    return r;
}

mhd_result ap_send_error(ctx *c, int code, const char *fmt, ...)
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

mhd_result ap_send_werr(ctx *c, const weft_error *err)
{
    return ap_send_error(c, http_code(err->code), "%s", err->msg[0] ? err->msg : "failed");
}

/* ---- request parts ---- */

const char *ap_query(ctx *c, const char *name)
{
    return MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* An integer query argument in [min, max]; absent = def. -1 after answering 400. */
int ap_query_long(ctx *c, const char *name, long def, long min, long max, long *out)
{
    const char *v = ap_query(c, name);
    char *end;
    long n;
    *out = def;
    if (!v || !*v) return 0;
    errno = 0;
    n = strtol(v, &end, 10);
    if (*end || errno || n < min || n > max) {
        ap_send_error(c, 400, "query argument %s: expected a whole number from %ld to %ld", name,
                      min, max);
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
int ap_refuse_nul_names(ctx *c, const char *what, json_object *j)
{
    const char *where = NULL;
    if (!nul_in_names(j, NULL, &where, 0)) return 0;
    ap_send_error(c, 400, "%s: %s holds a NUL byte (\\u0000): names and ids cannot hold one", what,
                  where);
    return -1;
}

/* The request body as text (NULL when empty). -1 after answering 400: it
 * holds a NUL, or invalid UTF-8 (with its place). */
int ap_body_text(ctx *c, const char **text)
{
    const wu_buf *b = &c->q->body;
    size_t i, k, line = 1, col = 1;
    *text = NULL;
    if (!b->len) return 0;
    if (memchr(b->data, 0, b->len)) {
        ap_send_error(c, 400, "request body: holds a NUL byte");
        return -1;
    }
    /* JSON is UTF-8 (RFC 8259): what is stored and echoed must be too */
    for (i = 0; i < b->len; i += k, col++) {
        if (!(k = wu_utf8_seq((const unsigned char *)b->data + i, b->len - i))) {
            ap_send_error(c, 400,
                          "request body: invalid UTF-8 at line %zu, column %zu (byte 0x%02x)", line,
                          col, (unsigned char)b->data[i]);
            return -1;
        }
        if (b->data[i] == '\n') line++, col = 0;
    }
    *text = b->data;
    return 0;
}

/* The request body as JSON. An empty body gives NULL when empty_ok, else
 * 400. -1 after answering 400 (the parse error, with its line; invalid
 * UTF-8, with its place; a name holding a NUL). */
int ap_body_json(ctx *c, int empty_ok, json_object **out)
{
    weft_error err = {0};
    const char *text;
    *out = NULL;
    if (ap_body_text(c, &text)) return -1;
    if (!text) {
        if (empty_ok) return 0;
        ap_send_error(c, 400, "request body: expected JSON, got nothing");
        return -1;
    }
    if (wu_parse_json("request body", text, out, &err)) {
        ap_send_error(c, 400, "%s", err.msg);
        return -1;
    }
    if (ap_refuse_nul_names(c, "request body", *out)) {
        json_object_put(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* A string member: NULL when absent or null; -1 after answering 400 when another type. */
int ap_member_str(ctx *c, json_object *o, const char *key, const char **out)
{
    json_object *v;
    *out = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !v) return 0;
    if (!json_object_is_type(v, json_type_string)) {
        ap_send_error(c, 400, "%s must be a string", key);
        return -1;
    }
    *out = json_object_get_string(v);
    return 0;
}

/* An object member: NULL when absent or null; -1 after answering 400 when another type. */
int ap_member_obj(ctx *c, json_object *o, const char *key, json_object **out)
{
    json_object *v;
    *out = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !v) return 0;
    if (!json_object_is_type(v, json_type_object)) {
        ap_send_error(c, 400, "%s must be a JSON object", key);
        return -1;
    }
    *out = v;
    return 0;
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
    {"", {ap_h_ui, NULL, NULL, NULL}},
    {"ui/app.js", {ap_h_ui_js, NULL, NULL, NULL}},
    {"ui/app.css", {ap_h_ui_css, NULL, NULL, NULL}},
    {"api/daemons", {ap_h_daemons, NULL, NULL, NULL}},
    {"health", {ap_h_health, NULL, NULL, NULL}},
    {"ready", {ap_h_ready, NULL, NULL, NULL}},
    {"metrics", {ap_h_metrics, NULL, NULL, NULL}},
    {"api/workflow", {NULL, ap_h_start, NULL, NULL}},
    {"api/workflow/search", {ap_h_search, NULL, NULL, NULL}},
    {"api/workflow/search-v2", {ap_h_search_v2, NULL, NULL, NULL}},
    {"api/workflow/running/*", {ap_h_running, NULL, NULL, NULL}},
    {"api/workflow/*/correlated/*", {ap_h_correlated, NULL, NULL, NULL}},
    {"api/workflow/*", {ap_h_get, ap_h_start_name, NULL, ap_h_terminate}},
    {"api/workflow/*/pause", {NULL, NULL, ap_h_pause, NULL}},
    {"api/workflow/*/resume", {NULL, NULL, ap_h_resume, NULL}},
    {"api/workflow/*/retry", {NULL, ap_h_retry, NULL, NULL}},
    {"api/workflow/*/restart", {NULL, ap_h_restart, NULL, NULL}},
    {"api/workflow/*/events", {ap_h_events, NULL, NULL, NULL}},
    {"api/metadata/workflow", {ap_h_defs_list, ap_h_def_post, ap_h_def_put, NULL}},
    {"api/metadata/workflow/*", {ap_h_def_get, NULL, NULL, NULL}},
    {"api/metadata/taskdefs", {ap_h_taskdefs_list, ap_h_taskdefs_post, ap_h_taskdefs_put, NULL}},
    {"api/metadata/taskdefs/*", {ap_h_taskdef_get, NULL, NULL, NULL}},
    {"api/tasks", {NULL, ap_h_result, NULL, NULL}},
    {"api/tasks/queue/sizes", {ap_h_queue_sizes, NULL, NULL, NULL}},
    {"api/tasks/queue/all", {ap_h_queue_all, NULL, NULL, NULL}},
    {"api/tasks/queue/polldata", {ap_h_polldata, NULL, NULL, NULL}},
    {"api/tasks/queue/polldata/all", {ap_h_polldata_all, NULL, NULL, NULL}},
    {"api/queue/*", {ap_h_queue, NULL, NULL, NULL}},
    {"api/tasks/poll/batch/*", {ap_h_poll_batch, NULL, NULL, NULL}},
    {"api/tasks/poll/*", {ap_h_poll, NULL, NULL, NULL}},
    {"api/tasks/*", {ap_h_task, NULL, NULL, NULL}},
    {"api/tasks/*/log", {ap_h_task_log, ap_h_task_log_post, NULL, NULL}},
    {"api/tasks/*/*/*", {NULL, ap_h_by_ref, NULL, NULL}},
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

/*
 * The first route whose pattern matches q's path and that takes method m
 * (M_COUNT: none does). Into *allowed (bits) the methods of the matching
 * routes that end in a name, not a "*": a path such as /api/workflow/{id}/pause
 * exists whatever the method, while /api/tasks/update-v2 only looks like
 * /api/tasks/{taskId} (a 404 for it, not a 405: Conductor's clients fall
 * back on a 404).
 */
static const route *route_of(const req *q, int m, unsigned *allowed)
{
    size_t i;
    int k;
    *allowed = 0;
    for (i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const char *p = routes[i].pattern, *last = strrchr(p, '/');
        if (!matches(p, q->seg, q->nseg)) continue;
        if (m < M_COUNT && routes[i].h[m]) return &routes[i];
        if (!strcmp(last ? last + 1 : p, "*")) continue;
        for (k = 0; k < M_COUNT; k++)
            if (routes[i].h[k]) *allowed |= 1u << k;
    }
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
    if (ap_body_json(c, 0, &j)) return c->res;
    if (tok && *tok &&
        !(json_object_object_get_ex(j, "keySecret", &secret) &&
          json_object_is_type(secret, json_type_string) &&
          same_secret(tok, json_object_get_string(secret)))) {
        json_object_put(j);
        return send_error_h(c, 401, MHD_HTTP_HEADER_WWW_AUTHENTICATE, AUTH_CHALLENGE,
                            "keySecret does not match the API token");
    }
    json_object_put(j);
    out = json_object_new_object();
    json_object_object_add(out, "token", json_object_new_string(tok ? tok : ""));
    r = ap_send_json(c, 200, out); /* takes out */
    return r;
}

/* ---- browsers on other sites ---- */

/* The host of a Host header or an origin's "host[:port]" (n bytes): where
 * the name starts and how long it is, without the port or IPv6 brackets. */
static void host_name(const char *h, size_t n, const char **name, size_t *len)
{
    const char *colon;
    if (n && h[0] == '[') {
        const char *end = memchr(h, ']', n);
        *name = h + 1;
        *len = end ? (size_t)(end - h - 1) : n - 1;
        return;
    }
    colon = memchr(h, ':', n);
    *name = h;
    *len = colon ? (size_t)(colon - h) : n;
}

/* 1 when name (len bytes) is an IP address, else 0; loop set when it is a
 * loopback address or "localhost". */
static int host_kind(const char *name, size_t len, int *loop)
{
    char buf[64];
    struct in_addr a4;
    struct in6_addr a6;
    *loop = len == 9 && !strncasecmp(name, "localhost", 9);
    if (len >= sizeof buf) return 0;
    memcpy(buf, name, len);
    buf[len] = 0;
    if (inet_pton(AF_INET, buf, &a4) == 1) return *loop = (ntohl(a4.s_addr) >> 24) == 127, 1;
    if (inet_pton(AF_INET6, buf, &a6) == 1) return *loop = IN6_IS_ADDR_LOOPBACK(&a6), 1;
    return 0;
}

/* Whether api_hosts lists name (len bytes): an entry's host, its port
 * aside, or "*". */
static int host_listed(const ap_server *s, const char *name, size_t len)
{
    size_t i, n;
    const char *e;
    for (i = 0; i < s->cfg.nhosts; i++) {
        if (!strcmp(s->cfg.hosts[i], "*")) return 1;
        host_name(s->cfg.hosts[i], strlen(s->cfg.hosts[i]), &e, &n);
        if (n == len && !strncasecmp(e, name, len)) return 1;
    }
    return 0;
}

/* Whether api_hosts lists the origin's host[:port] exactly ("*" aside). */
static int origin_listed(const ap_server *s, const char *auth)
{
    size_t i;
    for (i = 0; i < s->cfg.nhosts; i++)
        if (strcmp(s->cfg.hosts[i], "*") && !strcasecmp(s->cfg.hosts[i], auth)) return 1;
    return 0;
}

/*
 * A request a browser sends for a page of another site, answered 403 with
 * why in why (else 0). Without a token, a page the operator visits could
 * otherwise start workflows through the API on localhost (cross-site
 * request forgery), or read and drive it through a name of its own that it
 * made resolve to this host (DNS rebinding). So: the Host header must be an
 * IP address, localhost or a name in api_hosts ("*": any), or, with none
 * listed, any name when a token guards the API and it listens where other
 * hosts reach it. And on /api/, a browser's request must come from a page of
 * this server: Sec-Fetch-Site "same-origin" or "none"; an Origin of http or
 * https whose host[:port] is the Host header's or an api_hosts entry. Clients
 * that are not browsers send neither of those two headers.
 */
static int foreign(const ap_server *s, struct MHD_Connection *conn, int api, char *why, size_t size)
{
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    const char *site = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-Fetch-Site");
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    const char *name, *auth = NULL;
    size_t len;
    int loop;
    if (host) {
        host_name(host, strlen(host), &name, &len);
        if (!host_kind(name, len, &loop) && !loop && !host_listed(s, name, len) &&
            (s->cfg.nhosts || s->loopback || !s->cfg.token || !*s->cfg.token)) {
            snprintf(why, size,
                     "Host '%.200s' is not a name of this server: list it in api_hosts (a page "
                     "that made its own name resolve to this server is refused)",
                     host);
            return 1;
        }
    }
    if (!api) return 0;
    if (site && strcasecmp(site, "same-origin") && strcasecmp(site, "none")) {
        snprintf(why, size,
                 "a browser's request from a page of another site (Sec-Fetch-Site: %.40s) is "
                 "refused: the API takes browsers' requests from its own pages",
                 site);
        return 1;
    }
    if (!origin) return 0;
    if (!strncasecmp(origin, "http://", 7))
        auth = origin + 7;
    else if (!strncasecmp(origin, "https://", 8))
        auth = origin + 8;
    if (auth && ((host && !strcasecmp(auth, host)) || origin_listed(s, auth))) return 0;
    snprintf(why, size,
             "a browser's request from a page of another origin (Origin: %.200s) is refused: "
             "the API takes browsers' requests from its own pages (or those of api_hosts)",
             origin);
    return 1;
}

/* The first call for a request: route, auth and size, answered at once when wrong. */
static mhd_result begin(ctx *c, const char *url, const char *method)
{
    req *q = c->q;
    const char *len;
    int m;
    unsigned allowed = 0;
    char why[512];
    conn_rec *cr = conn_of(c->conn);
    if (split(q, url)) {
        q->close = 1;
        return ap_send_error(c, 500, "out of memory");
    }
    if (cr && cr->over) {
        q->close = 1;
        if (cr->over == 1)
            return ap_send_error(
                c, 503, "too many connections: %d are open (api_max_connections); try again",
                c->s->cfg.max_conns);
        return ap_send_error(
            c, 503,
            "too many connections from %s: at most %d (api_max_connections_per_ip); "
            "try again",
            cr->ip, c->s->cfg.max_conns_per_ip);
    }
    if (cr && cr->nul)
        return ap_send_error(c, 400,
                             "the URL holds a NUL byte (%%00) in its path or query: names and ids "
                             "cannot hold one");
    if (foreign(c->s, c->conn, q->nseg >= 1 && !strcmp(q->seg[0], "api"), why, sizeof why))
        return ap_send_error(c, 403, "%s", why);
    if (q->nseg >= 1 && !strcmp(q->seg[0], "api") &&
        !(q->nseg == 2 && !strcmp(q->seg[1], "token")) && !authorized(c->s, c->conn))
        return send_error_h(c, 401, MHD_HTTP_HEADER_WWW_AUTHENTICATE, AUTH_CHALLENGE,
                            "missing or wrong bearer token (Authorization: Bearer <token>)");
    for (m = 0; m < M_COUNT; m++)
        if (!strcmp(method, method_names[m])) break;
    if (q->nseg > SEGS_MAX || !(q->route = route_of(q, m, &allowed))) {
        char allow[64] = "";
        int k;
        if (!allowed) return ap_send_error(c, 404, "no such route: %s %s", method, url);
        for (k = 0; k < M_COUNT; k++)
            if (allowed & (1u << k))
                snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s",
                         allow[0] ? ", " : "", method_names[k]);
        return send_error_h(c, 405, MHD_HTTP_HEADER_ALLOW, allow,
                            "%s is not allowed on %s (allowed: %s)", method, url, allow);
    }
    q->m = m;
    if (cr && cr->utf8)
        return ap_send_error(c, 400,
                             "%s: the URL's path or query is not UTF-8 once percent-decoded (names "
                             "and ids are UTF-8)",
                             url);
    len = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (len && strtoull(len, NULL, 10) > (unsigned long long)c->s->cfg.body_limit)
        return ap_send_error(
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
    if (q->oom) return ap_send_error(&c, 500, "out of memory");
    if (q->too_big)
        return ap_send_error(&c, 413,
                             "request body is over the limit of %lld bytes (api_body_limit)",
                             (long long)s->cfg.body_limit);
    c.t = ap_tls_get(s);
    if (!c.t && q->route->h[q->m] != ap_h_health && q->route->h[q->m] != ap_h_ready)
        return ap_send_error(&c, 500, "out of memory");
    /* a connection Redis closed (it restarted) is replaced before it fails the request */
    if (c.t && !q->lp) ST(c.t->st, revive);
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
        cr->utf8 = 0;
        pthread_mutex_unlock(&s->mu);
    }
    if (!q) return;
    if (q->code) {
        ap_log(s, q->code >= 500 ? WEFT_LOG_WARN : WEFT_LOG_DEBUG,
               LG_FIELDS(LG_STR("method", q->method), LG_STR("path", q->url),
                         LG_INT("status", q->code), LG_INT("ms", wu_mono_ms() - q->t0),
                         LG_STR("error", q->why[0] ? q->why : NULL)),
               "api request%s",
               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
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
    ap_say(s, WEFT_LOG_DEBUG, "api: libmicrohttpd: %s", msg);
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
 * left encoded. So is what is not UTF-8 once decoded: names and ids are,
 * and what the URL holds comes back in JSON (a queue's name, a reason).
 */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *str)
{
    char *r = str, *w = str;
    conn_rec *cr = conn_of(conn);
    (void)cls;
    while (*r) {
        int hi, lo;
        if (*r == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0) {
            if (hi == 0 && lo == 0) {
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
    if (cr && wu_utf8_len(str, (size_t)(w - str)) != (size_t)(w - str)) cr->utf8 = 1;
    return (size_t)(w - str);
}

/* Drop connections whose request has not arrived whole in time: shutdown
 * makes libmicrohttpd see the end of the stream and close it. */
void ap_drop_slow(ap_server *s)
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
        ap_say(s, WEFT_LOG_DEBUG,
               "api: dropped %d connection(s) whose request did not arrive within %lld ms "
               "(api_request_timeout)",
               n, (long long)s->cfg.request_timeout_ms);
    }
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
    s->hooks.started = api_started;
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
    {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        if (!getsockname(fd, (struct sockaddr *)&sa, &sl)) {
            if (sa.ss_family == AF_INET)
                s->loopback = (ntohl(((struct sockaddr_in *)&sa)->sin_addr.s_addr) >> 24) == 127;
            else if (sa.ss_family == AF_INET6)
                s->loopback = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&sa)->sin6_addr);
        }
    }
    if (pthread_create(&s->waiter, NULL, ap_waiter_main, s)) {
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

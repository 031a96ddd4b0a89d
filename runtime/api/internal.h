/*
 * What the files of the REST API share (private to runtime/api/): the
 * server, the per-thread state, one request and its context, parked
 * connections; replies, request parts, and the handlers the routing table
 * in server.c names. Prefix ap_. The public API is api.h.
 *
 *   server.c    start and stop, connection limits and the request timeout,
 *               request reading, routing, auth, replies and errors
 *   workflow.c  starting and changing workflows (/api/workflow...)
 *   metadata.c  workflow and task definitions (/api/metadata/...)
 *   tasks.c     external workers: poll, result; leases; a task
 *               by its id, and its log
 *   search.c    finding runs: search, running, correlated
 *   ui.c        the web UI's files, and the daemons it lists
 *   events.c    what waits off the pool: the waiter, event streams, batch long polls
 *   queues.c    the queues: sizes, one queue and its limits, poll data, and
 *               the set /metrics reports; a queue no worker polls
 *   health.c    /health and /metrics
 */
#ifndef WEFT_API_INTERNAL_H
#define WEFT_API_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <json-c/json.h>
#include <microhttpd.h>

#include "api/api.h"
#include "store/redis/backend.h"
#include "core/ops.h"
#include "core/served.h"

#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

#define SEGS_MAX 8
#define POLL_MAX 100 /* tasks one batch poll hands out at most */
#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

typedef struct park park;
typedef struct conn_rec conn_rec;

struct ap_server {
    ap_config cfg;
    struct MHD_Daemon *d;
    char address[96];
    int loopback; /* it listens on a loopback address: other hosts cannot reach it */
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
    const char *queue, *worker; /* borrowed from the request (queue: or qbuf) */
    char qbuf[256];             /* "<domain>:<name>" for a poll with domain= */
    int count, got, failed;
    int64_t deadline, pause;
    json_object *arr;
    weft_error err;
} longpoll;

/* What each handler thread keeps: its own connection and compiled definitions. */
typedef struct tls {
    ap_server *s;
    st_store *st;
    dc_cache *cache;
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

/* The queue a poll of name takes from: name, or "<domain>:<name>" with
 * ?domain= (into buf). NULL when the domain is bad (400 sent). */
const char *ap_poll_queue(ctx *c, const char *name, char buf[256]);

/* A search query being parsed (search.c): its text, the tokens cut from it
 * (each NUL-terminated in toks), the lists the st_query points into, and
 * what was wrong with it. */
#define AP_LIST_MAX 32                /* values of one IN (...) */
#define AP_TIME_MAX 999999999999999LL /* ms: the year 33658 (and no overflow at +1) */
typedef struct ap_qparse {
    const char *text, *p;
    char *toks, *end; /* where the next token goes */
    const char *statuses[AP_LIST_MAX], *names[AP_LIST_MAX];
    char why[256];
} ap_qparse;

/* Conductor's query language (search's query=) from text into q, whose
 * strings then live in x (zeroed by the caller) until
 * ap_search_parse_free(x), also after a failure. 0, or -1 with x->why. */
int ap_search_parse(ap_qparse *x, const char *text, st_query *q);
void ap_search_parse_free(ap_qparse *x);

typedef mhd_result (*handler)(ctx *c);

/* Whether ap_stop has begun. */
int ap_stopping(const ap_server *s);

/* Log one line with fields (NULL: none) through cfg.log (nothing when it is
 * NULL); ap_say without fields. */
__attribute__((format(printf, 4, 5))) void ap_log(ap_server *s, int level, const lg_field *fields,
                                                  const char *fmt, ...);
#define ap_say(s, level, ...) ap_log((s), (level), NULL, __VA_ARGS__)

/* This thread's state, made on first use (freed when the thread ends);
 * NULL when out of memory. Owned by the thread. */
/* A store handle of the server's Redis (cache may be NULL): st_redis_open; or
 * cfg.open_store's. */
int ap_open_store(ap_server *s, dc_cache *cache, st_store **out, weft_error *err);
tls *ap_tls_get(ap_server *s);

/* Drop connections whose request has not arrived whole within the request
 * timeout (the waiter calls it). */
void ap_drop_slow(ap_server *s);

/*
 * Replies. Each queues the response on c->conn, notes its status in c->q
 * and returns (and stores in c->res) what libmicrohttpd answered. Strings
 * are copied. A 503 gets Retry-After; hname/hvalue add one header (NULL:
 * none).
 */
mhd_result ap_send_raw(ctx *c, int code, const char *type, const char *body, size_t len,
                       const char *hname, const char *hvalue);
mhd_result ap_send_text(ctx *c, int code, const char *text);
mhd_result ap_send_json_text(ctx *c, int code, const char *text);
/* Takes j (NULL: 500, out of memory). */
mhd_result ap_send_json(ctx *c, int code, json_object *j);
mhd_result ap_send_empty(ctx *c, int code);
/* Conductor's error shape {"status", "message", "retryable"}; invalid UTF-8
 * in the message is escaped. */
__attribute__((format(printf, 3, 4))) mhd_result ap_send_error(ctx *c, int code, const char *fmt,
                                                               ...);
/* err as an error reply, with the HTTP status for its WEFT_E* code. */
mhd_result ap_send_werr(ctx *c, const weft_error *err);

/*
 * Request parts. Those returning int give 0, or -1 after answering 400
 * (c->res then holds what to return). Strings and objects handed out are
 * borrowed from the request or from o.
 */
const char *ap_query(ctx *c, const char *name);
/* An integer query argument in [min, max]; absent = def. */
int ap_query_long(ctx *c, const char *name, long def, long min, long max, long *out);
/* -1 after answering 400 when a name in j (from what) holds a NUL. */
int ap_refuse_nul_names(ctx *c, const char *what, json_object *j);
/* The request body as text (NULL when empty): no NUL, valid UTF-8. */
int ap_body_text(ctx *c, const char **text);
/* The request body as JSON into *out (the caller puts it). An empty body
 * gives NULL when empty_ok, else 400. */
int ap_body_json(ctx *c, int empty_ok, json_object **out);
/* A string member: NULL when absent or null; 400 when another type. */
int ap_member_str(ctx *c, json_object *o, const char *key, const char **out);
/* An object member: NULL when absent or null; 400 when another type. */
int ap_member_obj(ctx *c, json_object *o, const char *key, json_object **out);

/* The waiter thread (arg: the server): resumes parked connections when
 * due, drops slow requests; it ends once stopping and nothing is parked. */
void *ap_waiter_main(void *arg);

/* Claim from queue and hand out up to max tasks into arr (borrowed).
 * Returns how many, or -1 (err set) when Redis failed before any. */
int ap_take(ap_server *s, tls *t, const char *queue, int max, const char *worker, json_object *arr,
            weft_error *err);

/* Queues to report (ap_queues), each once, with its sizes and last poll. */
typedef struct ap_qset {
    st_qinfo *q; /* malloc'd */
    size_t n, cap;
} ap_qset;
/* Every queue that holds tasks, and those this daemon serves (cfg.types) or
 * was polled through (mt_queue_seen), into *set (emptied first; free it
 * with ap_qset_free, also on failure). 0, or the store's error. */
int ap_queues(ap_server *s, st_store *st, ap_qset *set, weft_error *err);
void ap_qset_free(ap_qset *set);
/* When q holds ready tasks and no worker polled it for cfg.unpolled_ms
 * (or none is on record), why that is a problem in words, into buf
 * ("no worker has polled for 7m02s; 3 task(s) wait"), which it returns;
 * else NULL. */
const char *ap_unpolled(const ap_server *s, const st_qinfo *q, int64_t now_ms, char *buf,
                        size_t size);

/* The handlers, one per route and method (see the table in server.c). */
mhd_result ap_h_health(ctx *c);
mhd_result ap_h_ready(ctx *c);
mhd_result ap_h_metrics(ctx *c);
mhd_result ap_h_start(ctx *c);
mhd_result ap_h_start_name(ctx *c);
mhd_result ap_h_get(ctx *c);
mhd_result ap_h_ui(ctx *c);
mhd_result ap_h_ui_js(ctx *c);
mhd_result ap_h_ui_css(ctx *c);
mhd_result ap_h_daemons(ctx *c);
mhd_result ap_h_search(ctx *c);
mhd_result ap_h_search_v2(ctx *c);
mhd_result ap_h_running(ctx *c);
mhd_result ap_h_correlated(ctx *c);
mhd_result ap_h_task(ctx *c);
mhd_result ap_h_task_log(ctx *c);
mhd_result ap_h_task_log_post(ctx *c);
mhd_result ap_h_terminate(ctx *c);
mhd_result ap_h_pause(ctx *c);
mhd_result ap_h_resume(ctx *c);
mhd_result ap_h_retry(ctx *c);
mhd_result ap_h_restart(ctx *c);
mhd_result ap_h_events(ctx *c);
mhd_result ap_h_defs_list(ctx *c);
mhd_result ap_h_def_post(ctx *c);
mhd_result ap_h_def_put(ctx *c);
mhd_result ap_h_def_get(ctx *c);
mhd_result ap_h_taskdefs_list(ctx *c);
mhd_result ap_h_taskdefs_post(ctx *c);
mhd_result ap_h_taskdefs_put(ctx *c);
mhd_result ap_h_taskdef_get(ctx *c);
mhd_result ap_h_result(ctx *c);
mhd_result ap_h_queue_sizes(ctx *c);
mhd_result ap_h_queue(ctx *c);
mhd_result ap_h_queue_all(ctx *c);
mhd_result ap_h_polldata(ctx *c);
mhd_result ap_h_polldata_all(ctx *c);
mhd_result ap_h_poll_batch(ctx *c);
mhd_result ap_h_poll(ctx *c);
mhd_result ap_h_by_ref(ctx *c);

#endif

/*
 * The Redis store's connection (store/redis/redis.h): commands and their
 * pipelines, errors, round trips, connect and reconnect, open and close,
 * keys and names. Every call costs a fixed number of round trips, noted on
 * each function: commands that belong together are pipelined (appended,
 * then all replies read), and each multi-key change is one of the scripts in
 * runtime/store/redis, run with EVALSHA. The scripts are loaded on connect
 * (in the same round trip as AUTH/SELECT) and again, transparently, when
 * Redis answers NOSCRIPT (one more round trip, only then).
 *
 * A connection failure (refused, reset, timed out) frees the context and
 * marks the rs broken; the next call reconnects first. Nothing here sleeps:
 * the caller backs off.
 */
#include "store/redis/internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated from the scripts in runtime/store/redis by build-aux/embed-scripts.sh. */
extern const char *const rs_script_name[];
extern const char *const rs_script_src[];
extern const size_t rs_script_count;

static const char *const script_names[S_COUNT] = {
    "create", "save", "flush",   "claim",   "renew",  "ack",     "check",
    "reap",   "due",  "unqueue", "command", "search", "tasklog", "forget",
};

/* ---- commands ---- */

static int cmd_grow(rs_cmd *c)
{
    int cap = c->cap ? c->cap * 2 : 8;
    const char **argv = realloc(c->argv, (size_t)cap * sizeof *argv);
    size_t *len;
    char **own;
    if (!argv) return -1;
    c->argv = argv;
    len = realloc(c->len, (size_t)cap * sizeof *len);
    if (!len) return -1;
    c->len = len;
    own = realloc(c->own, (size_t)cap * sizeof *own);
    if (!own) return -1;
    c->own = own;
    c->cap = cap;
    return 0;
}

void rs_cmd_addn(rs_cmd *c, const char *s, size_t n, char *owned)
{
    if (c->oom || (c->argc == c->cap && cmd_grow(c))) {
        c->oom = 1;
        free(owned);
        return;
    }
    c->argv[c->argc] = s;
    c->len[c->argc] = n;
    c->own[c->argc] = owned;
    c->argc++;
}

void rs_cmd_add(rs_cmd *c, const char *s)
{
    rs_cmd_addn(c, s, strlen(s), NULL);
}

void rs_cmd_dup(rs_cmd *c, const char *s)
{
    char *d = strdup(s);
    if (!d) {
        c->oom = 1;
        return;
    }
    rs_cmd_addn(c, d, strlen(d), d);
}

/* The decimal digits of v into the end of buf[24]: where they start. */
char *rs_digits(char buf[24], unsigned long long v, int neg)
{
    char *p = buf + 23;
    *p = 0;
    do
        *--p = (char)('0' + v % 10);
    while (v /= 10);
    if (neg) *--p = '-';
    return p;
}

char *rs_ll(char buf[24], long long v)
{
    return rs_digits(buf, v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v, v < 0);
}

/* A number or other formatted argument (copied). The integer formats the
 * commands use are written here: snprintf was a few % of a worker's CPU. */
__attribute__((format(printf, 2, 3))) void rs_cmd_addf(rs_cmd *c, const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    int n;
    va_start(ap, fmt);
    if (!strcmp(fmt, "%d") || !strcmp(fmt, "%lld")) {
        long long v = fmt[1] == 'd' ? va_arg(ap, int) : va_arg(ap, long long);
        va_end(ap);
        rs_cmd_dup(c, rs_ll(buf, v));
        return;
    }
    if (!strcmp(fmt, "%llu") || !strcmp(fmt, "%zu")) {
        unsigned long long v =
            fmt[1] == 'z' ? (unsigned long long)va_arg(ap, size_t) : va_arg(ap, unsigned long long);
        va_end(ap);
        rs_cmd_dup(c, rs_digits(buf, v, 0));
        return;
    }
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) {
        c->oom = 1;
        return;
    }
    rs_cmd_dup(c, buf);
}

/* SCRIPT LOAD <source of script s>. */
void rs_cmd_script_load(rs_cmd *c, const rs *r, int s)
{
    rs_cmd_add(c, "SCRIPT");
    rs_cmd_add(c, "LOAD");
    rs_cmd_add(c, r->src[s]);
}

/* EVALSHA <sha of script s> <nkeys>: the keys and arguments follow. */
void rs_cmd_script(rs_cmd *c, rs *r, int s, int nkeys)
{
    rs_cmd_add(c, "EVALSHA");
    rs_cmd_add(c, r->sha[s]);
    rs_cmd_addf(c, "%d", nkeys);
}

void rs_cmd_free(rs_cmd *c)
{
    int i;
    for (i = 0; i < c->argc; i++)
        free(c->own[i]);
    free(c->argv);
    free(c->len);
    free(c->own);
    memset(c, 0, sizeof *c);
}

void rs_cmds_free(rs_cmd *c, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        rs_cmd_free(&c[i]);
}

void rs_replies_free(redisReply **rep, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (rep[i]) freeReplyObject(rep[i]);
        rep[i] = NULL;
    }
}

/*
 * Append n commands to the connection's output in one piece, formatted
 * here (RESP: *argc, then $len and the bytes of each argument): hiredis
 * formats each command into a buffer of its own first. REDIS_OK or
 * REDIS_ERR (out of memory).
 */
int rs_append_cmds(rs *r, redisContext *c, const rs_cmd *cmds, size_t n)
{
    wu_buf *b = &r->proto;
    char num[24];
    size_t i;
    int k, rc = 0;
    b->len = 0;
    for (i = 0; i < n && !rc; i++) {
        const char *p = rs_digits(num, (unsigned long long)cmds[i].argc, 0);
        rc = wu_buf_add(b, "*", 1) || wu_buf_add(b, p, strlen(p)) || wu_buf_add(b, "\r\n", 2);
        for (k = 0; k < cmds[i].argc && !rc; k++) {
            p = rs_digits(num, (unsigned long long)cmds[i].len[k], 0);
            rc = wu_buf_add(b, "$", 1) || wu_buf_add(b, p, strlen(p)) || wu_buf_add(b, "\r\n", 2) ||
                 wu_buf_add(b, cmds[i].argv[k], cmds[i].len[k]) || wu_buf_add(b, "\r\n", 2);
        }
    }
    if (rc || (b->len && redisAppendFormattedCommand(c, b->data, b->len) != REDIS_OK))
        return REDIS_ERR;
    if (b->cap > 1 << 20) wu_buf_free(b); /* a huge pipeline does not keep its buffer */
    return REDIS_OK;
}

/* ---- errors ---- */

int rs_oom(weft_error *err)
{
    return wu_err(err, WEFT_ENOMEM, "out of memory");
}

int rs_is_err(const redisReply *x)
{
    return x && x->type == REDIS_REPLY_ERROR;
}

/* Replies that say "not now" (a restarting or busy server): the caller backs off. */
int rs_transient(const char *msg)
{
    return !strncmp(msg, "LOADING", 7) || !strncmp(msg, "BUSY", 4) ||
           !strncmp(msg, "TRYAGAIN", 8) || !strncmp(msg, "MASTERDOWN", 10);
}

/* Drop the connection: the next call connects again (and reloads the
 * scripts). Steps in flight are forgotten: they stay in their outboxes. On
 * a cluster, a flight whose replies were read is kept for the next exchange
 * to finish (what it refused goes back to its outbox). */
void rs_drop(rs *r)
{
    if (r->cl) rs_cl_drop(r);
    if (r->c) redisFree(r->c);
    r->c = NULL;
    r->broken = 1;
    if (r->fly && r->cl && rs_flight_is_read(r->fly)) return;
    rs_flight_free(r->fly);
    r->fly = NULL;
}

/* An error reply about key as a WEFT_E* code and message. */
int rs_reply_err(rs *r, const redisReply *x, const char *key, weft_error *err)
{
    char msg[256];
    const char *cut;
    size_t n = x->str ? x->len : 0;
    if (n >= sizeof msg) n = sizeof msg - 1;
    memcpy(msg, x->str ? x->str : "", n);
    msg[n] = 0;
    /* errors raised inside a script carry " script: <sha>, on @user_script..." */
    if ((cut = strstr(msg, " script: ")) != NULL) msg[cut - msg] = 0;
    if (!strncmp(msg, "WRONGTYPE", 9))
        return wu_err(err, WEFT_EINVAL, "%s: %s: holds the wrong kind of value (%s)", r->url.shown,
                      key, msg);
    if (strstr(msg, "user_script:"))
        return wu_err(err, WEFT_ESCRIPT, "%s: %s: script failed: %s", r->url.shown, key, msg);
    if (rs_transient(msg)) rs_drop(r);
    return wu_err(err, WEFT_EIO, "%s: %s: %s", r->url.shown, key, msg);
}

int rs_bad_reply(rs *r, const char *key, weft_error *err)
{
    return wu_err(err, WEFT_EIO, "%s: %s: unexpected reply from Redis", r->url.shown, key);
}

/* The context failed: drop it (the next call reconnects) and say why. */
int rs_conn_fail(rs *r, const char *key, weft_error *err)
{
    char why[160];
    redisContext *c = r->c;
    if (c && c->err == REDIS_ERR_IO && !strcmp(c->errstr, strerror(EAGAIN)))
        snprintf(why, sizeof why, "no answer within %d ms", r->timeout_ms);
    else if (c && c->err)
        snprintf(why, sizeof why, "%s", c->errstr);
    else
        snprintf(why, sizeof why, "connection lost");
    rs_drop(r);
    if (key) return wu_err(err, WEFT_EIO, "%s: %s: %s", r->url.shown, key, why);
    return wu_err(err, WEFT_EIO, "%s: %s", r->url.shown, why);
}
/* ---- round trips ---- */

void rs_sigpipe_block(const rs *r, sigpipe_guard *g)
{
    sigset_t set, pending;
    g->on = r->guard;
    if (!g->on) return;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
    sigemptyset(&pending);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

void rs_sigpipe_restore(sigpipe_guard *g)
{
    sigset_t set, pending;
    if (!g->on) return;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE) == 1) {
        struct timespec zero = {0, 0};
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* Write what hiredis holds for connection c: 1, or 0 when it failed. */
int rs_write_out(redisContext *c)
{
    int done = 0;
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK) return 0;
    return 1;
}

/* A command that waits in Redis (r->long_ms > 0: BLPOP, XREAD BLOCK) is read
 * with a socket timeout longer than Redis waits; back to the usual one after. */
void rs_long_wait(const rs *r, redisContext *c, int on)
{
    if (r->long_ms > 0 && c) redisSetTimeout(c, rs_ms_tv(r->timeout_ms + (on ? r->long_ms : 0)));
}

/* Send n commands on c in one write and read their n replies into rep[]:
 * 1, or 0 when c failed (c->err says why; the replies read are in rep[]). */
int rs_ctx_exchange(rs *r, redisContext *c, const rs_cmd *cmds, size_t n, redisReply **rep)
{
    sigpipe_guard g;
    size_t i;
    int ok = rs_append_cmds(r, c, cmds, n) == REDIS_OK;
    rs_sigpipe_block(r, &g);
    for (i = 0; i < n && ok; i++) {
        void *x = NULL;
        ok = redisGetReply(c, &x) == REDIS_OK;
        rep[i] = x;
    }
    rs_sigpipe_restore(&g);
    return ok;
}

/*
 * Send n commands in one write and read their n replies: one round trip.
 * Steps in flight (rs_opts.early_steps) go first on the connection, so
 * their replies are read first, after these commands were written: the
 * saver does not wait for them on their own.
 */
static int exchange(rs *r, rs_cmd *cmds, size_t n, redisReply **rep, const char *key,
                    weft_error *err)
{
    sigpipe_guard g;
    struct flight *f = r->fly;
    size_t i;
    int ok;
    for (i = 0; i < n; i++)
        if (cmds[i].oom) {
            return rs_oom(err);
        }
    r->fly = NULL;
    ok = rs_append_cmds(r, r->c, cmds, n) == REDIS_OK;
    rs_long_wait(r, r->c, 1);
    rs_sigpipe_block(r, &g);
    if (ok && f) ok = rs_write_out(r->c) && rs_flight_read(r, f);
    for (i = 0; i < n && ok; i++) {
        void *x = NULL;
        if (redisGetReply(r->c, &x) != REDIS_OK) {
            ok = 0;
            break;
        }
        rep[i] = x;
    }
    rs_sigpipe_restore(&g);
    rs_long_wait(r, r->c, 0);
    if (!ok) {
        rs_flight_free(f);
        return rs_conn_fail(r, key, err);
    }
    if (f) rs_flight_finish(r, f); /* may take a round trip: all replies are in */
    return 0;
}

struct timeval rs_ms_tv(int ms)
{
    struct timeval tv;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    return tv;
}

/* A connection to host:port (path: a unix socket) with the store's timeout
 * and keepalive, or NULL (err names shown and says why). */
redisContext *rs_dial(rs *r, const char *host, int port, const char *path, const char *shown,
                      weft_error *err)
{
    struct timeval tv = rs_ms_tv(r->timeout_ms);
    redisContext *c =
        path ? redisConnectUnixWithTimeout(path, tv) : redisConnectWithTimeout(host, port, tv);
    if (!c) {
        rs_oom(err);
        return NULL;
    }
    if (c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        wu_err(err, WEFT_EIO, "%s: %s", shown, c->err ? c->errstr : "cannot set a timeout");
        redisFree(c);
        return NULL;
    }
    if (!path) redisEnableKeepAlive(c);
    return c;
}

/*
 * AUTH, SELECT and SCRIPT LOAD of every script on a new connection c to
 * shown: one round trip. first (the connection to a seed) also asks
 * whether the server is a node of a Redis Cluster (*cluster) and reads the
 * epoch, in the same round trip. 0, or an error naming shown.
 */
int rs_greet(rs *r, redisContext *c, const char *shown, int first, int *cluster, weft_error *err)
{
    rs_cmd cmds[4 + S_COUNT];
    redisReply *rep[4 + S_COUNT];
    size_t n = 0, i, first_load, info = 0;
    int rc = 0;

    memset(cmds, 0, sizeof cmds);
    memset(rep, 0, sizeof rep);
    if (r->url.password) {
        rs_cmd_add(&cmds[n], "AUTH");
        if (r->url.user) rs_cmd_add(&cmds[n], r->url.user);
        rs_cmd_add(&cmds[n], r->url.password);
        n++;
    }
    if (r->url.db) {
        rs_cmd_add(&cmds[n], "SELECT");
        rs_cmd_addf(&cmds[n], "%d", r->url.db);
        n++;
    }
    first_load = n;
    for (i = 0; i < S_COUNT; i++, n++)
        rs_cmd_script_load(&cmds[n], r, (int)i);
    if (first) {
        /* a Redis Cluster node is told apart from a single Redis here */
        info = n;
        rs_cmd_add(&cmds[n], "INFO");
        rs_cmd_add(&cmds[n++], "cluster");
        if (r->epoch) {
            /* a connect is when a restarted Redis shows: read the epoch with the loads */
            rs_cmd_add(&cmds[n], "GET");
            rs_cmd_addf(&cmds[n], "%sepoch", r->prefix);
            n++;
        }
    }
    for (i = 0; i < n; i++)
        if (cmds[i].oom) rc = rs_oom(err);
    if (!rc && !rs_ctx_exchange(r, c, cmds, n, rep))
        rc = wu_err(err, WEFT_EIO, "%s: %s", shown, c->err ? c->errstr : "connection lost");
    for (i = 0; i < first_load + S_COUNT && !rc; i++) {
        if (rs_is_err(rep[i])) {
            /* AUTH/SELECT errors never echo the password; the reply does not hold it */
            const char *what = i < first_load ? (r->url.password && i == 0 ? "AUTH" : "SELECT")
                                              : script_names[i - first_load];
            rc = wu_err(err, WEFT_EIO, "%s: %s failed: %s", shown, what, rep[i]->str);
        } else if (i >= first_load) {
            /* the same on every server: the SHA1 of the source, 40 hex
             * digits (EVALSHA sends it as a C string) */
            if (rep[i]->type != REDIS_REPLY_STRING || rep[i]->len != 40 ||
                strspn(rep[i]->str, "0123456789abcdef") != 40)
                rc = wu_err(err, WEFT_EIO, "%s: SCRIPT LOAD: unexpected reply", shown);
            else
                memcpy(r->sha[i - first_load], rep[i]->str, 41);
        }
    }
    if (first && !rc) {
        *cluster =
            rep[info]->type == REDIS_REPLY_STRING && strstr(rep[info]->str, "cluster_enabled:1");
        if (r->epoch && !*cluster) rs_epoch_seen(r, rep[n - 1], -1);
    }
    rs_cmds_free(cmds, n);
    rs_replies_free(rep, n);
    return rc;
}

/* Connect to r->url, AUTH, SELECT and load the scripts: one round trip after
 * the connect. A node of a Redis Cluster puts the store in cluster mode
 * (cluster.c): one more round trip, CLUSTER SLOTS. */
static int connect_one(rs *r, weft_error *err)
{
    int rc, cluster = 0;
    r->broken = 1;
    if (!(r->c = rs_dial(r, r->url.host, r->url.port, r->url.path, r->url.shown, err)))
        return err->code;
    rc = rs_greet(r, r->c, r->url.shown, 1, &cluster, err);
    if (!rc && cluster) {
        redisContext *c = r->c;
        r->c = NULL;
        return rs_cl_start(r, c, err); /* takes c */
    }
    if (rc) {
        redisFree(r->c);
        r->c = NULL;
        return rc;
    }
    r->broken = 0;
    return 0;
}

/* A layout number from Redis's reply x (or -1). */
static int layout_num(const redisReply *x)
{
    long v;
    char *end;
    if (!rs_is_str(x)) return -1;
    v = strtol(x->str, &end, 10);
    return end == x->str || *end || v < 1 || v > 1024 ? -1 : (int)v;
}

/*
 * The key prefix's layout, fixed at its first use: written when Redis has
 * none (HSETNX: the first writer wins), read, and checked against what
 * this process was configured with. One round trip, at the first connect.
 */
static int layout_load(rs *r, weft_error *err)
{
    /* a new layout gets every field; one from before queue shards and
     * partitions by slot range keeps what its keys were made with: a queue
     * each, partitions by CRC16 */
    static const char script[] =
        "if redis.call('HSETNX', KEYS[1], 'partitions', ARGV[1]) == 1 then\n"
        "  redis.call('HSET', KEYS[1], 'queue_shards', ARGV[2], 'parts_by', 'slot')\n"
        "else\n"
        "  redis.call('HSETNX', KEYS[1], 'queue_shards', '1')\n"
        "end\n"
        "return redis.call('HMGET', KEYS[1], 'partitions', 'queue_shards', 'parts_by')\n";
    char k[KEY_MAX], num[24], why[128], *stored = NULL, *theirs;
    int np = rs_cl_primaries(r), got = -1, i, rc;
    /* a new cluster's default: at least 8, a multiple of the primaries, so
     * that each primary's slots hold whole partitions (as the shards) */
    int want = r->want_parts ? r->want_parts : r->cl ? (8 + np - 1) / np * np : 1;
    char cl_qs[24];
    /* a new cluster's default: a shard per primary (up to 64) */
    const char *want_qs = r->want_qs ? r->want_qs
                          : r->cl    ? rs_digits(cl_qs, (unsigned long long)(np < 64 ? np : 64), 0)
                                     : "1";
    rs_cmd c = {0};
    redisReply *x = NULL, *f[3] = {NULL, NULL, NULL};
    rs_k_name(r, "layout", "", k);
    rs_cmd_add(&c, "EVAL");
    rs_cmd_add(&c, script);
    rs_cmd_add(&c, "1");
    rs_cmd_add(&c, k);
    rs_cmd_add(&c, rs_digits(num, (unsigned long long)want, 0));
    rs_cmd_add(&c, want_qs);
    rc = rs_pipe(r, &c, 1, &x, k, err);
    rs_cmd_free(&c);
    if (!rc && rs_is_err(x)) rc = rs_reply_err(r, x, k, err);
    if (!rc && (x->type != REDIS_REPLY_ARRAY || x->elements != 3)) rc = rs_bad_reply(r, k, err);
    for (i = 0; i < 3 && !rc; i++)
        f[i] = x->element[i];
    if (!rc && (got = layout_num(f[0])) < 0)
        rc = wu_err(err, WEFT_EINVAL, "%s: %s: field partitions is not a number from 1 to 1024",
                    r->url.shown, k);
    if (!rc && !rs_is_str(f[1]))
        rc = wu_err(err, WEFT_EINVAL, "%s: %s: field queue_shards is missing", r->url.shown, k);
    if (!rc && !(stored = rs_reply_dup(f[1]))) rc = rs_oom(err);
    r->parts_crc = !rc && !(rs_is_str(f[2]) && !strcmp(f[2]->str, "slot"));
    rs_replies_free(&x, 1);
    if (!rc && rs_qs_parse(r, stored, why) != 0)
        rc = wu_err(err, WEFT_EINVAL, "%s: %s: field queue_shards \"%.80s\": %s", r->url.shown, k,
                    stored, why);
    if (!rc && r->want_parts && got != want)
        rc = wu_err(err, WEFT_EINVAL,
                    "%s: key prefix \"%s\" was first used with partitions=%d (kept in %s), and "
                    "this process is configured with partitions=%d: configure %d, or use "
                    "another key prefix",
                    r->url.shown, r->prefix, got, k, want, got);
    if (!rc && r->want_qs) {
        /* compared in their one written form (types sorted) */
        if (!(theirs = rs_qs_text(r)))
            rc = rs_oom(err);
        else if (strcmp(r->want_qs, theirs))
            rc = wu_err(err, WEFT_EINVAL,
                        "%s: key prefix \"%s\" was first used with queue_shards=%s (kept in %s), "
                        "and this process is configured with queue_shards=%s: configure %s, or "
                        "use another key prefix",
                        r->url.shown, r->prefix, theirs, k, r->want_qs, theirs);
        free(theirs);
    }
    free(stored);
    if (rc) {
        rs_qs_clear(r);
        return rc;
    }
    if (!(r->ptag = calloc((size_t)got, sizeof *r->ptag))) return rs_oom(err);
    for (i = 0; i < got; i++)
        rc_part_tag("dq", i, got, r->ptag[i]);
    r->parts = got;
    r->wrr = (unsigned)(wu_now_ms() ^ (uintptr_t)r);
    return 0;
}

/* Connect to the seed in use, else to the next ones in turn (a seed that is
 * a cluster node stops the search: no seed of that list will do). */
static int rs_connect(rs *r, weft_error *err)
{
    size_t k;
    int rc = 0;
    for (k = 0; k < r->nseeds; k++) {
        size_t i = (r->seed + k) % r->nseeds;
        r->url = r->seeds[i];
        if ((rc = connect_one(r, err)) == 0) {
            r->seed = i;
            return 0;
        }
        if (rc == WEFT_EINVAL || rc == WEFT_ENOMEM) break;
    }
    r->url = r->seeds[r->seed];
    return rc;
}

/* Connect first if the last call lost the connection. */
int rs_ensure(rs *r, weft_error *err)
{
    int rc;
    if (r->cl)
        rc = rs_cl_ensure(r, err);
    else if (r->c)
        rc = r->broken = 0;
    else
        rc = rs_connect(r, err);
    if (!rc && !r->parts && !r->loading) {
        r->loading = 1; /* its round trip comes back here */
        rc = layout_load(r, err);
        r->loading = 0;
    }
    return rc;
}

int rs_script_of(const rs *r, const rs_cmd *c)
{
    int s;
    if (c->argc < 2 || strcmp(c->argv[0], "EVALSHA")) return -1;
    for (s = 0; s < S_COUNT; s++)
        if (!strcmp(c->argv[1], r->sha[s])) return s;
    return -1;
}

int rs_is_noscript(const redisReply *x)
{
    return rs_is_err(x) && !strncmp(x->str, "NOSCRIPT", 8);
}

/* On a cluster, after an exchange that read the replies of the steps in
 * flight: what they say (the refused ones go back to their outboxes). */
static void rs_cl_landed(rs *r)
{
    flight *f = r->fly;
    if (!f || !rs_flight_is_read(f)) return;
    r->fly = NULL;
    rs_flight_finish(r, f);
}

/*
 * Run cmds as one pipeline (one round trip). Replies go to rep[] (the caller
 * frees them with rs_replies_free, also on failure). Commands answered NOSCRIPT
 * are sent again after loading their script: one more round trip, only then.
 */
int rs_pipe(rs *r, rs_cmd *cmds, size_t n, redisReply **rep, const char *key, weft_error *err)
{
    rs_cmd *re = NULL;
    redisReply **rr = NULL;
    size_t i, m = 0, nload = 0;
    int need[S_COUNT] = {0};
    int rc, s;

    memset(rep, 0, n * sizeof *rep);
    if ((rc = rs_ensure(r, err)) != 0) return rc;
    if (r->cl) {
        rc = rs_cl_pipe(r, cmds, n, rep, key, err);
        rs_cl_landed(r);
        return rc;
    }
    if ((rc = exchange(r, cmds, n, rep, key, err)) != 0) return rc;
    for (i = 0; i < n; i++)
        if (rs_is_noscript(rep[i]) && (s = rs_script_of(r, &cmds[i])) >= 0 && !need[s]++) nload++;
    if (!nload) return 0;

    re = calloc(nload, sizeof *re);
    rr = calloc(nload + n, sizeof *rr);
    if (!re || !rr) {
        free(re);
        free(rr);
        return rs_oom(err);
    }
    for (s = 0; s < S_COUNT; s++)
        if (need[s]) rs_cmd_script_load(&re[m++], r, s);
    /* the loads, then the commands that failed, in one pipeline */
    rc = rs_ensure(r, err);
    for (i = 0; !rc && i < m; i++)
        if (redisAppendCommandArgv(r->c, re[i].argc, re[i].argv, re[i].len) != REDIS_OK)
            rc = rs_conn_fail(r, key, err);
    for (i = 0; !rc && i < n; i++)
        if (rs_is_noscript(rep[i]) && rs_script_of(r, &cmds[i]) >= 0 &&
            redisAppendCommandArgv(r->c, cmds[i].argc, cmds[i].argv, cmds[i].len) != REDIS_OK)
            rc = rs_conn_fail(r, key, err);
    if (!rc) {
        sigpipe_guard g;
        size_t k = 0;
        rs_sigpipe_block(r, &g);
        for (i = 0; i < m && !rc; i++) {
            void *x = NULL;
            if (redisGetReply(r->c, &x) != REDIS_OK) rc = -1;
            rr[k++] = x;
        }
        for (i = 0; i < n && !rc; i++) {
            void *x = NULL;
            if (!rs_is_noscript(rep[i]) || rs_script_of(r, &cmds[i]) < 0) continue;
            if (redisGetReply(r->c, &x) != REDIS_OK) {
                rc = -1;
                break;
            }
            freeReplyObject(rep[i]);
            rep[i] = x;
        }
        rs_sigpipe_restore(&g);
        if (rc) rc = rs_conn_fail(r, key, err);
        for (i = 0; i < k && !rc; i++)
            if (rs_is_err(rr[i])) rc = rs_reply_err(r, rr[i], "SCRIPT LOAD", err);
        rs_replies_free(rr, k);
    }
    rs_cmds_free(re, nload);
    free(re);
    free(rr);
    return rc;
}

/* One command: one round trip (two after a NOSCRIPT). */
int rs_one(rs *r, rs_cmd *c, redisReply **rep, const char *key, weft_error *err)
{
    int rc = rs_pipe(r, c, 1, rep, key, err);
    rs_cmd_free(c);
    if (!rc && rs_is_err(*rep)) rc = rs_reply_err(r, *rep, key, err);
    if (rc) rs_replies_free(rep, 1);
    return rc;
}

/* rs_one, for a command whose reply must be an array (anything else: WEFT_EIO). */
int rs_array(rs *r, rs_cmd *c, redisReply **x, const char *key, weft_error *err)
{
    int rc = rs_one(r, c, x, key, err);
    if (rc) return rc;
    if ((*x)->type != REDIS_REPLY_ARRAY) {
        rs_replies_free(x, 1);
        return rs_bad_reply(r, key, err);
    }
    return 0;
}

/* One round trip: "cmd key", whose reply is an array: its string elements
 * that keep takes (NULL: all), copied, into *out (malloc'd, never NULL on
 * success; the caller frees each and it) and *n. */
int rs_strings(rs *r, const char *cmd, const char *key, int (*keep)(const char *s), char ***out,
               size_t *n, weft_error *err)
{
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;
    *out = NULL;
    *n = 0;
    rs_cmd_add(&c, cmd);
    rs_cmd_add(&c, key);
    if ((rc = rs_array(r, &c, &x, key, err)) != 0) return rc;
    if (!(*out = calloc(x->elements ? x->elements : 1, sizeof **out))) rc = rs_oom(err);
    for (i = 0; i < x->elements && !rc; i++) {
        if (x->element[i]->type != REDIS_REPLY_STRING || (keep && !keep(x->element[i]->str)))
            continue;
        if (!((*out)[*n] = rs_reply_dup(x->element[i])))
            rc = rs_oom(err);
        else
            ++*n;
    }
    rs_replies_free(&x, 1);
    if (rc) {
        while (*n)
            free((*out)[--*n]);
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- open, close ---- */

void rs_free(rs *r)
{
    if (!r) return;
    if (r->fly) rs_flight_land(r); /* its failures go back to the outboxes */
    if (r->c) redisFree(r->c);
    rs_cl_free(r);
    wu_buf_free(&r->proto);
    while (r->nseeds)
        ru_clear(&r->seeds[--r->nseeds]);
    memset(&r->url, 0, sizeof r->url); /* a copy of a seed's */
    free(r->ptag);
    rs_qs_clear(r);
    free(r->want_qs);
    free(r->prefix);
    free(r);
}

/* An integer from the environment (0 when unset; -1 when not a number). */
static int env_int(const char *name)
{
    const char *v = getenv(name);
    char *end;
    long n;
    if (!v || !*v) return 0;
    n = strtol(v, &end, 10);
    return *end || n < 0 || n > 1 << 20 ? -1 : (int)n;
}

/* Connect: one round trip after the TCP/unix connect (AUTH, SELECT, SCRIPT
 * LOAD), one more at the first connect (the layout). */
int rs_open(const rs_opts *opts, rs **out, weft_error *err)
{
    rs_opts none = {0};
    const char *url, *prefix;
    rs *r;
    int rc, s;
    size_t i;

    *out = NULL;
    if (!opts) opts = &none;
    url = opts->url ? opts->url : getenv("WEFT_REDIS_URL");
    if (!url || !*url) url = "redis://127.0.0.1:6379";
    prefix = opts->prefix ? opts->prefix : getenv("WEFT_KEY_PREFIX");
    if (!prefix) prefix = "weft:";
    if (strlen(prefix) >= PREFIX_MAX || strpbrk(prefix, "{}"))
        return wu_err(err, WEFT_EINVAL,
                      "key prefix \"%.80s\": must be shorter than %d bytes, without { or }", prefix,
                      PREFIX_MAX);
    if (opts->retention_ms < 0 || opts->timeout_ms < 0)
        return wu_err(err, WEFT_EINVAL, "Redis store: negative retention or timeout");

    if (!(r = calloc(1, sizeof *r))) return rs_oom(err);
    r->retention_ms = opts->retention_ms ? opts->retention_ms : DEFAULT_RETENTION_MS;
    r->timeout_ms = opts->timeout_ms ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    r->early = opts->early_steps;
    r->homes = opts->home_rounds;
    r->epoch = opts->epoch;
    r->want_parts = opts->partitions ? opts->partitions : env_int("WEFT_PARTITIONS");
    if (r->want_parts < 0 || r->want_parts > 1024) {
        rs_free(r);
        return wu_err(err, WEFT_EINVAL,
                      "Redis store: partitions must be 1 to 1024 (or 0: what Redis holds)");
    }
    {
        const char *qs = opts->queue_shards && *opts->queue_shards ? opts->queue_shards
                                                                   : getenv("WEFT_QUEUE_SHARDS");
        char why[128];
        rs probe;
        memset(&probe, 0, sizeof probe);
        if (qs && *qs) {
            /* kept in its one written form (types sorted), which is compared */
            if (rs_qs_parse(&probe, qs, why) != 0) {
                rs_free(r);
                return wu_err(err, WEFT_EINVAL,
                              "Redis store: queue_shards \"%.80s\": %s (the form: "
                              "<n>[,<type>=<n>]...)",
                              qs, why);
            }
            r->want_qs = rs_qs_text(&probe);
            rs_qs_clear(&probe);
            if (!r->want_qs) {
                rs_free(r);
                return rs_oom(err);
            }
        }
    }
    {
        struct sigaction sa;
        r->guard = sigaction(SIGPIPE, NULL, &sa) != 0 || sa.sa_handler != SIG_IGN;
    }
    if (!(r->prefix = strdup(prefix))) {
        rs_free(r);
        return rs_oom(err);
    }
    for (s = 0; s < S_COUNT; s++) {
        for (i = 0; i < rs_script_count; i++)
            if (!strcmp(rs_script_name[i], script_names[s])) r->src[s] = rs_script_src[i];
        if (!r->src[s]) {
            rs_free(r);
            return wu_err(err, WEFT_EINVAL, "Redis store: script %s.lua is not built in",
                          script_names[s]);
        }
    }
    if ((rc = ru_parse_list(url, r->seeds, RU_SEEDS_MAX, &r->nseeds, err)) != 0) {
        rs_free(r);
        return rc;
    }
    r->url = r->seeds[0];
    *out = r;
    return rs_ensure(r, err);
}

const char *rs_prefix(const rs *r)
{
    return r->prefix;
}

const char *rs_url(const rs *r)
{
    return r->url.shown;
}

/* No round trip: between round trips the socket has nothing to read, so a
 * readable one was closed (or reset) by the server. */
void rs_revive(rs *r)
{
    struct pollfd p;
    if (r && r->cl && !r->fly) rs_cl_revive(r);
    if (!r || !r->c || r->fly) return;
    p.fd = r->c->fd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, 0) > 0) rs_drop(r);
}

int rs_broken(const rs *r)
{
    return r->broken;
}

/* ---- keys and names ---- */

/* dst = the strings up to NULL, one after the other, cut at cap - 1 bytes:
 * snprintf("%s%s...") without the formatting (keys are built per command). */
void rs_cat(char *dst, size_t cap, ...)
{
    va_list ap;
    const char *s;
    size_t n = 0;
    va_start(ap, cap);
    while ((s = va_arg(ap, const char *)) != NULL) {
        size_t l = strlen(s);
        if (l > cap - 1 - n) l = cap - 1 - n;
        memcpy(dst + n, s, l);
        n += l;
    }
    va_end(ap);
    dst[n] = 0;
}

void rs_k_exec(const rs *r, const char *id, const char *suffix, char key[KEY_MAX])
{
    rs_cat(key, KEY_MAX, r->prefix, "{", id, "}", suffix, (char *)NULL);
}

void rs_k_queue(const rs *r, const char *type, const char *which, char key[KEY_MAX])
{
    rs_cat(key, KEY_MAX, r->prefix, "{q:", type, "}:", which, (char *)NULL);
}

/* The partition of workflow id: its decider queue entry's and wake tokens'. */
int rs_part(const rs *r, const char *id)
{
    return r->parts_crc ? rc_part_of_crc(id, r->parts) : rc_part_of(id, r->parts);
}

void rs_k_part(const rs *r, int part, const char *suffix, char key[KEY_MAX])
{
    rs_cat(key, KEY_MAX, r->prefix, "{", r->ptag[part], "}", suffix, (char *)NULL);
}

/* Partition part of the decider queue: P{dq}:due with one partition. */
void rs_k_dq(const rs *r, int part, char key[KEY_MAX])
{
    rs_k_part(r, part, ":due", key);
}

void rs_k_ix(const rs *r, int part, char key[KEY_MAX])
{
    rs_k_part(r, part, ":ix", key);
}

/* Wake tokens for idle workers, per partition: Pwake with one partition. */
void rs_k_wake(const rs *r, int part, char key[KEY_MAX])
{
    if (r->parts == 1)
        rs_cat(key, KEY_MAX, r->prefix, "wake", (char *)NULL);
    else
        rs_cat(key, KEY_MAX, r->prefix, "{", r->ptag[part], "}:wake", (char *)NULL);
}

void rs_k_name(const rs *r, const char *kind, const char *name, char key[KEY_MAX])
{
    rs_cat(key, KEY_MAX, r->prefix, kind, name, (char *)NULL);
}

int rs_check_id(const char *id, weft_error *err)
{
    return st_check_name("workflow id", id, ID_MAX, 0, err);
}

static char *dup_range(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *rs_reply_dup(const redisReply *x)
{
    return dup_range(x->str, x->len);
}

int rs_is_str(const redisReply *x)
{
    return x && (x->type == REDIS_REPLY_STRING || x->type == REDIS_REPLY_STATUS);
}

/* Whether x is a workflow id as weft writes one: a string rs_check_id takes,
 * with no NUL inside. */
int rs_reply_id(const redisReply *x)
{
    return x && x->type == REDIS_REPLY_STRING && strlen(x->str) == x->len &&
           !rs_check_id(x->str, NULL);
}

void rs_copy_str(char *dst, size_t n, const redisReply *x)
{
    size_t len = x->len < n - 1 ? x->len : n - 1;
    memcpy(dst, x->str, len);
    dst[len] = 0;
}

/* A claim's queue member: "<wfid>|<taskid>". */
void rs_claim_member(const rs_lease *c, char *buf, size_t n)
{
    rs_cat(buf, n, c->workflow_id, "|", c->task_id, (char *)NULL);
}

/* One round trip. */
int rs_command(rs *r, weft_error *err, const char *fmt, ...)
{
    sigpipe_guard g;
    va_list ap;
    void *x = NULL;
    int rc;
    if ((rc = rs_ensure(r, err)) != 0) return rc;
    if (r->cl) {
        va_start(ap, fmt);
        rc = rs_cl_command(r, fmt, ap, err);
        va_end(ap);
        rs_cl_landed(r);
        return rc;
    }
    if (r->fly) {
        rs_flight_land(r);
        if ((rc = rs_ensure(r, err)) != 0) return rc;
    }
    va_start(ap, fmt);
    rc = redisvAppendCommand(r->c, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK) return rs_conn_fail(r, "command", err);
    rs_sigpipe_block(r, &g);
    rc = redisGetReply(r->c, &x);
    rs_sigpipe_restore(&g);
    if (rc != REDIS_OK) return rs_conn_fail(r, "command", err);
    rc = rs_is_err(x) ? rs_reply_err(r, x, "command", err) : 0;
    freeReplyObject(x);
    return rc;
}

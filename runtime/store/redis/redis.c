/*
 * The Redis store. Every call costs a fixed number of round trips, noted on
 * each function: commands that belong together are pipelined (appended,
 * then all replies read), and each multi-key change is one of the scripts in
 * runtime/redis, run with EVALSHA. The scripts are loaded on connect (in the
 * same round trip as AUTH/SELECT) and again, transparently, when Redis
 * answers NOSCRIPT (one more round trip, only then).
 *
 * A connection failure (refused, reset, timed out) frees the context and
 * marks the rs broken; the next call reconnects first. Nothing here sleeps:
 * the caller backs off.
 */
#include "store/redis/redis.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>
#include <json-c/json.h>

#include "base/redis_url.h"
#include "base/util.h"

/* Generated from the scripts in runtime/redis by build-aux/embed-scripts.sh. */
extern const char *const rs_script_name[];
extern const char *const rs_script_src[];
extern const size_t rs_script_count;

enum {
    S_CREATE,
    S_SAVE,
    S_FLUSH,
    S_CLAIM,
    S_RENEW,
    S_ACK,
    S_CHECK,
    S_REAP,
    S_DUE,
    S_UNQUEUE,
    S_COMMAND,
    S_COUNT
};
static const char *const script_names[S_COUNT] = {
    "create", "save", "flush", "claim",   "renew",   "ack",
    "check",  "reap", "due",   "unqueue", "command",
};

#define KEY_MAX 512
#define PREFIX_MAX 64
#define ID_MAX 64     /* workflow and task ids, with the NUL (rs_claim, rs_due) */
#define TYPE_MAX 128  /* task type names, with the NUL (rs_claim) */
#define NAME_MAX_ 257 /* definition names, idempotency keys, daemon ids */
#define STREAM_MAXLEN "1000"
#define REAP_BATCH 1000
#define FLUSH_BATCH 1000
#define EVENTS_COUNT "100"
#define DEFAULT_RETENTION_MS (7LL * 24 * 3600 * 1000)
#define DEFAULT_TIMEOUT_MS 5000

struct rs {
    redisContext *c;
    ru_url url; /* url.shown, the password masked, is the only form put in messages */
    char *prefix;
    int64_t retention_ms;
    int timeout_ms;
    int broken;
    unsigned rr; /* rotates which type rs_claim serves first */
    int early;   /* rs_opts.early_steps */
    int guard;   /* SIGPIPE is not ignored: block it around each exchange */
    struct flight *fly; /* a steps pipeline sent, its replies not read yet */
    rs_epoch *epoch;    /* shared; NULL = no epoch checks */
    wu_buf proto;       /* commands in the wire format, before they go to hiredis */
    const char *src[S_COUNT];
    char sha[S_COUNT][41];
};

static void flight_free(struct flight *f);
static void epoch_seen(rs *r, const redisReply *x, long long unfinished);

/* ---- commands ---- */

/* One command's arguments; strings are borrowed unless copied by cmd_addf/cmd_dup. */
typedef struct rs_cmd {
    int argc, cap, oom;
    const char **argv;
    size_t *len;
    char **own;
} rs_cmd;

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

static void cmd_addn(rs_cmd *c, const char *s, size_t n, char *owned)
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

static void cmd_add(rs_cmd *c, const char *s)
{
    cmd_addn(c, s, strlen(s), NULL);
}

static void cmd_dup(rs_cmd *c, const char *s)
{
    char *d = strdup(s);
    if (!d) {
        c->oom = 1;
        return;
    }
    cmd_addn(c, d, strlen(d), d);
}

/* The decimal digits of v into the end of buf[24]: where they start. */
static char *digits(char buf[24], unsigned long long v, int neg)
{
    char *p = buf + 23;
    *p = 0;
    do
        *--p = (char)('0' + v % 10);
    while (v /= 10);
    if (neg) *--p = '-';
    return p;
}

/* A number or other formatted argument (copied). The integer formats the
 * commands use are written here: snprintf was a few % of a worker's CPU. */
__attribute__((format(printf, 2, 3))) static void cmd_addf(rs_cmd *c, const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    int n;
    va_start(ap, fmt);
    if (!strcmp(fmt, "%d") || !strcmp(fmt, "%lld")) {
        long long v = fmt[1] == 'd' ? va_arg(ap, int) : va_arg(ap, long long);
        va_end(ap);
        cmd_dup(c, digits(buf, v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v, v < 0));
        return;
    }
    if (!strcmp(fmt, "%llu") || !strcmp(fmt, "%zu")) {
        unsigned long long v =
            fmt[1] == 'z' ? (unsigned long long)va_arg(ap, size_t) : va_arg(ap, unsigned long long);
        va_end(ap);
        cmd_dup(c, digits(buf, v, 0));
        return;
    }
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) {
        c->oom = 1;
        return;
    }
    cmd_dup(c, buf);
}

/* SCRIPT LOAD <source of script s>. */
static void cmd_script_load(rs_cmd *c, const rs *r, int s)
{
    cmd_add(c, "SCRIPT");
    cmd_add(c, "LOAD");
    cmd_add(c, r->src[s]);
}

/* EVALSHA <sha of script s> <nkeys>: the keys and arguments follow. */
static void cmd_script(rs_cmd *c, rs *r, int s, int nkeys)
{
    cmd_add(c, "EVALSHA");
    cmd_add(c, r->sha[s]);
    cmd_addf(c, "%d", nkeys);
}

static void cmd_free(rs_cmd *c)
{
    int i;
    for (i = 0; i < c->argc; i++)
        free(c->own[i]);
    free(c->argv);
    free(c->len);
    free(c->own);
    memset(c, 0, sizeof *c);
}

static void cmds_free(rs_cmd *c, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        cmd_free(&c[i]);
}

static void replies_free(redisReply **rep, size_t n)
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
static int append_cmds(rs *r, const rs_cmd *cmds, size_t n)
{
    wu_buf *b = &r->proto;
    char num[24];
    size_t i;
    int k, rc = 0;
    b->len = 0;
    for (i = 0; i < n && !rc; i++) {
        const char *p = digits(num, (unsigned long long)cmds[i].argc, 0);
        rc = wu_buf_add(b, "*", 1) || wu_buf_add(b, p, strlen(p)) || wu_buf_add(b, "\r\n", 2);
        for (k = 0; k < cmds[i].argc && !rc; k++) {
            p = digits(num, (unsigned long long)cmds[i].len[k], 0);
            rc = wu_buf_add(b, "$", 1) || wu_buf_add(b, p, strlen(p)) || wu_buf_add(b, "\r\n", 2) ||
                 wu_buf_add(b, cmds[i].argv[k], cmds[i].len[k]) || wu_buf_add(b, "\r\n", 2);
        }
    }
    if (rc || (b->len && redisAppendFormattedCommand(r->c, b->data, b->len) != REDIS_OK))
        return REDIS_ERR;
    if (b->cap > 1 << 20) wu_buf_free(b); /* a huge pipeline does not keep its buffer */
    return REDIS_OK;
}

/* ---- errors ---- */

static int oom(weft_error *err)
{
    return wu_err(err, WEFT_ENOMEM, "out of memory");
}

static int is_err(const redisReply *x)
{
    return x && x->type == REDIS_REPLY_ERROR;
}

/* Replies that say "not now" (a restarting or busy server): the caller backs off. */
static int transient(const char *msg)
{
    return !strncmp(msg, "LOADING", 7) || !strncmp(msg, "BUSY", 4) ||
           !strncmp(msg, "TRYAGAIN", 8) || !strncmp(msg, "MASTERDOWN", 10);
}

/* Drop the connection: the next call connects again (and reloads the
 * scripts). Steps in flight are forgotten: they stay in their outboxes. */
static void drop(rs *r)
{
    if (r->c) redisFree(r->c);
    r->c = NULL;
    r->broken = 1;
    flight_free(r->fly);
    r->fly = NULL;
}

/* An error reply about key as a WEFT_E* code and message. */
static int reply_err(rs *r, const redisReply *x, const char *key, weft_error *err)
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
    if (transient(msg))
        drop(r);
    return wu_err(err, WEFT_EIO, "%s: %s: %s", r->url.shown, key, msg);
}

static int bad_reply(rs *r, const char *key, weft_error *err)
{
    return wu_err(err, WEFT_EIO, "%s: %s: unexpected reply from Redis", r->url.shown, key);
}

/* The context failed: drop it (the next call reconnects) and say why. */
static int conn_fail(rs *r, const char *key, weft_error *err)
{
    char why[160];
    redisContext *c = r->c;
    if (c && c->err == REDIS_ERR_IO && !strcmp(c->errstr, strerror(EAGAIN)))
        snprintf(why, sizeof why, "no answer within %d ms", r->timeout_ms);
    else if (c && c->err)
        snprintf(why, sizeof why, "%s", c->errstr);
    else
        snprintf(why, sizeof why, "connection lost");
    drop(r);
    if (key) return wu_err(err, WEFT_EIO, "%s: %s: %s", r->url.shown, key, why);
    return wu_err(err, WEFT_EIO, "%s: %s", r->url.shown, why);
}

/* ---- round trips ---- */

/*
 * A write to a socket the server closed raises SIGPIPE, which would kill a
 * process that did not ignore it; hiredis uses write(2), so block the
 * signal for this thread around the exchange and swallow one it caused.
 * A process that ignores SIGPIPE when it opens the store (weftd does) is
 * spared those four system calls per round trip.
 */
typedef struct sigpipe_guard {
    sigset_t old;
    int was_pending, on;
} sigpipe_guard;

static void sigpipe_block(const rs *r, sigpipe_guard *g)
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

static void sigpipe_restore(sigpipe_guard *g)
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

static void flight_land(rs *r);
static int flight_read(rs *r, struct flight *f);
static void flight_finish(rs *r, struct flight *f);

/* Write what hiredis holds for the connection: 1, or 0 when it failed. */
static int write_out(rs *r)
{
    int done = 0;
    while (!done)
        if (redisBufferWrite(r->c, &done) != REDIS_OK) return 0;
    return 1;
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
            return oom(err);
        }
    r->fly = NULL;
    ok = append_cmds(r, cmds, n) == REDIS_OK;
    sigpipe_block(r, &g);
    if (ok && f) ok = write_out(r) && flight_read(r, f);
    for (i = 0; i < n && ok; i++) {
        void *x = NULL;
        if (redisGetReply(r->c, &x) != REDIS_OK) {
            ok = 0;
            break;
        }
        rep[i] = x;
    }
    sigpipe_restore(&g);
    if (!ok) {
        flight_free(f);
        return conn_fail(r, key, err);
    }
    if (f) flight_finish(r, f); /* may take a round trip: all replies are in */
    return 0;
}

static struct timeval ms_tv(int ms)
{
    struct timeval tv;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    return tv;
}

/* Connect, AUTH, SELECT and load the scripts: one round trip after the connect. */
static int rs_connect(rs *r, weft_error *err)
{
    struct timeval tv = ms_tv(r->timeout_ms);
    rs_cmd cmds[2 + S_COUNT];
    redisReply *rep[2 + S_COUNT];
    size_t n = 0, i, first_load;
    int rc = 0;

    r->broken = 1;
    r->c = r->url.path ? redisConnectUnixWithTimeout(r->url.path, tv)
                       : redisConnectWithTimeout(r->url.host, r->url.port, tv);
    if (!r->c) return oom(err);
    if (r->c->err) return conn_fail(r, NULL, err);
    if (redisSetTimeout(r->c, tv) != REDIS_OK) return conn_fail(r, NULL, err);
    if (!r->url.path) redisEnableKeepAlive(r->c);

    memset(cmds, 0, sizeof cmds);
    memset(rep, 0, sizeof rep);
    if (r->url.password) {
        cmd_add(&cmds[n], "AUTH");
        if (r->url.user) cmd_add(&cmds[n], r->url.user);
        cmd_add(&cmds[n], r->url.password);
        n++;
    }
    if (r->url.db) {
        cmd_add(&cmds[n], "SELECT");
        cmd_addf(&cmds[n], "%d", r->url.db);
        n++;
    }
    first_load = n;
    for (i = 0; i < S_COUNT; i++, n++)
        cmd_script_load(&cmds[n], r, (int)i);
    if (r->epoch) {
        /* a connect is when a restarted Redis shows: read the epoch with the loads */
        cmd_add(&cmds[n], "GET");
        cmd_addf(&cmds[n], "%sepoch", r->prefix);
        n++;
    }
    rc = exchange(r, cmds, n, rep, NULL, err);
    for (i = 0; i < first_load + S_COUNT && !rc; i++) {
        if (is_err(rep[i])) {
            /* AUTH/SELECT errors never echo the password; the reply does not hold it */
            const char *what = i < first_load ? (r->url.password && i == 0 ? "AUTH" : "SELECT")
                                              : script_names[i - first_load];
            rc = wu_err(err, WEFT_EIO, "%s: %s failed: %s", r->url.shown, what, rep[i]->str);
            if (transient(rep[i]->str))
                drop(r); /* e.g. still loading its data: connect again later */
        } else if (i >= first_load) {
            if (rep[i]->type != REDIS_REPLY_STRING || rep[i]->len != 40)
                rc = bad_reply(r, "SCRIPT LOAD", err);
            else
                memcpy(r->sha[i - first_load], rep[i]->str, 41);
        }
    }
    cmds_free(cmds, n);
    if (rc) {
        replies_free(rep, n);
        if (r->c) redisFree(r->c);
        r->c = NULL;
        r->broken = 1;
        return rc;
    }
    r->broken = 0;
    if (r->epoch) epoch_seen(r, rep[n - 1], -1);
    replies_free(rep, n);
    return 0;
}

/* Connect first if the last call lost the connection. */
static int ensure(rs *r, weft_error *err)
{
    if (r->c) {
        r->broken = 0;
        return 0;
    }
    return rs_connect(r, err);
}

static int script_of(const rs *r, const rs_cmd *c)
{
    int s;
    if (c->argc < 2 || strcmp(c->argv[0], "EVALSHA")) return -1;
    for (s = 0; s < S_COUNT; s++)
        if (!strcmp(c->argv[1], r->sha[s])) return s;
    return -1;
}

static int is_noscript(const redisReply *x)
{
    return is_err(x) && !strncmp(x->str, "NOSCRIPT", 8);
}

/*
 * Run cmds as one pipeline (one round trip). Replies go to rep[] (the caller
 * frees them with replies_free, also on failure). Commands answered NOSCRIPT
 * are sent again after loading their script: one more round trip, only then.
 */
static int rs_pipe(rs *r, rs_cmd *cmds, size_t n, redisReply **rep, const char *key,
                   weft_error *err)
{
    rs_cmd *re = NULL;
    redisReply **rr = NULL;
    size_t i, m = 0, nload = 0;
    int need[S_COUNT] = {0};
    int rc, s;

    memset(rep, 0, n * sizeof *rep);
    if ((rc = ensure(r, err)) != 0) return rc;
    if ((rc = exchange(r, cmds, n, rep, key, err)) != 0) return rc;
    for (i = 0; i < n; i++)
        if (is_noscript(rep[i]) && (s = script_of(r, &cmds[i])) >= 0 && !need[s]++) nload++;
    if (!nload) return 0;

    re = calloc(nload, sizeof *re);
    rr = calloc(nload + n, sizeof *rr);
    if (!re || !rr) {
        free(re);
        free(rr);
        return oom(err);
    }
    for (s = 0; s < S_COUNT; s++)
        if (need[s]) cmd_script_load(&re[m++], r, s);
    /* the loads, then the commands that failed, in one pipeline */
    rc = ensure(r, err);
    for (i = 0; !rc && i < m; i++)
        if (redisAppendCommandArgv(r->c, re[i].argc, re[i].argv, re[i].len) != REDIS_OK)
            rc = conn_fail(r, key, err);
    for (i = 0; !rc && i < n; i++)
        if (is_noscript(rep[i]) && script_of(r, &cmds[i]) >= 0 &&
            redisAppendCommandArgv(r->c, cmds[i].argc, cmds[i].argv, cmds[i].len) != REDIS_OK)
            rc = conn_fail(r, key, err);
    if (!rc) {
        sigpipe_guard g;
        size_t k = 0;
        sigpipe_block(r, &g);
        for (i = 0; i < m && !rc; i++) {
            void *x = NULL;
            if (redisGetReply(r->c, &x) != REDIS_OK) rc = -1;
            rr[k++] = x;
        }
        for (i = 0; i < n && !rc; i++) {
            void *x = NULL;
            if (!is_noscript(rep[i]) || script_of(r, &cmds[i]) < 0) continue;
            if (redisGetReply(r->c, &x) != REDIS_OK) {
                rc = -1;
                break;
            }
            freeReplyObject(rep[i]);
            rep[i] = x;
        }
        sigpipe_restore(&g);
        if (rc) rc = conn_fail(r, key, err);
        for (i = 0; i < k && !rc; i++)
            if (is_err(rr[i])) rc = reply_err(r, rr[i], "SCRIPT LOAD", err);
        replies_free(rr, k);
    }
    cmds_free(re, nload);
    free(re);
    free(rr);
    return rc;
}

/* One command: one round trip (two after a NOSCRIPT). */
static int rs_one(rs *r, rs_cmd *c, redisReply **rep, const char *key, weft_error *err)
{
    int rc = rs_pipe(r, c, 1, rep, key, err);
    cmd_free(c);
    if (!rc && is_err(*rep)) rc = reply_err(r, *rep, key, err);
    if (rc) replies_free(rep, 1);
    return rc;
}

/* rs_one, for a command whose reply must be an array (anything else: WEFT_EIO). */
static int rs_array(rs *r, rs_cmd *c, redisReply **x, const char *key, weft_error *err)
{
    int rc = rs_one(r, c, x, key, err);
    if (rc) return rc;
    if ((*x)->type != REDIS_REPLY_ARRAY) {
        replies_free(x, 1);
        return bad_reply(r, key, err);
    }
    return 0;
}

/* ---- open, close ---- */

void rs_free(rs *r)
{
    if (!r) return;
    if (r->fly) flight_land(r); /* its failures go back to the outboxes */
    if (r->c) redisFree(r->c);
    wu_buf_free(&r->proto);
    ru_clear(&r->url);
    free(r->prefix);
    free(r);
}

/* Connect: one round trip after the TCP/unix connect (AUTH, SELECT, SCRIPT LOAD). */
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

    if (!(r = calloc(1, sizeof *r))) return oom(err);
    r->retention_ms = opts->retention_ms ? opts->retention_ms : DEFAULT_RETENTION_MS;
    r->timeout_ms = opts->timeout_ms ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    r->early = opts->early_steps;
    r->epoch = opts->epoch;
    {
        struct sigaction sa;
        r->guard = sigaction(SIGPIPE, NULL, &sa) != 0 || sa.sa_handler != SIG_IGN;
    }
    if (!(r->prefix = strdup(prefix))) {
        rs_free(r);
        return oom(err);
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
    if ((rc = ru_parse(url, &r->url, err)) != 0) {
        rs_free(r);
        return rc;
    }
    *out = r;
    return rs_connect(r, err);
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
    if (!r || !r->c || r->fly) return;
    p.fd = r->c->fd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, 0) > 0) drop(r);
}

int rs_broken(const rs *r)
{
    return r->broken;
}

/* ---- the store's epoch ---- */

struct rs_epoch {
    pthread_mutex_t mu;
    char known[40];       /* the epoch this process works in; "" = none yet */
    long long unfinished; /* unfinished workflows at the last heartbeat; -1 = unknown */
    rs_loss last;         /* the last loss; count 0 = none */
    void (*lost)(void *ud, const rs_loss *l);
    void *ud;
};

rs_epoch *rs_epoch_new(void (*lost)(void *ud, const rs_loss *l), void *ud)
{
    rs_epoch *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    pthread_mutex_init(&e->mu, NULL);
    e->unfinished = -1;
    e->lost = lost;
    e->ud = ud;
    return e;
}

void rs_epoch_free(rs_epoch *e)
{
    if (!e) return;
    pthread_mutex_destroy(&e->mu);
    free(e);
}

void rs_epoch_last(rs_epoch *e, rs_loss *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->last;
    pthread_mutex_unlock(&e->mu);
}

/* Write a new epoch unless one is there (another process's): the one in
 * Redis afterwards goes to known, or "" when that failed (the next connect
 * or heartbeat tries again). Two round trips at most, at first use and
 * after a loss only. */
static void epoch_make(rs *r, char known[40])
{
    weft_error err = {0};
    redisReply *x = NULL;
    rs_cmd c = {0};
    char id[37], key[KEY_MAX];
    int rc;
    known[0] = 0;
    snprintf(key, sizeof key, "%sepoch", r->prefix);
    wu_uuid(id);
    cmd_add(&c, "SET");
    cmd_add(&c, key);
    cmd_add(&c, id);
    cmd_add(&c, "NX");
    if (rs_one(r, &c, &x, key, &err)) return;
    rc = x->type == REDIS_REPLY_STATUS;
    replies_free(&x, 1);
    if (rc) {
        snprintf(known, 40, "%s", id);
        return;
    }
    cmd_add(&c, "GET");
    cmd_add(&c, key);
    if (rs_one(r, &c, &x, key, &err)) return;
    if (x->type == REDIS_REPLY_STRING) snprintf(known, 40, "%.*s", (int)x->len, x->str);
    replies_free(&x, 1);
}

/*
 * The epoch key's value as read (x: a GET reply). Gone or changed while
 * this process knew one: the store lost its data (Redis restarted empty,
 * flushed, or another server). Counted, reported through the hook, and a
 * new epoch made. The epoch's lock is held across the check and the write,
 * so the many connections of one process count one loss once.
 */
static void epoch_seen(rs *r, const redisReply *x, long long unfinished)
{
    rs_epoch *e = r->epoch;
    rs_loss loss;
    int found = x && x->type == REDIS_REPLY_STRING, lost = 0;
    if (x && !found && x->type != REDIS_REPLY_NIL) return; /* not ours to judge */
    pthread_mutex_lock(&e->mu);
    if (found && e->known[0] && x->len == strlen(e->known) && !memcmp(x->str, e->known, x->len)) {
        /* counted in the same round trip: what a loss found later would take */
        if (unfinished >= 0) e->unfinished = unfinished;
        pthread_mutex_unlock(&e->mu);
        return;
    }
    memset(&loss, 0, sizeof loss);
    if (e->known[0]) {
        lost = 1;
        snprintf(loss.was, sizeof loss.was, "%s", e->known);
        loss.unfinished = e->unfinished;
        loss.at_ms = wu_now_ms();
        loss.count = e->last.count + 1;
        snprintf(loss.key, sizeof loss.key, "%sepoch", r->prefix);
    }
    if (found)
        snprintf(e->known, sizeof e->known, "%.*s", (int)(x->len < 39 ? x->len : 39), x->str);
    else
        epoch_make(r, e->known);
    if (lost) {
        loss.gone = !found;
        snprintf(loss.now, sizeof loss.now, "%s", e->known);
        e->last = loss;
    }
    e->unfinished = unfinished; /* of the new epoch (or -1, unknown) */
    pthread_mutex_unlock(&e->mu);
    if (lost && e->lost) e->lost(e->ud, &loss);
}

/* ---- keys and names ---- */

/* dst = the strings up to NULL, one after the other, cut at cap - 1 bytes:
 * snprintf("%s%s...") without the formatting (keys are built per command). */
static void cat(char *dst, size_t cap, ...)
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

static void k_exec(const rs *r, const char *id, const char *suffix, char key[KEY_MAX])
{
    cat(key, KEY_MAX, r->prefix, "{", id, "}", suffix, (char *)NULL);
}

static void k_queue(const rs *r, const char *type, const char *which, char key[KEY_MAX])
{
    cat(key, KEY_MAX, r->prefix, "{q:", type, "}:", which, (char *)NULL);
}

static void k_dq(const rs *r, char key[KEY_MAX])
{
    cat(key, KEY_MAX, r->prefix, "{dq}:due", (char *)NULL);
}

/* Wake tokens for idle workers: one list (single-key commands need no tag). */
static void k_wake(const rs *r, char key[KEY_MAX])
{
    cat(key, KEY_MAX, r->prefix, "wake", (char *)NULL);
}

#define WAKE_TOKENS_MAX "63" /* kept tokens: enough to wake every idle worker */

static void k_name(const rs *r, const char *kind, const char *name, char key[KEY_MAX])
{
    cat(key, KEY_MAX, r->prefix, kind, name, (char *)NULL);
}

/* Ids, task ids and types end up in members split at '|' and in fixed buffers. */
static int check_name(const char *what, const char *s, size_t max, int bar_ok, weft_error *err)
{
    if (!s || !*s) return wu_err(err, WEFT_EINVAL, "%s is empty", what);
    if (strlen(s) >= max)
        return wu_err(err, WEFT_EINVAL, "%s \"%.40s...\" is longer than %zu bytes", what, s,
                      max - 1);
    if (!bar_ok && strchr(s, '|'))
        return wu_err(err, WEFT_EINVAL, "%s \"%s\" contains '|'", what, s);
    return 0;
}

static int check_id(const char *id, weft_error *err)
{
    return check_name("workflow id", id, ID_MAX, 0, err);
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

static char *reply_dup(const redisReply *x)
{
    return dup_range(x->str, x->len);
}

static int is_str(const redisReply *x)
{
    return x && (x->type == REDIS_REPLY_STRING || x->type == REDIS_REPLY_STATUS);
}

static void copy_str(char *dst, size_t n, const redisReply *x)
{
    size_t len = x->len < n - 1 ? x->len : n - 1;
    memcpy(dst, x->str, len);
    dst[len] = 0;
}

static int check_claim(const rs_lease *c, weft_error *err);

/* A claim's queue member: "<wfid>|<taskid>". */
static void claim_member(const rs_lease *c, char *buf, size_t n)
{
    cat(buf, n, c->workflow_id, "|", c->task_id, (char *)NULL);
}

/* ---- outbox steps ---- */

static const char *const kind_names[] = {"push", "unqueue", "wake", "done"};

/* One outbox entry: a queue step and the fence of the save that decided it. */
typedef struct rs_entry {
    uint64_t fence;
    rs_step_kind kind;
    const char *type, *task;
    int64_t at;
    const char *lease; /* a push leased to the saver at once (its own steps only) */
    int64_t lease_until;
    char *raw;        /* "<fence>|<kind>|<type>|<taskid>|<at>", owned */
    char *buf;        /* owned copy the fields point into (parsed entries) */
} rs_entry;

static void entries_free(rs_entry *e, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        free(e[i].raw);
        free(e[i].buf);
    }
    free(e);
}

/* Parse an outbox member; 0, -1 when malformed, -2 when out of memory (raw
 * is kept either way). */
static int entry_parse(rs_entry *e, const redisReply *x)
{
    char *f[5], *p, *end;
    int i, k;
    memset(e, 0, sizeof *e);
    e->raw = reply_dup(x);
    e->buf = reply_dup(x);
    if (!e->raw || !e->buf) return -2; /* out of memory: not malformed */
    e->fence = strtoull(e->raw, NULL, 10);
    p = e->buf;
    for (i = 0; i < 5; i++) {
        f[i] = p;
        p = strchr(p, '|');
        if (i < 4) {
            if (!p) return -1;
            *p++ = 0;
        } else if (p) {
            return -1;
        }
    }
    for (k = 0; k < 4; k++)
        if (!strcmp(f[1], kind_names[k])) break;
    if (k == 4) return -1;
    e->kind = (rs_step_kind)k;
    e->type = f[2];
    e->task = f[3];
    errno = 0;
    e->at = strtoll(f[4], &end, 10);
    if (errno || *end || end == f[4]) return -1;
    if ((e->kind == RS_PUSH || e->kind == RS_UNQUEUE) && (!*e->type || !*e->task)) return -1;
    return 0;
}

/* The step as recorded after its fence: "<kind>|<type>|<taskid>|<at>". */
static char *step_text(const rs_step *s)
{
    const char *type = s->kind == RS_PUSH || s->kind == RS_UNQUEUE ? s->type : "";
    const char *task = s->kind == RS_PUSH || s->kind == RS_UNQUEUE ? s->task_id : "";
    long long at = s->kind == RS_PUSH || s->kind == RS_WAKE ? (long long)s->at : 0;
    size_t n = strlen(type) + strlen(task) + 48;
    char *t = malloc(n), num[24];
    if (t)
        cat(t, n, kind_names[s->kind], "|", type, "|", task, "|",
            digits(num, at < 0 ? 0 - (unsigned long long)at : (unsigned long long)at, at < 0),
            (char *)NULL);
    return t;
}

/* The outbox entry of step st recorded at fence ("<fence>|<step text>"),
 * pointing to st's strings. 0, or -1 when out of memory (e->raw NULL). */
static int step_entry(rs_entry *e, const rs_step *st, uint64_t fence)
{
    char *t = step_text(st), num[24];
    size_t len = t ? strlen(t) + 24 : 0;
    memset(e, 0, sizeof *e);
    e->fence = fence;
    e->kind = st->kind;
    e->type = st->type;
    e->task = st->task_id;
    e->at = st->at;
    e->lease = st->kind == RS_PUSH ? st->lease : NULL;
    e->lease_until = st->lease_until;
    if (t && (e->raw = malloc(len)))
        cat(e->raw, len, digits(num, fence, 0), "|", t, (char *)NULL);
    free(t);
    return e->raw ? 0 : -1;
}

static int check_step(const rs_step *s, weft_error *err)
{
    int rc;
    if ((unsigned)s->kind > RS_DONE)
        return wu_err(err, WEFT_EINVAL, "queue step: unknown kind %d", (int)s->kind);
    if (s->kind != RS_PUSH && s->kind != RS_UNQUEUE) return 0;
    if ((rc = check_name("task type", s->type, TYPE_MAX, 0, err)) != 0 ||
        (rc = check_name("task id", s->task_id, ID_MAX, 0, err)) != 0)
        return rc;
    return 0;
}

/* The commands applying e (idempotent) into c[0] (and c[1] for a lease):
 * how many; the key it touches into key. */
static int step_cmd(rs *r, const char *id, const rs_entry *e, rs_cmd *c, char key[KEY_MAX])
{
    char member[ID_MAX * 2 + 2];
    char k2[KEY_MAX], k3[KEY_MAX], k4[KEY_MAX];
    snprintf(member, sizeof member, "%s|%s", id, e->task ? e->task : "");
    switch (e->kind) {
    case RS_PUSH:
        if (e->lease) {
            /* eager: leased to the saver, never ready for anyone else */
            k_queue(r, e->type, "leases", key);
            cmd_add(&c[0], "ZADD");
            cmd_dup(&c[0], key);
            cmd_addf(&c[0], "%lld", (long long)e->lease_until);
            cmd_dup(&c[0], member);
            k_queue(r, e->type, "lease", k2);
            cmd_add(&c[1], "HSET");
            cmd_dup(&c[1], k2);
            cmd_dup(&c[1], member);
            cmd_dup(&c[1], e->lease);
            return 2;
        }
        k_queue(r, e->type, "ready", key);
        cmd_add(&c[0], "ZADD");
        cmd_dup(&c[0], key);
        cmd_addf(&c[0], "%lld", (long long)e->at);
        cmd_dup(&c[0], member);
        break;
    case RS_UNQUEUE:
        k_queue(r, e->type, "ready", key);
        k_queue(r, e->type, "leases", k2);
        k_queue(r, e->type, "lease", k3);
        k_queue(r, e->type, "reaped", k4);
        cmd_script(&c[0], r, S_UNQUEUE, 4);
        cmd_dup(&c[0], key);
        cmd_dup(&c[0], k2);
        cmd_dup(&c[0], k3);
        cmd_dup(&c[0], k4);
        cmd_dup(&c[0], member);
        break;
    case RS_WAKE:
        /* Always LT: a save's steps are applied after its script, so an older
         * save's "look again in 30 s" may arrive after a newer "look now" and
         * must not push it back. Only rs_due's hold moves an entry later; at
         * worst a workflow is looked at once more than it needs. */
        k_dq(r, key);
        cmd_add(&c[0], "ZADD");
        cmd_dup(&c[0], key);
        cmd_add(&c[0], "LT");
        cmd_addf(&c[0], "%lld", (long long)e->at);
        cmd_add(&c[0], id);
        break;
    case RS_DONE:
        k_dq(r, key);
        cmd_add(&c[0], "ZREM");
        cmd_dup(&c[0], key);
        cmd_add(&c[0], id);
        break;
    }
    return 1;
}

/* ack.lua (or renew/check) for a claim, into c. */
static void lease_cmd(rs *r, const rs_lease *cl, int s, int64_t expiry, rs_cmd *c)
{
    char k[KEY_MAX], member[ID_MAX * 2 + 2];
    claim_member(cl, member, sizeof member);
    cmd_script(c, r, s, s == S_CHECK ? 1 : s == S_RENEW ? 2 : 3);
    if (s != S_CHECK) {
        k_queue(r, cl->type, "leases", k);
        cmd_dup(c, k);
    }
    k_queue(r, cl->type, "lease", k);
    cmd_dup(c, k);
    if (s == S_ACK) {
        k_queue(r, cl->type, "reaped", k);
        cmd_dup(c, k);
    }
    cmd_dup(c, member);
    cmd_add(c, cl->lease);
    if (s == S_RENEW) cmd_addf(c, "%lld", (long long)expiry);
}

/* Drop a claim known to be current (the caller's own, taken less than half
 * a lease ago): plain commands, no token check. Three, two for an eager
 * lease (never reaped). */
static size_t drop_cmds(rs *r, const rs_lease *cl, rs_cmd *c)
{
    static const char *const which[3] = {"leases", "lease", "reaped"};
    char k[KEY_MAX], member[ID_MAX * 2 + 2];
    int i, n = cl->never_reaped ? 2 : 3;
    claim_member(cl, member, sizeof member);
    for (i = 0; i < n; i++) {
        k_queue(r, cl->type, which[i], k);
        cmd_add(&c[i], i == 0 ? "ZREM" : "HDEL");
        cmd_dup(&c[i], k);
        cmd_dup(&c[i], member);
    }
    return (size_t)n;
}

/*
 * After a pipeline that applied e[0..n) (their replies in rep[0..n)) and
 * trimmed them from the outbox: record again the ones Redis refused, so the
 * sweeper retries them (one more round trip, only then). Returns the first
 * failure, or 0.
 */
static int steps_check(rs *r, const char *id, const rs_entry *e, size_t n, redisReply **rep,
                       weft_error *err)
{
    char key[KEY_MAX], out_key[KEY_MAX];
    rs_cmd c = {0};
    size_t i;
    int rc = 0;
    for (i = 0; i < n; i++) {
        if (!is_err(rep[i])) continue;
        if (!rc) {
            rs_cmd tmp[2];
            memset(tmp, 0, sizeof tmp);
            step_cmd(r, id, &e[i], tmp, key);
            cmds_free(tmp, 2);
            rc = reply_err(r, rep[i], key, err);
            k_exec(r, id, ":out", out_key);
            cmd_add(&c, "ZADD");
            cmd_add(&c, out_key);
        }
        cmd_addf(&c, "%llu", (unsigned long long)e[i].fence);
        cmd_add(&c, e[i].raw);
    }
    if (rc) {
        /* with an expiry: a finished execution's outbox must not outlive it
         * (a running one applies it at its next save or sweep) */
        rs_cmd two[2];
        redisReply *y[2];
        weft_error ignored;
        memset(two, 0, sizeof two);
        two[0] = c;
        memset(&c, 0, sizeof c);
        cmd_add(&two[1], "PEXPIRE");
        cmd_add(&two[1], out_key);
        cmd_addf(&two[1], "%lld", (long long)r->retention_ms);
        rs_pipe(r, two, 2, y, out_key, &ignored);
        replies_free(y, 2);
        cmds_free(two, 2);
    }
    cmd_free(&c);
    return rc;
}

/* The steps of one execution to apply: its entries, the command trimming
 * them from its outbox, and claims to drop. */
typedef struct step_set {
    const char *id;
    const rs_entry *e;
    size_t n;
    rs_cmd *trim;
    const rs_lease *acks;
    size_t nacks;
    size_t ntrim;     /* set by steps_build: 1, or 0 when the trim has nothing to remove */
    size_t nackcmds;  /* set by steps_build: the acks' commands */
    redisReply **rep; /* out: per entry, the reply that tells whether it applied */
} step_set;

/*
 * The commands of a steps pipeline into *cmds_out (*k_out of them): the
 * nhead commands of head, for each set the commands applying its entries,
 * its trim and its acks, and a wake token when any of it is work visible
 * now. *first_out[i] is 1 + the number of commands of the entry whose first
 * command is i. heads and trims are consumed (freed), also on failure.
 */
static int steps_build(rs *r, rs_cmd *head, size_t nhead, step_set *sets, size_t nsets,
                       rs_cmd **cmds_out, size_t *k_out, size_t **first_out, weft_error *err)
{
    char key[KEY_MAX], wake_key[KEY_MAX];
    size_t total = nhead, k = 0, i, j;
    int64_t now = wu_now_ms();
    int wake = 0;
    rs_cmd *cmds;
    size_t *first;
    for (i = 0; i < nsets; i++) {
        total += 2 * sets[i].n + 1 + 3 * sets[i].nacks;
        for (j = 0; j < sets[i].n && !wake; j++)
            wake = (sets[i].e[j].kind == RS_PUSH && !sets[i].e[j].lease &&
                    sets[i].e[j].at <= now) ||
                   (sets[i].e[j].kind == RS_WAKE && sets[i].e[j].at <= now);
    }
    /* work that is visible now wakes an idle worker (two more commands in the
     * same pipeline: no extra round trip) */
    total += wake ? 2 : 0;
    cmds = calloc(total, sizeof *cmds);
    first = calloc(total + 1, sizeof *first);
    if (!cmds || !first) {
        free(cmds);
        free(first);
        for (i = 0; i < nhead; i++)
            cmd_free(&head[i]);
        for (i = 0; i < nsets; i++)
            cmd_free(sets[i].trim);
        return oom(err);
    }
    for (i = 0; i < nhead; i++)
        cmds[k++] = head[i];
    for (i = 0; i < nsets; i++) {
        step_set *s = &sets[i];
        for (j = 0; j < s->n; j++) {
            size_t m = (size_t)step_cmd(r, s->id, &s->e[j], &cmds[k], key);
            first[k] = 1 + m;
            k += m;
        }
        /* the trim: ZREM of the applied entries (a ZREM of none is skipped) */
        s->ntrim = s->trim->argc > 2 || s->trim->oom;
        if (s->ntrim)
            cmds[k++] = *s->trim;
        else
            cmd_free(s->trim);
        for (j = 0, s->nackcmds = 0; j < s->nacks; j++)
            s->nackcmds += drop_cmds(r, &s->acks[j], &cmds[k + s->nackcmds]);
        k += s->nackcmds;
        s->acks = NULL; /* not needed after: a flight outlives the caller's acks */
    }
    if (wake) {
        k_wake(r, wake_key);
        cmd_add(&cmds[k], "LPUSH");
        cmd_dup(&cmds[k], wake_key);
        cmd_add(&cmds[k++], "1");
        cmd_add(&cmds[k], "LTRIM");
        cmd_dup(&cmds[k], wake_key);
        cmd_add(&cmds[k], "0");
        cmd_add(&cmds[k++], WAKE_TOKENS_MAX);
    }
    *cmds_out = cmds;
    *k_out = k;
    *first_out = first;
    return 0;
}

/*
 * The replies of a steps pipeline built by steps_build: the heads' to
 * head_rep[], each entry's (that of its first failing command, else its
 * first) to its set's rep[]; the rest are freed. Returns the first failed
 * trim's error, or 0.
 */
static int steps_take(rs *r, redisReply **rep, size_t k, const size_t *first, size_t nhead,
                      redisReply **head_rep, step_set *sets, size_t nsets, weft_error *err)
{
    size_t i, j;
    int rc = 0;
    for (i = 0; i < nhead; i++) {
        head_rep[i] = rep[i];
        rep[i] = NULL;
    }
    for (j = 0; j < nsets; j++) {
        step_set *s = &sets[j];
        size_t e;
        for (e = 0; e < s->n; e++) {
            size_t m = first[i] - 1, q, pick = i;
            for (q = i; q < i + m; q++)
                if (is_err(rep[q]) && !is_err(rep[pick])) pick = q;
            s->rep[e] = rep[pick];
            rep[pick] = NULL;
            i += m;
        }
        if (!rc && s->ntrim && is_err(rep[i])) rc = reply_err(r, rep[i], s->id, err);
        i += s->ntrim + s->nackcmds; /* the trim, the acks */
    }
    replies_free(rep, k);
    return rc;
}

/* steps_build's commands sent now, their replies by steps_take. */
static int steps_now(rs *r, rs_cmd *cmds, size_t k, const size_t *first, size_t nhead,
                     redisReply **head_rep, step_set *sets, size_t nsets, weft_error *err)
{
    redisReply **rep = calloc(k + 1, sizeof *rep);
    int rc;
    if (!rep) return oom(err);
    if ((rc = rs_pipe(r, cmds, k, rep, nsets == 1 ? sets[0].id : "steps", err)) == 0)
        rc = steps_take(r, rep, k, first, nhead, head_rep, sets, nsets, err);
    replies_free(rep, k);
    free(rep);
    return rc;
}

/* One pipeline: steps_build's commands, their replies by steps_take. */
static int steps_apply(rs *r, rs_cmd *head, size_t nhead, redisReply **head_rep, step_set *sets,
                       size_t nsets, weft_error *err)
{
    rs_cmd *cmds;
    size_t *first, k;
    int rc;
    if ((rc = steps_build(r, head, nhead, sets, nsets, &cmds, &k, &first, err)) != 0) return rc;
    rc = steps_now(r, cmds, k, first, nhead, head_rep, sets, nsets, err);
    cmds_free(cmds, k);
    free(cmds);
    free(first);
    return rc;
}

/* Entries that point into the caller's steps (their buf is NULL) get copies
 * of their strings, so they outlive the call (a flight). 0 or -1. */
static int entries_own(rs_entry *e, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        const char *f[3] = {e[i].type, e[i].task, e[i].lease};
        size_t l[3], k, total = 0;
        char *b;
        if (e[i].buf) continue;
        for (k = 0; k < 3; k++)
            total += (l[k] = f[k] ? strlen(f[k]) + 1 : 0);
        if (!total) continue;
        if (!(b = e[i].buf = malloc(total))) return -1;
        for (k = 0; k < 3; k++)
            if (f[k]) {
                memcpy(b, f[k], l[k]);
                f[k] = b;
                b += l[k];
            }
        e[i].type = f[0];
        e[i].task = f[1];
        e[i].lease = f[2];
    }
    return 0;
}

/*
 * Steps sent early (rs_opts.early_steps): the pipeline is written now and
 * its replies read at the start of the next round trip, so the saver goes on
 * (runs the tasks it leased) while Redis applies them. The flight owns its
 * sets, copies of their ids, their entries and reply arrays.
 */
typedef struct flight {
    size_t k, *first;   /* the commands: as steps_build made them */
    redisReply **rep;   /* their k replies, once read */
    step_set *sets;
    size_t nsets;
    char **ids;         /* the sets' ids */
    rs_entry **es;      /* entry arrays, each ending with raw NULL (NULL ones skipped) */
    size_t nes;
} flight;

static void flight_free(flight *f)
{
    size_t i, n;
    if (!f) return;
    replies_free(f->rep, f->k);
    free(f->rep);
    for (i = 0; i < f->nsets; i++) {
        replies_free(f->sets[i].rep, f->sets[i].n);
        free(f->sets[i].rep);
        free(f->ids[i]);
    }
    for (i = 0; i < f->nes; i++)
        if (f->es[i]) {
            for (n = 0; f->es[i][n].raw; n++) {}
            entries_free(f->es[i], n);
        }
    free(f->ids);
    free(f->es);
    free(f->sets);
    free(f->first);
    free(f);
}

/* A flight of the nsets sets built into k commands: it takes sets, es and
 * first, and copies what stays the caller's (the ids, the strings the
 * entries point to). NULL when out of memory, having taken nothing. */
static flight *flight_new(step_set *sets, size_t nsets, rs_entry **es, size_t nes, size_t k,
                          size_t *first)
{
    flight *f = calloc(1, sizeof *f);
    size_t i;
    if (!f || !(f->rep = calloc(k + 1, sizeof *f->rep)) ||
        !(f->ids = calloc(nsets + 1, sizeof *f->ids)))
        goto fail;
    for (i = 0; i < nsets; i++)
        if (entries_own((rs_entry *)sets[i].e, sets[i].n) || !(f->ids[i] = strdup(sets[i].id)))
            goto fail;
    for (i = 0; i < nsets; i++)
        sets[i].id = f->ids[i];
    f->k = k;
    f->first = first;
    f->sets = sets;
    f->nsets = nsets;
    f->es = es;
    f->nes = nes;
    return f;
fail:
    for (i = 0; f && f->ids && i < nsets; i++)
        free(f->ids[i]);
    if (f) {
        free(f->ids);
        free(f->rep);
    }
    free(f);
    return NULL;
}

/* Write f's commands without reading; on success r->fly = f. On failure the
 * steps stay in their outboxes (the sweeper applies them). */
static void flight_send(rs *r, flight *f, const rs_cmd *cmds)
{
    sigpipe_guard g;
    weft_error ignored;
    size_t i;
    int ok = 1;
    for (i = 0; i < f->k && ok; i++)
        ok = !cmds[i].oom;
    ok = ok && append_cmds(r, cmds, f->k) == REDIS_OK;
    sigpipe_block(r, &g);
    ok = ok && write_out(r);
    sigpipe_restore(&g);
    if (!ok) {
        conn_fail(r, "steps", &ignored);
        flight_free(f);
        return;
    }
    r->fly = f;
}

/* SCRIPT LOAD of every script: one round trip. */
static void scripts_load(rs *r)
{
    rs_cmd c[S_COUNT];
    redisReply *x[S_COUNT];
    weft_error ignored;
    int s;
    memset(c, 0, sizeof c);
    for (s = 0; s < S_COUNT; s++)
        cmd_script_load(&c[s], r, s);
    rs_pipe(r, c, S_COUNT, x, "SCRIPT LOAD", &ignored);
    replies_free(x, S_COUNT);
    cmds_free(c, S_COUNT);
}

/* Read the replies of the steps in flight f: 1, or 0 when the connection failed. */
static int flight_read(rs *r, flight *f)
{
    size_t i;
    for (i = 0; i < f->k; i++) {
        void *x = NULL;
        if (redisGetReply(r->c, &x) != REDIS_OK) return 0;
        f->rep[i] = x;
    }
    return 1;
}

/* After flight_read: put back in their outboxes the steps Redis refused
 * (a round trip, only then), and free f. A step refused for a script Redis
 * no longer has (SCRIPT FLUSH, a restart) reloads the scripts, so the next
 * save applies it. */
static void flight_finish(rs *r, flight *f)
{
    weft_error ignored;
    size_t i;
    for (i = 0; i < f->k; i++)
        if (is_noscript(f->rep[i])) {
            scripts_load(r);
            break;
        }
    steps_take(r, f->rep, f->k, f->first, 0, NULL, f->sets, f->nsets, &ignored);
    for (i = 0; i < f->nsets; i++)
        steps_check(r, f->sets[i].id, f->sets[i].e, f->sets[i].n, f->sets[i].rep, &ignored);
    flight_free(f);
}

/* Read the replies of the steps in flight now. A lost connection forgets
 * them (they are in the outboxes already) and leaves r->c NULL. */
static void flight_land(rs *r)
{
    flight *f = r->fly;
    weft_error ignored;
    r->fly = NULL;
    if (flight_read(r, f)) {
        flight_finish(r, f);
    } else {
        conn_fail(r, "steps", &ignored);
        flight_free(f);
    }
}

/* steps_apply for one execution's entries. */
static int steps_run(rs *r, const char *id, rs_cmd *head, rs_cmd *trim, const rs_entry *e, size_t n,
                     redisReply **head_rep, redisReply **step_rep, weft_error *err)
{
    step_set s = {id, e, n, trim, NULL, 0, 0, 0, step_rep};
    return steps_apply(r, head, head ? 1 : 0, head_rep, &s, 1, err);
}

/* ---- executions ---- */

/* Events (one-line JSON texts) as one argument, a line each, for a
 * script's single stream entry and message; NULL when there are none (or no
 * memory: oom set). */
static char *events_arg(const char *id, const char *const *ev, size_t n, int *oom,
                        weft_error *err)
{
    size_t i, len = 0;
    char *t, *p;
    for (i = 0; i < n; i++) {
        if (!ev[i])
            return wu_err(err, WEFT_EINVAL, "workflow %s: event %zu is NULL", id, i), NULL;
        if (strchr(ev[i], '\n'))
            return wu_err(err, WEFT_EINVAL, "workflow %s: event %zu spans lines", id, i), NULL;
        len += strlen(ev[i]) + 1;
    }
    if (n == 0) return NULL;
    if (!(p = t = malloc(len))) {
        *oom = 1;
        return NULL;
    }
    for (i = 0; i < n; i++) {
        size_t l = strlen(ev[i]);
        memcpy(p, ev[i], l);
        p += l;
        *p++ = '\n';
    }
    p[-1] = 0;
    return t;
}


/* The "status" of a document, or RUNNING. */
static char *doc_status(const char *doc)
{
    json_object *j = json_tokener_parse(doc), *s;
    char *out;
    if (j && json_object_object_get_ex(j, "status", &s) && json_object_is_type(s, json_type_string))
        out = strdup(json_object_get_string(s));
    else
        out = strdup("RUNNING");
    json_object_put(j);
    return out;
}

/* One round trip for all n: create.lua, ZADD the decider queue and trim the
 * outbox for each, pipelined. */
int rs_exec_create_many(rs *r, rs_create *cr, size_t n, weft_error *err)
{
    rs_cmd *head = calloc(n + 1, sizeof *head), *trim = calloc(n + 1, sizeof *trim);
    redisReply **hrep = calloc(n + 1, sizeof *hrep);
    rs_entry **es = calloc(n + 1, sizeof *es);
    step_set *sets = calloc(n + 1, sizeof *sets);
    size_t *at = calloc(n + 1, sizeof *at);
    size_t i, j, m = 0;
    int rc = 0;

    if (!head || !trim || !hrep || !es || !sets || !at) {
        rc = oom(err);
        goto out;
    }
    for (i = 0; i < n; i++) {
        char h[KEY_MAX], out[KEY_MAX], ev[KEY_MAX];
        weft_error e2 = {0};
        char *status = NULL, *evs = NULL;
        rs_create *c = &cr[i];
        rs_step wake = {RS_WAKE, NULL, NULL, c->due_ms, NULL, 0};
        const rs_step *st = c->nsteps ? c->steps : &wake;
        size_t nst = c->nsteps ? c->nsteps : 1;
        rs_entry *e = NULL;
        c->why[0] = 0;
        if ((c->rc = check_id(c->id, &e2)) == 0 && (!c->doc || !c->def || !c->defkey))
            c->rc = wu_err(&e2, WEFT_EINVAL, "workflow %s: no document or definition to store",
                           c->id);
        for (j = 0; j < c->nsteps && c->rc == 0; j++)
            if ((c->rc = check_step(&c->steps[j], &e2)) != 0)
                wu_err_prefix(&e2, "workflow %s: ", c->id);
        if (c->rc == 0) {
            int nomem = 0;
            evs = events_arg(c->id, c->events, c->nevents, &nomem, &e2);
            c->rc = e2.code ? e2.code : nomem ? oom(&e2) : 0;
        }
        if (c->rc == 0 && !(status = c->status ? strdup(c->status) : doc_status(c->doc)))
            c->rc = oom(&e2);
        if (c->rc == 0 && !(es[m] = e = calloc(nst + 1, sizeof *e))) c->rc = oom(&e2);
        if (c->rc) {
            free(status);
            free(evs);
            snprintf(c->why, sizeof c->why, "%s", e2.msg);
            continue;
        }
        k_exec(r, c->id, "", h);
        k_exec(r, c->id, ":out", out);
        k_exec(r, c->id, ":ev", ev);
        cmd_script(&head[m], r, S_CREATE, 3);
        cmd_dup(&head[m], h);
        cmd_dup(&head[m], out);
        cmd_dup(&head[m], ev);
        cmd_add(&head[m], c->doc);
        cmd_add(&head[m], c->def);
        cmd_add(&head[m], c->defkey);
        cmd_addn(&head[m], status, strlen(status), status);
        cmd_add(&head[m], STREAM_MAXLEN);
        cmd_addf(&head[m], "%zu", nst);
        /* the outbox entries at fence 1 (a WAKE is ZADD LT, so a create of
         * a taken id can only make that execution due earlier); the script
         * gets their text after the "1|" */
        for (j = 0; j < nst; j++)
            if (step_entry(&e[j], &st[j], 1))
                head[m].oom = 1;
            else
                cmd_add(&head[m], e[j].raw + 2);
        if (evs) cmd_addn(&head[m], evs, strlen(evs), evs);
        /* exactly its own entries: a create of a taken id leaves that
         * execution's outbox alone */
        cmd_add(&trim[m], "ZREM");
        cmd_dup(&trim[m], out);
        for (j = 0; j < nst; j++)
            if (e[j].raw) cmd_add(&trim[m], e[j].raw);
        sets[m].id = c->id;
        sets[m].e = e;
        sets[m].n = nst;
        sets[m].trim = &trim[m];
        if (!(sets[m].rep = calloc(nst + 1, sizeof *sets[m].rep))) head[m].oom = 1;
        at[m++] = i;
    }
    if (m == 0) goto out;
    rc = steps_apply(r, head, m, hrep, sets, m, err);
    for (i = 0; i < m; i++) {
        rs_create *c = &cr[at[i]];
        weft_error e2 = {0};
        char h[KEY_MAX];
        k_exec(r, c->id, "", h);
        if (rc)
            c->rc = rc, snprintf(c->why, sizeof c->why, "%s", err->msg);
        else if (is_err(hrep[i]))
            c->rc = reply_err(r, hrep[i], h, &e2);
        else if (!hrep[i] || hrep[i]->type != REDIS_REPLY_INTEGER)
            c->rc = bad_reply(r, h, &e2);
        else if (hrep[i]->integer == 0)
            c->rc = wu_err(&e2, WEFT_EEXIST, "workflow %s already exists", c->id);
        else /* a refused step waits in the outbox */
            steps_check(r, c->id, sets[i].e, sets[i].n, sets[i].rep, &e2);
        if (c->rc && !rc) snprintf(c->why, sizeof c->why, "%s", e2.msg);
    }
    replies_free(hrep, m);
out:
    for (i = 0; i < m; i++) {
        if (sets[i].rep) replies_free(sets[i].rep, sets[i].n);
        free(sets[i].rep);
        entries_free(es[i], sets[i].n);
    }
    free(head);
    free(trim);
    free(hrep);
    free(es);
    free(sets);
    free(at);
    return rc;
}

int rs_exec_create(rs *r, const char *id, const char *doc, const char *def, const char *defkey,
                   int64_t due_ms, weft_error *err)
{
    rs_create c;
    int rc;
    memset(&c, 0, sizeof c);
    c.id = id;
    c.doc = doc;
    c.def = def;
    c.defkey = defkey;
    c.due_ms = due_ms;
    if ((rc = rs_exec_create_many(r, &c, 1, err)) != 0) return rc;
    if (c.rc) return wu_err(err, c.rc, "%s", c.why);
    return 0;
}

void rs_exec_clear(rs_exec *e)
{
    if (!e) return;
    free(e->doc);
    free(e->def);
    free(e->defkey);
    free(e->status);
    free(e->cmd);
    memset(e, 0, sizeof *e);
}

/* The fields a load reads, in exec_reply's order (def after them when asked for). */
static const char *const load_names[] = {"doc", "defkey", "status", "fence", "cmd", NULL};

static void load_fields(rs_cmd *c)
{
    const char *const *f;
    for (f = load_names; *f; f++)
        cmd_add(c, *f);
}

/* An HMGET doc defkey status fence cmd [def] reply into out: 0, WEFT_ENOTFOUND,
 * WEFT_EINVAL or WEFT_EIO. */
static int exec_reply(rs *r, const char *id, redisReply *x, int want_def, rs_exec *out,
                      weft_error *err)
{
    char h[KEY_MAX];
    redisReply **el;
    memset(out, 0, sizeof *out);
    k_exec(r, id, "", h);
    if (is_err(x)) return reply_err(r, x, h, err);
    if (x->type != REDIS_REPLY_ARRAY || x->elements != (size_t)(want_def ? 6 : 5))
        return bad_reply(r, h, err);
    el = x->element;
    if (el[0]->type != REDIS_REPLY_STRING) return wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id);
    if (el[3]->type != REDIS_REPLY_STRING || (want_def && el[5]->type != REDIS_REPLY_STRING))
        return wu_err(err, WEFT_EINVAL, "%s: %s: execution without %s", r->url.shown, h,
                      el[3]->type != REDIS_REPLY_STRING ? "a fence" : "a definition");
    out->doc = reply_dup(el[0]);
    out->defkey = el[1]->type == REDIS_REPLY_STRING ? reply_dup(el[1]) : strdup("");
    out->status = el[2]->type == REDIS_REPLY_STRING ? reply_dup(el[2]) : strdup("");
    out->fence = strtoull(el[3]->str, NULL, 10);
    if (el[4]->type == REDIS_REPLY_STRING) out->cmd = reply_dup(el[4]);
    if (want_def) out->def = reply_dup(el[5]);
    if (!out->doc || !out->defkey || !out->status || (want_def && !out->def) ||
        (el[4]->type == REDIS_REPLY_STRING && !out->cmd)) {
        rs_exec_clear(out);
        return oom(err);
    }
    return 0;
}

/* One round trip: HMGET. */
int rs_exec_load(rs *r, const char *id, int want_def, rs_exec *out, weft_error *err)
{
    char h[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = check_id(id, err)) != 0) return rc;
    k_exec(r, id, "", h);
    cmd_add(&c, "HMGET");
    cmd_add(&c, h);
    load_fields(&c);
    if (want_def) cmd_add(&c, "def");
    if ((rc = rs_one(r, &c, &x, h, err)) != 0) return rc;
    rc = exec_reply(r, id, x, want_def, out, err);
    replies_free(&x, 1);
    return rc;
}

/* One round trip: HGET def and EXISTS, pipelined. */
int rs_exec_def(rs *r, const char *id, char **def, weft_error *err)
{
    char h[KEY_MAX];
    rs_cmd c[2];
    redisReply *x[2];
    int rc;

    *def = NULL;
    if ((rc = check_id(id, err)) != 0) return rc;
    k_exec(r, id, "", h);
    memset(c, 0, sizeof c);
    cmd_add(&c[0], "HGET");
    cmd_add(&c[0], h);
    cmd_add(&c[0], "def");
    cmd_add(&c[1], "EXISTS");
    cmd_add(&c[1], h);
    rc = rs_pipe(r, c, 2, x, h, err);
    cmds_free(c, 2);
    if (!rc && is_err(x[0]))
        rc = reply_err(r, x[0], h, err);
    else if (!rc && x[0]->type == REDIS_REPLY_STRING && !(*def = reply_dup(x[0])))
        rc = oom(err);
    else if (!rc && x[0]->type != REDIS_REPLY_STRING)
        rc = x[1]->type == REDIS_REPLY_INTEGER && x[1]->integer == 0
                 ? wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id)
                 : wu_err(err, WEFT_EINVAL, "%s: %s: execution without a definition", rs_url(r), h);
    replies_free(x, 2);
    return rc;
}

/* save.lua for one save into c (checked first: s->rc on bad input). */
static int save_cmd(rs *r, rs_save *s, rs_cmd *c, weft_error *err)
{
    char h[KEY_MAX], out[KEY_MAX], evk[KEY_MAX], *ev;
    size_t i;
    int rc;
    if ((rc = check_id(s->id, err)) != 0) return rc;
    if (!s->doc || !s->status)
        return wu_err(err, WEFT_EINVAL, "workflow %s: no document or status to save", s->id);
    for (i = 0; i < s->nsteps; i++)
        if ((rc = check_step(&s->steps[i], err)) != 0)
            return wu_err_prefix(err, "workflow %s: ", s->id);
    for (i = 0; i < s->nacks; i++)
        if ((rc = check_claim(&s->acks[i], err)) != 0) return rc;
    err->code = 0;
    ev = events_arg(s->id, s->events, s->nevents, &c->oom, err);
    if (err->code) return err->code;
    k_exec(r, s->id, "", h);
    k_exec(r, s->id, ":out", out);
    k_exec(r, s->id, ":ev", evk);
    cmd_script(c, r, S_SAVE, 3);
    cmd_dup(c, h);
    cmd_dup(c, out);
    cmd_dup(c, evk);
    if (s->fence)
        cmd_addf(c, "%llu", (unsigned long long)s->fence);
    else if (s->loaded_fence) /* unfenced: the last writer wins, but not over an operator */
        cmd_addf(c, "*%llu", (unsigned long long)s->loaded_fence);
    else
        cmd_add(c, "*");
    cmd_add(c, s->doc);
    cmd_add(c, s->status);
    cmd_add(c, s->terminal ? "1" : s->revive ? "2" : "0");
    cmd_addf(c, "%lld", (long long)r->retention_ms);
    cmd_add(c, STREAM_MAXLEN);
    cmd_dup(c, evk);
    cmd_addf(c, "%zu", s->nsteps);
    cmd_add(c, s->cmd ? s->cmd : "");
    for (i = 0; i < s->nsteps; i++) {
        char *t = step_text(&s->steps[i]);
        if (!t)
            c->oom = 1;
        else
            cmd_addn(c, t, strlen(t), t);
    }
    if (ev) cmd_addn(c, ev, strlen(ev), ev);
    return 0;
}

/*
 * save.lua's reply: s->rc and s->new_fence, and on success the entries to
 * apply (left by earlier saves, then this save's steps) in *e / *n.
 */
static void save_reply(rs *r, rs_save *s, redisReply *x, rs_entry **e_out, size_t *n_out,
                       int *whole)
{
    char h[KEY_MAX];
    weft_error err = {0};
    rs_entry *e;
    size_t i, nleft, n = 0;
    uint64_t nf;
    *e_out = NULL;
    *n_out = 0;
    *whole = 0;
    k_exec(r, s->id, "", h);
    if (is_err(x)) {
        s->rc = reply_err(r, x, h, &err);
    } else if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 ||
               x->element[0]->type != REDIS_REPLY_INTEGER) {
        s->rc = bad_reply(r, h, &err);
    } else if (x->element[0]->integer == -1) {
        s->rc = wu_err(&err, WEFT_ENOTFOUND, "no workflow %s", s->id);
    } else if (x->element[0]->integer == 0 && x->elements > 2) {
        s->rc = wu_err(&err, WEFT_ESTATE, "execution %s has an operator command to apply first",
                       s->id);
    } else if (x->element[0]->integer == 0) {
        long long cur = x->elements > 1 ? x->element[1]->integer : -1;
        s->rc = wu_err(&err, WEFT_ESTATE,
                       "execution %s was changed by someone else (fence %lld, expected %llu)",
                       s->id, cur, (unsigned long long)s->fence);
    } else if (x->elements < 2 || x->element[1]->type != REDIS_REPLY_INTEGER) {
        s->rc = bad_reply(r, h, &err);
    }
    if (s->rc) {
        snprintf(s->why, sizeof s->why, "%s", err.msg);
        return;
    }
    nf = s->new_fence = (uint64_t)x->element[1]->integer;
    /* From here the save is committed: what cannot be applied stays in the outbox. */
    nleft = x->elements - 2;
    *whole = 1;
    if (nleft + s->nsteps == 0) return;
    if (!(e = calloc(nleft + s->nsteps + 1, sizeof *e))) { /* ends with raw NULL */
        *whole = 0;
        return;
    }
    for (i = 0; i < nleft; i++) {
        const redisReply *m = x->element[2 + i];
        int k;
        if (m->type != REDIS_REPLY_STRING) continue;
        if ((k = entry_parse(&e[n], m)) == 0) {
            n++;
        } else {
            if (k == -2) *whole = 0;
            free(e[n].raw);
            free(e[n].buf);
            memset(&e[n], 0, sizeof e[n]);
        }
    }
    for (i = 0; i < s->nsteps; i++, n++)
        if (step_entry(&e[n], &s->steps[i], nf))
            break; /* the rest wait in the outbox for rs_exec_flush */
    *e_out = e;
    *n_out = n;
}

/*
 * Two round trips for all n: the save.lua calls pipelined, then one pipeline
 * applying the committed saves' steps (those of earlier saves left in their
 * outbox first), trimming the outboxes and dropping the acked claims. One
 * round trip when there is nothing to apply.
 */
int rs_exec_save_many(rs *r, rs_save *s, size_t n, weft_error *err)
{
    rs_cmd *c = calloc(n + 1, sizeof *c);
    redisReply **x = calloc(n + 1, sizeof *x);
    size_t *at = calloc(n + 1, sizeof *at);
    step_set *sets = calloc(n + 1, sizeof *sets);
    rs_entry **es = calloc(n + 1, sizeof *es);
    rs_cmd *trims = calloc(n + 1, sizeof *trims);
    size_t i, j, m = 0, nsets = 0;
    int rc = 0, whole;

    if (!c || !x || !at || !sets || !es || !trims) {
        rc = oom(err);
        goto out;
    }
    for (i = 0; i < n; i++) {
        weft_error e = {0};
        s[i].new_fence = 0;
        s[i].why[0] = 0;
        if ((s[i].rc = save_cmd(r, &s[i], &c[m], &e)) != 0) {
            snprintf(s[i].why, sizeof s[i].why, "%s", e.msg);
            cmd_free(&c[m]);
            continue;
        }
        at[m++] = i;
    }
    if (m == 0) goto out;
    if ((rc = rs_pipe(r, c, m, x, m == 1 ? s[at[0]].id : "save", err)) != 0) {
        for (i = 0; i < m; i++) {
            s[at[i]].rc = rc;
            snprintf(s[at[i]].why, sizeof s[at[i]].why, "%s", err->msg);
        }
        goto out;
    }
    for (i = 0; i < m; i++) {
        rs_save *sv = &s[at[i]];
        step_set *st = &sets[nsets];
        char out[KEY_MAX];
        save_reply(r, sv, x[i], &es[i], &st->n, &whole);
        if (sv->rc) continue;
        if (st->n == 0 && sv->nacks == 0) continue;
        /* the trim removes exactly what this pipeline applies (and any
         * unreadable leftover): an entry recorded again meanwhile (refused
         * by Redis, or by a save whose steps are in flight) stays */
        k_exec(r, sv->id, ":out", out);
        cmd_add(&trims[nsets], "ZREM");
        cmd_dup(&trims[nsets], out);
        if (whole) /* every leftover: applied now, or malformed */
            for (j = 2; j < x[i]->elements; j++)
                if (x[i]->element[j]->type == REDIS_REPLY_STRING)
                    cmd_addn(&trims[nsets], x[i]->element[j]->str, x[i]->element[j]->len, NULL);
        for (j = 0; j < st->n; j++)
            if (!whole || es[i][j].fence == sv->new_fence) cmd_add(&trims[nsets], es[i][j].raw);
        st->id = sv->id;
        st->e = es[i];
        st->trim = &trims[nsets];
        st->acks = sv->acks;
        st->nacks = sv->nacks;
        st->rep = calloc(st->n + 1, sizeof *st->rep);
        if (!st->rep) {
            cmd_free(&trims[nsets]);
            continue; /* committed; the steps wait in the outbox */
        }
        nsets++;
    }
    if (nsets) {
        rs_cmd *cmds;
        size_t k, *first;
        flight *f;
        weft_error ignored = {0};
        /* committed whatever happens now: a failure leaves steps in the outboxes */
        if (steps_build(r, NULL, 0, sets, nsets, &cmds, &k, &first, &ignored) == 0) {
            if (r->early && r->c && (f = flight_new(sets, nsets, es, m, k, first))) {
                /* sent now, replies read with the next round trip */
                flight_send(r, f, cmds);
                sets = NULL;
                es = NULL;
            } else {
                if (steps_now(r, cmds, k, first, 0, NULL, sets, nsets, &ignored) == 0)
                    for (i = 0; i < nsets; i++)
                        steps_check(r, sets[i].id, sets[i].e, sets[i].n, sets[i].rep, &ignored);
                free(first);
            }
            cmds_free(cmds, k);
            free(cmds);
        }
        for (i = 0; sets && i < nsets; i++) {
            replies_free(sets[i].rep, sets[i].n);
            free(sets[i].rep);
        }
    }
    for (i = 0; es && i < m; i++)
        if (es[i]) {
            /* save_reply counted them into a set or dropped them: free by count */
            size_t k = 0;
            while (es[i][k].raw) k++;
            entries_free(es[i], k);
        }
out:
    if (x) replies_free(x, m);
    if (c) cmds_free(c, m);
    free(c);
    free(x);
    free(at);
    free(sets);
    free(es);
    free(trims);
    return rc;
}

int rs_exec_save(rs *r, const char *id, uint64_t fence, const char *doc, const char *status,
                 int terminal, const rs_step *steps, size_t nsteps, const char *const *events,
                 size_t nevents, uint64_t *new_fence, weft_error *err)
{
    rs_save s;
    int rc;
    memset(&s, 0, sizeof s);
    s.id = id;
    s.fence = fence;
    s.doc = doc;
    s.status = status;
    s.terminal = terminal;
    s.steps = steps;
    s.nsteps = nsteps;
    s.events = events;
    s.nevents = nevents;
    s.cmd = "*";
    rc = rs_exec_save_many(r, &s, 1, err);
    if (rc) return rc;
    if (s.rc) return wu_err(err, s.rc, "%s", s.why);
    if (new_fence) *new_fence = s.new_fence;
    return 0;
}

/* One round trip: command.lua. */
int rs_exec_command(rs *r, const char *id, const char *text, const char *kind, char **pending,
                    char status[32], weft_error *err)
{
    char h[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    long long k;
    int rc;

    *pending = NULL;
    status[0] = 0;
    if ((rc = check_id(id, err)) != 0) return rc;
    k_exec(r, id, "", h);
    cmd_script(&c, r, S_COMMAND, 1);
    cmd_add(&c, h);
    cmd_add(&c, text);
    cmd_add(&c, kind);
    if ((rc = rs_one(r, &c, &x, h, err)) != 0) return rc;
    if (is_err(x)) {
        rc = reply_err(r, x, h, err);
    } else if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 ||
               x->element[0]->type != REDIS_REPLY_INTEGER || x->element[0]->integer < -1 ||
               x->element[0]->integer > 3 ||
               (x->element[0]->integer != 1 && x->element[0]->integer != -1 &&
                (x->elements < 2 || !is_str(x->element[1])))) {
        rc = bad_reply(r, h, err);
    } else if ((k = x->element[0]->integer) == -1) {
        rc = wu_err(err, WEFT_ENOTFOUND, "no workflow %s", id);
    } else if (k == 0) {
        copy_str(status, 32, x->element[1]);
        rc = wu_err(err, WEFT_ESTATE, "workflow %s is %s", id, status);
    } else if (k > 1 && !(*pending = reply_dup(x->element[1]))) {
        rc = oom(err);
    } else {
        rc = (int)k;
    }
    replies_free(&x, 1);
    return rc;
}

/*
 * One command per execution, pipelined (one round trip): `cmd`, the
 * execution's key, then the words of tail (NULL-terminated, may be NULL).
 * *rep gets the n replies; free them with each_exec_free, also on failure.
 */
static int each_exec(rs *r, const char *cmd, const char *const *ids, size_t n,
                     const char *const *tail, const char *what, redisReply ***rep,
                     weft_error *err)
{
    rs_cmd *c = calloc(n + 1, sizeof *c);
    size_t i;
    int rc;
    *rep = calloc(n + 1, sizeof **rep);
    if (!c || !*rep) {
        free(c);
        return oom(err);
    }
    for (i = 0; i < n; i++) {
        char h[KEY_MAX];
        const char *const *t;
        k_exec(r, ids[i] ? ids[i] : "", "", h);
        cmd_add(&c[i], cmd);
        cmd_dup(&c[i], h);
        for (t = tail; t && *t; t++)
            cmd_add(&c[i], *t);
    }
    rc = rs_pipe(r, c, n, *rep, what, err);
    cmds_free(c, n);
    free(c);
    return rc;
}

static void each_exec_free(redisReply **rep, size_t n)
{
    if (rep)
        replies_free(rep, n);
    free(rep);
}

/* One round trip: an HMGET per execution, pipelined. */
int rs_exec_load_many(rs *r, const char *const *ids, size_t n, rs_exec *out, int *rcs,
                      weft_error *err)
{
    redisReply **x = NULL;
    size_t i;
    int rc;
    memset(out, 0, n * sizeof *out);
    if ((rc = each_exec(r, "HMGET", ids, n, load_names, "load", &x, err)) != 0)
        for (i = 0; i < n; i++)
            rcs[i] = rc;
    else
        for (i = 0; i < n; i++) {
            weft_error e = {0};
            rcs[i] = check_id(ids[i], &e);
            if (!rcs[i]) rcs[i] = exec_reply(r, ids[i], x[i], 0, &out[i], &e);
        }
    each_exec_free(x, n);
    return rc;
}

int rs_exec_exists_many(rs *r, const char *const *ids, size_t n, int *exists, weft_error *err)
{
    redisReply **x = NULL;
    size_t i;
    int rc = each_exec(r, "EXISTS", ids, n, NULL, "exists", &x, err);
    for (i = 0; !rc && i < n; i++) {
        weft_error e = {0};
        /* a reply that is not a count removes nothing: files go only when
         * Redis said their execution is not there */
        if (!x[i] || x[i]->type != REDIS_REPLY_INTEGER)
            rc = wu_err(err, WEFT_EIO, "EXISTS %s: %s", ids[i],
                        x[i] && x[i]->type == REDIS_REPLY_ERROR ? x[i]->str : "unexpected reply");
        else
            exists[i] = check_id(ids[i], &e) == 0 && x[i]->integer > 0;
    }
    each_exec_free(x, n);
    return rc;
}

/*
 * Two round trips: flush.lua (read the outbox), then one pipeline applying
 * the entries and removing them. One when the outbox is empty. Returns the
 * number of entries applied.
 */
int rs_exec_flush(rs *r, const char *id, weft_error *err)
{
    char out[KEY_MAX];
    rs_cmd c = {0}, trim = {0};
    redisReply *x = NULL, **srep = NULL;
    rs_entry *e = NULL;
    size_t i, n = 0, total;
    int rc, k;

    if ((rc = check_id(id, err)) != 0) return rc;
    k_exec(r, id, ":out", out);
    cmd_script(&c, r, S_FLUSH, 1);
    cmd_add(&c, out);
    cmd_addf(&c, "%d", FLUSH_BATCH);
    if ((rc = rs_array(r, &c, &x, out, err)) != 0) return rc;
    total = x->elements;
    if (total == 0) {
        replies_free(&x, 1);
        return 0;
    }
    e = calloc(total, sizeof *e);
    srep = calloc(total, sizeof *srep);
    if (!e || !srep) {
        replies_free(&x, 1);
        free(e);
        free(srep);
        return oom(err);
    }
    /* removed by member: exactly what was read, malformed entries too */
    cmd_add(&trim, "ZREM");
    cmd_add(&trim, out);
    for (i = 0; i < total; i++) {
        const redisReply *m = x->element[i];
        if (m->type != REDIS_REPLY_STRING) continue;
        k = entry_parse(&e[n], m);
        if (k != -2) cmd_addn(&trim, m->str, m->len, NULL); /* applied, or malformed */
        if (k == 0) {
            n++;
        } else {
            free(e[n].raw);
            free(e[n].buf);
            memset(&e[n], 0, sizeof e[n]);
        }
    }
    rc = steps_run(r, id, NULL, &trim, e, n, NULL, srep, err);
    replies_free(&x, 1); /* trim borrowed its strings */
    if (!rc) rc = steps_check(r, id, e, n, srep, err);
    replies_free(srep, n);
    free(srep);
    entries_free(e, n);
    return rc ? rc : (int)n;
}

/* ---- work queues ---- */


static int check_claim(const rs_lease *c, weft_error *err)
{
    int rc;
    if (!c) return wu_err(err, WEFT_EINVAL, "no claim");
    if ((rc = check_name("task type", c->type, TYPE_MAX, 0, err)) != 0) return rc;
    if (!c->lease[0])
        return wu_err(err, WEFT_EINVAL, "claim of %s|%s has no lease", c->workflow_id, c->task_id);
    return 0;
}

/* Give claims back (ZADD ready first, then ack with the token): one round trip. */
static void claim_release(rs *r, const rs_lease *cl, size_t n)
{
    rs_cmd *c = calloc(2 * n, sizeof *c);
    redisReply **x = calloc(2 * n, sizeof *x);
    char key[KEY_MAX], member[ID_MAX * 2 + 2];
    weft_error ignored;
    long long now = (long long)wu_now_ms();
    size_t i;
    if (c && x) {
        for (i = 0; i < n; i++) {
            claim_member(&cl[i], member, sizeof member);
            k_queue(r, cl[i].type, "ready", key);
            cmd_add(&c[2 * i], "ZADD");
            cmd_dup(&c[2 * i], key);
            cmd_addf(&c[2 * i], "%lld", now);
            cmd_dup(&c[2 * i], member);
            cmd_script(&c[2 * i + 1], r, S_ACK, 3);
            k_queue(r, cl[i].type, "leases", key);
            cmd_dup(&c[2 * i + 1], key);
            k_queue(r, cl[i].type, "lease", key);
            cmd_dup(&c[2 * i + 1], key);
            k_queue(r, cl[i].type, "reaped", key);
            cmd_dup(&c[2 * i + 1], key);
            cmd_dup(&c[2 * i + 1], member);
            cmd_add(&c[2 * i + 1], cl[i].lease);
        }
        /* on failure the leases expire and the reaper puts the members back */
        rs_pipe(r, c, 2 * n, x, "claim release", &ignored);
        replies_free(x, 2 * n);
        cmds_free(c, 2 * n);
    }
    free(c);
    free(x);
}

/* due.lua for up to max executions, into c (now 0: Redis's clock). */
static void due_cmd(rs *r, int max, int64_t hold_ms, long long now, rs_cmd *c, char dq[KEY_MAX])
{
    k_dq(r, dq);
    cmd_script(c, r, S_DUE, 1);
    cmd_add(c, dq);
    cmd_addf(c, "%lld", now);
    cmd_addf(c, "%d", max);
    cmd_addf(c, "%lld", (long long)hold_ms);
}

/*
 * One round trip: due.lua (when due_max > 0) and one claim.lua per type, in
 * one pipeline. Each type may hand out up to max; when together they hand
 * out more, the extra ones are given back in one more round trip (only
 * then). The due executions go to due_ids, their count to *ndue.
 */
int rs_due_claim(rs *r, int wait_ms, int due_max, int64_t hold_ms, char (*due_ids)[64],
                 int *ndue, const char *const *types, size_t ntypes, int max, int64_t lease_ms,
                 rs_lease *out, weft_error *err)
{
    char seed[37], ready[KEY_MAX], leases[KEY_MAX], lease[KEY_MAX], dq[KEY_MAX], wk[KEY_MAX];
    rs_cmd *c = NULL;
    redisReply **x = NULL, **cx;
    rs_lease *got = NULL;
    size_t i, j, k, ngot = 0, cap = 0, first = 0, nw = wait_ms > 0 ? 1 : 0,
           nd = due_max > 0 ? 1 : 0, nc;
    long long now = (long long)wu_now_ms();
    int rc;

    if (ndue) *ndue = 0;
    if (max <= 0 || !types) ntypes = 0;
    if (ntypes && lease_ms <= 0)
        return wu_err(err, WEFT_EINVAL, "claim: lease must be positive (got %lld ms)",
                      (long long)lease_ms);
    if (nd && hold_ms < 0)
        return wu_err(err, WEFT_EINVAL, "due: negative hold (%lld ms)", (long long)hold_ms);
    if (nd + ntypes == 0) return 0;
    for (i = 0; i < ntypes; i++)
        if ((rc = check_name("task type", types[i], TYPE_MAX, 0, err)) != 0) return rc;
    wu_uuid(seed);
    for (i = j = 0; seed[i]; i++)
        if (seed[i] != '-') seed[j++] = seed[i];
    seed[24] = 0;

    nc = nw + nd + ntypes;
    c = calloc(nc, sizeof *c);
    x = calloc(nc, sizeof *x);
    if (!c || !x) {
        free(c);
        free(x);
        return oom(err);
    }
    if (nw) {
        /* the polls wait in Redis behind the BLPOP: they run the moment a
         * token comes (or the wait ends), with no round trip of their own */
        k_wake(r, wk);
        cmd_add(&c[0], "BLPOP");
        cmd_dup(&c[0], wk);
        cmd_addf(&c[0], "%.3f", wait_ms / 1000.0);
    }
    /* behind a wait the polls run later than now: they read Redis's clock */
    if (nw) now = 0;
    if (nd) due_cmd(r, due_max, hold_ms, now, &c[nw], dq);
    if (ntypes) first = r->rr++ % ntypes;
    for (k = 0; k < ntypes; k++) {
        const char *type = types[(first + k) % ntypes];
        rs_cmd *ck = &c[nw + nd + k];
        k_queue(r, type, "ready", ready);
        k_queue(r, type, "leases", leases);
        k_queue(r, type, "lease", lease);
        cmd_script(ck, r, S_CLAIM, 3);
        cmd_dup(ck, ready);
        cmd_dup(ck, leases);
        cmd_dup(ck, lease);
        cmd_addf(ck, "%lld", now);
        cmd_addf(ck, "%lld", (long long)lease_ms);
        cmd_addf(ck, "%d", max);
        cmd_add(ck, seed);
    }
    if (nw && (rc = ensure(r, err)) == 0)
        redisSetTimeout(r->c, ms_tv(wait_ms + r->timeout_ms)); /* longer than Redis waits */
    if (!nw || rc == 0) rc = rs_pipe(r, c, nc, x, ntypes ? "claim" : dq, err);
    if (nw && r->c) redisSetTimeout(r->c, ms_tv(r->timeout_ms));
    cmds_free(c, nc);
    free(c);
    if (rc) {
        replies_free(x, nc);
        free(x);
        return rc;
    }
    if (nw && is_err(x[0])) {
        rc = reply_err(r, x[0], wk, err);
    } else if (nd) {
        redisReply *d = x[nw];
        if (is_err(d))
            rc = reply_err(r, d, dq, err);
        else if (d->type != REDIS_REPLY_ARRAY)
            rc = bad_reply(r, dq, err);
        else
            for (i = 0; i < d->elements && *ndue < due_max; i++)
                if (d->element[i]->type == REDIS_REPLY_STRING)
                    copy_str(due_ids[(*ndue)++], 64, d->element[i]);
    }
    cx = x + nw + nd;
    for (k = 0; k < ntypes; k++)
        if (cx[k]->type == REDIS_REPLY_ARRAY) cap += cx[k]->elements / 2;
    got = calloc(cap + 1, sizeof *got);
    if (!got && !rc) rc = oom(err);
    /* every type's claims are collected, even after an error: they must go back */
    for (k = 0; k < ntypes && got; k++) {
        const char *type = types[(first + k) % ntypes];
        if (is_err(cx[k])) {
            k_queue(r, type, "ready", ready);
            if (!rc) rc = reply_err(r, cx[k], ready, err);
            continue;
        }
        if (cx[k]->type != REDIS_REPLY_ARRAY) continue;
        for (i = 0; i + 1 < cx[k]->elements; i += 2) {
            const redisReply *m = cx[k]->element[i], *t = cx[k]->element[i + 1];
            rs_lease *cl = &got[ngot];
            const char *bar;
            size_t wl;
            if (m->type != REDIS_REPLY_STRING || t->type != REDIS_REPLY_STRING) continue;
            bar = memchr(m->str, '|', m->len);
            wl = bar ? (size_t)(bar - m->str) : m->len;
            if (wl >= sizeof cl->workflow_id) wl = sizeof cl->workflow_id - 1;
            memcpy(cl->workflow_id, m->str, wl);
            cl->workflow_id[wl] = 0;
            if (bar) {
                size_t tl = m->len - (size_t)(bar + 1 - m->str);
                if (tl >= sizeof cl->task_id) tl = sizeof cl->task_id - 1;
                memcpy(cl->task_id, bar + 1, tl);
                cl->task_id[tl] = 0;
            }
            copy_str(cl->lease, sizeof cl->lease, t);
            snprintf(cl->type, sizeof cl->type, "%s", type);
            ngot++;
        }
    }
    replies_free(x, nc);
    free(x);
    if (rc) {
        if (ngot) claim_release(r, got, ngot);
        free(got);
        if (ndue) *ndue = 0; /* they come due again after hold_ms */
        return rc;
    }
    if (ngot > (size_t)max) claim_release(r, got + max, ngot - (size_t)max);
    if (ngot > (size_t)max) ngot = (size_t)max;
    if (ngot) memcpy(out, got, ngot * sizeof *got);
    free(got);
    return (int)ngot;
}

int rs_claim(rs *r, const char *const *types, size_t ntypes, int max, int64_t lease_ms,
             rs_lease *out, weft_error *err)
{
    if (max <= 0 || ntypes == 0) return 0;
    if (lease_ms <= 0)
        return wu_err(err, WEFT_EINVAL, "claim: lease must be positive (got %lld ms)",
                      (long long)lease_ms);
    return rs_due_claim(r, 0, 0, 0, NULL, NULL, types, ntypes, max, lease_ms, out, err);
}

/* One lease script (renew/ack/check) with the claim's keys; 1 or 0 in *ok. */
static int lease_call(rs *r, const rs_lease *cl, int s, int64_t expiry, int *ok, weft_error *err)
{
    char k1[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    if ((rc = check_claim(cl, err)) != 0) return rc;
    k_queue(r, cl->type, "leases", k1);
    lease_cmd(r, cl, s, expiry, &c);
    if ((rc = rs_one(r, &c, &x, k1, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_INTEGER)
        rc = bad_reply(r, k1, err);
    else
        *ok = x->integer == 1;
    replies_free(&x, 1);
    return rc;
}

/* One round trip: renew.lua. */
int rs_renew(rs *r, const rs_lease *c, int64_t lease_ms, weft_error *err)
{
    int ok = 0, rc = rs_renew_many(r, c, 1, lease_ms, &ok, err);
    if (rc) return rc;
    if (!ok)
        return wu_err(err, WEFT_ESTATE, "stale lease for %s|%s: not renewed", c->workflow_id,
                      c->task_id);
    return 0;
}

/* One round trip: renew.lua for each, pipelined. */
int rs_renew_many(rs *r, const rs_lease *c, size_t n, int64_t lease_ms, int *ok,
                  weft_error *err)
{
    rs_cmd *cmds;
    redisReply **x;
    int64_t expiry = wu_now_ms() + lease_ms;
    size_t i;
    int rc;
    if (lease_ms <= 0)
        return wu_err(err, WEFT_EINVAL, "renew: lease must be positive (got %lld ms)",
                      (long long)lease_ms);
    if (n == 0) return 0;
    for (i = 0; i < n; i++)
        if ((rc = check_claim(&c[i], err)) != 0) return rc;
    cmds = calloc(n, sizeof *cmds);
    x = calloc(n, sizeof *x);
    if (!cmds || !x) {
        free(cmds);
        free(x);
        return oom(err);
    }
    for (i = 0; i < n; i++)
        lease_cmd(r, &c[i], S_RENEW, expiry, &cmds[i]);
    rc = rs_pipe(r, cmds, n, x, "renew", err);
    for (i = 0; i < n && !rc; i++) {
        char k[KEY_MAX];
        k_queue(r, c[i].type, "leases", k);
        if (is_err(x[i]))
            rc = reply_err(r, x[i], k, err);
        else if (x[i]->type != REDIS_REPLY_INTEGER)
            rc = bad_reply(r, k, err);
        else
            ok[i] = x[i]->integer == 1;
    }
    replies_free(x, n);
    cmds_free(cmds, n);
    free(cmds);
    free(x);
    return rc;
}

/* One round trip: ack.lua. */
int rs_ack(rs *r, const rs_lease *c, weft_error *err)
{
    int ok = 0, rc;
    if ((rc = lease_call(r, c, S_ACK, 0, &ok, err)) != 0) return rc;
    if (!ok)
        return wu_err(err, WEFT_ESTATE, "stale lease for %s|%s: result discarded", c->workflow_id,
                      c->task_id);
    return 0;
}

/* One round trip: check.lua. */
int rs_check_lease(rs *r, const rs_lease *c, weft_error *err)
{
    int ok = 0, rc;
    if ((rc = lease_call(r, c, S_CHECK, 0, &ok, err)) != 0) return rc;
    if (!ok) return wu_err(err, WEFT_ESTATE, "stale lease for %s|%s", c->workflow_id, c->task_id);
    return 0;
}

/* One round trip: reap.lua (at most REAP_BATCH members per call). */
int rs_reap(rs *r, const char *type, int max_reaps, char ***exhausted, size_t *nexhausted,
            weft_error *err)
{
    char ready[KEY_MAX], leases[KEY_MAX], lease[KEY_MAX], reaped[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    char **list = NULL;
    size_t i, n = 0;
    int rc, back;

    *exhausted = NULL;
    *nexhausted = 0;
    if ((rc = check_name("task type", type, TYPE_MAX, 0, err)) != 0) return rc;
    if (max_reaps < 0) return wu_err(err, WEFT_EINVAL, "reap %s: max_reaps must be >= 0", type);
    k_queue(r, type, "ready", ready);
    k_queue(r, type, "leases", leases);
    k_queue(r, type, "lease", lease);
    k_queue(r, type, "reaped", reaped);
    cmd_script(&c, r, S_REAP, 4);
    cmd_add(&c, ready);
    cmd_add(&c, leases);
    cmd_add(&c, lease);
    cmd_add(&c, reaped);
    cmd_addf(&c, "%lld", (long long)wu_now_ms());
    cmd_addf(&c, "%d", max_reaps);
    cmd_addf(&c, "%d", REAP_BATCH);
    if ((rc = rs_one(r, &c, &x, leases, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 ||
        x->element[0]->type != REDIS_REPLY_INTEGER) {
        replies_free(&x, 1);
        return bad_reply(r, leases, err);
    }
    back = (int)x->element[0]->integer;
    if (x->elements > 1) {
        if (!(list = calloc(x->elements - 1, sizeof *list))) {
            replies_free(&x, 1);
            return oom(err);
        }
        for (i = 1; i < x->elements; i++) {
            if (x->element[i]->type != REDIS_REPLY_STRING) continue;
            if (!(list[n] = reply_dup(x->element[i]))) {
                while (n)
                    free(list[--n]);
                free(list);
                replies_free(&x, 1);
                return oom(err);
            }
            n++;
        }
    }
    replies_free(&x, 1);
    *exhausted = list;
    *nexhausted = n;
    return back;
}

/* One round trip: two ZCARDs, pipelined. */
int rs_queue_sizes(rs *r, const char *type, long long *ready, long long *leased, weft_error *err)
{
    char k[2][KEY_MAX];
    rs_cmd c[2];
    redisReply *x[2];
    int rc, i;
    if ((rc = check_name("task type", type, TYPE_MAX, 0, err)) != 0) return rc;
    k_queue(r, type, "ready", k[0]);
    k_queue(r, type, "leases", k[1]);
    memset(c, 0, sizeof c);
    for (i = 0; i < 2; i++) {
        cmd_add(&c[i], "ZCARD");
        cmd_add(&c[i], k[i]);
    }
    rc = rs_pipe(r, c, 2, x, k[0], err);
    cmds_free(c, 2);
    for (i = 0; i < 2 && !rc; i++) {
        if (is_err(x[i]))
            rc = reply_err(r, x[i], k[i], err);
        else if (x[i]->type != REDIS_REPLY_INTEGER)
            rc = bad_reply(r, k[i], err);
    }
    if (!rc) {
        if (ready) *ready = x[0]->integer;
        if (leased) *leased = x[1]->integer;
    }
    replies_free(x, 2);
    return rc;
}

/* One round trip: two ZSCOREs, pipelined. Returns 1 when queued, 0 when not. */
int rs_queue_has(rs *r, const char *type, const char *workflow_id, const char *task_id,
                 weft_error *err)
{
    char k[2][KEY_MAX], member[ID_MAX * 2 + 2];
    rs_cmd c[2];
    redisReply *x[2];
    int rc, i, has = 0;
    if ((rc = check_name("task type", type, TYPE_MAX, 0, err)) != 0 ||
        (rc = check_id(workflow_id, err)) != 0 ||
        (rc = check_name("task id", task_id, ID_MAX, 0, err)) != 0)
        return rc;
    snprintf(member, sizeof member, "%s|%s", workflow_id, task_id);
    k_queue(r, type, "ready", k[0]);
    k_queue(r, type, "leases", k[1]);
    memset(c, 0, sizeof c);
    for (i = 0; i < 2; i++) {
        cmd_add(&c[i], "ZSCORE");
        cmd_add(&c[i], k[i]);
        cmd_add(&c[i], member);
    }
    rc = rs_pipe(r, c, 2, x, k[0], err);
    cmds_free(c, 2);
    for (i = 0; i < 2 && !rc; i++) {
        if (is_err(x[i]))
            rc = reply_err(r, x[i], k[i], err);
        else if (x[i]->type == REDIS_REPLY_STRING)
            has = 1;
    }
    replies_free(x, 2);
    return rc ? rc : has;
}

/* ---- decider queue ---- */

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
    if ((rc = check_id(id, err)) != 0) return rc;
    k_dq(r, dq);
    cmd_add(&c, "ZADD");
    cmd_add(&c, dq);
    if (only_earlier) cmd_add(&c, "LT");
    cmd_addf(&c, "%lld", (long long)at);
    cmd_add(&c, id);
    if ((rc = rs_one(r, &c, &x, dq, err)) != 0) return rc;
    replies_free(&x, 1);
    return 0;
}

/* ---- definitions, idempotency, daemons ---- */

/* One round trip: HSET. */
int rs_def_put(rs *r, const char *name, int version, const char *json, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    if ((rc = check_name("definition name", name, NAME_MAX_, 1, err)) != 0) return rc;
    if (version <= 0 || !json)
        return wu_err(err, WEFT_EINVAL, "definition %s: version must be >= 1 and JSON given", name);
    k_name(r, "def:", name, k);
    cmd_add(&c, "HSET");
    cmd_add(&c, k);
    cmd_addf(&c, "%d", version);
    cmd_add(&c, json);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    replies_free(&x, 1);
    return 0;
}

/* One round trip for a given version (HGET); two for the latest (HKEYS, HGET). */
int rs_def_get(rs *r, const char *name, int version, char **json, int *version_out, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;

    *json = NULL;
    if ((rc = check_name("definition name", name, NAME_MAX_, 1, err)) != 0) return rc;
    k_name(r, "def:", name, k);
    if (version <= 0) {
        long best = 0;
        cmd_add(&c, "HKEYS");
        cmd_add(&c, k);
        if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
        for (i = 0; i < x->elements; i++) {
            char *end;
            long v;
            if (x->element[i]->type != REDIS_REPLY_STRING) continue;
            v = strtol(x->element[i]->str, &end, 10);
            if (!*end && v > best && v <= 0x7fffffff) best = v;
        }
        replies_free(&x, 1);
        if (!best) return wu_err(err, WEFT_ENOTFOUND, "no definition %s", name);
        version = (int)best;
    }
    cmd_add(&c, "HGET");
    cmd_add(&c, k);
    cmd_addf(&c, "%d", version);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_STRING) {
        replies_free(&x, 1);
        return wu_err(err, WEFT_ENOTFOUND, "no definition %s version %d", name, version);
    }
    *json = reply_dup(x);
    replies_free(&x, 1);
    if (!*json) return oom(err);
    if (version_out) *version_out = version;
    return 0;
}

/* One round trip: SET NX PX and GET, pipelined. */
int rs_idem_claim(rs *r, const char *key, const char *id, char existing[64], weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c[2];
    redisReply *x[2];
    int rc, attempt;

    if (existing) existing[0] = 0;
    if ((rc = check_name("idempotency key", key, NAME_MAX_, 1, err)) != 0 ||
        (rc = check_id(id, err)) != 0)
        return rc;
    k_name(r, "idem:", key, k);
    for (attempt = 0; attempt < 2; attempt++) {
        memset(c, 0, sizeof c);
        cmd_add(&c[0], "SET");
        cmd_add(&c[0], k);
        cmd_add(&c[0], id);
        cmd_add(&c[0], "NX");
        cmd_add(&c[0], "PX");
        cmd_addf(&c[0], "%lld", (long long)r->retention_ms);
        cmd_add(&c[1], "GET");
        cmd_add(&c[1], k);
        rc = rs_pipe(r, c, 2, x, k, err);
        cmds_free(c, 2);
        if (!rc && is_err(x[0]))
            rc = reply_err(r, x[0], k, err);
        else if (!rc && is_err(x[1]))
            rc = reply_err(r, x[1], k, err);
        if (rc) {
            replies_free(x, 2);
            return rc;
        }
        if (is_str(x[0])) {
            replies_free(x, 2);
            return 0;
        }
        if (x[1]->type == REDIS_REPLY_STRING) {
            int same = x[1]->len == strlen(id) && !memcmp(x[1]->str, id, x[1]->len);
            if (existing) copy_str(existing, 64, x[1]);
            replies_free(x, 2);
            /* the same id asking again (a retried start) is not a conflict */
            return same ? 0
                        : wu_err(err, WEFT_EEXIST, "idempotency key %s was used by %s", key,
                                 existing ? existing : "another workflow");
        }
        replies_free(x, 2); /* expired in between: try again */
    }
    return wu_err(err, WEFT_EIO, "%s: %s: idempotency key keeps changing", r->url.shown, k);
}

/* One round trip: HSET (info gets "seen": now in ms); with an epoch, GET
 * of the epoch and ZCARD of the decider queue in the same pipeline. */
int rs_daemon_beat(rs *r, const char *daemon_id, const char *info_json, weft_error *err)
{
    char k[KEY_MAX], dq[KEY_MAX];
    json_object *j;
    rs_cmd c[3];
    redisReply *x[3] = {NULL, NULL, NULL};
    size_t n = 1;
    int rc;
    memset(c, 0, sizeof c);
    if ((rc = check_name("daemon id", daemon_id, NAME_MAX_, 1, err)) != 0) return rc;
    j = json_tokener_parse(info_json ? info_json : "{}");
    if (!j || !json_object_is_type(j, json_type_object)) {
        json_object_put(j);
        return wu_err(err, WEFT_EINVAL, "daemon %s: info is not a JSON object", daemon_id);
    }
    json_object_object_add(j, "seen", json_object_new_int64(wu_now_ms()));
    k_name(r, "daemons", "", k);
    cmd_add(&c[0], "HSET");
    cmd_add(&c[0], k);
    cmd_add(&c[0], daemon_id);
    cmd_dup(&c[0], json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    if (r->epoch) {
        /* the heartbeat also sees a flush that left the connection up, and
         * how many workflows a loss would take: no round trip of its own */
        k_dq(r, dq);
        cmd_add(&c[1], "GET");
        cmd_addf(&c[1], "%sepoch", r->prefix);
        cmd_add(&c[2], "ZCARD");
        cmd_add(&c[2], dq);
        n = 3;
    }
    rc = rs_pipe(r, c, n, x, k, err);
    cmds_free(c, n);
    if (!rc && is_err(x[0])) rc = reply_err(r, x[0], k, err);
    if (!rc && n == 3 && !is_err(x[1]) && !is_err(x[2]))
        epoch_seen(r, x[1], x[2]->type == REDIS_REPLY_INTEGER ? x[2]->integer : -1);
    replies_free(x, n);
    return rc;
}

/* One round trip: HGETALL. */
int rs_daemons(rs *r, char **json, weft_error *err)
{
    char k[KEY_MAX];
    json_object *all;
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;
    *json = NULL;
    k_name(r, "daemons", "", k);
    cmd_add(&c, "HGETALL");
    cmd_add(&c, k);
    if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
    if (!(all = json_object_new_object())) {
        replies_free(&x, 1);
        return oom(err);
    }
    for (i = 0; i + 1 < x->elements; i += 2) {
        const redisReply *id = x->element[i], *v = x->element[i + 1];
        json_object *info;
        char *name;
        if (id->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        info = json_tokener_parse(v->str);
        if (!info) info = json_object_new_string_len(v->str, (int)v->len);
        if (!(name = reply_dup(id))) {
            json_object_put(info);
            continue;
        }
        json_object_object_add(all, name, info);
        free(name);
    }
    replies_free(&x, 1);
    *json = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN));
    json_object_put(all);
    return *json ? 0 : oom(err);
}

/* ---- status lane ---- */

/*
 * A stored event ({...}, as cd_event_text writes it) as delivered, into
 * *b: the workflow's id and the time of its stream entry (the entry id's
 * milliseconds) in front, so it reads {"workflowId":..,"time":..,...}.
 * An event that carries them already (older entries) is passed as it is.
 */
static int event_full(wu_buf *b, const char *workflow_id, const char *entry_id, const char *line)
{
    char t[32];
    int rc;
    b->len = 0;
    if (line[0] != '{' || !strncmp(line, "{\"workflowId\":", 14))
        return wu_buf_add(b, line, strlen(line));
    snprintf(t, sizeof t, ",\"time\":%lld", strtoll(entry_id, NULL, 10));
    if ((rc = wu_buf_add(b, "{\"workflowId\":", 14)) || (rc = wu_buf_add_json_str(b, workflow_id)) ||
        (rc = wu_buf_add(b, t, strlen(t))))
        return rc;
    if (line[1] != '}' && (rc = wu_buf_add(b, ",", 1))) return rc;
    return wu_buf_add(b, line + 1, strlen(line + 1));
}

/* digits only, at most max of them, at least one; *v their value (no overflow) */
static int id_part(const char *s, size_t n, size_t max, unsigned long long *v)
{
    size_t i;
    *v = 0;
    if (n == 0 || n > max) return 0;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        if (*v > (ULLONG_MAX - (unsigned)(s[i] - '0')) / 10) return 0;
        *v = *v * 10 + (unsigned)(s[i] - '0');
    }
    return 1;
}

int rs_event_id_parse(const char *id, char entry[RS_EVENT_ID_MAX], long long *index,
                      weft_error *err)
{
    const char *d1 = id ? strchr(id, '-') : NULL, *d2 = d1 ? strchr(d1 + 1, '-') : NULL;
    unsigned long long ms, seq = 0, i = 0;
    size_t n = id ? strlen(id) : 0;
    int ok;
    *index = -1;
    entry[0] = 0;
    if (!id || !*id || !strcmp(id, "0")) {
        snprintf(entry, RS_EVENT_ID_MAX, "0");
        return 0;
    }
    ok = n < RS_EVENT_ID_MAX && id_part(id, d1 ? (size_t)(d1 - id) : n, 20, &ms) &&
         (!d1 ||
          id_part(d1 + 1, d2 ? (size_t)(d2 - d1 - 1) : n - (size_t)(d1 + 1 - id), 20, &seq)) &&
         (!d2 || (id_part(d2 + 1, n - (size_t)(d2 + 1 - id), 9, &i) && !strchr(d2 + 1, '-')));
    if (!ok)
        return wu_err(err, WEFT_EINVAL,
                      "event id '%.80s': expected <ms>-<seq>-<index> such as 1700000000000-0-2",
                      id);
    snprintf(entry, RS_EVENT_ID_MAX, "%.*s", (int)(d2 ? (size_t)(d2 - id) : n), id);
    if (d2) *index = (long long)i;
    return 0;
}

/* The stream id just before entry ms-seq: XREAD from it reads that entry again. */
static void id_before(const char *entry, char out[RS_EVENT_ID_MAX])
{
    const char *d = strchr(entry, '-');
    unsigned long long ms = strtoull(entry, NULL, 10), seq = d ? strtoull(d + 1, NULL, 10) : 0;
    if (seq > 0)
        snprintf(out, RS_EVENT_ID_MAX, "%llu-%llu", ms, seq - 1);
    else if (ms > 0)
        snprintf(out, RS_EVENT_ID_MAX, "%llu-%llu", ms - 1, ULLONG_MAX);
    else
        snprintf(out, RS_EVENT_ID_MAX, "0");
}

/* One round trip: XREAD [BLOCK block_ms] from `from`; *x nil on timeout. */
static int events_read(rs *r, const char *ev, const char *from, int block_ms, redisReply **x,
                       weft_error *err)
{
    rs_cmd c = {0};
    int rc;
    cmd_add(&c, "XREAD");
    if (block_ms > 0) {
        cmd_add(&c, "BLOCK");
        cmd_addf(&c, "%d", block_ms);
    }
    cmd_add(&c, "COUNT");
    cmd_add(&c, EVENTS_COUNT);
    cmd_add(&c, "STREAMS");
    cmd_add(&c, ev);
    cmd_add(&c, from);
    if (block_ms > 0) {
        /* the socket must wait longer than the server does */
        if ((rc = ensure(r, err)) != 0) {
            cmd_free(&c);
            return rc;
        }
        redisSetTimeout(r->c, ms_tv(block_ms + r->timeout_ms));
    }
    rc = rs_one(r, &c, x, ev, err);
    if (block_ms > 0 && r->c) redisSetTimeout(r->c, ms_tv(r->timeout_ms));
    return rc;
}

int rs_events(rs *r, const char *workflow_id, const char *after_id, char *next_id, int block_ms,
              int (*fn)(void *ud, const char *id, const char *json), void *ud, weft_error *err)
{
    wu_buf full = {0};
    char ev[KEY_MAX], seen[RS_EVENT_ID_MAX], from[RS_EVENT_ID_MAX], next[RS_EVENT_ID_MAX];
    char evid[RS_EVENT_ID_MAX + 24];
    redisReply *x = NULL;
    long long skip;
    size_t i, j, f;
    int rc, n = 0, stop = 0, pass, entries;

    if ((rc = check_id(workflow_id, err)) != 0) return rc;
    if (block_ms < 0) return wu_err(err, WEFT_EINVAL, "events of %s: negative wait", workflow_id);
    if ((rc = rs_event_id_parse(after_id, seen, &skip, err)) != 0)
        return wu_err_prefix(err, "events of %s: ", workflow_id);
    k_exec(r, workflow_id, ":ev", ev);
    snprintf(next, sizeof next, "%s", after_id && *after_id ? after_id : "0");
    /* in the middle of an entry: read it again and skip what was seen */
    if (skip >= 0)
        id_before(seen, from);
    else
        snprintf(from, sizeof from, "%s", seen);
    for (pass = 0; pass < 2; pass++) {
        entries = 0;
        if ((rc = events_read(r, ev, from, block_ms, &x, err)) != 0) goto out;
        /* nil on timeout; else [[key, [[id, [field, value, ...]], ...]]] */
        for (i = 0; x->type == REDIS_REPLY_ARRAY && i < x->elements && !stop; i++) {
            const redisReply *s = x->element[i];
            if (s->type != REDIS_REPLY_ARRAY || s->elements != 2 ||
                s->element[1]->type != REDIS_REPLY_ARRAY)
                continue;
            for (j = 0; j < s->element[1]->elements && !stop; j++) {
                const redisReply *e = s->element[1]->element[j];
                long long k = 0;
                int again;
                if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
                    e->element[0]->type != REDIS_REPLY_STRING ||
                    e->element[1]->type != REDIS_REPLY_ARRAY ||
                    e->element[0]->len >= RS_EVENT_ID_MAX)
                    continue;
                entries++;
                again = skip >= 0 && !strcmp(e->element[0]->str, seen);
                /* a stop takes effect after the entry: the rest of it is delivered */
                for (f = 0; f + 1 < e->element[1]->elements; f += 2) {
                    const redisReply *kk = e->element[1]->element[f];
                    const redisReply *v = e->element[1]->element[f + 1];
                    char *line, *nl;
                    if (kk->type != REDIS_REPLY_STRING || strcmp(kk->str, "json") ||
                        v->type != REDIS_REPLY_STRING)
                        continue;
                    /* a save's events share its entry, a line each (older
                     * entries: a field each); an event's index counts them all */
                    for (line = v->str; line; line = nl, k++) {
                        if ((nl = strchr(line, '\n'))) *nl++ = 0;
                        if (again && k <= skip) continue;
                        n++;
                        snprintf(evid, sizeof evid, "%s-%lld", e->element[0]->str, k);
                        if (fn && event_full(&full, workflow_id, e->element[0]->str, line) == 0 &&
                            fn(ud, evid, full.data))
                            stop = 1;
                    }
                }
                snprintf(next, sizeof next, "%s", e->element[0]->str);
            }
        }
        replies_free(&x, 1);
        /* all it read was the rest of the entry resumed in, and nothing was
         * left of it: wait from that entry on, as asked */
        if (n > 0 || entries == 0 || block_ms == 0 || stop) break;
        snprintf(from, sizeof from, "%s", next);
        skip = -1;
    }
out:
    if (next_id && rc == 0) snprintf(next_id, RS_EVENT_ID_MAX, "%s", next);
    wu_buf_free(&full);
    return rc ? rc : n;
}

/* One round trip. */
int rs_command(rs *r, weft_error *err, const char *fmt, ...)
{
    sigpipe_guard g;
    va_list ap;
    void *x = NULL;
    int rc;
    if ((rc = ensure(r, err)) != 0) return rc;
    if (r->fly) {
        flight_land(r);
        if ((rc = ensure(r, err)) != 0) return rc;
    }
    va_start(ap, fmt);
    rc = redisvAppendCommand(r->c, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK) return conn_fail(r, "command", err);
    sigpipe_block(r, &g);
    rc = redisGetReply(r->c, &x);
    sigpipe_restore(&g);
    if (rc != REDIS_OK) return conn_fail(r, "command", err);
    rc = is_err(x) ? reply_err(r, x, "command", err) : 0;
    freeReplyObject(x);
    return rc;
}

/* ---- named hashes (secrets, task definitions): NAME -> value ---- */

/* HSET P<kind> name value. One round trip. */
static int hash_put(rs *r, const char *kind, const char *what, const char *name,
                    const char *value, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    if ((rc = check_name(what, name, NAME_MAX_, 1, err)) != 0) return rc;
    if (!value) return wu_err(err, WEFT_EINVAL, "%s %s: no value", what, name);
    k_name(r, kind, "", k);
    cmd_add(&c, "HSET");
    cmd_add(&c, k);
    cmd_add(&c, name);
    cmd_add(&c, value);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    replies_free(&x, 1);
    return 0;
}

/* HGET P<kind> name (*value malloc'd); `missing` is the message when absent. One round trip. */
static int hash_get(rs *r, const char *kind, const char *what, const char *name, char **value,
                    const char *missing, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    *value = NULL;
    if ((rc = check_name(what, name, NAME_MAX_, 1, err)) != 0) return rc;
    k_name(r, kind, "", k);
    cmd_add(&c, "HGET");
    cmd_add(&c, k);
    cmd_add(&c, name);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_STRING) {
        replies_free(&x, 1);
        return wu_err(err, WEFT_ENOTFOUND, "%s", missing);
    }
    *value = reply_dup(x);
    replies_free(&x, 1);
    return *value ? 0 : oom(err);
}

/* ---- secrets ---- */

/* Psecrets is one hash: NAME -> value. One round trip each. */
int rs_secret_set(rs *r, const char *name, const char *value, weft_error *err)
{
    return hash_put(r, "secrets", "secret name", name, value, err);
}

int rs_secret_get(rs *r, const char *name, char **value, weft_error *err)
{
    char missing[300];
    snprintf(missing, sizeof missing, "secret '%.100s' is not set (weft secret set %.100s)", name,
             name);
    return hash_get(r, "secrets", "secret name", name, value, missing, err);
}

int rs_secret_delete(rs *r, const char *name, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc, gone;
    if ((rc = check_name("secret name", name, NAME_MAX_, 1, err)) != 0) return rc;
    k_name(r, "secrets", "", k);
    cmd_add(&c, "HDEL");
    cmd_add(&c, k);
    cmd_add(&c, name);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    gone = x->type == REDIS_REPLY_INTEGER && x->integer == 1;
    replies_free(&x, 1);
    return gone ? 0 : wu_err(err, WEFT_ENOTFOUND, "secret '%s' is not set", name);
}

int rs_secret_names(rs *r, char ***names, size_t *n, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;
    *names = NULL;
    *n = 0;
    k_name(r, "secrets", "", k);
    cmd_add(&c, "HKEYS");
    cmd_add(&c, k);
    if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
    *names = calloc(x->elements ? x->elements : 1, sizeof **names);
    if (!*names) {
        replies_free(&x, 1);
        return oom(err);
    }
    for (i = 0; i < x->elements; i++)
        if (x->element[i]->type == REDIS_REPLY_STRING && ((*names)[*n] = reply_dup(x->element[i])))
            (*n)++;
    replies_free(&x, 1);
    return 0;
}

/* ---- the REST API's calls ---- */

/* A claim reply {member, token, ...} of `queue` into out (at most max). */
static int claims_of(const redisReply *x, const char *queue, int max, rs_lease *out)
{
    size_t i;
    int n = 0;
    for (i = 0; i + 1 < x->elements && n < max; i += 2) {
        const redisReply *m = x->element[i], *t = x->element[i + 1];
        rs_lease *cl = &out[n];
        const char *bar;
        size_t wl, tl;
        if (m->type != REDIS_REPLY_STRING || t->type != REDIS_REPLY_STRING) continue;
        memset(cl, 0, sizeof *cl);
        bar = memchr(m->str, '|', m->len);
        wl = bar ? (size_t)(bar - m->str) : m->len;
        if (wl >= sizeof cl->workflow_id) wl = sizeof cl->workflow_id - 1;
        memcpy(cl->workflow_id, m->str, wl);
        if (bar) {
            tl = m->len - (size_t)(bar + 1 - m->str);
            if (tl >= sizeof cl->task_id) tl = sizeof cl->task_id - 1;
            memcpy(cl->task_id, bar + 1, tl);
        }
        copy_str(cl->lease, sizeof cl->lease, t);
        snprintf(cl->type, sizeof cl->type, "%s", queue);
        n++;
    }
    return n;
}

/* One round trip: reap.lua and claim.lua, pipelined. */
int rs_poll(rs *r, const char *queue, int max, int64_t lease_ms, int max_reaps, rs_lease *out,
            int *reaped, char ***exhausted, size_t *nexhausted, weft_error *err)
{
    char ready[KEY_MAX], leases[KEY_MAX], lease[KEY_MAX], reapk[KEY_MAX], seed[37];
    rs_cmd c[2];
    redisReply *x[2] = {NULL, NULL};
    long long now = (long long)wu_now_ms();
    char **list = NULL;
    size_t i, j, n = 0;
    int rc, got = 0;

    *reaped = 0;
    *exhausted = NULL;
    *nexhausted = 0;
    if ((rc = check_name("task queue", queue, TYPE_MAX, 0, err)) != 0) return rc;
    if (max <= 0) return 0;
    if (lease_ms <= 0 || max_reaps < 0)
        return wu_err(err, WEFT_EINVAL, "poll %s: lease must be positive, max_reaps >= 0", queue);
    wu_uuid(seed);
    for (i = j = 0; seed[i]; i++)
        if (seed[i] != '-') seed[j++] = seed[i];
    seed[24] = 0;
    k_queue(r, queue, "ready", ready);
    k_queue(r, queue, "leases", leases);
    k_queue(r, queue, "lease", lease);
    k_queue(r, queue, "reaped", reapk);
    memset(c, 0, sizeof c);
    cmd_script(&c[0], r, S_REAP, 4);
    cmd_add(&c[0], ready);
    cmd_add(&c[0], leases);
    cmd_add(&c[0], lease);
    cmd_add(&c[0], reapk);
    cmd_addf(&c[0], "%lld", now);
    cmd_addf(&c[0], "%d", max_reaps);
    cmd_addf(&c[0], "%d", REAP_BATCH);
    cmd_script(&c[1], r, S_CLAIM, 3);
    cmd_add(&c[1], ready);
    cmd_add(&c[1], leases);
    cmd_add(&c[1], lease);
    cmd_addf(&c[1], "%lld", now);
    cmd_addf(&c[1], "%lld", (long long)lease_ms);
    cmd_addf(&c[1], "%d", max);
    cmd_add(&c[1], seed);
    rc = rs_pipe(r, c, 2, x, ready, err);
    cmds_free(c, 2);
    if (rc) {
        replies_free(x, 2);
        return rc;
    }
    /* the claims first: once made they must reach the caller (or expire) */
    if (is_err(x[1]))
        rc = reply_err(r, x[1], ready, err);
    else if (x[1]->type == REDIS_REPLY_ARRAY)
        got = claims_of(x[1], queue, max, out);
    if (!is_err(x[0]) && x[0]->type == REDIS_REPLY_ARRAY && x[0]->elements >= 1 &&
        x[0]->element[0]->type == REDIS_REPLY_INTEGER) {
        *reaped = (int)x[0]->element[0]->integer;
        if (x[0]->elements > 1 && (list = calloc(x[0]->elements - 1, sizeof *list)))
            for (i = 1; i < x[0]->elements; i++)
                if (x[0]->element[i]->type == REDIS_REPLY_STRING &&
                    (list[n] = reply_dup(x[0]->element[i])))
                    n++;
        *exhausted = list;
        *nexhausted = n;
    }
    replies_free(x, 2);
    return rc ? rc : got;
}

/* One round trip: ZADD XX. */
int rs_lease_extend(rs *r, const char *queue, const char *workflow_id, const char *task_id,
                    int64_t lease_ms, weft_error *err)
{
    char k[KEY_MAX], member[ID_MAX * 2 + 2];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    if ((rc = check_name("task queue", queue, TYPE_MAX, 0, err)) != 0 ||
        (rc = check_id(workflow_id, err)) != 0 ||
        (rc = check_name("task id", task_id, ID_MAX, 0, err)) != 0)
        return rc;
    snprintf(member, sizeof member, "%s|%s", workflow_id, task_id);
    k_queue(r, queue, "leases", k);
    cmd_add(&c, "ZADD");
    cmd_add(&c, k);
    cmd_add(&c, "XX");
    cmd_addf(&c, "%lld", (long long)(wu_now_ms() + lease_ms));
    cmd_add(&c, member);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    replies_free(&x, 1);
    return 0;
}

/* One round trip: HSET and SADD, pipelined. */
int rs_def_register(rs *r, const char *name, int version, const char *json, weft_error *err)
{
    char k[2][KEY_MAX];
    rs_cmd c[2];
    redisReply *x[2];
    int rc, i;
    if ((rc = check_name("definition name", name, NAME_MAX_, 1, err)) != 0) return rc;
    if (version <= 0 || !json)
        return wu_err(err, WEFT_EINVAL, "definition %s: version must be >= 1 and JSON given", name);
    k_name(r, "def:", name, k[0]);
    k_name(r, "defnames", "", k[1]);
    memset(c, 0, sizeof c);
    cmd_add(&c[0], "HSET");
    cmd_add(&c[0], k[0]);
    cmd_addf(&c[0], "%d", version);
    cmd_add(&c[0], json);
    cmd_add(&c[1], "SADD");
    cmd_add(&c[1], k[1]);
    cmd_add(&c[1], name);
    rc = rs_pipe(r, c, 2, x, k[0], err);
    cmds_free(c, 2);
    for (i = 0; i < 2 && !rc; i++)
        if (is_err(x[i])) rc = reply_err(r, x[i], k[i], err);
    replies_free(x, 2);
    return rc;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Two round trips: SMEMBERS, then one HGETALL per name, pipelined. */
int rs_def_list(rs *r, char **json, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0}, *h = NULL;
    redisReply *x = NULL, **hx = NULL;
    json_object *all;
    char **names = NULL;
    size_t i, j, n = 0;
    int rc;

    *json = NULL;
    k_name(r, "defnames", "", k);
    cmd_add(&c, "SMEMBERS");
    cmd_add(&c, k);
    if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
    if (!(all = json_object_new_array())) {
        replies_free(&x, 1);
        return oom(err);
    }
    if (x->elements) {
        names = calloc(x->elements, sizeof *names);
        h = calloc(x->elements, sizeof *h);
        hx = calloc(x->elements, sizeof *hx);
        if (!names || !h || !hx) rc = oom(err);
        for (i = 0; !rc && i < x->elements; i++)
            if (x->element[i]->type == REDIS_REPLY_STRING && (names[n] = reply_dup(x->element[i])))
                n++;
        if (n) qsort(names, n, sizeof *names, by_text);
        for (i = 0; !rc && i < n; i++) {
            char dk[KEY_MAX];
            k_name(r, "def:", names[i], dk);
            cmd_add(&h[i], "HGETALL");
            cmd_dup(&h[i], dk);
        }
        if (!rc && n) rc = rs_pipe(r, h, n, hx, k, err);
        for (i = 0; !rc && i < n; i++) {
            /* versions in order: the hash holds version -> JSON */
            json_object *byv[64];
            int vs[64];
            size_t m = 0, a, b2;
            if (is_err(hx[i]) || hx[i]->type != REDIS_REPLY_ARRAY) continue;
            for (j = 0; j + 1 < hx[i]->elements && m < 64; j += 2) {
                const redisReply *v = hx[i]->element[j], *d = hx[i]->element[j + 1];
                json_object *def;
                if (v->type != REDIS_REPLY_STRING || d->type != REDIS_REPLY_STRING) continue;
                if (!(def = json_tokener_parse(d->str))) continue;
                vs[m] = atoi(v->str);
                byv[m++] = def;
            }
            for (a = 1; a < m; a++)
                for (b2 = a; b2 > 0 && vs[b2 - 1] > vs[b2]; b2--) {
                    int tv = vs[b2];
                    json_object *tj = byv[b2];
                    vs[b2] = vs[b2 - 1], byv[b2] = byv[b2 - 1];
                    vs[b2 - 1] = tv, byv[b2 - 1] = tj;
                }
            for (a = 0; a < m; a++)
                json_object_array_add(all, byv[a]);
        }
    }
    replies_free(&x, 1);
    if (hx) replies_free(hx, n);
    if (h) cmds_free(h, n);
    for (i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(h);
    free(hx);
    if (!rc && !(*json = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN))))
        rc = oom(err);
    json_object_put(all);
    return rc;
}

/* One round trip: HSET. */
int rs_taskdef_put(rs *r, const char *name, const char *json, weft_error *err)
{
    return hash_put(r, "taskdefs", "task name", name, json, err);
}

/* One round trip: HGET. */
int rs_taskdef_get(rs *r, const char *name, char **json, weft_error *err)
{
    char missing[200];
    snprintf(missing, sizeof missing, "no task definition %.150s", name);
    return hash_get(r, "taskdefs", "task name", name, json, missing, err);
}

/* One round trip: HGETALL. */
int rs_taskdef_list(rs *r, char **json, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    json_object *all;
    char **vals;
    size_t i, n = 0;
    int rc;
    *json = NULL;
    k_name(r, "taskdefs", "", k);
    cmd_add(&c, "HGETALL");
    cmd_add(&c, k);
    if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
    /* by name: the hash's order is arbitrary */
    vals = calloc(x->elements / 2 + 1, sizeof *vals);
    all = json_object_new_array();
    if (!vals || !all) {
        free(vals);
        json_object_put(all);
        replies_free(&x, 1);
        return oom(err);
    }
    for (i = 0; i + 1 < x->elements; i += 2) {
        const redisReply *nm = x->element[i], *v = x->element[i + 1];
        size_t len;
        if (nm->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        len = nm->len + v->len + 2;
        if (!(vals[n] = malloc(len))) continue;
        /* "name\0json": sorted by name, the JSON follows the NUL */
        memcpy(vals[n], nm->str, nm->len + 1);
        memcpy(vals[n] + nm->len + 1, v->str, v->len + 1);
        n++;
    }
    replies_free(&x, 1);
    qsort(vals, n, sizeof *vals, by_text);
    for (i = 0; i < n; i++) {
        json_object *d = json_tokener_parse(vals[i] + strlen(vals[i]) + 1);
        if (d) json_object_array_add(all, d);
        free(vals[i]);
    }
    free(vals);
    *json = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN));
    json_object_put(all);
    return *json ? 0 : oom(err);
}

/* One round trip: HMGET. */
int rs_taskdefs_get(rs *r, const char *const *names, size_t n, char **jsons, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;
    for (i = 0; i < n; i++)
        jsons[i] = NULL;
    if (!n) return 0;
    k_name(r, "taskdefs", "", k);
    cmd_add(&c, "HMGET");
    cmd_add(&c, k);
    for (i = 0; i < n; i++)
        cmd_add(&c, names[i]);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_ARRAY || x->elements != n) {
        replies_free(&x, 1);
        return bad_reply(r, k, err);
    }
    for (i = 0; i < n; i++)
        if (x->element[i]->type == REDIS_REPLY_STRING) jsons[i] = reply_dup(x->element[i]);
    replies_free(&x, 1);
    return 0;
}


/*
 * Lock provider "redis": one key per lock, SET key token NX PX ttl to take
 * it, a compare-and-delete script to release it, so a holder whose lock
 * expired and was taken by someone else never deletes the new holder's key.
 *
 * Config (an object, all optional):
 *   url        redis://[[user]:password@]host[:port][/db] or unix:///path[?db=N]
 *              (default $WEFT_REDIS_URL, else redis://127.0.0.1:6379)
 *   prefix     key prefix (default "weft:"); lock keys are <prefix>lock:{<key>}
 *   timeout_ms connect and command timeout (ms, or a duration string; 2000)
 *
 * A handle keeps a small pool of connections; acquire and release take one
 * for the length of the call, so calls from several threads run in
 * parallel. A connection that failed is dropped and the next call connects
 * again. hiredis writes with send(): the host should ignore SIGPIPE.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <hiredis/hiredis.h>
#include <weft/plugin.h>

#include "base/redis_url.h"

#define TOKEN_BYTES 16
#define TOKEN_LEN (2 * TOKEN_BYTES)
#define POOL_MAX 8
#define DEFAULT_URL "redis://127.0.0.1:6379"
#define RETRY_MIN_MS 2
#define RETRY_MAX_MS 50

/*
 * Release: delete the key only if it still holds our token.
 * KEYS[1] = the lock key; ARGV[1] = the token. Returns 1 deleted, 0 not ours.
 */
static const char release_lua[] = "if redis.call('get', KEYS[1]) == ARGV[1] then\n"
                                  "  return redis.call('del', KEYS[1])\n"
                                  "end\n"
                                  "return 0\n";

static const weft_host *H;

typedef struct redis_lock {
    ru_url url; /* url.shown, the password masked, is the form for messages */
    char *prefix;
    int timeout_ms;
    pthread_mutex_t mu; /* guards idle, nidle and sha */
    redisContext *idle[POOL_MAX];
    size_t nidle;
    char sha[41]; /* of release_lua once SCRIPT LOAD told us; "" before */
} redis_lock;

typedef struct conn {
    redisContext *c;
    int reused; /* came from the pool: may have gone stale */
} conn;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int make_token(char *buf, weft_error *err)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[TOKEN_BYTES];
    size_t got = 0, i;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return H->error(err, WEFT_EIO, "lock redis: getrandom: %s", strerror(errno));
        got += (size_t)n;
    }
    for (i = 0; i < sizeof raw; i++) {
        buf[2 * i] = hex[raw[i] >> 4];
        buf[2 * i + 1] = hex[raw[i] & 15];
    }
    buf[TOKEN_LEN] = 0;
    return 0;
}

/* ---- config ---- */

/*
 * Fill l->url from url (base/redis_url.c, compiled into this plugin): its
 * message, which names the URL with the password masked, after "lock redis: ".
 */
static int parse_url(redis_lock *l, const char *url, weft_error *err)
{
    weft_error why = {0};
    ru_url seeds[RU_SEEDS_MAX];
    size_t n = 0;
    int rc = ru_parse_list(url, seeds, RU_SEEDS_MAX, &n, &why);
    /* a list of seed nodes: the lock is kept on the first */
    if (rc == 0) {
        l->url = seeds[0];
        memset(&seeds[0], 0, sizeof seeds[0]);
    }
    while (n)
        ru_clear(&seeds[--n]);
    if (rc == WEFT_ENOMEM) return H->error(err, rc, "lock redis: out of memory");
    if (rc) return H->error(err, rc, "lock redis: %s", why.msg);
    return 0;
}

static void lock_free(redis_lock *l)
{
    size_t i;
    for (i = 0; i < l->nidle; i++)
        redisFree(l->idle[i]);
    ru_clear(&l->url);
    free(l->prefix);
    free(l);
}

typedef struct options {
    const char *url, *prefix;
    int64_t timeout_ms;
} options;

static const weft_config_field options_table[] = {
    WEFT_CONFIG_KEY(WEFT_CONFIG_STRING, options, url),
    WEFT_CONFIG_KEY(WEFT_CONFIG_STRING, options, prefix, .dflt = "weft:"),
    WEFT_CONFIG_KEY(WEFT_CONFIG_MS, options, timeout_ms, .dflt = "2000", .min = 1, .max = 3600000),
    WEFT_CONFIG_END,
};

/* config is borrowed. Returns a handle the caller owns (free with close), or
 * NULL with err set. Does not connect: a Redis that is down now is tried
 * again on every call. */
static void *redis_open(const weft_host *host, json_object *config, weft_error *err)
{
    redis_lock *l = calloc(1, sizeof *l);
    const char *env = getenv("WEFT_REDIS_URL");
    options o = {.url = env && *env ? env : DEFAULT_URL};

    if (!l) {
        H->error(err, WEFT_ENOMEM, "lock redis: out of memory");
        return NULL;
    }
    if (H->config_fill(options_table, config, &o, "lock redis", err)) goto fail;
    l->timeout_ms = (int)o.timeout_ms;
    if (parse_url(l, o.url, err)) goto fail;
    if (!(l->prefix = strdup(o.prefix))) {
        H->error(err, WEFT_ENOMEM, "lock redis: out of memory");
        goto fail;
    }
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        H->error(err, WEFT_ENOMEM, "lock redis: cannot create a mutex");
        goto fail;
    }
    return l;
fail:
    lock_free(l);
    return NULL;
}

/* Takes ownership of the handle; no call may be in flight. */
static void redis_close(void *lock)
{
    redis_lock *l = lock;
    if (!l) return;
    pthread_mutex_destroy(&l->mu);
    lock_free(l);
}

/* ---- connections ---- */

static struct timeval tv_of(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

/* An I/O error of connection c (may be NULL), naming the URL; does not free c. */
static int io_error(redis_lock *l, redisContext *c, const char *what, weft_error *err)
{
    return H->error(err, WEFT_EIO, "lock redis: %s: %s: %s", l->url.shown, what,
                    c && c->err ? c->errstr : "no reply");
}

/* One command on c (argv borrowed). The reply is the caller's to free. */
static redisReply *command(redisContext *c, int argc, const char **argv)
{
    return redisCommandArgv(c, argc, argv, NULL);
}

/* A connection (pooled or new, AUTH and SELECT done) into *out. */
static int conn_get(redis_lock *l, conn *out, weft_error *err)
{
    redisContext *c = NULL;
    redisReply *r;

    pthread_mutex_lock(&l->mu);
    if (l->nidle) c = l->idle[--l->nidle];
    pthread_mutex_unlock(&l->mu);
    out->reused = c != NULL;
    if (c) {
        out->c = c;
        return 0;
    }

    c = l->url.path ? redisConnectUnixWithTimeout(l->url.path, tv_of(l->timeout_ms))
                    : redisConnectWithTimeout(l->url.host, l->url.port, tv_of(l->timeout_ms));
    if (!c) return H->error(err, WEFT_EIO, "lock redis: %s: cannot connect", l->url.shown);
    if (c->err) {
        io_error(l, c, "cannot connect", err);
        redisFree(c);
        return WEFT_EIO;
    }
    if (redisSetTimeout(c, tv_of(l->timeout_ms)) != REDIS_OK) {
        io_error(l, c, "cannot set the timeout", err);
        redisFree(c);
        return WEFT_EIO;
    }
    if (l->url.password) {
        const ru_url *u = &l->url;
        const char *auth[] = {"AUTH", u->user ? u->user : u->password, u->password};
        r = command(c, u->user ? 3 : 2, auth);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            if (r)
                H->error(err, WEFT_EIO, "lock redis: %s: AUTH failed: %s", l->url.shown, r->str);
            else
                io_error(l, c, "AUTH", err);
            freeReplyObject(r);
            redisFree(c);
            return WEFT_EIO;
        }
        freeReplyObject(r);
    }
    if (l->url.db) {
        char db[16];
        const char *sel[] = {"SELECT", db};
        snprintf(db, sizeof db, "%d", l->url.db);
        r = command(c, 2, sel);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            if (r)
                H->error(err, WEFT_EIO, "lock redis: %s: SELECT failed: %s", l->url.shown, r->str);
            else
                io_error(l, c, "SELECT", err);
            freeReplyObject(r);
            redisFree(c);
            return WEFT_EIO;
        }
        freeReplyObject(r);
    }
    out->c = c;
    return 0;
}

/* Give c back to the pool, or drop it when it failed or the pool is full. */
static void conn_put(redis_lock *l, conn *cn)
{
    redisContext *c = cn->c;
    cn->c = NULL;
    if (!c) return;
    if (!c->err) {
        pthread_mutex_lock(&l->mu);
        if (l->nidle < POOL_MAX) {
            l->idle[l->nidle++] = c;
            c = NULL;
        }
        pthread_mutex_unlock(&l->mu);
    }
    if (c) redisFree(c);
}

/*
 * Did c fail because the server closed it (Redis restarted since the
 * connection was pooled), rather than by a timeout? Only then is a command
 * sure not to have run, and safe to send again.
 */
static int closed_under_us(const redisContext *c, int saved_errno)
{
    return c->err == REDIS_ERR_EOF ||
           (c->err == REDIS_ERR_IO && saved_errno != EAGAIN && saved_errno != EWOULDBLOCK);
}

/* Drop every pooled connection: they all went to the server that went away. */
static void drain_pool(redis_lock *l)
{
    redisContext *idle[POOL_MAX];
    size_t n, i;
    pthread_mutex_lock(&l->mu);
    n = l->nidle;
    memcpy(idle, l->idle, n * sizeof idle[0]);
    l->nidle = 0;
    pthread_mutex_unlock(&l->mu);
    for (i = 0; i < n; i++)
        redisFree(idle[i]);
}

/*
 * Run one command. When a pooled connection turns out closed by the server,
 * the pool is dropped and the command sent once more on a new connection.
 * NULL on failure with err set; the reply is the caller's to free.
 */
static redisReply *run(redis_lock *l, conn *cn, int argc, const char **argv, weft_error *err)
{
    redisReply *r = command(cn->c, argc, argv);
    if (r) return r;
    if (cn->reused && closed_under_us(cn->c, errno)) {
        redisFree(cn->c);
        cn->c = NULL;
        drain_pool(l);
        if (conn_get(l, cn, err)) return NULL;
        if ((r = command(cn->c, argc, argv)) != NULL) return r;
    }
    io_error(l, cn->c, argv[0], err);
    return NULL;
}

/* "<prefix>lock:{<key>}", malloc'd. */
static char *lock_key(redis_lock *l, const char *key)
{
    size_t n = strlen(l->prefix) + strlen(key) + 8;
    char *k = malloc(n);
    if (k) snprintf(k, n, "%slock:{%s}", l->prefix, key);
    return k;
}

/* ---- acquire / release ---- */

/* key is borrowed; the token is copied into the caller's buffer. wait_ms <= 0 tries once. */
static int redis_acquire(void *lock, const char *key, int64_t ttl_ms, int64_t wait_ms, char *token,
                         size_t token_size, weft_error *err)
{
    redis_lock *l = lock;
    char mine[TOKEN_LEN + 1], ttl[24], *k;
    const char *argv[6];
    int64_t deadline = mono_ms() + (wait_ms > 0 ? wait_ms : 0), delay = RETRY_MIN_MS, now;
    conn cn = {0};
    int rc;

    if (!key || !*key) return H->error(err, WEFT_EINVAL, "lock redis: empty key");
    if (ttl_ms <= 0)
        return H->error(err, WEFT_EINVAL, "lock redis: key '%s': ttl must be > 0 ms (got %lld)",
                        key, (long long)ttl_ms);
    if (!token || token_size < sizeof mine)
        return H->error(err, WEFT_EINVAL, "lock redis: token buffer too small (need %d bytes)",
                        TOKEN_LEN + 1);
    if ((rc = make_token(mine, err))) return rc;
    if (!(k = lock_key(l, key))) return H->error(err, WEFT_ENOMEM, "lock redis: out of memory");
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    argv[0] = "SET";
    argv[1] = k;
    argv[2] = mine;
    argv[3] = "NX";
    argv[4] = "PX";
    argv[5] = ttl;

    if ((rc = conn_get(l, &cn, err))) goto out;
    for (;;) {
        redisReply *r = run(l, &cn, 6, argv, err);
        if (!r) {
            rc = WEFT_EIO;
            break;
        }
        if (r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK")) {
            freeReplyObject(r);
            memcpy(token, mine, sizeof mine);
            rc = 0;
            break;
        }
        if (r->type != REDIS_REPLY_NIL) {
            rc = H->error(err, WEFT_EIO, "lock redis: %s: SET %s: %s", l->url.shown, k,
                          r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            freeReplyObject(r);
            break;
        }
        freeReplyObject(r);
        now = mono_ms();
        if (now >= deadline) {
            rc = H->error(err, WEFT_ETIMEOUT, "lock redis: key '%s' is held (waited %lld ms)", key,
                          (long long)(wait_ms > 0 ? wait_ms : 0));
            break;
        }
        sleep_ms(delay < deadline - now ? delay : deadline - now);
        delay = delay * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : delay * 2;
    }
out:
    conn_put(l, &cn);
    free(k);
    return rc;
}

/* The script's SHA1, loading it once per handle; "" into sha if that failed. */
static void script_sha(redis_lock *l, conn *cn, char sha[41])
{
    const char *argv[] = {"SCRIPT", "LOAD", release_lua};
    redisReply *r;
    pthread_mutex_lock(&l->mu);
    memcpy(sha, l->sha, 41);
    pthread_mutex_unlock(&l->mu);
    if (sha[0]) return;
    r = command(cn->c, 3, argv);
    if (r && r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(sha, r->str, 40);
        sha[40] = 0;
        pthread_mutex_lock(&l->mu);
        memcpy(l->sha, sha, 41);
        pthread_mutex_unlock(&l->mu);
    }
    freeReplyObject(r);
}

/* key and token are borrowed. WEFT_ESTATE when the key no longer holds token. */
static int redis_release(void *lock, const char *key, const char *token, weft_error *err)
{
    redis_lock *l = lock;
    char sha[41], *k;
    const char *argv[5];
    redisReply *r = NULL;
    conn cn = {0};
    int rc;

    if (!key || !token)
        return H->error(err, WEFT_EINVAL, "lock redis: release needs a key and token");
    if (!(k = lock_key(l, key))) return H->error(err, WEFT_ENOMEM, "lock redis: out of memory");
    if ((rc = conn_get(l, &cn, err))) goto out;
    script_sha(l, &cn, sha);
    argv[1] = sha;
    argv[2] = "1";
    argv[3] = k;
    argv[4] = token;
    if (sha[0]) {
        argv[0] = "EVALSHA";
        r = run(l, &cn, 5, argv, err);
        if (!r) {
            rc = WEFT_EIO;
            goto out;
        }
    }
    if (!r || (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8))) {
        /* The script cache was flushed or this is another server: EVAL loads it again. */
        freeReplyObject(r);
        argv[0] = "EVAL";
        argv[1] = release_lua;
        if (!(r = run(l, &cn, 5, argv, err))) {
            rc = WEFT_EIO;
            goto out;
        }
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1)
        rc = 0;
    else if (r->type == REDIS_REPLY_INTEGER)
        rc = H->error(err, WEFT_ESTATE,
                      "lock redis: key '%s' is not held by this token (it expired, and may have "
                      "been taken by another holder)",
                      key);
    else
        rc = H->error(err, WEFT_EIO, "lock redis: %s: release %s: %s", l->url.shown, k,
                      r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    freeReplyObject(r);
out:
    conn_put(l, &cn);
    free(k);
    return rc;
}

static const weft_lock_provider redis_provider =
    WEFT_LOCK_PROVIDER(.name = "redis", .open = redis_open, .acquire = redis_acquire,
                       .release = redis_release, .close = redis_close);

WEFT_PLUGIN(lock_redis, .locks = &redis_provider, .nlocks = 1, .host = &H)

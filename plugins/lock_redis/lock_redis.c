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
 * A handle keeps a small pool of connections per server; acquire and
 * release take one for the length of a command, so calls from several
 * threads run in parallel. A connection that failed is dropped and the next
 * call connects again. hiredis writes with send(): the host should ignore
 * SIGPIPE.
 *
 * On a Redis Cluster the lock key's slot decides the node: a command goes
 * to the seed (the URL's first node) until a MOVED names the slot's node,
 * which is then remembered per slot; an ASK is followed for that command
 * only. A node that cannot be reached sends its slots back to the seed,
 * which names the node that took them over.
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

#include "base/keyslot.h"
#include "base/redis_url.h"

#define TOKEN_BYTES 16
#define TOKEN_LEN (2 * TOKEN_BYTES)
#define POOL_MAX 8
#define DEFAULT_URL "redis://127.0.0.1:6379"
#define RETRY_MIN_MS 2
#define RETRY_MAX_MS 50
#define NODES_MAX 32 /* servers a handle keeps pools for: the seed and cluster primaries */
#define REDIRECTS_MAX 5

/*
 * Release: delete the key only if it still holds our token.
 * KEYS[1] = the lock key; ARGV[1] = the token. Returns 1 deleted, 0 not ours.
 */
static const char release_lua[] = "if redis.call('get', KEYS[1]) == ARGV[1] then\n"
                                  "  return redis.call('del', KEYS[1])\n"
                                  "end\n"
                                  "return 0\n";

static const weft_host *H;

/* A server and its idle connections; node 0 is the URL's (the seed). */
typedef struct node {
    char host[256];
    int port;
    unsigned gen; /* bumped when the entry is given to another server */
    redisContext *idle[POOL_MAX];
    size_t nidle;
} node;

typedef struct redis_lock {
    ru_url url; /* url.shown, the password masked, is the form for messages */
    char *prefix;
    int timeout_ms;
    pthread_mutex_t mu; /* guards nodes, nnodes, slot and sha */
    node nodes[NODES_MAX];
    size_t nnodes;
    int8_t slot[RC_SLOTS];     /* on a cluster, the node of each slot a MOVED named; 0: the seed */
    char sha[41];              /* of release_lua once SCRIPT LOAD told us; "" before */
    ru_url more[RU_SEEDS_MAX]; /* the URL list's other seeds, tried in turn when the seed fails */
    size_t nmore, seed;        /* seed: 0 the URL's first, else more[seed - 1] */
} redis_lock;

typedef struct conn {
    redisContext *c;
    int node;
    unsigned gen; /* the node's when taken: pooled again only if still so */
    int reused;   /* came from the pool: may have gone stale */
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
    /* a list of seed nodes: the first, then the next ones when it fails */
    if (rc == 0) {
        size_t i;
        l->url = seeds[0];
        for (i = 1; i < n; i++)
            l->more[l->nmore++] = seeds[i];
        n = 0;
    }
    while (n)
        ru_clear(&seeds[--n]);
    if (rc == WEFT_ENOMEM) return H->error(err, rc, "lock redis: out of memory");
    if (rc) return H->error(err, rc, "lock redis: %s", why.msg);
    return 0;
}

static void lock_free(redis_lock *l)
{
    size_t i, j;
    for (j = 0; j < l->nnodes; j++)
        for (i = 0; i < l->nodes[j].nidle; i++)
            redisFree(l->nodes[j].idle[i]);
    ru_clear(&l->url);
    while (l->nmore)
        ru_clear(&l->more[--l->nmore]);
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
    l->nnodes = 1;
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

/* A connection to node n (pooled or new, AUTH and SELECT done) into *out. */
static int conn_get(redis_lock *l, int n, conn *out, weft_error *err)
{
    redisContext *c = NULL;
    redisReply *r;
    node *v = &l->nodes[n];
    const ru_url *u = &l->url;
    char host[256];
    int port;
    size_t seed;

    pthread_mutex_lock(&l->mu);
    if (v->nidle) c = v->idle[--v->nidle];
    snprintf(host, sizeof host, "%s", v->host);
    port = v->port;
    out->gen = v->gen;
    seed = l->seed;
    pthread_mutex_unlock(&l->mu);
    if (seed) u = &l->more[seed - 1];
    out->reused = c != NULL;
    out->node = n;
    if (c) {
        out->c = c;
        return 0;
    }

    if (n > 0)
        c = redisConnectWithTimeout(host, port, tv_of(l->timeout_ms));
    else if (u->path)
        c = redisConnectUnixWithTimeout(u->path, tv_of(l->timeout_ms));
    else
        c = redisConnectWithTimeout(u->host, u->port, tv_of(l->timeout_ms));
    if (n == 0 && (!c || c->err) && l->nmore) {
        /* the next seed for the next call */
        pthread_mutex_lock(&l->mu);
        if (l->seed == seed) l->seed = (seed + 1) % (l->nmore + 1);
        pthread_mutex_unlock(&l->mu);
    }
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
    if (u->password) {
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
    if (u->db && n == 0) {
        char db[16];
        const char *sel[] = {"SELECT", db};
        snprintf(db, sizeof db, "%d", u->db);
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
        node *v = &l->nodes[cn->node];
        pthread_mutex_lock(&l->mu);
        if (v->nidle < POOL_MAX && v->gen == cn->gen) {
            v->idle[v->nidle++] = c;
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

/* Drop node v's pooled connections: they all went to the server that went away. */
static void drain_pool(redis_lock *l, int v)
{
    redisContext *idle[POOL_MAX];
    size_t n, i;
    pthread_mutex_lock(&l->mu);
    n = l->nodes[v].nidle;
    memcpy(idle, l->nodes[v].idle, n * sizeof idle[0]);
    l->nodes[v].nidle = 0;
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
        int v = cn->node;
        redisFree(cn->c);
        cn->c = NULL;
        drain_pool(l, v);
        if (conn_get(l, v, cn, err)) return NULL;
        if ((r = command(cn->c, argc, argv)) != NULL) return r;
    }
    io_error(l, cn->c, argv[0], err);
    return NULL;
}

/* "MOVED <slot> <host>:<port>" or "ASK ...": the node it names (added when
 * new, in the place of one no slot names when the table is full), or -1. */
static int redirect(redis_lock *l, const redisReply *r, int *slot)
{
    redisContext *drop[POOL_MAX];
    const char *at;
    size_t i, hl, ndrop = 0;
    int n = -1, port, s;
    if (rc_redirect_parse(r->str, &s, &at, &hl, &port) != 0 || hl >= 256) return -1;
    pthread_mutex_lock(&l->mu);
    for (i = 1; i < l->nnodes && n < 0; i++)
        if (l->nodes[i].port == port && strlen(l->nodes[i].host) == hl &&
            !memcmp(l->nodes[i].host, at, hl))
            n = (int)i;
    if (n < 0 && l->nnodes < NODES_MAX) n = (int)l->nnodes++;
    if (n < 0) {
        /* full (servers replaced over failovers): reuse one no slot names */
        unsigned char named[NODES_MAX] = {0};
        for (i = 0; i < RC_SLOTS; i++)
            if (l->slot[i] > 0 && l->slot[i] < NODES_MAX) named[l->slot[i]] = 1;
        for (i = 1; i < l->nnodes && n < 0; i++)
            if (!named[i] && (int)i != l->slot[s]) n = (int)i;
        if (n > 0) {
            ndrop = l->nodes[n].nidle;
            memcpy(drop, l->nodes[n].idle, ndrop * sizeof drop[0]);
            l->nodes[n].nidle = 0;
            l->nodes[n].gen++; /* its connections in use are not pooled again */
        }
    }
    if (n > 0) {
        memcpy(l->nodes[n].host, at, hl);
        l->nodes[n].host[hl] = 0;
        l->nodes[n].port = port;
    }
    pthread_mutex_unlock(&l->mu);
    for (i = 0; i < ndrop; i++)
        redisFree(drop[i]);
    *slot = s;
    return n;
}

static int is_redirect(const redisReply *r, const char *what)
{
    size_t n = strlen(what);
    return r->type == REDIS_REPLY_ERROR && !strncmp(r->str, what, n) && r->str[n] == ' ';
}

/*
 * One command about key k (its slot picks the node on a cluster),
 * following MOVED and ASK. NULL on failure with err set; the reply is the
 * caller's to free.
 */
static redisReply *call(redis_lock *l, const char *k, int argc, const char **argv, weft_error *err)
{
    int slot = rc_key_slot(k, strlen(k)), n, ask = 0, hops, s2;
    redisReply *r = NULL;
    pthread_mutex_lock(&l->mu);
    n = l->slot[slot];
    pthread_mutex_unlock(&l->mu);
    for (hops = 0; hops <= REDIRECTS_MAX; hops++) {
        conn cn = {0};
        if (conn_get(l, n, &cn, err)) {
            /* a node gone (a failed primary): its slots are asked of the seed again */
            pthread_mutex_lock(&l->mu);
            if (l->slot[slot] == n) l->slot[slot] = 0;
            pthread_mutex_unlock(&l->mu);
            return NULL;
        }
        if (ask) {
            const char *asking[] = {"ASKING"};
            freeReplyObject(run(l, &cn, 1, asking, err));
        }
        r = run(l, &cn, argc, argv, err);
        conn_put(l, &cn);
        if (!r) {
            pthread_mutex_lock(&l->mu);
            if (l->slot[slot] == n) l->slot[slot] = 0;
            pthread_mutex_unlock(&l->mu);
            return NULL;
        }
        ask = is_redirect(r, "ASK");
        if (!ask && !is_redirect(r, "MOVED")) return r;
        if ((n = redirect(l, r, &s2)) < 0) return r;
        if (!ask) {
            pthread_mutex_lock(&l->mu);
            l->slot[s2] = (int8_t)n;
            pthread_mutex_unlock(&l->mu);
        }
        freeReplyObject(r);
        r = NULL;
    }
    H->error(err, WEFT_EIO, "lock redis: %s: %s: redirected more than %d times", l->url.shown, k,
             REDIRECTS_MAX);
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

    for (;;) {
        redisReply *r = call(l, k, 6, argv, err);
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
    free(k);
    return rc;
}

/* The script's SHA1, loading it once per handle; "" into sha if that failed. */
static void script_sha(redis_lock *l, const char *k, char sha[41])
{
    const char *argv[] = {"SCRIPT", "LOAD", release_lua};
    weft_error ignored = {0};
    redisReply *r;
    pthread_mutex_lock(&l->mu);
    memcpy(sha, l->sha, 41);
    pthread_mutex_unlock(&l->mu);
    if (sha[0]) return;
    r = call(l, k, 3, argv, &ignored);
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
    int rc = 0;

    if (!key || !token)
        return H->error(err, WEFT_EINVAL, "lock redis: release needs a key and token");
    if (!(k = lock_key(l, key))) return H->error(err, WEFT_ENOMEM, "lock redis: out of memory");
    script_sha(l, k, sha);
    argv[1] = sha;
    argv[2] = "1";
    argv[3] = k;
    argv[4] = token;
    if (sha[0]) {
        argv[0] = "EVALSHA";
        r = call(l, k, 5, argv, err);
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
        if (!(r = call(l, k, 5, argv, err))) {
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
    free(k);
    return rc;
}

static const weft_lock_provider redis_provider =
    WEFT_LOCK_PROVIDER(.name = "redis", .open = redis_open, .acquire = redis_acquire,
                       .release = redis_release, .close = redis_close);

WEFT_PLUGIN(lock_redis, .locks = &redis_provider, .nlocks = 1, .host = &H)

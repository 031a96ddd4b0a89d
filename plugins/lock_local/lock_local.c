/*
 * Two lock providers that need no server:
 *
 * - "none": acquire always succeeds with a fresh token, release does
 *   nothing. For deployments that rely on fencing alone (a stale decider's
 *   state write is refused by the execution's fence).
 * - "local": mutual exclusion per key between the threads of this process.
 *   A key is held until released with its token or until its TTL passes;
 *   after that another caller may take it over. acquire waits up to wait_ms
 *   on a condition variable. Each handle returned by open is its own lock
 *   space: two handles never exclude each other.
 *
 * Tokens are 32 random hex digits (getrandom).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>
#include <weft/plugin.h>

#define TOKEN_BYTES 16
#define TOKEN_LEN (2 * TOKEN_BYTES)
#define NBUCKETS 256

static const weft_host *H;

/* A fresh random token into buf (at least TOKEN_LEN + 1 bytes). */
static int make_token(char *buf, size_t size, const char *provider, weft_error *err)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[TOKEN_BYTES];
    size_t got = 0, i;
    if (!buf || size < TOKEN_LEN + 1)
        return H->error(err, WEFT_EINVAL, "lock %s: token buffer too small (need %d bytes)",
                        provider, TOKEN_LEN + 1);
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return H->error(err, WEFT_EIO, "lock %s: getrandom: %s", provider, strerror(errno));
        got += (size_t)n;
    }
    for (i = 0; i < sizeof raw; i++) {
        buf[2 * i] = hex[raw[i] >> 4];
        buf[2 * i + 1] = hex[raw[i] & 15];
    }
    buf[TOKEN_LEN] = 0;
    return 0;
}

/* Options: none for either provider; anything else is a mistake worth naming. */
static const weft_config_field no_options[] = {WEFT_CONFIG_END};

/* ---- none ---- */

static char none_handle; /* open must return non-NULL; there is no state */

static void *none_open(const weft_host *host, json_object *config, weft_error *err)
{
    return H->config_fill(no_options, config, NULL, "lock none", err) ? NULL : &none_handle;
}

static int none_acquire(void *lock, const char *key, int64_t ttl_ms, int64_t wait_ms, char *token,
                        size_t token_size, weft_error *err)
{
    return make_token(token, token_size, "none", err);
}

static int none_release(void *lock, const char *key, const char *token, weft_error *err)
{
    return 0;
}

static void none_close(void *lock) {}

/* ---- local ---- */

typedef struct held {
    struct held *next;
    char *key; /* owned */
    char token[TOKEN_LEN + 1];
    int64_t expires_ms; /* monotonic clock */
} held;

typedef struct local_lock {
    pthread_mutex_t mu;
    /* Broadcast on every release: waiters re-check their key. */
    pthread_cond_t released;
    held *buckets[NBUCKETS];
} local_lock;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t bucket_of(const char *key)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 1099511628211ull;
    return (size_t)(h % NBUCKETS);
}

/* The entry of key in its bucket; *prev gets the link pointing at it. */
static held *find(local_lock *l, const char *key, held ***prev)
{
    held **p = &l->buckets[bucket_of(key)];
    for (; *p; p = &(*p)->next)
        if (!strcmp((*p)->key, key)) break;
    if (prev) *prev = p;
    return *p;
}

/* Drop expired entries of key's bucket, so abandoned keys do not pile up. */
static void prune(local_lock *l, const char *key, int64_t now)
{
    held **p = &l->buckets[bucket_of(key)];
    while (*p) {
        held *e = *p;
        if (e->expires_ms <= now) {
            *p = e->next;
            free(e->key);
            free(e);
        } else {
            p = &e->next;
        }
    }
}

static void *local_open(const weft_host *host, json_object *config, weft_error *err)
{
    pthread_condattr_t ca;
    local_lock *l;
    if (H->config_fill(no_options, config, NULL, "lock local", err)) return NULL;
    l = calloc(1, sizeof *l);
    if (!l) {
        H->error(err, WEFT_ENOMEM, "lock local: out of memory");
        return NULL;
    }
    /* Waits are timed on the monotonic clock: wall-clock jumps must not
     * stretch or cut them. */
    if (pthread_condattr_init(&ca) != 0) goto fail;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&l->released, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        goto fail;
    }
    pthread_condattr_destroy(&ca);
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        pthread_cond_destroy(&l->released);
        goto fail;
    }
    return l; /* caller owns; freed by local_close */
fail:
    free(l);
    H->error(err, WEFT_ENOMEM, "lock local: cannot create a mutex or condition variable");
    return NULL;
}

static void wait_until(local_lock *l, int64_t until_ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(until_ms / 1000);
    ts.tv_nsec = (long)(until_ms % 1000) * 1000000;
    pthread_cond_timedwait(&l->released, &l->mu, &ts);
}

/*
 * key is borrowed (copied when stored); the token is copied into the
 * caller's buffer. wait_ms <= 0 tries once.
 */
static int local_acquire(void *lock, const char *key, int64_t ttl_ms, int64_t wait_ms, char *token,
                         size_t token_size, weft_error *err)
{
    local_lock *l = lock;
    char mine[TOKEN_LEN + 1];
    int64_t now = mono_ms(), deadline = now + (wait_ms > 0 ? wait_ms : 0);
    held *e;
    int rc;

    if (!key || !*key) return H->error(err, WEFT_EINVAL, "lock local: empty key");
    if (ttl_ms <= 0)
        return H->error(err, WEFT_EINVAL, "lock local: key '%s': ttl must be > 0 ms (got %lld)",
                        key, (long long)ttl_ms);
    if (!token || token_size < sizeof mine)
        return H->error(err, WEFT_EINVAL, "lock local: token buffer too small (need %d bytes)",
                        TOKEN_LEN + 1);
    if ((rc = make_token(mine, sizeof mine, "local", err))) return rc;

    pthread_mutex_lock(&l->mu);
    for (;;) {
        now = mono_ms();
        e = find(l, key, NULL);
        if (!e || e->expires_ms <= now) break;
        if (now >= deadline) {
            pthread_mutex_unlock(&l->mu);
            return H->error(err, WEFT_ETIMEOUT, "lock local: key '%s' is held (waited %lld ms)",
                            key, (long long)(wait_ms > 0 ? wait_ms : 0));
        }
        /* Also wake when the holder's TTL runs out: nobody signals that. */
        wait_until(l, e->expires_ms < deadline ? e->expires_ms : deadline);
    }
    if (!e) {
        prune(l, key, now);
        e = calloc(1, sizeof *e);
        if (!e || !(e->key = strdup(key))) {
            free(e);
            pthread_mutex_unlock(&l->mu);
            return H->error(err, WEFT_ENOMEM, "lock local: out of memory");
        }
        e->next = l->buckets[bucket_of(key)];
        l->buckets[bucket_of(key)] = e;
    }
    memcpy(e->token, mine, sizeof mine);
    e->expires_ms = now + ttl_ms;
    pthread_mutex_unlock(&l->mu);
    memcpy(token, mine, sizeof mine);
    return 0;
}

/*
 * Only the current holder's token releases. A lock whose TTL passed is no
 * longer held, even if nobody took it over yet: releasing it reports
 * WEFT_ESTATE, as the redis provider does once the key has expired.
 */
static int local_release(void *lock, const char *key, const char *token, weft_error *err)
{
    local_lock *l = lock;
    held *e, **prev;
    int expired;

    if (!key || !token)
        return H->error(err, WEFT_EINVAL, "lock local: release needs a key and token");
    pthread_mutex_lock(&l->mu);
    e = find(l, key, &prev);
    if (!e || strcmp(e->token, token) != 0) {
        pthread_mutex_unlock(&l->mu);
        return H->error(err, WEFT_ESTATE,
                        e ? "lock local: key '%s' is held by another token"
                          : "lock local: key '%s' is not held",
                        key);
    }
    expired = e->expires_ms <= mono_ms();
    *prev = e->next;
    free(e->key);
    free(e);
    pthread_cond_broadcast(&l->released);
    pthread_mutex_unlock(&l->mu);
    if (expired)
        return H->error(err, WEFT_ESTATE,
                        "lock local: key '%s' had expired before release (ttl too short?)", key);
    return 0;
}

/* Takes ownership of the handle; no call may be in flight. */
static void local_close(void *lock)
{
    local_lock *l = lock;
    size_t i;
    if (!l) return;
    for (i = 0; i < NBUCKETS; i++) {
        held *e = l->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            free(e->key);
            free(e);
        }
    }
    pthread_cond_destroy(&l->released);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static const weft_lock_provider locks[] = {
    WEFT_LOCK_PROVIDER(.name = "none", .open = none_open, .acquire = none_acquire,
                       .release = none_release, .close = none_close),
    WEFT_LOCK_PROVIDER(.name = "local", .open = local_open, .acquire = local_acquire,
                       .release = local_release, .close = local_close),
};

WEFT_PLUGIN(lock_local, .locks = locks, .nlocks = WEFT_COUNT(locks), .host = &H)

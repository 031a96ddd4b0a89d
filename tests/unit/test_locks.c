/*
 * The lock providers (plugins lock_local: none + local, lock_redis: redis),
 * loaded from the build tree with the real loader and host table. The redis
 * tests start their own redis-server on a free loopback port (skipped when
 * redis-server is not installed). Skipped (exit 77) without WEFT_TOP_BUILDDIR.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <hiredis/hiredis.h>

#include "plugin/host.h"
#include "plugin/loader.h"
#include "redis_fixture.h"
#include "base/util.h"

#define LONG_TTL 10000

static pl_registry *R;
static const weft_lock_provider *NONE, *LOCAL, *REDIS;

/* ---- helpers ---- */

static int64_t mono(void)
{
    return wu_mono_ms();
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int is_token(const char *t)
{
    size_t i, n = strlen(t);
    if (n != 32) return 0;
    for (i = 0; i < n; i++)
        if (!strchr("0123456789abcdef", t[i])) return 0;
    return 1;
}

/* Open p with config given as JSON text (NULL = no config). */
static void *open_with(const weft_lock_provider *p, const char *json, weft_error *err)
{
    json_object *cfg = json ? json_tokener_parse(json) : NULL;
    void *h;
    if (json) assert_non_null(cfg);
    h = p->open(host_table(), cfg, err);
    json_object_put(cfg);
    return h;
}

/* ---- a redis-server of our own (redis_fixture.h) ---- */

static rf_server srv;
static int redis_missing; /* redis-server is not installed: skip */

/* A port nobody listens on (for "Redis is down"). */
static int free_port(void)
{
    struct sockaddr_in a = {0};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* A connection to our server, or NULL. */
static redisContext *raw_connect(void)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* GET key on our server (db 0 unless db > 0): the value, or "" for nil. */
static void raw_get(int db, const char *key, char *out, size_t size)
{
    redisContext *c = raw_connect();
    redisReply *r;
    assert_non_null(c);
    if (db > 0) {
        r = redisCommand(c, "SELECT %d", db);
        assert_non_null(r);
        freeReplyObject(r);
    }
    r = redisCommand(c, "GET %s", key);
    assert_non_null(r);
    snprintf(out, size, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    redisFree(c);
}

static int redis_group_setup(void **state)
{
    int rc = rf_start(&srv);
    if (rc == RF_SKIP)
        redis_missing = 1;
    else if (rc != 0) {
        print_error("cannot start redis-server\n");
        return -1;
    }
    return 0;
}

static int redis_group_teardown(void **state)
{
    rf_stop(&srv);
    return 0;
}

static void *redis_open_default(void)
{
    char cfg[128];
    weft_error err = {0};
    void *h;
    snprintf(cfg, sizeof cfg, "{\"url\": \"%s\", \"prefix\": \"t:\", \"timeout_ms\": 1000}",
             srv.url);
    h = open_with(REDIS, cfg, &err);
    if (!h) print_error("open: %s\n", err.msg);
    assert_non_null(h);
    return h;
}

#define NEED_REDIS()                                                                               \
    do {                                                                                           \
        if (redis_missing) skip();                                                                 \
        assert_int_not_equal(srv.pid, 0);                                                          \
    } while (0)

/* ---- the shared properties ---- */

/*
 * N threads each add 1 to a shared counter ROUNDS times, with a
 * non-atomic read, sleep, write inside the lock: any overlap loses updates.
 */
struct race {
    const weft_lock_provider *p;
    void *handles[2];
    int rounds;
    long counter;
    int failures;
    pthread_mutex_t fail_mu;
};

struct racer {
    struct race *race;
    int index;
};

static void *racer_main(void *arg)
{
    struct racer *me = arg;
    struct race *r = me->race;
    void *h = r->handles[me->index % 2];
    int i;
    for (i = 0; i < r->rounds; i++) {
        char token[64];
        weft_error err = {0};
        long seen;
        if (r->p->acquire(h, "counter", LONG_TTL, 20000, token, sizeof token, &err) != 0) {
            pthread_mutex_lock(&r->fail_mu);
            r->failures++;
            pthread_mutex_unlock(&r->fail_mu);
            continue;
        }
        seen = r->counter;
        usleep(200);
        r->counter = seen + 1;
        if (r->p->release(h, "counter", token, &err) != 0) {
            pthread_mutex_lock(&r->fail_mu);
            r->failures++;
            pthread_mutex_unlock(&r->fail_mu);
        }
    }
    return NULL;
}

static void run_race(const weft_lock_provider *p, void *h1, void *h2, int nthreads, int rounds)
{
    struct race race = {p, {h1, h2}, rounds, 0, 0, PTHREAD_MUTEX_INITIALIZER};
    struct racer racers[16];
    pthread_t th[16];
    int i;
    assert_true(nthreads <= 16);
    for (i = 0; i < nthreads; i++) {
        racers[i].race = &race;
        racers[i].index = i;
        assert_int_equal(pthread_create(&th[i], NULL, racer_main, &racers[i]), 0);
    }
    for (i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(race.failures, 0);
    assert_int_equal(race.counter, (long)nthreads * rounds);
}

/* Held: another acquire times out after about wait_ms; another key is free. */
static void check_timeout_when_held(const weft_lock_provider *p, void *a, void *b)
{
    char t1[64], t2[64], t3[64];
    weft_error err = {0};
    int64_t start;
    assert_int_equal(p->acquire(a, "held", LONG_TTL, 0, t1, sizeof t1, &err), 0);
    assert_true(is_token(t1));
    start = mono();
    assert_int_equal(p->acquire(b, "held", LONG_TTL, 150, t2, sizeof t2, &err), WEFT_ETIMEOUT);
    assert_true(mono() - start >= 140);
    assert_non_null(strstr(err.msg, "held"));
    assert_int_equal(p->acquire(b, "held", LONG_TTL, 0, t2, sizeof t2, &err), WEFT_ETIMEOUT);
    assert_int_equal(p->acquire(b, "other", LONG_TTL, 0, t3, sizeof t3, &err), 0);
    assert_string_not_equal(t1, t3);
    assert_int_equal(p->release(a, "held", t1, &err), 0);
    assert_int_equal(p->release(b, "other", t3, &err), 0);
    /* Released: free again at once. */
    assert_int_equal(p->acquire(b, "held", LONG_TTL, 0, t2, sizeof t2, &err), 0);
    assert_int_equal(p->release(b, "held", t2, &err), 0);
}

/*
 * a's lock expires; b takes it over. a's late release must fail and must
 * not free b's lock.
 */
static void check_ttl_takeover(const weft_lock_provider *p, void *a, void *b)
{
    char ta[64], tb[64], tc[64];
    weft_error err = {0};
    int64_t start;
    assert_int_equal(p->acquire(a, "ttl", 100, 0, ta, sizeof ta, &err), 0);
    assert_int_equal(p->acquire(b, "ttl", LONG_TTL, 0, tb, sizeof tb, &err), WEFT_ETIMEOUT);
    sleep_ms(160);
    assert_int_equal(p->acquire(b, "ttl", LONG_TTL, 0, tb, sizeof tb, &err), 0);
    assert_string_not_equal(ta, tb);
    err.code = 0;
    assert_int_equal(p->release(a, "ttl", ta, &err), WEFT_ESTATE);
    assert_int_equal(err.code, WEFT_ESTATE);
    /* b still holds it. */
    assert_int_equal(p->acquire(a, "ttl", LONG_TTL, 0, tc, sizeof tc, &err), WEFT_ETIMEOUT);
    assert_int_equal(p->release(b, "ttl", tb, &err), 0);

    /* A waiter takes over when the holder's TTL runs out, nobody releasing. */
    assert_int_equal(p->acquire(a, "ttl", 150, 0, ta, sizeof ta, &err), 0);
    start = mono();
    assert_int_equal(p->acquire(b, "ttl", LONG_TTL, 5000, tb, sizeof tb, &err), 0);
    assert_true(mono() - start >= 100);
    assert_true(mono() - start < 4000);
    assert_int_equal(p->release(b, "ttl", tb, &err), 0);
}

static void check_wrong_token(const weft_lock_provider *p, void *h)
{
    char t[64], small[8];
    weft_error err = {0};
    assert_int_equal(p->acquire(h, "wrong", LONG_TTL, 0, t, sizeof t, &err), 0);
    assert_int_equal(p->release(h, "wrong", "0123456789abcdef0123456789abcdef", &err), WEFT_ESTATE);
    assert_non_null(strstr(err.msg, "wrong"));
    assert_int_equal(p->release(h, "never-taken", t, &err), WEFT_ESTATE);
    assert_int_equal(p->release(h, "wrong", t, &err), 0);
    assert_int_equal(p->release(h, "wrong", t, &err), WEFT_ESTATE); /* twice */
    /* Bad arguments. */
    assert_int_equal(p->acquire(h, "wrong", 0, 0, t, sizeof t, &err), WEFT_EINVAL);
    assert_int_equal(p->acquire(h, "", LONG_TTL, 0, t, sizeof t, &err), WEFT_EINVAL);
    assert_int_equal(p->acquire(h, "wrong", LONG_TTL, 0, small, sizeof small, &err), WEFT_EINVAL);
}

/* A waiter is woken by a release in another thread, well before wait_ms. */
struct later {
    const weft_lock_provider *p;
    void *h;
    const char *key;
    char token[64];
    int rc;
};

static void *release_later(void *arg)
{
    struct later *l = arg;
    weft_error err = {0};
    sleep_ms(100);
    l->rc = l->p->release(l->h, l->key, l->token, &err);
    return NULL;
}

static void check_waiter_wakes(const weft_lock_provider *p, void *a, void *b)
{
    struct later l = {p, a, "wake", "", -1};
    char t[64];
    weft_error err = {0};
    pthread_t th;
    int64_t start;
    assert_int_equal(p->acquire(a, "wake", LONG_TTL, 0, l.token, sizeof l.token, &err), 0);
    assert_int_equal(pthread_create(&th, NULL, release_later, &l), 0);
    start = mono();
    assert_int_equal(p->acquire(b, "wake", LONG_TTL, 8000, t, sizeof t, &err), 0);
    pthread_join(th, NULL);
    assert_int_equal(l.rc, 0);
    assert_true(mono() - start >= 80);
    assert_true(mono() - start < 5000);
    assert_int_equal(p->release(b, "wake", t, &err), 0);
}

/* ---- none ---- */

static void test_none_always_grants(void **state)
{
    weft_error err = {0};
    void *h = open_with(NONE, NULL, &err);
    char t1[64], t2[64];
    assert_non_null(h);
    assert_int_equal(NONE->acquire(h, "k", LONG_TTL, 0, t1, sizeof t1, &err), 0);
    assert_int_equal(NONE->acquire(h, "k", LONG_TTL, 0, t2, sizeof t2, &err), 0);
    assert_true(is_token(t1));
    assert_true(is_token(t2));
    assert_string_not_equal(t1, t2);
    assert_int_equal(NONE->release(h, "k", "not-a-token", &err), 0);
    assert_int_equal(NONE->release(h, "k", t1, &err), 0);
    assert_int_equal(NONE->release(h, "k", t1, &err), 0);
    NONE->close(h);

    assert_null(open_with(NONE, "{\"ttl\": 5}", &err));
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_non_null(strstr(err.msg, "ttl"));
}

/* ---- local ---- */

static void test_local_mutual_exclusion(void **state)
{
    weft_error err = {0};
    void *h = open_with(LOCAL, "{}", &err);
    assert_non_null(h);
    run_race(LOCAL, h, h, 8, 25);
    LOCAL->close(h);
}

static void test_local_timeout_when_held(void **state)
{
    weft_error err = {0};
    void *h = open_with(LOCAL, NULL, &err);
    assert_non_null(h);
    check_timeout_when_held(LOCAL, h, h);
    LOCAL->close(h);
}

static void test_local_waiter_wakes(void **state)
{
    weft_error err = {0};
    void *h = open_with(LOCAL, NULL, &err);
    assert_non_null(h);
    check_waiter_wakes(LOCAL, h, h);
    LOCAL->close(h);
}

static void test_local_ttl_takeover(void **state)
{
    weft_error err = {0};
    void *h = open_with(LOCAL, NULL, &err);
    char t[64];
    assert_non_null(h);
    check_ttl_takeover(LOCAL, h, h);
    /* Expired, not taken over: releasing still says the lock had lapsed. */
    assert_int_equal(LOCAL->acquire(h, "lapsed", 30, 0, t, sizeof t, &err), 0);
    sleep_ms(60);
    assert_int_equal(LOCAL->release(h, "lapsed", t, &err), WEFT_ESTATE);
    assert_non_null(strstr(err.msg, "expired"));
    LOCAL->close(h);
}

static void test_local_wrong_token(void **state)
{
    weft_error err = {0};
    void *h = open_with(LOCAL, NULL, &err);
    assert_non_null(h);
    check_wrong_token(LOCAL, h);
    LOCAL->close(h);
    assert_null(open_with(LOCAL, "{\"url\": \"x\"}", &err));
    assert_int_equal(err.code, WEFT_EINVAL);
}

/* Each handle is its own lock space; close frees held keys (LeakSanitizer checks). */
static void test_local_handles_independent(void **state)
{
    weft_error err = {0};
    void *a = open_with(LOCAL, NULL, &err), *b = open_with(LOCAL, NULL, &err);
    char ta[64], tb[64];
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(LOCAL->acquire(a, "k", LONG_TTL, 0, ta, sizeof ta, &err), 0);
    assert_int_equal(LOCAL->acquire(b, "k", LONG_TTL, 0, tb, sizeof tb, &err), 0);
    LOCAL->close(a);
    LOCAL->close(b);
}

/* ---- redis ---- */

static void test_redis_mutual_exclusion(void **state)
{
    void *a, *b;
    NEED_REDIS();
    a = redis_open_default();
    b = redis_open_default();
    run_race(REDIS, a, b, 6, 10);
    REDIS->close(a);
    REDIS->close(b);
}

static void test_redis_timeout_when_held(void **state)
{
    void *a, *b;
    char t[64], stored[64];
    weft_error err = {0};
    NEED_REDIS();
    a = redis_open_default();
    b = redis_open_default();
    check_timeout_when_held(REDIS, a, b);
    /* The key: <prefix>lock:{<key>}, holding the token, with a TTL. */
    assert_int_equal(REDIS->acquire(a, "wf-1", LONG_TTL, 0, t, sizeof t, &err), 0);
    raw_get(0, "t:lock:{wf-1}", stored, sizeof stored);
    assert_string_equal(stored, t);
    assert_int_equal(REDIS->release(a, "wf-1", t, &err), 0);
    raw_get(0, "t:lock:{wf-1}", stored, sizeof stored);
    assert_string_equal(stored, "");
    REDIS->close(a);
    REDIS->close(b);
}

static void test_redis_waiter_wakes(void **state)
{
    void *a, *b;
    NEED_REDIS();
    a = redis_open_default();
    b = redis_open_default();
    check_waiter_wakes(REDIS, a, b);
    REDIS->close(a);
    REDIS->close(b);
}

static void test_redis_ttl_takeover(void **state)
{
    void *a, *b;
    char stored[64], t[64];
    weft_error err = {0};
    NEED_REDIS();
    a = redis_open_default();
    b = redis_open_default();
    check_ttl_takeover(REDIS, a, b);

    /* The late release leaves the new holder's key in place. */
    assert_int_equal(REDIS->acquire(a, "late", 50, 0, t, sizeof t, &err), 0);
    sleep_ms(100);
    {
        char tb[64];
        assert_int_equal(REDIS->acquire(b, "late", LONG_TTL, 0, tb, sizeof tb, &err), 0);
        assert_int_equal(REDIS->release(a, "late", t, &err), WEFT_ESTATE);
        raw_get(0, "t:lock:{late}", stored, sizeof stored);
        assert_string_equal(stored, tb);
        assert_int_equal(REDIS->release(b, "late", tb, &err), 0);
    }
    REDIS->close(a);
    REDIS->close(b);
}

static void test_redis_wrong_token(void **state)
{
    void *h;
    NEED_REDIS();
    h = redis_open_default();
    check_wrong_token(REDIS, h);
    REDIS->close(h);
}

/* The release script is re-sent when Redis forgot it (SCRIPT FLUSH, failover). */
static void test_redis_noscript(void **state)
{
    void *h;
    char t[64];
    weft_error err = {0};
    redisContext *c;
    redisReply *r;
    NEED_REDIS();
    h = redis_open_default();
    assert_int_equal(REDIS->acquire(h, "ns", LONG_TTL, 0, t, sizeof t, &err), 0);
    assert_int_equal(REDIS->release(h, "ns", t, &err), 0);
    c = raw_connect();
    assert_non_null(c);
    r = redisCommand(c, "SCRIPT FLUSH");
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
    assert_int_equal(REDIS->acquire(h, "ns", LONG_TTL, 0, t, sizeof t, &err), 0);
    assert_int_equal(REDIS->release(h, "ns", t, &err), 0);
    REDIS->close(h);
}

static void test_redis_db_and_env_url(void **state)
{
    char cfg[160], stored[64], t[64];
    weft_error err = {0};
    void *h;
    NEED_REDIS();
    snprintf(cfg, sizeof cfg, "{\"url\": \"%s/3\", \"timeout_ms\": \"1s\"}", srv.url);
    h = open_with(REDIS, cfg, &err);
    assert_non_null(h);
    assert_int_equal(REDIS->acquire(h, "db", LONG_TTL, 0, t, sizeof t, &err), 0);
    raw_get(3, "weft:lock:{db}", stored, sizeof stored); /* default prefix */
    assert_string_equal(stored, t);
    raw_get(0, "weft:lock:{db}", stored, sizeof stored);
    assert_string_equal(stored, "");
    assert_int_equal(REDIS->release(h, "db", t, &err), 0);
    REDIS->close(h);

    /* No url: $WEFT_REDIS_URL. */
    setenv("WEFT_REDIS_URL", srv.url, 1);
    h = open_with(REDIS, NULL, &err);
    unsetenv("WEFT_REDIS_URL");
    assert_non_null(h);
    assert_int_equal(REDIS->acquire(h, "env", LONG_TTL, 0, t, sizeof t, &err), 0);
    raw_get(0, "weft:lock:{env}", stored, sizeof stored);
    assert_string_equal(stored, t);
    assert_int_equal(REDIS->release(h, "env", t, &err), 0);
    REDIS->close(h);
}

static void test_redis_unix_socket(void **state)
{
    char cfg[200], stored[64], t[64];
    weft_error err = {0};
    void *h;
    NEED_REDIS();
    snprintf(cfg, sizeof cfg, "{\"url\": \"%s?db=1\"}", srv.unix_url);
    h = open_with(REDIS, cfg, &err);
    if (!h) fail_msg("%s", err.msg);
    assert_int_equal(REDIS->acquire(h, "ux", LONG_TTL, 0, t, sizeof t, &err), 0);
    raw_get(1, "weft:lock:{ux}", stored, sizeof stored);
    assert_string_equal(stored, t);
    assert_int_equal(REDIS->release(h, "ux", t, &err), 0);
    REDIS->close(h);
    assert_null(open_with(REDIS, "{\"url\": \"unix://relative.sock\"}", &err));
    assert_int_equal(err.code, WEFT_EINVAL);
}

static void test_redis_down_then_back(void **state)
{
    void *h;
    char t[64];
    weft_error err = {0};
    NEED_REDIS();
    h = redis_open_default();
    assert_int_equal(REDIS->acquire(h, "down", LONG_TTL, 0, t, sizeof t, &err), 0);
    assert_int_equal(REDIS->release(h, "down", t, &err), 0); /* a pooled connection now */

    rf_kill(&srv);
    err.msg[0] = 0;
    assert_int_equal(REDIS->acquire(h, "down", LONG_TTL, 0, t, sizeof t, &err), WEFT_EIO);
    assert_int_equal(err.code, WEFT_EIO);
    assert_non_null(strstr(err.msg, srv.url));
    assert_int_equal(REDIS->acquire(h, "down", LONG_TTL, 1000, t, sizeof t, &err), WEFT_EIO);
    assert_int_equal(REDIS->release(h, "down", "0123456789abcdef0123456789abcdef", &err), WEFT_EIO);

    assert_int_equal(rf_restart(&srv), 0);
    assert_int_equal(REDIS->acquire(h, "down", LONG_TTL, 0, t, sizeof t, &err), 0);
    assert_int_equal(REDIS->release(h, "down", t, &err), 0);

    /* Restarted under a pooled connection: the stale connection is replaced. */
    rf_kill(&srv);
    assert_int_equal(rf_restart(&srv), 0);
    assert_int_equal(REDIS->acquire(h, "down", LONG_TTL, 0, t, sizeof t, &err), 0);
    assert_int_equal(REDIS->release(h, "down", t, &err), 0);
    REDIS->close(h);
}

static void test_redis_config_errors(void **state)
{
    weft_error err = {0};
    char cfg[160], t[64];
    void *h;
    int dead = free_port();

    assert_null(open_with(REDIS, "{\"url\": \"http://127.0.0.1\"}", &err));
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_non_null(strstr(err.msg, "http://127.0.0.1"));
    assert_null(open_with(REDIS, "{\"url\": \"redis://127.0.0.1:99999\"}", &err));
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_null(open_with(REDIS, "{\"url\": \"redis://:hunter2@127.0.0.1:99999\"}", &err));
    assert_null(strstr(err.msg, "hunter2"));
    assert_non_null(strstr(err.msg, "redis://:***@127.0.0.1:99999"));
    assert_null(open_with(REDIS, "{\"url\": \"redis://127.0.0.1/x\"}", &err));
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_null(open_with(REDIS, "{\"url\": 5}", &err));
    assert_non_null(strstr(err.msg, "url"));
    assert_null(open_with(REDIS, "{\"urll\": \"redis://x\"}", &err));
    assert_non_null(strstr(err.msg, "'urll'"));
    assert_null(open_with(REDIS, "{\"timeout_ms\": -1}", &err));
    assert_non_null(strstr(err.msg, "timeout_ms"));
    assert_null(open_with(REDIS, "[]", &err));
    assert_int_equal(err.code, WEFT_EINVAL);

    /* Nothing listening: WEFT_EIO naming the server, never the password. */
    snprintf(cfg, sizeof cfg, "{\"url\": \"redis://:s3cret@127.0.0.1:%d\"}", dead);
    h = open_with(REDIS, cfg, &err);
    assert_non_null(h);
    assert_int_equal(REDIS->acquire(h, "k", LONG_TTL, 0, t, sizeof t, &err), WEFT_EIO);
    snprintf(cfg, sizeof cfg, "127.0.0.1:%d", dead);
    assert_non_null(strstr(err.msg, cfg));
    assert_null(strstr(err.msg, "s3cret"));
    REDIS->close(h);
}

static void test_redis_auth(void **state)
{
    char cfg[160], t[64];
    weft_error err = {0};
    redisContext *c;
    redisReply *r;
    void *h;
    NEED_REDIS();
    c = raw_connect();
    assert_non_null(c);
    r = redisCommand(c, "CONFIG SET requirepass p%%40ss");
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);

    /* Wrong password: EIO, and the message keeps it secret. */
    snprintf(cfg, sizeof cfg, "{\"url\": \"redis://:nope@127.0.0.1:%d\"}", srv.port);
    h = open_with(REDIS, cfg, &err);
    assert_non_null(h);
    assert_int_equal(REDIS->acquire(h, "auth", LONG_TTL, 0, t, sizeof t, &err), WEFT_EIO);
    assert_null(strstr(err.msg, "nope"));
    REDIS->close(h);

    /* Percent-encoded: p%40ss is "p@ss"... but the server's password is "p%40ss". */
    snprintf(cfg, sizeof cfg, "{\"url\": \"redis://:p%%2540ss@127.0.0.1:%d\"}", srv.port);
    h = open_with(REDIS, cfg, &err);
    assert_non_null(h);
    assert_int_equal(REDIS->acquire(h, "auth", LONG_TTL, 0, t, sizeof t, &err), 0);
    assert_int_equal(REDIS->release(h, "auth", t, &err), 0);
    REDIS->close(h);

    /* Back to no password for the other tests. */
    c = raw_connect();
    assert_non_null(c);
    r = redisCommand(c, "AUTH p%%40ss");
    assert_non_null(r);
    freeReplyObject(r);
    r = redisCommand(c, "CONFIG SET requirepass %s", "");
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
}

static int load_plugins(void **state)
{
    const char *top = getenv("WEFT_TOP_BUILDDIR");
    char path[4096];
    weft_error err = {0};
    R = pl_new(host_table());
    if (!R) return -1;
    snprintf(path, sizeof path, "%s/plugins/lock_local/lock_local.la", top);
    if (pl_load_file(R, path, &err)) {
        print_error("%s\n", err.msg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/plugins/lock_redis/lock_redis.la", top);
    if (pl_load_file(R, path, &err)) {
        print_error("%s\n", err.msg);
        return -1;
    }
    NONE = pl_find_lock(R, "none");
    LOCAL = pl_find_lock(R, "local");
    REDIS = pl_find_lock(R, "redis");
    if (!NONE || !LOCAL || !REDIS) {
        print_error("a lock provider is missing\n");
        return -1;
    }
    return 0;
}

static int unload_plugins(void **state)
{
    pl_free(R);
    R = NULL;
    return 0;
}

int main(void)
{
    const char *top = getenv("WEFT_TOP_BUILDDIR");
    const struct CMUnitTest local_tests[] = {
        cmocka_unit_test(test_none_always_grants),
        cmocka_unit_test(test_local_mutual_exclusion),
        cmocka_unit_test(test_local_timeout_when_held),
        cmocka_unit_test(test_local_waiter_wakes),
        cmocka_unit_test(test_local_ttl_takeover),
        cmocka_unit_test(test_local_wrong_token),
        cmocka_unit_test(test_local_handles_independent),
        cmocka_unit_test(test_redis_config_errors),
    };
    const struct CMUnitTest redis_tests[] = {
        cmocka_unit_test(test_redis_mutual_exclusion),
        cmocka_unit_test(test_redis_timeout_when_held),
        cmocka_unit_test(test_redis_waiter_wakes),
        cmocka_unit_test(test_redis_ttl_takeover),
        cmocka_unit_test(test_redis_wrong_token),
        cmocka_unit_test(test_redis_noscript),
        cmocka_unit_test(test_redis_db_and_env_url),
        cmocka_unit_test(test_redis_auth),
        cmocka_unit_test(test_redis_unix_socket),
        cmocka_unit_test(test_redis_down_then_back),
    };
    int rc;
    if (!top || !*top) {
        fprintf(stderr, "WEFT_TOP_BUILDDIR is not set: skipping\n");
        return 77;
    }
    /* A write to a Redis that went away must not kill the test. */
    signal(SIGPIPE, SIG_IGN);
    if (load_plugins(NULL)) return 1;
    rc = cmocka_run_group_tests_name("locks", local_tests, NULL, NULL);
    rc += cmocka_run_group_tests_name("locks_redis", redis_tests, redis_group_setup,
                                      redis_group_teardown);
    unload_plugins(NULL);
    return rc ? 1 : 0;
}

/*
 * The Redis URL parser (base/redis_url.c): what the store and the lock_redis
 * plugin each accepted before they shared it, and what both refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/redis_url.h"

static void assert_has(const char *msg, const char *part)
{
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

static void assert_str(const char *what, const char *got, const char *want)
{
    if (!want && !got) return;
    if (!want || !got || strcmp(got, want))
        fail_msg("%s: got %s, want %s", what, got ? got : "NULL", want ? want : "NULL");
}

typedef struct good {
    const char *url, *host;
    int port;
    const char *path, *user, *password;
    int db;
    const char *shown;
} good;

static void test_good(void **state)
{
    static const good g[] = {
        /* both parsers */
        {"redis://127.0.0.1:6379", "127.0.0.1", 6379, NULL, NULL, NULL, 0,
         "redis://127.0.0.1:6379"},
        {"redis://host", "host", 6379, NULL, NULL, NULL, 0, "redis://host"},
        {"redis://host/", "host", 6379, NULL, NULL, NULL, 0, "redis://host/"},
        {"redis://host:7000/3", "host", 7000, NULL, NULL, NULL, 3, "redis://host:7000/3"},
        {"redis://:pw@host", "host", 6379, NULL, NULL, "pw", 0, "redis://:***@host"},
        {"redis://al:pw@host:1/2", "host", 1, NULL, "al", "pw", 2, "redis://al:***@host:1/2"},
        {"redis://pw@host", "host", 6379, NULL, NULL, "pw", 0, "redis://:***@host"},
        {"redis://:p%2540ss@h", "h", 6379, NULL, NULL, "p%40ss", 0, "redis://:***@h"},
        {"redis://:a%4@h", "h", 6379, NULL, NULL, "a%4", 0, "redis://:***@h"},
        {"redis://:x:y@h", "h", 6379, NULL, NULL, "x:y", 0, "redis://:***@h"},
        {"redis://a@b@h", "h", 6379, NULL, NULL, "a@b", 0, "redis://:***@h"},
        {"redis://[::1]", "::1", 6379, NULL, NULL, NULL, 0, "redis://[::1]"},
        {"redis://[::1]:6380/1", "::1", 6380, NULL, NULL, NULL, 1, "redis://[::1]:6380/1"},
        {"redis://h:65535/1000000", "h", 65535, NULL, NULL, NULL, 1000000,
         "redis://h:65535/1000000"},
        {"redis://h:0080", "h", 80, NULL, NULL, NULL, 0, "redis://h:0080"},
        {"unix:///tmp/r.sock", NULL, 0, "/tmp/r.sock", NULL, NULL, 0, "unix:///tmp/r.sock"},
        {"unix:///tmp/r.sock?db=4", NULL, 0, "/tmp/r.sock", NULL, NULL, 4,
         "unix:///tmp/r.sock?db=4"},
        {"unix://:pw@/s", NULL, 0, "/s", NULL, "pw", 0, "unix://:***@/s"},
        {"unix://u:pw@/s?db=2", NULL, 0, "/s", "u", "pw", 2, "unix://u:***@/s?db=2"},
        /* the store's only (strtol; an empty ?db=; the path "/"): kept */
        {"redis://h:+81", "h", 81, NULL, NULL, NULL, 0, "redis://h:+81"},
        {"redis://h/+5", "h", 6379, NULL, NULL, NULL, 5, "redis://h/+5"},
        {"unix:///s?db=", NULL, 0, "/s", NULL, NULL, 0, "unix:///s?db="},
        {"unix:///?db=1", NULL, 0, "/", NULL, NULL, 1, "unix:///?db=1"},
    };
    size_t i;
    for (i = 0; i < sizeof g / sizeof *g; i++) {
        ru_url u;
        weft_error err = {0};
        if (ru_parse(g[i].url, &u, &err) != 0) fail_msg("%s: %s", g[i].url, err.msg);
        assert_str(g[i].url, u.host, g[i].host);
        if (u.port != g[i].port) fail_msg("%s: port %d, want %d", g[i].url, u.port, g[i].port);
        assert_str(g[i].url, u.path, g[i].path);
        assert_str(g[i].url, u.user, g[i].user);
        assert_str(g[i].url, u.password, g[i].password);
        if (u.db != g[i].db) fail_msg("%s: db %d, want %d", g[i].url, u.db, g[i].db);
        assert_str(g[i].url, u.shown, g[i].shown);
        ru_clear(&u);
        assert_null(u.shown);
    }
}

static void test_bad(void **state)
{
    /* each with the part of its message that says what is wrong */
    static const char *const bad[][2] = {
        {"http://127.0.0.1:6379", "expected redis://"},
        {"", "expected redis://"},
        {"redis:/host", "expected redis://"},
        {"rediss://host", "TLS is not supported"},
        {"redis://", "no host"},
        {"redis://:6379", "no host"},
        {"redis://host:", "bad port"},
        {"redis://host:0", "bad port"},
        {"redis://host:99999", "bad port"},
        {"redis://host:-1", "bad port"},
        {"redis://host:abc", "bad port"},
        {"redis://host:12345678901234567", "bad port"},
        {"redis://host/x", "database"},
        {"redis://host/1000001", "database"},
        {"redis://host/-1", "database"},
        {"redis://host/0?x=1", "database"},
        {"redis://[::1", "unclosed ["},
        {"redis://[::1]x", "bad port"},
        {"redis://[::1]:", "bad port"},
        {"unix://", "unix:///path"},
        {"unix:///", "unix:///path"},
        {"unix://relative/path", "unix:///path"},
        {"unix:///tmp/s?x=1", "?db=N"},
        {"unix:///tmp/s?db=x", "?db=N"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        ru_url u;
        weft_error err = {0};
        if (ru_parse(bad[i][0], &u, &err) != WEFT_EINVAL) fail_msg("%s: accepted", bad[i][0]);
        assert_int_equal(err.code, WEFT_EINVAL);
        assert_has(err.msg, "Redis URL");
        assert_has(err.msg, bad[i][0]);
        assert_has(err.msg, bad[i][1]);
        ru_clear(&u);
    }
}

static void test_password_masked(void **state)
{
    static const char *const bad[] = {
        "redis://:hunter2@host:notaport", "redis://al:hunter2@host/x", "redis://hunter2@:1",
        "unix://:hunter2@/s?db=z",        "redis:/:hunter2@host",      "rediss://:hunter2@h",
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        ru_url u;
        weft_error err = {0};
        assert_int_equal(ru_parse(bad[i], &u, &err), WEFT_EINVAL);
        assert_has(err.msg, "Redis URL");
        if (strstr(err.msg, "hunter2")) fail_msg("%s: the password shown: %s", bad[i], err.msg);
        ru_clear(&u);
    }
    {
        ru_url u;
        weft_error err = {0};
        assert_int_equal(ru_parse("redis://al:hunter2@host:notaport", &u, &err), WEFT_EINVAL);
        assert_has(err.msg, "redis://al:***@host:notaport");
        ru_clear(&u);
    }
}

/* A list of seed nodes: each parsed; an empty entry, too many, or a bad
 * one refused naming it (its password masked). */
static void test_list(void **state)
{
    ru_url u[RU_SEEDS_MAX];
    weft_error err = {0};
    size_t n = 99, i;
    char many[RU_SEEDS_MAX * 32 + 64] = "";
    (void)state;
    assert_int_equal(ru_parse_list("redis://a:7000,redis://:p%2Cw@b:7001/2,unix:///tmp/s", u,
                                   RU_SEEDS_MAX, &n, &err),
                     0);
    assert_int_equal(n, 3);
    assert_str("host 0", u[0].host, "a");
    assert_int_equal(u[0].port, 7000);
    assert_str("password 1", u[1].password, "p,w");
    assert_int_equal(u[1].db, 2);
    assert_str("path 2", u[2].path, "/tmp/s");
    while (n)
        ru_clear(&u[--n]);
    assert_int_equal(ru_parse_list("redis://a", u, RU_SEEDS_MAX, &n, &err), 0);
    assert_int_equal(n, 1);
    ru_clear(&u[0]);
    assert_int_equal(ru_parse_list("redis://a,,redis://b", u, RU_SEEDS_MAX, &n, &err), WEFT_EINVAL);
    assert_has(err.msg, "empty entry");
    while (n)
        ru_clear(&u[--n]);
    assert_int_equal(ru_parse_list("redis://a,", u, RU_SEEDS_MAX, &n, &err), WEFT_EINVAL);
    while (n)
        ru_clear(&u[--n]);
    assert_int_equal(ru_parse_list("redis://a,redis://x:secret@b:bad", u, RU_SEEDS_MAX, &n, &err),
                     WEFT_EINVAL);
    assert_has(err.msg, "redis://x:***@b:bad");
    while (n)
        ru_clear(&u[--n]);
    for (i = 0; i <= RU_SEEDS_MAX; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sredis://h%zu", i ? "," : "",
                 i);
    assert_int_equal(ru_parse_list(many, u, RU_SEEDS_MAX, &n, &err), WEFT_EINVAL);
    assert_has(err.msg, "more than 16");
    while (n)
        ru_clear(&u[--n]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_password_masked),
        cmocka_unit_test(test_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Tests of config.c: defaults, config files (Lua), environment, flags. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"

static char dir[64];
static char path[128];

static void unset_env(void)
{
    unsetenv("WEFT_REDIS_URL");
    unsetenv("WEFT_KEY_PREFIX");
    unsetenv("WEFT_PLUGIN_PATH");
}

static int group_setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/weft-config-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(path, sizeof path, "%s/weftd.lua", dir);
    unset_env();
    return 0;
}

static int group_teardown(void **state)
{
    unlink(path);
    rmdir(dir);
    return 0;
}

/* Write text to the test's config file and return its path. */
static const char *file_with(const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Load text over defaults; returns the code, message in err. */
static int load(cf_config *c, const char *text, weft_error *err)
{
    cf_defaults(c);
    memset(err, 0, sizeof *err);
    return cf_load_file(c, file_with(text), err);
}

static void assert_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle)) fail_msg("'%s' does not contain '%s'", haystack, needle);
}

static void assert_defaults(const cf_config *c)
{
    assert_string_equal(c->redis_url, "redis://127.0.0.1:6379");
    assert_string_equal(c->key_prefix, "weft:");
    assert_null(c->plugin_path);
    assert_null(c->daemon_id);
    assert_int_equal(c->workers, 4);
    assert_string_equal(c->lock, "none");
    assert_int_equal(c->lock_ttl_ms, 10000);
    assert_int_equal(c->lock_wait_ms, 2000);
    assert_int_equal(c->fencing, 1);
    assert_int_equal(c->retention_ms, 7 * 86400000LL);
    assert_int_equal(c->lease_ms, 30000);
    assert_int_equal(c->sweep_ms, 30000);
    assert_int_equal(c->grace_ms, 10000);
    assert_int_equal(c->poll_ms, 50);
    assert_int_equal(c->max_reaps, 3);
    assert_int_equal(c->queue_unpolled_ms, 5 * 60000);
    assert_int_equal(c->lua_memory, 32 << 20);
    assert_int_equal(c->lua_instructions, 10000000);
    assert_int_equal(c->lua_time_ms, 5000);
    assert_int_equal(c->lua_result, 16 << 20);
    assert_int_equal(c->payload_sweep_ms, 600000);
    assert_int_equal(c->payload_grace_ms, 3600000);
    assert_string_equal(c->log_level, "info");
    assert_null(c->types);
    assert_int_equal(c->ntypes, 0);
    assert_non_null(c->plugins);
    assert_true(json_object_is_type(c->plugins, json_type_object));
    assert_int_equal(json_object_object_length(c->plugins), 0);
}

static void test_defaults(void **state)
{
    cf_config c;
    cf_defaults(&c);
    assert_defaults(&c);
    cf_free(&c);
    cf_free(&c); /* cf_free leaves it empty: freeing again is harmless */
}

static void test_full_file(void **state)
{
    cf_config c;
    weft_error err;
    json_object *v;
    int rc = load(&c,
                  "-- every key\n"
                  "local base = 'redis://10.0.0.5'\n"
                  "return {\n"
                  "  redis_url = base .. ':6380/2',\n"
                  "  key_prefix = 'prod:',\n"
                  "  plugin_path = '/opt/weft/plugins:',\n"
                  "  daemon_id = 'd1',\n"
                  "  workers = 16,\n"
                  "  lock = 'local',\n"
                  "  lock_ttl = '20s',\n"
                  "  lock_wait = 1.5,\n"
                  "  fencing = false,\n"
                  "  retention = '2d',\n"
                  "  lease = '1m',\n"
                  "  sweep_interval = '5s',\n"
                  "  grace = 0,\n"
                  "  poll_interval = '250ms',\n"
                  "  max_reaps = 5,\n"
                  "  queue_unpolled_after = '90s',\n"
                  "  log_level = 'debug',\n"
                  "  types = { 'HTTP', 'LAMBDA' },\n"
                  "  plugins = { http = { max_body = 1024, proxy = 'none' } },\n"
                  "}\n",
                  &err);
    if (rc) fail_msg("%s", err.msg);
    assert_string_equal(c.redis_url, "redis://10.0.0.5:6380/2");
    assert_string_equal(c.key_prefix, "prod:");
    assert_string_equal(c.plugin_path, "/opt/weft/plugins:");
    assert_string_equal(c.daemon_id, "d1");
    assert_int_equal(c.workers, 16);
    assert_string_equal(c.lock, "local");
    assert_int_equal(c.lock_ttl_ms, 20000);
    assert_int_equal(c.lock_wait_ms, 1500);
    assert_int_equal(c.fencing, 0);
    assert_int_equal(c.retention_ms, 2 * 86400000LL);
    assert_int_equal(c.lease_ms, 60000);
    assert_int_equal(c.sweep_ms, 5000);
    assert_int_equal(c.grace_ms, 0);
    assert_int_equal(c.poll_ms, 250);
    assert_int_equal(c.max_reaps, 5);
    assert_int_equal(c.queue_unpolled_ms, 90000);
    assert_string_equal(c.log_level, "debug");
    assert_int_equal(c.ntypes, 2);
    assert_string_equal(c.types[0], "HTTP");
    assert_string_equal(c.types[1], "LAMBDA");
    assert_true(json_object_object_get_ex(c.plugins, "http", &v));
    assert_true(json_object_object_get_ex(v, "max_body", &v));
    assert_int_equal(json_object_get_int(v), 1024);
    cf_free(&c);

    /* A partial file keeps the other values; an empty table changes nothing. */
    rc = load(&c, "return { workers = 2.0, types = {} }", &err);
    if (rc) fail_msg("%s", err.msg);
    assert_int_equal(c.workers, 2);
    assert_null(c.types);
    assert_string_equal(c.lock, "none");
    cf_free(&c);
    assert_int_equal(load(&c, "return {}", &err), 0);
    assert_defaults(&c);
    cf_free(&c);
}

struct bad {
    const char *text;
    const char *expect[3];
};

static void test_type_errors(void **state)
{
    static const struct bad cases[] = {
        {"return { redis_url = 5 }", {"redis_url: expected a string", "got an integer"}},
        {"return { workers = 'four' }", {"workers: expected an integer", "got a string"}},
        {"return { workers = 2.5 }", {"workers: expected an integer", "got a number"}},
        {"return { workers = 0 }", {"workers: must be between 1"}},
        {"return { workers = 1e12 }", {"workers: must be between"}},
        {"return { fencing = 'yes' }", {"fencing: expected a boolean", "got a string"}},
        {"return { lock_ttl = '10 parsecs' }", {"lock_ttl", "bad duration '10 parsecs'"}},
        {"return { lock_ttl = true }", {"lock_ttl: expected a duration", "got a boolean"}},
        {"return { lock_ttl = -1 }", {"lock_ttl", "must be >= 0"}},
        {"return { lock_ttl = 0 }", {"lock_ttl: must be at least 1 ms"}},
        {"return { types = 'HTTP' }", {"types: expected a list of strings", "got a string"}},
        {"return { types = { 'HTTP', 7 } }", {"types[2]: expected a string", "got an integer"}},
        {"return { types = { a = 'b' } }", {"types: expected a list of strings", "got a table"}},
        {"return { plugins = 5 }", {"plugins: expected a table", "got an integer"}},
        {"return { log_level = 'loud' }", {"log_level: expected one of error|warn|info|debug"}},
        {"return { workers = function() end }", {"config.workers", "function"}},
    };
    size_t i, j;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cf_config c;
        weft_error err;
        int rc = load(&c, cases[i].text, &err);
        if (rc != WEFT_EINVAL) fail_msg("%s: rc %d (%s)", cases[i].text, rc, err.msg);
        assert_int_equal(err.code, WEFT_EINVAL);
        assert_contains(err.msg, path);
        for (j = 0; j < 3 && cases[i].expect[j]; j++)
            assert_contains(err.msg, cases[i].expect[j]);
        /* Nothing applied from a file that failed. */
        assert_defaults(&c);
        cf_free(&c);
    }
}

static void test_error_leaves_config_unchanged(void **state)
{
    cf_config c;
    weft_error err;
    char want[200];
    assert_int_equal(load(&c, "return { workers = 9, types = { 'A' } }", &err), 0);
    assert_int_equal(cf_load_file(&c,
                                  file_with("return {\n  workers = 3,\n  key_prefix = 'x:',\n"
                                            "  types = { 'B' },\n  fencing = 1,\n}\n"),
                                  &err),
                     WEFT_EINVAL);
    /* The line of the bad key is found in the source. */
    snprintf(want, sizeof want, "%s:5: fencing: expected a boolean", path);
    assert_contains(err.msg, want);
    assert_int_equal(c.workers, 9);
    assert_string_equal(c.key_prefix, "weft:");
    assert_int_equal(c.ntypes, 1);
    assert_string_equal(c.types[0], "A");
    cf_free(&c);
}

static void test_unknown_key(void **state)
{
    cf_config c;
    weft_error err;
    char want[200];
    assert_int_equal(load(&c, "return {\n  workers = 2,\n  wrokers = 4,\n}\n", &err), WEFT_EINVAL);
    snprintf(want, sizeof want, "%s:3: key 'wrokers' is unknown (did you mean 'workers'?)", path);
    assert_string_equal(err.msg, want);
    cf_free(&c);

    assert_int_equal(load(&c, "return { [\"lock-ttl\"] = '1s' }", &err), WEFT_EINVAL);
    assert_contains(err.msg, ":1: key 'lock-ttl' is unknown (did you mean 'lock_ttl'?)");
    cf_free(&c);

    assert_int_equal(load(&c, "return { redis = 'x' }", &err), WEFT_EINVAL);
    assert_contains(err.msg, "key 'redis' is unknown");
    assert_null(strstr(err.msg, "did you mean"));
    cf_free(&c);

    /* A computed key has no line to show. */
    assert_int_equal(load(&c, "local t = {}\nt['zz' .. 'top'] = 1\nreturn t\n", &err), WEFT_EINVAL);
    snprintf(want, sizeof want, "%s: key 'zztop' is unknown", path);
    assert_string_equal(err.msg, want);
    cf_free(&c);
}

static void test_syntax_error(void **state)
{
    cf_config c;
    weft_error err;
    char want[200];
    assert_int_equal(load(&c, "return {\n  workers = 4\n  lock = 'local',\n}\n", &err),
                     WEFT_EINVAL);
    snprintf(want, sizeof want, "%s:3:", path);
    assert_contains(err.msg, want);
    assert_int_equal(strncmp(err.msg, path, strlen(path)), 0);
    assert_contains(err.msg, "'}' expected");
    assert_defaults(&c);
    cf_free(&c);

    /* Runtime errors carry the line too. */
    assert_int_equal(load(&c, "local x\n\nreturn { workers = x.y }\n", &err), WEFT_EINVAL);
    snprintf(want, sizeof want, "%s:3:", path);
    assert_contains(err.msg, want);
    cf_free(&c);

    assert_int_equal(load(&c, "error('no config for you')\n", &err), WEFT_EINVAL);
    assert_contains(err.msg, "no config for you");
    cf_free(&c);
}

static void test_not_a_table(void **state)
{
    static const char *const cases[][2] = {
        {"return 5", "must return a table of settings (got number)"},
        {"local t = { workers = 2 }", "must return a table of settings (got nil)"},
        {"return 'workers = 2'", "(got string)"},
        {"return { 'a', 'b' }", "not a list"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cf_config c;
        weft_error err;
        assert_int_equal(load(&c, cases[i][0], &err), WEFT_EINVAL);
        assert_contains(err.msg, path);
        assert_contains(err.msg, cases[i][1]);
        cf_free(&c);
    }
}

static void test_sandboxed(void **state)
{
    static const char *const cases[][2] = {
        {"return { daemon_id = os.getenv('HOME') }", "'os'"},
        {"return { daemon_id = io.open('/etc/passwd'):read('a') }", "'io'"},
        {"return { daemon_id = require('os').time() }", "require"},
        {"return { daemon_id = dofile('/etc/passwd') }", "dofile"},
        {"return { daemon_id = load('return 1')() }", "load"},
    };
    size_t i;
    cf_config c;
    weft_error err;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(load(&c, cases[i][0], &err), WEFT_EINVAL);
        assert_contains(err.msg, path);
        assert_contains(err.msg, cases[i][1]);
        assert_null(c.daemon_id);
        cf_free(&c);
    }
    /* The safe libraries are there; a runaway file hits a limit, never hangs. */
    assert_int_equal(load(&c, "return { daemon_id = string.upper('d') .. math.floor(2.5) }", &err),
                     0);
    assert_string_equal(c.daemon_id, "D2");
    cf_free(&c);
    assert_int_equal(load(&c, "while true do end", &err), WEFT_ELIMIT);
    assert_contains(err.msg, path);
    assert_contains(err.msg, "limit");
    cf_free(&c);
}

static void test_missing_file(void **state)
{
    cf_config c;
    weft_error err = {0};
    cf_defaults(&c);
    assert_int_equal(cf_load_file(&c, "/nonexistent/weftd.lua", &err), WEFT_ENOTFOUND);
    assert_contains(err.msg, "/nonexistent/weftd.lua");
    assert_defaults(&c);
    cf_free(&c);
}

static void test_env(void **state)
{
    cf_config c;
    weft_error err = {0};
    cf_defaults(&c);
    setenv("WEFT_REDIS_URL", "redis://envhost:7000", 1);
    setenv("WEFT_KEY_PREFIX", "env:", 1);
    setenv("WEFT_PLUGIN_PATH", "/env/plugins", 1);
    assert_int_equal(cf_apply_env(&c, &err), 0);
    unset_env();
    assert_string_equal(c.redis_url, "redis://envhost:7000");
    assert_string_equal(c.key_prefix, "env:");
    assert_string_equal(c.plugin_path, "/env/plugins");
    assert_int_equal(c.workers, 4);

    /* Unset or empty variables change nothing. */
    setenv("WEFT_REDIS_URL", "", 1);
    assert_int_equal(cf_apply_env(&c, &err), 0);
    unset_env();
    assert_string_equal(c.redis_url, "redis://envhost:7000");
    assert_string_equal(c.key_prefix, "env:");
    cf_free(&c);
}

static void test_set_each_type(void **state)
{
    cf_config c;
    weft_error err = {0};
    json_object *v;
    cf_defaults(&c);
    assert_int_equal(cf_set(&c, "redis_url", "redis://flag:1", &err), 0);
    assert_string_equal(c.redis_url, "redis://flag:1");
    assert_int_equal(cf_set(&c, "workers", "8", &err), 0);
    assert_int_equal(c.workers, 8);
    assert_int_equal(cf_set(&c, "fencing", "false", &err), 0);
    assert_int_equal(c.fencing, 0);
    assert_int_equal(cf_set(&c, "fencing", "TRUE", &err), 0);
    assert_int_equal(c.fencing, 1);
    assert_int_equal(cf_set(&c, "fencing", "off", &err), 0);
    assert_int_equal(c.fencing, 0);
    assert_int_equal(cf_set(&c, "lease", "30s", &err), 0);
    assert_int_equal(c.lease_ms, 30000);
    assert_int_equal(cf_set(&c, "poll_interval", "20ms", &err), 0);
    assert_int_equal(c.poll_ms, 20);
    assert_int_equal(cf_set(&c, "grace", "2", &err), 0);
    assert_int_equal(c.grace_ms, 2000);
    assert_int_equal(cf_set(&c, "types", "a, b ,c", &err), 0);
    assert_int_equal(c.ntypes, 3);
    assert_string_equal(c.types[0], "a");
    assert_string_equal(c.types[1], "b");
    assert_string_equal(c.types[2], "c");
    assert_int_equal(cf_set(&c, "types", "", &err), 0);
    assert_null(c.types);
    assert_int_equal(c.ntypes, 0);
    assert_int_equal(cf_set(&c, "plugins", "{\"redis\": {\"prefix\": \"p:\"}}", &err), 0);
    assert_true(json_object_object_get_ex(c.plugins, "redis", &v));
    assert_int_equal(cf_set(&c, "daemon_id", "d7", &err), 0);
    assert_string_equal(c.daemon_id, "d7");
    assert_int_equal(cf_set(&c, "daemon_id", "", &err), 0); /* back to unset */
    assert_null(c.daemon_id);
    assert_int_equal(cf_set(&c, "key_prefix", "", &err), 0); /* a real empty prefix */
    assert_string_equal(c.key_prefix, "");
    assert_int_equal(cf_set(&c, "log_level", "warn", &err), 0);
    assert_string_equal(c.log_level, "warn");
    cf_free(&c);
}

static void test_set_bad_values(void **state)
{
    static const char *const cases[][3] = {
        {"workers", "eight", "workers: expected an integer (got 'eight')"},
        {"workers", "8x", "workers: expected an integer"},
        {"workers", "", "workers: expected an integer"},
        {"workers", "-1", "workers: must be between 1"},
        {"workers", "99999999999", "workers: must be between"},
        {"max_reaps", "-1", "max_reaps: must be between 0"},
        {"lua_instructions", "10", "lua_instructions: must be between 1000"},
        {"lua_memory", "1KiB", "lua_memory: must be"},
        {"lua_result", "0", "lua_result: must be"},
        {"lua_time", "0", "lua_time: must be at least 1 ms"},
        {"fencing", "maybe", "fencing: expected a boolean"},
        {"lease", "soon", "lease: expected a duration: bad duration 'soon'"},
        {"lease", "0", "lease: must be at least 1 ms"},
        {"types", "a,,b", "types: empty item"},
        {"payload_grace", "10ms", "payload_grace: must be at least 1000 ms"},
        {"payload_sweep", "-1s", "payload_sweep"},
        {"plugins", "{nope", "plugins"},
        {"plugins", "[1]", "plugins: expected a JSON object"},
        {"log_level", "verbose", "log_level: expected one of"},
        {"wrokers", "4", "key 'wrokers' is unknown (did you mean 'workers'?)"},
        {"poll", "4", "key 'poll' is unknown"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cf_config c;
        weft_error err = {0};
        cf_defaults(&c);
        if (cf_set(&c, cases[i][0], cases[i][1], &err) != WEFT_EINVAL)
            fail_msg("cf_set %s=%s succeeded", cases[i][0], cases[i][1]);
        assert_int_equal(err.code, WEFT_EINVAL);
        assert_contains(err.msg, cases[i][2]);
        assert_defaults(&c);
        cf_free(&c);
    }
}

static void test_precedence(void **state)
{
    cf_config c;
    weft_error err;
    assert_int_equal(load(&c,
                          "return { redis_url = 'redis://file', key_prefix = 'file:',"
                          " plugin_path = '/file', workers = 2 }",
                          &err),
                     0);
    setenv("WEFT_REDIS_URL", "redis://env", 1);
    setenv("WEFT_KEY_PREFIX", "env:", 1);
    assert_int_equal(cf_apply_env(&c, &err), 0);
    unset_env();
    assert_int_equal(cf_set(&c, "redis_url", "redis://flag", &err), 0);
    assert_string_equal(c.redis_url, "redis://flag"); /* flag over env over file */
    assert_string_equal(c.key_prefix, "env:");        /* env over file */
    assert_string_equal(c.plugin_path, "/file");      /* file over default */
    assert_int_equal(c.workers, 2);
    assert_string_equal(c.lock, "none"); /* default */
    cf_free(&c);
}

static void test_describe(void **state)
{
    static const char *const keys[] = {
        "redis_url", "key_prefix",    "plugin_path", "daemon_id", "workers", "lock",
        "lock_ttl",  "lock_wait",     "fencing",     "retention", "lease",   "sweep_interval",
        "grace",     "poll_interval", "max_reaps",   "log_level", "types",   "plugins",
    };
    char *buf = NULL;
    size_t len = 0, i;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cf_describe(f);
    fclose(f);
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_contains(buf, keys[i]);
    assert_contains(buf, "\"redis://127.0.0.1:6379\"");
    assert_contains(buf, "WEFT_REDIS_URL");
    assert_contains(buf, "duration");
    assert_contains(buf, "10s");
    free(buf);
}

/* The recursion and size limits: defaults as def_limits_default, set from a
 * flag or the environment (what weft run and the client read), bounded. */
static void test_limits(void **state)
{
    cf_config c;
    def_limits l;
    weft_error err = {0};
    cf_defaults(&c);
    cf_limits(&c, &l);
    assert_int_equal(l.max_tasks, def_limits_default.max_tasks);
    assert_int_equal(l.max_retry_count, def_limits_default.max_retry_count);
    assert_int_equal(l.max_fork_width, def_limits_default.max_fork_width);
    assert_int_equal(l.max_loop_iterations, def_limits_default.max_loop_iterations);
    assert_int_equal(l.max_depth, 1000);
    assert_int_equal(l.max_variables, 256 * 1024);
    assert_int_equal(cf_set(&c, "max_subworkflow_depth", "5000", &err), 0);
    assert_int_equal(cf_set(&c, "max_variables_size", "1MiB", &err), 0);
    cf_limits(&c, &l);
    assert_int_equal(l.max_depth, 5000);
    assert_int_equal(l.max_variables, 1024 * 1024);
    assert_int_equal(cf_set(&c, "max_fork_width", "0", &err), WEFT_EINVAL);
    assert_non_null(strstr(err.msg, "max_fork_width"));
    cf_free(&c);

    setenv("WEFT_MAX_LOOP_ITERATIONS", "7", 1);
    setenv("WEFT_MAX_RETRY_COUNT", "3", 1);
    assert_int_equal(cf_env_limits(&l, &err), 0);
    assert_int_equal(l.max_loop_iterations, 7);
    assert_int_equal(l.max_retry_count, 3);
    assert_int_equal(l.max_tasks, 1000);
    setenv("WEFT_MAX_TASKS", "lots", 1);
    assert_int_equal(cf_env_limits(&l, &err), WEFT_EINVAL);
    assert_non_null(strstr(err.msg, "max_tasks"));
    unsetenv("WEFT_MAX_LOOP_ITERATIONS");
    unsetenv("WEFT_MAX_RETRY_COUNT");
    unsetenv("WEFT_MAX_TASKS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),      cmocka_unit_test(test_full_file),
        cmocka_unit_test(test_type_errors),   cmocka_unit_test(test_error_leaves_config_unchanged),
        cmocka_unit_test(test_unknown_key),   cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_not_a_table),   cmocka_unit_test(test_sandboxed),
        cmocka_unit_test(test_missing_file),  cmocka_unit_test(test_env),
        cmocka_unit_test(test_set_each_type), cmocka_unit_test(test_set_bad_values),
        cmocka_unit_test(test_precedence),    cmocka_unit_test(test_describe),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/log.h"
#include "plugin/host.h"

#define TS 1700000000123LL /* 2023-11-14T22:13:20.123Z */

static FILE *out;
static char text[16384];

/* Every test starts at info, in the command line's format, into out. */
static int setup(void **state)
{
    out = tmpfile();
    lg_set_output(out);
    lg_set_level(WEFT_LOG_INFO);
    lg_set_node(NULL);
    return out ? 0 : -1;
}

static int teardown(void **state)
{
    lg_set_json(0);
    lg_set_output(NULL);
    lg_set_node(NULL);
    lg_set_level(WEFT_LOG_INFO);
    fclose(out);
    return 0;
}

/* What was logged since setup. */
static const char *logged(void)
{
    size_t n;
    fflush(out);
    rewind(out);
    n = fread(text, 1, sizeof text - 1, out);
    text[n] = 0;
    return text;
}

static const char *fmt(int level, const lg_field *fields, const char *msg)
{
    static char line[4096];
    lg_format(line, sizeof line, level, fields, msg, TS);
    return line;
}

static void test_level_names(void **state)
{
    weft_error err = {0};
    assert_int_equal(lg_level(), WEFT_LOG_INFO);
    assert_int_equal(lg_set_level_name("debug", &err), 0);
    assert_int_equal(lg_level(), WEFT_LOG_DEBUG);
    assert_int_equal(lg_set_level_name("error", &err), 0);
    assert_int_equal(lg_level(), WEFT_LOG_ERROR);
    assert_int_equal(lg_set_level_name("warn", &err), 0);
    assert_int_equal(lg_level(), WEFT_LOG_WARN);
    assert_int_equal(lg_set_level_name(NULL, &err), 0); /* no value: info */
    assert_int_equal(lg_level(), WEFT_LOG_INFO);
    /* a bad name is refused, naming it, and the level stays */
    lg_set_level(WEFT_LOG_WARN);
    assert_int_equal(lg_set_level_name("loud", &err), WEFT_EINVAL);
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_string_equal(err.msg, "log_level 'loud' (use error, warn, info or debug)");
    assert_int_equal(lg_level(), WEFT_LOG_WARN);
    assert_string_equal(lg_level_name(WEFT_LOG_ERROR), "error");
    assert_string_equal(lg_level_name(WEFT_LOG_WARN), "warn");
    assert_string_equal(lg_level_name(WEFT_LOG_INFO), "info");
    assert_string_equal(lg_level_name(WEFT_LOG_DEBUG), "debug");
    assert_string_equal(lg_level_name(-1), "error");
    assert_string_equal(lg_level_name(9), "error");
}

static void test_threshold(void **state)
{
    lg_set_node("d1");
    lg_set_level(WEFT_LOG_WARN);
    lg_say(WEFT_LOG_INFO, "not %s", "shown");
    lg_say(WEFT_LOG_DEBUG, "nor this");
    lg_say(WEFT_LOG_WARN, "warned %d", 1);
    lg_say(WEFT_LOG_ERROR, "failed");
    lg_set_level(WEFT_LOG_DEBUG);
    lg_say(WEFT_LOG_DEBUG, "now shown");
    assert_null(strstr(logged(), "not shown"));
    assert_non_null(strstr(text, "level=warn node=d1 msg=\"warned 1\"\n"));
    assert_non_null(strstr(text, "level=error node=d1 msg=\"failed\"\n"));
    assert_non_null(strstr(text, "level=debug node=d1 msg=\"now shown\"\n"));
    assert_null(strstr(text, "nor this"));
}

static void test_daemon_format(void **state)
{
    lg_set_node("d1");
    assert_string_equal(
        fmt(WEFT_LOG_INFO, NULL, "started: workers=2"),
        "ts=2023-11-14T22:13:20.123Z level=info node=d1 msg=\"started: workers=2\"");
    /* quotes and newlines would break the line: ' and nothing */
    assert_string_equal(fmt(WEFT_LOG_WARN, NULL, "task 'a' said \"no\"\nagain"),
                        "ts=2023-11-14T22:13:20.123Z level=warn node=d1 msg=\"task 'a' said "
                        "'no'again\"");
    /* an out-of-range level is an error */
    assert_string_equal(fmt(17, NULL, "x"),
                        "ts=2023-11-14T22:13:20.123Z level=error node=d1 msg=\"x\"");
    /* the line's time is whatever lg_log's is: now, in UTC with ms */
    lg_say(WEFT_LOG_INFO, "now");
    assert_int_equal(strncmp(logged(), "ts=20", 5), 0);
    assert_int_equal(text[13], 'T');
    assert_non_null(strstr(text, "Z level=info node=d1 msg=\"now\"\n"));
}

static void test_fields(void **state)
{
    lg_set_node("host-42");
    /* in order, between node and msg; a NULL value is left out */
    assert_string_equal(fmt(WEFT_LOG_INFO,
                            LG_FIELDS(LG_STR("plugin", "fx_sleep"), LG_STR("task", NULL),
                                      LG_STR("workflow", "w-1")),
                            "slept 1 ms"),
                        "ts=2023-11-14T22:13:20.123Z level=info node=host-42 plugin=fx_sleep "
                        "workflow=w-1 msg=\"slept 1 ms\"");
    /* a value that would break the line is quoted */
    assert_string_equal(
        fmt(WEFT_LOG_DEBUG, LG_FIELDS(LG_STR("ref", "a b=\"c\""), LG_STR("empty", "")), "m"),
        "ts=2023-11-14T22:13:20.123Z level=debug node=host-42 ref=\"a b='c'\" "
        "empty=\"\" msg=\"m\"");
    lg_log(WEFT_LOG_WARN, LG_FIELDS(LG_STR("plugin", "http")), "%d retries", 3);
    assert_non_null(strstr(logged(), " level=warn node=host-42 plugin=http msg=\"3 retries\"\n"));
    /* a number is written bare, 0 and negatives included */
    assert_string_equal(fmt(WEFT_LOG_INFO,
                            LG_FIELDS(LG_STR("path", "/x"), LG_INT("status", 404), LG_INT("ms", 0),
                                      LG_INT("off", -9007199254740993LL)),
                            "m"),
                        "ts=2023-11-14T22:13:20.123Z level=info node=host-42 path=/x status=404 "
                        "ms=0 off=-9007199254740993 msg=\"m\"");
}

/* log_format = json: a field made with LG_INT is a JSON number, one made
 * with LG_STR a string even when it reads as a number. */
static void test_json_numbers(void **state)
{
    const char *line;
    json_object *o, *v;
    lg_set_node("d1");
    lg_set_json(1);
    line = fmt(WEFT_LOG_DEBUG,
               LG_FIELDS(LG_STR("method", "GET"), LG_INT("status", 200), LG_INT("ms", 0),
                         LG_STR("task_id", "42"), LG_INT("big", INT64_MAX), LG_INT("neg", -1)),
               "api request");
    assert_string_equal(line, "{\"ts\":\"2023-11-14T22:13:20.123Z\",\"level\":\"debug\","
                              "\"node\":\"d1\",\"method\":\"GET\",\"status\":200,\"ms\":0,"
                              "\"task_id\":\"42\",\"big\":9223372036854775807,\"neg\":-1,"
                              "\"msg\":\"api request\"}");
    assert_non_null(o = json_tokener_parse(line));
    assert_true(json_object_object_get_ex(o, "status", &v));
    assert_true(json_object_is_type(v, json_type_int));
    assert_int_equal(json_object_get_int64(v), 200);
    assert_true(json_object_object_get_ex(o, "big", &v));
    assert_true(json_object_get_int64(v) == INT64_MAX);
    assert_true(json_object_object_get_ex(o, "task_id", &v));
    assert_true(json_object_is_type(v, json_type_string));
    json_object_put(o);
    /* through lg_log as well; the command line's format shows the number */
    lg_log(WEFT_LOG_WARN, LG_FIELDS(LG_INT("status", 503)), "x");
    assert_non_null(strstr(logged(), ",\"status\":503,\"msg\":\"x\"}\n"));
    lg_set_node(NULL);
    assert_string_equal(fmt(WEFT_LOG_WARN, LG_FIELDS(LG_INT("status", 503)), "x"),
                        "weft: 503: warn: x");
}

/* log_format = json: one object a line, every string escaped, the fields
 * as members; a message cut to fit leaves a whole object. */
static void test_json_format(void **state)
{
    static char small[160], big[3000];
    const char *msg = "task 'a' said \"no\"\nagain\t\\", *line;
    json_object *o, *v;
    lg_set_node("d\"1");
    lg_set_json(1);
    line = fmt(WEFT_LOG_WARN,
               LG_FIELDS(LG_STR("plugin", "http"), LG_STR("task", NULL), LG_STR("workflow", "w-1")),
               msg);
    assert_string_equal(line,
                        "{\"ts\":\"2023-11-14T22:13:20.123Z\",\"level\":\"warn\",\"node\":"
                        "\"d\\\"1\",\"plugin\":\"http\",\"workflow\":\"w-1\",\"msg\":\"task 'a' "
                        "said \\\"no\\\"\\nagain\\u0009\\\\\"}");
    assert_non_null(o = json_tokener_parse(line));
    assert_true(json_object_object_get_ex(o, "msg", &v));
    assert_string_equal(json_object_get_string(v), msg);
    assert_true(json_object_object_get_ex(o, "node", &v));
    assert_string_equal(json_object_get_string(v), "d\"1");
    assert_false(json_object_object_get_ex(o, "task", &v)); /* a NULL value is left out */
    json_object_put(o);
    memset(big, '"', sizeof big - 1);
    lg_format(small, sizeof small, WEFT_LOG_INFO, NULL, big, TS);
    assert_true(strlen(small) < sizeof small);
    assert_non_null(o = json_tokener_parse(small));
    json_object_put(o);
    lg_log(WEFT_LOG_INFO, LG_FIELDS(LG_STR("plugin", "http")), "%d retries", 3);
    assert_non_null(strstr(logged(), ",\"plugin\":\"http\",\"msg\":\"3 retries\"}\n"));
    /* bytes that are not UTF-8 (a worker's reason may hold any) become
     * U+FFFD; well-formed characters pass; a sequence cut by the end too */
    assert_non_null(strstr(fmt(WEFT_LOG_INFO, NULL, "a\xff\xc3\xa9\xed\xa0\x80z\xe2\x82"),
                           ",\"msg\":\"a\\ufffd\xc3\xa9\\ufffd\\ufffd\\ufffdz\\ufffd\\ufffd\"}"));
    /* the command line keeps its own format */
    lg_set_node(NULL);
    assert_string_equal(fmt(WEFT_LOG_INFO, NULL, "x"), "weft: info: x");
}

static void test_cli_format(void **state)
{
    /* no node: the command line's "weft: <plugin>: <level>: msg", msg as it is */
    assert_string_equal(fmt(WEFT_LOG_INFO, LG_FIELDS(LG_STR("plugin", "FX_SLEEP")), "say \"hi\""),
                        "weft: FX_SLEEP: info: say \"hi\"");
    assert_string_equal(fmt(WEFT_LOG_ERROR, LG_FIELDS(LG_STR("plugin", NULL)), "e 1"),
                        "weft: error: e 1");
    assert_string_equal(fmt(WEFT_LOG_WARN, NULL, "w"), "weft: warn: w");
    lg_say(WEFT_LOG_INFO, "i %c", '3');
    lg_say(WEFT_LOG_DEBUG, "d");
    assert_string_equal(logged(), "weft: info: i 3\n");
}

static void test_long_and_small(void **state)
{
    char big[3000], small[12];
    const char *l, *q;
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = 0;
    lg_set_node("d1");
    lg_say(WEFT_LOG_INFO, "%s", big);
    /* the message is cut at 2047 bytes; the line still ends its quote */
    l = logged();
    q = strstr(l, "msg=\"");
    assert_non_null(q);
    assert_int_equal(strlen(q), strlen("msg=\"") + 2047 + strlen("\"\n"));
    /* a buffer too small is cut, NUL-terminated */
    assert_int_equal(lg_format(small, sizeof small, WEFT_LOG_INFO, NULL, "m", TS), 11);
    assert_string_equal(small, "ts=2023-11-");
    assert_int_equal(lg_format(small, 0, WEFT_LOG_INFO, NULL, "m", TS), 0);
}

static void test_hook(void **state)
{
    lg_set_node("d1");
    lg_hook(NULL, WEFT_LOG_INFO,
            LG_FIELDS(LG_STR("method", "GET"), LG_STR("path", "/health"), LG_INT("status", 200),
                      LG_STR("error", NULL)),
            "api request");
    lg_hook(NULL, WEFT_LOG_DEBUG, NULL, "dropped");
    /* fields as fields, a NULL one left out */
    assert_non_null(strstr(logged(), " level=info node=d1 method=GET path=/health status=200 "
                                     "msg=\"api request\"\n"));
    assert_null(strstr(text, "dropped"));
}

/* A plugin's lines (host->log) pass the same threshold, in the same format. */
static void test_plugin_lines(void **state)
{
    const weft_host *h = host_table();
    host_set_log(NULL, NULL, NULL);
    lg_set_level(WEFT_LOG_WARN);
    h->log(WEFT_LOG_INFO, "plugin info %d", 1);
    h->log(WEFT_LOG_WARN, "plugin warn %d", 2);
    assert_string_equal(logged(), "weft: warn: plugin warn 2\n");
    lg_set_node("d1");
    lg_set_level(WEFT_LOG_DEBUG);
    h->log(WEFT_LOG_DEBUG, "plugin debug");
    assert_non_null(strstr(logged(), " level=debug node=d1 msg=\"plugin debug\"\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_level_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threshold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_and_small, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_lines, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

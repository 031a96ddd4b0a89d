#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

static void assert_has(const char *msg, const char *part)
{
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

static void assert_duration(const char *s, int64_t want)
{
    int64_t ms = -1;
    weft_error err = {0};
    if (wu_parse_duration_str(s, &ms, &err) != 0) fail_msg("\"%s\": %s", s, err.msg);
    if (ms != want) fail_msg("\"%s\": got %lld ms, want %lld", s, (long long)ms, (long long)want);
}

static void test_duration_good(void **state)
{
    json_object *v;
    int64_t ms;
    weft_error err = {0};

    assert_duration("250ms", 250);
    assert_duration("5s", 5000);
    assert_duration("2m", 120000);
    assert_duration("1h", 3600000);
    assert_duration("1d", 86400000);
    assert_duration("1.5s", 1500);
    assert_duration("0.25", 250);
    assert_duration("10", 10000);
    assert_duration("0", 0);
    assert_duration("5 s", 5000);
    /* Conductor's WAIT form: x days y hours z minutes aa seconds, any of the
     * units spelled out or short, parts with or without spaces */
    assert_duration("2 seconds", 2000);
    assert_duration("1 second", 1000);
    assert_duration("1 minute", 60000);
    assert_duration("3 days 2 hours", 3 * 86400000LL + 2 * 3600000LL);
    assert_duration("10m20s", 620000);
    assert_duration("1h 30m", 5400000);
    assert_duration("1 hr 2 mins 3 secs", 3723000);
    assert_duration("2 hrs", 7200000);
    assert_duration("1d 1h 1m 1s 1ms", 90061001);
    assert_duration("1.5 hours", 5400000);
    assert_duration("  4 Seconds ", 4000);

    v = json_object_new_int(3);
    assert_int_equal(wu_parse_duration(v, &ms, &err), 0);
    assert_int_equal(ms, 3000);
    json_object_put(v);
    v = json_object_new_double(0.25);
    assert_int_equal(wu_parse_duration(v, &ms, &err), 0);
    assert_int_equal(ms, 250);
    json_object_put(v);
    v = json_object_new_string("2m");
    assert_int_equal(wu_parse_duration(v, &ms, &err), 0);
    assert_int_equal(ms, 120000);
    json_object_put(v);
}

/* wu_duration_text: as people read it, each unit's range in turn. */
static void test_duration_text(void **state)
{
    static const struct {
        int64_t ms;
        const char *text;
    } cases[] = {{-5, "0ms"},         {0, "0ms"},         {999, "999ms"},     {1000, "1.0s"},
                 {2650, "2.6s"},      {59999, "59.9s"},   {60000, "1m00s"},   {302000, "5m02s"},
                 {3599999, "59m59s"}, {3600000, "1h00m"}, {3900000, "1h05m"}, {86400000, "1d00h"},
                 {183600000, "2d03h"}};
    char buf[32];
    size_t i;
    (void)state;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wu_duration_text(buf, sizeof buf, cases[i].ms);
        assert_string_equal(buf, cases[i].text);
    }
}

/* wu_list_next: elements trimmed, empty ones kept (the caller refuses them). */
static void test_list_next(void **state)
{
    const char *p = " a , b,,c ", *s;
    const char *want[] = {"a", "b", "", "c"};
    size_t n, i = 0;
    (void)state;
    while (wu_list_next(&p, &s, &n)) {
        assert_true(i < 4);
        if (n != strlen(want[i]) || strncmp(s, want[i], n))
            fail_msg("element %zu: '%.*s', want '%s'", i, (int)n, s, want[i]);
        i++;
    }
    assert_int_equal(i, 4);
    p = "";
    assert_int_equal(wu_list_next(&p, &s, &n), 1);
    assert_int_equal(n, 0);
    assert_int_equal(wu_list_next(&p, &s, &n), 0);
    p = "x,";
    assert_int_equal(wu_list_next(&p, &s, &n), 1);
    assert_int_equal(wu_list_next(&p, &s, &n), 1);
    assert_int_equal(n, 0);
    assert_int_equal(wu_list_next(&p, &s, &n), 0);
}

static void assert_bad_duration(const char *s)
{
    int64_t ms = 12345;
    weft_error err = {0};
    assert_int_equal(wu_parse_duration_str(s, &ms, &err), WEFT_EINVAL);
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_int_equal(ms, 12345); /* untouched on failure */
    if (s && *s) assert_has(err.msg, s);
}

static void test_duration_bad(void **state)
{
    json_object *v;
    int64_t ms;
    weft_error err = {0};

    assert_bad_duration(NULL);
    assert_bad_duration("");
    assert_bad_duration("abc");
    assert_bad_duration("5x");
    assert_bad_duration("5 secondz");
    assert_bad_duration("5 10s"); /* a bare number only stands alone */
    assert_bad_duration("10s 5");
    assert_bad_duration("1h 1h"); /* each unit once */
    assert_bad_duration("1h,");
    assert_bad_duration("1h -5m");
    assert_bad_duration("s 5");
    assert_bad_duration("0x10s");
    assert_bad_duration("9999999 days 9999999 days");
    assert_bad_duration("-1s");
    assert_bad_duration("1e400");
    assert_bad_duration("nan");
    assert_bad_duration("ms");
    assert_bad_duration("99999999999999h");

    assert_int_equal(wu_parse_duration(NULL, &ms, &err), WEFT_EINVAL);
    assert_has(err.msg, "null");
    v = json_object_new_boolean(1);
    assert_int_equal(wu_parse_duration(v, &ms, &err), WEFT_EINVAL);
    assert_has(err.msg, "true");
    json_object_put(v);
    v = json_object_new_int(-5);
    assert_int_equal(wu_parse_duration(v, &ms, &err), WEFT_EINVAL);
    assert_has(err.msg, "-5");
    json_object_put(v);
    v = json_object_new_string("soon");
    assert_int_equal(wu_parse_duration(v, &ms, &err), WEFT_EINVAL);
    assert_has(err.msg, "soon");
    json_object_put(v);
    v = json_object_new_array();
    assert_int_equal(wu_parse_duration(v, &ms, &err), WEFT_EINVAL);
    json_object_put(v);
}

static void test_uuid(void **state)
{
    wu_map *seen = wu_map_new();
    char id[37];
    int i, j;

    assert_non_null(seen);
    for (i = 0; i < 2000; i++) {
        memset(id, 'X', sizeof id);
        wu_uuid(id);
        assert_int_equal(strlen(id), 36);
        for (j = 0; j < 36; j++) {
            if (j == 8 || j == 13 || j == 18 || j == 23)
                assert_int_equal(id[j], '-');
            else if (!isxdigit((unsigned char)id[j]) || isupper((unsigned char)id[j]))
                fail_msg("%s: bad character at %d", id, j);
        }
        assert_int_equal(id[14], '4');           /* version 4 */
        assert_non_null(strchr("89ab", id[19])); /* RFC 4122 variant */
        if (wu_map_get(seen, id)) fail_msg("duplicate uuid %s after %d", id, i);
        assert_int_equal(wu_map_put(seen, id, (void *)1), 0);
    }
    assert_int_equal(wu_map_count(seen), 2000);
    wu_map_free(seen);
}

/* Task ids carry their workflow's id, and only ids of that form name one. */
static void test_task_id(void **state)
{
    char id[WU_TASK_ID_MAX], wf[WU_TASK_ID_MAX], other[WU_TASK_ID_MAX];
    const char *bad[] = {"",
                         "wf.0123",
                         "0123456789abcdef",
                         ".0123456789abcdef",
                         "wf-0123456789abcdef",
                         "wf.0123456789abcdeg",
                         "wf.0123456789abcdef0", /* 17 digits: the '.' is not where it must be */
                         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.0123456789abcdef"};
    weft_error err = {0};
    size_t i;
    (void)state;
    wu_task_id(id, "8a2d0c1e-1111-4222-8333-444455556666");
    assert_int_equal(strlen(id), 36 + 17);
    assert_int_equal(wu_task_workflow(id, wf, &err), 0);
    assert_string_equal(wf, "8a2d0c1e-1111-4222-8333-444455556666");
    wu_task_id(other, "8a2d0c1e-1111-4222-8333-444455556666");
    assert_string_not_equal(id, other);
    assert_int_equal(wu_task_workflow("a.b.0123456789abcdef", wf, &err), 0);
    assert_string_equal(wf, "a.b"); /* a workflow id may hold a '.' */
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        if (wu_task_workflow(bad[i], wf, &err) != WEFT_EINVAL)
            fail_msg("'%s' named a workflow", bad[i]);
        assert_non_null(strstr(err.msg, "does not name its workflow"));
    }
}

static void test_map(void **state)
{
    wu_map *m = wu_map_new();
    char key[32];
    int vals[3] = {1, 2, 3};
    size_t i;

    assert_non_null(m);
    assert_int_equal(wu_map_count(m), 0);
    assert_null(wu_map_get(m, "a"));

    assert_int_equal(wu_map_put(m, "a", &vals[0]), 0);
    assert_int_equal(wu_map_put(m, "b", &vals[1]), 0);
    assert_ptr_equal(wu_map_get(m, "a"), &vals[0]);
    assert_ptr_equal(wu_map_get(m, "b"), &vals[1]);
    assert_null(wu_map_get(m, "c"));
    assert_null(wu_map_get(m, ""));
    assert_null(wu_map_get(m, NULL));
    assert_int_equal(wu_map_count(m), 2);

    /* replace keeps the count */
    assert_int_equal(wu_map_put(m, "a", &vals[2]), 0);
    assert_ptr_equal(wu_map_get(m, "a"), &vals[2]);
    assert_int_equal(wu_map_count(m), 2);

    /* keys are copied */
    snprintf(key, sizeof key, "temp");
    assert_int_equal(wu_map_put(m, key, &vals[0]), 0);
    snprintf(key, sizeof key, "gone");
    assert_ptr_equal(wu_map_get(m, "temp"), &vals[0]);
    assert_null(wu_map_get(m, "gone"));

    /* the empty string is a key like any other */
    assert_int_equal(wu_map_put(m, "", &vals[1]), 0);
    assert_ptr_equal(wu_map_get(m, ""), &vals[1]);

    /* grow well past the initial size; everything stays reachable */
    for (i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "key-%zu", i);
        assert_int_equal(wu_map_put(m, key, (void *)(uintptr_t)(i + 1)), 0);
    }
    assert_int_equal(wu_map_count(m), 5004);
    for (i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "key-%zu", i);
        assert_int_equal((uintptr_t)wu_map_get(m, key), i + 1);
    }
    assert_ptr_equal(wu_map_get(m, "b"), &vals[1]);
    assert_null(wu_map_get(m, "key-5000"));
    assert_int_equal(wu_map_count(NULL), 0);
    assert_null(wu_map_get(NULL, "a"));
    wu_map_free(m);
    wu_map_free(NULL);
}

/* A borrowing map keeps the caller's key pointers: never copied, never freed. */
static void test_map_borrowing(void **state)
{
    wu_map *m = wu_map_new_borrowing();
    char keys[300][16]; /* on the stack: freeing one would be caught */
    size_t i;

    assert_non_null(m);
    /* room made up front: none of the puts grows the map or fails */
    assert_int_equal(wu_map_reserve(m, 300), 0);
    for (i = 0; i < 300; i++) {
        snprintf(keys[i], sizeof keys[i], "k%zu", i);
        assert_int_equal(wu_map_put(m, keys[i], (void *)(uintptr_t)(i + 1)), 0);
    }
    assert_int_equal(wu_map_count(m), 300);
    for (i = 0; i < 300; i++)
        assert_int_equal((uintptr_t)wu_map_get(m, keys[i]), i + 1);
    /* a replace keeps the first key pointer, and the count */
    assert_int_equal(wu_map_put(m, "k7", (void *)(uintptr_t)1000), 0);
    assert_int_equal((uintptr_t)wu_map_get(m, keys[7]), 1000);
    assert_int_equal(wu_map_count(m), 300);
    assert_null(wu_map_get(m, "k300"));
    /* reserving what there is room for already changes nothing */
    assert_int_equal(wu_map_reserve(m, 0), 0);
    assert_int_equal(wu_map_reserve(m, 1), 0);
    assert_int_equal((uintptr_t)wu_map_get(m, "k299"), 300);
    wu_map_free(m);
}

static void test_vec(void **state)
{
    wu_vec v = {0};
    int items[100];
    size_t i;
    for (i = 0; i < 100; i++)
        assert_int_equal(wu_vec_push(&v, &items[i]), 0);
    assert_int_equal(v.len, 100);
    assert_true(v.cap >= 100);
    for (i = 0; i < 100; i++)
        assert_ptr_equal(v.items[i], &items[i]);
    assert_int_equal(wu_vec_push(&v, NULL), 0);
    assert_null(v.items[100]);
    wu_vec_free(&v);
    assert_null(v.items);
    assert_int_equal(v.len, 0);
    assert_int_equal(v.cap, 0);
    /* usable again after free */
    assert_int_equal(wu_vec_push(&v, &items[0]), 0);
    assert_int_equal(v.len, 1);
    wu_vec_free(&v);
}

static void test_parse_json(void **state)
{
    json_object *o = NULL;
    weft_error err = {0};

    assert_int_equal(wu_parse_json("in", "{\"a\": [1, 2]}\n\n  \t", &o, &err), 0);
    assert_int_equal(json_object_array_length(json_object_object_get(o, "a")), 2);
    json_object_put(o);
    assert_int_equal(wu_parse_json("in", "42\n", &o, &err), 0);
    assert_int_equal(json_object_get_int(o), 42);
    json_object_put(o);

    o = (json_object *)&o;
    assert_int_equal(wu_parse_json("body", "{\n  \"a\": 1,\n  \"b\": }\n", &o, &err), WEFT_EINVAL);
    assert_ptr_equal(o, (json_object *)&o); /* untouched on failure */
    assert_int_equal(err.code, WEFT_EINVAL);
    assert_has(err.msg, "body: ");
    assert_has(err.msg, "line 3");

    assert_int_equal(wu_parse_json("x.json", "{} trailing", &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "x.json: ");
    assert_has(err.msg, "line 1");
    assert_int_equal(wu_parse_json("x.json", "[1]\n\n\n  ]", &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "line 4");

    /* unexpected end of input */
    assert_int_equal(wu_parse_json("cut", "{\"a\":\n", &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "cut: ");
    assert_has(err.msg, "line");
    assert_int_equal(wu_parse_json("empty", "", &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "empty: ");

    /* json-c takes NaN and Infinity even when strict; JSON has neither */
    assert_int_equal(wu_parse_json("body", "{\"input\": {\"n\": NaN}}", &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "body: invalid JSON at input.n: a number must be finite");
    assert_int_equal(wu_parse_json("body", "[1, -Infinity]", &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "at [1]");
    assert_int_equal(wu_parse_json("body", "1e999", &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "at the top");
    assert_int_equal(wu_parse_json("body", "[1e308, -0.0, 5e-324]", &o, &err), 0);
    json_object_put(o);
}

/* n arrays one inside the other around a 1, into text (2n + 2 bytes). */
static const char *nested(char *text, int n)
{
    memset(text, '[', (size_t)n);
    text[n] = '1';
    memset(text + n + 1, ']', (size_t)n);
    text[2 * n + 1] = 0;
    return text;
}

/* What a client sends nests under 32 levels; what weft stored, as deep as
 * a LAMBDA's result inside its document. */
static void test_parse_json_stored(void **state)
{
    char text[2 * 300 + 2];
    json_object *o = NULL;
    weft_error err = {0};
    assert_int_equal(wu_parse_json("body", nested(text, 31), &o, &err), 0);
    json_object_put(o);
    assert_int_equal(wu_parse_json("body", nested(text, 32), &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "body: ");
    assert_int_equal(wu_parse_json_stored("doc", nested(text, 300), &o, &err), 0);
    json_object_put(o);
    assert_int_equal(wu_parse_json_stored("doc", "{\"a\": ", &o, &err), WEFT_EINVAL);
    assert_has(err.msg, "doc: ");
}

static void test_read_file(void **state)
{
    char path[] = "/tmp/weft-util-XXXXXX";
    char *buf = NULL;
    size_t len = 0;
    weft_error err = {0};
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello\nworld", 11), 11);
    close(fd);
    assert_int_equal(wu_read_file(path, &buf, &len, &err), 0);
    assert_int_equal(len, 11);
    assert_string_equal(buf, "hello\nworld");
    free(buf);
    buf = NULL;
    assert_int_equal(wu_read_file(path, &buf, NULL, &err), 0);
    assert_string_equal(buf, "hello\nworld");
    free(buf);
    unlink(path);

    buf = NULL;
    assert_int_equal(wu_read_file(path, &buf, &len, &err), WEFT_ENOTFOUND);
    assert_null(buf);
    assert_int_equal(err.code, WEFT_ENOTFOUND);
    assert_has(err.msg, path);
    assert_int_equal(wu_read_file("/nonexistent/dir/x.lua", &buf, &len, NULL), WEFT_ENOTFOUND);

    assert_int_equal(wu_read_file("/tmp", &buf, &len, &err), WEFT_EIO);
    assert_has(err.msg, "/tmp");
    assert_has(err.msg, "not a regular file");
    assert_null(buf);
}

static void test_errors(void **state)
{
    weft_error err = {0};

    assert_int_equal(wu_err(&err, WEFT_EEXIST, "ref '%s' twice", "a"), WEFT_EEXIST);
    assert_int_equal(err.code, WEFT_EEXIST);
    assert_string_equal(err.msg, "ref 'a' twice");
    assert_int_equal(wu_err(NULL, WEFT_EIO, "dropped"), WEFT_EIO);

    assert_int_equal(wu_err_prefix(&err, "%s:%d: ", "order.lua", 7), WEFT_EEXIST);
    assert_string_equal(err.msg, "order.lua:7: ref 'a' twice");
    assert_int_equal(err.code, WEFT_EEXIST);
    assert_int_equal(wu_err_prefix(&err, "workflow %s: ", "w"), WEFT_EEXIST);
    assert_string_equal(err.msg, "workflow w: order.lua:7: ref 'a' twice");
    assert_int_equal(wu_err_prefix(NULL, "x: "), WEFT_EINVAL);

    /* long messages are cut, never overflow */
    memset(err.msg, 'm', sizeof err.msg - 1);
    err.msg[sizeof err.msg - 1] = 0;
    wu_err_prefix(&err, "prefix: ");
    assert_int_equal(strlen(err.msg), sizeof err.msg - 1);
    assert_true(!strncmp(err.msg, "prefix: mmm", 11));
}

static void test_clocks(void **state)
{
    int64_t a = wu_mono_ms(), b, now = wu_now_ms();
    assert_true(now > 1577836800000LL); /* after 2020-01-01 */
    usleep(20000);
    b = wu_mono_ms();
    assert_true(b - a >= 15);
    assert_true(wu_now_ms() >= now);
}

/* The UTF-8 rule: valid sequences kept, each other byte as the text \xNN. */
static void test_utf8(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"caf\xe9", "caf\\xe9"},
        {"\xc0\xaf", "\\xc0\\xaf"},                   /* overlong '/' */
        {"\xed\xa0\x80", "\\xed\\xa0\\x80"},          /* a surrogate */
        {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"}, /* past U+10FFFF */
        {"\xe2\x82", "\\xe2\\x82"},                   /* cut short */
    };
    char out[64];
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].in);
        assert_int_equal(wu_utf8_len(cases[i].in, n), strlen(cases[i].out));
        assert_int_equal(wu_utf8_copy(out, sizeof out, cases[i].in, n), strlen(cases[i].out));
        assert_string_equal(out, cases[i].out);
    }
    /* cut at a whole sequence when the room runs out */
    assert_int_equal(wu_utf8_copy(out, 6,
                                  "ab\xe9"
                                  "cd",
                                  5),
                     2);
    assert_string_equal(out, "ab");
    assert_int_equal(wu_utf8_copy(out, 5, "\xc3\xa9\xc3\xa9\xc3\xa9", 6), 4);
    assert_string_equal(out, "\xc3\xa9\xc3\xa9");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_good),
        cmocka_unit_test(test_list_next),
        cmocka_unit_test(test_duration_bad),
        cmocka_unit_test(test_duration_text),
        cmocka_unit_test(test_uuid),
        cmocka_unit_test(test_task_id),
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_map_borrowing),
        cmocka_unit_test(test_vec),
        cmocka_unit_test(test_parse_json),
        cmocka_unit_test(test_parse_json_stored),
        cmocka_unit_test(test_read_file),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

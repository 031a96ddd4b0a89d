#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/expr.h"

/*
 * The lookup of these tests: a document {root: {field: value}}; a NULL
 * field gives the whole root. Every call is recorded.
 */
static const char *DOC =
    "{\"workflow\": {\"input\": {\"n\": 42, \"d\": 2.5, \"t\": true, \"f\": false, \"nul\": null,"
    "  \"s\": \"hi\", \"url\": \"a/b\", \"obj\": {\"k\": 1, \"p\": \"x/y\"}, \"arr\": [10, 20, "
    "[30]],"
    "  \"x\": {\"y\": [\"first\", \"second\"]}},"
    "  \"workflowId\": \"wf-1\", \"variables\": {\"v\": \"var\"}},"
    " \"fetch\": {\"output\": {\"a\": {\"b c\": [0, 1, \"two\"], \"x.y\": 7, \"it's\": \"q\","
    "  \"say \\\"hi\\\"\": \"dq\"}}},"
    " \"secrets\": {\"TOKEN\": \"s3cret\"}}";

typedef struct env {
    json_object *doc;
    int calls;
    char last_root[64];
    char last_field[64];
    int last_field_null;
} env;

static json_object *lookup(void *ud, const char *root, const char *field)
{
    env *e = ud;
    json_object *r, *f;
    e->calls++;
    snprintf(e->last_root, sizeof e->last_root, "%s", root);
    snprintf(e->last_field, sizeof e->last_field, "%s", field ? field : "");
    e->last_field_null = field == NULL;
    if (!json_object_object_get_ex(e->doc, root, &r)) return NULL;
    if (!field) return r;
    return json_object_object_get_ex(r, field, &f) ? f : NULL;
}

static int setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->doc = json_tokener_parse(DOC);
    assert_non_null(e->doc);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env *e = *state;
    json_object_put(e->doc);
    free(e);
    return 0;
}

/* Compile the JSON text tmpl and evaluate it once. */
static json_object *eval_json(env *e, const char *tmpl)
{
    json_object *t = json_tokener_parse(tmpl), *out;
    ex_tmpl *x;
    weft_error err = {0};
    assert_non_null(t);
    assert_int_equal(ex_compile(t, &x, &err), 0);
    json_object_put(t);
    out = ex_eval(x, lookup, e);
    ex_free(x);
    return out;
}

/* Evaluate a single string template; returns the result (caller puts). */
static json_object *eval_str(env *e, const char *s)
{
    json_object *t = json_object_new_string(s), *out;
    ex_tmpl *x;
    weft_error err = {0};
    assert_int_equal(ex_compile(t, &x, &err), 0);
    json_object_put(t);
    out = ex_eval(x, lookup, e);
    ex_free(x);
    return out;
}

static void assert_eval_text(env *e, const char *tmpl, const char *want)
{
    json_object *v = eval_str(e, tmpl);
    assert_non_null(v);
    assert_true(json_object_is_type(v, json_type_string));
    assert_string_equal(json_object_get_string(v), want);
    json_object_put(v);
}

static json_object *doc_at(env *e, const char *path)
{
    return ex_walk(e->doc, path);
}

static void test_single_keeps_type(void **state)
{
    env *e = *state;
    json_object *v;

    v = eval_str(e, "${workflow.input.n}");
    assert_true(json_object_is_type(v, json_type_int));
    assert_int_equal(json_object_get_int(v), 42);
    json_object_put(v);

    v = eval_str(e, "${workflow.input.d}");
    assert_true(json_object_is_type(v, json_type_double));
    assert_true(json_object_get_double(v) == 2.5);
    json_object_put(v);

    v = eval_str(e, "${workflow.input.t}");
    assert_true(json_object_is_type(v, json_type_boolean));
    assert_true(json_object_get_boolean(v));
    json_object_put(v);

    v = eval_str(e, "${workflow.input.s}");
    assert_true(json_object_is_type(v, json_type_string));
    assert_string_equal(json_object_get_string(v), "hi");
    json_object_put(v);

    /* objects and arrays: the borrowed value itself, with a reference taken */
    v = eval_str(e, "${workflow.input.obj}");
    assert_ptr_equal(v, doc_at(e, ".workflow.input.obj"));
    json_object_put(v);
    v = eval_str(e, "${workflow.input.arr}");
    assert_ptr_equal(v, doc_at(e, ".workflow.input.arr"));
    assert_int_equal(json_object_array_length(v), 3);
    json_object_put(v);

    assert_null(eval_str(e, "${workflow.input.nul}"));
    assert_null(eval_str(e, "${workflow.input.nope}"));
}

static void test_lookup_args(void **state)
{
    env *e = *state;
    json_object *v;

    v = eval_str(e, "${workflow.workflowId}");
    assert_string_equal(json_object_get_string(v), "wf-1");
    assert_string_equal(e->last_root, "workflow");
    assert_string_equal(e->last_field, "workflowId");
    json_object_put(v);

    v = eval_str(e, "${secrets.TOKEN}");
    assert_string_equal(json_object_get_string(v), "s3cret");
    assert_string_equal(e->last_root, "secrets");
    assert_string_equal(e->last_field, "TOKEN");
    json_object_put(v);

    /* no field: the lookup gets NULL and the whole root comes back */
    v = eval_str(e, "${workflow}");
    assert_true(e->last_field_null);
    assert_ptr_equal(v, doc_at(e, "workflow"));
    json_object_put(v);

    /* a quoted key as the second segment is the field too */
    v = eval_str(e, "${workflow['variables'].v}");
    assert_string_equal(e->last_field, "variables");
    assert_string_equal(json_object_get_string(v), "var");
    json_object_put(v);

    /* an index right after the root: no field, the index applies to the root */
    v = eval_str(e, "${fetch[0]}");
    assert_true(e->last_field_null);
    assert_null(v);

    /* evaluation calls the lookup once per expression, compile never does */
    e->calls = 0;
    v = eval_str(e, "${a.b} ${c.d} ${workflow.input.n}");
    assert_int_equal(e->calls, 3);
    assert_string_equal(json_object_get_string(v), "null null 42");
    json_object_put(v);
}

static void test_interpolation_types(void **state)
{
    env *e = *state;
    assert_eval_text(e, "s=${workflow.input.s}", "s=hi");
    assert_eval_text(e, "n=${workflow.input.n}", "n=42");
    assert_eval_text(e, "d=${workflow.input.d}", "d=2.5");
    assert_eval_text(e, "${workflow.input.t}/${workflow.input.f}", "true/false");
    assert_eval_text(e, "[${workflow.input.nul}]", "[null]");
    assert_eval_text(e, "[${workflow.input.missing}]", "[null]");
    assert_eval_text(e, "o=${workflow.input.obj}", "o={\"k\":1,\"p\":\"x/y\"}");
    assert_eval_text(e, "a=${workflow.input.arr}", "a=[10,20,[30]]");
    /* strings are inserted as-is, without quotes or escapes */
    assert_eval_text(e, "u=${workflow.input.url}", "u=a/b");
    assert_eval_text(e, "${workflow.input.s}${workflow.input.s}", "hihi");
    assert_eval_text(e, "${workflow.input.s} ", "hi ");
    assert_eval_text(e, "http://h/${workflow.workflowId}?t=${secrets.TOKEN}",
                     "http://h/wf-1?t=s3cret");
}

static void test_interpolation_long(void **state)
{
    env *e = *state;
    char tmpl[4096], want[1024];
    size_t i;
    json_object *v;
    /* well past any small internal buffer */
    tmpl[0] = want[0] = 0;
    for (i = 0; i < 60; i++) {
        strcat(tmpl, "<${workflow.input.s}|${workflow.input.n}>");
        strcat(want, "<hi|42>");
    }
    v = eval_str(e, tmpl);
    assert_string_equal(json_object_get_string(v), want);
    json_object_put(v);
}

static void test_paths(void **state)
{
    env *e = *state;
    json_object *v;

    assert_eval_text(e, "${workflow.input.x.y[0]}", "first");
    assert_eval_text(e, "${workflow.input.x.y[1]}", "second");
    assert_null(eval_str(e, "${workflow.input.x.y[2]}"));
    assert_null(eval_str(e, "${workflow.input.x.y[99999999999]}"));
    v = eval_str(e, "${workflow.input.arr[2][0]}");
    assert_int_equal(json_object_get_int(v), 30);
    json_object_put(v);

    /* quoted keys, either quote, with dots, spaces and escaped quotes inside */
    v = eval_str(e, "${fetch.output.a['b c'][2]}");
    assert_string_equal(json_object_get_string(v), "two");
    json_object_put(v);
    v = eval_str(e, "${fetch.output.a[\"b c\"][1]}");
    assert_int_equal(json_object_get_int(v), 1);
    json_object_put(v);
    v = eval_str(e, "${fetch.output.a['x.y']}");
    assert_int_equal(json_object_get_int(v), 7);
    json_object_put(v);
    assert_eval_text(e, "${fetch.output.a['it\\'s']}", "q");
    assert_eval_text(e, "${fetch.output.a[\"say \\\"hi\\\"\"]}", "dq");
    /* a '}' inside a quoted key does not end the expression */
    assert_eval_text(e, "<${fetch.output.a['}']}>", "<null>");

    /* missing: root, field, deeper keys */
    assert_null(eval_str(e, "${nosuchref.output.a}"));
    assert_null(eval_str(e, "${fetch.input.a}"));
    assert_null(eval_str(e, "${fetch.output.a.zz.yy}"));
    /* key on an array, index on an object, either on a scalar */
    assert_null(eval_str(e, "${workflow.input.arr.length}"));
    assert_null(eval_str(e, "${workflow.input.arr.0}"));
    assert_null(eval_str(e, "${workflow.input.obj[0]}"));
    assert_null(eval_str(e, "${workflow.input.n[0]}"));
    assert_null(eval_str(e, "${workflow.input.s.x}"));
    assert_null(eval_str(e, "${workflow.input.nul.x}"));
}

static void test_escapes(void **state)
{
    env *e = *state;
    json_object *t;
    ex_tmpl *x;
    weft_error err = {0};

    assert_eval_text(e, "$${workflow.input.s}", "${workflow.input.s}");
    assert_eval_text(e, "a $${b} ${workflow.input.s}", "a ${b} hi");
    assert_eval_text(e, "${workflow.input.s}$${x}", "hi${x}");
    assert_eval_text(e, "cost: $5 and $$ and ${workflow.input.n}$", "cost: $5 and $$ and 42$");

    /* embedded NUL bytes in literal text survive */
    t = json_object_new_string_len("a\0b ${workflow.input.n}", 23);
    assert_int_equal(ex_compile(t, &x, &err), 0);
    json_object_put(t);
    t = ex_eval(x, lookup, e);
    assert_int_equal(json_object_get_string_len(t), 6);
    assert_memory_equal(json_object_get_string(t), "a\0b 42", 6);
    json_object_put(t);
    ex_free(x);

    /* only escapes: constant */
    t = json_object_new_string("$${not.an.expr}");
    assert_int_equal(ex_compile(t, &x, &err), 0);
    assert_true(ex_is_const(x));
    json_object_put(t);
    t = ex_eval(x, lookup, e);
    assert_string_equal(json_object_get_string(t), "${not.an.expr}");
    json_object_put(t);
    ex_free(x);

    /* a '$' and '}' alone are plain text */
    t = json_object_new_string("a $ b } c {");
    assert_int_equal(ex_compile(t, &x, &err), 0);
    assert_true(ex_is_const(x));
    json_object_put(t);
    ex_free(x);
}

static void test_constants(void **state)
{
    env *e = *state;
    json_object *t, *v, *c;
    ex_tmpl *x;
    weft_error err = {0};

    /* no expressions anywhere: the result is the template itself */
    t = json_tokener_parse("{\"a\": {\"b\": [1, 2, \"s\"]}, \"c\": null, \"d\": \"$ {x}\"}");
    assert_int_equal(ex_compile(t, &x, &err), 0);
    assert_true(ex_is_const(x));
    e->calls = 0;
    v = ex_eval(x, lookup, e);
    assert_ptr_equal(v, t);
    assert_int_equal(e->calls, 0);
    json_object_put(v);
    ex_free(x);
    json_object_put(t);

    /* scalars and null */
    t = json_object_new_int(5);
    assert_int_equal(ex_compile(t, &x, &err), 0);
    assert_true(ex_is_const(x));
    v = ex_eval(x, lookup, e);
    assert_ptr_equal(v, t);
    json_object_put(v);
    ex_free(x);
    json_object_put(t);
    assert_int_equal(ex_compile(NULL, &x, &err), 0);
    assert_true(ex_is_const(x));
    assert_null(ex_eval(x, lookup, e));
    ex_free(x);

    /* constant subtrees next to expressions are shared, not copied */
    t = json_tokener_parse("{\"k\": {\"deep\": [1, {\"z\": 2}]}, \"e\": \"${workflow.input.n}\","
                           " \"arr\": [\"lit\", [3, 4], \"${workflow.input.s}\"]}");
    assert_int_equal(ex_compile(t, &x, &err), 0);
    assert_false(ex_is_const(x));
    v = ex_eval(x, lookup, e);
    assert_ptr_not_equal(v, t);
    assert_true(json_object_object_get_ex(v, "k", &c));
    assert_ptr_equal(c, ex_walk(t, ".k"));
    assert_ptr_equal(ex_walk(v, ".arr[0]"), ex_walk(t, ".arr[0]"));
    assert_ptr_equal(ex_walk(v, ".arr[1]"), ex_walk(t, ".arr[1]"));
    assert_int_equal(json_object_get_int(ex_walk(v, ".e")), 42);
    assert_string_equal(json_object_get_string(ex_walk(v, ".arr[2]")), "hi");
    /* the template may go away before its results */
    ex_free(x);
    json_object_put(t);
    assert_int_equal(json_object_get_int(ex_walk(v, ".k.deep[1].z")), 2);
    json_object_put(v);

    /* escapes inside a container: still constant, with the escape applied */
    t = json_tokener_parse("{\"a\": [\"$${x}\", 1], \"b\": \"plain\"}");
    assert_int_equal(ex_compile(t, &x, &err), 0);
    assert_true(ex_is_const(x));
    v = ex_eval(x, lookup, e);
    assert_string_equal(json_object_get_string(ex_walk(v, ".a[0]")), "${x}");
    assert_string_equal(json_object_get_string(ex_walk(v, ".b")), "plain");
    assert_string_equal(json_object_get_string(ex_walk(t, ".a[0]")), "$${x}");
    json_object_put(v);
    /* every evaluation gives the same shared constant */
    v = ex_eval(x, lookup, e);
    c = ex_eval(x, lookup, e);
    assert_ptr_equal(v, c);
    json_object_put(v);
    json_object_put(c);
    ex_free(x);
    json_object_put(t);
}

static void test_nested(void **state)
{
    env *e = *state;
    json_object *v = eval_json(
        e, "{\"order\": \"${workflow.input.obj}\", \"list\": [\"${workflow.input.n}\","
           " {\"msg\": \"id ${workflow.workflowId}\", \"none\": \"${x.y}\"}, []], \"empty\": {}}");
    assert_true(json_object_is_type(v, json_type_object));
    assert_int_equal(json_object_get_int(ex_walk(v, ".order.k")), 1);
    assert_int_equal(json_object_get_int(ex_walk(v, ".list[0]")), 42);
    assert_string_equal(json_object_get_string(ex_walk(v, ".list[1].msg")), "id wf-1");
    /* a missing single expression is a JSON null member, not an absent one */
    assert_true(json_object_object_get_ex(ex_walk(v, ".list[1]"), "none", NULL));
    assert_null(ex_walk(v, ".list[1].none"));
    assert_int_equal(json_object_array_length(ex_walk(v, ".list[2]")), 0);
    assert_int_equal(json_object_object_length(ex_walk(v, ".empty")), 0);
    assert_string_equal(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
                        "{\"order\":{\"k\":1,\"p\":\"x\\/y\"},\"list\":[42,{\"msg\":\"id wf-1\","
                        "\"none\":null},[]],\"empty\":{}}");
    json_object_put(v);
}

typedef struct refs {
    char seen[512];
    int stop_at, n;
} refs;

static int collect(void *ud, const char *root, const char *field)
{
    refs *r = ud;
    size_t len = strlen(r->seen);
    snprintf(r->seen + len, sizeof r->seen - len, "%s%s/%s", len ? " " : "", root,
             field ? field : "-");
    if (++r->n == r->stop_at) return 7;
    return 0;
}

static void test_foreach_ref(void **state)
{
    json_object *t = json_tokener_parse(
        "{\"a\": \"${first.output.x}\", \"b\": [\"${workflow.input.y[0]} and ${secrets.K}\","
        " {\"c\": \"${workflow}\"}], \"d\": \"const\", \"e\": \"${last['field'].z}\"}");
    ex_tmpl *x;
    weft_error err = {0};
    refs r = {{0}, 0, 0};

    assert_int_equal(ex_compile(t, &x, &err), 0);
    assert_int_equal(ex_foreach_ref(x, collect, &r), 0);
    assert_string_equal(r.seen, "first/output workflow/input secrets/K workflow/- last/field");

    memset(&r, 0, sizeof r);
    r.stop_at = 3;
    assert_int_equal(ex_foreach_ref(x, collect, &r), 7);
    assert_int_equal(r.n, 3);
    assert_string_equal(r.seen, "first/output workflow/input secrets/K");
    ex_free(x);
    json_object_put(t);

    /* constants have no refs */
    t = json_tokener_parse("[1, \"$${x}\", {\"a\": \"b\"}]");
    assert_int_equal(ex_compile(t, &x, &err), 0);
    memset(&r, 0, sizeof r);
    assert_int_equal(ex_foreach_ref(x, collect, &r), 0);
    assert_int_equal(r.n, 0);
    ex_free(x);
    json_object_put(t);
}

static void assert_malformed(const char *s, const char *why)
{
    json_object *t = json_object_new_string(s);
    ex_tmpl *x = (ex_tmpl *)&x;
    weft_error err = {0};
    assert_int_equal(ex_compile(t, &x, &err), WEFT_EINVAL);
    assert_null(x);
    assert_int_equal(err.code, WEFT_EINVAL);
    if (!strstr(err.msg, s) || !strstr(err.msg, why))
        fail_msg("%s: message \"%s\" lacks the string or \"%s\"", s, err.msg, why);
    json_object_put(t);
}

static void test_malformed(void **state)
{
    assert_malformed("${", "unclosed");
    assert_malformed("abc ${workflow.input", "unclosed");
    assert_malformed("${workflow.input['x']", "unclosed");
    assert_malformed("${}", "empty");
    assert_malformed("x ${} y", "empty");
    assert_malformed("${a[}", "[..]");
    assert_malformed("${a[]}", "[..]");
    assert_malformed("${a[x]}", "[..]");
    assert_malformed("${a[1}", "[..]");
    assert_malformed("${a[-1]}", "[..]");
    assert_malformed("${a['b]}", "quoted");
    assert_malformed("${a['b'}", "[..]");
    assert_malformed("${a[99999999999999999999999]}", "[..]");
    assert_malformed("${a.}", "trailing");
    assert_malformed("${workflow.input.}", "trailing");
    assert_malformed("${a..b}", "name");
    assert_malformed("${.a}", "name");
    assert_malformed("${a b}", "unexpected");
    assert_malformed("ok ${workflow.input.x} bad ${a.}", "trailing");
}

static void test_malformed_nested(void **state)
{
    json_object *t = json_tokener_parse("{\"ok\": \"${a.b}\", \"in\": [1, {\"x\": \"${bad[}\"}]}");
    ex_tmpl *x = NULL;
    weft_error err = {0};
    assert_int_equal(ex_compile(t, &x, &err), WEFT_EINVAL);
    assert_null(x);
    assert_non_null(strstr(err.msg, "${bad[}"));
    json_object_put(t);
}

static void test_walk(void **state)
{
    env *e = *state;
    assert_string_equal(json_object_get_string(ex_walk(e->doc, ".workflow.input.x.y[1]")),
                        "second");
    assert_string_equal(json_object_get_string(ex_walk(e->doc, "workflow.input.x.y[0]")), "first");
    assert_string_equal(json_object_get_string(ex_walk(e->doc, ".fetch.output.a['b c'][2]")),
                        "two");
    assert_ptr_equal(ex_walk(e->doc, ""), e->doc);
    assert_ptr_equal(ex_walk(e->doc, NULL), e->doc);
    assert_null(ex_walk(e->doc, ".workflow.input.x.y[5]"));
    assert_null(ex_walk(e->doc, ".nope"));
    assert_null(ex_walk(e->doc, ".workflow."));
    assert_null(ex_walk(e->doc, ".workflow[x]"));
    assert_null(ex_walk(e->doc, ".workflow junk"));
    assert_null(ex_walk(NULL, ".a"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_keeps_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interpolation_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interpolation_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_constants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested, setup, teardown),
        cmocka_unit_test(test_foreach_ref),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_malformed_nested),
        cmocka_unit_test_setup_teardown(test_walk, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

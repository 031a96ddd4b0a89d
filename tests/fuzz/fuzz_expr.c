#define _GNU_SOURCE /* memmem */
/*
 * Fuzz target for expr.c: the bytes become a JSON string template (alone,
 * and inside an object and an array), and, when they parse as JSON text, a
 * template of their own. Each template is compiled, walked and evaluated
 * against a lookup that returns small fixed documents.
 *
 * Invariants checked (abort() when broken, so the fuzzer reports them):
 * compile errors are WEFT_EINVAL with a message; text without "${" is a
 * constant that evaluates to itself; evaluation is repeatable.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "core/expr.h"
#include "base/util.h"

#define FUZZ_NAME "fuzz_expr"
#include "fuzz.h"

static json_object *docs; /* { "workflow.input": ..., "t1.output": ... } */

static const char DOCS[] =
    "{\"workflow.input\":{\"n\":5,\"s\":\"text\",\"arr\":[1,2,{\"k\":\"v\"}],"
    "  \"nested\":{\"a\":{\"b\":[null,true,1.5]}},\"with space\":\"sp\",\"\":\"empty key\"},"
    " \"workflow.variables\":{\"count\":3,\"list\":[[1,[2,[3]]]]},"
    " \"workflow.workflowId\":\"wf-1\","
    " \"secrets.TOKEN\":\"s3cr3t\","
    " \"t1.output\":{\"result\":{\"total\":10,\"items\":[\"a\",\"b\"]},\"big\":12345678901234},"
    " \"t1.input\":{\"x\":\"${not.an.expression}\"},"
    " \"t1\":{\"whole\":true},"
    " \"t1__2.output\":[0,1,2]}";

static json_object *lookup(void *ud, const char *root, const char *field)
{
    char key[256];
    json_object *v;
    int *calls = ud;
    (*calls)++;
    check(root != NULL && *root != 0, "lookup root is a non-empty name");
    snprintf(key, sizeof key, "%s%s%s", root, field ? "." : "", field ? field : "");
    return json_object_object_get_ex(docs, key, &v) ? v : NULL;
}

static int count_ref(void *ud, const char *root, const char *field)
{
    (*(int *)ud)++;
    check(root != NULL && *root != 0, "foreach root is a non-empty name");
    /* field may be "": ${ref['']} */
    return 0;
}

static int stop_ref(void *ud, const char *root, const char *field)
{
    (*(int *)ud)++;
    return 7;
}

static void run(json_object *tmpl)
{
    ex_tmpl *t = (ex_tmpl *)1;
    weft_error err = {0};
    json_object *a, *b;
    int refs = 0, calls = 0, rc;

    rc = ex_compile(tmpl, &t, &err);
    if (fuzz_verbose()) printf("ex_compile: %d %s\n", rc, rc ? err.msg : "ok");
    if (rc != 0) {
        check(rc == WEFT_EINVAL, "compile fails with WEFT_EINVAL");
        check(err.code == rc && err.msg[0] != 0, "a compile error has a message");
        check(t == NULL, "a failed compile gives no template");
        return;
    }
    check(ex_foreach_ref(t, count_ref, &refs) == 0, "foreach returns 0 when fn does");
    if (refs > 0) {
        int stops = 0;
        check(ex_foreach_ref(t, stop_ref, &stops) == 7, "foreach returns fn's value");
        check(stops == 1, "foreach stops at the first non-zero");
    }
    a = ex_eval(t, lookup, &calls);
    b = ex_eval(t, lookup, &calls);
    if (fuzz_verbose())
        printf("ex_eval: %s\n",
               a ? json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN) : "null");
    check(json_object_equal(a, b), "evaluation is repeatable");
    if (ex_is_const(t)) {
        check(refs == 0, "a constant has no references");
        check(calls == 0, "a constant calls no lookup");
    }
    /* the result serialises (no cycles, valid JSON) */
    if (a) check(json_object_to_json_string(a) != NULL, "the result serialises");
    json_object_put(a);
    json_object_put(b);
    ex_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_object *s, *wrap, *arr, *parsed;
    char *text;

    if (size > FUZZ_MAX_INPUT) return 0;
    if (!docs) {
        docs = json_tokener_parse(DOCS);
        check(docs != NULL, "the lookup documents parse");
    }

    /* the bytes as one string (NUL bytes included) */
    s = json_object_new_string_len((const char *)data, (int)size);
    check(s != NULL, "string created");
    run(s);
    if (!memmem(data, size, "${", 2)) {
        ex_tmpl *t;
        json_object *v;
        check(ex_compile(s, &t, NULL) == 0, "text without ${ compiles");
        check(ex_is_const(t), "text without ${ is constant");
        v = ex_eval(t, lookup, NULL);
        check(json_object_equal(v, s), "a constant evaluates to itself");
        json_object_put(v);
        ex_free(t);
    }

    /* inside containers, next to constants and a known-good expression */
    wrap = json_object_new_object();
    arr = json_object_new_array();
    json_object_array_add(arr, json_object_get(s));
    json_object_array_add(arr, json_object_new_string("x${workflow.input.n}y"));
    json_object_array_add(arr, json_object_new_int(1));
    json_object_object_add(wrap, "s", json_object_get(s));
    json_object_object_add(wrap, "a", arr);
    json_object_object_add(wrap, "c", json_object_new_string("plain"));
    run(wrap);
    json_object_put(wrap);
    json_object_put(s);

    /* the bytes as JSON text: a template of any shape */
    text = fuzz_text(data, size);
    if (wu_parse_json("fuzz", text, &parsed, NULL) == 0) {
        run(parsed);
        json_object_put(parsed);
    }
    /* and as a path for ex_walk */
    (void)ex_walk(docs, text);
    free(text);
    return 0;
}

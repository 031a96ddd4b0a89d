/*
 * Fuzz target for the Lua <-> JSON bridge (lua/json.c): JSON in, through a
 * sandboxed script (sbx_eval, as LAMBDA runs it), JSON out. The bytes are
 * JSON text, then optionally a line "@@" and a Lua function body; without
 * one the body is "return input". Input that is not JSON runs the body with
 * input = nil.
 *
 * Invariants checked (abort() when broken): errors are the sandbox's codes
 * with a message and no result; a result serialises as valid UTF-8 JSON that
 * the store reads back (wu_parse_json_stored) as the same value; with "return input" the result is
 * the input after the conversions docs/lua-dsl.md ("Data in and out") names: null members and
 * trailing null items gone, a byte that is not UTF-8 written \xNN in strings and keys, numbers past
 * int64 as doubles; and it fails only where those rules refuse (two keys that are one in JSON,
 * nesting past 200 levels, an array too sparse, a number that is not finite).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "base/util.h"
#include "lua/sandbox.h"

#define FUZZ_NAME "fuzz_lua_json"
#include "fuzz.h"

#define SEPARATOR "\n@@\n"
#define DEPTH_MAX 200 /* lua/json.c: nesting the bridge takes */

/* s (n bytes) by wu_utf8's rule, as a new string. */
static json_object *utf8_string(const char *s, size_t n)
{
    size_t fixed = wu_utf8_len(s, n);
    char *b = malloc(fixed + 1);
    json_object *j;
    check(b != NULL, "malloc");
    j = json_object_new_string_len(b, (int)wu_utf8_copy(b, fixed + 1, s, n));
    free(b);
    return j;
}

/*
 * What "return input" gives for v (a new reference; NULL for nil), with
 * *refused set when the bridge must refuse it instead.
 */
static json_object *expected(json_object *v, int depth, int *refused)
{
    json_object *out;
    size_t i, n, values = 0, last = 0;
    if (depth > DEPTH_MAX) *refused = 1;
    switch (json_object_get_type(v)) {
    case json_type_null:
        return NULL;
    case json_type_int:
        /* json-c clamps unsigned values above INT64_MAX; Lua has no such integer */
        if (json_object_get_int64(v) == INT64_MAX &&
            json_object_get_uint64(v) > (uint64_t)INT64_MAX)
            return json_object_new_double((double)json_object_get_uint64(v));
        return json_object_new_int64(json_object_get_int64(v));
    case json_type_string:
        return utf8_string(json_object_get_string(v), (size_t)json_object_get_string_len(v));
    case json_type_array:
        out = json_object_new_array();
        n = json_object_array_length(v);
        for (i = 0; i < n; i++) {
            json_object *e = expected(json_object_array_get_idx(v, i), depth + 1, refused);
            if (e) values++, last = i + 1;
            json_object_array_add(out, e);
        }
        /* the holes after the last value are not there in Lua */
        if (last < n) json_object_array_del_idx(out, last, n - last);
        if (last > values * 4 + 64) *refused = 1; /* "array is too sparse" */
        return out;
    case json_type_object:
        out = json_object_new_object();
        json_object_object_foreach(v, key, val)
        {
            json_object *e = expected(val, depth + 1, refused), *k = NULL;
            if (!e) continue;
            k = utf8_string(key, strlen(key));
            if (json_object_object_get_ex(out, json_object_get_string(k), NULL))
                *refused = 1; /* "two keys of the table are this one in JSON" */
            json_object_object_add(out, json_object_get_string(k), e);
            json_object_put(k);
        }
        return out;
    case json_type_double:
        /* 1e999 reads as infinity, and json-c reads NaN: Lua cannot give either back */
        if (!isfinite(json_object_get_double(v))) *refused = 1;
        return json_object_new_double(json_object_get_double(v));
    default:
        return json_object_get(v);
    }
}

/* The result as text: valid UTF-8 JSON, and what the store keeps of it
 * reads back as itself. */
static void check_text(json_object *out)
{
    const char *text = json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN);
    json_object *back = NULL;
    check(fuzz_json_valid(text, strlen(text)), "the result is valid UTF-8 JSON");
    check(wu_parse_json_stored("result", text, &back, NULL) == 0, "the result reads back");
    check(json_object_equal(back, out), "the result reads back as itself");
    json_object_put(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sbx *s;
    json_object *input = NULL, *out = (json_object *)1, *want = NULL;
    weft_error err = {0};
    char *text, *body = "return input", *sep;
    int rc, refused = 0, identity;

    if (size > FUZZ_MAX_INPUT) return 0;
    if (!s) {
        /* small limits: a script that spins or grows costs little */
        sbx_limits lim = {.mem_bytes = 16 << 20,
                          .instructions = 1000000,
                          .time_ms = 2000,
                          .result_bytes = 1 << 20};
        s = sbx_new(&lim, &err);
        check(s != NULL, "sbx_new");
    }
    text = fuzz_text(data, size);
    if ((sep = strstr(text, SEPARATOR)) != NULL) {
        *sep = 0;
        body = sep + strlen(SEPARATOR);
    }
    identity = !strcmp(body, "return input");
    if (wu_parse_json("input", text, &input, NULL) == 0 && identity)
        want = expected(input, 0, &refused);

    rc = sbx_eval(s, "fuzz", body, input, &out, &err);
    if (fuzz_verbose())
        printf("sbx_eval: %d %s\n%s\n", rc, rc ? err.msg : "ok",
               rc ? "" : json_object_to_json_string(out));
    if (rc) {
        check(rc == WEFT_EINVAL || rc == WEFT_ESCRIPT || rc == WEFT_ELIMIT || rc == WEFT_ENOMEM,
              "a script error is WEFT_EINVAL, WEFT_ESCRIPT, WEFT_ELIMIT or WEFT_ENOMEM");
        check(err.code == rc && err.msg[0] != 0, "a script error has a message");
        check(out == NULL, "a failed script gives no result");
        check(!identity || refused, "return input fails only where the rules refuse");
    } else {
        check(!identity || !refused, "return input gives what the rules refuse");
        if (out) check_text(out);
        if (identity) check(json_object_equal(out, want), "return input gives the input back");
    }
    json_object_put(out);
    json_object_put(want);
    json_object_put(input);
    free(text);
    return 0;
}

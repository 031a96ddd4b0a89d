#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <lauxlib.h>

#include "lua/sandbox.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Timing bounds guard against hangs; they are not performance checks (those
 * live in bench/). Generous, so sanitizers and a loaded CI machine pass. */
static double slow = 20.0;

/* Default limits but a clock far away, so instruction limits are what hits
 * even on a slow machine. */
static int setup(void **state)
{
    sbx_limits lim = {0, 0, 600000, 0};
    weft_error err;
    *state = sbx_new(&lim, &err);
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    sbx_free(*state);
    return 0;
}

/* Evaluate and return the compact JSON text of the result ("nil" for nil), or
 * NULL on error with err set. Caller frees. */
static char *run(sbx *s, const char *body, const char *input_json, int *rc, weft_error *err)
{
    json_object *in = input_json ? json_tokener_parse(input_json) : NULL, *out = NULL;
    char *text = NULL;
    if (input_json) assert_non_null(in);
    memset(err, 0, sizeof *err);
    *rc = sbx_eval(s, "calc", body, in, &out, err);
    if (*rc == 0)
        text = strdup(out ? json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN |
                                                                    JSON_C_TO_STRING_NOSLASHESCAPE)
                          : "nil");
    json_object_put(in);
    json_object_put(out);
    return text;
}

static void expect(sbx *s, const char *body, const char *input, const char *want)
{
    weft_error err;
    int rc;
    char *got = run(s, body, input, &rc, &err);
    if (rc != 0) fail_msg("eval of '%s' failed: %s", body, err.msg);
    if (strcmp(got, want)) {
        print_error("eval of '%s': got %s, want %s\n", body, got, want);
        free(got);
        fail();
    }
    free(got);
}

static void expect_err(sbx *s, const char *body, const char *input, int code, const char *msg)
{
    weft_error err;
    int rc;
    char *got = run(s, body, input, &rc, &err);
    if (rc == 0) {
        print_error("eval of '%s' succeeded (%s), wanted: %s\n", body, got, msg);
        free(got);
        fail();
    }
    assert_int_equal(rc, code);
    assert_int_equal(err.code, code);
    if (!strstr(err.msg, msg)) fail_msg("error '%s' does not contain '%s'", err.msg, msg);
}

static void test_types_round_trip(void **state)
{
    sbx *s = *state;
    expect(s, "return input",
           "{\"s\":\"x\",\"i\":3,\"f\":2.5,\"b\":true,\"n\":null,\"a\":[1,2,3],"
           "\"o\":{\"k\":\"v\"},\"ea\":[],\"eo\":{},\"big\":9007199254740993}",
           "{\"a\":[1,2,3],\"b\":true,\"big\":9007199254740993,\"ea\":[],\"eo\":{},\"f\":2.5,"
           "\"i\":3,\"o\":{\"k\":\"v\"},\"s\":\"x\"}");
    expect(s, "return input", "[1,null,3]", "[1,null,3]");
    expect(s, "return input", "\"text\"", "\"text\"");
    expect(s, "return input", NULL, "nil");
    expect(s, "return nil", NULL, "nil");
    expect(s, "return", NULL, "nil");
    expect(s, "return math.type(input.i), math.type(input.f)", "{\"i\":3,\"f\":3.0}",
           "\"integer\"");
    expect(s, "return math.type(input.f)", "{\"i\":3,\"f\":3.0}", "\"float\"");
    /* the arrays marker survives table.insert and keeps its type */
    expect(s, "table.insert(input, 4) return input", "[]", "[4]");
    expect(s, "return #input.a + input.a[2]", "{\"a\":[5,6,7]}", "9");
    expect(s, "return 'a\\0b'", NULL, "\"a\\u0000b\"");
    /* bytes that are not UTF-8 are written as the text \xNN, keys too;
     * UTF-8 stays as it is */
    expect(s, "return 'caf\\xe9'", NULL, "\"caf\\\\xe9\"");
    expect(s, "return {['k\\xff'] = '\\xc3\\xa9\\xed\\xa0\\x80'}", NULL,
           "{\"k\\\\xff\":\"\xc3\xa9\\\\xed\\\\xa0\\\\x80\"}");
}

static void test_numbers(void **state)
{
    sbx *s = *state;
    expect(s, "return {a = 1, b = 1.0, c = 2^53, d = 7 // 2, e = 7 / 2, f = 0.1, g = -0.0}", NULL,
           "{\"a\":1,\"b\":1.0,\"c\":9007199254740992.0,\"d\":3,\"e\":3.5,\"f\":0.1,\"g\":-0.0}");
    expect(s, "return math.maxinteger", NULL, "9223372036854775807");
    expect(s, "return 1e300", NULL, "1e+300");
}

static void test_arrays_and_objects(void **state)
{
    sbx *s = *state;
    expect(s, "return {1, 2, 3}", NULL, "[1,2,3]");
    expect(s, "return {}", NULL, "{}");
    expect(s, "return {[1] = 'a', [3] = 'c'}", NULL, "{\"1\":\"a\",\"3\":\"c\"}");
    expect(s, "return {1, x = 2}", NULL, "{\"1\":1,\"x\":2}");
    expect(s, "return {[0] = 'z', 'a'}", NULL, "{\"0\":\"z\",\"1\":\"a\"}");
    expect(s, "return setmetatable({}, {__jsontype = 'array'})", NULL, "[]");
    expect(s, "return setmetatable({[1] = 1, [3] = 3}, {__jsontype = 'array'})", NULL,
           "[1,null,3]");
    expect(s, "return setmetatable({1, 2}, {__jsontype = 'object'})", NULL, "{\"1\":1,\"2\":2}");
    expect(s, "return setmetatable({b = 1, a = 2, z = 3, c = 4}, {__jsonorder = {'z', 'b', 'q'}})",
           NULL, "{\"z\":3,\"b\":1,\"a\":2,\"c\":4}");
    expect(s, "return {z = {y = {x = {1, {w = true}}}}}", NULL,
           "{\"z\":{\"y\":{\"x\":[1,{\"w\":true}]}}}");
    /* a table used twice (not a cycle) is written twice */
    expect(s, "local t = {1} return {a = t, b = t}", NULL, "{\"a\":[1],\"b\":[1]}");
    /* metamethods are not run: raw contents only */
    expect(s, "return setmetatable({}, {__index = function() return 1 end, __pairs = error})", NULL,
           "{}");
    expect_err(s, "return setmetatable({}, {__jsontype = 'list'})", NULL, WEFT_ESCRIPT,
               "calc: result: __jsontype must be \"array\" or \"object\"");
    expect_err(s, "return setmetatable({x = 1}, {__jsontype = 'array'})", NULL, WEFT_ESCRIPT,
               "result: an array (__jsontype) can only have keys 1, 2, 3");
    expect_err(s, "return setmetatable({1, [1000000] = 2}, {__jsontype = 'array'})", NULL,
               WEFT_ESCRIPT, "result: array is too sparse");
    /* a hole makes it an object, unless marked */
    expect(s, "return {1, nil, 3}", NULL, "{\"1\":1,\"3\":3}");
}

static void test_conversion_errors(void **state)
{
    sbx *s = *state;
    expect_err(s, "return {items = {1, 2, function() end}}", NULL, WEFT_ESCRIPT,
               "calc: result.items[3]: cannot convert a function to JSON");
    expect_err(s, "return print or load or coroutine.create", NULL, WEFT_ESCRIPT,
               "attempt to index a nil value");
    expect_err(s, "local t = {} t.self = t return {a = t}", NULL, WEFT_ESCRIPT,
               "result.a.self: cannot convert a table that contains itself");
    expect_err(s, "return {x = 0/0}", NULL, WEFT_ESCRIPT, "result.x: cannot convert NaN to JSON");
    expect_err(s, "return {['a b'] = {math.huge}}", NULL, WEFT_ESCRIPT,
               "result[\"a b\"][1]: cannot convert an infinite number to JSON");
    expect_err(s, "return {[true] = 1}", NULL, WEFT_ESCRIPT,
               "result: cannot use a boolean as a JSON object key");
    expect_err(s, "return {[1.5] = 1}", NULL, WEFT_ESCRIPT,
               "cannot use a non-integer number as a JSON object key");
    /* a key JSON cannot hold, or two keys one in JSON: an error, never a
     * value silently lost ({a = 1, ['a\0b'] = 2} once gave {"a":2}) */
    expect_err(s, "return {a = 1, ['a\\0b'] = 2}", NULL, WEFT_ESCRIPT,
               "calc: result[\"a\\0b\"]: a JSON object key cannot hold a NUL byte");
    expect_err(s, "return {x = {[1] = 'a', ['1'] = 'b'}}", NULL, WEFT_ESCRIPT,
               "result.x[\"1\"]: two keys of the table are this one in JSON");
    expect_err(s, "local t = {} for i = 1, 250 do t = {t} end return t", NULL, WEFT_ESCRIPT,
               "nested deeper than 200 levels");
    /* 199 levels are fine */
    {
        weft_error err;
        int rc;
        char *got = run(s, "local t = {} for i = 1, 198 do t = {t} end return t", NULL, &rc, &err);
        assert_int_equal(rc, 0);
        free(got);
    }
}

static void test_to_json_direct(void **state)
{
    sbx *s = *state;
    lua_State *L = sbx_state(s);
    json_object *out = NULL;
    weft_error err;
    int top = lua_gettop(L);
    lua_newtable(L);
    lua_pushcfunction(L, lua_gettop);
    lua_setfield(L, -2, "fn");
    assert_int_equal(sbx_to_json(L, -1, &out, &err), WEFT_EINVAL);
    assert_string_equal(err.msg, "value.fn: cannot convert a function to JSON");
    assert_int_equal(sbx_to_json_path(L, -1, "cfg", &out, &err), WEFT_EINVAL);
    assert_string_equal(err.msg, "cfg.fn: cannot convert a function to JSON");
    assert_null(out);
    lua_pushinteger(L, 5);
    assert_int_equal(sbx_to_json(L, -1, &out, &err), 0);
    assert_int_equal(json_object_get_int(out), 5);
    json_object_put(out);
    lua_settop(L, top);
}

static void test_input_global(void **state)
{
    sbx *s = *state;
    expect(s, "return input.x * 2", "{\"x\":21}", "42");
    expect(s, "return _ENV.input.x + _G.input.x", "{\"x\":1}", "2");
    expect(s, "local function f() return input.x end return f()", "{\"x\":7}", "7");
    expect(s, "return input == nil", NULL, "true");
}

static void test_isolation(void **state)
{
    sbx *s = *state;
    expect(s,
           "leaked = 1; string.upper = nil; table.insert = nil; math.pi = 3; input.x = 9 "
           "_G.other = 2 return 1",
           "{\"x\":1}", "1");
    expect(s,
           "return leaked == nil and other == nil and string.upper ~= nil and "
           "table.insert ~= nil and math.pi > 3.14 and ('a'):upper() == 'A' and input.x == 1",
           "{\"x\":1}", "true");
    /* changing a string method through the copy does not reach the shared one */
    expect(s, "string.rep = function() return 'pwned' end return ('x'):rep(2)", NULL, "\"xx\"");
    expect(s, "return ('x'):rep(2)", NULL, "\"xx\"");
    /* input arrays share a protected metatable */
    expect(s, "return getmetatable(input)", "[1]", "false");
    expect_err(s, "setmetatable(input, {})", "[1]", WEFT_ESCRIPT,
               "cannot change a protected metatable");
}

/*
 * Library tables and the base functions are shared, frozen tables behind
 * per-eval proxies: every way of writing to them, or looking at them raw,
 * must act on this eval's copy only.
 */
static void test_library_proxies(void **state)
{
    sbx *s = *state;
    /* rawset on a library table or _G */
    expect(s,
           "rawset(string, 'upper', nil) rawset(string, 'evil', 1) rawset(math, 'pi', 3) "
           "rawset(_G, 'type', nil) "
           "return string.upper == nil and string.evil == 1 and math.pi == 3 and type == nil and "
           "rawget(string, 'evil') == 1 and rawget(table, 'insert') ~= nil",
           NULL, "true");
    expect(s,
           "return string.upper('a') == 'A' and string.evil == nil and math.pi > 3.14 and "
           "type(1) == 'number' and rawget(string, 'evil') == nil and "
           "rawget(string, 'upper') == string.upper and rawget(_G, 'pairs') == pairs",
           NULL, "true");
    /* a write to a name the library has takes effect at once, in this eval only */
    expect(s, "string.upper = nil utf8.char = 1 return string.upper == nil and utf8.char == 1",
           NULL, "true");
    expect(s, "string.helper = function(x) return x .. '!' end return string.helper('a')", NULL,
           "\"a!\"");
    expect(s, "return string.upper ~= nil and utf8.char(72) == 'H' and string.helper == nil", NULL,
           "true");
    /* pairs / next over a library see its fields (but not the dropped ones) */
    expect(s,
           "local a, b, c = 0, 0, 0 for _ in pairs(math) do a = a + 1 end "
           "for _ in next, math do b = b + 1 end "
           "for k, v in pairs(string) do c = c + 1 assert(string[k] == v) end "
           "return a == b and a > 20 and c > 10 and next(utf8) ~= nil and math.randomseed == nil",
           NULL, "true");
    expect(s, "local k = next(table, 'insert') return k == nil or type(table[k]) == 'function'",
           NULL, "true");
    expect(s,
           "for k in pairs(string) do if k == 'dump' then return false end end "
           "for k in pairs(math) do if k == 'randomseed' then return false end end return true",
           NULL, "true");
    expect(s,
           "string.mine = 1 local seen, n = false, 0 "
           "for k in pairs(string) do n = n + 1 if k == 'mine' then seen = true end end "
           "string.upper = nil local m = 0 for k in pairs(string) do m = m + 1 end "
           "return seen and m == n - 1 and string.format ~= nil",
           NULL, "true");
    expect(
        s,
        "local names = {} for k in pairs(_G) do names[k] = true end "
        "return names.string and names.pairs and names.input and names._G and names.setmetatable "
        "and not names.print",
        "{}", "true");
    /* setmetatable / getmetatable on a library table or _G */
    expect(s, "return getmetatable(string) == nil and getmetatable(_G) == nil", NULL, "true");
    expect(s,
           "setmetatable(string, {__index = function() return 'hooked' end}) "
           "setmetatable(_G, {__index = function() return 42 end}) "
           "return string.nothing .. undefined .. string.upper('a')",
           NULL, "\"hooked42A\"");
    expect(s,
           "return string.nothing == nil and undefined == nil and getmetatable(string) == nil and "
           "getmetatable(_G) == nil",
           NULL, "true");
    expect_err(s, "setmetatable(table, {__newindex = function() error('nope') end}) table.x = 1",
               NULL, WEFT_ESCRIPT, "nope");
    expect(s, "table.x = 1 return table.x", NULL, "1");
    /* writes to _G */
    expect(s, "_G.x = 1 pairs = nil _G.next = nil return pairs == nil and next == nil and x == 1",
           NULL, "true");
    expect(s, "return x == nil and pairs ~= nil and next ~= nil and _G.x == nil", NULL, "true");
    /* the library tables convert (and fail) as before */
    expect_err(s, "return string", NULL, WEFT_ESCRIPT, "cannot convert a function to JSON");
    /* which value is met first depends on the table's hash order (seeded
     * per Lua state): a function, or math.huge */
    expect_err(s, "return _G", NULL, WEFT_ESCRIPT, "cannot convert a");
    expect_err(s, "error(math)", NULL, WEFT_ESCRIPT, "cannot convert a");
    /* each eval gets its own tables; methods on strings are unaffected */
    expect(s, "_G.keep = string return ('x'):upper()", NULL, "\"X\"");
    expect(s, "return keep == nil", NULL, "true");
}

/*
 * Evals share an env (and a coroutine) while no eval changes it: whatever a
 * script does to the env's own names, to a library, or however it ends, the
 * next eval must see a new env.
 */
static void test_env_reuse(void **state)
{
    sbx *s = *state;
    sbx_limits lim = {0, 100000, 600000, 0};
    weft_error err;
    sbx *small;
    int i;
    for (i = 0; i < 3; i++)
        expect(s, "return input.x + 1", "{\"x\":1}", "2");
    /* assignments to the names the env holds itself */
    expect(s, "string = math table = nil _G = 1 utf8 = {} return 1", NULL, "1");
    expect(s,
           "return string.upper('a') == 'A' and table.insert ~= nil and _G.string == string and "
           "math.pi > 3 and utf8.char(72) == 'H' and getmetatable(utf8) == nil",
           NULL, "true");
    expect(s, "string, math = math, string return 1", NULL, "1");
    expect(s, "return string.upper ~= nil and math.floor ~= nil", NULL, "true");
    expect(s, "input = nil return 1", "{\"x\":1}", "1");
    expect(s, "return input.x + _G.input.x", "{\"x\":3}", "6");
    expect(s, "input = nil other = 2 return 1", "{\"x\":1}", "1");
    expect(s, "return other == nil and input.x == 4", "{\"x\":4}", "true");
    /* writes to a library or a new name */
    expect(s, "math.extra = 1 return 1", NULL, "1");
    expect(s, "return math.extra == nil", NULL, "true");
    expect(s, "rawset(_G, 'y', 1) return 1", NULL, "1");
    expect(s, "return y == nil and rawget(_G, 'pairs') == pairs", NULL, "true");
    /* a script that fails after changing the env */
    expect_err(s, "string = nil x = 1 error('boom')", NULL, WEFT_ESCRIPT, "boom");
    expect(s, "return string.upper('b') == 'B' and x == nil", NULL, "true");
    expect_err(s, "return (", NULL, WEFT_EINVAL, "calc:1:");
    expect(s, "return input.x", "{\"x\":5}", "5");

    /* a script stopped by a limit leaves its coroutine and env behind */
    small = sbx_new(&lim, &err);
    assert_non_null(small);
    expect_err(small, "table = nil while true do end", NULL, WEFT_ELIMIT, "instruction limit");
    expect(small, "return table.insert ~= nil and input.a", "{\"a\":1}", "1");
    expect_err(small, "local t = {} for i = 1, 1e9 do t[i] = i end", NULL, WEFT_ELIMIT, "limit");
    expect(small, "return 1 + 1", NULL, "2");
    sbx_free(small);
}

static void test_forbidden_globals(void **state)
{
    sbx *s = *state;
    static const char *const names[] = {
        "io",
        "os",
        "require",
        "load",
        "loadstring",
        "dofile",
        "loadfile",
        "debug",
        "collectgarbage",
        "package",
        "coroutine",
        "print",
        "string.dump",
        "math.randomseed",
        "utf8.dump",
        "unpack",
        "module",
        "setfenv",
        "getfenv",
        "warn",
        "newproxy",
        "gcinfo",
    };
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        char body[128];
        snprintf(body, sizeof body, "return %s == nil", names[i]);
        expect(s, body, NULL, "true");
    }
    expect(s,
           "return ('').dump == nil and string.format ~= nil and table.unpack ~= nil and "
           "utf8.char(72) == 'H' and type(math.random()) == 'number' and "
           "select('#', 1, 2) == 2 and _VERSION ~= nil",
           NULL, "true");
    /* the real string table is out of reach */
    expect(s, "return getmetatable('')", NULL, "false");
    expect_err(s, "return getmetatable('').__index", NULL, WEFT_ESCRIPT, "attempt to index");
    expect_err(s, "setmetatable({}, {__gc = function() while true do end end})", NULL, WEFT_ESCRIPT,
               "__gc metamethods are not allowed");
    expect_err(s, "return string.dump(function() end)", NULL, WEFT_ESCRIPT,
               "attempt to call a nil value (field 'dump')");
}

static void test_infinite_loop(void **state)
{
    sbx *s = *state;
    double t0 = now_s();
    expect_err(s, "while true do end", NULL, WEFT_ELIMIT, "instruction limit (10000000) exceeded");
    assert_true(now_s() - t0 < 1.0 * slow);
    expect_err(s, "while true do pcall(function() while true do end end) end", NULL, WEFT_ELIMIT,
               "instruction limit (10000000) exceeded");
    expect_err(s, "local n = 0 while true do local ok = pcall(error, 'x') n = n + 1 end", NULL,
               WEFT_ELIMIT, "instruction limit");
    /* inside a C call nothing can yield: the hook falls back to errors */
    expect_err(s,
               "table.sort({3, 2, 1}, function(a, b) while true do "
               "pcall(function() while true do end end) end end)",
               NULL, WEFT_ELIMIT, "instruction limit");
    expect_err(s,
               "while true do pcall(string.gsub, 'aaa', 'a', function() "
               "while true do pcall(error) end end) end",
               NULL, WEFT_ELIMIT, "instruction limit");
    expect_err(s, "xpcall(function() while true do end end, function() while true do end end)",
               NULL, WEFT_ELIMIT, "instruction limit");
    expect_err(s, "local function f() return f() end return f()", NULL, WEFT_ELIMIT,
               "instruction limit");
    /* C loops that neither limit would stop are refused up front */
    expect(s, "return string.rep('', 1e18) .. (''):rep(1e18, '')", NULL, "\"\"");
    expect(s, "return ('ab'):rep(3, ',')", NULL, "\"ab,ab,ab\"");
    expect_err(s, "table.move({}, 1, math.maxinteger, 2)", NULL, WEFT_ESCRIPT,
               "too many elements to move");
    expect_err(s,
               "local t = setmetatable({}, {__len = function() return 1e15 end}) "
               "table.insert(t, 1, 'x')",
               NULL, WEFT_ESCRIPT, "table too long");
    expect_err(s,
               "local t = setmetatable({}, {__len = function() return 1e15 end}) "
               "table.remove(t, 1)",
               NULL, WEFT_ESCRIPT, "table too long");
    expect(s,
           "local t = {1, 2} table.insert(t, 3) table.insert(t, 1, 0) table.remove(t) "
           "return table.move(t, 1, 3, 2, {})",
           NULL, "{\"2\":0,\"3\":1,\"4\":2}");
    /* the state is fine afterwards */
    expect(s, "return 1 + 1", NULL, "2");
}

/*
 * A message handler runs inside the error it handles, and an error raised by
 * the count hook runs it with hooks off: none of these may outlive the
 * limits. alarm() turns a hang into a failure.
 */
static void test_handler_escapes(void **state)
{
    static const char *const scripts[] = {
        "xpcall(function() error('x') end, function() while true do end end)",
        "xpcall(error, function() while true do end end, 'x')",
        "return xpcall(error, function(e) local n = 0 while true do n = n + 1 end end)",
        "xpcall(function() table.sort({3, 2, 1}, function(a, b) while true do end end) end, "
        "function() while true do end end)",
        "table.sort({3, 2, 1}, function(a, b) xpcall(error, function() while true do end end) "
        "return a < b end)",
        "xpcall(error, function() while true do pcall(error) end end)",
        "xpcall(error, function() local function f() return f() end return f() end)",
        "xpcall(error, function() local s = 'x' while true do s = s .. s end end)",
        "while true do xpcall(error, function() while true do end end) end",
        "local t = setmetatable({}, {__index = function() while true do end end}) "
        "xpcall(function() return t.x end, function() return t.y end)",
        "xpcall(function() return tostring(setmetatable({}, {__tostring = function() "
        "while true do end end})) end, function() while true do end end)",
        "pcall(function() local x <close> = setmetatable({}, {__close = function() "
        "while true do end end}) error('x') end)",
        "xpcall(string.gsub, function() while true do end end, 'aaa', 'a', "
        "function() while true do end end)",
        NULL,
    };
    sbx *s = *state;
    const char *const *p;
    alarm(120);
    for (p = scripts; *p; p++) {
        double t0 = now_s();
        weft_error err;
        int rc;
        char *got = run(s, *p, NULL, &rc, &err);
        if (rc != WEFT_ELIMIT)
            fail_msg("'%s': rc %d (%s), want a limit", *p, rc, got ? got : err.msg);
        assert_true(now_s() - t0 < 1.0 * slow);
        expect(s, "return 1 + 1", NULL, "2");
    }
    /* a pattern that backtracks for hours inside one C call is metered too */
    expect_err(s, "return string.rep('a', 3000):find(string.rep('.-', 6) .. 'b')", NULL,
               WEFT_ELIMIT, "instruction limit");
    expect_err(s,
               "while true do pcall(string.match, string.rep('a', 3000), "
               "string.rep('a*', 8) .. 'b') end",
               NULL, WEFT_ELIMIT, "instruction limit");
    expect_err(s,
               "table.sort({1, 2, 3}, function(a, b) pcall(string.gsub, string.rep('a', 3000), "
               "string.rep('.-', 6) .. 'b', '') return a < b end)",
               NULL, WEFT_ELIMIT, "instruction limit");
    expect(s, "return (('k=v; a=b'):gsub('(%w+)=(%w+)', '%2=%1'))", NULL, "\"v=k; b=a\"");
    /* xpcall still works as a script expects */
    expect(s, "return {xpcall(error, function(e) return 'h:' .. e end, 'x')}", NULL,
           "[false,\"h:x\"]");
    expect(s, "return {xpcall(function(a, b) return a + b end, error, 1, 2)}", NULL, "[true,3]");
    expect(s, "return {xpcall(error, function(e) error('again') end, 'x')}", NULL,
           "[false,\"calc:1: again\"]");
    expect_err(s, "return xpcall(error, 42)", NULL, WEFT_ESCRIPT, "bad argument #2 to 'xpcall'");
    alarm(0);
}

/*
 * table.sort compares in C, where no hook counts: long equal strings (each
 * comparison costs their length) or a C comparator once ran 34 s and more
 * past a 5 s limit without one instruction being counted.
 */
static void test_sort_metered(void **state)
{
    sbx *s = *state;
    double t0 = now_s();
    alarm(120);
    expect_err(s,
               "local s = ('a'):rep(8e6) local t = {} for i = 1, 3000 do t[i] = s end "
               "table.sort(t) return #t",
               NULL, WEFT_ELIMIT, "instruction limit");
    assert_true(now_s() - t0 < 1.0 * slow);
    t0 = now_s();
    expect_err(s,
               "local t = {} for i = 1, 1e5 do t[i] = i end local f = table.sort "
               "while true do f(t, rawequal) end",
               NULL, WEFT_ELIMIT, "instruction limit");
    assert_true(now_s() - t0 < 1.0 * slow);
    /* sorting works as before */
    expect(s, "local t = {3, 1, 2} table.sort(t) return t", NULL, "[1,2,3]");
    expect(s, "local t = {'b', 'c', 'a'} table.sort(t, function(a, b) return a > b end) return t",
           NULL, "[\"c\",\"b\",\"a\"]");
    expect(s, "local t = {3, 1, 2} table.sort(t, nil) return t", NULL, "[1,2,3]");
    expect_err(s, "table.sort({1, 'x'})", NULL, WEFT_ESCRIPT, "attempt to compare");
    expect_err(s, "table.sort({1, 2}, 42)", NULL, WEFT_ESCRIPT, "bad argument #2 to 'sort'");
    expect_err(s, "table.sort({1, 2, 3, 4, 5}, function() return true end)", NULL, WEFT_ESCRIPT,
               "invalid order function");
    alarm(0);
}

/* utf8.len and utf8.offset scan a whole string in what counts as one
 * instruction: 25 s against a 5 s limit on a 15 MB string. */
static void test_utf8_metered(void **state)
{
    sbx *s = *state;
    double t0 = now_s();
    alarm(120);
    expect_err(s, "local s = ('a'):rep(1.5e7) local f = utf8.len while true do f(s) end", NULL,
               WEFT_ELIMIT, "instruction limit");
    expect_err(
        s, "local s = 'a' .. ('\\x80'):rep(1.5e7) local f = utf8.offset while true do f(s, 1) end",
        NULL, WEFT_ELIMIT, "instruction limit");
    expect_err(
        s,
        "local s = 'a' .. ('\\x80'):rep(1.5e7) local f = utf8.offset while true do f(s, 0, -1) end",
        NULL, WEFT_ELIMIT, "instruction limit");
    assert_true(now_s() - t0 < 1.0 * slow);
    alarm(0);
    /* they work as before */
    expect(s,
           "return {utf8.len('h\\u{e9}llo'), utf8.len('abc', 2), utf8.len('abc', -1), "
           "utf8.len('abc', 4), select(2, utf8.len('a\\xffb'))}",
           NULL, "[5,2,1,0,2]");
    expect(
        s,
        "return {utf8.offset('h\\u{e9}llo', 3), utf8.offset('abc', -1), utf8.offset('abc', 0, 2), "
        "utf8.offset('abc', 5)}",
        NULL, "[4,3,2]");
    expect_err(s, "return utf8.len('abc', 5)", NULL, WEFT_ESCRIPT,
               "bad argument #2 to 'len' (initial position out of bounds)");
    expect_err(s, "return utf8.len('abc', 1, 4)", NULL, WEFT_ESCRIPT,
               "bad argument #3 to 'len' (final position out of bounds)");
    expect_err(s, "return utf8.offset('abc', 1, 5)", NULL, WEFT_ESCRIPT,
               "bad argument #3 to 'offset' (position out of bounds)");
    expect_err(s, "return utf8.offset('\\u{e9}', 1, 2)", NULL, WEFT_ESCRIPT,
               "initial position is a continuation byte");
}

/* C loops over every byte or element in one call: string.format('%q') ran
 * past 60 s, table.concat twice the limit. */
static void test_c_loops_metered(void **state)
{
    sbx *s = *state;
    double t0 = now_s();
    alarm(120);
    expect_err(s, "local s = ('\\0'):rep(4e6) local f = string.format while true do f('%q', s) end",
               NULL, WEFT_ELIMIT, "instruction limit");
    expect_err(s,
               "local t = {} for i = 1, 1e6 do t[i] = '' end local f = table.concat "
               "while true do f(t) end",
               NULL, WEFT_ELIMIT, "instruction limit");
    /* each element fetched through a chain of 1,990 __index tables */
    {
        static const char *const calls[] = {
            "return table.concat(t, '', 1, 2e5)",
            "return select('#', table.unpack(t, 1, 2e5))",
            "return #table.move(t, 1, 2e5, 1, {})",
            "return #table.move(last, 1, 2e5, 1, t)",
            "for i = 1, 1e4 do table.insert(last, 1, 'x') end",
            "for i = 1, 1e4 do table.remove(last, 1) end",
            NULL,
        };
        const char *const *c;
        for (c = calls; *c; c++) {
            char body[512];
            snprintf(
                body, sizeof body,
                "local last = {} for i = 1, 2e5 do last[i] = '' end local t = last "
                "for i = 1, 1990 do t = setmetatable({}, {__index = t, __newindex = t}) end %s",
                *c);
            expect_err(s, body, NULL, WEFT_ELIMIT, "instruction limit");
        }
    }
    assert_true(now_s() - t0 < 1.0 * slow);
    alarm(0);
    /* appending and popping cost no shift */
    expect(s,
           "local t = {} for i = 1, 1e5 do table.insert(t, i) end "
           "for i = 1, 5e4 do table.remove(t) end return #t",
           NULL, "50000");
    expect(s, "return {table.unpack({1, 2, 3}, 2)}", NULL, "[2,3]");
    expect_err(s, "return table.unpack({}, 1, 1e7)", NULL, WEFT_ESCRIPT,
               "too many results to unpack");
    /* they work as before, and their errors name them */
    expect(s, "return string.format('%q %s %%q %d', 'a\\0b', 'x', 3)", NULL,
           "\"\\\"a\\\\0b\\\" x %q 3\"");
    expect(s,
           "return {table.concat({1, 2, 3}), table.concat({'a', 'b', 'c'}, ',', 2), "
           "table.concat({}, ','), table.concat({'a'}, ',', 3, 2)}",
           NULL, "[\"123\",\"b,c\",\"\",\"\"]");
    expect_err(s, "return string.format('%d', 'x')", NULL, WEFT_ESCRIPT,
               "bad argument #2 to 'format'");
    expect_err(s, "return table.concat({{}})", NULL, WEFT_ESCRIPT,
               "invalid value (table) at index 1 in table for 'concat'");
    expect_err(s, "return table.concat({}, '', 1, 'x')", NULL, WEFT_ESCRIPT,
               "bad argument #4 to 'concat'");
}

static void test_instruction_limit_custom(void **state)
{
    sbx_limits lim = {0, 5000, 0, 0};
    weft_error err;
    sbx *s = sbx_new(&lim, &err);
    (void)state;
    assert_non_null(s);
    expect_err(s, "for i = 1, 100000 do end", NULL, WEFT_ELIMIT,
               "instruction limit (5000) exceeded");
    expect(s, "local n = 0 for i = 1, 100 do n = n + i end return n", NULL, "5050");
    sbx_free(s);
}

static void test_time_limit(void **state)
{
    sbx_limits lim = {0, 0, 200, 0};
    weft_error err;
    sbx *s = sbx_new(&lim, &err);
    double t0;
    (void)state;
    assert_non_null(s);
    /* few instructions, much work in C: only the clock stops it */
    t0 = now_s();
    expect_err(s, "local s = ('x'):rep(1 << 20) while true do local a = s:find('y') end", NULL,
               WEFT_ELIMIT, "time limit (200 ms) exceeded");
    assert_true(now_s() - t0 < 3.0 * slow);
    expect(s, "return 1", NULL, "1");
    sbx_free(s);
}

static size_t rss_bytes(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
    return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}

static void test_memory_bombs(void **state)
{
    sbx_limits lim = {8u << 20, 0, 0, 0};
    weft_error err;
    sbx *s = sbx_new(&lim, &err);
    size_t base, rss0;
    int i;
    (void)state;
    assert_non_null(s);
    expect(s, "return 1", NULL, "1");
    base = sbx_mem_used(s);
    rss0 = rss_bytes();
    for (i = 0; i < 4; i++) {
        expect_err(s, "local s = 'x' while true do s = s .. s end", NULL, WEFT_ELIMIT,
                   "memory limit (8388608 bytes) exceeded");
        expect_err(s, "local t = {} local i = 0 while true do i = i + 1 t[i] = {i} end", NULL,
                   WEFT_ELIMIT, "memory limit (8388608 bytes) exceeded");
        expect_err(s, "return string.rep('x', 1 << 30)", NULL, WEFT_ELIMIT, "memory limit");
        expect_err(s, "return ('x'):rep(100, 'y'):rep(1000000)", NULL, WEFT_ELIMIT, "memory limit");
        expect_err(s,
                   "local t = {} for i = 1, 1e6 do t[#t + 1] = ('x'):rep(64) .. i end "
                   "return table.concat(t)",
                   NULL, WEFT_ELIMIT, "memory limit");
        /* catching the memory error does not help */
        expect_err(s, "local ok = pcall(string.rep, 'x', 1 << 30) return ok", NULL, WEFT_ELIMIT,
                   "memory limit");
        expect_err(s,
                   "while true do pcall(function() local s = 'x' while true do s = s .. s end "
                   "end) end",
                   NULL, WEFT_ELIMIT, "memory limit");
        /* reusable afterwards, and the garbage is gone */
        expect(s, "return #string.rep('ab', 1000)", NULL, "2000");
        assert_true(sbx_mem_used(s) < base + (1u << 20));
    }
    /* the allocator refused, so the process never held more than a few caps */
    assert_true(rss_bytes() < rss0 + (size_t)512 * 1024 * 1024);
    sbx_free(s);
}

/* A result is counted while it is converted: shared references cannot
 * multiply it past the limit (1,000 references to 1 MiB once took 2 GB). */
static void test_result_limit(void **state)
{
    sbx_limits lim = {0, 0, 0, 1000};
    weft_error err;
    sbx *s = sbx_new(&lim, &err), *d = *state;
    size_t rss0 = rss_bytes();
    assert_non_null(s);
    expect_err(
        d, "local s = ('x'):rep(1 << 20) local t = {} for i = 1, 1000 do t[i] = s end return t",
        NULL, WEFT_ELIMIT, "calc: result[16]: over the result size limit (16777216 bytes as JSON)");
    expect_err(d, "local t = {1} for i = 1, 60 do t = {t, t} end return t", NULL, WEFT_ELIMIT,
               "over the result size limit (16777216 bytes");
    expect_err(d, "local t = {k = 1} for i = 1, 60 do t = {a = t, b = t} end error(t)", NULL,
               WEFT_ESCRIPT, "over the result size limit");
    /* one __jsonorder of 400,000 entries shared by 100,000 tables: 4e10 look-ups */
    {
        double t0 = now_s();
        int rc;
        char *got;
        alarm(120);
        expect_err(d,
                   "local o = {} for i = 1, 4e5 do o[i] = i end local mt = {__jsonorder = o} "
                   "local r = {} for i = 1, 1e5 do r[i] = setmetatable({z = 1}, mt) end return r",
                   NULL, WEFT_ELIMIT, "over the result size limit");
        expect_err(d,
                   "local o = {} for i = 1, 4e5 do o[i] = i end local mt = {__jsonorder = o} "
                   "local r = {} for i = 1, 1e5 do r[i] = setmetatable({z = 1}, mt) end error(r)",
                   NULL, WEFT_ESCRIPT, "over the result size limit");
        got = run(d,
                  "local o = {} for i = 1, 4e5 do o[i] = i end local mt = {__jsonorder = o} "
                  "local r = {} for i = 1, 1e5 do r[i] = setmetatable({}, mt) end return r",
                  NULL, &rc, &err);
        assert_int_equal(rc, 0);
        free(got);
        assert_true(now_s() - t0 < 1.0 * slow);
        alarm(0);
        expect(d, "return setmetatable({b = 1, a = 2, c = 3}, {__jsonorder = {'c', 'x', 'b'}})",
               NULL, "{\"c\":3,\"b\":1,\"a\":2}");
    }
    print_message("rss grew %zu MiB\n", (rss_bytes() - rss0) >> 20);
    assert_true(rss_bytes() < rss0 + (size_t)768 * 1024 * 1024);
    expect(d, "return #('x'):rep(1 << 20)", NULL, "1048576");
    expect_err(s, "return ('x'):rep(999)", NULL, WEFT_ELIMIT,
               "result: over the result size limit (1000 bytes");
    {
        char want[903];
        want[0] = '"';
        memset(want + 1, 'x', 900);
        want[901] = '"';
        want[902] = 0;
        expect(s, "return ('x'):rep(900)", NULL, want);
    }
    /* counted as JSON text: a control character takes six bytes (\u0001) */
    expect_err(s, "return ('\\1'):rep(900)", NULL, WEFT_ELIMIT, "over the result size limit");
    expect_err(s, "return {[('\\1'):rep(900)] = 1}", NULL, WEFT_ELIMIT,
               "over the result size limit");
    {
        char want[160 * 6 + 3] = "\"";
        int i;
        for (i = 0; i < 150; i++)
            strcat(want, "\\u0001");
        strcat(want, "\"");
        expect(s, "return ('\\1'):rep(150)", NULL, want);
    }
    expect_err(s, "local t = {} for i = 1, 200 do t[i] = i end return t", NULL, WEFT_ELIMIT,
               "over the result size limit");
    expect(s, "local t = {} for i = 1, 50 do t[i] = i end return #t", NULL, "50");
    sbx_free(s);
}

static void test_runtime_errors(void **state)
{
    sbx *s = *state;
    expect_err(s, "error('boom')", NULL, WEFT_ESCRIPT, "calc:1: boom");
    expect_err(s, "local x = 1\nlocal y = nil\nreturn y.z", NULL, WEFT_ESCRIPT,
               "calc:3: attempt to index a nil value (local 'y')");
    expect_err(s, "\n\nerror('deep', 1)", NULL, WEFT_ESCRIPT, "calc:3: deep");
    expect_err(s, "error('plain', 0)", NULL, WEFT_ESCRIPT, "plain");
    expect_err(s, "error({code = 42, message = 'bad'})", NULL, WEFT_ESCRIPT,
               "calc: error {\"code\":42,\"message\":\"bad\"}");
    expect_err(s, "error(setmetatable({}, {__tostring = function() while true do end end}))", NULL,
               WEFT_ESCRIPT, "calc: error {}");
    expect_err(s, "error({f = print or error})", NULL, WEFT_ESCRIPT,
               "calc: error object is a table (error.f: cannot convert a function to JSON)");
    expect_err(s, "error()", NULL, WEFT_ESCRIPT, "calc: error (nil)");
    expect_err(s, "error(42)", NULL, WEFT_ESCRIPT, "calc: error 42");
    expect_err(s, "error(false)", NULL, WEFT_ESCRIPT, "calc: error (false)");
    expect_err(s, "error(error)", NULL, WEFT_ESCRIPT, "calc: error object is a function value");
    expect_err(s, "return input.a.b", "{}", WEFT_ESCRIPT, "calc:1: attempt to index a nil value");
}

static void test_syntax_errors(void **state)
{
    sbx *s = *state;
    expect_err(s, "local x = 1\nx = = 2\nreturn x", NULL, WEFT_EINVAL,
               "calc:2: unexpected symbol near '='");
    expect_err(s, "return 1 +", NULL, WEFT_EINVAL, "calc:1: unexpected symbol near <eof>");
    expect_err(s, "if true then\n\nreturn 1", NULL, WEFT_EINVAL, "calc:3: 'end' expected");
    /* a body cannot close the wrapper and run code outside the limits */
    expect_err(s, "end while true do end return function()", NULL, WEFT_EINVAL,
               "calc:1: <eof> expected near 'end'");
    expect_err(s, "\x1bLua", NULL, WEFT_EINVAL, "calc:1:");
    /* the state still works, and a fixed script is compiled anew */
    expect(s, "local x = 1\nx = 2\nreturn x", NULL, "2");
}

static void test_no_coroutines(void **state)
{
    sbx *s = *state;
    expect_err(s, "return coroutine.yield()", NULL, WEFT_ESCRIPT, "attempt to index a nil value");
}

static void test_cache(void **state)
{
    sbx *s = *state;
    int i;
    for (i = 0; i < 1200; i++) {
        char body[64], want[32];
        snprintf(body, sizeof body, "return input.n + %d", i);
        snprintf(want, sizeof want, "%d", i + 1);
        expect(s, body, "{\"n\":1}", want);
    }
    expect(s, "return input.n + 0", "{\"n\":5}", "5");
    expect(s, "return input.n + 0", "{\"n\":6}", "6");
    /* the same text under another chunk name reports that name */
    {
        json_object *out = NULL;
        weft_error err;
        assert_int_equal(sbx_eval(s, "other", "error('x')", NULL, &out, &err), WEFT_ESCRIPT);
        assert_string_equal(err.msg, "other:1: x");
        assert_int_equal(sbx_eval(s, "calc", "error('x')", NULL, &out, &err), WEFT_ESCRIPT);
        assert_string_equal(err.msg, "calc:1: x");
    }
}

static void test_fast(void **state)
{
    sbx *s = *state;
    json_object *in = json_tokener_parse("{\"a\":1}"), *out = NULL;
    weft_error err;
    double t0 = now_s();
    int i;
    for (i = 0; i < 20000; i++) {
        assert_int_equal(sbx_eval(s, "fast", "return input.a + 1", in, &out, &err), 0);
        json_object_put(out);
    }
    /* a few microseconds each without sanitizers; generous for ASan */
    assert_true(now_s() - t0 < 5.0 * slow);
    json_object_put(in);
}

static void test_pcall_and_check(void **state)
{
    sbx *s = *state;
    lua_State *L = sbx_state(s);
    weft_error err;
    int top = lua_gettop(L);
    assert_int_equal(luaL_loadstring(L, "local a, b = ... return a + b, 'x', 'y'"), LUA_OK);
    lua_pushinteger(L, 2);
    lua_pushinteger(L, 3);
    assert_int_equal(sbx_pcall(s, 2, 2, &err), 0);
    assert_int_equal(lua_gettop(L), top + 2);
    assert_int_equal(lua_tointeger(L, -2), 5);
    assert_string_equal(lua_tostring(L, -1), "x");
    lua_settop(L, top);
    assert_int_equal(luaL_loadstring(L, "while true do end"), LUA_OK);
    assert_int_equal(sbx_pcall(s, 0, 1, &err), WEFT_ELIMIT);
    assert_int_equal(lua_gettop(L), top);
    assert_int_equal(luaL_loadbuffer(L, "error('no', 0)", 14, "=x"), LUA_OK);
    assert_int_equal(sbx_pcall(s, 0, 1, &err), WEFT_ESCRIPT);
    assert_string_equal(err.msg, "no");
    assert_int_equal(lua_gettop(L), top);

    assert_int_equal(sbx_check_syntax(L, "[string]", "return input > 1", &err), 0);
    assert_int_equal(sbx_check_syntax(L, "[string]", "return >", &err), WEFT_EINVAL);
    assert_string_equal(err.msg, "[string]:1: unexpected symbol near '>'");
    assert_int_equal(lua_gettop(L), top);
}

static void test_env_push(void **state)
{
    sbx *s = *state;
    lua_State *L = sbx_state(s);
    int top = lua_gettop(L);
    sbx_push_env(L);
    sbx_push_env(L);
    assert_int_equal(lua_gettop(L), top + 2);
    assert_false(lua_rawequal(L, -1, -2));
    lua_getfield(L, -1, "string");
    lua_getfield(L, -3, "string");
    assert_false(lua_rawequal(L, -1, -2));
    assert_int_equal(lua_getfield(L, -1, "format"), LUA_TFUNCTION);
    lua_settop(L, top);
}

int main(void)
{
    const char *preload = getenv("LD_PRELOAD");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_types_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arrays_and_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conversion_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_to_json_direct, setup, teardown),
        cmocka_unit_test_setup_teardown(test_input_global, setup, teardown),
        cmocka_unit_test_setup_teardown(test_isolation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_library_proxies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forbidden_globals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_infinite_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handler_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sort_metered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_utf8_metered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_c_loops_metered, setup, teardown),
        cmocka_unit_test(test_instruction_limit_custom),
        cmocka_unit_test(test_time_limit),
        cmocka_unit_test(test_memory_bombs),
        cmocka_unit_test_setup_teardown(test_result_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runtime_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_syntax_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_coroutines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pcall_and_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_push, setup, teardown),
    };
    if (preload && strstr(preload, "valgrind")) slow = 1000.0;
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The metered pattern functions against Lua's own: the same results and the
 * same errors over a grid of subjects, patterns and replacements; and a
 * meter that stops a match that would otherwise run for hours.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <lauxlib.h>
#include <lualib.h>

#include "lua/pattern.h"

/* Runs every call of the grid under pcall and prints each outcome on a line. */
static const char grid[] =
    "local subjects = { '', 'a', 'aaa', 'hello world', '[x]', '(foo(bar))baz', 'key=val; k2=v2',\n"
    "  'THE (quick) fox', 'a\\0b\\0c', 'a.b-c%d', '  trim me  ', 'x]y', 'abcabcabc', '12ab34',\n"
    "  'THE(END)', '$x$', '^a^' }\n"
    "local patterns = { '', 'a', '^a', 'a$', '^$', '.', '%a+', '%A+', '%d*', '%s-', '%w?x',\n"
    "  '[ab]+', '[^ab]+', '[a-c]+', '[%a_][%w_]*', '[]]', '[^]]+', '[%]]', '[a-]', '(a)(b)',\n"
    "  '()a()', '(%w+)=(%w+)', '%b()', '%b[]', '%f[%w]%w+', '%f[%W]', '(a)%1', '(.)%1',\n"
    "  '(%w)(%w)%2%1', '%', '[a', '(a', 'a)', '%1', '(()', '%g', '%p+', '%c', '%x+', '%u%l',\n"
    "  'x*$', '$x', 'a$b', '^', '%b', '%ba', '%f', '%fa', '[%', '%0', '(a)%2', '%.', '%%',\n"
    "  '.-b', '.-', '(.-)c', 'a*?', 'a+-', 'a?a?a?aaa', '\\0', '[\\0-a]', '%z', "
    "'^(%s*)(.-)(%s*)$',\n"
    "  string.rep('a-', 250), string.rep('(', 40), '((a)(b))', '(a*(.)%w(%s*))' }\n"
    "local reps = { '<%0>', '%1', '%2', '%%', '%', '%x', 'z', 7,\n"
    "  function(a, b) return a and a:upper() end, function() return false end,\n"
    "  function() return {} end, { a = 'A', b = false, x = 1 } }\n"
    "local out = {}\n"
    "local function ser(...)\n"
    "  local t = table.pack(...)\n"
    "  for i = 1, t.n do t[i] = type(t[i]) .. ':' .. tostring(t[i]) end\n"
    "  return table.concat(t, ',')\n"
    "end\n"
    "local ctx = ''\n"
    "local function put(...) out[#out + 1] = ctx .. ' ' .. ser(...) end\n"
    "for _, s in ipairs(subjects) do\n"
    "  for pi, p in ipairs(patterns) do\n"
    "    ctx = string.format('%q %q', s, p)\n"
    "    for _, init in ipairs({ 1, 2, -3, 0, 100, -100 }) do\n"
    "      put(pcall(string.find, s, p, init))\n"
    "      put(pcall(string.find, s, p, init, true))\n"
    "      put(pcall(string.match, s, p, init))\n"
    "      put(pcall(function()\n"
    "        local r = {}\n"
    "        for a, b, c in string.gmatch(s, p, init) do r[#r + 1] = ser(a, b, c) end\n"
    "        return table.concat(r, ';')\n"
    "      end))\n"
    "    end\n"
    "    for _, r in ipairs(reps) do\n"
    "      put(pcall(string.gsub, s, p, r))\n"
    "      put(pcall(string.gsub, s, p, r, 1))\n"
    "    end\n"
    "    put(pcall(string.gsub, s, p))\n"
    "  end\n"
    "end\n"
    "put(pcall(string.find))\n"
    "put(pcall(string.gsub, 'x', 'x', true))\n"
    "put(pcall(string.find, 'abc', 'b', 1.5))\n"
    "put(pcall(string.find, 42, 2))\n"
    "return table.concat(out, '\\n')\n";

static void no_meter(lua_State *L, size_t steps)
{
    (void)L;
    (void)steps;
}

static size_t metered;
static void count_meter(lua_State *L, size_t steps)
{
    metered += steps;
    if (metered > 50u * 1000 * 1000) luaL_error(L, "stopped by the meter");
}

static lua_State *state(lpat_meter meter)
{
    lua_State *L = luaL_newstate();
    assert_non_null(L);
    luaL_openlibs(L);
    if (meter) {
        lua_getglobal(L, "string");
        lpat_install(L, -1, meter);
        lua_pop(L, 1);
    }
    return L;
}

static char *run_grid(lpat_meter meter)
{
    lua_State *L = state(meter);
    char *text;
    if (luaL_dostring(L, grid) != LUA_OK) fail_msg("grid: %s", lua_tostring(L, -1));
    text = strdup(lua_tostring(L, -1));
    lua_close(L);
    return text;
}

static void test_same_as_lua(void **state_)
{
    char *want = run_grid(NULL), *got = run_grid(no_meter);
    char *w = want, *g = got;
    int line = 1, lines = 0;
    (void)state_;
    for (const char *c = want; *c; c++)
        lines += *c == '\n';
    assert_true(lines > 10000);
    while (*w || *g) {
        char *we = strchr(w, '\n'), *ge = strchr(g, '\n');
        size_t wl = we ? (size_t)(we - w) : strlen(w), gl = ge ? (size_t)(ge - g) : strlen(g);
        if (wl != gl || memcmp(w, g, wl))
            fail_msg("line %d: Lua gives '%.*s', lpat gives '%.*s'", line, (int)wl, w, (int)gl, g);
        if (!we || !ge) {
            assert_true(!we && !ge);
            break;
        }
        w = we + 1;
        g = ge + 1;
        line++;
    }
    free(want);
    free(got);
}

/* Hours of backtracking for Lua's matcher; the meter stops each one. */
static void test_meter_stops(void **state_)
{
    static const char *const calls[] = {
        "return string.rep('a', 3000):find(string.rep('.-', 6) .. 'b')",
        "return string.rep('a', 3000):match(string.rep('a*', 8) .. 'b')",
        "return string.rep('a', 3000):gsub(string.rep('.-', 6) .. 'b', 'x')",
        "for x in string.rep('a', 3000):gmatch(string.rep('a-', 8) .. 'b') do end",
        "return string.rep('a', 1 << 20):find(string.rep('a', 1 << 19) .. 'b', 1, true)",
        "return string.rep('(', 20000):find('%b()x')",
        /* a long set costs its length at each test, and finding its end too */
        "return string.rep('b', 4000):find('[' .. string.rep('a', 1e6) .. ']')",
        "return string.rep('b', 4000):find('%f[' .. string.rep('a', 1e6) .. ']')",
        NULL,
    };
    const char *const *c;
    (void)state_;
    for (c = calls; *c; c++) {
        lua_State *L = state(count_meter);
        metered = 0;
        assert_int_equal(luaL_loadstring(L, *c), LUA_OK);
        if (lua_pcall(L, 0, 0, 0) != LUA_ERRRUN ||
            !strstr(lua_tostring(L, -1), "stopped by the meter"))
            fail_msg("'%s' was not stopped: %s", *c, lua_tostring(L, -1));
        lua_close(L);
    }
    /* an ordinary match is charged too */
    {
        lua_State *L = state(count_meter);
        metered = 0;
        assert_int_equal(luaL_dostring(L, "return ('x'):rep(10000):gsub('x', 'y')"), LUA_OK);
        assert_true(metered >= 10000);
        lua_close(L);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_lua),
        cmocka_unit_test(test_meter_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

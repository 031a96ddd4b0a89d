/*
 * The metering of the sandbox: the instruction charge, the count hook that
 * pcall cannot swallow, and the meter of work done inside one C call, with
 * the library functions wrapped so that such work is charged (pattern
 * matching, sort, utf8 scans, format, the table functions). Prefix sbx_.
 */
#include "lua/sandbox_int.h"

#include <string.h>
#include <lauxlib.h>
#include <lualib.h>

#include "lua/pattern.h"
#include "base/util.h"

#define SBX_MATCH_STEPS 16 /* pattern-matching steps that count as one instruction */

/* Charge n instructions; true when a limit is hit (then the script is aborting). */
static int charge(sbx *s, uint64_t n)
{
    s->instr_used += n;
    if (s->instr_used >= s->instr_cap)
        s->instr_hit = 1;
    else if (wu_mono_ms() >= s->deadline_ms)
        s->time_hit = 1;
    else if (!s->mem_hit)
        return 0;
    s->aborting = 1;
    return 1;
}

/*
 * Where yielding is impossible (a C call such as table.sort's comparator is
 * on the stack) raise an error instead and fire the hook on every
 * instruction from then on, so each pcall that catches it is hit again until
 * the script is back where it can yield.
 */
static void abort_unyieldable(lua_State *L)
{
    lua_sethook(L, sbx_count_hook, LUA_MASKCOUNT, 1);
    luaL_error(L, "sandbox limit exceeded");
}

/*
 * Yielding from a count hook unwinds the coroutine straight to lua_resume:
 * pcall inside the script cannot catch it.
 */
void sbx_count_hook(lua_State *L, lua_Debug *ar)
{
    sbx *s = sbx_of(L);
    if (ar->event == LUA_HOOKLINE) {
        s->line_hook(L, ar);
        return;
    }
    if (!s->aborting && !charge(s, (uint64_t)s->hook_step)) return;
    if (lua_isyieldable(L)) {
        lua_yield(L, 0);
        return;
    }
    abort_unyieldable(L);
}

/*
 * The meter of work done inside one C call (pattern steps, comparisons,
 * bytes scanned): SBX_MATCH_STEPS units count as an instruction, charged
 * once LPAT_TICK units have gathered, so a cheap call costs no clock read.
 */
static void match_meter(lua_State *L, size_t units)
{
    sbx *s = sbx_of(L);
    if (!s->capped) return;
    if (!s->aborting) {
        uint64_t n;
        s->match_steps += units;
        if (s->match_steps < (size_t)LPAT_TICK) return;
        n = s->match_steps / SBX_MATCH_STEPS;
        s->match_steps %= SBX_MATCH_STEPS;
        if (!charge(s, n)) return;
    }
    abort_unyieldable(L);
}

/*
 * Library functions that can loop in C without allocating, where neither
 * limit would stop them, are wrapped: upvalue 1 is the original.
 */
#define SBX_SHIFT_MAX ((lua_Integer)1 << 24)

static int call_original(lua_State *L)
{
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

/* string.rep("", 1e18) would copy nothing 1e18 times */
static int safe_rep(lua_State *L)
{
    size_t len, seplen = 0;
    luaL_checklstring(L, 1, &len);
    luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &seplen);
    if (len + seplen == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    return call_original(L);
}

static void charge_elements(lua_State *L, int from, int to, lua_Integer first, lua_Integer last);

/*
 * table.insert / table.remove shift #t elements; __len can claim any length.
 * with_pos: how many arguments mean a position is given (else it is #t).
 */
static int shift(lua_State *L, int with_pos)
{
    lua_Integer n;
    if (lua_type(L, 1) != LUA_TTABLE) return call_original(L);
    if ((n = luaL_len(L, 1)) > SBX_SHIFT_MAX)
        return luaL_error(L, "table too long (more than %d elements)", (int)SBX_SHIFT_MAX);
    charge_elements(L, 1, 1, lua_gettop(L) >= with_pos ? lua_tointeger(L, 2) : n, n);
    return call_original(L);
}

static int safe_insert(lua_State *L)
{
    return shift(L, 3);
}

static int safe_remove(lua_State *L)
{
    return shift(L, 2);
}

/* table.move({}, 1, 1e18, 2) moves nils without allocating */
static int safe_move(lua_State *L)
{
    lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
    if (e >= f && (lua_Unsigned)e - (lua_Unsigned)f >= (lua_Unsigned)SBX_SHIFT_MAX)
        return luaL_error(L, "too many elements to move (more than %d)", (int)SBX_SHIFT_MAX);
    charge_elements(L, 1, lua_isnoneornil(L, 5) ? 1 : 5, f, e);
    return call_original(L);
}

/*
 * table.sort compares in C: with no comparator, or a C function as one, it
 * runs no instruction the hook could count, and comparing long strings costs
 * their length each time (3,000 references to one 8 MB string sorted for 34
 * s past a 5 s limit). Every comparison goes through this metered one:
 * upvalue 1 is the script's comparator or nil.
 */
#define SBX_SORT_BYTES 128 /* bytes of string compared that count as one instruction */

static int metered_less(lua_State *L)
{
    size_t units = SBX_MATCH_STEPS;
    int i;
    for (i = 1; i <= 2; i++)
        if (lua_type(L, i) == LUA_TSTRING)
            units += lua_rawlen(L, i) / SBX_SORT_BYTES * SBX_MATCH_STEPS;
    match_meter(L, units);
    if (lua_isnil(L, lua_upvalueindex(1))) {
        lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
        return 1;
    }
    lua_settop(L, 2);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 2, 1);
    return 1;
}

static int safe_sort(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    lua_pushcclosure(L, metered_less, 1);
    return call_original(L);
}

/*
 * utf8.len and utf8.offset scan up to the whole string in one call, counted
 * as one instruction: a loop of them on a 15 MB string ran 25 s against a 5
 * s limit, the clock being looked at only every SBX_HOOK_STEP instructions.
 * The bytes they scan count as for sort.
 */
static lua_Integer u_posrelat(lua_Integer pos, size_t len)
{
    if (pos >= 0) return pos;
    if (0u - (size_t)pos > len) return 0;
    return (lua_Integer)len + pos + 1;
}

static void meter_scan(lua_State *L, size_t bytes)
{
    match_meter(L, bytes / SBX_SORT_BYTES * SBX_MATCH_STEPS);
}

/* The argument checks are utf8.len's own, so errors name it. */
static int safe_utf8_len(lua_State *L)
{
    size_t len;
    lua_Integer posi, posj;
    luaL_checklstring(L, 1, &len);
    posi = u_posrelat(luaL_optinteger(L, 2, 1), len);
    posj = u_posrelat(luaL_optinteger(L, 3, -1), len);
    luaL_argcheck(L, 1 <= posi && posi - 1 <= (lua_Integer)len, 2,
                  "initial position out of bounds");
    luaL_argcheck(L, posj - 1 < (lua_Integer)len, 3, "final position out of bounds");
    if (posj >= posi) meter_scan(L, (size_t)(posj - posi + 1));
    return call_original(L);
}

/* Continuation bytes make even utf8.offset(s, 1) scan to the end: what it
 * scanned is counted after, from where it stopped. */
static int safe_utf8_offset(lua_State *L)
{
    size_t len;
    lua_Integer n, posi;
    int nres;
    luaL_checklstring(L, 1, &len);
    n = luaL_checkinteger(L, 2);
    posi = u_posrelat(luaL_optinteger(L, 3, n >= 0 ? 1 : (lua_Integer)len + 1), len);
    luaL_argcheck(L, 1 <= posi && posi - 1 <= (lua_Integer)len, 3, "position out of bounds");
    nres = call_original(L);
    if (lua_isinteger(L, 1)) {
        lua_Integer r = lua_tointeger(L, 1);
        meter_scan(L, (size_t)(r > posi ? r - posi : posi - r));
    } else {
        meter_scan(L, n > 0 ? len - (size_t)(posi - 1) : (size_t)posi);
    }
    return nres;
}

/*
 * Call the original (upvalue 1, a C function without upvalues of its own) in
 * this very frame, so that its argument errors name it as before.
 */
static int run_original(lua_State *L)
{
    return lua_tocfunction(L, lua_upvalueindex(1))(L);
}

/*
 * string.format('%q', s) formats each control character with snprintf: a
 * loop of it on a 4 MB string ran past 60 s against a 5 s limit. With a %q,
 * each byte of the string arguments counts as an instruction; otherwise they
 * count as scanned.
 */
static int safe_format(lua_State *L)
{
    size_t lf, bytes = 0;
    const char *f = luaL_checklstring(L, 1, &lf), *p = f, *end = f + lf;
    int i, n = lua_gettop(L), quoted = 0;
    while ((p = memchr(p, '%', (size_t)(end - p))) && p + 1 < end) {
        if (p[1] == 'q') quoted = 1;
        p += 2; /* "%%" is one item */
    }
    for (i = 2; i <= n; i++)
        if (lua_type(L, i) == LUA_TSTRING) bytes += lua_rawlen(L, i);
    if (quoted)
        match_meter(L, bytes * SBX_MATCH_STEPS);
    else
        meter_scan(L, bytes + lf);
    return run_original(L);
}

/*
 * How many tables one index into the value at idx may visit: 1 + its chain
 * of __index (or __newindex) tables, which Lua follows up to 2,000 deep in C.
 */
static size_t chain_len(lua_State *L, int idx, const char *event)
{
    size_t n = 1;
    int top = lua_gettop(L);
    lua_pushvalue(L, idx);
    while (n <= 2000 && lua_getmetatable(L, -1)) {
        lua_pushstring(L, event);
        if (lua_rawget(L, -2) != LUA_TTABLE) break;
        lua_replace(L, -3);
        lua_pop(L, 1);
        n++;
    }
    lua_settop(L, top);
    return n;
}

/*
 * The table functions get (from the value at from) and set (into to, or 0)
 * elements first..last in C, each through the whole chain of __index or
 * __newindex tables: a table.concat, unpack or move of 200,000 elements
 * behind a chain 1,990 deep ran 6 to 9 s in one call, past a 5 s limit.
 * Each table visited counts as an instruction, charged before the call.
 */
static void charge_elements(lua_State *L, int from, int to, lua_Integer first, lua_Integer last)
{
    lua_Unsigned count;
    size_t visits;
    if (last < first) return;
    count = (lua_Unsigned)last - (lua_Unsigned)first;
    /* more than any table can hold: it stops at a missing one first */
    if (count >= (lua_Unsigned)SBX_SHIFT_MAX) count = (lua_Unsigned)SBX_SHIFT_MAX - 1;
    visits = chain_len(L, from, "__index") + (to ? chain_len(L, to, "__newindex") : 0);
    match_meter(L, ((size_t)count + 1) * visits * SBX_MATCH_STEPS);
}

/*
 * table.concat and table.unpack fetch every element in C: a loop of concat
 * on a million empty strings ran twice its time limit. (With no last
 * position given, a __len metamethod runs twice.)
 */
static int safe_concat(lua_State *L)
{
    lua_Integer i, last;
    luaL_checkany(L, 1);
    i = luaL_optinteger(L, 3, 1);
    last = lua_isnoneornil(L, 4) ? luaL_len(L, 1) : luaL_checkinteger(L, 4);
    charge_elements(L, 1, 0, i, last);
    return run_original(L);
}

static int safe_unpack(lua_State *L)
{
    lua_Integer i, last;
    luaL_checkany(L, 1);
    i = luaL_optinteger(L, 2, 1);
    last = lua_isnoneornil(L, 3) ? luaL_len(L, 1) : luaL_checkinteger(L, 3);
    /* past what a stack holds it fails before fetching any */
    if (last < i || (lua_Unsigned)last - (lua_Unsigned)i < 1000000u)
        charge_elements(L, 1, 0, i, last);
    return run_original(L);
}

static const struct {
    const char *lib, *name;
    lua_CFunction fn;
} wrapped[] = {
    {LUA_STRLIBNAME, "rep", safe_rep},       {LUA_TABLIBNAME, "insert", safe_insert},
    {LUA_TABLIBNAME, "remove", safe_remove}, {LUA_TABLIBNAME, "move", safe_move},
    {LUA_TABLIBNAME, "sort", safe_sort},     {LUA_STRLIBNAME, "format", safe_format},
    {LUA_TABLIBNAME, "concat", safe_concat}, {LUA_TABLIBNAME, "unpack", safe_unpack},
    {LUA_UTF8LIBNAME, "len", safe_utf8_len}, {LUA_UTF8LIBNAME, "offset", safe_utf8_offset},
};

void sbx_meter_lib(lua_State *L, int lib, const char *name)
{
    size_t j;
    if (!strcmp(name, LUA_STRLIBNAME)) lpat_install(L, lib, match_meter);
    for (j = 0; j < sizeof wrapped / sizeof wrapped[0]; j++) {
        if (strcmp(wrapped[j].lib, name)) continue;
        lua_getfield(L, lib, wrapped[j].name);
        lua_pushcclosure(L, wrapped[j].fn, 1);
        lua_setfield(L, lib, wrapped[j].name);
    }
}

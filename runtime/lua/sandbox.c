#include "lua/sandbox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include <lualib.h>

#include "lua/pattern.h"
#include "base/util.h"

#define SBX_DEFAULT_MEM ((size_t)32 << 20)
#define SBX_DEFAULT_INSTR 10000000u
#define SBX_DEFAULT_TIME_MS 5000u
#define SBX_DEFAULT_RESULT ((size_t)16 << 20)
/* What a value counts at least against the result limit: about what json-c
 * allocates for it, so that a result of many small values stays bounded in
 * memory as well as in text. */
#define SBX_VALUE_MIN 16
#define SBX_TABLE_MIN 64
#define SBX_HOOK_STEP 1000
#define SBX_MATCH_STEPS 16 /* pattern-matching steps that count as one instruction */
#define SBX_CACHE_MAX 512
#define SBX_JSON_DEPTH 200
#define SBX_PATH_MAX 200

/*
 * Scripts are compiled as this prefix followed by the body, on the same line
 * so error line numbers match the user's. Unlike `return function(...) body
 * end`, a body cannot close the wrapper early and run code outside it.
 */
static const char body_prefix[] = "local _ENV, input = ...; ";

/* Registry keys: only their addresses matter. reg_backing is also the key,
 * in a proxy's metatable, of the frozen table behind the proxy. reg_env and
 * reg_thread keep the sbx's spare env and coroutine alive. */
static char reg_mts, reg_cache, reg_array_mt, reg_backing, reg_env, reg_thread;

/* Safe base functions; those that see a table raw, or its metatable, are
 * replaced by the proxy-aware versions in base_wrapped below. */
static const char *const base_names[] = {
    "assert",   "error",    "ipairs", "pcall",   "rawequal", "rawlen",
    "select",   "tonumber", "tostring", "type",  "_VERSION", NULL,
};

static const struct {
    const char *name;
    lua_CFunction open;
} libs[] = {
    {LUA_STRLIBNAME, luaopen_string},
    {LUA_TABLIBNAME, luaopen_table},
    {LUA_MATHLIBNAME, luaopen_math},
    {LUA_UTF8LIBNAME, luaopen_utf8},
};

#define NLIBS (sizeof libs / sizeof libs[0])
#define ENV_MT ((lua_Integer)NLIBS + 1) /* index of the env metatable in reg_mts */
#define ENV_NAMES (ENV_MT + 1) /* then the names of the libraries, then "_G" */

/* Left out of the library copies: dump makes bytecode; randomseed would let
 * one script fix the random sequence the next one sees. */
static const char *const dropped[] = {"dump", "randomseed", NULL};

struct sbx {
    lua_State *L;
    size_t used;  /* bytes currently allocated by L */
    size_t limit; /* refuse growth past this while capped */
    int capped;
    size_t mem_cap;
    uint64_t instr_cap, instr_used;
    size_t match_steps; /* not yet charged as instructions */
    uint64_t time_cap_ms;
    size_t result_cap;
    int64_t deadline_ms; /* monotonic */
    int hook_step;
    int mem_hit, instr_hit, time_hit, aborting;
    int cache_n;
    wu_map *cache_ix; /* "chunkname\nbody" -> index in the reg_cache array */
    lua_Hook line_hook;
    /*
     * What evals reuse instead of building anew (see take_env, run_thread):
     * an env (in reg_env) while no eval has changed it, and a coroutine (in
     * reg_thread) that last returned normally. Busy while an eval uses it.
     */
    int env_spare, env_busy;
    int env_written; /* an env or library proxy was written to: see env_unchanged */
    lua_State *co_spare;
    int co_busy;
    const void *lib_mt[NLIBS]; /* the proxy metatables, to recognise proxies */
};

static void *sbx_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    sbx *s = ud;
    size_t old = ptr ? osize : 0; /* osize is a type tag when ptr is NULL */
    void *p;
    if (nsize == 0) {
        free(ptr);
        s->used -= old;
        return NULL;
    }
    /* never refuse a shrink: Lua assumes those succeed */
    if (s->capped && nsize > old && s->used - old + nsize > s->limit) {
        s->mem_hit = 1;
        return NULL;
    }
    p = realloc(ptr, nsize);
    if (!p) return NULL;
    s->used = s->used - old + nsize;
    return p;
}

static sbx *sbx_of(lua_State *L)
{
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

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
static void count_hook(lua_State *L, lua_Debug *ar);

static void abort_unyieldable(lua_State *L)
{
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    luaL_error(L, "sandbox limit exceeded");
}

/*
 * Yielding from a count hook unwinds the coroutine straight to lua_resume:
 * pcall inside the script cannot catch it.
 */
static void count_hook(lua_State *L, lua_Debug *ar)
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
    luaL_argcheck(L, 1 <= posi && posi - 1 <= (lua_Integer)len, 2, "initial position out of bounds");
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
    if (last < i || (lua_Unsigned)last - (lua_Unsigned)i < 1000000u) charge_elements(L, 1, 0, i, last);
    return run_original(L);
}

static const struct {
    const char *lib, *name;
    lua_CFunction fn;
} wrapped[] = {
    {LUA_STRLIBNAME, "rep", safe_rep},
    {LUA_TABLIBNAME, "insert", safe_insert},
    {LUA_TABLIBNAME, "remove", safe_remove},
    {LUA_TABLIBNAME, "move", safe_move},
    {LUA_TABLIBNAME, "sort", safe_sort},
    {LUA_STRLIBNAME, "format", safe_format},
    {LUA_TABLIBNAME, "concat", safe_concat},
    {LUA_TABLIBNAME, "unpack", safe_unpack},
    {LUA_UTF8LIBNAME, "len", safe_utf8_len},
    {LUA_UTF8LIBNAME, "offset", safe_utf8_offset},
};

static int is_dropped(const char *name)
{
    const char *const *d;
    for (d = dropped; *d; d++)
        if (!strcmp(*d, name)) return 1;
    return 0;
}

/*
 * Library tables and the base functions are built once per state, in frozen
 * tables no script can reach. Each eval gets an empty env, and empty proxies
 * for string/table/math/utf8, whose shared (locked) metatables have __index
 * = the frozen table. A write to a new name lands in the per-eval table and
 * vanishes with it. A write to a name the frozen table has (string.upper =
 * nil), or anything that looks at the table raw (rawget, rawset, next,
 * pairs, setmetatable) first "materializes" the proxy: copies the frozen
 * fields into it and drops its metatable, so it becomes the plain per-eval
 * copy every eval used to get. getmetatable answers nil for a proxy, as for
 * a plain table. The frozen tables never change.
 */

/* If the value at idx is a proxy, push its frozen table and return 1. */
static int push_backing(lua_State *L, int idx)
{
    if (!lua_getmetatable(L, idx)) return 0;
    if (lua_rawgetp(L, -1, &reg_backing) == LUA_TTABLE) {
        lua_remove(L, -2);
        return 1;
    }
    lua_pop(L, 2);
    return 0;
}

/* Turn the proxy at idx (if it is one) into a plain copy. */
static void materialize(lua_State *L, int idx)
{
    int b;
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE) return;
    luaL_checkstack(L, 4, NULL);
    if (!push_backing(L, idx)) return;
    sbx_of(L)->env_written = 1;
    b = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, b)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, idx);
    }
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setmetatable(L, idx);
}

/* __newindex of proxies (called only for names the proxy lacks raw) */
static int proxy_newindex(lua_State *L)
{
    sbx_of(L)->env_written = 1;
    lua_settop(L, 3);
    if (push_backing(L, 1)) {
        lua_pushvalue(L, 2);
        if (lua_rawget(L, -2) != LUA_TNIL) materialize(L, 1);
        lua_settop(L, 3);
    }
    lua_rawset(L, 1);
    return 0;
}

/* setmetatable without __gc: a finalizer would run outside the limits. */
static int safe_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in the sandbox");
        lua_pop(L, 1);
    }
    materialize(L, 1);
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

static int safe_getmetatable(lua_State *L)
{
    luaL_checkany(L, 1);
    if (!lua_getmetatable(L, 1)) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushlightuserdata(L, &reg_backing);
    if (lua_rawget(L, -2) == LUA_TTABLE) {
        lua_pushnil(L);
        return 1;
    }
    lua_pop(L, 1);
    luaL_getmetafield(L, 1, "__metatable");
    return 1;
}

static int safe_next(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 2);
    materialize(L, 1); /* for a table without a metatable, one check */
    if (lua_next(L, 1)) return 2;
    lua_pushnil(L);
    return 1;
}

static int safe_pairs(lua_State *L)
{
    luaL_checkany(L, 1);
    if (luaL_getmetafield(L, 1, "__pairs") == LUA_TNIL) {
        lua_pushcfunction(L, safe_next);
        lua_pushvalue(L, 1);
        lua_pushnil(L);
    } else {
        lua_pushvalue(L, 1);
        lua_call(L, 1, 3);
    }
    return 3;
}

static int safe_rawget(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    lua_settop(L, 2);
    materialize(L, 1);
    lua_rawget(L, 1);
    return 1;
}

static int safe_rawset(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    lua_settop(L, 3);
    materialize(L, 1);
    lua_rawset(L, 1);
    return 1;
}

static const luaL_Reg base_wrapped[] = {
    {"getmetatable", safe_getmetatable},
    {"setmetatable", safe_setmetatable},
    {"next", safe_next},
    {"pairs", safe_pairs},
    {"rawget", safe_rawget},
    {"rawset", safe_rawset},
    {NULL, NULL},
};

/*
 * xpcall with the handler called after the error has unwound, as an ordinary
 * call. Lua runs a message handler inside the error it handles; when that
 * error comes from the count hook, hooks are off while the handler runs, so
 * a looping handler would escape every limit. Lua code, so that a limit met
 * inside can still yield out of the script. Upvalues: pcall, type, error,
 * select.
 */
static const char xpcall_src[] =
    "local pcall, type, error, select = ...\n"
    "local function finish(h, ok, ...)\n"
    "  if ok then return true, ... end\n"
    "  return false, (select(2, pcall(h, (...))))\n"
    "end\n"
    "return function(f, h, ...)\n"
    "  if type(h) ~= 'function' then\n"
    "    error(\"bad argument #2 to 'xpcall' (function expected, got \" ..\n"
    "          (h == nil and 'no value' or type(h)) .. ')', 2)\n"
    "  end\n"
    "  return finish(h, pcall(f, ...))\n"
    "end\n";

/* Sets base.xpcall (base at idx) from xpcall_src. */
static void set_xpcall(lua_State *L, int base)
{
    static const char *const ups[] = {"pcall", "type", "error", "select"};
    size_t i;
    if (luaL_loadbufferx(L, xpcall_src, sizeof xpcall_src - 1, "=xpcall", "t") != LUA_OK)
        lua_error(L);
    lua_pushnil(L); /* it uses no globals: no way to the real ones */
    lua_setupvalue(L, -2, 1);
    for (i = 0; i < sizeof ups / sizeof ups[0]; i++)
        lua_getfield(L, base, ups[i]);
    lua_call(L, (int)(sizeof ups / sizeof ups[0]), 1);
    lua_setfield(L, base, "xpcall");
}

/* Pops a frozen table; pushes a locked metatable for proxies of it. */
static void make_proxy_mt(lua_State *L)
{
    lua_createtable(L, 0, 4);
    lua_insert(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__index");
    lua_rawsetp(L, -2, &reg_backing);
    lua_pushcfunction(L, proxy_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
}

/* Runs once per state (protected): libraries, the frozen tables, the cache. */
static int setup_state(lua_State *L)
{
    const char *const *n;
    size_t i;
    int mts, base;
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    lua_pop(L, 1);
    lua_createtable(L, (int)ENV_MT, 0);
    mts = lua_gettop(L);
    lua_newtable(L);
    base = lua_gettop(L);
    for (n = base_names; *n; n++) {
        lua_getglobal(L, *n);
        lua_setfield(L, base, *n);
    }
    luaL_setfuncs(L, base_wrapped, 0);
    set_xpcall(L, base);
    make_proxy_mt(L);
    lua_rawseti(L, mts, ENV_MT);
    for (i = 0; i < NLIBS; i++) {
        int lib, copy;
        size_t j;
        /* as globals of the real _G, which no script can reach */
        luaL_requiref(L, libs[i].name, libs[i].open, 1);
        lib = lua_gettop(L);
        if (libs[i].open == luaopen_string) lpat_install(L, lib, match_meter);
        /* in the real tables too: string methods ("").rep reach those */
        for (j = 0; j < sizeof wrapped / sizeof wrapped[0]; j++) {
            if (strcmp(wrapped[j].lib, libs[i].name)) continue;
            lua_getfield(L, lib, wrapped[j].name);
            lua_pushcclosure(L, wrapped[j].fn, 1);
            lua_setfield(L, lib, wrapped[j].name);
        }
        lua_newtable(L);
        copy = lib + 1;
        lua_pushnil(L);
        while (lua_next(L, lib)) {
            if (lua_type(L, -2) == LUA_TSTRING && is_dropped(lua_tostring(L, -2))) {
                lua_pop(L, 1);
                continue;
            }
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_rawset(L, copy);
        }
        make_proxy_mt(L);
        sbx_of(L)->lib_mt[i] = lua_topointer(L, -1);
        lua_rawseti(L, mts, (lua_Integer)i + 1);
        /* ("").dump would reach the real string table through the metatable */
        lua_pushnil(L);
        lua_setfield(L, lib, "dump");
        lua_pop(L, 1);
    }
    lua_settop(L, mts);
    for (i = 0; i < NLIBS; i++) {
        lua_pushstring(L, libs[i].name);
        lua_rawseti(L, mts, ENV_NAMES + (lua_Integer)i);
    }
    lua_pushliteral(L, "_G");
    lua_rawseti(L, mts, ENV_NAMES + (lua_Integer)NLIBS);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_mts);

    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 2);

    /* shared by every array pushed from JSON, so protected against edits */
    lua_createtable(L, 0, 2);
    lua_pushliteral(L, "array");
    lua_setfield(L, -2, "__jsontype");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_array_mt);

    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_cache);

    /* the slots exist from the start, so filling them later cannot fail */
    lua_pushboolean(L, 0);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_env);
    lua_pushboolean(L, 0);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_thread);
    return 0;
}

sbx *sbx_new(const sbx_limits *limits, weft_error *err)
{
    sbx *s = calloc(1, sizeof *s);
    if (!s) {
        wu_err(err, WEFT_ENOMEM, "out of memory");
        return NULL;
    }
    s->mem_cap = limits && limits->mem_bytes ? limits->mem_bytes : SBX_DEFAULT_MEM;
    s->instr_cap = limits && limits->instructions ? limits->instructions : SBX_DEFAULT_INSTR;
    s->time_cap_ms = limits && limits->time_ms ? limits->time_ms : SBX_DEFAULT_TIME_MS;
    s->result_cap = limits && limits->result_bytes ? limits->result_bytes : SBX_DEFAULT_RESULT;
    s->hook_step = s->instr_cap < SBX_HOOK_STEP ? (int)s->instr_cap : SBX_HOOK_STEP;
    s->cache_ix = wu_map_new();
    s->L = s->cache_ix ? lua_newstate(sbx_alloc, s) : NULL;
    if (!s->L) {
        wu_map_free(s->cache_ix);
        free(s);
        wu_err(err, WEFT_ENOMEM, "out of memory");
        return NULL;
    }
    lua_pushcfunction(s->L, setup_state);
    if (lua_pcall(s->L, 0, 0, 0) != LUA_OK) {
        wu_err(err, WEFT_ENOMEM, "cannot set up the Lua sandbox: %s", lua_tostring(s->L, -1));
        sbx_free(s);
        return NULL;
    }
    return s;
}

void sbx_free(sbx *s)
{
    if (!s) return;
    s->capped = 0;
    lua_close(s->L);
    wu_map_free(s->cache_ix);
    free(s);
}

lua_State *sbx_state(sbx *s)
{
    return s->L;
}

void sbx_set_line_hook(sbx *s, lua_Hook hook)
{
    s->line_hook = hook;
}

size_t sbx_mem_used(const sbx *s)
{
    return s->used;
}

void sbx_push_env(lua_State *L)
{
    size_t i;
    int mts, env;
    luaL_checkstack(L, 5, NULL);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_mts);
    mts = lua_gettop(L);
    lua_createtable(L, 0, (int)NLIBS + 4);
    env = mts + 1;
    for (i = 0; i < NLIBS; i++) {
        lua_pushstring(L, libs[i].name);
        lua_createtable(L, 0, 0);
        lua_rawgeti(L, mts, (lua_Integer)i + 1);
        lua_setmetatable(L, -2);
        lua_rawset(L, env);
    }
    lua_pushliteral(L, "_G");
    lua_pushvalue(L, env);
    lua_rawset(L, env);
    lua_rawgeti(L, mts, ENV_MT);
    lua_setmetatable(L, env);
    lua_remove(L, mts);
}

static void push_json(lua_State *L, json_object *v, int depth)
{
    size_t i, n;
    if (depth > SBX_JSON_DEPTH)
        luaL_error(L, "JSON value nested deeper than %d levels", SBX_JSON_DEPTH);
    luaL_checkstack(L, 4, "JSON value nested too deeply");
    switch (json_object_get_type(v)) {
    case json_type_null:
        lua_pushnil(L);
        break;
    case json_type_boolean:
        lua_pushboolean(L, json_object_get_boolean(v));
        break;
    case json_type_int: {
        int64_t i64 = json_object_get_int64(v);
        /* json-c clamps unsigned values above INT64_MAX */
        if (i64 == INT64_MAX && json_object_get_uint64(v) > (uint64_t)INT64_MAX)
            lua_pushnumber(L, (lua_Number)json_object_get_uint64(v));
        else
            lua_pushinteger(L, (lua_Integer)i64);
        break;
    }
    case json_type_double:
        lua_pushnumber(L, json_object_get_double(v));
        break;
    case json_type_string:
        lua_pushlstring(L, json_object_get_string(v), (size_t)json_object_get_string_len(v));
        break;
    case json_type_array:
        n = json_object_array_length(v);
        lua_createtable(L, n > INT32_MAX ? 0 : (int)n, 0);
        for (i = 0; i < n; i++) {
            push_json(L, json_object_array_get_idx(v, i), depth + 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_array_mt);
        lua_setmetatable(L, -2);
        break;
    case json_type_object:
        lua_createtable(L, 0, json_object_object_length(v));
        json_object_object_foreach(v, key, val)
        {
            if (!val) continue;
            lua_pushstring(L, key);
            push_json(L, val, depth + 1);
            lua_rawset(L, -3);
        }
        break;
    }
}

void sbx_push_json(lua_State *L, json_object *v)
{
    push_json(L, v, 0);
}

/* Lua -> JSON. The key path of the value being converted is kept in path. */
struct tj {
    lua_State *L;
    weft_error *err;
    int depth;
    const void *parents[SBX_JSON_DEPTH];
    char path[SBX_PATH_MAX];
    size_t plen;
    /* What the result may still take, counted as JSON text: shared tables
     * and strings count at each reference, so no value can multiply. */
    size_t left, cap;
};

struct tj_entry {
    json_object *val;
    const char *key; /* a string key (NULL for integer keys: see num) */
    size_t klen;
    lua_Integer ikey;
    int is_int, done;
    char num[24];
};

static int tj_value(struct tj *t, int idx, json_object **out);

/* Count n bytes of output (at least min) against the result limit. */
static int tj_charge(struct tj *t, size_t n, size_t min)
{
    if (n < min) n = min;
    if (n <= t->left) {
        t->left -= n;
        return 0;
    }
    t->left = 0;
    return wu_err(t->err, WEFT_ELIMIT, "%s: over the result size limit (%zu bytes as JSON)",
                  t->path, t->cap);
}

/* Count what escaping adds to the string at idx as JSON text: \uXXXX for a
 * control character, a backslash before '"', '\\' and '/'. Call after the
 * string's own length was charged, so the scan is bounded by the limit. */
static int tj_charge_escapes(struct tj *t, int idx)
{
    size_t len, i, extra = 0;
    const unsigned char *p = (const unsigned char *)lua_tolstring(t->L, idx, &len);
    for (i = 0; i < len; i++) {
        if (p[i] < 0x20)
            extra += 5;
        else if (p[i] == '"' || p[i] == '\\' || p[i] == '/')
            extra++;
    }
    return tj_charge(t, extra, 0);
}

static int tj_fail(struct tj *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int tj_fail(struct tj *t, const char *fmt, ...)
{
    char msg[WEFT_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wu_err(t->err, WEFT_EINVAL, "%s: %s", t->path, msg);
}

static void tj_append(struct tj *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tj_append(struct tj *t, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (t->plen >= sizeof t->path - 1) return;
    va_start(ap, fmt);
    n = vsnprintf(t->path + t->plen, sizeof t->path - t->plen, fmt, ap);
    va_end(ap);
    if (n > 0) t->plen += (size_t)n;
    if (t->plen > sizeof t->path - 1) t->plen = sizeof t->path - 1;
}

static void tj_append_key(struct tj *t, const char *k, size_t len)
{
    size_t i;
    int ident = len > 0 && !(k[0] >= '0' && k[0] <= '9');
    for (i = 0; i < len && ident; i++)
        ident = k[i] == '_' || (k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
                (k[i] >= '0' && k[i] <= '9');
    if (ident)
        tj_append(t, ".%.*s", (int)len, k);
    else
        tj_append(t, "[\"%.*s\"]", (int)(len > 40 ? 40 : len), k);
}

/* num lives inside the entry, which qsort moves: never keep a pointer to it */
static const char *entry_key(const struct tj_entry *x)
{
    return x->is_int ? x->num : x->key;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct tj_entry *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(entry_key(x), entry_key(y), n);
    if (c) return c;
    return x->klen < y->klen ? -1 : x->klen > y->klen;
}

/* Lua's own float formatting is lossy; json-c's %.17g is noisy (0.1 ->
 * 0.10000000000000001). Use the shortest form that reads back exactly. */
static json_object *new_double(double d)
{
    char buf[40];
    int prec;
    for (prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".eE")) strcat(buf, ".0"); /* stays a float when read back */
    return json_object_new_double_s(d, buf);
}

static int tj_table(struct tj *t, int idx, json_object **out)
{
    lua_State *L = t->L;
    const void *self = lua_topointer(L, idx);
    int top = lua_gettop(L), jtype = 0, order = 0, all_int = 1, rc = 0, i;
    size_t n = 0, cap = 0, k, saved = t->plen;
    lua_Integer max = 0;
    struct tj_entry *e = NULL;
    json_object *res = NULL;

    if (t->depth >= SBX_JSON_DEPTH)
        return tj_fail(t, "nested deeper than %d levels", SBX_JSON_DEPTH);
    for (i = 0; i < t->depth; i++)
        if (t->parents[i] == self)
            return tj_fail(t, "cannot convert a table that contains itself (a cycle) to JSON");
    if (!lua_checkstack(L, 8)) return wu_err(t->err, WEFT_ENOMEM, "%s: out of memory", t->path);
    /* a library proxy (or an env) converts as what it stands for */
    if (push_backing(L, idx)) idx = lua_gettop(L);
    if (lua_getmetatable(L, idx)) {
        int mt = lua_gettop(L);
        lua_pushliteral(L, "__jsontype");
        switch (lua_rawget(L, mt)) {
        case LUA_TNIL:
            break;
        case LUA_TSTRING:
            if (!strcmp(lua_tostring(L, -1), "array")) {
                jtype = 1;
                break;
            }
            if (!strcmp(lua_tostring(L, -1), "object")) {
                jtype = 2;
                break;
            }
            /* fall through */
        default:
            lua_settop(L, top);
            return tj_fail(t, "__jsontype must be \"array\" or \"object\"");
        }
        lua_pop(L, 1);
        lua_pushliteral(L, "__jsonorder");
        if (lua_rawget(L, mt) == LUA_TTABLE) order = lua_gettop(L);
    }
    t->parents[t->depth++] = self;

    lua_pushnil(L);
    while (lua_next(L, idx)) {
        struct tj_entry *x;
        int kt = lua_type(L, -2);
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct tj_entry *ne = realloc(e, ncap * sizeof *ne);
            if (!ne) {
                rc = wu_err(t->err, WEFT_ENOMEM, "%s: out of memory", t->path);
                goto done;
            }
            e = ne;
            cap = ncap;
        }
        x = &e[n];
        memset(x, 0, sizeof *x);
        if ((rc = tj_charge(t, kt == LUA_TSTRING ? lua_rawlen(L, -2) + 4 : 4, 0))) goto done;
        if (kt == LUA_TSTRING && (rc = tj_charge_escapes(t, -2))) goto done;
        if (kt == LUA_TNUMBER && lua_isinteger(L, -2)) {
            x->is_int = 1;
            x->ikey = lua_tointeger(L, -2);
            if (x->ikey < 1)
                all_int = 0;
            else if (x->ikey > max)
                max = x->ikey;
            snprintf(x->num, sizeof x->num, LUA_INTEGER_FMT, x->ikey);
            x->klen = strlen(x->num);
            tj_append(t, "[%s]", x->num);
        } else if (kt == LUA_TSTRING) {
            all_int = 0;
            x->key = lua_tolstring(L, -2, &x->klen);
            tj_append_key(t, x->key, x->klen);
        } else {
            rc = tj_fail(t, "cannot use a %s as a JSON object key",
                         kt == LUA_TNUMBER ? "non-integer number" : lua_typename(L, kt));
            goto done;
        }
        n++;
        rc = tj_value(t, lua_gettop(L), &x->val);
        t->plen = saved;
        t->path[saved] = 0;
        if (rc) goto done;
        lua_pop(L, 1);
    }

    if (jtype == 1 || (jtype == 0 && n > 0 && all_int && (size_t)max == n)) {
        if (!all_int) {
            rc = tj_fail(t, "an array (__jsontype) can only have keys 1, 2, 3 ...");
            goto done;
        }
        if ((size_t)max > n * 4 + 64) {
            rc = tj_fail(t, "array is too sparse (%zu values, largest index " LUA_INTEGER_FMT ")",
                         n, max);
            goto done;
        }
        if ((rc = tj_charge(t, ((size_t)max - n) * 5, 0))) goto done; /* the holes' nulls */
        res = json_object_new_array_ext((int)max);
        if (!res) goto nomem;
        for (k = 0; k < n; k++) {
            if (json_object_array_put_idx(res, (size_t)(e[k].ikey - 1), e[k].val)) goto nomem;
            e[k].val = NULL;
        }
        /* put_idx leaves earlier holes as null but not trailing ones */
        while (json_object_array_length(res) < (size_t)max)
            if (json_object_array_add(res, NULL)) goto nomem;
    } else {
        res = json_object_new_object();
        if (!res) goto nomem;
        if (n > 1) qsort(e, n, sizeof *e, entry_cmp);
        if (order) {
            /* one order table can be shared by every table converted: each
             * name looked at counts against the result limit */
            lua_Integer j, len = (lua_Integer)lua_rawlen(L, order);
            size_t placed = 0;
            for (j = 1; j <= len && placed < n; j++) {
                struct tj_entry key = {0}, *hit;
                if ((rc = tj_charge(t, 1, 0))) goto done;
                if (lua_rawgeti(L, order, j) == LUA_TSTRING) {
                    key.key = lua_tolstring(L, -1, &key.klen);
                    hit = n ? bsearch(&key, e, n, sizeof *e, entry_cmp) : NULL;
                    if (hit && !hit->done) {
                        if (json_object_object_add(res, entry_key(hit), hit->val)) goto nomem;
                        hit->val = NULL;
                        hit->done = 1;
                        placed++;
                    }
                }
                lua_pop(L, 1);
            }
        }
        for (k = 0; k < n; k++) {
            if (e[k].done) continue;
            if (json_object_object_add(res, entry_key(&e[k]), e[k].val)) goto nomem;
            e[k].val = NULL;
        }
    }
    *out = res;
    res = NULL;
    goto done;
nomem:
    rc = wu_err(t->err, WEFT_ENOMEM, "%s: out of memory", t->path);
done:
    for (k = 0; k < n; k++)
        json_object_put(e[k].val);
    free(e);
    json_object_put(res);
    t->depth--;
    lua_settop(L, top);
    return rc;
}

static int tj_value(struct tj *t, int idx, json_object **out)
{
    lua_State *L = t->L;
    int type = lua_type(L, idx);
    int rc = tj_charge(t, type == LUA_TSTRING ? lua_rawlen(L, idx) + 2 : 2,
                       type == LUA_TTABLE ? SBX_TABLE_MIN : SBX_VALUE_MIN);
    *out = NULL;
    if (!rc && type == LUA_TSTRING) rc = tj_charge_escapes(t, idx);
    if (rc) return rc;
    switch (type) {
    case LUA_TNIL:
        return 0;
    case LUA_TBOOLEAN:
        *out = json_object_new_boolean(lua_toboolean(L, idx));
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            *out = json_object_new_int64(lua_tointeger(L, idx));
        } else {
            double d = lua_tonumber(L, idx);
            if (isnan(d)) return tj_fail(t, "cannot convert NaN to JSON");
            if (isinf(d)) return tj_fail(t, "cannot convert an infinite number to JSON");
            *out = new_double(d);
        }
        break;
    case LUA_TSTRING: {
        size_t len;
        const char *p = lua_tolstring(L, idx, &len);
        if (len > INT32_MAX) return tj_fail(t, "string too long for JSON");
        *out = json_object_new_string_len(p, (int)len);
        break;
    }
    case LUA_TTABLE:
        return tj_table(t, lua_absindex(L, idx), out);
    default:
        return tj_fail(t, "cannot convert a %s to JSON", lua_typename(L, type));
    }
    if (!*out) return wu_err(t->err, WEFT_ENOMEM, "%s: out of memory", t->path);
    return 0;
}

int sbx_to_json_path(lua_State *L, int idx, const char *root, json_object **out, weft_error *err)
{
    struct tj t;
    t.L = L;
    t.err = err;
    t.depth = 0;
    /* a state of the sandbox counts against its limit; any other does not */
    if (lua_getallocf(L, NULL) == sbx_alloc)
        t.cap = sbx_of(L)->result_cap;
    else
        t.cap = SIZE_MAX;
    t.left = t.cap;
    /* not snprintf: this runs for every result */
    if (!root) root = "value";
    t.plen = strnlen(root, sizeof t.path - 1);
    memcpy(t.path, root, t.plen);
    t.path[t.plen] = 0;
    return tj_value(&t, lua_absindex(L, idx), out);
}

int sbx_to_json(lua_State *L, int idx, json_object **out, weft_error *err)
{
    return sbx_to_json_path(L, idx, "value", out, err);
}

/* A readable message for any error object, without running user code. */
static void error_text(lua_State *L, int idx, char *buf, size_t size)
{
    int type = lua_type(L, idx);
    switch (type) {
    case LUA_TSTRING:
        snprintf(buf, size, "%s", lua_tostring(L, idx));
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            snprintf(buf, size, "error " LUA_INTEGER_FMT, lua_tointeger(L, idx));
        else
            snprintf(buf, size, "error %.14g", lua_tonumber(L, idx));
        break;
    case LUA_TNIL:
        snprintf(buf, size, "error (nil)");
        break;
    case LUA_TBOOLEAN:
        snprintf(buf, size, "error (%s)", lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TTABLE: {
        json_object *j = NULL;
        weft_error e;
        if (sbx_to_json_path(L, idx, "error", &j, &e) == 0) {
            snprintf(buf, size, "error %s",
                     json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE));
            json_object_put(j);
        } else {
            snprintf(buf, size, "error object is a table (%.400s)", e.msg);
        }
        break;
    }
    default:
        snprintf(buf, size, "error object is a %s value", lua_typename(L, type));
        break;
    }
}

static void limits_begin(sbx *s)
{
    s->mem_hit = s->instr_hit = s->time_hit = s->aborting = 0;
    s->instr_used = 0;
    s->match_steps = 0;
    s->deadline_ms = wu_mono_ms() + (int64_t)s->time_cap_ms;
    s->limit = s->used + s->mem_cap;
    s->capped = 1;
}

/* Garbage from a script that hit a limit can be large: give it back now. */
static void limits_end(sbx *s)
{
    s->capped = 0;
    if (s->mem_hit || s->instr_hit || s->time_hit) lua_gc(s->L, LUA_GCCOLLECT);
}

static int limit_error(sbx *s, weft_error *err)
{
    if (s->mem_hit)
        return wu_err(err, WEFT_ELIMIT, "memory limit (%zu bytes) exceeded", s->mem_cap);
    if (s->time_hit)
        return wu_err(err, WEFT_ELIMIT, "time limit (%llu ms) exceeded",
                      (unsigned long long)s->time_cap_ms);
    return wu_err(err, WEFT_ELIMIT, "instruction limit (%llu) exceeded",
                  (unsigned long long)s->instr_cap);
}

/*
 * Run the function below the top nargs values in a coroutine with the count
 * hook set (and the line hook, if lines). Returns the number of values left
 * on L: nresults results, the error object, or none if the hook yielded.
 * A coroutine that returned normally is as good as new (no frames, an empty
 * stack; lua_sethook resets the count), so it is kept as the spare for the
 * next run; one that failed or yielded is not reused.
 */
static int run_thread(lua_State *L, sbx *s, int nargs, int nresults, int lines, int *status)
{
    lua_State *co = s->co_busy ? NULL : s->co_spare;
    int nres = 0, i;
    luaL_checkstack(L, nresults + 2, NULL);
    if (co) {
        s->co_busy = 1; /* a nested run makes its own */
    } else {
        co = lua_newthread(L); /* anchored on L below the function */
        lua_insert(L, -(nargs + 2));
    }
    if (!lua_checkstack(co, nargs + 1)) {
        if (co == s->co_spare) s->co_busy = 0;
        luaL_error(L, "out of memory");
    }
    lua_xmove(L, co, nargs + 1);
    lua_sethook(co, count_hook, LUA_MASKCOUNT | (lines && s->line_hook ? LUA_MASKLINE : 0),
                s->hook_step);
    *status = lua_resume(co, L, nargs, &nres);
    if (co == s->co_spare) {
        s->co_busy = 0;
        if (*status != LUA_OK) s->co_spare = NULL; /* stays anchored until replaced */
    } else if (*status == LUA_OK && !s->co_spare && lua_checkstack(co, 1)) {
        lua_pushthread(co);
        lua_xmove(co, L, 1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_thread); /* the slot exists: cannot fail */
        s->co_spare = co;
    }
    if (*status == LUA_OK) {
        if (nres > nresults) {
            lua_pop(co, nres - nresults);
            nres = nresults;
        }
        lua_xmove(co, L, nres);
        for (i = nres; i < nresults; i++)
            lua_pushnil(L);
        return nresults;
    }
    if (*status == LUA_YIELD) return 0;
    lua_xmove(co, L, 1);
    return 1;
}

struct call_ctx {
    sbx *s;
    const char *chunkname, *body;
    const char *key; /* in the compiled-script cache; NULL = do not cache */
    int spare_env;   /* runs in s's spare env */
    int env_kept;    /* ... which it left unchanged */
    json_object *input;
    int nargs, nresults;
    int status; /* lua_resume's */
    int syntax; /* the error object is a compile error */
};

/* A reader feeding body_prefix, then the body, to lua_load. */
struct body_reader {
    const char *parts[2];
    size_t lens[2];
    int i;
};

static const char *read_body(lua_State *L, void *ud, size_t *size)
{
    struct body_reader *r = ud;
    (void)L;
    while (r->i < 2) {
        int i = r->i++;
        if (r->lens[i]) {
            *size = r->lens[i];
            return r->parts[i];
        }
    }
    *size = 0;
    return NULL;
}

/* Compile body as a function of (env, input); pushes it or the message. */
static int load_body(lua_State *L, const char *chunkname, const char *body)
{
    struct body_reader r = {{body_prefix, body}, {sizeof body_prefix - 1, strlen(body)}, 0};
    char name[128];
    int rc;
    snprintf(name, sizeof name, "=%s", chunkname ? chunkname : "script");
    rc = lua_load(L, read_body, &r, name, "t");
    if (rc == LUA_OK) {
        /* the chunk's own _ENV (the real globals) is shadowed; drop it anyway */
        lua_pushnil(L);
        lua_setupvalue(L, -2, 1);
    }
    return rc;
}

int sbx_check_syntax(lua_State *L, const char *chunkname, const char *body, weft_error *err)
{
    int rc;
    if (!lua_checkstack(L, 2)) return wu_err(err, WEFT_ENOMEM, "out of memory");
    rc = load_body(L, chunkname, body);
    if (rc == LUA_OK) {
        lua_pop(L, 1);
        return 0;
    }
    rc = wu_err(err, rc == LUA_ERRMEM ? WEFT_ENOMEM : WEFT_EINVAL, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return rc;
}

/*
 * Push the compiled body, from the cache or compiled now (then cached).
 * Returns 0 with the compile error pushed instead. The cache is an array
 * in the registry; cache_ix maps a key to its index, which spares each eval
 * building the key as a Lua string.
 */
static int push_compiled(lua_State *L, struct call_ctx *c)
{
    sbx *s = c->s;
    intptr_t ix = c->key ? (intptr_t)wu_map_get(s->cache_ix, c->key) : 0;
    int cache, fn;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_cache);
    cache = lua_gettop(L);
    if (ix && lua_rawgeti(L, cache, (lua_Integer)ix) == LUA_TFUNCTION) {
        lua_remove(L, cache);
        return 1;
    }
    lua_settop(L, cache);
    if (load_body(L, c->chunkname, c->body) != LUA_OK) return 0;
    fn = lua_gettop(L);
    if (!c->key) return 1;
    if (s->cache_n >= SBX_CACHE_MAX) {
        wu_map *m;
        lua_newtable(L);
        if (!(m = wu_map_new())) {
            lua_settop(L, fn);
            return 1; /* runs uncached */
        }
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_cache);
        lua_replace(L, cache);
        wu_map_free(s->cache_ix);
        s->cache_ix = m;
        s->cache_n = 0;
    }
    ix = ++s->cache_n;
    lua_pushvalue(L, fn);
    lua_rawseti(L, cache, (lua_Integer)ix);
    wu_map_put(s->cache_ix, c->key, (void *)ix); /* on failure it just stays uncached */
    lua_remove(L, cache);
    return 1;
}

/*
 * Push the env for an eval: the spare one, or a new one (which becomes the
 * spare unless the spare is busy: a nested eval).
 */
static void take_env(lua_State *L, struct call_ctx *c)
{
    sbx *s = c->s;
    if (s->env_busy) {
        sbx_push_env(L);
        return;
    }
    if (s->env_spare) {
        lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_env);
    } else {
        sbx_push_env(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_env); /* the slot exists: cannot fail */
        s->env_spare = 1;
    }
    s->env_busy = 1;
    c->spare_env = 1;
}

/*
 * True if the env at idx is as good as new after an eval (its `input`
 * aside). Scripts write to an env or a library proxy only through
 * proxy_newindex or materialize (a new name, a name the frozen table has, a
 * raw look, setmetatable), which set env_written; except for assignments to
 * the names the env holds itself, which are checked here. Nothing outside
 * an eval can reach the env.
 */
static int env_unchanged(lua_State *L, sbx *s, int env)
{
    int top = lua_gettop(L), mts, ok = 0;
    size_t i;
    if (s->env_written || !lua_checkstack(L, 4)) return 0;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_mts);
    mts = lua_gettop(L);
    for (i = 0; i < NLIBS; i++) {
        lua_rawgeti(L, mts, ENV_NAMES + (lua_Integer)i);
        if (lua_rawget(L, env) != LUA_TTABLE || !lua_getmetatable(L, -1) ||
            lua_topointer(L, -1) != s->lib_mt[i])
            goto out;
        lua_settop(L, mts);
    }
    lua_rawgeti(L, mts, ENV_NAMES + (lua_Integer)NLIBS);
    ok = lua_rawget(L, env) == LUA_TTABLE && lua_rawequal(L, -1, env);
out:
    lua_settop(L, top);
    return ok;
}

static int eval_protected(lua_State *L)
{
    struct call_ctx *c = lua_touserdata(L, 1);
    int env, nres;
    take_env(L, c);
    env = lua_gettop(L);
    if (!push_compiled(L, c)) {
        c->syntax = 1;
        c->env_kept = 1;
        return 1;
    }
    lua_pushvalue(L, env);
    push_json(L, c->input, 0);
    lua_pushliteral(L, "input");
    lua_pushvalue(L, -2);
    lua_rawset(L, env);
    c->s->env_written = 0;
    nres = run_thread(L, c->s, 2, 1, 0, &c->status);
    c->env_kept = c->status == LUA_OK && env_unchanged(L, c->s, env);
    return nres;
}

static int call_protected(lua_State *L)
{
    struct call_ctx *c = lua_touserdata(L, 1);
    return run_thread(L, c->s, c->nargs, c->nresults, 1, &c->status);
}

/* Map a protected run to a code; the error object, if any, is on top. */
static int run_result(sbx *s, int pstatus, const struct call_ctx *c, int has_value, weft_error *err)
{
    lua_State *L = s->L;
    char msg[WEFT_ERROR_MAX];
    if (s->mem_hit || s->instr_hit || s->time_hit) return limit_error(s, err);
    if (pstatus == LUA_OK && c->status == LUA_YIELD)
        return wu_err(err, WEFT_ESCRIPT, "%s: the script yielded",
                      c->chunkname ? c->chunkname : "script");
    if (pstatus == LUA_OK && c->status == LUA_OK && !c->syntax) return 0;
    if (has_value)
        error_text(L, -1, msg, sizeof msg);
    else
        snprintf(msg, sizeof msg, "unknown error");
    if (pstatus == LUA_ERRMEM || c->status == LUA_ERRMEM)
        return wu_err(err, WEFT_ENOMEM, "%s", msg);
    if (c->syntax) return wu_err(err, WEFT_EINVAL, "%s", msg);
    if (lua_type(L, -1) != LUA_TSTRING && c->chunkname)
        return wu_err(err, WEFT_ESCRIPT, "%s: %s", c->chunkname, msg);
    return wu_err(err, WEFT_ESCRIPT, "%s", msg);
}

/* The cache key, chunkname "\n" body: in buf if it fits, else malloc'd (NULL if
 * out of memory). */
static char *cache_key(const char *chunkname, const char *body, char *buf, size_t size)
{
    const char *name = chunkname ? chunkname : "";
    size_t a = strlen(name), b = strlen(body);
    char *k = a + b + 2 <= size ? buf : malloc(a + b + 2);
    if (!k) return NULL;
    memcpy(k, name, a);
    k[a] = '\n';
    memcpy(k + a + 1, body, b + 1);
    return k;
}

int sbx_eval(sbx *s, const char *chunkname, const char *body, json_object *input, json_object **out,
             weft_error *err)
{
    lua_State *L = s->L;
    struct call_ctx c = {0};
    char buf[512];
    int top = lua_gettop(L), pstatus, rc;
    *out = NULL;
    if (!body) return wu_err(err, WEFT_EINVAL, "%s: no script", chunkname ? chunkname : "script");
    if (!lua_checkstack(L, 4)) return wu_err(err, WEFT_ENOMEM, "out of memory");
    c.s = s;
    c.chunkname = chunkname;
    c.body = body;
    c.key = cache_key(chunkname, body, buf, sizeof buf);
    c.input = input;
    limits_begin(s);
    lua_pushcfunction(L, eval_protected);
    lua_pushlightuserdata(L, &c);
    pstatus = lua_pcall(L, 1, LUA_MULTRET, 0);
    limits_end(s);
    if (c.key != buf) free((char *)c.key);
    if (c.spare_env) {
        s->env_busy = 0;
        if (!c.env_kept) s->env_spare = 0;
    }
    rc = run_result(s, pstatus, &c, lua_gettop(L) > top, err);
    if (rc == 0) {
        rc = sbx_to_json_path(L, -1, "result", out, err);
        if (rc == WEFT_EINVAL && err) {
            rc = err->code = WEFT_ESCRIPT;
            if (chunkname) wu_err_prefix(err, "%s: ", chunkname);
        } else if (rc == WEFT_EINVAL) {
            rc = WEFT_ESCRIPT;
        } else if (rc == WEFT_ELIMIT && err && chunkname) {
            wu_err_prefix(err, "%s: ", chunkname);
        }
    }
    lua_settop(L, top);
    return rc;
}

int sbx_pcall(sbx *s, int nargs, int nresults, weft_error *err)
{
    lua_State *L = s->L;
    struct call_ctx c = {0};
    int base = lua_gettop(L) - nargs - 1, pstatus, rc;
    if (!lua_checkstack(L, 3 + nresults)) {
        lua_settop(L, base);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    c.s = s;
    c.nargs = nargs;
    c.nresults = nresults;
    lua_pushcfunction(L, call_protected);
    lua_insert(L, base + 1);
    lua_pushlightuserdata(L, &c);
    lua_insert(L, base + 2);
    limits_begin(s);
    pstatus = lua_pcall(L, nargs + 2, LUA_MULTRET, 0);
    limits_end(s);
    rc = run_result(s, pstatus, &c, lua_gettop(L) > base, err);
    if (rc) lua_settop(L, base);
    return rc;
}

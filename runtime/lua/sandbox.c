/*
 * The Lua sandbox: the state and its allocator, the allow-listed libraries
 * and the env proxies over them, limits, and eval and pcall in coroutines
 * under the count hook. See sandbox.h; the metering, the JSON bridge and
 * xpcall are in meter.c, json.c and xpcall.c.
 */
#include "lua/sandbox_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>
#include <lualib.h>

#include "base/util.h"

#define SBX_DEFAULT_MEM ((size_t)32 << 20)
#define SBX_DEFAULT_INSTR 10000000u
#define SBX_DEFAULT_TIME_MS 5000u
#define SBX_DEFAULT_RESULT ((size_t)16 << 20)
#define SBX_HOOK_STEP 1000
#define SBX_CACHE_MAX 512

/*
 * Scripts are compiled as this prefix followed by the body, on the same line
 * so error line numbers match the user's. Unlike `return function(...) body
 * end`, a body cannot close the wrapper early and run code outside it.
 */
static const char body_prefix[] = "local _ENV, input = ...; ";

/* Registry keys: only their addresses matter. reg_backing is also the key,
 * in a proxy's metatable, of the frozen table behind the proxy. reg_env and
 * reg_thread keep the sbx's spare env and coroutine alive. */
static char reg_mts, reg_cache, reg_backing, reg_env, reg_thread;

/* Safe base functions; those that see a table raw, or its metatable, are
 * replaced by the proxy-aware versions in base_wrapped below. */
static const char *const base_names[] = {
    "assert", "error",    "ipairs",   "pcall", "rawequal", "rawlen",
    "select", "tonumber", "tostring", "type",  "_VERSION", NULL,
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
_Static_assert(NLIBS == SBX_NLIBS, "sbx.lib_mt has a slot per library");
#define ENV_MT ((lua_Integer)NLIBS + 1) /* index of the env metatable in reg_mts */
#define ENV_NAMES (ENV_MT + 1)          /* then the names of the libraries, then "_G" */

/* Left out of the library copies: dump makes bytecode; randomseed would let
 * one script fix the random sequence the next one sees. */
static const char *const dropped[] = {"dump", "randomseed", NULL};

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
int sbx_push_backing(lua_State *L, int idx)
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
    if (!sbx_push_backing(L, idx)) return;
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
    if (sbx_push_backing(L, 1)) {
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
    sbx_set_xpcall(L, base);
    make_proxy_mt(L);
    lua_rawseti(L, mts, ENV_MT);
    for (i = 0; i < NLIBS; i++) {
        int lib, copy;
        /* as globals of the real _G, which no script can reach */
        luaL_requiref(L, libs[i].name, libs[i].open, 1);
        lib = lua_gettop(L);
        /* in the real tables too: string methods ("").rep reach those */
        sbx_meter_lib(L, lib, libs[i].name);
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

    sbx_json_init(L);

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

size_t sbx_result_cap(lua_State *L)
{
    /* a state of the sandbox counts against its limit; any other does not */
    return lua_getallocf(L, NULL) == sbx_alloc ? sbx_of(L)->result_cap : SIZE_MAX;
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
    lua_sethook(co, sbx_count_hook, LUA_MASKCOUNT | (lines && s->line_hook ? LUA_MASKLINE : 0),
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
    sbx_push_json(L, c->input);
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

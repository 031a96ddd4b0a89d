/*
 * What the files of the Lua sandbox share (private to runtime/lua/): the
 * sbx itself and the pieces sandbox.c puts together. Prefix sbx_. The
 * public API is sandbox.h.
 *
 *   sandbox.c  the state, the allow-listed libraries and env proxies,
 *              limits and hooks, eval and pcall
 *   meter.c    the instruction charge, the count hook, metered C calls
 *   json.c     the JSON <-> Lua bridge and the result size count
 *   xpcall.c   the sandbox's xpcall, written in Lua
 */
#ifndef WEFT_LUA_SANDBOX_INT_H
#define WEFT_LUA_SANDBOX_INT_H

#include "lua/sandbox.h"
#include "base/util.h"

#define SBX_NLIBS 4 /* the libraries of the env: string, table, math, utf8 */

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
    const void *lib_mt[SBX_NLIBS]; /* the proxy metatables, to recognise proxies */
};

/* The sbx whose allocator L uses (only for a sandbox's state). */
static inline sbx *sbx_of(lua_State *L)
{
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

/*
 * The count hook of every sandboxed run: charges instructions, and once a
 * limit is hit yields out of the script (or, where it cannot yield, raises
 * an error and fires on every instruction). Also calls the line hook.
 */
void sbx_count_hook(lua_State *L, lua_Debug *ar);

/* Replace the functions of the library (named name, its table at lib) that
 * do unbounded work in one C call with metered ones; string also gets
 * weft's pattern matcher, metered. Raises on out of memory. */
void sbx_meter_lib(lua_State *L, int lib, const char *name);

/* Sets base.xpcall (the table at index base) from the Lua-coded xpcall.
 * Raises on error. */
void sbx_set_xpcall(lua_State *L, int base);

/* If the value at idx is an env or library proxy, push the frozen table
 * behind it and return 1; else push nothing and return 0. */
int sbx_push_backing(lua_State *L, int idx);

/* The result limit of conversions on L: the sandbox's, or SIZE_MAX for a
 * state that is not a sandbox's. */
size_t sbx_result_cap(lua_State *L);

/* Make the shared metatable of arrays pushed from JSON (once per state;
 * raises on out of memory). */
void sbx_json_init(lua_State *L);

#endif

/*
 * The Lua sandbox (DESIGN.md §4) for LAMBDA scripts, decision expressions
 * and loop conditions, and the JSON <-> Lua bridge. Prefix sbx_.
 *
 * One sbx owns one lua_State and is not thread-safe: use one per thread.
 * Each eval runs in a fresh environment (so one script cannot change what the
 * next sees; an env no script has changed is reused, as is the coroutine of
 * a script that returned normally) holding only safe parts of
 * base/string/table/math/utf8; no
 * io/os/package/debug/load/loadstring/require/dofile/collectgarbage, no
 * string.dump, text chunks only. Limits: a memory cap enforced by the
 * allocator and an instruction budget enforced by a count hook that pcall
 * cannot swallow. Compiled scripts are cached by their text.
 */
#ifndef WEFT_LUA_SANDBOX_H
#define WEFT_LUA_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include <lua.h>
#include "weft/plugin.h"

typedef struct sbx sbx;

typedef struct sbx_limits {
    size_t mem_bytes;      /* per evaluation; 0 = default (32 MiB) */
    uint64_t instructions; /* per evaluation; 0 = default (10 million) */
    /* Wall clock per evaluation; 0 = default (5000 ms). A backstop for
     * library calls (string.find on a big string in a loop) that cost far
     * more than the instructions that make them. */
    uint64_t time_ms;
    /* The size of a result (or error object) converted to JSON, counted as
     * JSON text while converting, each value at least 16 bytes and each
     * table at least 64 (about what json-c allocates for them): a table or
     * string referenced many times counts every time. 0 = default (16 MiB). */
    size_t result_bytes;
} sbx_limits;

sbx *sbx_new(const sbx_limits *limits, weft_error *err);
void sbx_free(sbx *s);

/*
 * Run `body` (a Lua function body: statements ending in `return ...`) with
 * the global `input` bound to `input` (borrowed; NULL = nil). On success
 * returns 0 and *out = the first returned value as JSON (caller owns; NULL for
 * nil). Errors: WEFT_EINVAL syntax error ("<chunkname>:3: ..."), WEFT_ESCRIPT
 * runtime error (the Lua message), WEFT_ELIMIT with "memory limit (N bytes)
 * exceeded", "instruction limit (N) exceeded" or "time limit (N ms) exceeded".
 */
int sbx_eval(sbx *s, const char *chunkname, const char *body, json_object *input, json_object **out,
             weft_error *err);

/* The lua_State (for the definition DSL, which builds on the same env). */
lua_State *sbx_state(sbx *s);

/*
 * Push a fresh sandbox environment table on L's stack: safe globals, and
 * per-env proxies for the library tables. The base functions and library
 * tables are frozen, built once per state; the env and proxies read through
 * to them and turn into plain per-env copies on the first write to an
 * existing name or raw look (rawget/rawset/next/pairs/setmetatable), so a
 * script cannot change what another env sees. getmetatable on the env or a
 * proxy answers nil, as for a plain table.
 */
void sbx_push_env(lua_State *L);

/*
 * Push a JSON value as Lua (objects/arrays -> tables, null -> nil). Arrays
 * get a shared, protected metatable with __jsontype = "array" so they convert
 * back as arrays (also when empty). May raise a Lua error (memory, nesting
 * deeper than 200): call it in protected mode.
 */
void sbx_push_json(lua_State *L, json_object *v);

/*
 * Convert the Lua value at idx to JSON (*out caller-owned; NULL for nil).
 * Tables: a metatable field __jsontype = "array" / "object" decides;
 * otherwise keys 1..n (n >= 1) make an array, anything else an object (an
 * empty table is an object). A metatable field __jsonorder (array of keys)
 * orders an object's members. Functions, userdata, cycles, NaN/inf, and
 * nesting deeper than 200 give WEFT_EINVAL naming the key path; a value
 * over the sandbox's result limit (see sbx_limits; none for a state that is
 * not a sandbox's) WEFT_ELIMIT.
 */
int sbx_to_json(lua_State *L, int idx, json_object **out, weft_error *err);

/* Same, naming the value `root` in messages ("result.items[3]: ..."). */
int sbx_to_json_path(lua_State *L, int idx, const char *root, json_object **out, weft_error *err);

/*
 * Call the function below the top nargs values of sbx_state(s)'s stack in a
 * fresh coroutine under the same limits as sbx_eval (it runs in whatever
 * environment the function already has). On success returns 0 with exactly
 * nresults results in place of the function and its arguments; otherwise
 * pops them and returns WEFT_ESCRIPT (the Lua message), WEFT_ELIMIT or
 * WEFT_ENOMEM.
 */
int sbx_pcall(sbx *s, int nargs, int nresults, weft_error *err);

/*
 * Check that body compiles as sbx_eval would compile it, without running
 * it. Returns 0, or WEFT_EINVAL with "<chunkname>:LINE: message".
 */
int sbx_check_syntax(lua_State *L, const char *chunkname, const char *body, weft_error *err);

/*
 * Also call hook (NULL: none) on every LUA_HOOKLINE event of the code that
 * sbx_pcall runs (not sbx_eval's scripts). It runs inside the count hook:
 * it may inspect the stack, not yield or raise errors.
 */
void sbx_set_line_hook(sbx *s, lua_Hook hook);

/* Bytes the state currently holds (for tests and stats). */
size_t sbx_mem_used(const sbx *s);

#endif

/*
 * Lua 5.4 pattern matching (string.find, match, gmatch, gsub) with a meter,
 * for the sandbox. Prefix lpat_.
 *
 * Lua's own matcher backtracks inside one C call that no hook can reach:
 * ("a"):rep(3000):find((".-"):rep(6) .. "b") runs for hours. These functions
 * match the same patterns with the same results and errors, and call a meter
 * every LPAT_TICK steps (a step: one character tested against a pattern item,
 * or one backtracking attempt), which may raise a Lua error to stop them.
 */
#ifndef WEFT_LUA_PATTERN_H
#define WEFT_LUA_PATTERN_H

#include <stddef.h>
#include <lua.h>

#define LPAT_TICK 1024

/* Called with the steps taken since the last call; may raise a Lua error. */
typedef void (*lpat_meter)(lua_State *L, size_t steps);

/*
 * Set find, match, gmatch and gsub of the table at idx (a string library) to
 * the metered versions. Raises a Lua error when out of memory: call it in
 * protected mode.
 */
void lpat_install(lua_State *L, int idx, lpat_meter meter);

#endif

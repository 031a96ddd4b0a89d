/*
 * The sandbox's xpcall, written in Lua. Prefix sbx_.
 */
#include "lua/sandbox_int.h"

#include <lauxlib.h>

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

void sbx_set_xpcall(lua_State *L, int base)
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

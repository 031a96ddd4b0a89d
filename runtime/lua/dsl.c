#include "lua/dsl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>

#include "lua/sandbox.h"
#include "base/util.h"

/* lua/weft.lua, embedded by build-aux/embed.sh */
extern const char weft_lua_src[];
extern const unsigned long weft_lua_src_len;

/* Not "=weft.lua": a definition file of that name must not match it. */
#define MODULE_CHUNKNAME "=[weft module]"

struct prep {
    const char *chunkname;
    const char *src;
    size_t len;
    char source[128]; /* "=order.lua": the file's source name in lua_Debug */
    int last_line;    /* the last line of the file that started running */
    int syntax;       /* the file did not compile; the message is on the stack */
};

static char reg_prep; /* registry key of the struct prep being compiled */

static struct prep *prep_of(lua_State *L)
{
    struct prep *p;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &reg_prep);
    p = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return p;
}

/* Track the last line run in the file, for builders reached by a tail call. */
static void line_hook(lua_State *L, lua_Debug *ar)
{
    struct prep *p = prep_of(L);
    if (p && lua_getinfo(L, "S", ar) && !strcmp(ar->source, p->source))
        p->last_line = ar->currentline;
}

/*
 * caller_line(): the line of the innermost frame running the definition
 * file, so builders report where they were called, also through helper
 * functions or pcall. `return w.workflow { ... }` is a tail call that leaves
 * no frame of the file: then the last line the file ran is the call's.
 */
static int l_caller_line(lua_State *L)
{
    struct prep *p = prep_of(L);
    lua_Debug ar;
    int level;
    for (level = 1; p && lua_getstack(L, level, &ar); level++) {
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0 && !strcmp(ar.source, p->source)) {
            lua_pushinteger(L, ar.currentline);
            return 1;
        }
    }
    lua_pushinteger(L, p ? p->last_line : 0);
    return 1;
}

/* check_script(body): nil if it compiles as a sandbox script, else the message. */
static int l_check_script(lua_State *L)
{
    const char *body = luaL_checkstring(L, 1);
    weft_error e;
    if (sbx_check_syntax(L, "[string]", body, &e) == 0) return 0;
    lua_pushstring(L, e.msg);
    return 1;
}

/* parse_duration(v): milliseconds, or nil and a message. Numbers are seconds. */
static int l_parse_duration(lua_State *L)
{
    weft_error e;
    int64_t ms;
    switch (lua_type(L, 1)) {
    case LUA_TNUMBER: {
        double d = lua_tonumber(L, 1);
        if (!isfinite(d) || d < 0 || d > 9.0e12) {
            lua_pushnil(L);
            lua_pushfstring(L, "bad duration %f (must be >= 0 seconds)", (lua_Number)d);
            return 2;
        }
        ms = (int64_t)llround(d * 1000.0);
        break;
    }
    case LUA_TSTRING:
        if (wu_parse_duration_str(lua_tostring(L, 1), &ms, &e)) {
            lua_pushnil(L);
            lua_pushstring(L, e.msg);
            return 2;
        }
        break;
    default:
        lua_pushnil(L);
        lua_pushfstring(L, "bad duration (a %s; use e.g. \"5s\" or a number of seconds)",
                        luaL_typename(L, 1));
        return 2;
    }
    lua_pushinteger(L, (lua_Integer)ms);
    return 1;
}

/* require(name): the weft module (upvalue 1) and nothing else. */
static int l_require(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (strcmp(name, "weft") != 0)
        return luaL_error(L, "module '%s' is not available (definitions can only require \"weft\")",
                          name);
    lua_pushvalue(L, lua_upvalueindex(1));
    return 1;
}

/* Protected: push weft.lua's chunk (in its own sandbox env) and its 4 arguments. */
static int prepare_module(lua_State *L)
{
    struct prep *p = lua_touserdata(L, 1);
    if (luaL_loadbufferx(L, weft_lua_src, (size_t)weft_lua_src_len, MODULE_CHUNKNAME, "t") !=
        LUA_OK)
        return lua_error(L);
    sbx_push_env(L);
    lua_setupvalue(L, -2, 1);
    lua_pushlightuserdata(L, p);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_prep);
    lua_pushstring(L, p->source + 1);
    lua_pushcfunction(L, l_caller_line);
    lua_pushcfunction(L, l_check_script);
    lua_pushcfunction(L, l_parse_duration);
    return 5;
}

/* Protected, with the weft module as argument 2: push the definition's chunk
 * in a sandbox env whose require gives that module. */
static int prepare_file(lua_State *L)
{
    struct prep *p = lua_touserdata(L, 1);
    if (luaL_loadbufferx(L, p->src, p->len, p->source, "t") != LUA_OK) {
        p->syntax = 1;
        return 1;
    }
    sbx_push_env(L);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, l_require, 1);
    lua_setfield(L, -2, "require");
    lua_setupvalue(L, -2, 1);
    return 1;
}

/* Errors from the file read "order.lua:LINE: ..."; others get its name. */
static int file_error(const struct prep *p, int rc, weft_error *err)
{
    const char *name = p->source + 1;
    size_t n = strlen(name);
    if (rc == WEFT_ESCRIPT) rc = WEFT_EINVAL;
    if (!err) return rc;
    err->code = rc;
    if (strncmp(err->msg, name, n) != 0 || err->msg[n] != ':') wu_err_prefix(err, "%s: ", name);
    return rc;
}

int dsl_compile(const char *chunkname, const char *src, size_t len, json_object **def,
                json_object **lines, weft_error *err)
{
    struct prep p = {chunkname ? chunkname : "definition", src, len, "", 0, 0};
    sbx *s;
    lua_State *L;
    int rc;

    *def = NULL;
    if (lines) *lines = NULL;
    s = sbx_new(NULL, err);
    if (!s) return WEFT_ENOMEM;
    L = sbx_state(s);
    snprintf(p.source, sizeof p.source, "=%s", p.chunkname);
    sbx_set_line_hook(s, line_hook);

    /* stack: 1 = w, 2 = inspect */
    lua_pushcfunction(L, prepare_module);
    lua_pushlightuserdata(L, &p);
    if (lua_pcall(L, 1, 5, 0) != LUA_OK) {
        rc = wu_err(err, WEFT_ENOMEM, "cannot load the weft module: %s", lua_tostring(L, -1));
        goto out;
    }
    if ((rc = sbx_pcall(s, 4, 2, err))) {
        wu_err_prefix(err, "cannot load the weft module: ");
        goto out;
    }

    /* 3 = what the file returned */
    lua_pushcfunction(L, prepare_file);
    lua_pushlightuserdata(L, &p);
    lua_pushvalue(L, 1);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        rc = wu_err(err, WEFT_ENOMEM, "%s: %s", p.chunkname, lua_tostring(L, -1));
        goto out;
    }
    if (p.syntax) {
        rc = file_error(&p, wu_err(err, WEFT_EINVAL, "%s", lua_tostring(L, -1)), err);
        goto out;
    }
    if ((rc = sbx_pcall(s, 0, 1, err))) {
        rc = file_error(&p, rc, err);
        goto out;
    }

    /* 4 = its lines table or nil, 5 = what it is */
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    if ((rc = sbx_pcall(s, 1, 2, err))) goto out;
    if (lua_isnil(L, 4)) {
        rc = wu_err(err, WEFT_EINVAL, "%s: the file must return w.workflow { ... } (got %s)",
                    p.chunkname, lua_tostring(L, 5));
        goto out;
    }
    if ((rc = sbx_to_json_path(L, 3, "workflow", def, err))) {
        wu_err_prefix(err, "%s: ", p.chunkname);
        goto out;
    }
    if (lines && (rc = sbx_to_json_path(L, 4, "lines", lines, err))) {
        wu_err_prefix(err, "%s: ", p.chunkname);
        json_object_put(*def);
        *def = NULL;
    }
out:
    sbx_free(s);
    return rc;
}

int dsl_compile_file(const char *path, json_object **def, json_object **lines, weft_error *err)
{
    const char *base = strrchr(path, '/');
    char *src;
    size_t len;
    int rc;
    *def = NULL;
    if (lines) *lines = NULL;
    if ((rc = wu_read_file(path, &src, &len, err))) return rc;
    rc = dsl_compile(base ? base + 1 : path, src, len, def, lines, err);
    free(src);
    return rc;
}

int dsl_load(const char *path, json_object **def, json_object **lines, weft_error *err)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(path);
    char *text;
    int rc;
    if (lines) *lines = NULL;
    if (n > 4 && !strcmp(path + n - 4, ".lua")) return dsl_compile_file(path, def, lines, err);
    if ((rc = wu_read_file(path, &text, NULL, err))) return rc;
    rc = wu_parse_json(base, text, def, err);
    free(text);
    return rc;
}

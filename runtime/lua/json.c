/*
 * The JSON <-> Lua bridge of the sandbox: JSON values pushed as Lua, Lua
 * values converted to JSON with their key path in messages and their size
 * counted against the result limit. Prefix sbx_.
 */
#include "lua/sandbox_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lauxlib.h>

#include "base/util.h"

/* What a value counts at least against the result limit: about what json-c
 * allocates for it, so that a result of many small values stays bounded in
 * memory as well as in text. */
#define SBX_VALUE_MIN 16
#define SBX_TABLE_MIN 64
#define SBX_JSON_DEPTH 200
#define SBX_PATH_MAX 200

/* Registry key of the metatable of arrays pushed from JSON: only its address matters. */
static char reg_array_mt;

void sbx_json_init(lua_State *L)
{
    /* shared by every array pushed from JSON, so protected against edits */
    lua_createtable(L, 0, 2);
    lua_pushliteral(L, "array");
    lua_setfield(L, -2, "__jsontype");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &reg_array_mt);
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
    char *fixed; /* the key written by wu_utf8's rule, when it was not UTF-8 (owned) */
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
    char shown[96];
    size_t i, o = 0;
    int ident = len > 0 && !(k[0] >= '0' && k[0] <= '9');
    for (i = 0; i < len && ident; i++)
        ident = k[i] == '_' || (k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
                (k[i] >= '0' && k[i] <= '9');
    if (ident) {
        tj_append(t, ".%.*s", (int)len, k);
        return;
    }
    /* as a Lua literal would write it: a NUL or a quote shows */
    for (i = 0; i < len && i < 40 && o + 3 < sizeof shown; i++) {
        if (!k[i] || k[i] == '"' || k[i] == '\\') shown[o++] = '\\';
        shown[o++] = k[i] ? k[i] : '0';
    }
    tj_append(t, "[\"%.*s\"]", (int)o, shown);
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
    if (sbx_push_backing(L, idx)) idx = lua_gettop(L);
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
            size_t fixed;
            all_int = 0;
            x->key = lua_tolstring(L, -2, &x->klen);
            tj_append_key(t, x->key, x->klen);
            if (memchr(x->key, 0, x->klen)) {
                /* json-c's keys end at a NUL: "a\0b" would become "a" */
                n++;
                rc = tj_fail(t, "a JSON object key cannot hold a NUL byte (\\0)");
                goto done;
            }
            if ((fixed = wu_utf8_len(x->key, x->klen)) != x->klen) {
                if ((rc = tj_charge(t, fixed - x->klen, 0))) {
                    n++;
                    goto done;
                }
                if (!(x->fixed = malloc(fixed + 1))) {
                    n++;
                    rc = wu_err(t->err, WEFT_ENOMEM, "%s: out of memory", t->path);
                    goto done;
                }
                x->klen = wu_utf8_copy(x->fixed, fixed + 1, x->key, x->klen);
                x->key = x->fixed;
            }
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
        for (k = 1; k < n; k++)
            if (!entry_cmp(&e[k - 1], &e[k])) {
                /* [1] and ["1"], or two keys alike once made UTF-8: one would be lost */
                tj_append_key(t, entry_key(&e[k]), e[k].klen);
                rc = tj_fail(t, "two keys of the table are this one in JSON");
                goto done;
            }
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
    for (k = 0; k < n; k++) {
        json_object_put(e[k].val);
        free(e[k].fixed);
    }
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
        size_t fixed = wu_utf8_len(p, len);
        char *b;
        if (fixed > INT32_MAX) return tj_fail(t, "string too long for JSON");
        if (fixed == len) {
            *out = json_object_new_string_len(p, (int)len);
            break;
        }
        /* not UTF-8 (Lua strings are bytes): by the one rule, as JSON must be */
        if ((rc = tj_charge(t, fixed - len, 0))) return rc;
        if (!(b = malloc(fixed + 1))) break;
        *out = json_object_new_string_len(b, (int)wu_utf8_copy(b, fixed + 1, p, len));
        free(b);
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
    t.cap = sbx_result_cap(L);
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

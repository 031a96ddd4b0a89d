#include "lua/pattern.h"

#include <ctype.h>
#include <string.h>
#include <lauxlib.h>

#define ESC '%'
#define SPECIALS "^$*+?.([%-"
#define MAX_CAPTURES 32
#define MAX_DEPTH 200 /* nested pattern items before "pattern too complex" */
#define CAP_OPEN (-1)
#define CAP_POS (-2)

/* The meter, in a userdata that is upvalue 1 of every function here. */
struct meter_box {
    lpat_meter fn;
};

struct mstate {
    lua_State *L;
    const char *src, *src_end;
    const char *pat_end;
    int depth; /* nesting left */
    int ncap;
    struct {
        const char *at;
        ptrdiff_t len; /* or CAP_OPEN, CAP_POS */
    } cap[MAX_CAPTURES];
    size_t steps;
    lpat_meter meter;
};

static void step(struct mstate *m)
{
    if (++m->steps >= LPAT_TICK) {
        size_t n = m->steps;
        m->steps = 0;
        m->meter(m->L, n);
    }
}

static void mstate_init(struct mstate *m, lua_State *L, lpat_meter meter, const char *s, size_t ls,
                        const char *p, size_t lp)
{
    m->L = L;
    m->meter = meter;
    m->src = s;
    m->src_end = s + ls;
    m->pat_end = p + lp;
    m->steps = 0;
}

/* Before each attempt at a new position. */
static void mstate_reset(struct mstate *m)
{
    m->ncap = 0;
    m->depth = MAX_DEPTH;
}

/* Charge what is left, so short matches count too. */
static void mstate_done(struct mstate *m)
{
    if (m->steps) {
        size_t n = m->steps;
        m->steps = 0;
        m->meter(m->L, n);
    }
}

/* Work over n bytes of pattern in one go (a set scanned): a step per 16. */
static void charge_bytes(struct mstate *m, size_t n)
{
    m->steps += n / 16;
    step(m);
}

/* The end of the single-character class starting at p. */
static const char *class_end(struct mstate *m, const char *p)
{
    const char *start = p;
    char c = *p++;
    if (c == ESC) {
        if (p >= m->pat_end) luaL_error(m->L, "malformed pattern (ends with '%%')");
        return p + 1;
    }
    if (c != '[') return p;
    if (p < m->pat_end && *p == '^') p++;
    /* the first character of a set is taken as is, even ']' */
    do {
        if (p >= m->pat_end) luaL_error(m->L, "malformed pattern (missing ']')");
        c = *p++;
        if (c == ESC && p < m->pat_end) p++;
    } while (p >= m->pat_end || *p != ']');
    charge_bytes(m, (size_t)(p - start));
    return p + 1;
}

/* Does c belong to the class letter cl (%a, %d, ... or %A, %D, ...)? */
static int class_has(int c, int cl)
{
    int r;
    switch (tolower(cl)) {
    case 'a':
        r = isalpha(c);
        break;
    case 'c':
        r = iscntrl(c);
        break;
    case 'd':
        r = isdigit(c);
        break;
    case 'g':
        r = isgraph(c);
        break;
    case 'l':
        r = islower(c);
        break;
    case 'p':
        r = ispunct(c);
        break;
    case 's':
        r = isspace(c);
        break;
    case 'u':
        r = isupper(c);
        break;
    case 'w':
        r = isalnum(c);
        break;
    case 'x':
        r = isxdigit(c);
        break;
    case 'z':
        r = c == 0;
        break; /* deprecated in Lua, still there */
    default:
        return cl == c; /* %. and the like: the character itself */
    }
    r = r != 0;
    return isupper(cl) ? !r : r;
}

/* Is c in the set from p ('[') to ep (its ']')? */
static int set_has(int c, const char *p, const char *ep)
{
    int want = 1;
    p++;
    if (*p == '^') {
        want = 0;
        p++;
    }
    while (p < ep) {
        if (*p == ESC) {
            p++;
            if (class_has(c, (unsigned char)*p)) return want;
            p++;
        } else if (p + 2 < ep && p[1] == '-') {
            if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2]) return want;
            p += 3;
        } else {
            if ((unsigned char)*p == c) return want;
            p++;
        }
    }
    return !want;
}

/* Does the character at s match the class from p to ep? */
static int single(struct mstate *m, const char *s, const char *p, const char *ep)
{
    int c;
    if (*p == '[')
        charge_bytes(m, (size_t)(ep - p));
    else
        step(m);
    if (s >= m->src_end) return 0;
    c = (unsigned char)*s;
    switch (*p) {
    case '.':
        return 1;
    case ESC:
        return class_has(c, (unsigned char)p[1]);
    case '[':
        return set_has(c, p, ep - 1);
    default:
        return (unsigned char)*p == c;
    }
}

static const char *do_match(struct mstate *m, const char *s, const char *p);

static const char *balance(struct mstate *m, const char *s, const char *p)
{
    int open, close, depth = 1;
    if (p + 1 >= m->pat_end) luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
    if (s >= m->src_end || *s != *p) return NULL;
    open = *p;
    close = p[1];
    while (++s < m->src_end) {
        step(m);
        if (*s == close) {
            if (--depth == 0) return s + 1;
        } else if (*s == open) {
            depth++;
        }
    }
    return NULL;
}

/* Greedy: take as many as match, then give back one at a time. */
static const char *greedy(struct mstate *m, const char *s, const char *p, const char *ep)
{
    ptrdiff_t n = 0;
    while (single(m, s + n, p, ep))
        n++;
    for (; n >= 0; n--) {
        const char *r = do_match(m, s + n, ep + 1);
        if (r) return r;
    }
    return NULL;
}

/* Lazy: try the rest first, then take one more. */
static const char *lazy(struct mstate *m, const char *s, const char *p, const char *ep)
{
    for (;;) {
        const char *r = do_match(m, s, ep + 1);
        if (r) return r;
        if (!single(m, s, p, ep)) return NULL;
        s++;
    }
}

static const char *open_capture(struct mstate *m, const char *s, const char *p, ptrdiff_t what)
{
    const char *r;
    if (m->ncap >= MAX_CAPTURES) luaL_error(m->L, "too many captures");
    m->cap[m->ncap].at = s;
    m->cap[m->ncap].len = what;
    m->ncap++;
    if (!(r = do_match(m, s, p))) m->ncap--;
    return r;
}

static const char *close_capture(struct mstate *m, const char *s, const char *p)
{
    int i;
    const char *r;
    for (i = m->ncap - 1; i >= 0; i--)
        if (m->cap[i].len == CAP_OPEN) break;
    if (i < 0) luaL_error(m->L, "invalid pattern capture");
    m->cap[i].len = s - m->cap[i].at;
    if (!(r = do_match(m, s, p))) m->cap[i].len = CAP_OPEN;
    return r;
}

static int capture_index(struct mstate *m, int c)
{
    int i = c - '1';
    if (i < 0 || i >= m->ncap || m->cap[i].len == CAP_OPEN)
        return luaL_error(m->L, "invalid capture index %%%d", i + 1);
    return i;
}

static const char *back_ref(struct mstate *m, const char *s, int c)
{
    int i = capture_index(m, c);
    size_t len;
    if (m->cap[i].len < 0) return NULL; /* a position capture matches nothing */
    len = (size_t)m->cap[i].len;
    m->steps += len / 16;
    step(m);
    if ((size_t)(m->src_end - s) >= len && memcmp(m->cap[i].at, s, len) == 0) return s + len;
    return NULL;
}

/*
 * Match pattern p against the subject at s: the end of the match, or NULL.
 * Items that end a pattern loop here rather than recurse.
 */
static const char *do_match(struct mstate *m, const char *s, const char *p)
{
    if (m->depth-- == 0) luaL_error(m->L, "pattern too complex");
    for (;;) {
        const char *ep;
        step(m);
        if (p >= m->pat_end) break;
        if (*p == '(') {
            s = p + 1 < m->pat_end && p[1] == ')' ? open_capture(m, s, p + 2, CAP_POS)
                                                  : open_capture(m, s, p + 1, CAP_OPEN);
            break;
        }
        if (*p == ')') {
            s = close_capture(m, s, p + 1);
            break;
        }
        if (*p == '$' && p + 1 == m->pat_end) {
            if (s != m->src_end) s = NULL;
            break;
        }
        if (*p == ESC && p + 1 < m->pat_end && p[1] == 'b') {
            if ((s = balance(m, s, p + 2))) {
                p += 4;
                continue;
            }
            break;
        }
        if (*p == ESC && p + 1 < m->pat_end && p[1] == 'f') {
            int prev, cur;
            p += 2;
            if (p >= m->pat_end || *p != '[')
                luaL_error(m->L, "missing '[' after '%%f' in pattern");
            ep = class_end(m, p);
            prev = s == m->src ? 0 : (unsigned char)s[-1];
            cur = s < m->src_end ? (unsigned char)*s : 0;
            charge_bytes(m, 2 * (size_t)(ep - p));
            if (!set_has(prev, p, ep - 1) && set_has(cur, p, ep - 1)) {
                p = ep;
                continue;
            }
            s = NULL;
            break;
        }
        if (*p == ESC && p + 1 < m->pat_end && isdigit((unsigned char)p[1])) {
            if ((s = back_ref(m, s, (unsigned char)p[1]))) {
                p += 2;
                continue;
            }
            break;
        }
        ep = class_end(m, p);
        if (!single(m, s, p, ep)) {
            /* zero occurrences are fine for these */
            if (ep < m->pat_end && (*ep == '*' || *ep == '?' || *ep == '-')) {
                p = ep + 1;
                continue;
            }
            s = NULL;
            break;
        }
        if (ep < m->pat_end && *ep == '?') {
            const char *r = do_match(m, s + 1, ep + 1);
            if (r) {
                s = r;
                break;
            }
            p = ep + 1;
            continue;
        }
        if (ep < m->pat_end && *ep == '+') {
            s = greedy(m, s + 1, p, ep);
            break;
        }
        if (ep < m->pat_end && *ep == '*') {
            s = greedy(m, s, p, ep);
            break;
        }
        if (ep < m->pat_end && *ep == '-') {
            s = lazy(m, s, p, ep);
            break;
        }
        s++;
        p = ep;
    }
    m->depth++;
    return s;
}

/* Push capture i (or the whole match s..e when there are none and i is 0). */
static void push_capture(struct mstate *m, int i, const char *s, const char *e)
{
    if (i >= m->ncap) {
        if (i != 0) luaL_error(m->L, "invalid capture index %%%d", i + 1);
        lua_pushlstring(m->L, s, (size_t)(e - s));
        return;
    }
    if (m->cap[i].len == CAP_OPEN) luaL_error(m->L, "unfinished capture");
    if (m->cap[i].len == CAP_POS)
        lua_pushinteger(m->L, (lua_Integer)(m->cap[i].at - m->src) + 1);
    else
        lua_pushlstring(m->L, m->cap[i].at, (size_t)m->cap[i].len);
}

/* Push every capture, or the whole match if s is set and there are none. */
static int push_captures(struct mstate *m, const char *s, const char *e)
{
    int n = m->ncap == 0 && s ? 1 : m->ncap, i;
    luaL_checkstack(m->L, n, "too many captures");
    for (i = 0; i < n; i++)
        push_capture(m, i, s, e);
    return n;
}

static int has_specials(const char *p, size_t lp)
{
    size_t i;
    for (i = 0; i < lp; i++)
        if (p[i] && strchr(SPECIALS, p[i])) return 1;
    return 0;
}

/* A plain substring search, metered (memcmp at each candidate). */
static const char *plain_find(struct mstate *m, const char *s, size_t ls, const char *p, size_t lp)
{
    const char *end, *c;
    if (lp == 0) return s;
    if (lp > ls) return NULL;
    end = s + (ls - lp) + 1;
    for (c = s; c < end; c++) {
        if (!(c = memchr(c, *p, (size_t)(end - c)))) return NULL;
        m->steps += lp / 16;
        step(m);
        if (memcmp(c + 1, p + 1, lp - 1) == 0) return c;
    }
    return NULL;
}

/* A 1-based (or negative, from the end) position as an offset: 0..len+1. */
static size_t start_offset(lua_Integer pos, size_t len)
{
    if (pos > 0) return (size_t)pos - 1 > len ? len + 1 : (size_t)pos - 1;
    if (pos == 0 || pos < -(lua_Integer)len) return 0;
    return len - (size_t)(-pos);
}

static lpat_meter meter_of(lua_State *L)
{
    return ((struct meter_box *)lua_touserdata(L, lua_upvalueindex(1)))->fn;
}

static int find_or_match(lua_State *L, int find)
{
    size_t ls, lp, init;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    const char *at;
    struct mstate m;
    int anchored;
    init = start_offset(luaL_optinteger(L, 3, 1), ls);
    if (init > ls) {
        luaL_pushfail(L);
        return 1;
    }
    mstate_init(&m, L, meter_of(L), s, ls, p, lp);
    if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
        const char *r = plain_find(&m, s + init, ls - init, p, lp);
        mstate_done(&m);
        if (!r) {
            luaL_pushfail(L);
            return 1;
        }
        lua_pushinteger(L, (lua_Integer)(r - s) + 1);
        lua_pushinteger(L, (lua_Integer)(r - s) + (lua_Integer)lp);
        return 2;
    }
    anchored = lp > 0 && *p == '^';
    if (anchored) p++;
    at = s + init;
    do {
        const char *e;
        mstate_reset(&m);
        if ((e = do_match(&m, at, p))) {
            mstate_done(&m);
            if (!find) return push_captures(&m, at, e);
            lua_pushinteger(L, (lua_Integer)(at - s) + 1);
            lua_pushinteger(L, (lua_Integer)(e - s));
            return push_captures(&m, NULL, NULL) + 2;
        }
    } while (at++ < m.src_end && !anchored);
    mstate_done(&m);
    luaL_pushfail(L);
    return 1;
}

static int lpat_find(lua_State *L)
{
    return find_or_match(L, 1);
}

static int lpat_match(lua_State *L)
{
    return find_or_match(L, 0);
}

/* gmatch's iterator state: upvalue 4 (1 = meter, 2 = subject, 3 = pattern). */
struct gm_state {
    size_t pos;  /* where the next attempt starts */
    size_t last; /* end of the last match, or (size_t)-1 */
};

static int gmatch_next(lua_State *L)
{
    size_t ls, lp;
    const char *s = lua_tolstring(L, lua_upvalueindex(2), &ls);
    const char *p = lua_tolstring(L, lua_upvalueindex(3), &lp);
    struct gm_state *g = lua_touserdata(L, lua_upvalueindex(4));
    struct mstate m;
    mstate_init(&m, L, meter_of(L), s, ls, p, lp);
    for (; g->pos <= ls; g->pos++) {
        const char *e;
        mstate_reset(&m);
        if ((e = do_match(&m, s + g->pos, p)) && (size_t)(e - s) != g->last) {
            const char *at = s + g->pos;
            g->pos = g->last = (size_t)(e - s);
            mstate_done(&m);
            return push_captures(&m, at, e);
        }
    }
    mstate_done(&m);
    return 0;
}

static int lpat_gmatch(lua_State *L)
{
    size_t ls;
    struct gm_state *g;
    lua_Integer init;
    luaL_checklstring(L, 1, &ls);
    luaL_checkstring(L, 2);
    init = luaL_optinteger(L, 3, 1);
    lua_settop(L, 2);
    g = lua_newuserdatauv(L, sizeof *g, 0);
    g->pos = start_offset(init, ls);
    g->last = (size_t)-1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_rotate(L, 1, 1); /* meter, subject, pattern, state */
    lua_pushcclosure(L, gmatch_next, 4);
    return 1;
}

/* Append a replacement string, with %0-%9 and %%. */
static void add_template(struct mstate *m, luaL_Buffer *b, const char *s, const char *e)
{
    size_t lr, i;
    const char *r = lua_tolstring(m->L, 3, &lr);
    for (i = 0; i < lr; i++) {
        char c = r[i];
        step(m);
        if (c != ESC) {
            luaL_addchar(b, c);
            continue;
        }
        if (++i >= lr) luaL_error(m->L, "invalid use of '%c' in replacement string", ESC);
        c = r[i];
        if (c == ESC) {
            luaL_addchar(b, c);
        } else if (c == '0') {
            luaL_addlstring(b, s, (size_t)(e - s));
        } else if (isdigit((unsigned char)c)) {
            push_capture(m, c - '1', s, e);
            luaL_tolstring(m->L, -1, NULL);
            lua_remove(m->L, -2);
            luaL_addvalue(b);
        } else {
            luaL_error(m->L, "invalid use of '%c' in replacement string", ESC);
        }
    }
}

/* Append what replaces the match s..e: the template, the table's value or
 * the function's result (false or nil keeps the match). */
static void add_replacement(struct mstate *m, luaL_Buffer *b, const char *s, const char *e, int tr)
{
    lua_State *L = m->L;
    if (tr == LUA_TSTRING || tr == LUA_TNUMBER) {
        add_template(m, b, s, e);
        return;
    }
    if (tr == LUA_TFUNCTION) {
        int n;
        lua_pushvalue(L, 3);
        n = push_captures(m, s, e);
        lua_call(L, n, 1);
    } else {
        push_capture(m, 0, s, e);
        lua_gettable(L, 3);
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(b, s, (size_t)(e - s));
        return;
    }
    if (!lua_isstring(L, -1))
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    luaL_addvalue(b);
}

static int lpat_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    const char *at = s, *last = NULL;
    int tr = lua_type(L, 3), anchored;
    lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)ls + 1), n = 0;
    struct mstate m;
    luaL_Buffer b;
    luaL_argexpected(
        L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION || tr == LUA_TTABLE, 3,
        "string/function/table");
    luaL_buffinit(L, &b);
    anchored = lp > 0 && *p == '^';
    if (anchored) {
        p++;
        lp--;
    }
    mstate_init(&m, L, meter_of(L), s, ls, p, lp);
    while (n < max) {
        const char *e;
        mstate_reset(&m);
        if ((e = do_match(&m, at, p)) && e != last) {
            n++;
            add_replacement(&m, &b, at, e, tr);
            at = last = e;
        } else if (at < m.src_end) {
            luaL_addchar(&b, *at++);
        } else {
            break;
        }
        if (anchored) break;
    }
    mstate_done(&m);
    luaL_addlstring(&b, at, (size_t)(m.src_end - at));
    luaL_pushresult(&b);
    lua_pushinteger(L, n);
    return 2;
}

void lpat_install(lua_State *L, int idx, lpat_meter meter)
{
    static const luaL_Reg fns[] = {
        {"find", lpat_find}, {"match", lpat_match}, {"gmatch", lpat_gmatch},
        {"gsub", lpat_gsub}, {NULL, NULL},
    };
    struct meter_box *box;
    idx = lua_absindex(L, idx);
    box = lua_newuserdatauv(L, sizeof *box, 0);
    box->fn = meter;
    lua_pushvalue(L, idx);
    lua_insert(L, -2);
    luaL_setfuncs(L, fns, 1);
    lua_pop(L, 1);
}

#define _GNU_SOURCE /* memmem */
#include "core/expr.h"
#include "base/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * A template is a tree of nodes mirroring the JSON it was compiled from.
 * Everything that can be decided at compile time is: strings are split into
 * literal text and pre-parsed paths, and subtrees without expressions
 * collapse into one constant shared by reference count at evaluation.
 */

typedef struct ex_step {
    char *key; /* NULL: an array index */
    size_t index;
} ex_step;

typedef struct ex_path {
    char *root;
    char *field; /* NULL for ${root} or ${root[0]} */
    ex_step *steps;
    size_t nsteps;
} ex_path;

typedef struct ex_seg {
    char *text; /* literal text (escapes resolved), or NULL for an expression */
    size_t len;
    ex_path *path;
} ex_seg;

typedef enum { N_CONST, N_EXPR, N_INTERP, N_OBJECT, N_ARRAY } ex_kind;

typedef struct ex_node ex_node;
struct ex_node {
    ex_kind kind;
    json_object *value; /* N_CONST (NULL = json null) */
    ex_path *path;      /* N_EXPR */
    ex_seg *segs;       /* N_INTERP */
    size_t nsegs;
    char **keys;    /* N_OBJECT */
    ex_node **kids; /* N_OBJECT, N_ARRAY */
    size_t nkids;
};

struct ex_tmpl {
    ex_node *root;
};

static void path_free(ex_path *p)
{
    size_t i;
    if (!p) return;
    for (i = 0; i < p->nsteps; i++)
        free(p->steps[i].key);
    free(p->steps);
    free(p->root);
    free(p->field);
    free(p);
}

static void node_free(ex_node *n)
{
    size_t i;
    if (!n) return;
    json_object_put(n->value);
    path_free(n->path);
    for (i = 0; i < n->nsegs; i++) {
        free(n->segs[i].text);
        path_free(n->segs[i].path);
    }
    free(n->segs);
    for (i = 0; i < n->nkids; i++) {
        if (n->keys) free(n->keys[i]);
        node_free(n->kids[i]);
    }
    free(n->keys);
    free(n->kids);
    free(n);
}

/* ---- path syntax ---- */

/* Characters that end a plain name segment. */
static int is_name_char(char c)
{
    return c && c != '.' && c != '[' && c != ']' && c != '}' && c != '\'' && c != '"' && c != '$' &&
           c != '{' && c != ' ' && c != '\t' && c != '\n' && c != '\r';
}

typedef struct parser {
    const char *s;   /* cursor */
    const char *why; /* reason of the first error */
} parser;

static int fail(parser *ps, const char *why)
{
    if (!ps->why) ps->why = why;
    return WEFT_EINVAL;
}

/* Out of memory: not a bad expression. */
static int nomem(parser *ps)
{
    ps->why = "out of memory";
    return WEFT_ENOMEM;
}

static int push_step(ex_path *p, char *key, size_t index, parser *ps)
{
    ex_step *steps = realloc(p->steps, (p->nsteps + 1) * sizeof *steps);
    if (!steps) {
        free(key);
        return nomem(ps);
    }
    p->steps = steps;
    steps[p->nsteps].key = key;
    steps[p->nsteps].index = index;
    p->nsteps++;
    return 0;
}

/* A name: a non-empty run of name characters. */
static char *parse_name(parser *ps)
{
    const char *start = ps->s;
    char *out;
    while (is_name_char(*ps->s))
        ps->s++;
    if (ps->s == start) return NULL;
    out = strndup(start, (size_t)(ps->s - start));
    if (!out) ps->why = "out of memory";
    return out;
}

/* After '[': either digits or a quoted key, then ']'. */
static int parse_bracket(parser *ps, char **key, size_t *index)
{
    const char *p = ps->s;
    *key = NULL;
    if (*p == '\'' || *p == '"') {
        char q = *p++, *buf, *w;
        const char *start = p;
        while (*p && *p != q) {
            if (*p == '\\' && p[1]) p++;
            p++;
        }
        if (*p != q) return fail(ps, "unterminated quoted key");
        buf = malloc((size_t)(p - start) + 1);
        if (!buf) return nomem(ps);
        for (w = buf; start < p; start++) {
            if (*start == '\\' && start + 1 < p) start++;
            *w++ = *start;
        }
        *w = 0;
        p++;
        if (*p != ']') {
            free(buf);
            return fail(ps, "bad [..]: expected ] after the quoted key");
        }
        *key = buf;
    } else if (*p >= '0' && *p <= '9') {
        size_t v = 0;
        while (*p >= '0' && *p <= '9') {
            if (v > (SIZE_MAX - 9) / 10) return fail(ps, "bad [..]: index too large");
            v = v * 10 + (size_t)(*p - '0');
            p++;
        }
        if (*p != ']') return fail(ps, "bad [..]: expected a number or a quoted key");
        *index = v;
    } else {
        return fail(ps, "bad [..]: expected a number or a quoted key");
    }
    ps->s = p + 1;
    return 0;
}

/*
 * Steps after the root: .name, [n], ['key'], ["key"], until a character that
 * is neither '.' nor '['. Each step is appended to p.
 */
static int parse_steps(parser *ps, ex_path *p)
{
    int rc;
    for (;;) {
        char *key = NULL;
        size_t index = 0;
        if (*ps->s == '.') {
            ps->s++;
            key = parse_name(ps);
            if (!key && ps->why) return WEFT_ENOMEM;
            if (!key)
                return fail(ps, *ps->s == '}' || !*ps->s ? "trailing '.'"
                                                         : "a '.' must be followed by a name");
        } else if (*ps->s == '[') {
            ps->s++;
            if ((rc = parse_bracket(ps, &key, &index)) != 0) return rc;
        } else {
            return 0;
        }
        if ((rc = push_step(p, key, index, ps)) != 0) return rc;
    }
}

/*
 * Parse the inside of ${...}; ps->s points just after "${". On success
 * ps->s points just after the closing '}'.
 */
static int parse_expr(parser *ps, ex_path **out)
{
    ex_path *p;
    int rc;
    if (*ps->s == '}') return fail(ps, "empty ${}");
    if (!*ps->s) return fail(ps, "unclosed ${");
    p = calloc(1, sizeof *p);
    if (!p) return nomem(ps);
    p->root = parse_name(ps);
    if (!p->root) {
        path_free(p);
        if (ps->why) return WEFT_ENOMEM;
        return fail(ps, "an expression must start with a name (workflow, secrets or a task ref)");
    }
    if ((rc = parse_steps(ps, p)) != 0) {
        path_free(p);
        return rc;
    }
    if (*ps->s != '}') {
        path_free(p);
        return fail(ps, *ps->s ? "unexpected character in expression" : "unclosed ${");
    }
    ps->s++;
    /* The first key step is the field handed to the lookup. */
    if (p->nsteps > 0 && p->steps[0].key) {
        p->field = p->steps[0].key;
        memmove(p->steps, p->steps + 1, (p->nsteps - 1) * sizeof *p->steps);
        p->nsteps--;
    }
    *out = p;
    return 0;
}

/* ---- compiling ---- */

typedef struct sbuf {
    char *b;
    size_t len, cap;
} sbuf;

static int sb_add(sbuf *sb, const char *s, size_t n)
{
    if (sb->len + n + 1 > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 64;
        char *b;
        while (cap < sb->len + n + 1)
            cap *= 2;
        b = realloc(sb->b, cap);
        if (!b) return WEFT_ENOMEM;
        sb->b = b;
        sb->cap = cap;
    }
    memcpy(sb->b + sb->len, s, n);
    sb->len += n;
    sb->b[sb->len] = 0;
    return 0;
}

static int add_seg(ex_node *n, ex_seg seg)
{
    ex_seg *segs = realloc(n->segs, (n->nsegs + 1) * sizeof *segs);
    if (!segs) return WEFT_ENOMEM;
    n->segs = segs;
    segs[n->nsegs++] = seg;
    return 0;
}

/* Move the pending literal text in sb (if any) into a segment of n. */
static int flush_literal(ex_node *n, sbuf *sb)
{
    ex_seg seg = {0};
    if (sb->len == 0) return 0;
    /* by length: JSON strings may hold NUL bytes */
    seg.text = malloc(sb->len + 1);
    if (!seg.text) return WEFT_ENOMEM;
    memcpy(seg.text, sb->b, sb->len + 1);
    seg.len = sb->len;
    sb->len = 0;
    if (add_seg(n, seg) != 0) {
        free(seg.text);
        return WEFT_ENOMEM;
    }
    return 0;
}

static int compile_string(json_object *v, ex_node *n, weft_error *err)
{
    const char *s = json_object_get_string(v), *p = s;
    size_t slen = (size_t)json_object_get_string_len(v);
    sbuf sb = {0};
    int rc = 0;

    n->kind = N_INTERP;
    while (p < s + slen) {
        if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
            rc = sb_add(&sb, "${", 2);
            p += 3;
        } else if (p[0] == '$' && p[1] == '{') {
            parser ps = {p + 2, NULL};
            ex_seg seg = {0};
            if ((rc = flush_literal(n, &sb)) != 0) break;
            rc = parse_expr(&ps, &seg.path);
            if (rc == 0 && (rc = add_seg(n, seg)) != 0) path_free(seg.path);
            if (rc == WEFT_EINVAL) {
                wu_err(err, rc, "bad expression in \"%s\": %s", s, ps.why);
                free(sb.b);
                return rc;
            }
            p = ps.s;
        } else {
            const char *q = p + 1;
            while (q < s + slen && *q != '$')
                q++;
            rc = sb_add(&sb, p, (size_t)(q - p));
            p = q;
        }
        if (rc != 0) break;
    }
    if (rc == 0) rc = flush_literal(n, &sb);
    free(sb.b);
    if (rc != 0) return wu_err(err, WEFT_ENOMEM, "out of memory compiling \"%s\"", s);

    if (n->nsegs == 1 && n->segs[0].path) {
        n->kind = N_EXPR;
        n->path = n->segs[0].path;
        free(n->segs);
        n->segs = NULL;
        n->nsegs = 0;
    } else if (n->nsegs == 0 || (n->nsegs == 1 && !n->segs[0].path)) {
        /* only escapes ("$${"): a constant, but not the template's own text */
        n->kind = N_CONST;
        n->value = n->nsegs ? json_object_new_string_len(n->segs[0].text, (int)n->segs[0].len)
                            : json_object_new_string("");
        if (n->nsegs) {
            free(n->segs[0].text);
            free(n->segs);
            n->segs = NULL;
            n->nsegs = 0;
        }
        if (!n->value) return wu_err(err, WEFT_ENOMEM, "out of memory compiling \"%s\"", s);
    }
    return 0;
}

static int compile_node(json_object *v, ex_node **out, weft_error *err);

/*
 * Objects and arrays: compile the children; if none of them has an
 * expression, the whole container is one constant - the template's own
 * object when no child changed, else a new one built from the children.
 */
static int compile_container(json_object *v, ex_node *n, weft_error *err)
{
    int is_obj = json_object_is_type(v, json_type_object);
    size_t count = is_obj ? (size_t)json_object_object_length(v) : json_object_array_length(v);
    size_t i = 0;
    int rc, all_const = 1, same = 1;

    n->kind = is_obj ? N_OBJECT : N_ARRAY;
    n->kids = calloc(count ? count : 1, sizeof *n->kids);
    if (is_obj) n->keys = calloc(count ? count : 1, sizeof *n->keys);
    if (!n->kids || (is_obj && !n->keys))
        return wu_err(err, WEFT_ENOMEM, "out of memory compiling a template");

    if (is_obj) {
        json_object_object_foreach(v, key, child)
        {
            n->keys[i] = strdup(key);
            if (!n->keys[i]) return wu_err(err, WEFT_ENOMEM, "out of memory compiling a template");
            n->nkids = i + 1;
            if ((rc = compile_node(child, &n->kids[i], err)) != 0) return rc;
            if (n->kids[i]->kind != N_CONST)
                all_const = 0;
            else if (n->kids[i]->value != child)
                same = 0;
            i++;
        }
    } else {
        for (i = 0; i < count; i++) {
            json_object *child = json_object_array_get_idx(v, i);
            n->nkids = i + 1;
            if ((rc = compile_node(child, &n->kids[i], err)) != 0) return rc;
            if (n->kids[i]->kind != N_CONST)
                all_const = 0;
            else if (n->kids[i]->value != child)
                same = 0;
        }
    }
    if (!all_const) return 0;

    if (same) {
        n->value = json_object_get(v);
    } else {
        n->value = is_obj ? json_object_new_object() : json_object_new_array_ext((int)count);
        if (!n->value) return wu_err(err, WEFT_ENOMEM, "out of memory compiling a template");
        for (i = 0; i < n->nkids; i++) {
            json_object *kv = json_object_get(n->kids[i]->value);
            rc = is_obj ? json_object_object_add(n->value, n->keys[i], kv)
                        : json_object_array_add(n->value, kv);
            if (rc != 0) {
                json_object_put(kv);
                return wu_err(err, WEFT_ENOMEM, "out of memory compiling a template");
            }
        }
    }
    for (i = 0; i < n->nkids; i++) {
        if (n->keys) free(n->keys[i]);
        node_free(n->kids[i]);
    }
    free(n->keys);
    free(n->kids);
    n->keys = NULL;
    n->kids = NULL;
    n->nkids = 0;
    n->kind = N_CONST;
    return 0;
}

static int compile_node(json_object *v, ex_node **out, weft_error *err)
{
    ex_node *n = calloc(1, sizeof *n);
    int rc = 0;
    *out = n;
    if (!n) return wu_err(err, WEFT_ENOMEM, "out of memory compiling a template");
    switch (json_object_get_type(v)) {
    case json_type_string:
        if (!memmem(json_object_get_string(v), (size_t)json_object_get_string_len(v), "${", 2)) {
            n->kind = N_CONST;
            n->value = json_object_get(v);
        } else {
            rc = compile_string(v, n, err);
        }
        break;
    case json_type_object:
    case json_type_array:
        rc = compile_container(v, n, err);
        break;
    default:
        n->kind = N_CONST;
        n->value = json_object_get(v);
        break;
    }
    return rc;
}

int ex_compile(json_object *tmpl, ex_tmpl **out, weft_error *err)
{
    ex_tmpl *t = calloc(1, sizeof *t);
    int rc;
    *out = NULL;
    if (!t) return wu_err(err, WEFT_ENOMEM, "out of memory compiling a template");
    rc = compile_node(tmpl, &t->root, err);
    if (rc != 0) {
        ex_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void ex_free(ex_tmpl *t)
{
    if (!t) return;
    node_free(t->root);
    free(t);
}

int ex_is_const(const ex_tmpl *t)
{
    return t->root->kind == N_CONST;
}

/* ---- evaluation ---- */

static __thread long fail_countdown;

void ex_test_fail_alloc(long n)
{
    fail_countdown = n;
}

/* Whether the allocation about to be made is the one a test wants to fail. */
static int fault(void)
{
    return fail_countdown > 0 && --fail_countdown == 0;
}

static json_object *walk_steps(json_object *v, const ex_step *steps, size_t n)
{
    size_t i;
    for (i = 0; i < n && v; i++) {
        if (steps[i].key) {
            if (!json_object_is_type(v, json_type_object) ||
                !json_object_object_get_ex(v, steps[i].key, &v))
                return NULL;
        } else {
            if (!json_object_is_type(v, json_type_array) ||
                steps[i].index >= json_object_array_length(v))
                return NULL;
            v = json_object_array_get_idx(v, steps[i].index);
        }
    }
    return v;
}

static json_object *resolve(const ex_path *p, ex_lookup_fn lookup, void *ud)
{
    json_object *v = lookup(ud, p->root, p->field);
    return walk_steps(v, p->steps, p->nsteps);
}

static json_object *eval_node(const ex_node *n, ex_lookup_fn lookup, void *ud, int *bad);

static json_object *eval_interp(const ex_node *n, ex_lookup_fn lookup, void *ud, int *bad)
{
    char stack[256];
    sbuf sb = {stack, 0, sizeof stack};
    json_object *out;
    size_t i;
    int rc = 0;

    stack[0] = 0;
    for (i = 0; i < n->nsegs && rc == 0; i++) {
        const ex_seg *seg = &n->segs[i];
        json_object *v;
        const char *text;
        size_t len;
        if (!seg->path) {
            text = seg->text;
            len = seg->len;
        } else if (!(v = resolve(seg->path, lookup, ud))) {
            text = "null";
            len = 4;
        } else if (json_object_is_type(v, json_type_string)) {
            text = json_object_get_string(v);
            len = (size_t)json_object_get_string_len(v);
        } else {
            size_t l;
            text = json_object_to_json_string_length(
                v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &l);
            if (!text) {
                *bad = 1;
                break;
            }
            len = l;
        }
        if (sb.b == stack && sb.len + len + 1 > sb.cap) {
            /* move off the stack buffer before growing */
            char *heap = fault() ? NULL : malloc(sb.len + len + 64);
            if (!heap) {
                *bad = 1;
                return NULL;
            }
            memcpy(heap, stack, sb.len + 1);
            sb.b = heap;
            sb.cap = sb.len + len + 64;
        }
        rc = sb_add(&sb, text, len);
    }
    out = rc == 0 && !*bad && !fault() ? json_object_new_string_len(sb.b, (int)sb.len) : NULL;
    if (!out) *bad = 1;
    if (sb.b != stack) free(sb.b);
    return out;
}

static json_object *eval_node(const ex_node *n, ex_lookup_fn lookup, void *ud, int *bad)
{
    json_object *out;
    size_t i;
    switch (n->kind) {
    case N_CONST:
        return json_object_get(n->value);
    case N_EXPR:
        return json_object_get(resolve(n->path, lookup, ud));
    case N_INTERP:
        return eval_interp(n, lookup, ud, bad);
    case N_OBJECT:
        out = fault() ? NULL : json_object_new_object();
        for (i = 0; out && i < n->nkids; i++) {
            json_object *v = eval_node(n->kids[i], lookup, ud, bad);
            /* template keys are unique: skip json-c's duplicate check */
            if (*bad ||
                json_object_object_add_ex(out, n->keys[i], v, JSON_C_OBJECT_ADD_KEY_IS_NEW) != 0) {
                json_object_put(v);
                json_object_put(out);
                out = NULL;
            }
        }
        break;
    case N_ARRAY:
        out = fault() ? NULL : json_object_new_array_ext((int)n->nkids);
        for (i = 0; out && i < n->nkids; i++) {
            json_object *v = eval_node(n->kids[i], lookup, ud, bad);
            if (*bad || json_object_array_add(out, v) != 0) {
                json_object_put(v);
                json_object_put(out);
                out = NULL;
            }
        }
        break;
    default:
        return NULL;
    }
    if (!out) *bad = 1;
    return out;
}

json_object *ex_eval(const ex_tmpl *t, ex_lookup_fn lookup, void *ud)
{
    json_object *out = NULL;
    ex_eval_checked(t, lookup, ud, &out);
    return out;
}

int ex_eval_checked(const ex_tmpl *t, ex_lookup_fn lookup, void *ud, json_object **out)
{
    int bad = 0;
    *out = eval_node(t->root, lookup, ud, &bad);
    if (bad) {
        json_object_put(*out);
        *out = NULL;
        return WEFT_ENOMEM;
    }
    return 0;
}

static int foreach_node(const ex_node *n, int (*fn)(void *, const char *, const char *), void *ud)
{
    size_t i;
    int rc;
    switch (n->kind) {
    case N_EXPR:
        return fn(ud, n->path->root, n->path->field);
    case N_INTERP:
        for (i = 0; i < n->nsegs; i++)
            if (n->segs[i].path && (rc = fn(ud, n->segs[i].path->root, n->segs[i].path->field)))
                return rc;
        return 0;
    case N_OBJECT:
    case N_ARRAY:
        for (i = 0; i < n->nkids; i++)
            if ((rc = foreach_node(n->kids[i], fn, ud)) != 0) return rc;
        return 0;
    case N_CONST:
        break;
    }
    return 0;
}

int ex_foreach_ref(const ex_tmpl *t, int (*fn)(void *ud, const char *root, const char *field),
                   void *ud)
{
    return foreach_node(t->root, fn, ud);
}

json_object *ex_walk(json_object *v, const char *path)
{
    parser ps = {path, NULL};
    ex_path p = {0};
    json_object *out = NULL;
    char *first = NULL;
    int rc;

    if (!path) return v;
    /* A leading bare name ("a.b") reads as ".a.b". */
    if (is_name_char(*ps.s) && !(first = parse_name(&ps))) return NULL;
    if (first && push_step(&p, first, 0, &ps) != 0) return NULL;
    rc = parse_steps(&ps, &p);
    if (rc == 0 && *ps.s == 0) out = walk_steps(v, p.steps, p.nsteps);
    for (size_t i = 0; i < p.nsteps; i++)
        free(p.steps[i].key);
    free(p.steps);
    return out;
}

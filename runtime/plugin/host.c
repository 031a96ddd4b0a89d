#include "autoconf.h"
#include "plugin/host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "plugin/loader.h"
#include "plugin/options.h"

static host_log_fn log_sink;
static void *log_ud;
static const pl_registry *log_reg;

/* The innermost task callback running on this thread: its plugin names the
 * log lines, its secrets are masked in them. */
static __thread weft_ctx *running;

static char *redact_text(const weft_ctx *c, const char *s);

void host_set_log(host_log_fn fn, void *ud, const pl_registry *reg)
{
    log_sink = fn;
    log_ud = ud;
    log_reg = reg;
}

/* The name of the plugin whose code runs now on this thread, or NULL. */
static const char *plugin_now(void)
{
    const char *loading = pl_host_loading_name();
    const weft_task_type *type;
    size_t i, j;
    if (loading) return loading;
    if (!running || !running->t || !running->t->def || !(type = running->t->def->type)) return NULL;
    for (i = 0; log_reg && i < pl_count(log_reg); i++) {
        const pl_plugin *p = pl_get(log_reg, i);
        for (j = 0; j < p->ntypes; j++)
            if (p->types[j] == type) return p->name;
    }
    return type->name;
}

static void host_log(int level, const char *fmt, ...)
{
    char line[1024], *whole = NULL, *masked = NULL;
    const char *plugin;
    va_list ap, ap2;
    int n;
    if (level < 0 || level > WEFT_LOG_DEBUG) level = WEFT_LOG_ERROR;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    n = vsnprintf(line, sizeof line, fmt, ap);
    /* a secret is masked in the whole line, before the cut: cut first, its
     * beginning could be left at the end */
    if (running && running->secrets.len && n >= (int)sizeof line && (whole = malloc((size_t)n + 1)))
        vsnprintf(whole, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    va_end(ap);
    if (running && running->secrets.len && (masked = redact_text(running, whole ? whole : line))) {
        snprintf(line, sizeof line, "%s", masked);
        free(masked);
    } else if (whole) {
        snprintf(line, sizeof line, "%s", whole);
    }
    free(whole);
    pl_host_note(level, line);
    plugin = plugin_now();
    if (log_sink)
        log_sink(log_ud, level, plugin, line);
    else
        lg_log(level, LG_FIELDS(LG_STR("plugin", plugin)), "%s", line);
}

static int host_error(weft_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wu_verr(err, code, fmt, ap);
    va_end(ap);
    return code;
}

static void fill_view(weft_task_view *v, const xc_exec *x, const xc_task *t)
{
    v->task_id = t->id;
    v->workflow_id = x->id;
    v->ref = t->ref;
    v->def_ref = t->def->ref;
    v->type = t->def->type_name;
    v->status = t->status;
    v->def = host_task_json(t);
    v->input = t->input;
    v->output = t->output;
    v->retry_count = t->retry_count;
    v->poll_count = t->poll_count;
    v->iteration = t->iteration;
    v->scheduled_ms = t->scheduled_ms;
    v->started_ms = t->started_ms;
}

static const weft_task_view *host_task(weft_ctx *c)
{
    return &c->view;
}

static void *host_type_data(weft_ctx *c)
{
    return c->t->def->type->data;
}

static const weft_task_view *view_of(weft_ctx *c, const xc_task *t)
{
    weft_task_view *v;
    if (!t) return NULL;
    v = calloc(1, sizeof *v);
    if (!v || wu_vec_push(&c->views, v)) {
        free(v);
        c->oom = 1;
        return NULL;
    }
    fill_view(v, c->x, t);
    return v;
}

static const weft_task_view *host_lookup(weft_ctx *c, const char *ref)
{
    return ref ? view_of(c, xc_find_ref(c->x, ref)) : NULL;
}

static const weft_task_view *host_previous(weft_ctx *c)
{
    const def_task *d = c->t->def;
    if (d->index == 0) return NULL;
    return view_of(c, xc_latest(c->x, d->list->tasks[d->index - 1]));
}

static json_object *host_workflow_input(weft_ctx *c)
{
    return c->x->input;
}

static json_object *host_workflow_variables(weft_ctx *c)
{
    return c->x->variables;
}

static int host_set_variables(weft_ctx *c, json_object *vars, weft_error *err)
{
    const def_limits *lim = c->svc && c->svc->limits ? c->svc->limits : &def_limits_default;
    json_object *merged = NULL;
    size_t len = 0;
    if (!json_object_is_type(vars, json_type_object))
        return wu_err(err, WEFT_EINVAL, "variables must be an object");
    /* merged into a copy, so a change over the limit (or out of memory)
     * leaves workflow.variables as it was; the copy also keeps a value that
     * is (or holds) workflow.variables itself from aliasing it */
    if (c->x->variables ? json_object_deep_copy(c->x->variables, &merged, NULL) != 0
                        : !(merged = json_object_new_object()))
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    json_object_object_foreach(vars, k, v)
    {
        json_object *copy = NULL;
        if ((v && json_object_deep_copy(v, &copy, NULL)) ||
            json_object_object_add(merged, k, copy)) {
            json_object_put(copy);
            json_object_put(merged);
            return wu_err(err, WEFT_ENOMEM, "out of memory");
        }
    }
    if (!json_object_to_json_string_length(merged, JSON_C_TO_STRING_PLAIN, &len)) {
        json_object_put(merged);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    if ((int64_t)len > lim->max_variables) {
        json_object_put(merged);
        return wu_err(err, WEFT_ELIMIT,
                      "'%s': workflow variables would take %zu bytes, over the limit of %lld "
                      "(max_variables_size)",
                      c->t->ref, len, (long long)lim->max_variables);
    }
    json_object_put(c->x->variables);
    c->x->variables = merged;
    return 0;
}

static int host_lua_eval(weft_ctx *c, const char *chunkname, const char *body, json_object *input,
                         json_object **out, weft_error *err)
{
    sbx *s = c->svc && c->svc->sandbox ? c->svc->sandbox(c->svc->ud) : NULL;
    *out = NULL;
    if (!s) return wu_err(err, WEFT_ESTATE, "no Lua sandbox available here");
    return sbx_eval(s, chunkname, body, input, out, err);
}

static json_object *redacted_copy(const weft_ctx *c, json_object *v);

static int host_start_child(weft_ctx *c, json_object *def, const char *name, int version,
                            json_object *input, char *id_out, size_t id_size, weft_error *err)
{
    json_object *in;
    int rc;
    const def_limits *lim = c->svc && c->svc->limits ? c->svc->limits : &def_limits_default;
    char what[WEFT_ERROR_MAX / 2];
    /* checked here, before the child exists: a workflow that starts itself
     * stops at the limit instead of spawning without end */
    snprintf(what, sizeof what, "sub-workflow '%s'", c->t->ref);
    if (def_check_depth(lim, c->x->depth, what, err)) return err->code;
    if (!c->svc || !c->svc->start_child)
        return wu_err(err, WEFT_ESTATE, "cannot start workflows here");
    /* The child's input is stored: the secrets this task used are masked in
     * it (a child that needs a secret names it in its own definition) */
    if (!(in = redacted_copy(c, input)) && input) return wu_err(err, WEFT_ENOMEM, "out of memory");
    rc = c->svc->start_child(c->svc->ud, c->x, c->t, def, name, version, in, id_out, id_size, err);
    json_object_put(in);
    return rc;
}

static int host_parse_duration(json_object *v, int64_t *ms, weft_error *err)
{
    return wu_parse_duration(v, ms, err);
}

static const weft_host table = {
    .abi_major = WEFT_ABI_MAJOR,
    .size = sizeof(weft_host),
    .version = PACKAGE_VERSION,
    .declare = pl_host_declare,
    .register_task_type = pl_host_register_task_type,
    .register_lock_provider = pl_host_register_lock_provider,
    .log = host_log,
    .error = host_error,
    .task = host_task,
    .type_data = host_type_data,
    .lookup = host_lookup,
    .workflow_input = host_workflow_input,
    .workflow_variables = host_workflow_variables,
    .set_variables = host_set_variables,
    .lua_eval = host_lua_eval,
    .start_child = host_start_child,
    .parse_duration = host_parse_duration,
    .now_ms = wu_now_ms,
    .previous = host_previous,
    .config_fill = po_fill,
};

const weft_host *host_table(void)
{
    return &table;
}

void host_ctx_init(weft_ctx *c, const host_services *svc, xc_exec *x, xc_task *t)
{
    memset(c, 0, sizeof *c);
    c->svc = svc;
    c->x = x;
    c->t = t;
    fill_view(&c->view, x, t);
    c->outer = running;
    running = c;
}

/* Secret values are wiped before their memory is given back. */
static void secrets_free(wu_vec *v)
{
    size_t i;
    for (i = 0; i < v->len; i++) {
        char *s = v->items[i];
        memset(s, 0, strlen(s));
        free(s);
    }
    wu_vec_free(v);
}

void host_ctx_done(weft_ctx *c)
{
    size_t i;
    if (running == c) running = c->outer;
    c->outer = NULL;
    for (i = 0; i < c->views.len; i++)
        free(c->views.items[i]);
    wu_vec_free(&c->views);
    secrets_free(&c->secrets);
    json_object_put(c->resolved);
    c->resolved = NULL;
}

#define SECRET_OPEN "${secrets."

static int has_placeholder(json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_string:
        return strstr(json_object_get_string(v), SECRET_OPEN) != NULL;
    case json_type_object: {
        json_object_object_foreach(v, k, m)
        {
            (void)k;
            if (has_placeholder(m)) return 1;
        }
        return 0;
    }
    case json_type_array: {
        size_t i;
        for (i = 0; i < json_object_array_length(v); i++)
            if (has_placeholder(json_object_array_get_idx(v, i))) return 1;
        return 0;
    }
    default:
        return 0;
    }
}

typedef struct filler {
    host_secret_fn secret;
    void *ud;
    wu_vec *used; /* filled values (malloc'd), or NULL */
    int lenient;  /* a secret that is not set stays a placeholder: no error */
} filler;

/* Whether "${secrets.<name>}" (name n bytes long) is written in tmpl. */
static int names_secret(const char *tmpl, const char *name, size_t n)
{
    const char *p = tmpl;
    while ((p = strstr(p, SECRET_OPEN))) {
        p += strlen(SECRET_OPEN);
        if (!strncmp(p, name, n) && p[n] == '}') return 1;
    }
    return 0;
}

/* s with the placeholders that tmpl (its template string) names filled in
 * (caller owns), or NULL with err set. Other placeholders stay as text. */
static json_object *fill_string(filler *c, const char *s, const char *tmpl, weft_error *err)
{
    wu_buf b = {0};
    json_object *out;
    while (*s) {
        const char *p = strstr(s, SECRET_OPEN), *end;
        char name[256], *value = NULL;
        size_t n;
        if (!p) {
            wu_buf_add(&b, s, strlen(s));
            break;
        }
        wu_buf_add(&b, s, (size_t)(p - s));
        end = strchr(p, '}');
        n = end ? (size_t)(end - p) - strlen(SECRET_OPEN) : 0;
        if (!end || n == 0 || n >= sizeof name) {
            wu_buf_add(&b, p, strlen(p)); /* not a placeholder after all */
            break;
        }
        memcpy(name, p + strlen(SECRET_OPEN), n);
        name[n] = 0;
        if (!names_secret(tmpl, name, n) ||
            (c->secret(c->ud, name, &value, err) && c->lenient && err->code == WEFT_ENOTFOUND)) {
            /* data, not the definition's; or (lenient) no longer set: text */
            memset(err, 0, sizeof *err);
            wu_buf_add(&b, p, (size_t)(end + 1 - p));
            s = end + 1;
            continue;
        }
        if (!value) {
            wu_buf_free(&b);
            return NULL;
        }
        wu_buf_add(&b, value, strlen(value));
        if (*value && c->used && wu_vec_push(c->used, value) == 0) value = NULL;
        if (value) memset(value, 0, strlen(value));
        free(value);
        s = end + 1;
    }
    out = json_object_new_string_len(b.data ? b.data : "", (int)b.len);
    if (b.data) memset(b.data, 0, b.len);
    wu_buf_free(&b);
    return out;
}

/*
 * v (a task's input) with its placeholders filled in where tmpl (the task's
 * inputParameters, at the same place) writes them. A placeholder in data
 * that reached the input through an expression (a workflow input, an
 * output, a variable: what a client may have written) is text, never filled:
 * otherwise starting a workflow with {"url": "http://x/${secrets.DB}"} would
 * hand any secret to any task that uses the url.
 */
static json_object *fill(filler *c, json_object *v, json_object *tmpl, weft_error *err)
{
    json_object *out, *m2;
    size_t i;
    if (!tmpl || json_object_get_type(v) != json_object_get_type(tmpl) || !has_placeholder(tmpl) ||
        !has_placeholder(v))
        return json_object_get(v);
    switch (json_object_get_type(v)) {
    case json_type_string:
        return fill_string(c, json_object_get_string(v), json_object_get_string(tmpl), err);
    case json_type_object:
        out = json_object_new_object();
        json_object_object_foreach(v, k, m)
        {
            if (!(m2 = fill(c, m, json_object_object_get(tmpl, k), err))) {
                json_object_put(out);
                return NULL;
            }
            json_object_object_add(out, k, m2);
        }
        return out;
    default: /* array */
        out = json_object_new_array();
        for (i = 0; i < json_object_array_length(v); i++) {
            if (!(m2 = fill(c, json_object_array_get_idx(v, i), json_object_array_get_idx(tmpl, i),
                            err))) {
                json_object_put(out);
                return NULL;
            }
            json_object_array_add(out, m2);
        }
        return out;
    }
}

/*
 * The template of t's input: its WorkflowTask's inputParameters in the
 * definition (borrowed). A dynamic fork's task has none: its WorkflowTask was
 * built from data (which a client may have written), so it names no secret.
 */
static json_object *input_template(const xc_task *t)
{
    if (!t->def || t->dyn_json) return NULL;
    return json_object_object_get(t->def->json, "inputParameters");
}

/* Whether t's template names a secret (known from the definition's load:
 * most tasks name none, and this runs for every task). */
static int names_secrets(const xc_task *t)
{
    return t->def && !t->dyn_json && t->def->uses_secrets;
}

int host_fill_secrets(const xc_task *t, json_object *v, host_secret_fn secret, void *ud,
                      json_object **out, weft_error *err)
{
    filler f = {secret, ud, NULL, 0};
    if (!(*out = fill(&f, v, input_template(t), err))) return err->code ? err->code : WEFT_ENOMEM;
    return 0;
}

static int longer(const void *a, const void *b)
{
    size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
    return la < lb ? 1 : la > lb ? -1 : 0;
}

/* A secret that holds another is masked first, so none of it is left over. */
static void longest_first(wu_vec *v)
{
    if (v->len > 1) qsort(v->items, v->len, sizeof v->items[0], longer);
}

int host_ctx_secrets(weft_ctx *c, weft_error *err)
{
    json_object *in = c->t->input;
    filler f;
    if (!in || !names_secrets(c->t) || !has_placeholder(in)) return 0;
    if (!c->svc || !c->svc->secret)
        return wu_err(err, WEFT_ENOTFOUND, "secrets are not available here");
    f.secret = c->svc->secret;
    f.ud = c->svc->ud;
    f.used = &c->secrets;
    f.lenient = 0;
    if (!(c->resolved = fill(&f, in, input_template(c->t), err)))
        return err->code ? err->code : WEFT_ENOMEM;
    c->view.input = c->resolved;
    longest_first(&c->secrets);
    return 0;
}

/* s with every used secret replaced by "***" (malloc'd), or NULL if none occurs. */
static char *redact_text(const weft_ctx *c, const char *s)
{
    size_t i;
    char *cur = NULL;
    for (i = 0; i < c->secrets.len; i++) {
        const char *v = c->secrets.items[i], *src = cur ? cur : s, *p;
        wu_buf b = {0};
        if (!(p = strstr(src, v))) continue;
        while (p) {
            wu_buf_add(&b, src, (size_t)(p - src));
            wu_buf_add(&b, "***", 3);
            src = p + strlen(v);
            p = strstr(src, v);
        }
        wu_buf_add(&b, src, strlen(src));
        wu_buf_add(&b, "", 1);
        free(cur);
        cur = b.data;
    }
    return cur;
}

/* A text rewritten (malloc'd, *n its length), or NULL to keep it as it is. */
typedef char *(*text_fn)(const void *ud, const char *s, size_t len, size_t *n);

/* v with every string and member name rewritten by fn (v itself, changed in
 * place, or a new value in its stead; its reference is taken either way). */
static json_object *rewrite(json_object *v, text_fn fn, const void *ud)
{
    size_t i, n;
    char *r;
    switch (json_object_get_type(v)) {
    case json_type_string:
        if ((r = fn(ud, json_object_get_string(v), (size_t)json_object_get_string_len(v), &n))) {
            json_object_put(v);
            v = json_object_new_string_len(r, (int)n);
            free(r);
        }
        return v;
    case json_type_object: {
        wu_vec keys = {0}; /* pairs: a member's name to rewrite, its new form */
        json_object_object_foreach(v, k, m)
        {
            json_object *m2 = rewrite(json_object_get(m), fn, ud);
            char *old;
            if (m2 != m)
                json_object_object_add(v, k, m2);
            else
                json_object_put(m2);
            if (!(r = fn(ud, k, strlen(k), &n))) continue;
            if (!(old = strdup(k)) || wu_vec_push(&keys, old)) {
                free(old);
                free(r);
            } else if (wu_vec_push(&keys, r)) {
                free(r);
                free(keys.items[--keys.len]); /* the name pushed just above */
            }
        }
        /* renamed after the walk: adding members during it is not safe */
        for (i = 0; i + 1 < keys.len; i += 2) {
            json_object *val;
            if (json_object_object_get_ex(v, keys.items[i], &val)) {
                json_object_get(val);
                json_object_object_del(v, keys.items[i]);
                json_object_object_add(v, keys.items[i + 1], val);
            }
            free(keys.items[i]);
            free(keys.items[i + 1]);
        }
        wu_vec_free(&keys);
        return v;
    }
    case json_type_array:
        for (i = 0; i < json_object_array_length(v); i++) {
            json_object *m = json_object_array_get_idx(v, i);
            json_object *m2 = rewrite(json_object_get(m), fn, ud);
            if (m2 != m)
                json_object_array_put_idx(v, i, m2);
            else
                json_object_put(m2);
        }
        return v;
    default:
        return v;
    }
}

static char *redact_fn(const void *ud, const char *s, size_t len, size_t *n)
{
    char *r = redact_text(ud, s);
    (void)len;
    if (r) *n = strlen(r);
    return r;
}

static json_object *redact(const weft_ctx *c, json_object *v)
{
    return rewrite(v, redact_fn, c);
}

/* Text that is not UTF-8, by wu_utf8's rule. */
static char *utf8_fn(const void *ud, const char *s, size_t len, size_t *n)
{
    size_t fixed = wu_utf8_len(s, len);
    char *r;
    (void)ud;
    if (fixed == len || !(r = malloc(fixed + 1))) return NULL;
    *n = wu_utf8_copy(r, fixed + 1, s, len);
    return r;
}

/*
 * A text the plugin cut at its buffer's end (full: size - 1 bytes) may end
 * with the beginning of a secret, which redact_text cannot see: that tail
 * is masked too.
 */
static void mask_cut_tail(const weft_ctx *c, char *buf, size_t size)
{
    size_t i, len = strlen(buf), k;
    if (len + 1 < size) return;
    for (i = 0; i < c->secrets.len; i++) {
        const char *v = c->secrets.items[i];
        for (k = strlen(v) - 1; k > 0; k--)
            if (k <= len && !strncmp(buf + len - k, v, k)) {
                size_t at = len - k > size - 4 ? size - 4 : len - k;
                memcpy(buf + at, "***", 4);
                return;
            }
    }
}

/* v with the secrets c used masked: a copy when it holds any (caller owns
 * either way; NULL for NULL or out of memory). */
static json_object *redacted_copy(const weft_ctx *c, json_object *v)
{
    json_object *copy = NULL;
    if (!v || !c->secrets.len) return json_object_get(v);
    if (json_object_deep_copy(v, &copy, NULL)) return NULL;
    return redact(c, copy);
}

void host_redact_reported(const xc_task *t, host_secret_fn secret, void *ud, json_object **output,
                          const char *reason, char *reason_out, size_t reason_size)
{
    weft_ctx c;
    weft_error err = {0};
    filler f = {secret, ud, NULL, 1};
    json_object *filled, *masked;
    char *r;
    if (reason && reason_size && reason != reason_out)
        snprintf(reason_out, reason_size, "%s", reason);
    /* most tasks name no secret: known from the definition */
    if (!t->input || !secret || !names_secrets(t) || !has_placeholder(t->input)) return;
    memset(&c, 0, sizeof c);
    f.used = &c.secrets;
    filled = fill(&f, t->input, input_template(t), &err);
    json_object_put(filled);
    longest_first(&c.secrets);
    if (c.secrets.len && output && *output && (masked = redacted_copy(&c, *output))) {
        json_object_put(*output);
        *output = masked;
    }
    /* masked whole, then cut: a cut first could leave a secret's beginning */
    if (c.secrets.len && reason && reason_size && (r = redact_text(&c, reason))) {
        snprintf(reason_out, reason_size, "%s", r);
        free(r);
    }
    secrets_free(&c.secrets);
}

void host_ctx_redact(weft_ctx *c, weft_result *r)
{
    char *reason;
    if (!c->secrets.len) return;
    if (r->output) r->output = redact(c, r->output);
    if (r->end_output) r->end_output = redact(c, r->end_output);
    if ((reason = redact_text(c, r->reason))) {
        snprintf(r->reason, sizeof r->reason, "%s", reason);
        free(reason);
    }
    mask_cut_tail(c, r->reason, sizeof r->reason);
}

void host_result_init(weft_result *r)
{
    memset(r, 0, sizeof *r);
    r->status = WEFT_TASK_SCHEDULED;
    r->end_workflow = WEFT_WF_RUNNING;
}

void host_result_clear(weft_result *r)
{
    json_object_put(r->output);
    json_object_put(r->end_output);
    host_result_init(r);
}

int host_execute(const host_services *svc, xc_exec *x, xc_task *t, weft_result *r)
{
    weft_ctx c;
    weft_error err = {0};
    int rc;
    host_ctx_init(&c, svc, x, t);
    if ((rc = host_ctx_secrets(&c, &err)) == 0) {
        rc = t->def->type->execute(&c, r);
        if (c.oom && rc == 0) {
            rc = WEFT_ENOMEM;
            snprintf(r->reason, sizeof r->reason, "out of memory while it ran (a lookup)");
        }
        host_ctx_redact(&c, r);
        /* whatever a plugin made (an HTTP body in Latin-1) is stored and
         * served as JSON: UTF-8 */
        if (r->output) r->output = rewrite(r->output, utf8_fn, NULL);
        if (r->end_output) r->end_output = rewrite(r->end_output, utf8_fn, NULL);
        if (wu_utf8_len(r->reason, strlen(r->reason)) != strlen(r->reason)) {
            char fixed[sizeof r->reason];
            wu_utf8_copy(fixed, sizeof fixed, r->reason, strlen(r->reason));
            memcpy(r->reason, fixed, sizeof fixed);
        }
    } else {
        /* a missing secret stays missing: no retry */
        r->status = WEFT_TASK_FAILED_WITH_TERMINAL_ERROR;
        snprintf(r->reason, sizeof r->reason, "%s", err.msg);
        rc = 0;
    }
    host_ctx_done(&c);
    return rc;
}

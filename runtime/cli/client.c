/*
 * weft commands on workflows kept in Redis. They talk to Redis directly,
 * like a BullMQ producer: no daemon is needed to start or inspect a
 * workflow; a running weftd does the work. With --api URL they go through
 * that weftd's REST API instead, with the same output and exit codes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "core/codec.h"
#include "base/config.h"
#include "lua/dsl.h"
#include "plugin/host.h"
#include "core/ops.h"
#include "plugin/loader.h"

typedef struct client {
    const cli *c;
    rs *r;
    pl_registry *plugins;
    def_env defs;
    def_limits limits;
    dec_env dec;
    op_env op;
} client;

static const weft_task_type *find_type(void *ud, const char *name)
{
    return pl_find_type(ud, name, NULL);
}

/* Exit code for an error: unknown ids and bad input are usage errors (2). */
static int fail(const weft_error *err)
{
    fprintf(stderr, "weft: %s\n", err->msg);
    return err->code == WEFT_ESTATE ? EXIT_WF_FAILED : EXIT_USAGE;
}

static int client_open(client *k, const cli *c)
{
    weft_error err = {0};
    rs_opts o = {0};
    const char *path = c->plugin_path ? c->plugin_path : getenv("WEFT_PLUGIN_PATH");
    char *dflt = NULL;
    memset(k, 0, sizeof *k);
    k->c = c;
    o.url = c->redis;
    o.prefix = c->prefix;
    if (rs_open(&o, &k->r, &err)) {
        if (!k->r || err.code != WEFT_EIO) {
            fprintf(stderr, "weft: %s\n", err.msg);
            rs_free(k->r);
            return EXIT_USAGE;
        }
        /* unreachable for now: each command says so, and wait/watch keep trying */
    }
    /* plugins validate definitions from files; types served elsewhere are
     * fine. Other commands read stored definitions and need none. */
    k->plugins = pl_new(host_table());
    if (!strcmp(c->cmd, "start") || !strcmp(c->cmd, "register")) {
        if (!path || !*path)
            path = dflt = pl_default_path();
        if (k->plugins && path)
            pl_load_path(k->plugins, path);
        free(dflt);
    }
    k->defs.find_type = find_type;
    k->defs.ud = k->plugins;
    k->defs.searched = k->plugins ? pl_searched(k->plugins) : "";
    k->defs.host = host_table();
    k->defs.allow_unknown = 1;
    if (cf_env_limits(&k->limits, &err)) {
        fprintf(stderr, "weft: %s\n", err.msg);
        rs_free(k->r);
        pl_free(k->plugins);
        return EXIT_USAGE;
    }
    k->defs.limits = &k->limits;
    k->dec.defs = &k->defs;
    k->dec.now = wu_now_ms;
    k->op.r = k->r;
    k->op.defs = &k->defs;
    k->op.dec = &k->dec;
    k->op.sweep_ms = 30000;
    k->op.client = 1;
    if (ps_open_env(&k->op.ps, &err))
        fprintf(stderr, "weft: %s (large payloads stay inline)\n", err.msg);
    return 0;
}

static void client_close(client *k)
{
    rs_free(k->r);
    pl_free(k->plugins);
    ps_close(k->op.ps);
}

static int is_file(const char *s)
{
    size_t n = strlen(s);
    FILE *f;
    if (!(n > 4 && (!strcmp(s + n - 4, ".lua") || !strcmp(s + n - 5, ".json"))))
        return 0;
    if (!(f = fopen(s, "r")))
        return 1; /* a file name: let loading say it is missing */
    fclose(f);
    return 1;
}

/* FILE.lua | FILE.json | NAME [--version V] -> a compiled definition. */
static int get_def(client *k, const char *what, def_workflow **out, weft_error *err)
{
    json_object *json = NULL;
    int rc;
    if (is_file(what)) {
        if ((rc = dsl_load(what, &json, NULL, err)))
            return rc;
        rc = def_compile(&k->defs, json, what, NULL, out, err);
        json_object_put(json);
        return rc;
    } else {
        char *text = NULL;
        int version = k->c->version ? atoi(k->c->version) : 0, got = 0;
        if ((rc = rs_def_get(k->r, what, version, &text, &got, err)))
            return rc;
        rc = op_def(&k->op, text, what, out, err);
        free(text);
        return rc;
    }
}

static int cmd_start(client *k)
{
    weft_error err = {0};
    op_start_args a = {0};
    def_workflow *def = NULL;
    json_object *input = NULL;
    char id[64];
    int rc;
    if ((rc = read_input(k->c->input, &input)))
        return rc;
    if ((rc = get_def(k, k->c->args[0], &def, &err))) {
        json_object_put(input);
        return fail(&err);
    }
    a.def = def;
    a.input = input;
    a.correlation_id = k->c->correlation_id;
    a.idempotency_key = k->c->idempotency_key;
    rc = op_start(&k->op, &a, id, &err);
    def_unref(def);
    json_object_put(input);
    if (rc)
        return fail(&err);
    printf("%s\n", id);
    return EXIT_OK;
}

static int cmd_register(client *k)
{
    weft_error err = {0};
    def_workflow *def = NULL;
    int rc;
    if (!is_file(k->c->args[0]))
        return die(EXIT_USAGE, "register needs a .lua or .json file, not '%s'", k->c->args[0]);
    if (get_def(k, k->c->args[0], &def, &err))
        return fail(&err);
    rc = rs_def_register(k->r, def->name, def->version,
                    json_object_to_json_string_ext(def->json, JSON_C_TO_STRING_PLAIN), &err);
    if (rc == 0)
        printf("registered %s version %d\n", def->name, def->version);
    def_unref(def);
    return rc ? fail(&err) : EXIT_OK;
}

/* Types some live daemon serves (seen in the last 15 s), as a JSON array. */
static json_object *served_types(client *k)
{
    weft_error err = {0};
    json_object *all = NULL, *served = json_object_new_array(), *parsed = json_object_new_array();
    char *text = NULL;
    int64_t now = wu_now_ms();
    if (rs_daemons(k->r, &text, &err) || wu_parse_json("daemons", text, &all, &err)) {
        free(text);
        json_object_put(parsed);
        return served;
    }
    free(text);
    json_object_object_foreach(all, id, info)
    {
        json_object *types, *seen;
        size_t i;
        (void)id;
        if (json_object_is_type(info, json_type_string)) {
            /* stored as text: parse, and keep it until we are done */
            info = json_tokener_parse(json_object_get_string(info));
            if (!info)
                continue;
            json_object_array_add(parsed, info);
        }
        if (!json_object_object_get_ex(info, "seen", &seen) ||
            now - json_object_get_int64(seen) > 15000 ||
            !json_object_object_get_ex(info, "types", &types))
            continue;
        for (i = 0; i < json_object_array_length(types); i++)
            json_object_array_add(served, json_object_get(json_object_array_get_idx(types, i)));
    }
    json_object_put(all);
    json_object_put(parsed);
    return served;
}

static int type_served(json_object *served, const char *type)
{
    size_t i;
    for (i = 0; i < json_object_array_length(served); i++) {
        json_object *v = json_object_array_get_idx(served, i);
        if (json_object_is_type(v, json_type_string) && !strcmp(json_object_get_string(v), type))
            return 1;
    }
    return 0;
}

static int cmd_status(client *k)
{
    weft_error err = {0};
    xc_exec *x = NULL;
    json_object *j, *served, *unserved = json_object_new_array(), *tasks;
    size_t i;
    if (op_load(&k->op, k->c->args[0], &x, NULL, &err)) {
        json_object_put(unserved);
        return fail(&err);
    }
    j = xc_to_json(x);
    served = served_types(k);
    json_object_object_get_ex(j, "tasks", &tasks);
    for (i = 0; i < x->tasks.len; i++) {
        xc_task *t = x->tasks.items[i];
        char why[256];
        if (xc_task_terminal(t->status) || t->def->type->map || !t->queued ||
            type_served(served, t->def->type_name))
            continue;
        snprintf(why, sizeof why, "waiting: no running weftd serves task type %s",
                 t->def->type_name);
        json_object_object_add(json_object_array_get_idx(tasks, i), "reasonForIncompletion",
                               json_object_new_string(why));
        if (!type_served(unserved, t->def->type_name))
            json_object_array_add(unserved, json_object_new_string(t->def->type_name));
    }
    if (json_object_array_length(unserved))
        json_object_object_add(j, "unservedTaskTypes", unserved);
    else
        json_object_put(unserved);
    json_object_put(served);
    printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY |
                                                         JSON_C_TO_STRING_SPACED |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(j);
    xc_free(x);
    return EXIT_OK;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static int cmd_wait(client *k)
{
    weft_error err = {0};
    double timeout = k->c->timeout ? atof(k->c->timeout) : 0;
    int64_t deadline = timeout > 0 ? wu_mono_ms() + (int64_t)(timeout * 1000) : 0;
    long pause = 10;
    for (;;) {
        rs_exec e = {0};
        weft_wf_status st;
        if (rs_exec_load(k->r, k->c->args[0], 0, &e, &err)) {
            if (err.code == WEFT_EIO && (!deadline || wu_mono_ms() < deadline)) {
                sleep_ms(500); /* Redis restarting: keep waiting */
                continue;
            }
            return fail(&err);
        }
        if (e.status && xc_wf_status_parse(e.status, &st) == 0 && xc_wf_terminal(st)) {
            json_object *doc = NULL, *out = NULL, *ref = NULL;
            json_object *loaded = NULL;
            if (wu_parse_json("workflow", e.doc, &doc, &err) == 0 &&
                !json_object_object_get_ex(doc, "outputRef", &ref))
                json_object_object_get_ex(doc, "output", &out);
            if (ref) {
                /* a large output kept outside (codec.c) */
                if (ps_load(k->op.ps, k->c->args[0], json_object_get_string(ref), &loaded, &err))
                    fprintf(stderr, "weft: %s\n", err.msg);
                out = loaded;
            }
            if (st != WEFT_WF_COMPLETED) {
                json_object *reason = NULL;
                if (doc)
                    json_object_object_get_ex(doc, "reason", &reason);
                fprintf(stderr, "weft: workflow %s %s%s%s\n", k->c->args[0], e.status,
                        reason ? ": " : "", reason ? json_object_get_string(reason) : "");
            }
            printf("%s\n", out ? json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN |
                                                                      JSON_C_TO_STRING_NOSLASHESCAPE)
                               : "{}");
            json_object_put(doc);
            json_object_put(loaded);
            rs_exec_clear(&e);
            return st == WEFT_WF_COMPLETED ? EXIT_OK : EXIT_WF_FAILED;
        }
        rs_exec_clear(&e);
        if (deadline && wu_mono_ms() >= deadline) {
            fprintf(stderr, "weft: workflow %s still running after %gs\n", k->c->args[0],
                    timeout);
            return EXIT_TIMEOUT;
        }
        sleep_ms(pause);
        pause = pause * 2 > 200 ? 200 : pause * 2;
    }
}

static int print_event(void *ud, const char *id, const char *json)
{
    json_object *ev = json_tokener_parse(json), *task, *status;
    int end = 0;
    weft_wf_status st;
    printf("%s\n", json);
    fflush(stdout);
    if (ev && !json_object_object_get_ex(ev, "taskId", &task) &&
        json_object_object_get_ex(ev, "status", &status) &&
        xc_wf_status_parse(json_object_get_string(status), &st) == 0 && xc_wf_terminal(st))
        end = 1;
    json_object_put(ev);
    return end;
}

static int cmd_watch(client *k)
{
    weft_error err = {0};
    char last[RS_EVENT_ID_MAX] = "0";
    rs_exec e = {0};
    if (rs_exec_load(k->r, k->c->args[0], 0, &e, &err))
        return fail(&err);
    rs_exec_clear(&e);
    for (;;) {
        char before[RS_EVENT_ID_MAX];
        int n;
        snprintf(before, sizeof before, "%s", last);
        n = rs_events(k->r, k->c->args[0], last, last, 1000, print_event, NULL, &err);
        if (n < 0) {
            if (err.code == WEFT_EIO) {
                sleep_ms(500);
                continue;
            }
            return fail(&err);
        }
        if (n > 0 && strcmp(before, last)) {
            /* did the last one end the workflow? print_event stopped early if so */
            rs_exec s = {0};
            weft_wf_status st;
            if (rs_exec_load(k->r, k->c->args[0], 0, &s, &err) == 0 && s.status &&
                xc_wf_status_parse(s.status, &st) == 0 && xc_wf_terminal(st)) {
                /* drain what is left, then stop */
                rs_events(k->r, k->c->args[0], last, last, 0, print_event, NULL, &err);
                rs_exec_clear(&s);
                return EXIT_OK;
            }
            rs_exec_clear(&s);
        }
    }
}

static int cmd_change(client *k, op_fn fn, void *ud)
{
    weft_error err = {0};
    if (op_update(&k->op, k->c->args[0], fn, ud, &err))
        return fail(&err);
    return EXIT_OK;
}

/* terminate, pause, resume: recorded first, so a busy workflow cannot outrun them */
static int cmd_command(client *k, op_cmd cmd, const char *reason)
{
    weft_error err = {0};
    if (k->c->timeout) {
        char *end;
        double s = strtod(k->c->timeout, &end);
        if (end == k->c->timeout || *end || !(s > 0) || s > 86400)
            return die(EXIT_USAGE, "--timeout: expected seconds, above 0 and at most 86400 (got %s)",
                       k->c->timeout);
        k->op.command_wait_ms = (int64_t)(s * 1000);
    }
    if (op_command(&k->op, k->c->args[0], cmd, reason, &err)) {
        if (err.code != WEFT_ETIMEOUT)
            return fail(&err);
        fprintf(stderr, "weft: %s\n", err.msg);
        return EXIT_TIMEOUT;
    }
    return EXIT_OK;
}

static int cmd_signal(client *k)
{
    weft_error err = {0};
    op_complete c = {0};
    json_object *out = NULL;
    int rc;
    if (k->c->nargs < 2)
        return die(EXIT_USAGE, "usage: weft signal ID REF [JSON]%s", "");
    if (k->c->nargs > 2 && wu_parse_json("signal payload", k->c->args[2], &out, &err))
        return fail(&err);
    c.ref = k->c->args[1];
    c.status = WEFT_TASK_COMPLETED;
    if (k->c->status && strcmp(k->c->status, "COMPLETED")) {
        if (strcmp(k->c->status, "FAILED")) {
            json_object_put(out);
            return die(EXIT_USAGE, "--status %s: use COMPLETED or FAILED", k->c->status);
        }
        c.status = WEFT_TASK_FAILED;
        c.reason = k->c->reason ? k->c->reason : "failed by signal";
    }
    c.output = out;
    rc = cmd_change(k, op_fn_complete, &c);
    json_object_put(out);
    return rc;
}

/* weft secret set NAME (value on stdin) | list | delete NAME */
static int cmd_secret(client *k)
{
    weft_error err = {0};
    const char *what = k->c->args[0], *name = k->c->nargs > 1 ? k->c->args[1] : NULL;
    if (!strcmp(what, "list")) {
        char **names;
        size_t n, i;
        if (rs_secret_names(k->r, &names, &n, &err))
            return fail(&err);
        for (i = 0; i < n; i++) {
            printf("%s\n", names[i]);
            free(names[i]);
        }
        free(names);
        return EXIT_OK;
    }
    if (!name)
        return die(EXIT_USAGE, "usage: weft secret set NAME < value | list | delete NAME%s", "");
    if (!strcmp(what, "delete"))
        return rs_secret_delete(k->r, name, &err) ? fail(&err) : EXIT_OK;
    if (!strcmp(what, "set")) {
        wu_buf b = {0};
        char chunk[4096];
        size_t n;
        int rc;
        while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
            wu_buf_add(&b, chunk, n);
        /* one trailing newline is what `echo` adds, not part of the secret */
        if (b.len && b.data[b.len - 1] == '\n')
            b.data[--b.len] = 0;
        if (b.len && b.data[b.len - 1] == '\r')
            b.data[--b.len] = 0;
        rc = rs_secret_set(k->r, name, b.data ? b.data : "", &err);
        if (b.data)
            memset(b.data, 0, b.len);
        wu_buf_free(&b);
        return rc ? fail(&err) : EXIT_OK;
    }
    return die(EXIT_USAGE, "unknown secret command '%s' (set, list or delete)", what);
}

/* ---- the same commands through a weftd's REST API (libcurl) ---- */

typedef struct api {
    const cli *c;
    CURL *h;
    char *base; /* the server's URL, without a trailing "/" or "/api" */
    struct curl_slist *headers;
} api;

static size_t to_buf(char *p, size_t size, size_t n, void *ud)
{
    return wu_buf_add(ud, p, size * n) ? 0 : size * n;
}

/* A path segment or query value, percent-encoded (malloc'd). */
static char *esc(api *a, const char *s)
{
    char *e = curl_easy_escape(a->h, s, 0), *d = e ? strdup(e) : NULL;
    curl_free(e);
    return d;
}

/*
 * One request. body: JSON text or NULL. The status goes to *code, the
 * answer to out. Returns 0, or EXIT_USAGE after printing why no answer came.
 */
static int api_do(api *a, const char *method, const char *path, const char *body, long *code,
                  wu_buf *out)
{
    wu_buf url = {0};
    CURLcode rc;
    char errbuf[CURL_ERROR_SIZE] = "";
    *code = 0;
    out->len = 0;
    if (out->data)
        out->data[0] = 0;
    wu_buf_add(&url, a->base, strlen(a->base));
    wu_buf_add(&url, path, strlen(path));
    curl_easy_reset(a->h);
    curl_easy_setopt(a->h, CURLOPT_URL, url.data);
    curl_easy_setopt(a->h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(a->h, CURLOPT_HTTPHEADER, a->headers);
    curl_easy_setopt(a->h, CURLOPT_WRITEFUNCTION, to_buf);
    curl_easy_setopt(a->h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(a->h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(a->h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(a->h, CURLOPT_TIMEOUT_MS, 60000L);
    curl_easy_setopt(a->h, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(a->h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(a->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else if (!strcmp(method, "POST") || !strcmp(method, "PUT")) {
        curl_easy_setopt(a->h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(a->h, CURLOPT_POSTFIELDSIZE, 0L);
    } else if (!strcmp(method, "GET")) {
        curl_easy_setopt(a->h, CURLOPT_HTTPGET, 1L);
    }
    rc = curl_easy_perform(a->h);
    wu_buf_free(&url);
    if (rc != CURLE_OK) {
        fprintf(stderr, "weft: %s%s: %s\n", a->base, path,
                errbuf[0] ? errbuf : curl_easy_strerror(rc));
        return EXIT_USAGE;
    }
    curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, code);
    return EXIT_OK;
}

/* An error answer: its message on stderr; 409 (not allowed now) exits 1. */
static int api_fail(long code, const wu_buf *out)
{
    json_object *j = out->len ? json_tokener_parse(out->data) : NULL, *m;
    if (j && json_object_object_get_ex(j, "message", &m))
        fprintf(stderr, "weft: %s\n", json_object_get_string(m));
    else
        fprintf(stderr, "weft: HTTP %ld%s%.300s\n", code, out->len ? ": " : "",
                out->len ? out->data : "");
    json_object_put(j);
    return code == 409 ? EXIT_WF_FAILED : EXIT_USAGE;
}

/* A request whose answer only needs to be a success. */
static int api_simple(api *a, const char *method, const char *path, const char *body,
                      wu_buf *out)
{
    long code;
    int rc = api_do(a, method, path, body, &code, out);
    if (rc)
        return rc;
    return code >= 200 && code < 300 ? EXIT_OK : api_fail(code, out);
}

static int api_start(api *a)
{
    weft_error err = {0};
    const cli *c = a->c;
    json_object *req = json_object_new_object(), *input = NULL, *def = NULL;
    wu_buf out = {0};
    int rc;
    if ((rc = read_input(c->input, &input))) {
        json_object_put(req);
        return rc;
    }
    if (is_file(c->args[0])) {
        /* compiled here, so errors name the file and line */
        if (dsl_load(c->args[0], &def, NULL, &err)) {
            json_object_put(req);
            json_object_put(input);
            return fail(&err);
        }
        json_object_object_add(req, "workflowDef", def);
    } else {
        json_object_object_add(req, "name", json_object_new_string(c->args[0]));
        if (c->version)
            json_object_object_add(req, "version", json_object_new_int(atoi(c->version)));
    }
    json_object_object_add(req, "input", input);
    if (c->correlation_id)
        json_object_object_add(req, "correlationId", json_object_new_string(c->correlation_id));
    if (c->idempotency_key)
        json_object_object_add(req, "idempotencyKey", json_object_new_string(c->idempotency_key));
    rc = api_simple(a, "POST", "/api/workflow",
                    json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN), &out);
    if (rc == EXIT_OK)
        printf("%s\n", out.data ? out.data : "");
    json_object_put(req);
    wu_buf_free(&out);
    return rc;
}

static int api_register(api *a)
{
    weft_error err = {0};
    json_object *def = NULL, *v;
    wu_buf out = {0};
    int rc;
    if (!is_file(a->c->args[0]))
        return die(EXIT_USAGE, "register needs a .lua or .json file, not '%s'", a->c->args[0]);
    if (dsl_load(a->c->args[0], &def, NULL, &err))
        return fail(&err);
    rc = api_simple(a, "POST", "/api/metadata/workflow",
                    json_object_to_json_string_ext(def, JSON_C_TO_STRING_PLAIN), &out);
    if (rc == EXIT_OK)
        printf("registered %s version %d\n",
               json_object_object_get_ex(def, "name", &v) ? json_object_get_string(v) : "?",
               json_object_object_get_ex(def, "version", &v) ? json_object_get_int(v) : 1);
    json_object_put(def);
    wu_buf_free(&out);
    return rc;
}

/* "/api/workflow/<id><suffix>" with the id escaped. */
static char *wf_path(api *a, const char *suffix)
{
    char *id = esc(a, a->c->args[0]), *p;
    size_t n;
    if (!id)
        return NULL;
    n = strlen(id) + strlen(suffix) + 16;
    if ((p = malloc(n)))
        snprintf(p, n, "/api/workflow/%s%s", id, suffix);
    free(id);
    return p;
}

static int api_status(api *a)
{
    wu_buf out = {0};
    char *path = wf_path(a, "");
    json_object *j;
    int rc = path ? api_simple(a, "GET", path, NULL, &out) : EXIT_USAGE;
    if (rc == EXIT_OK) {
        j = json_tokener_parse(out.data ? out.data : "");
        printf("%s\n", j ? json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY |
                                                                 JSON_C_TO_STRING_SPACED |
                                                                 JSON_C_TO_STRING_NOSLASHESCAPE)
                         : (out.data ? out.data : ""));
        json_object_put(j);
    }
    free(path);
    wu_buf_free(&out);
    return rc;
}

static int api_wait(api *a)
{
    double timeout = a->c->timeout ? atof(a->c->timeout) : 0;
    int64_t deadline = timeout > 0 ? wu_mono_ms() + (int64_t)(timeout * 1000) : 0;
    char *path = wf_path(a, "?includeTasks=false");
    wu_buf out = {0};
    long pause = 10;
    int rc = EXIT_USAGE;
    while (path) {
        json_object *j, *st, *o, *reason;
        weft_wf_status s;
        long code;
        if (api_do(a, "GET", path, NULL, &code, &out) || code == 503) {
            /* the daemon or its Redis restarting: keep waiting */
            if (!deadline || wu_mono_ms() < deadline) {
                sleep_ms(500);
                continue;
            }
            rc = code == 503 ? api_fail(code, &out) : EXIT_USAGE;
            break;
        }
        if (code != 200) {
            rc = api_fail(code, &out);
            break;
        }
        j = json_tokener_parse(out.data ? out.data : "");
        if (j && json_object_object_get_ex(j, "status", &st) &&
            xc_wf_status_parse(json_object_get_string(st), &s) == 0 && xc_wf_terminal(s)) {
            if (s != WEFT_WF_COMPLETED) {
                reason = NULL;
                json_object_object_get_ex(j, "reasonForIncompletion", &reason);
                fprintf(stderr, "weft: workflow %s %s%s%s\n", a->c->args[0],
                        json_object_get_string(st), reason ? ": " : "",
                        reason ? json_object_get_string(reason) : "");
            }
            o = NULL;
            json_object_object_get_ex(j, "output", &o);
            printf("%s\n", o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                                     JSON_C_TO_STRING_NOSLASHESCAPE)
                             : "{}");
            json_object_put(j);
            rc = s == WEFT_WF_COMPLETED ? EXIT_OK : EXIT_WF_FAILED;
            break;
        }
        json_object_put(j);
        if (deadline && wu_mono_ms() >= deadline) {
            fprintf(stderr, "weft: workflow %s still running after %gs\n", a->c->args[0], timeout);
            rc = EXIT_TIMEOUT;
            break;
        }
        sleep_ms(pause);
        pause = pause * 2 > 200 ? 200 : pause * 2;
    }
    free(path);
    wu_buf_free(&out);
    return rc;
}

/* Server-Sent Events, a line at a time. */
typedef struct sse_reader {
    api *a;
    wu_buf line, data, err;
    char id[64], last[64];
    int ended; /* the last event was the workflow's end */
} sse_reader;

static void sse_dispatch(sse_reader *r)
{
    if (!r->data.len)
        return;
    printf("%s\n", r->data.data);
    fflush(stdout);
    snprintf(r->last, sizeof r->last, "%s", r->id);
    r->ended = 0;
    {
        json_object *ev = json_tokener_parse(r->data.data), *v;
        weft_wf_status st;
        if (ev && !json_object_object_get_ex(ev, "taskId", &v) &&
            json_object_object_get_ex(ev, "status", &v) &&
            xc_wf_status_parse(json_object_get_string(v), &st) == 0 && xc_wf_terminal(st))
            r->ended = 1;
        json_object_put(ev);
    }
    r->data.len = 0;
}

static void sse_line(sse_reader *r, const char *l)
{
    if (!*l)
        sse_dispatch(r);
    else if (!strncmp(l, "id: ", 4))
        snprintf(r->id, sizeof r->id, "%s", l + 4);
    else if (!strncmp(l, "data: ", 6)) {
        if (r->data.len)
            wu_buf_add(&r->data, "\n", 1);
        wu_buf_add(&r->data, l + 6, strlen(l + 6));
    }
}

static size_t sse_write(char *p, size_t size, size_t n, void *ud)
{
    sse_reader *r = ud;
    long code = 0;
    size_t i, len = size * n;
    curl_easy_getinfo(r->a->h, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200)
        return wu_buf_add(&r->err, p, len) ? 0 : len;
    for (i = 0; i < len; i++) {
        if (p[i] == '\n') {
            if (r->line.len && r->line.data[r->line.len - 1] == '\r')
                r->line.data[--r->line.len] = 0;
            sse_line(r, r->line.data ? r->line.data : "");
            r->line.len = 0;
            if (r->line.data)
                r->line.data[0] = 0;
        } else if (wu_buf_add(&r->line, p + i, 1)) {
            return 0;
        }
    }
    return len;
}

static int api_watch(api *a)
{
    sse_reader r;
    char *path = wf_path(a, "/events"), hdr[100];
    int rc = EXIT_USAGE;
    memset(&r, 0, sizeof r);
    r.a = a;
    snprintf(r.last, sizeof r.last, "0");
    while (path) {
        struct curl_slist *h = NULL, *x;
        wu_buf url = {0};
        CURLcode cr;
        long code = 0;
        for (x = a->headers; x; x = x->next)
            h = curl_slist_append(h, x->data);
        snprintf(hdr, sizeof hdr, "Last-Event-ID: %s", r.last);
        h = curl_slist_append(h, hdr);
        wu_buf_add(&url, a->base, strlen(a->base));
        wu_buf_add(&url, path, strlen(path));
        curl_easy_reset(a->h);
        curl_easy_setopt(a->h, CURLOPT_URL, url.data);
        curl_easy_setopt(a->h, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(a->h, CURLOPT_WRITEFUNCTION, sse_write);
        curl_easy_setopt(a->h, CURLOPT_WRITEDATA, &r);
        curl_easy_setopt(a->h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(a->h, CURLOPT_NOSIGNAL, 1L);
        /* keepalives come every 15 s: 45 s of silence is a dead server */
        curl_easy_setopt(a->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(a->h, CURLOPT_LOW_SPEED_TIME, 45L);
        r.err.len = 0;
        cr = curl_easy_perform(a->h);
        curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &code);
        curl_slist_free_all(h);
        wu_buf_free(&url);
        if (code != 0 && code != 200) {
            rc = api_fail(code, &r.err);
            break;
        }
        sse_dispatch(&r);
        if (r.ended) {
            rc = EXIT_OK;
            break;
        }
        /* cut off early (a restarting daemon): go on after the last event seen */
        (void)cr;
        sleep_ms(500);
    }
    free(path);
    wu_buf_free(&r.line);
    wu_buf_free(&r.data);
    wu_buf_free(&r.err);
    return rc;
}

static int api_change(api *a, const char *method, const char *suffix)
{
    wu_buf out = {0};
    char *path = wf_path(a, suffix);
    int rc = path ? api_simple(a, method, path, NULL, &out) : EXIT_USAGE;
    free(path);
    wu_buf_free(&out);
    return rc;
}

static int api_terminate(api *a)
{
    char *reason = a->c->reason ? esc(a, a->c->reason) : NULL, *q;
    size_t n = (reason ? strlen(reason) : 0) + 16;
    int rc = EXIT_USAGE;
    if ((q = malloc(n))) {
        snprintf(q, n, "%s%s", reason ? "?reason=" : "", reason ? reason : "");
        rc = api_change(a, "DELETE", q);
    }
    free(q);
    free(reason);
    return rc;
}

/* signal ID REF [JSON]: POST /api/tasks/{id}/{ref}/{status}, the body is the output. */
static int api_signal(api *a)
{
    weft_error err = {0};
    const cli *c = a->c;
    json_object *out = NULL;
    const char *status = "COMPLETED";
    char *id, *ref, *reason = NULL, *path;
    wu_buf ans = {0};
    size_t n;
    int rc;
    if (c->nargs < 2)
        return die(EXIT_USAGE, "usage: weft signal ID REF [JSON]%s", "");
    if (c->nargs > 2 && wu_parse_json("signal payload", c->args[2], &out, &err))
        return fail(&err);
    if (c->status && strcmp(c->status, "COMPLETED")) {
        if (strcmp(c->status, "FAILED")) {
            json_object_put(out);
            return die(EXIT_USAGE, "--status %s: use COMPLETED or FAILED", c->status);
        }
        status = "FAILED";
        reason = esc(a, c->reason ? c->reason : "failed by signal");
    }
    id = esc(a, c->args[0]);
    ref = esc(a, c->args[1]);
    n = (id ? strlen(id) : 0) + (ref ? strlen(ref) : 0) + (reason ? strlen(reason) : 0) + 64;
    if ((path = malloc(n)))
        snprintf(path, n, "/api/tasks/%s/%s/%s%s%s", id ? id : "", ref ? ref : "", status,
                 reason ? "?reason=" : "", reason ? reason : "");
    rc = path ? api_simple(a, "POST", path,
                           out ? json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN) : "{}",
                           &ans)
              : EXIT_USAGE;
    json_object_put(out);
    free(path);
    free(id);
    free(ref);
    free(reason);
    wu_buf_free(&ans);
    return rc;
}

static int api_main(const cli *c, const char *url)
{
    api a;
    const char *token = getenv("WEFT_API_TOKEN"), *cmd = c->cmd;
    size_t n;
    int rc;
    memset(&a, 0, sizeof a);
    a.c = c;
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return die(EXIT_USAGE, "--api %s: expected an http:// or https:// URL", url);
    if (!strcmp(cmd, "secret"))
        return die(EXIT_USAGE, "secret %s: secrets are kept in Redis: use --redis, not --api",
                   c->args[0]);
    if (!(a.base = strdup(url)))
        return die(EXIT_USAGE, "out of memory%s", "");
    n = strlen(a.base);
    while (n && a.base[n - 1] == '/')
        a.base[--n] = 0;
    if (n >= 4 && !strcmp(a.base + n - 4, "/api"))
        a.base[n - 4] = 0; /* as Conductor's clients write it */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!(a.h = curl_easy_init())) {
        free(a.base);
        return die(EXIT_USAGE, "cannot start libcurl%s", "");
    }
    a.headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (token && *token) {
        size_t tn = strlen(token) + 32;
        char *h = malloc(tn);
        if (h) {
            snprintf(h, tn, "Authorization: Bearer %s", token);
            a.headers = curl_slist_append(a.headers, h);
            memset(h, 0, tn);
            free(h);
        }
    }
    if (!strcmp(cmd, "start"))
        rc = api_start(&a);
    else if (!strcmp(cmd, "register"))
        rc = api_register(&a);
    else if (!strcmp(cmd, "status"))
        rc = api_status(&a);
    else if (!strcmp(cmd, "wait"))
        rc = api_wait(&a);
    else if (!strcmp(cmd, "watch"))
        rc = api_watch(&a);
    else if (!strcmp(cmd, "terminate"))
        rc = api_terminate(&a);
    else if (!strcmp(cmd, "pause"))
        rc = api_change(&a, "PUT", "/pause");
    else if (!strcmp(cmd, "resume"))
        rc = api_change(&a, "PUT", "/resume");
    else if (!strcmp(cmd, "retry"))
        rc = api_change(&a, "POST", "/retry");
    else if (!strcmp(cmd, "restart"))
        rc = api_change(&a, "POST", "/restart");
    else
        rc = api_signal(&a);
    curl_slist_free_all(a.headers);
    curl_easy_cleanup(a.h);
    curl_global_cleanup();
    free(a.base);
    return rc;
}

static const char *const commands[] = {"start",  "status",  "wait",    "register", "terminate",
                                       "pause",  "resume",  "retry",   "restart",  "signal",
                                       "watch",  "secret",  NULL};

int client_has(const char *cmd)
{
    size_t i;
    for (i = 0; commands[i]; i++)
        if (!strcmp(cmd, commands[i]))
            return 1;
    return 0;
}

int client_main(const cli *c)
{
    client k;
    const char *cmd = c->cmd;
    int rc;
    if (c->nargs < 1)
        return die(EXIT_USAGE, "%s needs an argument (see weft --help)", cmd);
    /* --api, else --redis, else WEFT_API_URL, else Redis */
    if (c->api || (!c->redis && getenv("WEFT_API_URL") && *getenv("WEFT_API_URL")))
        return api_main(c, c->api ? c->api : getenv("WEFT_API_URL"));
    if ((rc = client_open(&k, c)))
        return rc;
    if (!strcmp(cmd, "start"))
        rc = cmd_start(&k);
    else if (!strcmp(cmd, "register"))
        rc = cmd_register(&k);
    else if (!strcmp(cmd, "status"))
        rc = cmd_status(&k);
    else if (!strcmp(cmd, "wait"))
        rc = cmd_wait(&k);
    else if (!strcmp(cmd, "watch"))
        rc = cmd_watch(&k);
    else if (!strcmp(cmd, "terminate"))
        rc = cmd_command(&k, OP_TERMINATE, c->reason ? c->reason : "terminated by an operator");
    else if (!strcmp(cmd, "pause"))
        rc = cmd_command(&k, OP_PAUSE, NULL);
    else if (!strcmp(cmd, "resume"))
        rc = cmd_command(&k, OP_RESUME, NULL);
    else if (!strcmp(cmd, "retry"))
        rc = cmd_change(&k, op_fn_retry, NULL);
    else if (!strcmp(cmd, "restart"))
        rc = cmd_change(&k, op_fn_restart, NULL);
    else if (!strcmp(cmd, "secret"))
        rc = cmd_secret(&k);
    else
        rc = cmd_signal(&k);
    client_close(&k);
    return rc;
}

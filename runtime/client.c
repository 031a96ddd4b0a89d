/*
 * weft commands on workflows kept in Redis. They talk to Redis directly,
 * like a BullMQ producer: no daemon is needed to start or inspect a
 * workflow; a running weftd does the work.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "codec.h"
#include "dsl.h"
#include "host.h"
#include "ops.h"
#include "plugin_loader.h"

typedef struct client {
    const cli *c;
    rs *r;
    pl_registry *plugins;
    def_env defs;
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

/* The definition JSON of a file (DSL or JSON). */
static int file_json(const char *path, json_object **out, weft_error *err)
{
    size_t n = strlen(path);
    char *text;
    int rc;
    if (n > 4 && !strcmp(path + n - 4, ".lua"))
        return dsl_compile_file(path, out, NULL, err);
    if ((rc = wu_read_file(path, &text, NULL, err)))
        return rc;
    rc = wu_parse_json(path, text, out, err);
    free(text);
    return rc;
}

/* FILE.lua | FILE.json | NAME [--version V] -> a compiled definition. */
static int get_def(client *k, const char *what, def_workflow **out, weft_error *err)
{
    json_object *json = NULL;
    int rc;
    if (is_file(what)) {
        if ((rc = file_json(what, &json, err)))
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
    rc = rs_def_put(k->r, def->name, def->version,
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
            json_object *doc = NULL, *out = NULL;
            json_object *loaded = NULL;
            if (wu_parse_json("workflow", e.doc, &doc, &err) == 0)
                json_object_object_get_ex(doc, "output", &out);
            if (ps_ref_of(out)) {
                /* a large output kept outside */
                if (ps_load(k->op.ps, ps_ref_of(out), &loaded, &err))
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
    snprintf(ud, 64, "%s", id);
    return end;
}

static int cmd_watch(client *k)
{
    weft_error err = {0};
    char last[64] = "0";
    rs_exec e = {0};
    if (rs_exec_load(k->r, k->c->args[0], 0, &e, &err))
        return fail(&err);
    rs_exec_clear(&e);
    for (;;) {
        char before[64];
        int n;
        snprintf(before, sizeof before, "%s", last);
        n = rs_events(k->r, k->c->args[0], last, 1000, print_event, last, &err);
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
                rs_events(k->r, k->c->args[0], last, 0, print_event, last, &err);
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
        rc = cmd_change(&k, op_fn_terminate,
                        (void *)(c->reason ? c->reason : "terminated by an operator"));
    else if (!strcmp(cmd, "pause"))
        rc = cmd_change(&k, op_fn_pause, NULL);
    else if (!strcmp(cmd, "resume"))
        rc = cmd_change(&k, op_fn_resume, NULL);
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

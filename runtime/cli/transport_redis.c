/*
 * The weft commands' operations straight over Redis, like a BullMQ producer:
 * no daemon is needed to start or inspect a workflow; a running weftd does
 * the work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "cli/transport.h"
#include "core/codec.h"
#include "core/ops.h"
#include "core/served.h"
#include "lua/dsl.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "store/redis/backend.h"

typedef struct rtp {
    st_store *st;
    ps_store *ps; /* large outputs kept outside, read back by wait */
    pl_registry *plugins;
    def_env defs;
    def_limits limits;
    dec_env dec;
    op_env op;
} rtp;

static const weft_task_type *find_type(void *ud, const char *name)
{
    return pl_find_type(ud, name, NULL);
}

/* FILE.lua | FILE.json | NAME [--version V] -> a compiled definition.
 * Returns an exit code, the error said: a file that cannot be read is bad
 * input (2), a store that cannot be reached is not (cli_fail). */
static int get_def(cli_tp *t, const char *what, def_workflow **out)
{
    rtp *k = t->impl;
    weft_error err = {0};
    json_object *json = NULL, *lines = NULL;
    char *text = NULL;
    int rc, got = 0;
    if (cli_is_file(what)) {
        if (dsl_load(what, &json, &lines, &err)) return die(EXIT_USAGE, "%s", err.msg);
        rc = def_compile(&k->defs, json, what, lines, out, &err);
        json_object_put(json);
        json_object_put(lines);
        return rc ? die(EXIT_USAGE, "%s", err.msg) : EXIT_OK;
    }
    rc = ST(k->st, def_get, what, t->c->version ? atoi(t->c->version) : 0, &text, &got, &err);
    if (rc == 0) rc = op_def(&k->op, text, what, out, &err);
    free(text);
    return rc ? cli_fail(&err) : EXIT_OK;
}

static int r_start(cli_tp *t, const char *what, json_object *input, char **id)
{
    rtp *k = t->impl;
    weft_error err = {0};
    op_start_args a = {0};
    def_workflow *def = NULL;
    char buf[64];
    int rc;
    if ((rc = get_def(t, what, &def))) return rc;
    a.def = def;
    a.input = input;
    a.correlation_id = t->c->correlation_id;
    a.idempotency_key = t->c->idempotency_key;
    if ((rc = cli_priority(t->c, &a.priority)) || (rc = cli_domains(t->c, &a.task_to_domain))) {
        def_unref(def);
        return rc;
    }
    rc = op_start(&k->op, &a, buf, &err);
    json_object_put(a.task_to_domain);
    def_unref(def);
    if (rc) return cli_fail(&err);
    *id = strdup(buf);
    return EXIT_OK;
}

static int r_reg(cli_tp *t, const char *file, char **name, int *version)
{
    rtp *k = t->impl;
    weft_error err = {0};
    def_workflow *def = NULL;
    int rc;
    if ((rc = get_def(t, file, &def))) return rc;
    if (!(rc = sv_check(k->st, &k->defs, def, NULL, 0, &err)))
        rc = ST(k->st, def_register, def->name, def->version,
                json_object_to_json_string_ext(def->json, JSON_C_TO_STRING_PLAIN), &err);
    *name = strdup(def->name);
    *version = def->version;
    def_unref(def);
    return rc ? cli_fail(&err) : EXIT_OK;
}

/* Conductor's Workflow JSON, with a reason on each queued task no live
 * daemon serves, and those types in unservedTaskTypes. */
static int r_status(cli_tp *t, const char *id, json_object **doc)
{
    rtp *k = t->impl;
    weft_error err = {0};
    xc_exec *x = NULL;
    json_object *j, *served, *unserved, *tasks;
    size_t i;
    if (op_load(&k->op, id, &x, NULL, &err)) return cli_fail(&err);
    j = xc_to_json(x);
    op_say_waiting(&k->op, x, j);
    /* a store that does not answer here answered the load just now: none */
    if (sv_live(k->st, wu_now_ms(), &served, &err)) served = json_object_new_array();
    unserved = json_object_new_array();
    json_object_object_get_ex(j, "tasks", &tasks);
    for (i = 0; i < x->tasks.len; i++) {
        xc_task *tk = x->tasks.items[i];
        /* a daemon serves a type's queue, or a domain's ("<domain>:<type>") */
        const char *q = tk->domain ? xc_task_queue(tk) : tk->def->type_name;
        char why[300];
        if (xc_task_terminal(tk->status) || tk->def->type->map || !tk->queued ||
            sv_has(served, q, 0))
            continue;
        snprintf(why, sizeof why, "waiting: no running weftd serves %s %s",
                 tk->domain ? "queue" : "task type", q);
        json_object_object_add(json_object_array_get_idx(tasks, i), "reasonForIncompletion",
                               json_object_new_string(why));
        if (!sv_has(unserved, q, 0)) json_object_array_add(unserved, json_object_new_string(q));
    }
    if (json_object_array_length(unserved))
        json_object_object_add(j, "unservedTaskTypes", unserved);
    else
        json_object_put(unserved);
    json_object_put(served);
    xc_free(x);
    *doc = j;
    return EXIT_OK;
}

static int r_poll(cli_tp *t, const char *id, int final, tp_wf *w)
{
    rtp *k = t->impl;
    weft_error err = {0};
    st_doc e = {0};
    json_object *doc = NULL, *v = NULL, *ref = NULL;
    memset(w, 0, sizeof *w);
    if (ST(k->st, exec_read, id, &e, &err)) {
        if (err.code == WEFT_EIO && !final) return TP_AGAIN; /* Redis restarting: keep waiting */
        return cli_fail(&err);
    }
    if (!e.status || xc_wf_status_parse(e.status, &w->status) || !xc_wf_terminal(w->status)) {
        st_doc_clear(&e);
        return EXIT_OK;
    }
    w->terminal = 1;
    if (wu_parse_json_stored("workflow", e.doc, &doc, &err) == 0) {
        if (!json_object_object_get_ex(doc, "outputRef", &ref) &&
            json_object_object_get_ex(doc, "output", &v))
            w->output = json_object_get(v);
        if (json_object_object_get_ex(doc, "reason", &v))
            w->reason = strdup(json_object_get_string(v));
    }
    /* a large output kept outside (codec.c) */
    if (ref && ps_load(k->ps, id, json_object_get_string(ref), &w->output, &err))
        fprintf(stderr, "weft: %s\n", err.msg);
    json_object_put(doc);
    st_doc_clear(&e);
    return EXIT_OK;
}

static int on_event(void *ud, const char *id, const char *json)
{
    (void)id;
    return cli_event(ud, json);
}

static int r_watch(cli_tp *t, const char *id, cli_watcher *w)
{
    rtp *k = t->impl;
    weft_error err = {0};
    char last[ST_EVENT_ID_MAX] = "0";
    st_doc e = {0};
    if (ST(k->st, exec_read, id, &e, &err)) return cli_fail(&err);
    st_doc_clear(&e);
    for (;;) {
        char before[ST_EVENT_ID_MAX];
        int n;
        snprintf(before, sizeof before, "%s", last);
        n = ST(k->st, events, id, last, last, 1000, on_event, w, &err);
        if (n < 0) {
            if (err.code == WEFT_EIO) {
                cli_sleep_ms(500);
                continue;
            }
            return cli_fail(&err);
        }
        if (n > 0 && strcmp(before, last)) {
            /* did the last one end the workflow? on_event stopped early if so */
            st_doc s = {0};
            weft_wf_status st;
            if (ST(k->st, exec_read, id, &s, &err) == 0 && s.status &&
                xc_wf_status_parse(s.status, &st) == 0 && xc_wf_terminal(st)) {
                /* drain what is left, then stop */
                ST(k->st, events, id, last, last, 0, on_event, w, &err);
                st_doc_clear(&s);
                if (!w->ended) { /* its end event is gone (trimmed): the execution says */
                    w->ended = 1;
                    w->end = st;
                }
                return EXIT_OK;
            }
            st_doc_clear(&s);
        }
    }
}

static int r_update(rtp *k, const char *id, op_fn fn, void *ud)
{
    weft_error err = {0};
    if (op_update(&k->op, id, fn, ud, &err)) return cli_fail(&err);
    return EXIT_OK;
}

/* terminate, pause, resume: recorded first, so a busy workflow cannot outrun
 * them; --timeout caps the wait for one to land. */
static int r_command(cli_tp *t, const char *id, op_cmd cmd, const char *reason)
{
    rtp *k = t->impl;
    weft_error err = {0};
    const char *timeout = t->c->timeout;
    if (timeout) {
        char *end;
        double s = strtod(timeout, &end);
        if (end == timeout || *end || !(s > 0) || s > 86400)
            return die(EXIT_USAGE,
                       "--timeout: expected seconds, above 0 and at most 86400 (got %s)", timeout);
        k->op.command_wait_ms = (int64_t)(s * 1000);
    }
    if (op_command(&k->op, id, cmd, reason, &err)) {
        if (err.code != WEFT_ETIMEOUT) return cli_fail(&err);
        fprintf(stderr, "weft: %s\n", err.msg);
        return EXIT_TIMEOUT;
    }
    return EXIT_OK;
}

static int r_act(cli_tp *t, const char *id, tp_act act, const char *reason)
{
    switch (act) {
    case TP_TERMINATE:
        return r_command(t, id, OP_TERMINATE, reason ? reason : "terminated by an operator");
    case TP_PAUSE:
        return r_command(t, id, OP_PAUSE, NULL);
    case TP_RESUME:
        return r_command(t, id, OP_RESUME, NULL);
    case TP_RETRY:
        return r_update(t->impl, id, op_fn_retry, NULL);
    default:
        return r_update(t->impl, id, op_fn_restart, NULL);
    }
}

static int r_signal(cli_tp *t, const char *id, const char *ref, int failed, const char *reason,
                    json_object *output)
{
    op_complete c = {0};
    c.ref = ref;
    c.status = failed ? WEFT_TASK_FAILED : WEFT_TASK_COMPLETED;
    c.reason = failed ? reason : NULL;
    c.output = output;
    return r_update(t->impl, id, op_fn_complete, &c);
}

static void r_close(cli_tp *t)
{
    rtp *k = t->impl;
    st_free(k->st);
    pl_free(k->plugins);
    ps_close(k->ps);
    free(k);
}

st_store *tp_store(cli_tp *t)
{
    return ((rtp *)t->impl)->st;
}

/* The runs q finds, as GET /api/workflow/search answers them. */
static int r_list(cli_tp *t, const st_query *q, json_object **res)
{
    weft_error err = {0};
    if (op_search(&((rtp *)t->impl)->op, q, 0, res, &err)) return cli_fail(&err);
    return EXIT_OK;
}

static const tp_ops ops = {
    .list = r_list,
    .start = r_start,
    .reg = r_reg,
    .status = r_status,
    .poll = r_poll,
    .watch = r_watch,
    .act = r_act,
    .signal = r_signal,
    .close = r_close,
};

int tp_open_redis(cli_tp *t, const cli *c, int plugins)
{
    weft_error err = {0};
    st_redis_opts o = {0};
    const char *path = c->plugin_path ? c->plugin_path : getenv("WEFT_PLUGIN_PATH");
    char *dflt = NULL;
    rtp *k = calloc(1, sizeof *k);
    if (!k) return die(EXIT_USAGE, "out of memory%s", "");
    /* plugins validate definitions from files; types served elsewhere are
     * fine. Other commands read stored definitions and need none. */
    k->plugins = pl_new(host_table());
    if (plugins) {
        if (!path || !*path) path = dflt = pl_default_path();
        if (k->plugins && path) pl_load_path(k->plugins, path);
        free(dflt);
    }
    k->defs.find_type = find_type;
    k->defs.ud = k->plugins;
    k->defs.searched = k->plugins ? pl_searched(k->plugins) : "";
    k->defs.known = k->plugins ? pl_type_names(k->plugins) : "";
    k->defs.host = host_table();
    k->defs.allow_unknown = 1;
    if (cf_env_limits(&k->limits, &err)) {
        fprintf(stderr, "weft: %s\n", err.msg);
        pl_free(k->plugins);
        free(k);
        return EXIT_USAGE;
    }
    k->defs.limits = &k->limits;
    if (ps_open_env(&k->ps, &err))
        fprintf(stderr, "weft: %s (large payloads stay inline)\n", err.msg);
    o.rs.url = c->redis;
    o.rs.prefix = c->prefix;
    o.defs = &k->defs;
    o.ps = k->ps;
    if (st_redis_open(&o, &k->st, &err)) {
        if (!k->st || err.code != WEFT_EIO) {
            fprintf(stderr, "weft: %s\n", err.msg);
            st_free(k->st);
            pl_free(k->plugins);
            ps_close(k->ps);
            free(k);
            return EXIT_USAGE;
        }
        /* unreachable for now: each command says so, and wait/watch keep trying */
    }
    k->dec.defs = &k->defs;
    k->dec.now = wu_now_ms;
    k->dec.domain_active = op_domain_active;
    k->op.domains.st = k->st;
    k->dec.domain_ud = &k->op.domains;
    k->op.st = k->st;
    k->op.defs = &k->defs;
    k->op.dec = &k->dec;
    k->op.sweep_ms = 30000;
    k->op.client = 1;
    memset(t, 0, sizeof *t);
    t->c = c;
    t->impl = k;
    t->ops = &ops;
    return EXIT_OK;
}

/*
 * weft commands on workflows kept in Redis. Each is written once, against
 * the transport seam (transport.h): straight over Redis, or through a
 * weftd's REST API with --api URL, with the same output and exit codes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cli/transport.h"

void tp_wf_clear(tp_wf *w)
{
    free(w->reason);
    json_object_put(w->output);
    memset(w, 0, sizeof *w);
}

int cli_start(const cli *c, cli_tp *t)
{
    json_object *input = NULL;
    char *id = NULL;
    int rc;
    if ((rc = read_input(c->input, &input))) return rc;
    if ((rc = t->ops->start(t, c->args[0], input, &id)) == EXIT_OK) printf("%s\n", id ? id : "");
    free(id);
    json_object_put(input);
    return rc;
}

int cli_register(const cli *c, cli_tp *t)
{
    char *name = NULL;
    int version = 0, rc;
    if (!cli_is_file(c->args[0]))
        return die(EXIT_USAGE, "register needs a .lua or .json file, not '%s'", c->args[0]);
    if ((rc = t->ops->reg(t, c->args[0], &name, &version)) == EXIT_OK)
        printf("registered %s version %d\n", name ? name : "?", version);
    free(name);
    return rc;
}

int cli_status(const cli *c, cli_tp *t)
{
    json_object *doc = NULL;
    int rc = t->ops->status(t, c->args[0], &doc);
    if (rc == EXIT_OK && doc && cli_json(c))
        printf("%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
                                                               JSON_C_TO_STRING_SPACED |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE));
    else if (rc == EXIT_OK && doc)
        cli_show_status(stdout, doc, cli_color(c, stdout));
    json_object_put(doc);
    return rc;
}

/* A comma-separated list into list (at most max items, cut in text, a
 * copy the caller frees): how many, or -1 (said on stderr) when too many. */
static int split_list(const char *opt, char *text, const char **list, int max)
{
    char *save = NULL, *item;
    int n = 0;
    for (item = strtok_r(text, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ')
            item++;
        if (!*item) continue;
        if (n == max) {
            fprintf(stderr, "weft: --%s lists more than %d values\n", opt, max);
            return -1;
        }
        list[n++] = item;
    }
    return n;
}

static const char *const wf_statuses[] = {"RUNNING", "PAUSED",    "COMPLETED",
                                          "FAILED",  "TIMED_OUT", "TERMINATED"};

/* list [--status S,..] [--name N,..] [--since D] [--correlation-id X] [--limit N] */
int cli_list(const cli *c, cli_tp *t)
{
    enum { LIST_MAX = 32 };
    const char *statuses[LIST_MAX], *names[LIST_MAX];
    char *st_text = c->status ? strdup(c->status) : NULL,
         *nm_text = c->name ? strdup(c->name) : NULL;
    st_query q;
    json_object *res = NULL;
    int ns = 0, nn = 0, i, k, rc = EXIT_USAGE;
    long limit = 20;
    memset(&q, 0, sizeof q);
    if ((c->status && !st_text) || (c->name && !nm_text)) goto out;
    if (c->limit) {
        char *end;
        limit = strtol(c->limit, &end, 10);
        if (end == c->limit || *end || limit < 1 || limit > 1000) {
            die(EXIT_USAGE, "--limit must be a whole number from 1 to 1000, not '%s'", c->limit);
            goto out;
        }
    }
    if ((st_text && (ns = split_list("status", st_text, statuses, LIST_MAX)) < 0) ||
        (nm_text && (nn = split_list("name", nm_text, names, LIST_MAX)) < 0))
        goto out;
    for (i = 0; i < ns; i++) {
        for (k = 0; k < 6 && strcmp(statuses[i], wf_statuses[k]); k++)
            ;
        if (k == 6) {
            die(EXIT_USAGE,
                "--status %s: use RUNNING, PAUSED, COMPLETED, FAILED, TIMED_OUT or TERMINATED",
                statuses[i]);
            goto out;
        }
    }
    if (c->since) {
        weft_error err = {0};
        json_object *d = json_object_new_string(c->since);
        int64_t ms = 0;
        int bad = wu_parse_duration(d, &ms, &err) || ms <= 0;
        json_object_put(d);
        if (bad) {
            die(EXIT_USAGE, "--since %s: a duration such as 30s, 15m, 1h or 7d", c->since);
            goto out;
        }
        q.start_after = wu_now_ms() - ms;
    }
    q.statuses = statuses;
    q.nstatuses = (size_t)ns;
    q.names = names;
    q.nnames = (size_t)nn;
    q.correlation_id = c->correlation_id;
    q.size = (size_t)limit;
    if ((rc = t->ops->list(t, &q, &res)) == EXIT_OK) {
        if (cli_json(c))
            printf("%s\n", json_object_to_json_string_ext(res, JSON_C_TO_STRING_PRETTY |
                                                                   JSON_C_TO_STRING_SPACED |
                                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        else
            cli_show_list(stdout, res, cli_color(c, stdout));
    }
out:
    json_object_put(res);
    free(st_text);
    free(nm_text);
    return rc;
}

/* Its end: the reason on stderr unless it completed, the output on stdout. */
static int wait_done(const char *id, const tp_wf *w)
{
    if (w->status != WEFT_WF_COMPLETED)
        fprintf(stderr, "weft: workflow %s %s%s%s\n", id, weft_wf_status_name(w->status),
                w->reason ? ": " : "", w->reason ? w->reason : "");
    printf("%s\n",
           w->output ? json_object_to_json_string_ext(w->output, JSON_C_TO_STRING_PLAIN |
                                                                     JSON_C_TO_STRING_NOSLASHESCAPE)
                     : "{}");
    return w->status == WEFT_WF_COMPLETED ? EXIT_OK : EXIT_WF_FAILED;
}

int cli_wait(const cli *c, cli_tp *t)
{
    const char *id = c->args[0];
    double timeout = c->timeout ? atof(c->timeout) : 0;
    int64_t deadline = timeout > 0 ? wu_mono_ms() + (int64_t)(timeout * 1000) : 0;
    long pause = 10;
    int seen = 0;
    for (;;) {
        tp_wf w;
        /* a store never reached is reported (exit 4); one lost once the
         * workflow was seen is restarting: wait for it */
        int rc = t->ops->poll(t, id, !seen || (deadline && wu_mono_ms() >= deadline), &w);
        if (rc == TP_AGAIN) {
            cli_sleep_ms(500);
            continue;
        }
        if (rc == EXIT_OK) seen = 1;
        if (rc == EXIT_OK && w.terminal)
            rc = wait_done(id, &w);
        else if (rc == EXIT_OK && deadline && wu_mono_ms() >= deadline) {
            fprintf(stderr, "weft: workflow %s still running after %gs\n", id, timeout);
            rc = EXIT_TIMEOUT;
        } else if (rc == EXIT_OK) {
            tp_wf_clear(&w);
            cli_sleep_ms(pause);
            pause = pause * 2 > 200 ? 200 : pause * 2;
            continue;
        }
        tp_wf_clear(&w);
        return rc;
    }
}

/* Exit as wait does: 0 when the workflow completed, 1 for another end. */
int cli_watch(const cli *c, cli_tp *t)
{
    cli_watcher w;
    int rc;
    cli_watch_init(&w, c);
    rc = t->ops->watch(t, c->args[0], &w);
    if (rc == EXIT_OK && w.ended && w.end != WEFT_WF_COMPLETED) rc = EXIT_WF_FAILED;
    cli_watch_clear(&w);
    return rc;
}

int cli_terminate(const cli *c, cli_tp *t)
{
    return t->ops->act(t, c->args[0], TP_TERMINATE, c->reason);
}

int cli_pause(const cli *c, cli_tp *t)
{
    return t->ops->act(t, c->args[0], TP_PAUSE, NULL);
}

int cli_resume(const cli *c, cli_tp *t)
{
    return t->ops->act(t, c->args[0], TP_RESUME, NULL);
}

int cli_retry(const cli *c, cli_tp *t)
{
    return t->ops->act(t, c->args[0], TP_RETRY, NULL);
}

int cli_restart(const cli *c, cli_tp *t)
{
    return t->ops->act(t, c->args[0], TP_RESTART, NULL);
}

/* signal ID REF [JSON] [--status COMPLETED|FAILED] [--reason R] */
int cli_signal(const cli *c, cli_tp *t)
{
    weft_error err = {0};
    json_object *out = NULL;
    int failed = 0, rc;
    if (c->nargs < 2) return die(EXIT_USAGE, "usage: weft signal ID REF [JSON]%s", "");
    if (c->nargs > 2 && wu_parse_json("signal payload", c->args[2], &out, &err))
        return cli_fail(&err);
    if (c->status && strcmp(c->status, "COMPLETED")) {
        if (strcmp(c->status, "FAILED")) {
            json_object_put(out);
            return die(EXIT_USAGE, "--status %s: use COMPLETED or FAILED", c->status);
        }
        failed = 1;
    }
    rc = t->ops->signal(t, c->args[0], c->args[1], failed,
                        c->reason ? c->reason : "failed by signal", out);
    json_object_put(out);
    return rc;
}

/* secret set NAME (its value on stdin): one trailing newline is what `echo`
 * adds, not part of the secret. */
static int secret_set(st_store *r, const char *name)
{
    weft_error err = {0};
    wu_buf b = {0};
    char chunk[4096];
    size_t n;
    int rc;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        wu_buf_add(&b, chunk, n);
    if (b.len && b.data[b.len - 1] == '\n') b.data[--b.len] = 0;
    if (b.len && b.data[b.len - 1] == '\r') b.data[--b.len] = 0;
    rc = ST(r, secret_set, name, b.data ? b.data : "", &err);
    if (b.data) memset(b.data, 0, b.len);
    wu_buf_free(&b);
    return rc ? cli_fail(&err) : EXIT_OK;
}

/* weft secret set NAME | list | delete NAME: Redis only. */
int cli_secret(const cli *c, cli_tp *t)
{
    weft_error err = {0};
    const char *what = c->args[0], *name = c->nargs > 1 ? c->args[1] : NULL;
    st_store *r = tp_store(t);
    if (!strcmp(what, "list")) {
        char **names;
        size_t n, i;
        if (ST(r, secret_names, &names, &n, &err)) return cli_fail(&err);
        for (i = 0; i < n; i++) {
            printf("%s\n", names[i]);
            free(names[i]);
        }
        free(names);
        return EXIT_OK;
    }
    if (!name)
        return die(EXIT_USAGE, "usage: weft secret set NAME < value | list | delete NAME%s", "");
    if (!strcmp(what, "delete")) return ST(r, secret_delete, name, &err) ? cli_fail(&err) : EXIT_OK;
    if (!strcmp(what, "set")) return secret_set(r, name);
    return die(EXIT_USAGE, "unknown secret command '%s' (set, list or delete)", what);
}

int cli_remote(const cli_cmd *cmd, const cli *c)
{
    const char *env = getenv("WEFT_API_URL"), *url = c->api;
    cli_tp t;
    int rc;
    /* --api, else --redis, else WEFT_API_URL, else Redis */
    if (!url && !c->redis && env && *env) url = env;
    if (url) {
        if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
            return die(EXIT_USAGE, "--api %s: expected an http:// or https:// URL", url);
        if (!(cmd->where & CLI_HTTP)) {
            fprintf(stderr, "weft: %s %s: %ss are kept in Redis: use --redis, not --api\n",
                    cmd->name, c->args[0], cmd->name);
            return EXIT_USAGE;
        }
        rc = tp_open_http(&t, c, url);
    } else {
        rc = tp_open_redis(&t, c, !!(cmd->where & CLI_PLUGINS));
    }
    if (rc) return rc;
    rc = cmd->run(c, &t);
    t.ops->close(&t);
    return rc;
}

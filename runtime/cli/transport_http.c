/*
 * The weft commands' operations through a weftd's REST API (libcurl), with
 * the same output and exit codes as over Redis.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/util.h"
#include "cli/transport.h"
#include "core/exec.h"
#include "lua/dsl.h"

typedef struct api {
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
 * answer to out. Returns 0, or EXIT_UNREACHABLE after printing why no answer
 * came.
 */
static int api_do(api *a, const char *method, const char *path, const char *body, long *code,
                  wu_buf *out)
{
    wu_buf url = {0};
    CURLcode rc;
    char errbuf[CURL_ERROR_SIZE] = "";
    *code = 0;
    out->len = 0;
    if (out->data) out->data[0] = 0;
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
        return EXIT_UNREACHABLE;
    }
    curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, code);
    return EXIT_OK;
}

/* An error answer: its message on stderr. 409 (not allowed now) exits 1;
 * 503 (the daemon's Redis unreachable, or the daemon busy), 504 (a start
 * sent to Redis, unanswered) and 401/403 (a token refused) exit 4 as an
 * unreachable Redis does; the rest (404 no such id, 400 bad input) 2. */
static int api_fail(long code, const wu_buf *out)
{
    json_object *j = out->len ? json_tokener_parse(out->data) : NULL, *m;
    if (j && json_object_object_get_ex(j, "message", &m))
        fprintf(stderr, "weft: %s\n", json_object_get_string(m));
    else
        fprintf(stderr, "weft: HTTP %ld%s%.300s\n", code, out->len ? ": " : "",
                out->len ? out->data : "");
    json_object_put(j);
    if (code == 409) return EXIT_WF_FAILED;
    return code == 503 || code == 504 || code == 401 || code == 403 ? EXIT_UNREACHABLE : EXIT_USAGE;
}

/* A request whose answer only needs to be a success. */
static int api_simple(api *a, const char *method, const char *path, const char *body, wu_buf *out)
{
    long code;
    int rc = api_do(a, method, path, body, &code, out);
    if (rc) return rc;
    return code >= 200 && code < 300 ? EXIT_OK : api_fail(code, out);
}

/* "/api/workflow/<id><suffix>" with the id escaped. */
static char *wf_path(api *a, const char *wf, const char *suffix)
{
    char *id = esc(a, wf), *p;
    size_t n;
    if (!id) return NULL;
    n = strlen(id) + strlen(suffix) + 16;
    if ((p = malloc(n))) snprintf(p, n, "/api/workflow/%s%s", id, suffix);
    free(id);
    return p;
}

/* Server-Sent Events, a line at a time. */
typedef struct sse_reader {
    api *a;
    cli_watcher *w;
    wu_buf line, data, err;
    char id[64], last[64];
    int ended; /* the last event was the workflow's end */
} sse_reader;

static void sse_dispatch(sse_reader *r)
{
    if (!r->data.len) return;
    snprintf(r->last, sizeof r->last, "%s", r->id);
    r->ended = cli_event(r->w, r->data.data);
    r->data.len = 0;
}

static void sse_line(sse_reader *r, const char *l)
{
    if (!*l)
        sse_dispatch(r);
    else if (!strncmp(l, "id: ", 4))
        snprintf(r->id, sizeof r->id, "%s", l + 4);
    else if (!strncmp(l, "data: ", 6)) {
        if (r->data.len) wu_buf_add(&r->data, "\n", 1);
        wu_buf_add(&r->data, l + 6, strlen(l + 6));
    }
}

static size_t sse_write(char *p, size_t size, size_t n, void *ud)
{
    sse_reader *r = ud;
    long code = 0;
    size_t i, len = size * n;
    curl_easy_getinfo(r->a->h, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) return wu_buf_add(&r->err, p, len) ? 0 : len;
    for (i = 0; i < len; i++) {
        if (p[i] == '\n') {
            if (r->line.len && r->line.data[r->line.len - 1] == '\r')
                r->line.data[--r->line.len] = 0;
            sse_line(r, r->line.data ? r->line.data : "");
            r->line.len = 0;
            if (r->line.data) r->line.data[0] = 0;
        } else if (wu_buf_add(&r->line, p + i, 1)) {
            return 0;
        }
    }
    return len;
}

static int h_watch(cli_tp *t, const char *id, cli_watcher *w)
{
    api *a = t->impl;
    sse_reader r;
    char *path = wf_path(a, id, "/events"), hdr[100];
    int rc = EXIT_USAGE, answered = 0;
    memset(&r, 0, sizeof r);
    r.a = a;
    r.w = w;
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
        if (code == 0 && !answered) {
            /* never reached: say so; once it answered, a drop is a restart */
            fprintf(stderr, "weft: %s%s: %s\n", a->base, path, curl_easy_strerror(cr));
            rc = EXIT_UNREACHABLE;
            break;
        }
        answered = 1;
        sse_dispatch(&r);
        if (r.ended) {
            rc = EXIT_OK;
            break;
        }
        /* cut off early (a restarting daemon): go on after the last event seen */
        cli_sleep_ms(500);
    }
    free(path);
    wu_buf_free(&r.line);
    wu_buf_free(&r.data);
    wu_buf_free(&r.err);
    return rc;
}

static int h_start(cli_tp *t, const char *what, json_object *input, char **id)
{
    weft_error err = {0};
    const cli *c = t->c;
    json_object *req = json_object_new_object(), *def = NULL;
    wu_buf out = {0};
    int rc;
    if (cli_is_file(what)) {
        /* compiled here, so errors name the file and line */
        if (dsl_load(what, &def, NULL, &err)) {
            json_object_put(req);
            return die(EXIT_USAGE, "%s", err.msg);
        }
        json_object_object_add(req, "workflowDef", def);
    } else {
        json_object_object_add(req, "name", json_object_new_string(what));
        if (c->version)
            json_object_object_add(req, "version", json_object_new_int(atoi(c->version)));
    }
    json_object_object_add(req, "input", json_object_get(input));
    if (c->correlation_id)
        json_object_object_add(req, "correlationId", json_object_new_string(c->correlation_id));
    if (c->idempotency_key)
        json_object_object_add(req, "idempotencyKey", json_object_new_string(c->idempotency_key));
    if (c->priority) {
        int p;
        if ((rc = cli_priority(c, &p))) {
            json_object_put(req);
            return rc;
        }
        json_object_object_add(req, "priority", json_object_new_int(p));
    }
    if (c->domain) {
        json_object *m;
        if ((rc = cli_domains(c, &m))) {
            json_object_put(req);
            return rc;
        }
        json_object_object_add(req, "taskToDomain", m);
    }
    rc = api_simple(t->impl, "POST", "/api/workflow",
                    json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN), &out);
    if (rc == EXIT_OK) *id = strdup(out.data ? out.data : "");
    json_object_put(req);
    wu_buf_free(&out);
    return rc;
}

static int h_reg(cli_tp *t, const char *file, char **name, int *version)
{
    weft_error err = {0};
    json_object *def = NULL, *v;
    wu_buf out = {0};
    int rc;
    if (dsl_load(file, &def, NULL, &err)) return die(EXIT_USAGE, "%s", err.msg);
    rc = api_simple(t->impl, "POST", "/api/metadata/workflow",
                    json_object_to_json_string_ext(def, JSON_C_TO_STRING_PLAIN), &out);
    *name = strdup(json_object_object_get_ex(def, "name", &v) ? json_object_get_string(v) : "?");
    *version = json_object_object_get_ex(def, "version", &v) ? json_object_get_int(v) : 1;
    json_object_put(def);
    wu_buf_free(&out);
    return rc;
}

static int h_status(cli_tp *t, const char *id, json_object **doc)
{
    api *a = t->impl;
    wu_buf out = {0};
    char *path = wf_path(a, id, "");
    int rc = path ? api_simple(a, "GET", path, NULL, &out) : EXIT_USAGE;
    if (rc == EXIT_OK && !(*doc = json_tokener_parse(out.data ? out.data : "")))
        printf("%s\n", out.data ? out.data : "");
    free(path);
    wu_buf_free(&out);
    return rc;
}

static int h_poll(cli_tp *t, const char *id, int final, tp_wf *w)
{
    api *a = t->impl;
    char *path = wf_path(a, id, "?includeTasks=false");
    wu_buf out = {0};
    json_object *j, *v;
    long code = 0;
    int rc;
    memset(w, 0, sizeof *w);
    if (!path) return EXIT_USAGE;
    rc = api_do(a, "GET", path, NULL, &code, &out);
    free(path);
    if (rc || code == 503) {
        /* the daemon or its Redis restarting: keep waiting */
        rc = final ? (code == 503 ? api_fail(code, &out) : rc) : TP_AGAIN;
        wu_buf_free(&out);
        return rc;
    }
    if (code != 200) {
        rc = api_fail(code, &out);
        wu_buf_free(&out);
        return rc;
    }
    j = json_tokener_parse(out.data ? out.data : "");
    wu_buf_free(&out);
    if (j && json_object_object_get_ex(j, "status", &v) &&
        xc_wf_status_parse(json_object_get_string(v), &w->status) == 0 &&
        xc_wf_terminal(w->status)) {
        w->terminal = 1;
        if (json_object_object_get_ex(j, "reasonForIncompletion", &v))
            w->reason = strdup(json_object_get_string(v));
        if (json_object_object_get_ex(j, "output", &v)) w->output = json_object_get(v);
    }
    json_object_put(j);
    return EXIT_OK;
}

static int h_change(api *a, const char *id, const char *method, const char *suffix)
{
    wu_buf out = {0};
    char *path = wf_path(a, id, suffix);
    int rc = path ? api_simple(a, method, path, NULL, &out) : EXIT_USAGE;
    free(path);
    wu_buf_free(&out);
    return rc;
}

static int h_terminate(api *a, const char *id, const char *why)
{
    char *reason = why ? esc(a, why) : NULL, *q;
    size_t n = (reason ? strlen(reason) : 0) + 16;
    int rc = EXIT_USAGE;
    if ((q = malloc(n))) {
        snprintf(q, n, "%s%s", reason ? "?reason=" : "", reason ? reason : "");
        rc = h_change(a, id, "DELETE", q);
    }
    free(q);
    free(reason);
    return rc;
}

static int h_act(cli_tp *t, const char *id, tp_act act, const char *reason)
{
    switch (act) {
    case TP_TERMINATE:
        return h_terminate(t->impl, id, reason);
    case TP_PAUSE:
        return h_change(t->impl, id, "PUT", "/pause");
    case TP_RESUME:
        return h_change(t->impl, id, "PUT", "/resume");
    case TP_RETRY:
        return h_change(t->impl, id, "POST", "/retry");
    default:
        return h_change(t->impl, id, "POST", "/restart");
    }
}

/* POST /api/tasks/{id}/{ref}/{status}, the body is the output. */
static int h_signal(cli_tp *t, const char *wf, const char *task, int failed, const char *why,
                    json_object *output)
{
    api *a = t->impl;
    char *id = esc(a, wf), *ref = esc(a, task), *reason = failed ? esc(a, why) : NULL, *path;
    size_t n = (id ? strlen(id) : 0) + (ref ? strlen(ref) : 0) + (reason ? strlen(reason) : 0) + 64;
    wu_buf ans = {0};
    int rc;
    if ((path = malloc(n)))
        snprintf(path, n, "/api/tasks/%s/%s/%s%s%s", id ? id : "", ref ? ref : "",
                 failed ? "FAILED" : "COMPLETED", reason ? "?reason=" : "", reason ? reason : "");
    rc = path ? api_simple(a, "POST", path,
                           output ? json_object_to_json_string_ext(output, JSON_C_TO_STRING_PLAIN)
                                  : "{}",
                           &ans)
              : EXIT_USAGE;
    free(path);
    free(id);
    free(ref);
    free(reason);
    wu_buf_free(&ans);
    return rc;
}

static void h_close(cli_tp *t)
{
    api *a = t->impl;
    curl_slist_free_all(a->headers);
    curl_easy_cleanup(a->h);
    curl_global_cleanup();
    free(a->base);
    free(a);
}

/* q as Conductor's query text, into b (empty when q filters nothing). */
static void query_text(const st_query *q, wu_buf *b)
{
    char num[32];
    size_t i;
    const char *and = "";
    if (q->nstatuses) {
        wu_buf_add(b, "status IN (", 11);
        for (i = 0; i < q->nstatuses; i++) {
            if (i) wu_buf_add(b, ",", 1);
            wu_buf_add(b, q->statuses[i], strlen(q->statuses[i]));
        }
        wu_buf_add(b, ")", 1);
        and = " AND ";
    }
    if (q->nnames) {
        wu_buf_add(b, and, strlen(and));
        wu_buf_add(b, "workflowType IN (", 17);
        for (i = 0; i < q->nnames; i++) {
            if (i) wu_buf_add(b, ",", 1);
            /* quoted: a name may hold what the query language takes apart */
            wu_buf_add(b, "\"", 1);
            wu_buf_add(b, q->names[i], strlen(q->names[i]));
            wu_buf_add(b, "\"", 1);
        }
        wu_buf_add(b, ")", 1);
        and = " AND ";
    }
    if (q->start_after) {
        snprintf(num, sizeof num, "%lld", (long long)q->start_after);
        wu_buf_add(b, and, strlen(and));
        wu_buf_add(b, "startTime > ", 12);
        wu_buf_add(b, num, strlen(num));
        and = " AND ";
    }
    if (q->correlation_id) {
        wu_buf_add(b, and, strlen(and));
        wu_buf_add(b, "correlationId = \"", 17);
        wu_buf_add(b, q->correlation_id, strlen(q->correlation_id));
        wu_buf_add(b, "\"", 1);
    }
}

/* GET /api/workflow/search with q's query. */
static int h_list(cli_tp *t, const st_query *q, json_object **res)
{
    api *a = t->impl;
    wu_buf text = {0}, path = {0}, out = {0};
    char size[32], *e = NULL;
    int rc;
    *res = NULL;
    query_text(q, &text);
    snprintf(size, sizeof size, "%zu", q->size);
    wu_buf_add(&path, "/api/workflow/search?sort=startTime:DESC&size=", 46);
    wu_buf_add(&path, size, strlen(size));
    if (text.len && (e = esc(a, text.data))) {
        wu_buf_add(&path, "&query=", 7);
        wu_buf_add(&path, e, strlen(e));
    }
    rc = text.len && !e ? die(EXIT_USAGE, "%s", "out of memory")
                        : api_simple(a, "GET", path.data, NULL, &out);
    if (rc == EXIT_OK && !(*res = json_tokener_parse(out.data ? out.data : "")))
        rc = die(EXIT_USAGE, "the search answered no JSON: %.300s", out.data ? out.data : "");
    free(e);
    wu_buf_free(&text);
    wu_buf_free(&path);
    wu_buf_free(&out);
    return rc;
}

static const tp_ops ops = {
    .list = h_list,
    .start = h_start,
    .reg = h_reg,
    .status = h_status,
    .poll = h_poll,
    .watch = h_watch,
    .act = h_act,
    .signal = h_signal,
    .close = h_close,
};

int tp_open_http(cli_tp *t, const cli *c, const char *url)
{
    const char *token = getenv("WEFT_API_TOKEN");
    api *a = calloc(1, sizeof *a);
    size_t n;
    if (!a || !(a->base = strdup(url))) {
        free(a);
        return die(EXIT_USAGE, "out of memory%s", "");
    }
    n = strlen(a->base);
    while (n && a->base[n - 1] == '/')
        a->base[--n] = 0;
    if (n >= 4 && !strcmp(a->base + n - 4, "/api"))
        a->base[n - 4] = 0; /* as Conductor's clients write it */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!(a->h = curl_easy_init())) {
        free(a->base);
        free(a);
        return die(EXIT_USAGE, "cannot start libcurl%s", "");
    }
    a->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (token && *token) {
        size_t tn = strlen(token) + 32;
        char *h = malloc(tn);
        if (h) {
            snprintf(h, tn, "Authorization: Bearer %s", token);
            a->headers = curl_slist_append(a->headers, h);
            memset(h, 0, tn);
            free(h);
        }
    }
    memset(t, 0, sizeof *t);
    t->c = c;
    t->impl = a;
    t->ops = &ops;
    return EXIT_OK;
}

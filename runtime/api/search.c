/*
 * Finding runs: /api/workflow/search and search-v2 (Conductor's query
 * subset parsed into an st_query, answered by the store's execution index,
 * each run of the page then loaded), /api/workflow/running/{name} and
 * /api/workflow/{name}/correlated/{correlationId}.
 */
#include "api/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PAGE_MAX 1000   /* size of one search page */
#define LISTED_MAX 1000 /* runs running/ and correlated/ answer at most */

/* The next token into x->toks: a word, a quoted value ('...' or "...";
 * *quoted set), an operator (=, ==, !=, <, <=, >, >=) or one of "(),".
 * NULL at the end, or with x->why on an unclosed quote. */
static const char *token(ap_qparse *x, int *quoted, int *at)
{
    const char *s;
    char *t = x->end;
    while (isspace((unsigned char)*x->p))
        x->p++;
    *quoted = 0;
    *at = (int)(x->p - x->text) + 1;
    if (!*x->p) return NULL;
    s = x->p;
    if (*s == '\'' || *s == '"') {
        const char *close = strchr(s + 1, *s);
        if (!close) {
            snprintf(x->why, sizeof x->why, "query: the quote at position %d is not closed", *at);
            return NULL;
        }
        memcpy(t, s + 1, (size_t)(close - s - 1));
        t[close - s - 1] = 0;
        x->p = close + 1;
        *quoted = 1;
    } else {
        size_t n;
        if (strchr("=<>!", *s))
            n = strspn(s, "=<>!");
        else if (strchr("(),", *s))
            n = 1;
        else
            n = strcspn(s, " \t\r\n=<>!(),'\"");
        memcpy(t, s, n);
        t[n] = 0;
        x->p = s + n;
    }
    x->end = t + strlen(t) + 1;
    return t;
}

__attribute__((format(printf, 2, 3))) static int bad(ap_qparse *x, const char *fmt, ...)
{
    va_list ap;
    if (!x->why[0]) { /* the first complaint stands */
        va_start(ap, fmt);
        vsnprintf(x->why, sizeof x->why, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A value list after IN: "(" v ("," v)* ")" into list (n of them). */
static int in_list(ap_qparse *x, const char *field, const char **list, size_t *n)
{
    int quoted, at;
    const char *t = token(x, &quoted, &at);
    if (!t || quoted || strcmp(t, "("))
        return bad(x, "query: expected '(' after %s IN at position %d", field, at);
    for (*n = 0;;) {
        if (!(t = token(x, &quoted, &at)) || (!quoted && strchr("(),", *t)))
            return bad(x, "query: expected a value in %s IN (...) at position %d", field, at);
        if (*n == AP_LIST_MAX)
            return bad(x, "query: %s IN (...) lists more than %d values (at position %d)", field,
                       AP_LIST_MAX, at);
        list[(*n)++] = t;
        if (!(t = token(x, &quoted, &at)) || quoted || (strcmp(t, ",") && strcmp(t, ")")))
            return bad(x, "query: expected ',' or ')' in %s IN (...) at position %d", field, at);
        if (!strcmp(t, ")")) return 0;
    }
}

/* A time in ms: digits. */
static int time_value(ap_qparse *x, const char *field, const char *v, int at, int64_t *ms)
{
    char *end;
    long long n;
    errno = 0;
    n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < 0 || n > AP_TIME_MAX)
        return bad(x,
                   "query: %s takes a time in milliseconds since 1970, at most %lld (at "
                   "position %d)",
                   field, (long long)AP_TIME_MAX, at);
    *ms = n;
    return 0;
}

static const char *const statuses[] = {"RUNNING",    "COMPLETED", "FAILED", "TIMED_OUT",
                                       "TERMINATED", "PAUSED",    NULL};

static int status_ok(const char *s)
{
    const char *const *k;
    for (k = statuses; *k; k++)
        if (!strcmp(*k, s)) return 1;
    return 0;
}

/*
 * Conductor's query text: clauses joined by AND, each one of
 *   workflowType = 'a' | workflowType IN (a, b)     status = X | status IN (X, Y)
 *   startTime > ms | < | >= | <=                    correlationId = 'c'
 *   version = n
 * Values may be quoted ('...' or "...").
 */
int ap_search_parse(ap_qparse *x, const char *text, st_query *q)
{
    size_t n = strlen(text);
    if (!(x->toks = malloc(2 * n + 2))) {
        snprintf(x->why, sizeof x->why, "out of memory");
        return -1;
    }
    x->text = x->p = text;
    x->end = x->toks;
    for (;;) {
        int quoted, at, vat;
        const char *field = token(x, &quoted, &at), *op, *v;
        size_t *count;
        if (!field) return x->why[0] ? -1 : 0;
        if (quoted)
            return bad(x, "query: expected a field name at position %d, not '%s'", at, field);
        if (!strcmp(field, "workflowType") || !strcmp(field, "status")) {
            const char **list = *field == 's' ? x->statuses : x->names;
            count = *field == 's' ? &q->nstatuses : &q->nnames;
            if (!(op = token(x, &quoted, &at)) || quoted)
                return bad(x, "query: expected = or IN after %s at position %d", field, at);
            if (!strcasecmp(op, "IN")) {
                if (in_list(x, field, list, count)) return -1;
            } else if (!strcmp(op, "=") || !strcmp(op, "==")) {
                if (!(v = token(x, &quoted, &vat)) || (!quoted && strchr("(),", *v)))
                    return bad(x, "query: expected a value after %s = at position %d", field, vat);
                list[0] = v;
                *count = 1;
            } else {
                return bad(x, "query: %s takes = or IN (at position %d)", field, at);
            }
            if (*field == 's') {
                size_t i;
                for (i = 0; i < *count; i++)
                    if (!status_ok(list[i]))
                        return bad(x,
                                   "query: status '%s' is none of RUNNING, COMPLETED, FAILED, "
                                   "TIMED_OUT, TERMINATED, PAUSED (clause at position %d)",
                                   list[i], at);
                q->statuses = x->statuses;
            } else {
                q->names = x->names;
            }
        } else if (!strcmp(field, "startTime")) {
            int64_t ms = 0;
            if (!(op = token(x, &quoted, &at)) || quoted ||
                (strcmp(op, ">") && strcmp(op, ">=") && strcmp(op, "<") && strcmp(op, "<=")))
                return bad(x, "query: startTime takes >, >=, < or <= (at position %d)", at);
            if (!(v = token(x, &quoted, &vat)) || time_value(x, field, v, vat, &ms)) {
                if (!v) bad(x, "query: expected a time after startTime at position %d", vat);
                return -1;
            }
            if (*op == '>')
                q->start_after = op[1] ? ms - 1 : ms;
            else
                q->start_before = op[1] ? ms + 1 : ms;
        } else if (!strcmp(field, "correlationId") || !strcmp(field, "version")) {
            if (!(op = token(x, &quoted, &at)) || quoted || (strcmp(op, "=") && strcmp(op, "==")))
                return bad(x, "query: %s takes = (at position %d)", field, at);
            if (!(v = token(x, &quoted, &vat)) || (!quoted && strchr("(),", *v)))
                return bad(x, "query: expected a value after %s = at position %d", field, vat);
            if (*field == 'c') {
                q->correlation_id = v;
            } else {
                char *end;
                long ver = strtol(v, &end, 10);
                if (*end || ver < 1 || ver > 1000000000)
                    return bad(x, "query: version takes a whole number from 1 (at position %d)",
                               vat);
                q->version = (int)ver;
            }
        } else {
            return bad(x,
                       "query: unknown field '%s' at position %d (weft searches workflowType, "
                       "status, startTime, correlationId, version)",
                       field, at);
        }
        if (!(op = token(x, &quoted, &at))) return x->why[0] ? -1 : 0;
        if (quoted || strcasecmp(op, "AND"))
            return bad(x, "query: expected AND at position %d, not '%s'", at, op);
    }
}

void ap_search_parse_free(ap_qparse *x)
{
    free(x->toks);
    x->toks = NULL;
}

/* sort=field[:ASC|DESC] (the first of a ';' list): startTime or endTime;
 * DESC when no direction is given. -1 after answering 400. */
static int parse_sort(ctx *c, st_query *q)
{
    const char *s = ap_query(c, "sort"), *colon;
    size_t n;
    q->asc = 0;
    q->by_end = 0;
    if (!s || !*s) return 0;
    n = strcspn(s, ":;");
    colon = s[n] == ':' ? s + n + 1 : NULL;
    if (n == 9 && !strncmp(s, "startTime", 9))
        q->by_end = 0;
    else if (n == 7 && !strncmp(s, "endTime", 7))
        q->by_end = 1;
    else
        goto fail;
    if (colon) {
        size_t m = strcspn(colon, ";");
        if (m == 3 && !strncasecmp(colon, "ASC", 3))
            q->asc = 1;
        else if (!(m == 4 && !strncasecmp(colon, "DESC", 4)))
            goto fail;
    }
    return 0;
fail:
    ap_send_error(c, 400, "sort '%s': use startTime or endTime, with :ASC or :DESC", s);
    return -1;
}

static mhd_result search(ctx *c, int v2)
{
    weft_error err = {0};
    st_query q;
    ap_qparse x;
    const char *text = ap_query(c, "query"), *free_text = ap_query(c, "freeText");
    long start, size;
    json_object *res;
    int rc;
    memset(&q, 0, sizeof q);
    memset(&x, 0, sizeof x);
    if (ap_query_long(c, "start", 0, 0, ST_SEARCH_MAX, &start) ||
        ap_query_long(c, "size", 100, 0, PAGE_MAX, &size) || parse_sort(c, &q))
        return c->res;
    if (text && *text && ap_search_parse(&x, text, &q)) {
        ap_search_parse_free(&x);
        return ap_send_error(c, 400, "%s", x.why);
    }
    /* Conductor's UI sends "*" for no text */
    q.free_text = free_text && strcmp(free_text, "*") ? free_text : NULL;
    q.start = (size_t)start;
    q.size = (size_t)size;
    rc = op_search(&c->t->op, &q, v2, &res, &err);
    ap_search_parse_free(&x);
    if (rc) return ap_send_werr(c, &err);
    return ap_send_json(c, 200, res);
}

/* GET /api/workflow/search?query=&freeText=&sort=&start=&size=:
 * {totalHits, results: [WorkflowSummary]}. */
mhd_result ap_h_search(ctx *c)
{
    return search(c, 0);
}

/* GET /api/workflow/search-v2: the same, results as Workflow (no tasks). */
mhd_result ap_h_search_v2(ctx *c)
{
    return search(c, 1);
}

static const char *const unfinished[] = {"RUNNING", "PAUSED"};

/* GET /api/workflow/running/{name}?version=&startTime=&endTime=: the ids of
 * its runs not ended (RUNNING or PAUSED), newest first, at most 1000. */
mhd_result ap_h_running(ctx *c)
{
    weft_error err = {0};
    st_query q;
    st_hit *hits = NULL;
    size_t n = 0, i;
    long long total;
    long version, from, to;
    const char *name = c->q->seg[3];
    json_object *arr;
    memset(&q, 0, sizeof q);
    if (ap_query_long(c, "version", 0, 0, 1000000000, &version) ||
        ap_query_long(c, "startTime", 0, 0, AP_TIME_MAX, &from) ||
        ap_query_long(c, "endTime", 0, 0, AP_TIME_MAX, &to))
        return c->res;
    q.names = &name;
    q.nnames = 1;
    q.statuses = unfinished;
    q.nstatuses = 2;
    q.version = (int)version;
    q.start_after = from ? from - 1 : 0;
    q.start_before = to ? to + 1 : 0;
    q.size = LISTED_MAX;
    if (ST(c->t->st, search, &q, &total, &hits, &n, &err)) return ap_send_werr(c, &err);
    arr = json_object_new_array();
    for (i = 0; i < n; i++)
        json_object_array_add(arr, json_object_new_string(hits[i].id));
    free(hits);
    return ap_send_json(c, 200, arr);
}

static int flag(ctx *c, const char *name)
{
    const char *v = ap_query(c, name);
    return v && !strcasecmp(v, "true");
}

/* GET /api/workflow/{name}/correlated/{correlationId}?includeClosed=&includeTasks=:
 * its runs with that correlation id as Workflow, newest first (ended ones
 * with includeClosed=true, tasks with includeTasks=true), at most 1000. */
mhd_result ap_h_correlated(ctx *c)
{
    weft_error err = {0};
    st_query q;
    long long total;
    const char *name = c->q->seg[2];
    json_object *arr;
    memset(&q, 0, sizeof q);
    q.names = &name;
    q.nnames = 1;
    q.correlation_id = c->q->seg[4];
    if (!flag(c, "includeClosed")) {
        q.statuses = unfinished;
        q.nstatuses = 2;
    }
    q.size = LISTED_MAX;
    if (op_find(&c->t->op, &q, op_workflow, flag(c, "includeTasks"), &total, &arr, &err))
        return ap_send_werr(c, &err);
    return ap_send_json(c, 200, arr);
}

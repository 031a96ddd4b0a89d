/*
 * Fuzz target for the search query language (/api/workflow/search?query=,
 * api/search.c): the bytes, up to a NUL, are the query text, parsed by
 * ap_search_parse into an st_query.
 *
 * Invariants checked (abort() when broken): a refused query says why; a
 * parsed one holds only what the language allows (known statuses, at most
 * AP_LIST_MAX values a list, times and versions in range), and written
 * back as query text it parses again to the same st_query.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "base/util.h"
#include "core/exec.h"

#define FUZZ_NAME "fuzz_query"
#include "fuzz.h"

/* A workflow status by its name (the store's own list). */
static int known_status(const char *s)
{
    weft_wf_status st;
    return xc_wf_status_parse(s, &st) == 0;
}

/* v quoted so that the tokenizer reads it back whole: 0, or -1 when no
 * quote will do (it holds both kinds). */
static int add_value(wu_buf *b, const char *v)
{
    char q = strchr(v, '\'') ? '"' : '\'';
    if (strchr(v, q)) return -1;
    check(!wu_buf_add(b, &q, 1) && !wu_buf_add(b, v, strlen(v)) && !wu_buf_add(b, &q, 1),
          "wu_buf_add");
    return 0;
}

static int add_list(wu_buf *b, const char *field, const char *const *list, size_t n)
{
    size_t i;
    if (b->len) check(!wu_buf_add(b, " AND ", 5), "wu_buf_add");
    check(!wu_buf_add(b, field, strlen(field)) && !wu_buf_add(b, " IN (", 5), "wu_buf_add");
    for (i = 0; i < n; i++) {
        if (i) check(!wu_buf_add(b, ", ", 2), "wu_buf_add");
        if (add_value(b, list[i])) return -1;
    }
    check(!wu_buf_add(b, ")", 1), "wu_buf_add");
    return 0;
}

static void add_clause(wu_buf *b, const char *text)
{
    if (b->len) check(!wu_buf_add(b, " AND ", 5), "wu_buf_add");
    check(!wu_buf_add(b, text, strlen(text)), "wu_buf_add");
}

/* q as query text into b: 0, or -1 when a value cannot be written back. */
static int write_query(const st_query *q, wu_buf *b)
{
    char c[64];
    if (q->nnames && add_list(b, "workflowType", q->names, q->nnames)) return -1;
    if (q->nstatuses && add_list(b, "status", q->statuses, q->nstatuses)) return -1;
    if (q->start_after) {
        snprintf(c, sizeof c, "startTime %s %lld", q->start_after < 0 ? ">=" : ">",
                 (long long)(q->start_after < 0 ? q->start_after + 1 : q->start_after));
        add_clause(b, c);
    }
    if (q->start_before) {
        snprintf(
            c, sizeof c, "startTime %s %lld", q->start_before > AP_TIME_MAX ? "<=" : "<",
            (long long)(q->start_before > AP_TIME_MAX ? q->start_before - 1 : q->start_before));
        add_clause(b, c);
    }
    if (q->version) {
        snprintf(c, sizeof c, "version = %d", q->version);
        add_clause(b, c);
    }
    if (q->correlation_id) {
        add_clause(b, "correlationId = ");
        if (add_value(b, q->correlation_id)) return -1;
    }
    check(!wu_buf_add(b, "", 1), "wu_buf_add");
    return 0;
}

static int same_list(const char *const *a, size_t na, const char *const *b, size_t nb)
{
    size_t i;
    if (na != nb) return 0;
    for (i = 0; i < na; i++)
        if (strcmp(a[i], b[i])) return 0;
    return 1;
}

static void check_query(const st_query *q)
{
    size_t i;
    check(q->nnames <= AP_LIST_MAX && q->nstatuses <= AP_LIST_MAX, "lists hold at most 32");
    check(!q->nnames || q->names, "names are there");
    check(!q->nstatuses || q->statuses, "statuses are there");
    for (i = 0; i < q->nnames; i++)
        check(q->names[i] != NULL, "a name is a string");
    for (i = 0; i < q->nstatuses; i++)
        check(known_status(q->statuses[i]), "only known statuses");
    check(q->version >= 0 && q->version <= 1000000000, "version in range");
    check(q->start_after >= -1 && q->start_after <= AP_TIME_MAX, "start_after in range");
    check(q->start_before >= 0 && q->start_before <= AP_TIME_MAX + 1, "start_before in range");
    check(!q->free_text && !q->start && !q->size && !q->asc && !q->by_end,
          "the query text sets nothing else");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ap_qparse x, y;
    st_query q, r;
    wu_buf b = {0};
    char *text;
    int rc;

    if (size > FUZZ_MAX_INPUT) return 0;
    text = fuzz_text(data, size);
    memset(&x, 0, sizeof x);
    memset(&q, 0, sizeof q);
    rc = ap_search_parse(&x, text, &q);
    if (fuzz_verbose()) printf("ap_search_parse: %d %s\n", rc, rc ? x.why : "ok");
    if (rc) {
        check(rc == -1 && x.why[0] != 0, "a refused query says why");
        check(!strncmp(x.why, "query: ", 7) || !strcmp(x.why, "out of memory"),
              "a refused query's message starts with query:");
    } else {
        check(x.why[0] == 0, "a parsed query has no complaint");
        check_query(&q);
        if (write_query(&q, &b) == 0) {
            memset(&y, 0, sizeof y);
            memset(&r, 0, sizeof r);
            if (fuzz_verbose()) printf("written back: %s\n", b.data);
            check(ap_search_parse(&y, b.data, &r) == 0, "a query written back parses");
            check(same_list(q.names, q.nnames, r.names, r.nnames), "the same names");
            check(same_list(q.statuses, q.nstatuses, r.statuses, r.nstatuses), "the same statuses");
            check(q.start_after == r.start_after && q.start_before == r.start_before,
                  "the same times");
            check(q.version == r.version, "the same version");
            check(!q.correlation_id == !r.correlation_id &&
                      (!q.correlation_id || !strcmp(q.correlation_id, r.correlation_id)),
                  "the same correlation id");
            ap_search_parse_free(&y);
        }
    }
    ap_search_parse_free(&x);
    wu_buf_free(&b);
    free(text);
    return 0;
}

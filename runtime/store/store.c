#include "store/store.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

int st_check(const st_ops *ops, weft_error *err)
{
    if (!ops || ops->size < sizeof *ops)
        return wu_err(err, WEFT_EABI,
                      "store backend '%s': its table has %zu bytes, this weft needs %zu",
                      ops && ops->name ? ops->name : "?", ops ? ops->size : 0, sizeof *ops);
    return 0;
}

int st_check_name(const char *what, const char *s, size_t max, int bar_ok, weft_error *err)
{
    if (!s || !*s) return wu_err(err, WEFT_EINVAL, "%s is empty", what);
    if (strlen(s) >= max)
        return wu_err(err, WEFT_EINVAL, "%s \"%.40s...\" is longer than %zu bytes", what, s,
                      max - 1);
    if (!bar_ok && strchr(s, '|'))
        return wu_err(err, WEFT_EINVAL, "%s \"%s\" contains '|'", what, s);
    return 0;
}

int st_check_lease(const char *what, int64_t lease_ms, weft_error *err)
{
    return lease_ms > 0 ? 0
                        : wu_err(err, WEFT_EINVAL, "%s: lease must be positive (got %lld ms)", what,
                                 (long long)lease_ms);
}

int st_check_due_claim(int due_max, int64_t hold_ms, const char *const *types, size_t *ntypes,
                       int max, int64_t lease_ms, weft_error *err)
{
    int rc;
    if (max <= 0 || !types) *ntypes = 0;
    if (*ntypes && (rc = st_check_lease("claim", lease_ms, err)) != 0) return rc;
    if (due_max > 0 && hold_ms < 0)
        return wu_err(err, WEFT_EINVAL, "due: negative hold (%lld ms)", (long long)hold_ms);
    return 0;
}

int st_event_text(wu_buf *b, const char *workflow_id, uint64_t ms, const char *line, size_t len)
{
    char t[32];
    int rc;
    b->len = 0;
    if (line[0] != '{' || !strncmp(line, "{\"workflowId\":", 14)) return wu_buf_add(b, line, len);
    snprintf(t, sizeof t, ",\"time\":%llu", (unsigned long long)ms);
    if ((rc = wu_buf_add(b, "{\"workflowId\":", 14)) ||
        (rc = wu_buf_add_json_str(b, workflow_id)) || (rc = wu_buf_add(b, t, strlen(t))))
        return rc;
    if (line[1] != '}' && (rc = wu_buf_add(b, ",", 1))) return rc;
    return wu_buf_add(b, line + 1, len - 1);
}

int st_daemon_info(const char *daemon_id, const char *info_json, json_object **out, weft_error *err)
{
    json_object *j = NULL, *seen;
    int rc;
    *out = NULL;
    if ((rc = wu_parse_json("info", info_json ? info_json : "{}", &j, err)) == WEFT_ENOMEM)
        return wu_err_prefix(err, "daemon %s: ", daemon_id);
    if (rc || !json_object_is_type(j, json_type_object)) {
        json_object_put(j);
        return wu_err(err, WEFT_EINVAL, "daemon %s: info is not a JSON object", daemon_id);
    }
    if (!(seen = json_object_new_int64(wu_now_ms())) || json_object_object_add(j, "seen", seen)) {
        json_object_put(seen);
        json_object_put(j);
        return wu_err(err, WEFT_ENOMEM, "daemon %s: out of memory", daemon_id);
    }
    *out = j;
    return 0;
}

void st_free(st_store *s)
{
    if (s) s->ops->free(s);
}

int st_check_query(const st_query *q, weft_error *err)
{
    if (q->size > ST_SEARCH_MAX || q->start > ST_SEARCH_MAX - q->size)
        return wu_err(err, WEFT_EINVAL, "search: start + size is at most %d (start %zu, size %zu)",
                      ST_SEARCH_MAX, q->start, q->size);
    return 0;
}

static int in_list(const char *const *list, size_t n, const char *s)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (!strcmp(list[i], s)) return 1;
    return n == 0;
}

int st_query_match(const st_query *q, const char *id, const char *status, const char *name,
                   int version, const char *correlation_id, int64_t start_ms)
{
    const char *corr = correlation_id ? correlation_id : "";
    if (!in_list(q->statuses, q->nstatuses, status) || !in_list(q->names, q->nnames, name))
        return 0;
    if ((q->start_after && start_ms <= q->start_after) ||
        (q->start_before && start_ms >= q->start_before))
        return 0;
    if (q->correlation_id && *q->correlation_id && strcmp(q->correlation_id, corr)) return 0;
    if (q->version && q->version != version) return 0;
    return !q->free_text || !*q->free_text || !strcmp(q->free_text, id) ||
           (*corr && !strcmp(q->free_text, corr));
}

static int asc_order(const void *a, const void *b)
{
    const st_hit *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return strcmp(x->id, y->id);
}

static int desc_order(const void *a, const void *b)
{
    return asc_order(b, a);
}

void st_hits_page(const st_query *q, st_hit *hits, size_t have, size_t *n)
{
    size_t from = q->start < have ? q->start : have;
    *n = 0;
    if (!have) return;
    qsort(hits, have, sizeof *hits, q->asc ? asc_order : desc_order);
    *n = have - from < q->size ? have - from : q->size;
    memmove(hits, hits + from, *n * sizeof *hits);
}

void st_doc_clear(st_doc *d)
{
    free(d->doc);
    free(d->status);
    free(d->cmd);
    memset(d, 0, sizeof *d);
}

/* Digits only, at most max of them, no overflow: *v. */
static int id_part(const char *s, size_t n, size_t max, unsigned long long *v)
{
    size_t i;
    *v = 0;
    if (n == 0 || n > max) return 0;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        if (*v > (ULLONG_MAX - (unsigned)(s[i] - '0')) / 10) return 0;
        *v = *v * 10 + (unsigned)(s[i] - '0');
    }
    return 1;
}

int st_event_id_parse(const char *id, char entry[ST_EVENT_ID_MAX], long long *index,
                      weft_error *err)
{
    const char *d1 = id ? strchr(id, '-') : NULL, *d2 = d1 ? strchr(d1 + 1, '-') : NULL;
    unsigned long long ms, seq = 0, i = 0;
    size_t n = id ? strlen(id) : 0;
    int ok;
    *index = -1;
    entry[0] = 0;
    if (!id || !*id || !strcmp(id, "0")) {
        snprintf(entry, ST_EVENT_ID_MAX, "0");
        return 0;
    }
    ok = n < ST_EVENT_ID_MAX && id_part(id, d1 ? (size_t)(d1 - id) : n, 20, &ms) &&
         (!d1 ||
          id_part(d1 + 1, d2 ? (size_t)(d2 - d1 - 1) : n - (size_t)(d1 + 1 - id), 20, &seq)) &&
         (!d2 || (id_part(d2 + 1, n - (size_t)(d2 + 1 - id), 9, &i) && !strchr(d2 + 1, '-')));
    if (!ok)
        return wu_err(err, WEFT_EINVAL,
                      "event id '%.80s': expected <ms>-<seq>-<index> such as 1700000000000-0-2",
                      id);
    snprintf(entry, ST_EVENT_ID_MAX, "%.*s", (int)(d2 ? (size_t)(d2 - id) : n), id);
    if (d2) *index = (long long)i;
    return 0;
}

int st_daemon_stale(json_object *info, int64_t seen_before)
{
    json_object *seen;
    return !json_object_object_get_ex(info, "seen", &seen) ||
           !json_object_is_type(seen, json_type_int) || json_object_get_int64(seen) < seen_before;
}

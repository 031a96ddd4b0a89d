/* The Redis store's status lane (redis.h): each execution's event stream. */
#include "store/redis/internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* digits only, at most max of them, at least one; *v their value (no overflow) */
/* The stream id just before entry ms-seq: XREAD from it reads that entry again. */
static void id_before(const char *entry, char out[ST_EVENT_ID_MAX])
{
    const char *d = strchr(entry, '-');
    unsigned long long ms = strtoull(entry, NULL, 10), seq = d ? strtoull(d + 1, NULL, 10) : 0;
    if (seq > 0)
        snprintf(out, ST_EVENT_ID_MAX, "%llu-%llu", ms, seq - 1);
    else if (ms > 0)
        snprintf(out, ST_EVENT_ID_MAX, "%llu-%llu", ms - 1, ULLONG_MAX);
    else
        snprintf(out, ST_EVENT_ID_MAX, "0");
}

/* One round trip: XREAD [BLOCK block_ms] from `from`; *x nil on timeout. */
static int events_read(rs *r, const char *ev, const char *from, int block_ms, redisReply **x,
                       weft_error *err)
{
    rs_cmd c = {0};
    int rc;
    rs_cmd_add(&c, "XREAD");
    if (block_ms > 0) {
        rs_cmd_add(&c, "BLOCK");
        rs_cmd_addf(&c, "%d", block_ms);
    }
    rs_cmd_add(&c, "COUNT");
    rs_cmd_add(&c, EVENTS_COUNT);
    rs_cmd_add(&c, "STREAMS");
    rs_cmd_add(&c, ev);
    rs_cmd_add(&c, from);
    r->long_ms = block_ms > 0 ? block_ms : 0; /* the socket waits longer than Redis */
    rc = rs_one(r, &c, x, ev, err);
    r->long_ms = 0;
    return rc;
}

int rs_events(rs *r, const char *workflow_id, const char *after_id, char *next_id, int block_ms,
              int (*fn)(void *ud, const char *id, const char *json), void *ud, weft_error *err)
{
    wu_buf full = {0};
    char ev[KEY_MAX], seen[ST_EVENT_ID_MAX], from[ST_EVENT_ID_MAX], next[ST_EVENT_ID_MAX];
    char evid[ST_EVENT_ID_MAX + 24];
    redisReply *x = NULL;
    long long skip;
    size_t i, j, f;
    int rc, n = 0, stop = 0, pass, entries;

    if ((rc = rs_check_id(workflow_id, err)) != 0) return rc;
    if (block_ms < 0) return wu_err(err, WEFT_EINVAL, "events of %s: negative wait", workflow_id);
    if ((rc = st_event_id_parse(after_id, seen, &skip, err)) != 0)
        return wu_err_prefix(err, "events of %s: ", workflow_id);
    rs_k_exec(r, workflow_id, ":ev", ev);
    snprintf(next, sizeof next, "%s", after_id && *after_id ? after_id : "0");
    /* in the middle of an entry: read it again and skip what was seen */
    if (skip >= 0)
        id_before(seen, from);
    else
        snprintf(from, sizeof from, "%s", seen);
    for (pass = 0; pass < 2; pass++) {
        entries = 0;
        if ((rc = events_read(r, ev, from, block_ms, &x, err)) != 0) goto out;
        /* nil on timeout; else [[key, [[id, [field, value, ...]], ...]]] */
        for (i = 0; x->type == REDIS_REPLY_ARRAY && i < x->elements && !stop; i++) {
            const redisReply *s = x->element[i];
            if (s->type != REDIS_REPLY_ARRAY || s->elements != 2 ||
                s->element[1]->type != REDIS_REPLY_ARRAY)
                continue;
            for (j = 0; j < s->element[1]->elements && !stop; j++) {
                const redisReply *e = s->element[1]->element[j];
                long long k = 0;
                int again;
                if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
                    e->element[0]->type != REDIS_REPLY_STRING ||
                    e->element[1]->type != REDIS_REPLY_ARRAY ||
                    e->element[0]->len >= ST_EVENT_ID_MAX)
                    continue;
                entries++;
                again = skip >= 0 && !strcmp(e->element[0]->str, seen);
                /* a stop takes effect after the entry: the rest of it is delivered */
                for (f = 0; f + 1 < e->element[1]->elements; f += 2) {
                    const redisReply *kk = e->element[1]->element[f];
                    const redisReply *v = e->element[1]->element[f + 1];
                    char *line, *nl;
                    if (kk->type != REDIS_REPLY_STRING || strcmp(kk->str, "json") ||
                        v->type != REDIS_REPLY_STRING)
                        continue;
                    /* a save's events share its entry, a line each (older
                     * entries: a field each); an event's index counts them all */
                    for (line = v->str; line; line = nl, k++) {
                        if ((nl = strchr(line, '\n'))) *nl++ = 0;
                        if (again && k <= skip) continue;
                        n++;
                        snprintf(evid, sizeof evid, "%s-%lld", e->element[0]->str, k);
                        if (fn &&
                            st_event_text(&full, workflow_id,
                                          (uint64_t)strtoll(e->element[0]->str, NULL, 10), line,
                                          strlen(line)) == 0 &&
                            fn(ud, evid, full.data))
                            stop = 1;
                    }
                }
                snprintf(next, sizeof next, "%s", e->element[0]->str);
            }
        }
        rs_replies_free(&x, 1);
        /* all it read was the rest of the entry resumed in, and nothing was
         * left of it: wait from that entry on, as asked */
        if (n > 0 || entries == 0 || block_ms == 0 || stop) break;
        snprintf(from, sizeof from, "%s", next);
        skip = -1;
    }
out:
    if (next_id && rc == 0) snprintf(next_id, ST_EVENT_ID_MAX, "%s", next);
    wu_buf_free(&full);
    return rc ? rc : n;
}

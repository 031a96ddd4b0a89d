/*
 * /health (Redis reachable, store data lost) and /metrics (Prometheus
 * text, with the queues of ap_queues: their depths and last polls).
 */
#include "api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- handlers: health, readiness, metrics ---- */

/* What this daemon serves, as a JSON array. */
static json_object *serves(const ap_server *s)
{
    json_object *a = json_object_new_array();
    size_t i;
    for (i = 0; i < s->cfg.nserves; i++)
        json_object_array_add(a, json_object_new_string(s->cfg.serves[i]));
    return a;
}

/* GET /ready: 200 once the store answers and the daemon's workers run
 * (its plugins are loaded before the API starts), else 503 saying why. */
mhd_result ap_h_ready(ctx *c)
{
    weft_error err = {0};
    json_object *j = json_object_new_object();
    const char *why = NULL;
    char msg[WEFT_ERROR_MAX + 32];
    if (!c->s->cfg.nserves)
        why = "this daemon serves no task type";
    else if (c->s->cfg.ready && !__atomic_load_n(c->s->cfg.ready, __ATOMIC_ACQUIRE))
        why = "its workers are not running (starting, or stopping after SIGTERM)";
    else if (!c->t || ST(c->t->st, ping, &err)) {
        snprintf(msg, sizeof msg, "the store does not answer: %s",
                 c->t ? err.msg : "no connection");
        why = msg;
    }
    json_object_object_add(j, "ready", json_object_new_boolean(!why));
    if (why) json_object_object_add(j, "reason", json_object_new_string(why));
    json_object_object_add(j, "serves", serves(c->s));
    return ap_send_json(c, why ? 503 : 200, j);
}

mhd_result ap_h_health(ctx *c)
{
    weft_error err = {0};
    int up = c->t && ST(c->t->st, ping, &err) == 0;
    json_object *j = json_object_new_object();
    rs_loss l = {0};
    if (c->s->cfg.store.epoch) rs_epoch_last(c->s->cfg.store.epoch, &l);
    /* a loss stays reported until the daemon restarts: an operator must see it */
    json_object_object_add(j, "status",
                           json_object_new_string(!up       ? "DOWN"
                                                  : l.count ? "DEGRADED"
                                                            : "UP"));
    json_object_object_add(j, "redis", json_object_new_string(up ? "UP" : "DOWN"));
    json_object_object_add(j, "serves", serves(c->s));
    if (l.count) {
        char at[32], msg[512];
        time_t sec = (time_t)(l.at_ms / 1000);
        struct tm tm;
        gmtime_r(&sec, &tm);
        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(msg, sizeof msg,
                 "the store lost its data at %s: the epoch key %s %s (Redis restarted empty, was "
                 "flushed, or is another server); workflows and queues from before are gone; "
                 "%lld loss(es) since this daemon started (see its log)",
                 at, l.key, l.gone ? "was gone" : "held another epoch", l.count);
        json_object_object_add(j, "store", json_object_new_string("DATA_LOST"));
        json_object_object_add(j, "problem", json_object_new_string(msg));
        json_object_object_add(j, "storeLosses", json_object_new_int64(l.count));
        json_object_object_add(j, "storeLostAt", json_object_new_int64(l.at_ms));
    }
    return ap_send_json(c, up ? 200 : 503, j);
}

mhd_result ap_h_metrics(ctx *c)
{
    st_store *st = c->t ? c->t->st : NULL;
    ap_qset set = {0};
    mt_depth *d = NULL;
    wu_buf b = {0};
    size_t i, n = 0;
    long long unfinished = -1;
    mhd_result r;
    if (!c->s->cfg.metrics) return ap_send_error(c, 500, "no metrics");
    /* Redis away: the daemon's own metrics, without what the store holds */
    if (st) {
        weft_error err = {0};
        if (ap_queues(c->s, st, &set, &err) == 0 && set.n && !(d = calloc(set.n, sizeof *d)))
            ap_qset_free(&set);
        for (i = 0; d && i < set.n; i++) {
            d[n].queue = set.q[i].name;
            d[n].depth = set.q[i].ready + set.q[i].leased;
            d[n].polled_ms = set.q[i].polled_ms;
            d[n].limits = NULL;
            if (ST(st, queue_limits, set.q[i].name, &d[n].limits, &err) && ST(st, broken)) break;
            n++;
        }
        if (!ST(st, broken) && ST(st, unfinished, &unfinished, &err)) unfinished = -1;
    }
    if (mt_render(c->s->cfg.metrics, d, n, unfinished, &b))
        r = ap_send_error(c, 500, "out of memory");
    else
        r = ap_send_raw(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, NULL,
                        NULL);
    wu_buf_free(&b);
    for (i = 0; i < n; i++)
        json_object_put(d[i].limits);
    free(d);
    ap_qset_free(&set);
    return r;
}

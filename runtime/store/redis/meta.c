/* The Redis store's named things (redis.h): definitions, task definitions,
 * idempotency keys, daemons, secrets. */
#include "store/redis/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* ---- definitions, idempotency, daemons ---- */

/* One round trip: HSET. */
int rs_def_put(rs *r, const char *name, int version, const char *json, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    if ((rc = st_check_name("definition name", name, NAME_MAX_, 1, err)) != 0) return rc;
    if (version <= 0 || !json)
        return wu_err(err, WEFT_EINVAL, "definition %s: version must be >= 1 and JSON given", name);
    rs_k_name(r, "def:", name, k);
    rs_cmd_add(&c, "HSET");
    rs_cmd_add(&c, k);
    rs_cmd_addf(&c, "%d", version);
    rs_cmd_add(&c, json);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    rs_replies_free(&x, 1);
    return 0;
}

/* One round trip for a given version (HGET); two for the latest (HKEYS, HGET). */
int rs_def_get(rs *r, const char *name, int version, char **json, int *version_out, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;

    *json = NULL;
    if ((rc = st_check_name("definition name", name, NAME_MAX_, 1, err)) != 0) return rc;
    rs_k_name(r, "def:", name, k);
    if (version <= 0) {
        long best = 0;
        rs_cmd_add(&c, "HKEYS");
        rs_cmd_add(&c, k);
        if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
        for (i = 0; i < x->elements; i++) {
            char *end;
            long v;
            if (x->element[i]->type != REDIS_REPLY_STRING) continue;
            v = strtol(x->element[i]->str, &end, 10);
            if (!*end && v > best && v <= 0x7fffffff) best = v;
        }
        rs_replies_free(&x, 1);
        if (!best) return wu_err(err, WEFT_ENOTFOUND, "no definition %s", name);
        version = (int)best;
    }
    rs_cmd_add(&c, "HGET");
    rs_cmd_add(&c, k);
    rs_cmd_addf(&c, "%d", version);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_STRING) {
        rs_replies_free(&x, 1);
        return wu_err(err, WEFT_ENOTFOUND, "no definition %s version %d", name, version);
    }
    *json = rs_reply_dup(x);
    rs_replies_free(&x, 1);
    if (!*json) return rs_oom(err);
    if (version_out) *version_out = version;
    return 0;
}

/* One round trip: SET NX PX and GET, pipelined. */
int rs_idem_claim(rs *r, const char *key, const char *id, char existing[64], weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c[2];
    redisReply *x[2];
    int rc, attempt;

    if (existing) existing[0] = 0;
    if ((rc = st_check_name("idempotency key", key, NAME_MAX_, 1, err)) != 0 ||
        (rc = rs_check_id(id, err)) != 0)
        return rc;
    rs_k_name(r, "idem:", key, k);
    for (attempt = 0; attempt < 2; attempt++) {
        memset(c, 0, sizeof c);
        rs_cmd_add(&c[0], "SET");
        rs_cmd_add(&c[0], k);
        rs_cmd_add(&c[0], id);
        rs_cmd_add(&c[0], "NX");
        rs_cmd_add(&c[0], "PX");
        rs_cmd_addf(&c[0], "%lld", (long long)r->retention_ms);
        rs_cmd_add(&c[1], "GET");
        rs_cmd_add(&c[1], k);
        rc = rs_pipe(r, c, 2, x, k, err);
        rs_cmds_free(c, 2);
        if (!rc && rs_is_err(x[0]))
            rc = rs_reply_err(r, x[0], k, err);
        else if (!rc && rs_is_err(x[1]))
            rc = rs_reply_err(r, x[1], k, err);
        if (rc) {
            rs_replies_free(x, 2);
            return rc;
        }
        if (rs_is_str(x[0])) {
            rs_replies_free(x, 2);
            return 0;
        }
        if (x[1]->type == REDIS_REPLY_STRING) {
            int same = x[1]->len == strlen(id) && !memcmp(x[1]->str, id, x[1]->len);
            if (existing) rs_copy_str(existing, 64, x[1]);
            rs_replies_free(x, 2);
            /* the same id asking again (a retried start) is not a conflict */
            return same ? 0
                        : wu_err(err, WEFT_EEXIST, "idempotency key %s was used by %s", key,
                                 existing ? existing : "another workflow");
        }
        rs_replies_free(x, 2); /* expired in between: try again */
    }
    return wu_err(err, WEFT_EIO, "%s: %s: idempotency key keeps changing", r->url.shown, k);
}

/* One round trip: HSET (info gets "seen": now in ms); with an epoch, GET
 * of the epoch and ZCARD of each partition of the decider queue in the
 * same pipeline. */
int rs_daemon_beat(rs *r, const char *daemon_id, const char *info_json, weft_error *err)
{
    char k[KEY_MAX], dq[KEY_MAX];
    json_object *j;
    rs_cmd *c = NULL;
    redisReply **x = NULL;
    size_t n = 1, i;
    long long unfinished = 0;
    int rc;
    if ((rc = st_check_name("daemon id", daemon_id, NAME_MAX_, 1, err)) != 0) return rc;
    if ((rc = rs_ensure(r, err)) != 0) return rc; /* the layout */
    if ((rc = st_daemon_info(daemon_id, info_json, &j, err)) != 0) return rc;
    c = calloc((size_t)r->parts + 2, sizeof *c);
    x = calloc((size_t)r->parts + 2, sizeof *x);
    if (!c || !x) {
        json_object_put(j);
        free(c);
        free(x);
        return rs_oom(err);
    }
    rs_k_name(r, "daemons", "", k);
    rs_cmd_add(&c[0], "HSET");
    rs_cmd_add(&c[0], k);
    rs_cmd_add(&c[0], daemon_id);
    rs_cmd_dup(&c[0], json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    json_object_put(j);
    if (r->epoch) {
        /* the heartbeat also sees a flush that left the connection up, and
         * how many workflows a loss would take: no round trip of its own */
        rs_cmd_add(&c[1], "GET");
        rs_cmd_addf(&c[1], "%sepoch", r->prefix);
        for (n = 2; n < (size_t)r->parts + 2; n++) {
            rs_k_dq(r, (int)n - 2, dq);
            rs_cmd_add(&c[n], "ZCARD");
            rs_cmd_dup(&c[n], dq);
        }
    }
    rc = rs_pipe(r, c, n, x, k, err);
    rs_cmds_free(c, n);
    if (!rc && rs_is_err(x[0])) rc = rs_reply_err(r, x[0], k, err);
    for (i = 2; i < n && unfinished >= 0; i++)
        unfinished = x[i] && x[i]->type == REDIS_REPLY_INTEGER ? unfinished + x[i]->integer : -1;
    if (!rc && n > 1 && !rs_is_err(x[1])) rs_epoch_seen(r, x[1], unfinished);
    rs_replies_free(x, n);
    free(c);
    free(x);
    return rc;
}

/* One round trip: HGETALL. */
int rs_daemons(rs *r, char **json, weft_error *err)
{
    char k[KEY_MAX];
    json_object *all;
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;
    *json = NULL;
    rs_k_name(r, "daemons", "", k);
    rs_cmd_add(&c, "HGETALL");
    rs_cmd_add(&c, k);
    if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
    if (!(all = json_object_new_object())) {
        rs_replies_free(&x, 1);
        return rs_oom(err);
    }
    for (i = 0; i + 1 < x->elements; i += 2) {
        const redisReply *id = x->element[i], *v = x->element[i + 1];
        json_object *info;
        char *name;
        if (id->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        info = json_tokener_parse(v->str);
        if (!info) info = json_object_new_string_len(v->str, (int)v->len);
        if (!(name = rs_reply_dup(id))) {
            json_object_put(info);
            continue;
        }
        json_object_object_add(all, name, info);
        free(name);
    }
    rs_replies_free(&x, 1);
    *json = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN));
    json_object_put(all);
    return *json ? 0 : rs_oom(err);
}

/* Two round trips: HGETALL, then one HDEL of the stale ones (a daemon that
 * beats in between is written again within its next second). */
int rs_daemons_forget(rs *r, int64_t seen_before, size_t *n, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL, *y = NULL;
    size_t i, stale = 0;
    int rc;
    if (n) *n = 0;
    rs_k_name(r, "daemons", "", k);
    rs_cmd_add(&c, "HGETALL");
    rs_cmd_add(&c, k);
    if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
    rs_cmd_add(&c, "HDEL");
    rs_cmd_add(&c, k);
    for (i = 0; i + 1 < x->elements; i += 2) {
        const redisReply *id = x->element[i], *v = x->element[i + 1];
        json_object *info = v->type == REDIS_REPLY_STRING ? json_tokener_parse(v->str) : NULL;
        if (id->type == REDIS_REPLY_STRING && st_daemon_stale(info, seen_before)) {
            rs_cmd_addn(&c, id->str, id->len, NULL);
            stale++;
        }
        json_object_put(info);
    }
    if (stale) rc = rs_one(r, &c, &y, k, err);
    rs_cmd_free(&c);
    rs_replies_free(&x, 1);
    if (y) rs_replies_free(&y, 1);
    if (!rc && n) *n = stale;
    return rc;
}

/* ---- named hashes (secrets, task definitions): NAME -> value ---- */

/* HSET P<kind> name value. One round trip. */
static int hash_put(rs *r, const char *kind, const char *what, const char *name, const char *value,
                    weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    if ((rc = st_check_name(what, name, NAME_MAX_, 1, err)) != 0) return rc;
    if (!value) return wu_err(err, WEFT_EINVAL, "%s %s: no value", what, name);
    rs_k_name(r, kind, "", k);
    rs_cmd_add(&c, "HSET");
    rs_cmd_add(&c, k);
    rs_cmd_add(&c, name);
    rs_cmd_add(&c, value);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    rs_replies_free(&x, 1);
    return 0;
}

/* HGET P<kind> name (*value malloc'd); `missing` is the message when absent. One round trip. */
static int hash_get(rs *r, const char *kind, const char *what, const char *name, char **value,
                    const char *missing, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc;
    *value = NULL;
    if ((rc = st_check_name(what, name, NAME_MAX_, 1, err)) != 0) return rc;
    rs_k_name(r, kind, "", k);
    rs_cmd_add(&c, "HGET");
    rs_cmd_add(&c, k);
    rs_cmd_add(&c, name);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_STRING) {
        rs_replies_free(&x, 1);
        return wu_err(err, WEFT_ENOTFOUND, "%s", missing);
    }
    *value = rs_reply_dup(x);
    rs_replies_free(&x, 1);
    return *value ? 0 : rs_oom(err);
}

/* ---- secrets ---- */

/* Psecrets is one hash: NAME -> value. One round trip each. */
int rs_secret_set(rs *r, const char *name, const char *value, weft_error *err)
{
    return hash_put(r, "secrets", "secret name", name, value, err);
}

int rs_secret_get(rs *r, const char *name, char **value, weft_error *err)
{
    char missing[300];
    snprintf(missing, sizeof missing, "secret '%.100s' is not set (weft secret set %.100s)", name,
             name);
    return hash_get(r, "secrets", "secret name", name, value, missing, err);
}

int rs_secret_delete(rs *r, const char *name, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    int rc, gone;
    if ((rc = st_check_name("secret name", name, NAME_MAX_, 1, err)) != 0) return rc;
    rs_k_name(r, "secrets", "", k);
    rs_cmd_add(&c, "HDEL");
    rs_cmd_add(&c, k);
    rs_cmd_add(&c, name);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    gone = x->type == REDIS_REPLY_INTEGER && x->integer == 1;
    rs_replies_free(&x, 1);
    return gone ? 0 : wu_err(err, WEFT_ENOTFOUND, "secret '%s' is not set", name);
}

int rs_secret_names(rs *r, char ***names, size_t *n, weft_error *err)
{
    char k[KEY_MAX];
    rs_k_name(r, "secrets", "", k);
    return rs_strings(r, "HKEYS", k, NULL, names, n, err);
}

/* One round trip: HSET and SADD, pipelined. */
int rs_def_register(rs *r, const char *name, int version, const char *json, weft_error *err)
{
    char k[2][KEY_MAX];
    rs_cmd c[2];
    redisReply *x[2];
    int rc, i;
    if ((rc = st_check_name("definition name", name, NAME_MAX_, 1, err)) != 0) return rc;
    if (version <= 0 || !json)
        return wu_err(err, WEFT_EINVAL, "definition %s: version must be >= 1 and JSON given", name);
    rs_k_name(r, "def:", name, k[0]);
    rs_k_name(r, "defnames", "", k[1]);
    memset(c, 0, sizeof c);
    rs_cmd_add(&c[0], "HSET");
    rs_cmd_add(&c[0], k[0]);
    rs_cmd_addf(&c[0], "%d", version);
    rs_cmd_add(&c[0], json);
    rs_cmd_add(&c[1], "SADD");
    rs_cmd_add(&c[1], k[1]);
    rs_cmd_add(&c[1], name);
    rc = rs_pipe(r, c, 2, x, k[0], err);
    rs_cmds_free(c, 2);
    for (i = 0; i < 2 && !rc; i++)
        if (rs_is_err(x[i])) rc = rs_reply_err(r, x[i], k[i], err);
    rs_replies_free(x, 2);
    return rc;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Two round trips: SMEMBERS, then one HGETALL per name, pipelined. */
int rs_def_list(rs *r, char **json, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0}, *h = NULL;
    redisReply *x = NULL, **hx = NULL;
    json_object *all;
    char **names = NULL;
    size_t i, j, n = 0;
    int rc;

    *json = NULL;
    rs_k_name(r, "defnames", "", k);
    rs_cmd_add(&c, "SMEMBERS");
    rs_cmd_add(&c, k);
    if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
    if (!(all = json_object_new_array())) {
        rs_replies_free(&x, 1);
        return rs_oom(err);
    }
    if (x->elements) {
        names = calloc(x->elements, sizeof *names);
        h = calloc(x->elements, sizeof *h);
        hx = calloc(x->elements, sizeof *hx);
        if (!names || !h || !hx) rc = rs_oom(err);
        for (i = 0; !rc && i < x->elements; i++)
            if (x->element[i]->type == REDIS_REPLY_STRING &&
                (names[n] = rs_reply_dup(x->element[i])))
                n++;
        if (n) qsort(names, n, sizeof *names, by_text);
        for (i = 0; !rc && i < n; i++) {
            char dk[KEY_MAX];
            rs_k_name(r, "def:", names[i], dk);
            rs_cmd_add(&h[i], "HGETALL");
            rs_cmd_dup(&h[i], dk);
        }
        if (!rc && n) rc = rs_pipe(r, h, n, hx, k, err);
        for (i = 0; !rc && i < n; i++) {
            /* versions in order: the hash holds version -> JSON */
            json_object *byv[64];
            int vs[64];
            size_t m = 0, a, b2;
            if (rs_is_err(hx[i]) || hx[i]->type != REDIS_REPLY_ARRAY) continue;
            for (j = 0; j + 1 < hx[i]->elements && m < 64; j += 2) {
                const redisReply *v = hx[i]->element[j], *d = hx[i]->element[j + 1];
                json_object *def = NULL;
                if (v->type != REDIS_REPLY_STRING || d->type != REDIS_REPLY_STRING) continue;
                if (wu_parse_json_stored("definition", d->str, &def, NULL)) continue;
                vs[m] = atoi(v->str);
                byv[m++] = def;
            }
            for (a = 1; a < m; a++)
                for (b2 = a; b2 > 0 && vs[b2 - 1] > vs[b2]; b2--) {
                    int tv = vs[b2];
                    json_object *tj = byv[b2];
                    vs[b2] = vs[b2 - 1], byv[b2] = byv[b2 - 1];
                    vs[b2 - 1] = tv, byv[b2 - 1] = tj;
                }
            for (a = 0; a < m; a++)
                json_object_array_add(all, byv[a]);
        }
    }
    rs_replies_free(&x, 1);
    if (hx) rs_replies_free(hx, n);
    if (h) rs_cmds_free(h, n);
    for (i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(h);
    free(hx);
    if (!rc && !(*json = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN))))
        rc = rs_oom(err);
    json_object_put(all);
    return rc;
}

/* One round trip: HSET. */
int rs_taskdef_put(rs *r, const char *name, const char *json, weft_error *err)
{
    return hash_put(r, "taskdefs", "task name", name, json, err);
}

/* One round trip: HGET. */
int rs_taskdef_get(rs *r, const char *name, char **json, weft_error *err)
{
    char missing[200];
    snprintf(missing, sizeof missing, "no task definition %.150s", name);
    return hash_get(r, "taskdefs", "task name", name, json, missing, err);
}

/* One round trip: HGETALL. */
int rs_taskdef_list(rs *r, char **json, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    json_object *all;
    char **vals;
    size_t i, n = 0;
    int rc;
    *json = NULL;
    rs_k_name(r, "taskdefs", "", k);
    rs_cmd_add(&c, "HGETALL");
    rs_cmd_add(&c, k);
    if ((rc = rs_array(r, &c, &x, k, err)) != 0) return rc;
    /* by name: the hash's order is arbitrary */
    vals = calloc(x->elements / 2 + 1, sizeof *vals);
    all = json_object_new_array();
    if (!vals || !all) {
        free(vals);
        json_object_put(all);
        rs_replies_free(&x, 1);
        return rs_oom(err);
    }
    for (i = 0; i + 1 < x->elements; i += 2) {
        const redisReply *nm = x->element[i], *v = x->element[i + 1];
        size_t len;
        if (nm->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        len = nm->len + v->len + 2;
        if (!(vals[n] = malloc(len))) continue;
        /* "name\0json": sorted by name, the JSON follows the NUL */
        memcpy(vals[n], nm->str, nm->len + 1);
        memcpy(vals[n] + nm->len + 1, v->str, v->len + 1);
        n++;
    }
    rs_replies_free(&x, 1);
    qsort(vals, n, sizeof *vals, by_text);
    for (i = 0; i < n; i++) {
        json_object *d = NULL;
        if (!wu_parse_json_stored("definition", vals[i] + strlen(vals[i]) + 1, &d, NULL))
            json_object_array_add(all, d);
        free(vals[i]);
    }
    free(vals);
    *json = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN));
    json_object_put(all);
    return *json ? 0 : rs_oom(err);
}

/* One round trip: HMGET. */
int rs_taskdefs_get(rs *r, const char *const *names, size_t n, char **jsons, weft_error *err)
{
    char k[KEY_MAX];
    rs_cmd c = {0};
    redisReply *x = NULL;
    size_t i;
    int rc;
    for (i = 0; i < n; i++)
        jsons[i] = NULL;
    if (!n) return 0;
    rs_k_name(r, "taskdefs", "", k);
    rs_cmd_add(&c, "HMGET");
    rs_cmd_add(&c, k);
    for (i = 0; i < n; i++)
        rs_cmd_add(&c, names[i]);
    if ((rc = rs_one(r, &c, &x, k, err)) != 0) return rc;
    if (x->type != REDIS_REPLY_ARRAY || x->elements != n) {
        rs_replies_free(&x, 1);
        return rs_bad_reply(r, k, err);
    }
    for (i = 0; i < n; i++)
        if (x->element[i]->type == REDIS_REPLY_STRING) jsons[i] = rs_reply_dup(x->element[i]);
    rs_replies_free(&x, 1);
    return 0;
}

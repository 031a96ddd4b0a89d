/* The Redis store's epoch (rs_epoch, redis.h): finding out that the store lost its data. */
#include "store/redis/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rs_epoch {
    pthread_mutex_t mu;
    char known[40];       /* the epoch this process works in; "" = none yet */
    long long unfinished; /* unfinished workflows at the last heartbeat; -1 = unknown */
    rs_loss last;         /* the last loss; count 0 = none */
    void (*lost)(void *ud, const rs_loss *l);
    void *ud;
};

rs_epoch *rs_epoch_new(void (*lost)(void *ud, const rs_loss *l), void *ud)
{
    rs_epoch *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    pthread_mutex_init(&e->mu, NULL);
    e->unfinished = -1;
    e->lost = lost;
    e->ud = ud;
    return e;
}

void rs_epoch_free(rs_epoch *e)
{
    if (!e) return;
    pthread_mutex_destroy(&e->mu);
    free(e);
}

void rs_epoch_last(rs_epoch *e, rs_loss *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->last;
    pthread_mutex_unlock(&e->mu);
}

/* Write a new epoch unless one is there (another process's): the one in
 * Redis afterwards goes to known, or "" when that failed (the next connect
 * or heartbeat tries again). Two round trips at most, at first use and
 * after a loss only. */
static void epoch_make(rs *r, char known[40])
{
    weft_error err = {0};
    redisReply *x = NULL;
    rs_cmd c = {0};
    char id[37], key[KEY_MAX];
    int rc;
    known[0] = 0;
    snprintf(key, sizeof key, "%sepoch", r->prefix);
    wu_uuid(id);
    rs_cmd_add(&c, "SET");
    rs_cmd_add(&c, key);
    rs_cmd_add(&c, id);
    rs_cmd_add(&c, "NX");
    if (rs_one(r, &c, &x, key, &err)) return;
    rc = x->type == REDIS_REPLY_STATUS;
    rs_replies_free(&x, 1);
    if (rc) {
        snprintf(known, 40, "%s", id);
        return;
    }
    rs_cmd_add(&c, "GET");
    rs_cmd_add(&c, key);
    if (rs_one(r, &c, &x, key, &err)) return;
    if (x->type == REDIS_REPLY_STRING) snprintf(known, 40, "%.*s", (int)x->len, x->str);
    rs_replies_free(&x, 1);
}

/*
 * The epoch key's value as read (x: a GET reply). Gone or changed while
 * this process knew one: the store lost its data (Redis restarted empty,
 * flushed, or another server). Counted, reported through the hook, and a
 * new epoch made. The epoch's lock is held across the check and the write,
 * so the many connections of one process count one loss once.
 */
void rs_epoch_seen(rs *r, const redisReply *x, long long unfinished)
{
    rs_epoch *e = r->epoch;
    rs_loss loss;
    int found = x && x->type == REDIS_REPLY_STRING, lost = 0;
    if (x && !found && x->type != REDIS_REPLY_NIL) return; /* not ours to judge */
    pthread_mutex_lock(&e->mu);
    if (found && e->known[0] && x->len == strlen(e->known) && !memcmp(x->str, e->known, x->len)) {
        /* counted in the same round trip: what a loss found later would take */
        if (unfinished >= 0) e->unfinished = unfinished;
        pthread_mutex_unlock(&e->mu);
        return;
    }
    memset(&loss, 0, sizeof loss);
    if (e->known[0]) {
        lost = 1;
        snprintf(loss.was, sizeof loss.was, "%s", e->known);
        loss.unfinished = e->unfinished;
        loss.at_ms = wu_now_ms();
        loss.count = e->last.count + 1;
        snprintf(loss.key, sizeof loss.key, "%sepoch", r->prefix);
    }
    if (found)
        snprintf(e->known, sizeof e->known, "%.*s", (int)(x->len < 39 ? x->len : 39), x->str);
    else
        epoch_make(r, e->known);
    if (lost) {
        loss.gone = !found;
        snprintf(loss.now, sizeof loss.now, "%s", e->known);
        e->last = loss;
    }
    e->unfinished = unfinished; /* of the new epoch (or -1, unknown) */
    pthread_mutex_unlock(&e->mu);
    if (lost && e->lost) e->lost(e->ud, &loss);
}

/*
 * The inspecting connection of a test that runs against a real Redis: the
 * test connects q itself, and checks what its code wrote with these.
 * Header-only (static functions); include it after <cmocka.h> and
 * <hiredis/hiredis.h>. A command that gets no reply fails the test.
 */
#ifndef WEFT_TEST_REDIS_INSPECT_H
#define WEFT_TEST_REDIS_INSPECT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define RI_FN static __attribute__((unused))

static redisContext *q; /* the inspecting connection */

RI_FN redisReply *qcv(const char *fmt, va_list ap)
{
    redisReply *x = redisvCommand(q, fmt, ap);
    if (!x) fail_msg("inspecting connection: %s", q->errstr);
    return x;
}

/* A command's reply (caller frees). */
RI_FN redisReply *qc(const char *fmt, ...)
{
    va_list ap;
    redisReply *x;
    va_start(ap, fmt);
    x = qcv(fmt, ap);
    va_end(ap);
    return x;
}

/* An integer (or number string) reply; -999 for nil. */
RI_FN long long qint(const char *fmt, ...)
{
    va_list ap;
    redisReply *x;
    long long v = 0;
    va_start(ap, fmt);
    x = qcv(fmt, ap);
    va_end(ap);
    if (x->type == REDIS_REPLY_NIL)
        v = -999;
    else if (x->type == REDIS_REPLY_STRING)
        v = atoll(x->str);
    else if (x->type == REDIS_REPLY_INTEGER)
        v = x->integer;
    else
        fail_msg("unexpected reply type %d (%s)", x->type, x->str ? x->str : "");
    freeReplyObject(x);
    return v;
}

/* A string reply copied into buf ("(nil)" for nil). */
RI_FN const char *qstr(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    redisReply *x;
    va_start(ap, fmt);
    x = qcv(fmt, ap);
    va_end(ap);
    if (x->type == REDIS_REPLY_STRING || x->type == REDIS_REPLY_STATUS)
        snprintf(buf, n, "%s", x->str);
    else
        snprintf(buf, n, "(nil)");
    freeReplyObject(x);
    return buf;
}

#endif

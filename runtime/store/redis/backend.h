/*
 * The redis backend of the store interface (store.h) over one rs
 * connection: executions are kept as documents (codec.h), their large
 * payloads in a ps_store (payload.h), and their definitions compiled once
 * per process (defcache.h). Prefix rb_ inside; st_redis_open outside.
 */
#ifndef WEFT_STORE_REDIS_BACKEND_H
#define WEFT_STORE_REDIS_BACKEND_H

#include "core/defcache.h"
#include "store/payload.h"
#include "store/redis/redis.h"
#include "store/store.h"

typedef struct st_redis_opts {
    rs_opts rs;          /* the connection */
    const def_env *defs; /* compiles stored definitions */
    dc_cache *cache;     /* compiled definitions (shared); may be NULL */
    ps_store *ps;        /* large payloads; NULL = always inline */
} st_redis_opts;

/* Connect (rs_open). As there, WEFT_EIO with the reason when Redis cannot
 * be reached, the store still returned in *out: every later call tries to
 * reconnect first. */
int st_redis_open(const st_redis_opts *o, st_store **out, weft_error *err);

/* The connection underneath (tests and tools: raw commands, epoch). */
rs *st_redis_conn(st_store *s);

#endif

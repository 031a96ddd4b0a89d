/*
 * weftd's REST API (libmicrohttpd): Conductor's workflow, metadata and
 * external-worker calls, Server-Sent Events of the status lane, /metrics and
 * /health. Every route and its shapes are in docs/rest-api.md. Prefix ap_.
 *
 * A pool of threads, each an epoll loop over many connections, serves the
 * requests; a slow client costs a socket, not a thread. Nothing waits on a
 * pool thread: a long poll or an event stream with nothing to send is
 * suspended and parked with the waiter thread, which takes it up again
 * when there is something to send (or it is time to look). Connections
 * past the total or per-client limit are answered 503; a request that
 * does not arrive whole within the request timeout is dropped. Each
 * thread that serves a request gets its own Redis connection and
 * definition cache (made on first use, freed when the thread ends).
 * Changes go through ops.h as a client does: the API never runs plugins;
 * the daemon's deciders take over from there.
 */
#ifndef WEFT_API_H
#define WEFT_API_H

#include <stddef.h>
#include <stdint.h>
#include "base/log.h"
#include "core/def.h"
#include "daemon/metrics.h"
#include "store/payload.h"
#include "store/redis/redis.h"
#include "store/store.h"

typedef struct ap_server ap_server;

typedef struct ap_config {
    const char *listen;             /* "HOST:PORT" or "[V6]:PORT"; port 0 = any free port */
    const char *token;              /* NULL or "" = no auth; else every /api/ call needs it */
    const char *const *hosts;       /* names it answers to besides localhost and addresses */
    size_t nhosts;                  /* 0: any name only with a token, off loopback */
    int64_t body_limit;             /* largest request body in bytes */
    int threads;                    /* pool threads; 0 = 16 */
    int max_conns;                  /* connections served; past it 503; 0 = 512 */
    int max_conns_per_ip;           /* from one address; past it 503; 0 = no limit */
    int64_t request_timeout_ms;     /* a whole request must arrive within it; 0 = 60 s */
    int64_t idle_timeout_ms;        /* a silent connection is closed; 0 = 30 s */
    rs_opts store;                  /* where workflows live (strings borrowed) */
    const def_env *defs;            /* compiling definitions (shared, read-only) */
    const weft_lock_provider *lock; /* used only when fencing is off */
    void *lock_handle;
    int64_t lock_ttl_ms, lock_wait_ms;
    int64_t command_wait_ms; /* terminate/pause/resume: op_env.command_wait_ms */
    int64_t sweep_ms;
    int fencing;
    int max_reaps;            /* lease expiries before an external worker's task fails */
    int64_t unpolled_ms;      /* a queue with ready tasks no worker polled this long is
                               * said to be unpolled; 0 = 5 min */
    mt_metrics *metrics;      /* may be NULL */
    ps_store *payloads;       /* large payloads (shared, thread-safe); may be NULL */
    const char *const *types; /* queues /metrics reports besides those holding tasks (borrowed) */
    size_t ntypes;
    const char *const *serves; /* what /health says this daemon serves (borrowed) */
    size_t nserves;
    const int *ready; /* its workers run and it is not stopping (atomic); NULL: always */
    /* Log one line (level: WEFT_LOG_*) with its fields (ended by a NULL
     * key; NULL: none); msg has no newline. */
    void (*log)(void *ud, int level, const lg_field *fields, const char *msg);
    void *log_ud;
    /* Opens a store handle for a thread that serves requests (NULL: Redis,
     * as `store` says): a test serves from a memory store. */
    int (*open_store)(void *ud, st_store **out, weft_error *err);
    void *open_store_ud;
} ap_config;

/*
 * Bind cfg->listen and start serving. cfg and everything it points to must
 * outlive the server. WEFT_EINVAL for a bad address, WEFT_EEXIST when the
 * address is in use, WEFT_EIO when it cannot be bound otherwise (the message
 * names the address and the reason).
 */
int ap_start(const ap_config *cfg, ap_server **out, weft_error *err);

/* The address actually bound, "127.0.0.1:PORT" (the port picked for port 0). */
const char *ap_address(const ap_server *s);

/* Stop accepting, end long polls and event streams, wait for the requests
 * in progress, and free the server. NULL is fine. */
void ap_stop(ap_server *s);

#endif

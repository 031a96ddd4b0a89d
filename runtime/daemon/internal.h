/*
 * What the files of weftd's node share (node.c, worker.c, keeper.c,
 * sweep.c, services.c, hooks.c): the node, its worker threads and the
 * tasks they hold. Private to runtime/daemon/. Prefix nd_.
 */
#ifndef WEFT_DAEMON_INTERNAL_H
#define WEFT_DAEMON_INTERNAL_H

#include <pthread.h>
#include <signal.h>

#include "api/api.h"
#include "base/log.h"
#include "core/effects.h"
#include "core/ops.h"
#include "core/sweeper.h"
#include "daemon/metrics.h"
#include "daemon/node.h"
#include "lua/sandbox.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "store/payload.h"
#include "store/redis/backend.h"

#define ND_BATCH 32       /* tasks a worker holds at once (claimed or eager) */
#define ND_DUE_BATCH 8    /* executions a worker takes off the decider queue per round */
#define ND_BUSY_POLL_MS 2 /* while busy with held work, look at the queues this often */
#define ND_ROUND_MS 20    /* run held tasks for this long, then save what is done */
#define ND_PS_BATCH 512   /* payload directory entries a keeper round looks at */
/* A daemon not heard of for this long leaves P:daemons (the keeper looks once a minute). */
#define ND_DAEMON_FORGET_MS (3600 * 1000LL)

/* A task leased to a worker, and the execution it holds for it (or NULL). */
typedef struct held {
    st_lease l;
    int64_t since; /* when it was leased (monotonic ms) */
    xc_exec *x;
} held;

typedef struct worker {
    struct nd_node *n;
    int idx; /* -1 = the keeper */
    st_store *st;
    sbx *sandbox;
    host_services svc;
    dec_env dec;
    op_env op;
    op_hooks hooks;
    held leases[ND_BATCH]; /* a copy of hold (x unused), for the keeper to renew */
    int nleases;
    held hold[ND_BATCH];
    int nhold;
    int64_t last_due, last_claim;
    int64_t due_gap, claim_gap; /* while busy: poll again after this (doubles while empty) */
    int due_more, claim_more;   /* the last poll was full: poll again at once */
    int poll_refused;           /* polls Redis refused in a row (logged once) */
    dc_cache *cache;            /* this thread's compiled definitions */
    pthread_t thread;
    int started;
} worker;

struct nd_node {
    const cf_config *cfg;
    pl_registry *plugins;
    ps_store *payloads; /* large inputs/outputs, shared by the threads */
    def_env defs;
    def_limits limits;
    const weft_lock_provider *lock;
    void *lock_handle;
    char **types;
    size_t ntypes;
    char **owned_types; /* "<domain>:<type>" names made for domains */
    size_t nowned;
    const char **serves; /* what the heartbeat says it serves: types, and the
                          * external ones when its API hands them to workers */
    size_t nserves;
    char id[128];
    volatile sig_atomic_t stopping;
    int redis_down; /* logged once per outage */
    pthread_mutex_t mu;
    worker *workers;
    int nworkers;
    worker keeper;
    int running; /* worker threads still in their loop */
    int ready;   /* its workers run and it is not stopping (atomic; /ready) */
    mt_metrics *metrics;
    int64_t ps_next;     /* the keeper: when the next payload sweep starts (monotonic ms) */
    int64_t forget_next; /* the keeper: when it next forgets daemons long gone (monotonic ms) */
    int ps_pass;         /* a payload sweep is under way */
    size_t ps_removed;   /* files it removed so far */
    rs_epoch *epoch;     /* the store's, shared by every connection */
    ap_config api_cfg;   /* must outlive api */
    ap_server *api;      /* NULL when the REST API is off */
};

/* node.c: sleep ms, EINTR or not. */
void nd_sleep_ms(int64_t ms);
/* node.c: sleep *ms, and double it for next time (up to 2 s). */
void nd_back_off(int64_t *ms);
/* node.c: Redis trouble seen by w: logged once per outage, then back off
 * (*backoff ms, doubled). */
void nd_redis_trouble(worker *w, const weft_error *err, int64_t *backoff);
/* node.c: w's last call went through: says so once if Redis was away. */
void nd_redis_fine(worker *w);

/* keeper.c: say the node is alive and what it serves (a heartbeat in the
 * store); 0 or the store's error. */
int nd_beat(worker *k, weft_error *err);

/* services.c: fill w->svc, the host services (sandbox, sub-workflows,
 * secrets) of w's task callbacks. */
void nd_services_init(worker *w);

/* hooks.c: fill w->hooks, what follows w's saves (workflow ends, notes). */
void nd_hooks_init(worker *w);

/* worker.c: op_env.eager: 1 when a task of t's queue may be leased to
 * worker ud at once. */
int nd_want_eager(void *ud, const xc_task *t);
/* worker.c: a worker thread's loop (arg: its worker); returns NULL. */
void *nd_worker_main(void *arg);

/* keeper.c: the keeper thread's loop (arg: the node's keeper); returns NULL. */
void *nd_keeper_main(void *arg);

#endif

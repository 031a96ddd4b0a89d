/* weftd's node: set-up (plugins, lock, types to serve, the REST API), its
 * threads started and stopped, and what they share (sleeping, Redis
 * trouble). The threads' work: worker.c, keeper.c. */
#include "daemon/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

void nd_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

void nd_back_off(int64_t *ms)
{
    nd_sleep_ms(*ms);
    *ms = *ms * 2 > 2000 ? 2000 : *ms * 2;
}

void nd_redis_trouble(worker *w, const weft_error *err, int64_t *backoff)
{
    nd_node *n = w->n;
    if (!__atomic_exchange_n(&n->redis_down, 1, __ATOMIC_ACQ_REL))
        lg_say(WEFT_LOG_ERROR, "redis unreachable: %s; retrying", err->msg);
    nd_back_off(backoff);
}

void nd_redis_fine(worker *w)
{
    if (__atomic_exchange_n(&w->n->redis_down, 0, __ATOMIC_ACQ_REL))
        lg_say(WEFT_LOG_INFO, "redis reachable again at %s", ST(w->st, where));
}

/* Called by whichever connection found the store's epoch gone or changed. */
static void store_lost(void *ud, const rs_loss *l)
{
    nd_node *n = ud;
    char seen[96] = "how many workflows it held is unknown (no heartbeat since the last loss)";
    int i, running = 0;
    mt_store_lost(n->metrics, l->at_ms);
    pthread_mutex_lock(&n->mu);
    for (i = 0; n->workers && i < n->nworkers; i++)
        running += n->workers[i].nleases;
    pthread_mutex_unlock(&n->mu);
    if (l->unfinished >= 0)
        snprintf(seen, sizeof seen,
                 "%lld unfinished workflow(s) were in it at the last heartbeat and are gone",
                 l->unfinished);
    lg_say(WEFT_LOG_ERROR,
           "the store lost its data: the epoch key %s %s%s (Redis restarted empty, was flushed, "
           "or is another server); %s; this daemon was running %d of their task(s); a new "
           "epoch %s is written (loss %lld since this daemon started)",
           l->key, l->gone ? "is gone, was " : "holds another epoch than ", l->was, seen, running,
           l->now, l->count);
}

static int worker_init(nd_node *n, worker *w, int idx, weft_error *err)
{
    st_redis_opts o = {0};
    sbx_limits lim;
    int rc;
    w->n = n;
    w->idx = idx;
    /* Each thread compiles its own copy of a definition: json-c's reference
     * counts are not atomic, so no JSON may be shared between threads. */
    if (!(w->cache = dc_new())) return wu_err(err, WEFT_ENOMEM, "out of memory");
    o.rs.url = n->cfg->redis_url;
    o.rs.prefix = n->cfg->key_prefix;
    o.rs.retention_ms = n->cfg->retention_ms;
    o.rs.early_steps = idx >= 0; /* workers: steps go out while the next tasks run */
    o.rs.home_rounds = idx >= 0; /* and a cluster's nodes take turns in their rounds */
    o.rs.epoch = n->epoch;
    o.rs.partitions = n->cfg->partitions;
    o.rs.queue_shards = n->cfg->queue_shards;
    o.defs = &n->defs;
    o.cache = w->cache;
    o.ps = n->payloads;
    rc = st_redis_open(&o, &w->st, err);
    if (rc && !w->st) return rc;
    if (rc == WEFT_EINVAL) { /* not a Redis this weftd can use (a cluster node): no retry */
        st_free(w->st);
        w->st = NULL;
        return rc;
    }
    if (rc) lg_say(WEFT_LOG_WARN, "%s (will retry)", err->msg);
    lim.mem_bytes = (size_t)n->cfg->lua_memory;
    lim.instructions = (uint64_t)n->cfg->lua_instructions;
    lim.time_ms = (uint64_t)n->cfg->lua_time_ms;
    lim.result_bytes = (size_t)n->cfg->lua_result;
    if (!(w->sandbox = sbx_new(&lim, err))) return err->code ? err->code : WEFT_ENOMEM;
    nd_services_init(w);
    w->dec.defs = &n->defs;
    w->dec.svc = &w->svc;
    w->dec.now = wu_now_ms;
    w->dec.domain_active = op_domain_active;
    w->op.domains.st = w->st;
    w->dec.domain_ud = &w->op.domains;
    nd_hooks_init(w);
    w->op.st = w->st;
    w->op.defs = &n->defs;
    w->op.dec = &w->dec;
    w->op.cache = w->cache;
    w->op.cascade = 1;
    w->op.lock = n->lock;
    w->op.lock_handle = n->lock_handle;
    w->op.lock_ttl_ms = n->cfg->lock_ttl_ms;
    w->op.lock_wait_ms = n->cfg->lock_wait_ms;
    w->op.command_wait_ms = n->cfg->command_wait_ms;
    w->op.sweep_ms = n->cfg->sweep_ms;
    w->op.retention_ms = n->cfg->retention_ms;
    w->op.unfenced = !n->cfg->fencing;
    w->op.hooks = &w->hooks;
    w->op.eager = nd_want_eager;
    w->op.eager_ud = w;
    w->op.lease_ms = n->cfg->lease_ms;
    return 0;
}

static void worker_fini(worker *w)
{
    int i;
    for (i = 0; i < w->nhold; i++)
        xc_free(w->hold[i].x);
    w->nhold = 0;
    st_free(w->st);
    sbx_free(w->sandbox);
    dc_free(w->cache);
}

static const weft_task_type *find_type(void *ud, const char *name)
{
    return pl_find_type(ud, name, NULL);
}

/* With domains configured, the queues served are each domain's queue of
 * each type ("<domain>:<type>"; NO_DOMAIN: the type's own). */
static int domain_queues(nd_node *n, weft_error *err)
{
    size_t i, j, k = 0, nq = n->ntypes * n->cfg->ndomains;
    char **q;
    if (!n->cfg->ndomains) return 0;
    for (i = 0; i < n->cfg->ndomains; i++) {
        if (!op_domain_ok(n->cfg->domains[i], strlen(n->cfg->domains[i])))
            return wu_err(err, WEFT_EINVAL,
                          "domains: bad domain '%s' (letters, digits, '_', '-', '.', at most 64)",
                          n->cfg->domains[i]);
    }
    if (!(q = calloc(nq + 1, sizeof *q)) || !(n->owned_types = calloc(nq + 1, sizeof *q))) {
        free(q);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    for (i = 0; i < n->cfg->ndomains; i++)
        for (j = 0; j < n->ntypes; j++) {
            const char *d = n->cfg->domains[i];
            size_t e;
            for (e = 0; e < i && strcasecmp(n->cfg->domains[e], d); e++)
                ;
            if (e < i) break; /* named twice: served once */
            if (!strcasecmp(d, "NO_DOMAIN")) {
                q[k++] = n->types[j];
                continue;
            }
            if (!(q[k] = malloc(strlen(d) + strlen(n->types[j]) + 2))) {
                free(q);
                return wu_err(err, WEFT_ENOMEM, "out of memory");
            }
            sprintf(q[k], "%s:%s", d, n->types[j]);
            n->owned_types[n->nowned++] = q[k++];
        }
    free(n->types);
    n->types = q;
    n->ntypes = k;
    return 0;
}

/* The queued types to serve: every loaded type with execute, or the configured list. */
static int pick_types(nd_node *n, weft_error *err)
{
    size_t i, j;
    if (n->cfg->ntypes) {
        n->types = calloc(n->cfg->ntypes, sizeof *n->types);
        if (!n->types) return wu_err(err, WEFT_ENOMEM, "out of memory");
        for (i = 0; i < n->cfg->ntypes; i++) {
            const weft_task_type *t = pl_find_type(n->plugins, n->cfg->types[i], NULL);
            if (!t || !t->execute)
                return wu_err(
                    err, WEFT_EINVAL,
                    "types: %s is not a queued task type of a loaded plugin (searched: %s)",
                    n->cfg->types[i], pl_searched(n->plugins));
            n->types[n->ntypes++] = n->cfg->types[i];
        }
        return domain_queues(n, err);
    }
    for (i = 0; i < pl_count(n->plugins); i++) {
        const pl_plugin *p = pl_get(n->plugins, i);
        for (j = 0; j < p->ntypes; j++) {
            char **g;
            if (!p->types[j]->execute || p->types[j]->map) continue;
            g = realloc(n->types, (n->ntypes + 1) * sizeof *g);
            if (!g) return wu_err(err, WEFT_ENOMEM, "out of memory");
            n->types = g;
            n->types[n->ntypes++] = (char *)p->types[j]->name;
        }
    }
    return domain_queues(n, err);
}

/* n->serves: the queues its workers serve, the control-flow types its
 * deciders map, then (with_external: its API hands them to workers) the
 * external types (SIMPLE), which come last so that they can be dropped. */
static int serves_list(nd_node *n, int with_external, weft_error *err)
{
    size_t p, q, m = n->ntypes, pass;
    for (p = 0; p < pl_count(n->plugins); p++)
        m += pl_get(n->plugins, p)->ntypes;
    if (!(n->serves = calloc(m + 1, sizeof *n->serves)))
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    for (q = 0; q < n->ntypes; q++)
        n->serves[n->nserves++] = n->types[q];
    for (pass = 0; pass < 2; pass++)
        for (p = 0; p < pl_count(n->plugins); p++) {
            const pl_plugin *pp = pl_get(n->plugins, p);
            for (q = 0; q < pp->ntypes; q++)
                if (pass == 0 ? pp->types[q]->map != NULL
                              : with_external && (pp->types[q]->flags & WEFT_TASK_EXTERNAL))
                    n->serves[n->nserves++] = pp->types[q]->name;
        }
    return 0;
}

int nd_new(const cf_config *cfg, nd_node **out, weft_error *err)
{
    nd_node *n = calloc(1, sizeof *n);
    const char *path = cfg->plugin_path;
    char *dflt = NULL, host[200] = "weftd";
    size_t i;
    int rc;
    *out = NULL;
    if (!n) return wu_err(err, WEFT_ENOMEM, "out of memory");
    pthread_mutex_init(&n->mu, NULL);
    n->cfg = cfg;
    if (!(n->metrics = mt_new()) || !(n->epoch = rs_epoch_new(store_lost, n))) {
        nd_free(n);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    if (cfg->log_level) {
        weft_error lerr = {0};
        lg_set_level_name(cfg->log_level, &lerr); /* config.c checked the value */
    }
    lg_set_json(cfg->log_format && !strcmp(cfg->log_format, "json"));
    gethostname(host, sizeof host - 1);
    if (cfg->daemon_id)
        snprintf(n->id, sizeof n->id, "%s", cfg->daemon_id);
    else
        snprintf(n->id, sizeof n->id, "%s-%d", host, (int)getpid());
    lg_set_node(n->id); /* every line from here on in the daemon's format */
    n->plugins = pl_new(host_table());
    if (!n->plugins) {
        nd_free(n);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    host_set_log(NULL, NULL, n->plugins); /* names plugins' lines, before their init */
    if (!path || !*path) path = dflt = pl_default_path();
    pl_set_config(n->plugins, cfg->plugins); /* { <plugin name>: { ... } } for types' init */
    pl_load_path(n->plugins, path ? path : "");
    free(dflt);
    for (i = 0; i < pl_failure_count(n->plugins); i++)
        lg_say(WEFT_LOG_WARN, "%s", pl_failure(n->plugins, i));
    if (!*pl_type_names(n->plugins)) {
        /* a daemon that serves nothing would take workflows and run none */
        rc = wu_err(err, WEFT_EINVAL,
                    "no task type loaded: no plugin in the directories searched (%s) provides "
                    "one%s; point plugin_path (--plugin-path, WEFT_PLUGIN_PATH) at weft's plugin "
                    "directory (%s when installed)",
                    pl_searched(n->plugins),
                    pl_failure_count(n->plugins) ? ", and some failed to load (above)" : "",
                    WEFT_PLUGIN_DIR);
        nd_free(n);
        return rc;
    }
    n->defs.find_type = find_type;
    n->defs.ud = n->plugins;
    n->defs.searched = pl_searched(n->plugins);
    n->defs.known = pl_type_names(n->plugins);
    n->defs.host = host_table();
    n->defs.allow_unknown = 1;
    cf_limits(cfg, &n->limits);
    n->defs.limits = &n->limits;
    {
        char dir[4096];
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/weft-payloads", tmp && *tmp ? tmp : "/tmp");
        if ((rc = ps_dir_open(cfg->payload_dir ? cfg->payload_dir : dir, (size_t)cfg->payload_soft,
                              (size_t)cfg->payload_hard, &n->payloads, err))) {
            nd_free(n);
            return rc;
        }
    }
    if ((rc = pick_types(n, err)) || (rc = serves_list(n, cfg->api, err))) {
        nd_free(n);
        return rc;
    }
    if (!n->nserves) {
        /* external types alone, and no API to hand them out */
        rc = wu_err(err, WEFT_EINVAL,
                    "nothing to serve: the plugins loaded (%s) have only external task types "
                    "(%s), and without the REST API nothing hands them to workers",
                    pl_searched(n->plugins), pl_type_names(n->plugins));
        nd_free(n);
        return rc;
    }
    if (cfg->lock && strcmp(cfg->lock, "none")) {
        json_object *lc = NULL;
        n->lock = pl_find_lock(n->plugins, cfg->lock);
        if (!n->lock) {
            rc = wu_err(err, WEFT_EINVAL, "lock '%s': no plugin provides it (searched: %s)",
                        cfg->lock, pl_searched(n->plugins));
            nd_free(n);
            return rc;
        }
        if (cfg->plugins && json_object_object_get_ex(cfg->plugins, cfg->lock, &lc))
            json_object_get(lc);
        else if (!strcmp(cfg->lock, "redis")) {
            /* by default the redis lock lives where the workflows do */
            lc = json_object_new_object();
            json_object_object_add(lc, "url", json_object_new_string(cfg->redis_url));
            json_object_object_add(lc, "prefix", json_object_new_string(cfg->key_prefix));
        }
        n->lock_handle = n->lock->open(host_table(), lc, err);
        json_object_put(lc);
        if (!n->lock_handle) {
            wu_err_prefix(err, "lock '%s': ", cfg->lock);
            rc = err->code ? err->code : WEFT_EINVAL;
            nd_free(n);
            return rc;
        }
    }
    *out = n;
    return 0;
}

/* The REST API, sharing the node's plugins, lock and metrics. */
static int start_api(nd_node *n, weft_error *err)
{
    ap_config *a = &n->api_cfg;
    const cf_config *cfg = n->cfg;
    memset(a, 0, sizeof *a);
    a->listen = cfg->api_listen;
    a->token = cfg->api_token;
    a->hosts = (const char *const *)cfg->api_hosts;
    a->nhosts = cfg->napi_hosts;
    a->body_limit = cfg->api_body_limit;
    a->threads = cfg->api_threads;
    a->max_conns = cfg->api_max_connections;
    a->max_conns_per_ip = cfg->api_max_connections_per_ip;
    a->request_timeout_ms = cfg->api_request_timeout_ms;
    a->idle_timeout_ms = cfg->api_idle_timeout_ms;
    a->store.url = cfg->redis_url;
    a->store.prefix = cfg->key_prefix;
    a->store.retention_ms = cfg->retention_ms;
    a->store.partitions = cfg->partitions;
    a->store.queue_shards = cfg->queue_shards;
    a->store.epoch = n->epoch;
    a->defs = &n->defs;
    a->lock = n->lock;
    a->lock_handle = n->lock_handle;
    a->lock_ttl_ms = cfg->lock_ttl_ms;
    a->lock_wait_ms = cfg->lock_wait_ms;
    a->command_wait_ms = cfg->command_wait_ms;
    a->sweep_ms = cfg->sweep_ms;
    a->fencing = cfg->fencing;
    a->max_reaps = cfg->max_reaps;
    a->unpolled_ms = cfg->queue_unpolled_ms;
    a->metrics = n->metrics;
    a->payloads = n->payloads;
    a->types = (const char *const *)n->types;
    a->ntypes = n->ntypes;
    a->serves = n->serves;
    a->nserves = n->nserves;
    a->ready = &n->ready;
    a->log = lg_hook;
    a->log_ud = NULL;
    return ap_start(a, &n->api, err);
}

void nd_stop(nd_node *n)
{
    n->stopping = 1;
}

int nd_run(nd_node *n)
{
    weft_error err = {0};
    int i, rc = 0;
    int64_t deadline;
    n->nworkers = n->cfg->workers > 0 ? n->cfg->workers : 1;
    n->workers = calloc((size_t)n->nworkers, sizeof *n->workers);
    if (!n->workers) return WEFT_ENOMEM;
    if ((rc = worker_init(n, &n->keeper, -1, &err))) {
        lg_say(WEFT_LOG_ERROR, "%s", err.msg);
        return rc;
    }
    for (i = 0; i < n->nworkers; i++)
        if ((rc = worker_init(n, &n->workers[i], i, &err))) {
            lg_say(WEFT_LOG_ERROR, "%s", err.msg);
            return rc;
        }
    if (n->cfg->api && (rc = start_api(n, &err))) {
        /* several daemons on one host with the defaults: the first serves the API */
        if (rc != WEFT_EEXIST || strcmp(n->cfg->api_listen, CF_API_LISTEN_DEFAULT)) {
            lg_say(WEFT_LOG_ERROR, "%s", err.msg);
            return rc;
        }
        lg_say(WEFT_LOG_WARN,
               "%s (another weftd?): running without the REST API; set api_listen to serve it",
               err.msg);
        /* no API here hands external tasks to workers: they go (they come last) */
        while (n->nserves > 0 && pl_find_type(n->plugins, n->serves[n->nserves - 1], NULL)->flags &
                                     WEFT_TASK_EXTERNAL)
            n->nserves--;
        rc = 0;
    }
    if (!n->nserves) {
        lg_say(WEFT_LOG_ERROR, "nothing to serve: its plugins have only external task types, "
                               "and without the REST API nothing hands them to workers");
        return WEFT_EINVAL;
    }
    /* "started" means the store knows what this daemon serves: a start right
     * after it finds its types served (served.h) */
    if (nd_beat(&n->keeper, &err))
        lg_say(WEFT_LOG_WARN, "no heartbeat yet: %s (the keeper retries)", err.msg);
    {
        char types[1024] = "";
        size_t t, used = 0;
        for (t = 0; t < n->nserves && used < sizeof types - 130; t++)
            used += (size_t)snprintf(types + used, sizeof types - used, "%s%s", t ? "," : "",
                                     n->serves[t]);
        /* rs_url: the password, if any, masked */
        lg_say(WEFT_LOG_INFO,
               "started: redis=%s prefix=%s workers=%d lock=%s serves=%s api=%s plugins=%s",
               ST(n->keeper.st, where), n->cfg->key_prefix, n->nworkers,
               n->lock ? n->cfg->lock : "none", types, n->api ? ap_address(n->api) : "off",
               pl_searched(n->plugins));
    }
    __atomic_store_n(&n->running, n->nworkers, __ATOMIC_RELEASE);
    for (i = 0; i < n->nworkers; i++)
        if (pthread_create(&n->workers[i].thread, NULL, nd_worker_main, &n->workers[i]) == 0)
            n->workers[i].started = 1;
        else
            __atomic_sub_fetch(&n->running, 1, __ATOMIC_ACQ_REL);
    if (pthread_create(&n->keeper.thread, NULL, nd_keeper_main, &n->keeper) == 0)
        n->keeper.started = 1;
    __atomic_store_n(&n->ready, __atomic_load_n(&n->running, __ATOMIC_ACQUIRE) > 0,
                     __ATOMIC_RELEASE);
    while (!n->stopping)
        nd_sleep_ms(50);
    __atomic_store_n(&n->ready, 0, __ATOMIC_RELEASE); /* /ready: 503 from now on */
    lg_say(WEFT_LOG_INFO, "stopping: no new work; %lld ms for running tasks",
           (long long)n->cfg->grace_ms);
    /* no new requests; long polls and event streams end */
    ap_stop(n->api);
    n->api = NULL;
    deadline = wu_mono_ms() + n->cfg->grace_ms;
    while (__atomic_load_n(&n->running, __ATOMIC_ACQUIRE) > 0 && wu_mono_ms() < deadline)
        nd_sleep_ms(20);
    if (__atomic_load_n(&n->running, __ATOMIC_ACQUIRE) > 0) {
        /* their leases expire and other nodes take the tasks over */
        lg_say(WEFT_LOG_WARN, "grace period over with tasks still running: leaving them to "
                              "lease expiry");
        return 1;
    }
    for (i = 0; i < n->nworkers; i++)
        if (n->workers[i].started) pthread_join(n->workers[i].thread, NULL);
    if (n->keeper.started) pthread_join(n->keeper.thread, NULL);
    lg_say(WEFT_LOG_INFO, "stopped");
    return 0;
}

void nd_free(nd_node *n)
{
    int i;
    if (!n) return;
    for (i = 0; i < n->nworkers; i++)
        worker_fini(&n->workers[i]);
    ap_stop(n->api);
    n->api = NULL;
    free(n->workers);
    worker_fini(&n->keeper);
    if (n->lock && n->lock_handle) n->lock->close(n->lock_handle);
    ps_close(n->payloads);
    free(n->types);
    free(n->serves);
    while (n->nowned)
        free(n->owned_types[--n->nowned]);
    free(n->owned_types);
    pl_free(n->plugins); /* the plugins' fini may still log, in our format */
    host_set_log(NULL, NULL, NULL);
    mt_free(n->metrics);
    rs_epoch_free(n->epoch);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

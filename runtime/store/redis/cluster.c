/*
 * The Redis store on a Redis Cluster (conn.c enters this when its seed says
 * cluster_enabled:1). The slot map comes from CLUSTER SLOTS (slots.c); each
 * primary gets a connection of its own, opened (AUTH, SCRIPT LOAD) the first
 * time a command goes to it. A pipeline is split per node by the slot of
 * each command's key: every node's commands are written before any reply is
 * read, so a pipeline still costs one round trip (the slowest node's), and
 * the replies are put back in the caller's order.
 *
 * Redirections are followed here, a bounded number of times (CL_TRIES):
 * MOVED updates the slot and has the whole map read again before the next
 * try; ASK sends ASKING and the command to the node named; NOSCRIPT loads
 * the script on that node (a replica promoted after a failover has none)
 * and sends the command again; TRYAGAIN and CLUSTERDOWN, and a node that
 * cannot be reached, wait 10, 20, 40 ... ms before the next try. What is
 * left after the last try is the caller's, as on a single Redis: an error
 * reply, or WEFT_EIO for a connection lost while its commands were out
 * (they may have run; each caller's commands are safe to send again).
 */
#include "store/redis/internal.h"
#include "store/redis/slots.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CL_TRIES 6
#define CL_BACKOFF_MS 10
#define CL_CALM_MS 10000 /* no steps in flight this long after a redirection */
/* rounds a worker keeps to one node (rs_cl_home): the tasks it took at once
 * (eager) are of that node's workflows, so its next rounds stay there too */
#define CL_HOME_ROUNDS 4

struct rs_cluster {
    rc_map map;         /* slot -> node; nodes only grow while a pipeline runs */
    redisContext **ctx; /* per map node, NULL until a command goes to it */
    unsigned *serial;   /* per map node: its connection's, one of its own each */
    unsigned opened;    /* connections opened */
    size_t nctx;
    int stale;     /* read the map again before the next command */
    int64_t moved; /* when a command was last redirected (MOVED, ASK, TRYAGAIN) */
    int *serving;  /* the nodes that serve slots (rs_cl_home), in map order */
    size_t nserving;
    int serving_ok; /* serving is that of the map as it is */
    unsigned turn;  /* rs_cl_home's */
};

static const rs_cmd asking = {.argc = 1, .argv = (const char *[]){"ASKING"}, .len = (size_t[]){6}};

/* ---- nodes ---- */

static void node_shown(const rc_node *v, char *buf, size_t n)
{
    snprintf(buf, n, strchr(v->host, ':') ? "[%s]:%d" : "%s:%d", v->host, v->port);
}

/* Room for a context per node of the map. */
static int ctx_fit(struct rs_cluster *cl)
{
    redisContext **c;
    unsigned *s;
    if (cl->nctx >= cl->map.nnodes) return 0;
    if (!(s = realloc(cl->serial, cl->map.nnodes * sizeof *s))) return -1;
    cl->serial = s;
    if (!(c = realloc(cl->ctx, cl->map.nnodes * sizeof *c))) return -1;
    memset(c + cl->nctx, 0, (cl->map.nnodes - cl->nctx) * sizeof *c);
    cl->ctx = c;
    cl->nctx = cl->map.nnodes;
    return 0;
}

static void node_close(struct rs_cluster *cl, size_t i)
{
    if (i < cl->nctx && cl->ctx[i]) redisFree(cl->ctx[i]);
    if (i < cl->nctx) cl->ctx[i] = NULL;
}

/* The connection to node i, opened (and greeted: AUTH, the scripts) when
 * there is none: NULL when it cannot be. */
static redisContext *node_conn(rs *r, size_t i, weft_error *err)
{
    struct rs_cluster *cl = r->cl;
    const rc_node *v = &cl->map.nodes[i];
    char shown[RC_HOST_MAX + 16];
    redisContext *c;
    if (ctx_fit(cl)) {
        rs_oom(err);
        return NULL;
    }
    if (cl->ctx[i]) return cl->ctx[i];
    node_shown(v, shown, sizeof shown);
    if (!(c = rs_dial(r, v->host, v->port, NULL, shown, err))) return NULL;
    if (rs_greet(r, c, shown, 0, NULL, err)) {
        redisFree(c);
        return NULL;
    }
    cl->serial[i] = ++cl->opened;
    return cl->ctx[i] = c;
}

/* "MOVED <slot> <host>:<port>" or "ASK ...": the node named (added to the
 * map when new), or -1. */
static int redirect_node(struct rs_cluster *cl, const redisReply *x, int *slot)
{
    const char *host;
    size_t hlen;
    int i, port;
    if (rc_redirect_parse(x->str, slot, &host, &hlen, &port) != 0) return -1;
    if ((i = rc_map_node_at(&cl->map, host, hlen, port)) < 0) return -1;
    if (ctx_fit(cl)) return -1;
    return i;
}

/* ---- the map ---- */

/* The map from CLUSTER SLOTS on c: 0, or an error. Connections to nodes
 * still in it are kept, the others closed. */
static int map_from(rs *r, redisContext *c, const char *shown, weft_error *err)
{
    struct rs_cluster *cl = r->cl;
    rs_cmd cmd = {0};
    redisReply *x = NULL;
    rc_map m = {0};
    redisContext **ctx = NULL;
    unsigned *serial = NULL;
    size_t i, j;
    int rc;
    rs_cmd_add(&cmd, "CLUSTER");
    rs_cmd_add(&cmd, "SLOTS");
    if (cmd.oom) return rs_oom(err);
    if (!rs_ctx_exchange(r, c, &cmd, 1, &x)) {
        rs_cmd_free(&cmd);
        if (x) freeReplyObject(x);
        return wu_err(err, WEFT_EIO, "%s: CLUSTER SLOTS: %s", shown,
                      c->err ? c->errstr : "connection lost");
    }
    rs_cmd_free(&cmd);
    if (rs_is_err(x))
        rc = wu_err(err, WEFT_EIO, "%s: CLUSTER SLOTS: %s", shown, x->str);
    else
        rc = rc_map_read(&m, x, err);
    freeReplyObject(x);
    if (rc) return rc;
    if (m.nnodes &&
        (!(ctx = calloc(m.nnodes, sizeof *ctx)) || !(serial = calloc(m.nnodes, sizeof *serial)))) {
        free(ctx);
        rc_map_free(&m);
        return rs_oom(err);
    }
    for (j = 0; j < cl->nctx; j++) {
        const rc_node *o = &cl->map.nodes[j];
        for (i = 0; i < m.nnodes && cl->ctx[j]; i++)
            if (!ctx[i] && m.nodes[i].port == o->port && !strcmp(m.nodes[i].host, o->host)) {
                ctx[i] = cl->ctx[j];
                serial[i] = cl->serial[j];
                cl->ctx[j] = NULL;
            }
        node_close(cl, j);
    }
    free(cl->ctx);
    free(cl->serial);
    rc_map_free(&cl->map);
    cl->map = m;
    cl->ctx = ctx;
    cl->serial = serial;
    cl->nctx = m.nnodes;
    cl->stale = 0;
    cl->serving_ok = 0;
    return 0;
}

/* Read the map again: from a node connected, else any node known, else the
 * seeds in turn. One round trip (more when nodes are gone). */
static int map_refresh(rs *r, weft_error *err)
{
    struct rs_cluster *cl = r->cl;
    char shown[RC_HOST_MAX + 16];
    size_t i, k, n = cl->map.nnodes;
    int rc = WEFT_EIO, pass;
    if (r->fly) rs_flight_read(r, r->fly); /* its replies come first on its nodes */
    wu_err(err, WEFT_EIO, "%s: no node of the cluster answers", r->url.shown);
    for (pass = 0; pass < 2; pass++)
        for (i = 0; i < n; i++) {
            redisContext *c = i < cl->nctx ? cl->ctx[i] : NULL;
            if (pass == 0 ? !c : c != NULL) continue;
            if (!c && !(c = node_conn(r, i, err))) continue;
            node_shown(&cl->map.nodes[i], shown, sizeof shown);
            if ((rc = map_from(r, c, shown, err)) == 0) return 0;
            if (c->err) node_close(cl, i);
        }
    for (k = 0; k < r->nseeds; k++) {
        const ru_url *u = &r->seeds[(r->seed + k) % r->nseeds];
        redisContext *c = rs_dial(r, u->host, u->port, u->path, u->shown, err);
        if (!c) continue;
        if ((rc = rs_greet(r, c, u->shown, 0, NULL, err)) == 0) rc = map_from(r, c, u->shown, err);
        redisFree(c);
        if (rc == 0) return 0;
    }
    return rc;
}

static unsigned handles; /* rs_cl_start's, counted */

/* Enter cluster mode on seed, the connection conn.c just greeted (taken). */
int rs_cl_start(rs *r, redisContext *seed, weft_error *err)
{
    int rc;
    if (!r->cl && !(r->cl = calloc(1, sizeof *r->cl))) {
        redisFree(seed);
        return rs_oom(err);
    }
    r->cl->moved = wu_mono_ms() - CL_CALM_MS;
    /* handles start their turns at different nodes */
    r->cl->turn = __atomic_fetch_add(&handles, 1, __ATOMIC_RELAXED) * CL_HOME_ROUNDS;
    rc = map_from(r, seed, r->url.shown, err);
    redisFree(seed);
    if (rc) {
        rs_cl_free(r); /* the next call connects again from the seeds */
        return rc;
    }
    r->broken = 0;
    return 0;
}

int rs_cl_ensure(rs *r, weft_error *err)
{
    int rc;
    if (!r->cl->stale) {
        r->broken = 0;
        return 0;
    }
    if ((rc = map_refresh(r, err)) != 0) return rc;
    r->broken = 0;
    return 0;
}

/* ---- pipelines ---- */

/* Commands without a key, sent to any node. */
static int keyless(const char *cmd)
{
    static const char *const none[] = {"PING",  "INFO", "SCRIPT", "CLUSTER", "AUTH",
                                       "HELLO", "TIME", "SELECT", "ASKING"};
    size_t i;
    for (i = 0; i < sizeof none / sizeof *none; i++)
        if (!strcmp(cmd, none[i])) return 1;
    return 0;
}

/* The slot of c's key (the first one), or -1 for a command without one. */
static int cmd_slot(const rs_cmd *c)
{
    int k = 1, i;
    if (c->argc < 2 || keyless(c->argv[0])) return -1;
    if (!strcmp(c->argv[0], "EVALSHA") || !strcmp(c->argv[0], "EVAL")) {
        if (c->argc < 4 || !strcmp(c->argv[2], "0")) return -1;
        k = 3;
    } else if (!strcmp(c->argv[0], "XREAD")) {
        for (i = 1, k = -1; i + 1 < c->argc && k < 0; i++)
            if (!strcmp(c->argv[i], "STREAMS")) k = i + 1;
        if (k < 0) return -1;
    }
    return rc_key_slot(c->argv[k], c->len[k]);
}

/* The node a command goes to: its slot's, or for one without a key the
 * first node connected (else the first). -1: nobody serves the slot. */
static int route(const struct rs_cluster *cl, const rs_cmd *c)
{
    int s = cmd_slot(c);
    size_t i;
    if (s >= 0) return cl->map.slot[s];
    for (i = 0; i < cl->nctx; i++)
        if (cl->ctx[i]) return (int)i;
    return cl->map.nnodes ? 0 : -1;
}

static int is_reply(const redisReply *x, const char *what)
{
    size_t n = strlen(what);
    return rs_is_err(x) && !strncmp(x->str, what, n) && (x->str[n] == ' ' || !x->str[n]);
}

static int not_taken(const redisReply *x);

/* One try, per pipeline. */
typedef struct try_state {
    int *to;             /* node of each command */
    unsigned char *todo; /* still to send */
    unsigned char *ask;  /* send with ASKING first */
    unsigned *load;      /* per node: scripts (bits) to load first */
    size_t nload;
} try_state;

/* The scripts to load on node j before its commands, as commands in cmds[]. */
static size_t load_cmds(rs *r, unsigned bits, rs_cmd *cmds)
{
    size_t m = 0;
    int s;
    for (s = 0; s < S_COUNT; s++)
        if (bits & (1u << s)) rs_cmd_script_load(&cmds[m++], r, s);
    return m;
}

/*
 * Send the commands still to do to their nodes (all written before any
 * reply is read) and read their replies into rep[]. 0; 1 when a node could
 * not be reached (its commands were not sent: try again); WEFT_EIO when a
 * node was lost with commands out.
 */
static int try_send(rs *r, rs_cmd *cmds, size_t n, redisReply **rep, try_state *t, const char *key,
                    weft_error *err)
{
    struct rs_cluster *cl = r->cl;
    rs_cmd loads[S_COUNT];
    sigpipe_guard g;
    size_t i, j, m;
    int rc = 0, unreached = 0, lost = 0;
    char shown[RC_HOST_MAX + 16];

    for (j = 0; j < cl->map.nnodes; j++) {
        int any = 0, ok = 1;
        redisContext *c;
        for (i = 0; i < n && !any; i++)
            any = t->todo[i] && t->to[i] == (int)j;
        if (!any) continue;
        if (!(c = node_conn(r, j, err))) {
            if (err->code == WEFT_ENOMEM) {
                rs_cl_drop(r); /* commands may sit in other nodes' buffers */
                return WEFT_ENOMEM;
            }
            unreached = 1;
            for (i = 0; i < n; i++)
                if (t->todo[i] && t->to[i] == (int)j) t->to[i] = -2; /* not sent */
            cl->stale = 1;
            continue;
        }
        memset(loads, 0, sizeof loads);
        m = load_cmds(r, j < t->nload ? t->load[j] : 0, loads);
        ok = rs_append_cmds(r, c, loads, m) == REDIS_OK;
        rs_cmds_free(loads, m);
        for (i = 0; i < n && ok; i++)
            if (t->todo[i] && t->to[i] == (int)j)
                ok = (!t->ask[i] || rs_append_cmds(r, c, &asking, 1) == REDIS_OK) &&
                     rs_append_cmds(r, c, &cmds[i], 1) == REDIS_OK;
        if (!ok) {
            rs_cl_drop(r);
            return rs_oom(err);
        }
        rs_long_wait(r, c, 1);
    }
    rs_sigpipe_block(r, &g);
    for (j = 0; j < cl->nctx; j++)
        if (cl->ctx[j] && !rs_write_out(cl->ctx[j])) lost = 1;
    /* steps in flight: their replies come first on their nodes */
    if (r->fly) rs_flight_read(r, r->fly);
    /* read every node's replies, also after one failed: the others stay in step */
    for (j = 0; j < cl->map.nnodes; j++) {
        redisContext *c = j < cl->nctx ? cl->ctx[j] : NULL;
        int ok = 1, any = 0;
        void *x;
        for (i = 0; i < n && !any; i++)
            any = t->todo[i] && t->to[i] == (int)j;
        if (any && !c && !rc) { /* lost while the flight's replies were read */
            node_shown(&cl->map.nodes[j], shown, sizeof shown);
            rc = wu_err(err, WEFT_EIO, "%s: %s: connection lost", shown, key);
        }
        if (!any || !c) continue;
        for (m = 0; j < t->nload && m < S_COUNT; m++)
            if ((t->load[j] & (1u << m)) && ok) {
                x = NULL;
                ok = redisGetReply(c, &x) == REDIS_OK;
                if (x) freeReplyObject(x);
            }
        for (i = 0; i < n && ok; i++) {
            if (!t->todo[i] || t->to[i] != (int)j) continue;
            if (t->ask[i]) {
                x = NULL;
                ok = redisGetReply(c, &x) == REDIS_OK;
                if (x) freeReplyObject(x);
            }
            x = NULL;
            if (ok) ok = redisGetReply(c, &x) == REDIS_OK;
            rep[i] = x;
        }
        rs_long_wait(r, c, 0);
        if (!ok) {
            if (!rc) {
                node_shown(&cl->map.nodes[j], shown, sizeof shown);
                if (c->err == REDIS_ERR_IO && !strcmp(c->errstr, strerror(EAGAIN)))
                    rc = wu_err(err, WEFT_EIO, "%s: %s: no answer within %d ms", shown, key,
                                r->timeout_ms + r->long_ms);
                else
                    rc = wu_err(err, WEFT_EIO, "%s: %s: %s", shown, key,
                                c->err ? c->errstr : "connection lost");
            }
            node_close(cl, j);
            cl->stale = 1;
        }
    }
    rs_sigpipe_restore(&g);
    if (lost && !rc) rc = wu_err(err, WEFT_EIO, "%s: %s: connection lost", r->url.shown, key);
    if (rc) r->broken = 1;
    return rc ? rc : unreached;
}

/* Sleep before try k (1, 2 ...). */
static void backoff(int k)
{
    long ms = (long)CL_BACKOFF_MS << (k - 1);
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

static int pipe_once(rs *r, rs_cmd *cmds, size_t n, redisReply **rep, const char *key,
                     weft_error *err)
{
    struct rs_cluster *cl = r->cl;
    try_state t = {0};
    size_t i, left = n;
    int rc = 0, k, wait = 0;

    for (i = 0; i < n; i++)
        if (cmds[i].oom) return rs_oom(err);
    t.to = calloc(n + 1, sizeof *t.to);
    t.todo = calloc(n + 1, 1);
    t.ask = calloc(n + 1, 1);
    if (!t.to || !t.todo || !t.ask) {
        rc = rs_oom(err);
        goto out;
    }
    memset(t.todo, 1, n);
    for (k = 0; left && k < CL_TRIES; k++) {
        int last = k + 1 == CL_TRIES;
        if (wait) backoff(k);
        wait = 0;
        if (cl->stale) {
            if ((rc = map_refresh(r, err)) != 0) {
                if (last) break;
                wait = 1;
                continue;
            }
            memset(t.ask, 0, n); /* the new map says where */
        }
        rc = 0;
        for (i = 0; i < n; i++)
            if (t.todo[i] && !t.ask[i]) t.to[i] = route(cl, &cmds[i]);
        free(t.load);
        t.nload = cl->map.nnodes;
        if (!(t.load = calloc(t.nload + 1, sizeof *t.load))) {
            rc = rs_oom(err);
            break;
        }
        for (i = 0; i < n; i++) {
            int s;
            if (t.todo[i] && rep[i] && rs_is_noscript(rep[i]) &&
                (s = rs_script_of(r, &cmds[i])) >= 0 && t.to[i] >= 0)
                t.load[t.to[i]] |= 1u << s;
            if (t.todo[i] && rep[i]) {
                freeReplyObject(rep[i]);
                rep[i] = NULL;
            }
        }
        if ((rc = try_send(r, cmds, n, rep, &t, key, err)) < 0) break;
        if (rc == 1) wait = 1;
        rc = 0;
        for (i = left = 0; i < n; i++) {
            redisReply *x = rep[i];
            int slot, j;
            if (!t.todo[i]) continue;
            if (t.to[i] < 0) { /* not sent: its node is unreachable, or unknown */
                left++;
                wait = 1;
                cl->stale = 1; /* the map may know better by now */
                continue;
            }
            if (not_taken(x)) cl->moved = wu_mono_ms();
            if (is_reply(x, "MOVED") && (j = redirect_node(cl, x, &slot)) >= 0) {
                cl->map.slot[slot] = (int16_t)j;
                cl->serving_ok = 0;
                cl->stale = 1;
                t.ask[i] = 0;
                /* moved again after the map was read: the node it was read
                 * from had not heard yet (a reshard under way); give it time */
                if (k > 0) wait = 1;
            } else if (is_reply(x, "ASK") && (j = redirect_node(cl, x, &slot)) >= 0) {
                t.to[i] = j;
                t.ask[i] = 1;
            } else if (is_reply(x, "TRYAGAIN") || is_reply(x, "CLUSTERDOWN")) {
                wait = 1;
            } else if (!(rs_is_noscript(x) && rs_script_of(r, &cmds[i]) >= 0)) {
                t.todo[i] = 0; /* answered */
                continue;
            }
            left++;
        }
        if (!left) break;
    }
    if (!rc && left) {
        /* tries used up: a command never sent says why; the others keep their last reply */
        for (i = 0; i < n && !rc; i++)
            if (t.todo[i] && !rep[i])
                rc = wu_err(err, WEFT_EIO,
                            "%s: %s: no node of the cluster took the command (slot %d; a "
                            "primary lost without a replica leaves its slots to nobody)",
                            r->url.shown, key, cmd_slot(&cmds[i]));
    }
out:
    free(t.to);
    free(t.todo);
    free(t.ask);
    free(t.load);
    return rc;
}

/* Whether command j must come before command i (rs_cmd.wave, .group). */
static int before(const rs_cmd *j, const rs_cmd *i)
{
    return j->wave < i->wave && j->group >= 0 && i->group >= 0 &&
           (!j->group || !i->group || j->group == i->group);
}

/* A command the cluster never took (sent as often as it could be). */
static int not_taken(const redisReply *x)
{
    return is_reply(x, "MOVED") || is_reply(x, "ASK") || is_reply(x, "TRYAGAIN") ||
           is_reply(x, "CLUSTERDOWN");
}

/*
 * A pipeline in exchanges: each sends, side by side to their nodes, every
 * command whose predecessors (before()) have been answered or go to its own
 * node ahead of it in the same exchange, where that node runs them in order
 * (a save's steps and trim, where they share its node, go together).
 */
int rs_cl_pipe(rs *r, rs_cmd *cmds, size_t n, redisReply **rep, const char *key, weft_error *err)
{
    struct rs_cluster *cl = r->cl;
    rs_cmd *sub;
    redisReply **subrep;
    size_t *idx, *by, *at, i, j, k, m, left = n, ngroups = 1;
    int *to, top = 0, low = 0, rc = 0;
    unsigned char *st; /* 0: to send, 1: in this exchange, 2: answered */
    for (i = 0; i < n; i++) {
        if (cmds[i].wave > top) top = cmds[i].wave;
        if (cmds[i].wave < low) low = cmds[i].wave;
        if (cmds[i].group > 0 && (size_t)cmds[i].group >= ngroups)
            ngroups = (size_t)cmds[i].group + 1;
    }
    if (low == top) return pipe_once(r, cmds, n, rep, key, err);
    sub = malloc(n * sizeof *sub);
    subrep = calloc(n, sizeof *subrep);
    idx = malloc(n * sizeof *idx);
    to = malloc(n * sizeof *to);
    st = calloc(n, 1);
    by = malloc(n * sizeof *by);          /* the commands by group, in order */
    at = calloc(ngroups + 1, sizeof *at); /* where each group starts in by */
    if (!sub || !subrep || !idx || !to || !st || !by || !at) rc = rs_oom(err);
    for (i = 0; i < n && !rc; i++)
        at[(cmds[i].group > 0 ? (size_t)cmds[i].group : 0) + 1]++;
    for (k = 1; k <= ngroups && !rc; k++)
        at[k] += at[k - 1];
    for (i = 0; i < n && !rc; i++) {
        size_t g = cmds[i].group > 0 ? (size_t)cmds[i].group : 0;
        by[at[g]++] = i;
    }
    for (k = ngroups; k > 0 && !rc; k--) /* back to the starts */
        at[k] = at[k - 1];
    if (!rc) at[0] = 0;
    while (left && !rc) {
        /* where each goes, by the map as it is now (an exchange's MOVED may
         * have changed it) */
        if (cl->stale) {
            weft_error later = {0}; /* pipe_once tries again, and says why */
            map_refresh(r, &later);
        }
        for (i = 0; i < n; i++)
            if (st[i] == 0) to[i] = route(cl, &cmds[i]);
        for (i = m = 0; i < n; i++) {
            size_t g = cmds[i].group > 0 ? (size_t)cmds[i].group : 0, pass;
            int ok = st[i] == 0;
            /* its predecessors: of its group and of group 0; of every group
             * for a command of group 0 */
            for (pass = 0; pass < 2 && ok; pass++) {
                size_t from = g && pass ? at[0] : at[pass ? 0 : g], end;
                if (!g)
                    from = 0, end = n, pass = 1;
                else
                    end = pass ? at[1] : at[g + 1];
                for (k = from; k < end && ok; k++) {
                    j = g ? by[k] : k;
                    if (st[j] != 2 && before(&cmds[j], &cmds[i]))
                        ok = st[j] == 1 && j < i && to[j] == to[i] && to[i] >= 0;
                }
            }
            if (!ok) continue;
            st[i] = 1;
            sub[m] = cmds[i]; /* borrowed: pipe_once neither frees nor changes it */
            idx[m++] = i;
        }
        if (!m) { /* (cannot be: the lowest wave left always goes) */
            rc = wu_err(err, WEFT_EIO, "%s: %s: pipeline order", r->url.shown, key);
            break;
        }
        memset(subrep, 0, m * sizeof *subrep);
        rc = pipe_once(r, sub, m, subrep, key, err);
        for (i = 0; i < m; i++) {
            rep[idx[i]] = subrep[i];
            st[idx[i]] = 2;
        }
        left -= m;
        /* a command the cluster never took: those after it are not sent */
        for (i = 0; i < m && !rc; i++)
            if (not_taken(subrep[i]))
                for (j = 0; j < n && !rc; j++)
                    if (st[j] == 0 && before(&cmds[idx[i]], &cmds[j]))
                        rc = wu_err(err, WEFT_EIO, "%s: %s: %s", r->url.shown, key, subrep[i]->str);
    }
    free(sub);
    free(subrep);
    free(idx);
    free(to);
    free(st);
    free(by);
    free(at);
    return rc;
}

/* One command and its reply on c (after ASKING when ask): NULL when c failed. */
static redisReply *command_on(redisContext *c, const char *cmd, size_t len, int ask)
{
    void *x = NULL;
    if (ask) {
        if (redisAppendCommand(c, "ASKING") != REDIS_OK || redisGetReply(c, &x) != REDIS_OK)
            return NULL;
        freeReplyObject(x);
        x = NULL;
    }
    if (redisAppendFormattedCommand(c, cmd, len) != REDIS_OK || redisGetReply(c, &x) != REDIS_OK)
        return NULL;
    return x;
}

/* rs_command on a cluster: sent to any node, and on to the node a MOVED or
 * ASK names. One round trip, more when redirected. */
int rs_cl_command(rs *r, const char *fmt, va_list ap, weft_error *err)
{
    struct rs_cluster *cl = r->cl;
    char *cmd = NULL;
    int len = redisvFormatCommand(&cmd, fmt, ap), k, node, ask = 0, rc;
    if (len < 0) return rs_oom(err);
    if (r->fly) rs_flight_land(r); /* its replies come first on its nodes (the map may change) */
    node = route(cl, &asking);
    rc = wu_err(err, WEFT_EIO, "%s: command: redirected %d times", r->url.shown, CL_TRIES);
    for (k = 0; k < CL_TRIES && node >= 0; k++) {
        redisContext *c = node_conn(r, (size_t)node, err);
        redisReply *x;
        int slot;
        if (!c) {
            rc = err->code;
            break;
        }
        if (!(x = command_on(c, cmd, (size_t)len, ask))) {
            node_close(cl, (size_t)node);
            cl->stale = 1;
            rc = wu_err(err, WEFT_EIO, "%s: command: connection lost", r->url.shown);
            break;
        }
        ask = is_reply(x, "ASK");
        if ((ask || is_reply(x, "MOVED")) && (node = redirect_node(cl, x, &slot)) >= 0) {
            freeReplyObject(x);
            continue;
        }
        rc = rs_is_err(x) ? rs_reply_err(r, x, "command", err) : 0;
        freeReplyObject(x);
        break;
    }
    free(cmd);
    return rc;
}

/* ---- steps in flight (rs_opts.early_steps) ---- */

int rs_cl_one_exchange(rs *r, const rs_cmd *cmds, size_t n)
{
    struct rs_cluster *cl = r->cl;
    /* not while slots move (a reshard, a failover): a trim or an ack
     * refused in flight is not sent again, as an exchange's would be */
    int *at, top = 0, ok = !cl->stale && wu_mono_ms() - cl->moved >= CL_CALM_MS;
    size_t i;
    for (i = 0; i < n && ok; i++) {
        ok = !cmds[i].oom && (cmds[i].group != 0 || cmds[i].wave == cmds[0].wave);
        if (cmds[i].group > top) top = cmds[i].group;
    }
    if (!ok || !(at = malloc(((size_t)top + 1) * sizeof *at))) return 0;
    for (i = 0; i <= (size_t)top; i++)
        at[i] = -1;
    for (i = 0; i < n && ok; i++) {
        int node = route(cl, &cmds[i]), g = cmds[i].group;
        ok = node >= 0 && (size_t)node < cl->nctx && cl->ctx[node];
        if (ok && g > 0) {
            if (at[g] < 0) at[g] = node;
            ok = at[g] == node;
        }
    }
    free(at);
    return ok;
}

int rs_cl_fly(rs *r, const rs_cmd *cmds, size_t n, rs_fly_at *at)
{
    struct rs_cluster *cl = r->cl;
    sigpipe_guard g;
    size_t i, j;
    int ok = 1;
    for (i = 0; i < n; i++) {
        at[i].node = route(cl, &cmds[i]);
        at[i].serial = at[i].node >= 0 ? cl->serial[at[i].node] : 0;
    }
    /* in order per node: a set's steps before its trim */
    for (i = 0; i < n && ok; i++)
        ok = rs_append_cmds(r, cl->ctx[at[i].node], &cmds[i], 1) == REDIS_OK;
    rs_sigpipe_block(r, &g);
    for (j = 0; j < cl->nctx && ok; j++)
        if (cl->ctx[j]) ok = rs_write_out(cl->ctx[j]);
    rs_sigpipe_restore(&g);
    if (!ok) rs_cl_drop(r);
    return ok ? 0 : -1;
}

void rs_cl_land(rs *r, const rs_fly_at *at, size_t n, redisReply **rep)
{
    struct rs_cluster *cl = r->cl;
    sigpipe_guard g;
    size_t i;
    rs_sigpipe_block(r, &g);
    for (i = 0; i < n; i++) {
        int k = at[i].node;
        void *x = NULL;
        rep[i] = NULL;
        /* a connection closed or opened again since: its replies are gone */
        if (k < 0 || (size_t)k >= cl->nctx || !cl->ctx[k] || cl->serial[k] != at[i].serial)
            continue;
        if (redisGetReply(cl->ctx[k], &x) != REDIS_OK) {
            node_close(cl, (size_t)k);
            cl->stale = 1;
            continue;
        }
        rep[i] = x;
        if (not_taken(x)) cl->moved = wu_mono_ms();
        if (is_reply(x, "MOVED") || is_reply(x, "ASK")) cl->stale = 1;
    }
    rs_sigpipe_restore(&g);
}

void rs_cl_scripts_load(rs *r)
{
    struct rs_cluster *cl = r->cl;
    rs_cmd c[S_COUNT];
    redisReply *x[S_COUNT];
    size_t j, n;
    memset(c, 0, sizeof c);
    n = load_cmds(r, (1u << S_COUNT) - 1, c);
    for (j = 0; j < cl->nctx; j++) {
        if (!cl->ctx[j]) continue;
        memset(x, 0, sizeof x);
        if (!rs_ctx_exchange(r, cl->ctx[j], c, n, x)) {
            node_close(cl, j);
            cl->stale = 1;
        }
        rs_replies_free(x, n);
    }
    rs_cmds_free(c, n);
}

/* ---- connections ---- */

void rs_cl_drop(rs *r)
{
    size_t i;
    for (i = 0; i < r->cl->nctx; i++)
        node_close(r->cl, i);
    r->cl->stale = 1;
}

/* No round trip: a node whose socket is readable between round trips
 * closed it; it is opened again when a command goes there. */
void rs_cl_revive(rs *r)
{
    struct rs_cluster *cl = r->cl;
    size_t i;
    for (i = 0; i < cl->nctx; i++) {
        struct pollfd p;
        if (!cl->ctx[i]) continue;
        p.fd = cl->ctx[i]->fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 0) > 0) {
            node_close(cl, i);
            cl->stale = 1;
        }
    }
}

void rs_cl_free(rs *r)
{
    if (!r->cl) return;
    rs_cl_drop(r);
    free(r->cl->serving);
    free(r->cl->serial);
    free(r->cl->ctx);
    rc_map_free(&r->cl->map);
    free(r->cl);
    r->cl = NULL;
}

/* cl->serving for the map as it is: 0, or -1 when out of memory. */
static int serving_fit(struct rs_cluster *cl)
{
    unsigned char *seen;
    size_t s;
    if (cl->serving_ok) return 0;
    free(cl->serving);
    cl->serving = NULL;
    cl->nserving = 0;
    if (!cl->map.nnodes) return -1;
    seen = calloc(cl->map.nnodes, 1);
    cl->serving = calloc(cl->map.nnodes, sizeof *cl->serving);
    if (!seen || !cl->serving) {
        free(seen);
        return -1;
    }
    for (s = 0; s < RC_SLOTS; s++) {
        int i = cl->map.slot[s];
        if (i >= 0 && (size_t)i < cl->map.nnodes) seen[i] = 1;
    }
    for (s = 0; s < cl->map.nnodes; s++)
        if (seen[s]) cl->serving[cl->nserving++] = (int)s;
    free(seen);
    cl->serving_ok = 1;
    return 0;
}

int rs_cl_home(rs *r)
{
    struct rs_cluster *cl = r->cl;
    if (!cl || cl->stale || serving_fit(cl) || cl->nserving < 2) return -1;
    return cl->serving[cl->turn++ / CL_HOME_ROUNDS % cl->nserving];
}

int rs_cl_node_of(const rs *r, const char *key)
{
    return r->cl ? r->cl->map.slot[rc_key_slot(key, strlen(key))] : -1;
}

int rs_cl_primaries(rs *r)
{
    if (!r->cl || serving_fit(r->cl) || !r->cl->nserving) return 1;
    return (int)r->cl->nserving;
}

/*
 * A weftd node: the daemon's threads. Workers claim tasks of the types
 * whose plugins this node loaded, run them, apply the results and decide;
 * they also take due executions off the decider queue (sweeping them:
 * outbox, lost queue entries, finished children, timers, timeouts). A
 * keeper thread renews the leases of running tasks, returns expired leases
 * to their queues and says the node is alive. Prefix nd_.
 */
#ifndef WEFT_NODE_H
#define WEFT_NODE_H

#include "base/config.h"

typedef struct nd_node nd_node;

/* Load plugins and the lock module, check the configuration. */
int nd_new(const cf_config *cfg, nd_node **out, weft_error *err);
void nd_free(nd_node *n);

/* Run until nd_stop; returns 0 after a clean stop. */
int nd_run(nd_node *n);

/* Ask the node to stop (async-signal-safe): stop claiming, let running
 * tasks finish within the grace period, leave the rest to lease expiry. */
void nd_stop(nd_node *n);

/* Change the log level ("error", "warn", "info" or "debug"; NULL: info) of a
 * running node. WEFT_EINVAL naming the value otherwise. */
int nd_set_level(nd_node *n, const char *name, weft_error *err);
/* The name of the node's log level. */
const char *nd_level_name(nd_node *n);

/* Structured log line on stderr: "ts=... level=info node=<id> msg=\"...\"". */
void nd_log(nd_node *n, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif

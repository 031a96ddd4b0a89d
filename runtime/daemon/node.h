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

/* Load plugins and the lock module, check the configuration; set the
 * process's log level (cfg->log_level) and lines to the daemon's format,
 * naming this node (base/log.h). */
int nd_new(const cf_config *cfg, nd_node **out, weft_error *err);
void nd_free(nd_node *n);

/* Run until nd_stop; returns 0 after a clean stop. */
int nd_run(nd_node *n);

/* Ask the node to stop (async-signal-safe): stop claiming, let running
 * tasks finish within the grace period, leave the rest to lease expiry. */
void nd_stop(nd_node *n);

#endif

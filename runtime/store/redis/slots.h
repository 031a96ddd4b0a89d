/*
 * Redis Cluster's slot map: which primary serves each of the 16384 slots
 * (base/keyslot.h says which slot a key is in), read from CLUSTER SLOTS.
 * Prefix rc_. No connections here: cluster.c routes with it.
 */
#ifndef WEFT_STORE_REDIS_SLOTS_H
#define WEFT_STORE_REDIS_SLOTS_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "weft/plugin.h"
#include "base/keyslot.h"

#define RC_HOST_MAX 256

/* A node of the map: where a range of slots is served (its primary). */
typedef struct rc_node {
    char host[RC_HOST_MAX];
    int port;
} rc_node;

/* Which node serves each slot (index into nodes; -1: none). */
typedef struct rc_map {
    rc_node *nodes;
    size_t nnodes;
    int16_t slot[RC_SLOTS];
} rc_map;

/* The map from a CLUSTER SLOTS reply: 0, or WEFT_EIO naming what was wrong
 * with the reply (a map is then empty). Replaces what m held. */
int rc_map_read(rc_map *m, const redisReply *x, weft_error *err);
/* The index of host (hlen bytes):port in m's nodes, added when new; -1 out
 * of memory or past the 32767 nodes a slot can name. */
int rc_map_node_at(rc_map *m, const char *host, size_t hlen, int port);
/* The node serving slot, or NULL. */
const rc_node *rc_map_node(const rc_map *m, int slot);
void rc_map_free(rc_map *m);

#endif

/*
 * Redis Cluster's key space: which of the 16384 slots a key is in (CRC16 of
 * the key, or of its hash tag, the part between the first '{' and the next
 * '}' when that part is not empty), and the map of slots to nodes read from
 * CLUSTER SLOTS. Prefix rc_. No connections here: conn.c routes with it.
 */
#ifndef WEFT_STORE_REDIS_SLOTS_H
#define WEFT_STORE_REDIS_SLOTS_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "weft/plugin.h"

#define RC_SLOTS 16384
#define RC_HOST_MAX 256

/* CRC16-CCITT (XMODEM), as Redis Cluster computes it. */
uint16_t rc_crc16(const char *buf, size_t len);

/* The slot of key (len bytes), hash tags honoured. */
int rc_key_slot(const char *key, size_t len);

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
/* The node serving slot, or NULL. */
const rc_node *rc_map_node(const rc_map *m, int slot);
void rc_map_free(rc_map *m);

#endif

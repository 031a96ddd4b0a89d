/*
 * slotcheck HOST PORT N: read CLUSTER SLOTS from a cluster node into an
 * rc_map (store/redis/slots.c), then for N keys of weft's shapes send
 * SET to the node the map names for the key's slot: every one must be
 * taken there (no MOVED), and CLUSTER KEYSLOT must agree with rc_key_slot.
 * Prints "ok <keys> keys on <nodes> primaries" and exits 0, or says what
 * disagreed and exits 1.
 *
 * slotcheck dq PARTS ID: prints the hash tag of the decider queue partition
 * of workflow ID when there are PARTS partitions (the tests' dq_key).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>

#include "store/redis/slots.h"

int main(int argc, char **argv)
{
    redisContext *seed, *nodes[64] = {0};
    redisReply *x;
    rc_map m;
    weft_error err = {0};
    int n, i, bad = 0;
    size_t k;
    if (argc == 4 && !strcmp(argv[1], "dq")) {
        char tag[RC_TAG_MAX];
        int parts = atoi(argv[2]);
        rc_part_tag("dq", rc_part_of(argv[3], parts), parts, tag);
        printf("%s\n", tag);
        return 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: slotcheck HOST PORT N\n");
        return 2;
    }
    n = atoi(argv[3]);
    seed = redisConnect(argv[1], atoi(argv[2]));
    if (!seed || seed->err) {
        fprintf(stderr, "slotcheck: cannot connect to %s:%s\n", argv[1], argv[2]);
        return 1;
    }
    memset(&m, 0, sizeof m);
    x = redisCommand(seed, "CLUSTER SLOTS");
    if (rc_map_read(&m, x, &err)) {
        fprintf(stderr, "slotcheck: %s\n", err.msg);
        return 1;
    }
    freeReplyObject(x);
    if (m.nnodes > sizeof nodes / sizeof nodes[0]) return 1;
    for (k = 0; k < m.nnodes; k++) {
        nodes[k] = redisConnect(m.nodes[k].host, m.nodes[k].port);
        if (!nodes[k] || nodes[k]->err) {
            fprintf(stderr, "slotcheck: cannot connect to %s:%d\n", m.nodes[k].host,
                    m.nodes[k].port);
            return 1;
        }
    }
    for (i = 0; i < n && bad < 5; i++) {
        char key[128];
        const rc_node *node;
        int slot;
        /* the shapes of weft's keys: an execution's, a queue's, plain */
        if (i % 3 == 0)
            snprintf(key, sizeof key, "t:{wf-%d}:ev", i);
        else if (i % 3 == 1)
            snprintf(key, sizeof key, "t:{q:TYPE%d}:ready", i);
        else
            snprintf(key, sizeof key, "plain-%d", i);
        slot = rc_key_slot(key, strlen(key));
        x = redisCommand(seed, "CLUSTER KEYSLOT %s", key);
        if (!x || x->type != REDIS_REPLY_INTEGER || x->integer != slot) {
            fprintf(stderr, "slotcheck: %s: slot %d here, %lld by CLUSTER KEYSLOT\n", key, slot,
                    x ? x->integer : -1);
            bad++;
        }
        freeReplyObject(x);
        if (!(node = rc_map_node(&m, slot))) {
            fprintf(stderr, "slotcheck: %s: slot %d has no node in the map\n", key, slot);
            bad++;
            continue;
        }
        x = redisCommand(nodes[node - m.nodes], "SET %s 1 PX 60000", key);
        if (!x || x->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "slotcheck: %s (slot %d) on %s:%d: %s\n", key, slot, node->host,
                    node->port, x ? x->str : "no reply");
            bad++;
        }
        freeReplyObject(x);
    }
    for (k = 0; k < m.nnodes; k++)
        redisFree(nodes[k]);
    redisFree(seed);
    if (!bad) printf("ok %d keys on %zu primaries\n", n, m.nnodes);
    rc_map_free(&m);
    return bad ? 1 : 0;
}
